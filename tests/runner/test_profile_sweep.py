"""A sweep with profiling on (`run --profile`): one profiled child per measured cell, after its timed processes, its
Profiled event stored as the cell's profile. The children are faked here: `launch` returns their events."""

import json
import sqlite3

import pytest

from conftest import FAST, dlperf, require, rows
from dlperf.protocol import Cell, Error, Profiled, ProfileTask, Unsupported
from dlperf.runner import launch as launcher
from dlperf.runner import sweep
from dlperf.runner.launch import ChildResult, Launched
from dlperf.runner.session import Session
from dlperf.spec import RunSpec
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell, ProfileOutcome
from dlperf.vocab import Status

CELL = Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32")
EVENT = Profiled(steps=3, step_s=0.03, categories={"host": 0.02, "matmul": 0.01}, ops_per_step=40, trace="/t.json.gz")


class Quiet:
    def start(self, i, task): ...

    def refresh(self): ...

    def finish(self, i, task, m, figures): ...

    def profiling(self, i, cell): ...

    def profiled(self, i, cell, row, own_item=False): ...


def sweep_with(tmp_path, monkeypatch, events, status="ok", repeats=2, timer=None, deadline=None, child=None):
    """Run a two-process sweep of CELL whose timed processes and profile child are faked; returns the store, the
    run and the tasks the profile child was given (its launch's keywords in `sweep_with.given_kw`)."""
    store = Store.open(tmp_path / "d.db", create=True)
    run_id = store.create_run({}, {}, {}, ["dlperf"], [PlannedCell(CELL, {"batch": 4})])
    spec = RunSpec(("tiny-fcn-r",), repeats=repeats, profile=True, profile_steps=3, trace_dir=str(tmp_path / "tr"),
                   **({"timer": timer} if timer else {}))  # fmt: skip
    ctx = Session(store, run_id, spec, {CELL.key: {"batch": 4}}, cores=2)
    ctx.deadline = deadline
    error = None if status == "ok" else "boom"
    measured = ProcessMeasurement(status=Status(status), error=error,
                                  samples=[0.02, 0.02, 0.02] if status == "ok" else [], duration_s=1.0)  # fmt: skip
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, poll: measured)
    given = []

    def fake_launch(task, python, threads, timeout, **kw):
        given.append(task)
        sweep_with.given_kw = kw
        return Launched(child or ChildResult(0, False, 2.5, ""), {0: events}, "")

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


@pytest.mark.parametrize(("event", "started", "why"), [(EVENT, "warm", None), (EVENT, "cold", "the first of its kind"),
                                                     (Error("RuntimeError: x"), "cold", "no warm parent")])  # fmt: skip
def test_a_profile_keeps_how_its_process_started_as_a_cells_process_does(tmp_path, monkeypatch, event, started, why):
    child = ChildResult(0, False, 2.5, "", started=started, cold_because=why)
    store, run_id, _ = sweep_with(tmp_path, monkeypatch, [event], repeats=1, child=child)
    profile = store.profiles(run_id)[CELL.key]
    assert (profile.started, profile.cold_because) == (started, why)
    assert profile.ok is (event is EVENT)


def test_the_profiled_steps_are_fewer_when_the_timed_median_says_they_would_not_fit_max_time(tmp_path, monkeypatch):
    """Issue 31: `dlperf profile --max-time 10` of a 31 s step ran 5 warm-up and 5 profiled steps, 5 min, whatever
    --max-time said. The profile child's steps now fit the timer's max_time at the timed median (0.02 s here), at
    least one of each, and the profile says how many it took and why."""
    from dlperf.measure.timer import TimerConfig

    fits = TimerConfig(min_time=0.0, max_time=0.1)  # 5 steps of 0.02 s: 3 profiled, then 2 warm-up (of 5)
    store, run_id, given = sweep_with(tmp_path, monkeypatch, [EVENT], repeats=1, timer=fits)
    assert (given[0].warmup, given[0].steps) == (2, 3)
    assert any("3 profiled steps after 2 warm-up, not --steps 3 after 5" in n
               for n in store.profiles(run_id)[CELL.key].figures.notes)  # fmt: skip
    tight = TimerConfig(min_time=0.0, max_time=0.01)  # not one step fits: one of each
    (tmp_path / "b").mkdir()
    _, _, given = sweep_with(tmp_path / "b", monkeypatch, [EVENT], repeats=1, timer=tight)
    assert (given[0].warmup, given[0].steps) == (1, 1)


