"""A NotImplementedError in a child is a mode, device or setting the cell does not support (`unsupported`, exit 0),
unless it is the user's model failing: their own `raise NotImplementedError("TODO")`, a module without `forward` (a
`foward` typo, which torch's Module answers so), or weights left on the meta device. Those were `unsupported`, exit
0: a CI check on the exit code passed a broken model. An operator the device lacks stays unsupported."""

from __future__ import annotations

import types

import pytest

from dlperf.protocol import Cell
from dlperf.worker.child import models_own

USER = {"source": "/home/me/mine.py:make"}


def task(mode="fp32", workload=USER):
    return types.SimpleNamespace(cell=Cell("mine", "torch", "cpu", 1, mode), workload=workload)


def raised_in(path, line: str = "raise NotImplementedError('TODO')") -> NotImplementedError:
    """A NotImplementedError whose innermost Python frame is `line` of the file at `path`, written there."""
    import importlib.util

    path.write_text(f"import torch\n\n\ndef f():\n    {line}\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.f()
    except NotImplementedError as exc:
        return exc
    raise AssertionError("not raised")


def test_the_users_own_raise_is_their_models_failure_in_every_mode(tmp_path):
    pytest.importorskip("torch")
    own = raised_in(tmp_path / "mine.py")
    assert models_own(own, task()) and models_own(own, task("bf16"))


def test_an_operator_the_user_calls_that_the_device_lacks_stays_unsupported(tmp_path):
    """A forward calling a CUDA-only kernel on the CPU (`torch._fused_dropout`): the traceback's last Python frame is
    the user's line calling it, no raise of theirs."""
    pytest.importorskip("torch")
    called = raised_in(tmp_path / "cudaonly.py", "return torch._fused_dropout(torch.zeros(2), 0.5)")
    assert not models_own(called, task())


def test_a_missing_forward_and_meta_weights_are_the_models_failure():
    torch = pytest.importorskip("torch")
    with pytest.raises(NotImplementedError) as typo:
        torch.nn.Module()(torch.zeros(1))  # no forward: the `foward` typo
    assert models_own(typo.value, task()) and models_own(typo.value, task("bf16"))
    with pytest.raises(NotImplementedError) as meta:
        torch.empty(2, device="meta").to("cpu")
    assert models_own(meta.value, task())
    import dlperf

    with pytest.raises(NotImplementedError) as ours:
        exec(compile("raise NotImplementedError('tp: no pairs')", dlperf.__file__, "exec"))
    assert not models_own(ours.value, task())  # dlperf's own refusal
    assert not models_own(typo.value, task(workload={"source": None, "name": "fcn-r"}))  # a built-in's: dlperf's
    assert not models_own(typo.value, types.SimpleNamespace(framework="torch"))  # a probe: no cell


def test_an_operator_given_the_models_integers_is_its_failure_not_a_mode_unsupported():
    """`F.softmax(token_ids)` in a forward, or a loss called (targets, outputs): torch's "not implemented for 'Long'"
    was `unsupported`, exit 0. No mode makes integers; a kernel a reduced precision lacks stays unsupported."""
    torch = pytest.importorskip("torch")
    with pytest.raises(NotImplementedError) as ids:
        torch.nn.functional.softmax(torch.tensor([1, 2]), dim=-1)
    assert models_own(ids.value, task()) and models_own(ids.value, task("bf16"))
    import dlperf

    scope = {}  # raised from a file that is not the user's (dlperf's), so that only the words decide
    for words in ("\"addmm_impl_cpu_\" not implemented for 'Half'", "\"addmm_cuda\" not implemented for 'Long'"):
        with pytest.raises(NotImplementedError) as lacked:
            exec(compile(f"raise NotImplementedError({words!r})", dlperf.__file__, "exec"), scope)
        on = "cuda" if "cuda" in words else "cpu"
        cell = types.SimpleNamespace(cell=Cell("mine", "torch", on, 1, "fp16"), workload=USER)
        assert not models_own(lacked.value, cell), words  # a precision, or a GPU, without the kernel


def torch_module_forward(self, *args):
    import torch

    return torch.nn.Module.forward(self, *args)


@pytest.mark.parametrize(
    ("methods", "said"),
    [
        ({"call": lambda self, x: x}, "rename Mine.call to forward"),  # Keras's habit
        ({"foward": lambda self, x: x}, "rename Mine.foward to forward"),  # a typo
        ({}, "define Mine.forward(self, ...)"),
        ({"forward": torch_module_forward}, "define Mine.forward(self, ...)"),  # assigned torch's own: not "rename"
    ],
)
def test_a_model_without_forward_names_the_method_it_has_instead(methods, said):
    torch = pytest.importorskip("torch")
    from dlperf.worker.child import no_forward

    model = type("Mine", (torch.nn.Module,), methods)()
    with pytest.raises(NotImplementedError) as missing:
        model(torch.zeros(1))
    assert no_forward(missing.value) == f"; torch calls a module's forward: {said}"
    assert no_forward(NotImplementedError("other")) == ""


def test_an_unsupported_call_in_a_users_model_names_the_line_that_made_it(tmp_path, monkeypatch):
    """A library's bare `raise NotImplementedError` called from the user's forward was "unsupported: not supported",
    naming nothing to look at; a built-in's reason stays dlperf's own words alone."""
    from dlperf.measure.timer import TimerConfig
    from dlperf.protocol import CellTask, Unsupported, first, read_events, write_task
    from dlperf.worker import child

    monkeypatch.setattr(child, "die_with_parent", lambda: None)
    monkeypatch.setattr(child, "own_temp", lambda folder: None)
    (mine := tmp_path / "net.py").write_text("import asyncio\n\n\ndef forward():\n"
                                             "    asyncio.AbstractEventLoop().run_forever()\n")  # fmt: skip
    scope = {}
    exec(compile(mine.read_text(), str(mine), "exec"), scope)

    def said(workload) -> str:
        write_task(CellTask(Cell("net", "torch", "cpu", 1, "fp32"), 0, workload, TimerConfig()), tmp_path / "t.json")
        (tmp_path / "e.jsonl").unlink(missing_ok=True)
        assert child.serve(["worker", str(tmp_path / "t.json"), str(tmp_path / "e.jsonl")],
                           lambda task, emit: scope["forward"]()) == 0  # fmt: skip
        return first(read_events(tmp_path / "e.jsonl"), Unsupported).reason

    assert said({"source": f"{mine}:make"}) == f"not supported (at {mine}:5, in forward)"
    assert said({"source": None, "name": "fcn-r"}) == "not supported"
