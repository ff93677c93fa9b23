"""--nvtx: NVTX ranges around a torch step's phases. This CPU-only torch has no NVTX, so the ranges are recorded by
stand-ins for torch.cuda.nvtx's push and pop: their order and balance is what an Nsight Systems capture would show."""

import json

import pytest

from conftest import FAST, cells, dlperf, require

torch = require("torch")

from dlperf.frameworks import build_step  # noqa: E402
from dlperf.frameworks.torch import backend as tb  # noqa: E402
from dlperf.frameworks.torch import nvtx  # noqa: E402
from dlperf.workloads.shi2016 import BUILTIN  # noqa: E402


@pytest.fixture
def recorded(monkeypatch):
    """NVTX made available, each push and pop recorded as ("push", label) / ("pop",)."""
    calls = []
    # as the real ones, each returns an int (the range's depth; -2 on an H200 with torch 2.11+cu130): a hook that
    # passes it on breaks the optimizer's step
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda label: calls.append(("push", label)) or -2)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: calls.append(("pop",)) or -2)
    return calls


def ranges(calls) -> list[str]:
    """The labels of the outermost ranges, in order, checking that every push is popped and none nest."""
    labels, depth = [], 0
    for call in calls:
        if call[0] == "push":
            assert depth == 0, calls
            labels.append(call[1])
        depth += 1 if call[0] == "push" else -1
        assert depth >= 0, calls
    assert depth == 0, calls
    return labels


@pytest.mark.parametrize("mode", ["fp32", "fp16"])
def test_the_phases_are_ranges_in_the_order_a_step_runs_them(recorded, mode):
    workload = BUILTIN["tiny-fcn-r"]
    step = tb.build(workload, "cpu", mode, nvtx=True)
    recorded.clear()  # the availability check's own range
    step.step()
    step.step()
    phases = ranges(recorded)
    one = phases[: len(phases) // 2]
    assert phases == one * 2
    assert one[:4] == ["optimizer", "forward", "loss", "backward"]  # zero_grad opens the step
    assert set(one[4:]) == {"optimizer"} and one[4:]
    assert step.settings()["nvtx"].startswith("on")


def test_off_nothing_is_wrapped(recorded):
    step = tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32")
    assert step.forward is step.model and "loss_fn" not in vars(step.optimizer)
    step.step()
    assert recorded == [] and "nvtx" not in step.settings()


def test_a_torch_without_nvtx_builds_the_plain_step_and_says_so():
    if nvtx.available() is None:
        pytest.skip("this torch has NVTX: the note is for a CPU-only build")
    step = tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32", nvtx=True)
    assert step.forward is step.model
    assert step.settings()["nvtx"].startswith("not emitted: this torch has no NVTX")


def test_a_backend_without_nvtx_gets_a_note():
    class Plain:
        @staticmethod
        def build(workload, device, mode):
            return (workload, device, mode)

    step, noted = build_step(Plain, "jax", "w", "cpu", "fp32", nvtx=True)
    assert step == ("w", "cpu", "fp32") and noted == {"nvtx": "not emitted: the jax backend has no NVTX ranges"}
    assert build_step(Plain, "jax", "w", "cpu", "fp32") == (("w", "cpu", "fp32"), {})


def test_run_nvtx_reaches_the_cell_and_is_recorded_in_its_settings(tmp_path):
    db = tmp_path / "d.db"
    proc = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", "--devices", "cpu", "--nvtx", *FAST, db=db,
                  timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (cell,) = cells(db)
    settings = json.loads(cell["extra_json"])["settings"]
    expected = "on" if nvtx.available() is None else "not emitted"
    assert settings["nvtx"].startswith(expected), settings
    assert "nvtx" not in cell["key"]


@pytest.mark.gpu  # a CUDA build has NVTX
def test_cuda_step_emits_real_ranges(monkeypatch):
    """The real NVTX calls, counted: every range pushed is popped. (range_push's return is no depth to check: with no
    tool attached it returns -2, seen on an H200 with torch 2.11+cu130.)"""
    depth = []
    push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda label: depth.append(label) or push(label))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: depth.pop() and pop())
    step = tb.build(BUILTIN["tiny-fcn-r"], "cuda:0", "fp32", nvtx=True)
    step.step()
    step.step()  # the optimizer's hooks ran (a hook returning range_push's int broke the step on a real GPU)
    step.sync()
    assert step.settings()["nvtx"].startswith("on")
    assert depth == []  # every range of the step was popped


def test_the_flag_travels_from_both_commands_to_the_tasks_and_stays_out_of_the_key():
    import argparse

    from dlperf.api import make_spec
    from dlperf.commands import profile, run
    from dlperf.protocol import Cell, CellTask, ProfileTask
    from dlperf.runner.profile import task_of

    for command, argv in ((run, ["--nvtx"]), (profile, ["tiny-fcn-r", "--nvtx"])):
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
        assert parser.parse_args(argv).nvtx and not parser.parse_args(argv[:-1]).nvtx
    spec = make_spec("tiny-fcn-r", threads="1", devices="cpu", profile=True, nvtx=True)
    cell = Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32")
    assert task_of(cell, {}, spec).nvtx and not task_of(cell, {}, make_spec("tiny-fcn-r", profile=True)).nvtx
    for task in (CellTask(cell, 0, {}, spec.timer, nvtx=True), ProfileTask(cell, {}, nvtx=True)):
        assert type(task).from_json(task.to_json()).nvtx
    assert "nvtx" not in cell.key