def test_past_a_searchs_deadline_no_child_starts_and_the_one_under_way_is_stopped_saying_why(tmp_path, monkeypatch):
    """`optimize --budget` (issue 31): the session's deadline stops a child still running when it comes, a cell's
    or a profile's (their launch's watch says so), and starts no other."""
    import time

    from dlperf.runner.sweep import Deadline
    from dlperf.runner.tasks import Task

    run_task = sweep.run_task  # the real one: sweep_with fakes it
    sweep_with(tmp_path, monkeypatch, [EVENT], repeats=1, deadline=time.monotonic() + 60)
    profile_watch = sweep_with.given_kw["watch"]
    store = Store.open(tmp_path / "d.db", create=False)
    ctx = Session(store, store.runs()[-1].id, RunSpec(("tiny-fcn-r",)), {CELL.key: {"batch": 4}}, 2,
                  deadline=time.monotonic() + 60)  # fmt: skip
    seen = {}
    monkeypatch.setattr(sweep, "launch", lambda task, *a, **kw: seen.update(kw) or Launched(
        ChildResult(0, False, 1.0, ""), {0: []}, ""))  # fmt: skip
    run_task(Task(CELL, 1), ctx, lambda: None)
    assert seen["watch"]([]) is None and profile_watch([]) is None  # before the deadline
    monkeypatch.setattr(time, "monotonic", lambda: 1e12)
    assert seen["watch"]([]) == profile_watch([]) == Deadline.REASON  # once it has come
    (tmp_path / "late").mkdir()
    store, run_id, given = sweep_with(tmp_path / "late", monkeypatch, [EVENT], deadline=1e11)
    assert given == [] and store.cells(run_id)[0].status == "pending" and store.measurements(run_id, CELL.key) == []


def test_a_profile_suspended_while_it_ran_is_taken_again_and_says_so(tmp_path, monkeypatch):
    """Ctrl-Z while the profile child ran: the pause is in its profiled steps' wall time (put down to the host, or
    the device's idle time) and in its trace, so it is profiled again, as a timed process is measured again, and the
    suspended one's trace is removed."""
    from dlperf.runner import lifeline
    from dlperf.runner import profile as profiling

    paused = {"n": 0, "s": 0.0}
    monkeypatch.setattr(lifeline, "paused", lambda: (paused["n"], paused["s"]))
    traces = []

    def fake_launch(task, python, threads, timeout, **kw):
        traces.append(tmp_path / f"trace{len(traces)}.json.gz")
        traces[-1].write_bytes(b"trace")
        if len(traces) == 1:  # Ctrl-Z, then fg, while the first ran
            paused["n"], paused["s"] = 1, 4.0
        event = Profiled(steps=3, step_s=4.03 if len(traces) == 1 else 0.03, categories={"host": 0.03},
                         trace=str(traces[-1]))  # fmt: skip
        return Launched(ChildResult(0, False, 2.5, ""), {0: [event]}, "")

    monkeypatch.setattr(launcher, "launch", fake_launch)
    spec = RunSpec(("tiny-fcn-r",), profile=True, profile_steps=3, trace_dir=str(tmp_path / "tr"))
    row = profiling.profile(CELL, {"batch": 4}, spec, "python")
    assert len(traces) == 2 and not traces[0].exists() and traces[1].exists()
    assert row.profiled.step_s == 0.03 and row.profiled.trace == str(traces[1])
    assert "profiled again: 1 process suspended (Ctrl-Z) for 4.0 s while it ran was left out" in row.profiled.notes


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


OTHER = Cell("tiny-fcn-r", "torch", "cpu", 2, "fp32")


