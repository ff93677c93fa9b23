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
