"""A sweep with profiling on (`run --profile`): one profiled child per measured cell, after its timed processes, its
Profiled event stored as the cell's profile. The children are faked here: `launch` returns their events."""

import pytest

from dlperf.protocol import Cell, Error, Profiled, ProfileTask, Unsupported
from dlperf.runner import launch as launcher
from dlperf.runner import sweep
from dlperf.runner.launch import ChildResult, Launched
from dlperf.spec import RunSpec
from dlperf.store import Store

CELL = Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32")
EVENT = Profiled(steps=3, step_s=0.03, categories={"host": 0.02, "matmul": 0.01}, ops_per_step=40, trace="/t.json.gz")


class Quiet:
    def start(self, i, task): ...

    def refresh(self): ...

    def finish(self, i, task, m, figures): ...


def sweep_with(tmp_path, monkeypatch, events, status="ok", repeats=2):
    """Run a two-process sweep of CELL whose timed processes and profile child are faked; returns the store, the
    run and the tasks the profile child was given."""
    store = Store.open(tmp_path / "d.db", create=True)
    run_id = store.create_run({}, {}, {}, ["dlperf"], [{"key": CELL.key, **CELL.to_json(),
                                                         "workload_json": {"batch": 4}}])  # fmt: skip
    spec = RunSpec(("tiny-fcn-r",), repeats=repeats, profile=True, profile_steps=3, trace_dir=str(tmp_path / "tr"))
    ctx = sweep.SweepContext(store, run_id, spec, {CELL.key: {"batch": 4}}, cores=2)
    error = None if status == "ok" else "boom"
    measured = {"status": status, "error": error, "samples": [0.02, 0.02, 0.02] if status == "ok" else [],
                "detail": {}, "duration_s": 1.0}  # fmt: skip
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, poll: measured)
    given = []

    def fake_launch(task, python, threads, timeout, **kw):
        given.append(task)
        return Launched(ChildResult(0, False, 2.5, ""), {0: events}, "")

    monkeypatch.setattr(launcher, "launch", fake_launch)
    sweep.execute(ctx, sweep.remaining([CELL], repeats, set()), Quiet())
    return store, run_id, given


def test_a_measured_cell_is_profiled_once_after_its_timed_processes(tmp_path, monkeypatch):
    store, run_id, given = sweep_with(tmp_path, monkeypatch, [EVENT])
    assert [type(t) for t in given] == [ProfileTask] and given[0].steps == 3
    assert given[0].trace_dir == str(tmp_path / "tr") and (tmp_path / "tr").is_dir()
    profile = store.profiles(run_id)[CELL.key]
    assert profile.ok and profile.figures.categories == EVENT.categories and profile.figures.ops_per_step == 40
    assert profile.duration_s == 2.5 and abs(profile.overhead - 1.5) < 1e-9  # 0.03 profiled / 0.02 timed


CANNOT = [(Unsupported("no profiler for this mode"), "unsupported", "no profiler for this mode"),
          (Error("RuntimeError: x"), "failed", "RuntimeError: x")]  # fmt: skip


@pytest.mark.parametrize(("event", "status", "reason"), CANNOT)
def test_a_profile_that_cannot_be_taken_is_stored_with_its_reason(tmp_path, monkeypatch, event, status, reason):
    store, run_id, _ = sweep_with(tmp_path, monkeypatch, [event], repeats=1)
    profile = store.profiles(run_id)[CELL.key]
    assert (profile.status, profile.error, profile.figures) == (status, reason, None)
    assert store.cells(run_id)[0].status == "ok"  # the cell's timing stands


def test_a_cell_that_failed_is_not_profiled(tmp_path, monkeypatch):
    store, run_id, given = sweep_with(tmp_path, monkeypatch, [EVENT], status="failed", repeats=1)
    assert given == [] and store.profiles(run_id) == {}