def test_resume_profiles_the_measured_cells_an_interrupt_left_unprofiled_and_only_those(tmp_path, monkeypatch):
    """Interrupted between a cell's last timed process and its profile: the cell is measured and has no profile row.
    --resume profiles it (an item of the progress display of its own), not a cell that has a profile, even one that
    could not be taken, nor a cell with processes left (profiled after its last one, as in any run)."""
    store = Store.open(tmp_path / "d.db", create=True)
    third = Cell("tiny-fcn-r", "torch", "cpu", 3, "fp32")
    run_id = store.create_run({}, {}, {}, ["dlperf"], [PlannedCell(c, {"batch": 4}) for c in (CELL, OTHER, third)])
    measured = ProcessMeasurement(status=Status.OK, samples=[0.02, 0.02], duration_s=1.0)
    for cell in (CELL, OTHER, third):
        store.record(run_id, cell.key, 0, measured, CellFigures(status=Status.OK, median_s=0.02))
    store.record_profile(run_id, OTHER.key, ProfileOutcome(Status.FAILED, "boom"))
    spec = RunSpec(("tiny-fcn-r",), repeats=2, profile=True, profile_steps=3, trace_dir=str(tmp_path / "tr"))
    ctx = Session(store, run_id, spec, {c.key: {"batch": 4} for c in (CELL, OTHER, third)}, cores=2)
    left = [t for t in sweep.remaining([CELL, OTHER, third], 2, {(CELL.key, 0), (CELL.key, 1), (OTHER.key, 0),
                                                                 (OTHER.key, 1), (third.key, 0)})]  # fmt: skip
    assert [t.cell for t in left] == [third]
    assert sweep.unprofiled(ctx, left) == [CELL]
    assert sweep.unprofiled(Session(store, run_id, RunSpec(("tiny-fcn-r",)), {}, 2), left) == []

    given, said = [], []
    monkeypatch.setattr(launcher, "launch", lambda task, *a, **kw: given.append(task) or Launched(
        ChildResult(0, False, 2.5, ""), {0: [EVENT]}, ""))  # fmt: skip
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, poll: measured)

    class Told(Quiet):
        def profiling(self, i, cell):
            said.append((i, cell.key))

        def profiled(self, i, cell, row, own_item=False):
            said.append((i, cell.key, row.status, own_item))

    sweep.execute(ctx, left, Told(), to_profile=sweep.unprofiled(ctx, left))
    assert [t.cell for t in given] == [CELL, third]
    assert said == [(0, CELL.key), (0, CELL.key, "ok", True), (1, third.key), (1, third.key, "ok", False)]
    profiles = store.profiles(run_id)
    assert profiles[CELL.key].ok and profiles[OTHER.key].status == "failed"


@pytest.mark.slow  # three runs of dlperf and four children: 15-40 s on 2 shared cores; the test above is the fast one
def test_resume_of_a_profiled_run_interrupted_before_a_profile_takes_it_through_the_command_line(tmp_path):
    """The state an interrupt leaves between a cell's timed process and its profile, made from a real profiled run:
    its profile row removed and the run marked interrupted. --resume profiles the cell in a real child, times
    nothing again, and a second --resume, with the profile stored, profiles nothing."""
    require("torch")
    db = tmp_path / "d.db"
    done = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", "--no-loss-check", "--profile", *FAST, db=db,
                  timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    measured = rows(db, "SELECT * FROM measurements")
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM profiles")
        conn.execute("UPDATE runs SET status = 'interrupted'")
    conn.close()

    resumed = dlperf("run", "--resume", db=db, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert "[2/2] profiling tiny-fcn-r torch cpu:1 fp32 ..." in resumed.stderr  # numbered on from its measured cell
    [profile] = rows(db, "SELECT * FROM profiles")
    assert profile["status"] == "ok" and profile["trace"] and rows(db, "SELECT * FROM measurements") == measured
    assert [r["status"] for r in rows(db, "SELECT status FROM runs")] == ["complete"]

    sqlite3.connect(db).execute("UPDATE runs SET status = 'interrupted'").connection.commit()
    again = dlperf("run", "--resume", db=db, timeout=120)
    assert again.returncode == 0 and "profiling" not in again.stderr, again.stderr
    assert rows(db, "SELECT * FROM profiles") == [profile]


@pytest.mark.parametrize(
    "argv", [["profile", "tiny-fcn-r", "--format", "json"], ["--db", "d.db", "profile", "tiny-fcn-r", "--format=json"]]
)
def test_a_resumed_profile_answers_in_the_format_its_command_asked_for(tmp_path, capsys, argv):
    """`dlperf profile --format json` interrupted, then `dlperf run --resume` (the command its interrupt prints): the
    profiles came as text, where a script reading stdout had asked for JSON; the store put first (`dlperf --db X
    profile`) showed the run's table, not its profiles."""
    from dlperf.commands import run

    store = Store.open(tmp_path / "d.db", create=True)
    run_id = store.create_run({}, {}, {}, ["dlperf", *argv], [PlannedCell(CELL, {"batch": 4})])
    store.record(run_id, CELL.key, 0, ProcessMeasurement(status=Status.OK, samples=[0.03] * 3, duration_s=1.0),
                 CellFigures(status=Status.OK, median_s=0.03))  # fmt: skip
    store.record_profile(run_id, CELL.key, ProfileOutcome(Status.OK, profiled=EVENT))
    store.close()
    assert run.show_finished(str(tmp_path / "d.db"), run_id, True, 0) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["run_id"] == run_id and [c["key"] for c in said["cells"]] == [CELL.key]
    assert run.stored_command(["train.py", "--db"]) == (None, "text")  # a Python caller's sys.argv, stored by api.run
