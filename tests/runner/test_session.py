"""The run being measured (`Session`: its cells added with their workloads, measured through the sweep, read back)
and a search's time (`Budget`: its clock, and the cost of its next processes from the session's own)."""

import time
from types import SimpleNamespace

import pytest

from dlperf.protocol import Cell
from dlperf.runner import session as sessions
from dlperf.runner import sweep
from dlperf.runner.session import Budget, Session
from dlperf.runner.tasks import Task
from dlperf.spec import RunSpec
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.vocab import Status
from test_optimize import _Quiet

CELL = Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32")
COMPILED = Cell("tiny-fcn-r", "torch", "cpu", 1, "compile")


def quiet(total):
    """A progress display's factory: nothing shown."""
    return _Quiet()


def measured(seconds):
    return ProcessMeasurement(status=Status.OK, samples=[0.01, 0.01, 0.01], duration_s=seconds)


@pytest.fixture
def session(tmp_path):
    store = Store.open(tmp_path / "s.db", create=True)
    spec = RunSpec(("tiny-fcn-r",), threads=(1,), compile_timeout=600.0)
    yield Session.create(store, spec, {"cores": {"cores": 2}}, 2, ["dlperf", "optimize"])
    store.close()


def test_cells_added_are_measured_with_their_workload_and_a_compile_timeout_of_their_own(session, monkeypatch):
    seen = []

    def run_task(task, ctx, poll):
        seen.append((task.cell.mode, ctx.workloads[task.cell.key]["batch"], ctx.spec.compile_timeout))
        return measured(3.0 if task.cell.mode == "compile" else 1.0)

    monkeypatch.setattr(sweep, "run_task", run_task)
    session.add([CELL], {"batch": 4})
    session.add([COMPILED], {"batch": 8})
    assert session.measure([Task(CELL, 0)], quiet, last=False) == ["ok"]
    session.measure([Task(COMPILED, 0)], quiet, last=False, compile_timeout=42.0)
    assert seen == [("fp32", 4, 600.0), ("compile", 8, 42.0)]
    assert session.spec.compile_timeout == 600.0  # the search's own timeout was a view's, not the session's
    assert [c.key for c in session.cells()] == [CELL.key, COMPILED.key] and session.cell(CELL.key).ok
    assert session.durations() == {CELL.key: [1.0], COMPILED.key: [3.0]}
    assert session.store.run(session.run_id).status == "running"
    assert session.measure([], quiet, last=False) == []  # nothing to run: the run stays open
    session.measure([], quiet)  # the last call completes it
    assert session.store.run(session.run_id).status == "complete"


def test_the_budget_counts_from_when_the_search_began_and_estimates_from_the_sessions_processes(session, monkeypatch):
    budget = Budget(100.0, session, started=time.monotonic() - 30)
    assert 69 < budget.left() <= 70 and 30 <= budget.spent() < 31
    assert budget.covers(60.0) and not budget.covers(80.0)
    assert budget.per_process() == sessions.FIRST_PROCESS_S  # nothing measured yet
    monkeypatch.setattr(
        sweep, "run_task", lambda task, ctx, poll: measured(3.0 if "compile" in task.cell.mode else 1.0)
    )
    session.add([CELL, COMPILED], {"batch": 4})
    session.measure([Task(CELL, 0), Task(CELL, 1), Task(COMPILED, 0)], quiet, last=False)
    assert budget.per_process() == 1.0
    assert budget.modes_s(["bf16", "bf16+compile"], 2) == 1.0 + 2 * 1.0 + 2 * 3.0  # the baseline's extra process first


def test_a_fake_session_is_enough_for_the_clock():
    budget = Budget(10.0, SimpleNamespace(), started=time.monotonic())
    assert budget.covers(5.0) and not budget.covers(11.0)


def test_a_run_keeps_the_command_that_made_it_whatever_argv_a_calling_script_had(tmp_path):
    """`dlperf.fit(...)` from `python bench.py` stores bench.py's argv: `--resume` must still know a fit's run."""
    from dlperf.api import searched_by

    store = Store.open(tmp_path / "m.db", create=True)
    spec = RunSpec(("tiny-fcn-r",), threads=(1,))
    try:
        fit = Session.create(store, spec, {"cores": {"cores": 2}}, 2, ["bench.py"], made_by="fit")
        run = Session.create(store, spec, {"cores": {"cores": 2}}, 2, ["bench.py", "fit"])
        assert store.run(fit.run_id).env["made_by"] == "fit" and searched_by(store, store.run(fit.run_id)) == "fit"
        assert store.run(run.run_id).env["made_by"] == "run" and searched_by(store, store.run(run.run_id)) is None
    finally:
        store.close()


def test_what_is_left_leaves_out_a_process_kept_beside_a_store_that_refused_it(session):
    """`run --resume --dry-run` counted a process kept beside the store (`store/spill.py`) as left to measure, and
    estimated its time, though --resume stores it without measuring it again."""
    from dlperf.store import spill

    other = Cell("tiny-fcn-r", "torch", "cpu", 2, "fp32")
    session.add([CELL, other], {"batch": 8})
    assert [t.cell for t in session.remaining()] == [CELL, other]
    spill.keep(session.store.path, session.run_id, other.key, 0, measured(1.0), run=session.store.mark(session.run_id))
    assert [t.cell for t in session.remaining()] == [CELL]
    assert session.take_up_kept() == 1 and [t.cell for t in session.remaining()] == [CELL]


def test_an_interrupt_while_a_finished_process_is_stored_comes_once_it_is_stored(session, monkeypatch):
    """Ctrl-C raised inside the store's transaction rolled it back: a process that had finished (after minutes,
    perhaps) was not stored, and --resume measured it again. The interrupt now waits for the store (milliseconds)."""
    import os
    import signal

    session.add([CELL], {"batch": 8})
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, refresh, *rest: measured(1.0))
    monkeypatch.setattr(sweep, "warm_up", lambda *args: None)
    real = session.store.record

    def record(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the measurement's transaction begins
        return real(*args, **kwargs)

    monkeypatch.setattr(session.store, "record", record)
    with pytest.raises(sweep.Interrupted):
        session.measure(session.remaining(), quiet)
    assert session.store.done_repeats(session.run_id) == {(CELL.key, 0)}
    assert session.store.run(session.run_id).status == "interrupted"


def test_a_process_stored_as_an_interrupt_came_has_its_line_said_before_the_sweep_ends(session, monkeypatch):
    """The interrupt postponed while a finished process was stored came before its progress line: the run stored the
    cell, but its last line ended at `[2/4] cell ...` then `interrupted`, as if the cell had been cut off."""
    import os
    import signal

    session.add([CELL], {"batch": 8})
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, refresh, *rest: measured(1.0))
    monkeypatch.setattr(sweep, "warm_up", lambda *args: None)
    real, said = session.store.record, []

    def record(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the measurement's transaction begins
        return real(*args, **kwargs)

    class Said(_Quiet):
        def finish(self, i, task, m, figures):
            said.append((task.cell.key, figures.status))

    monkeypatch.setattr(session.store, "record", record)
    with pytest.raises(sweep.Interrupted):
        session.measure(session.remaining(), lambda total: Said())
    assert said == [(CELL.key, Status.OK)]
    assert session.store.done_repeats(session.run_id) == {(CELL.key, 0)}


def test_the_progress_display_is_told_the_tasks_ahead_and_one_without_the_call_is_still_shown(session, monkeypatch):
    """The display's time left leaves out the cells known unsupported still to come (`Progress.ahead`); an API
    caller's own display, which lacks the call, is shown as before."""
    from dataclasses import replace

    session.add([CELL], {"batch": 8})
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, refresh, *rest: measured(1.0))
    monkeypatch.setattr(sweep, "warm_up", lambda *args: None)
    told = []

    class Told(_Quiet):
        def ahead(self, tasks):
            told.append([t.unsupported for t in tasks])

    tasks = [Task(CELL, 0), replace(Task(CELL, 1), unsupported="no such mode")]
    session.measure(tasks, lambda total: Told(), last=False)
    assert told == [[None, "no such mode"]]
    assert session.measure([Task(CELL, 2)], quiet) == [Status.OK]


def test_an_interrupt_while_the_store_refuses_a_process_ends_the_sweep_with_the_fault_and_is_not_dropped(
    session, monkeypatch
):
    """Ctrl-C postponed while a finished process was stored was dropped when storing raised: the fault ended the
    sweep, but the interrupt was never handled, so one more Ctrl-C cut the command's cleanup short. The fault's line
    (where the measurement is kept) ends the sweep, the interrupt handled with it."""
    import os
    import signal

    from dlperf.errors import StoreFault
    from dlperf.runner import lifeline

    session.add([CELL], {"batch": 8})
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, refresh, *rest: measured(1.0))
    monkeypatch.setattr(sweep, "warm_up", lambda *args: None)

    def record(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the measurement's transaction begins; then the disk is full
        raise StoreFault("the store's disk is full")

    monkeypatch.setattr(session.store, "record", record)
    # the CLI's block, once interrupted, leaves its handlers set (its process ends): put back after
    previous = {sig: signal.getsignal(sig) for sig in (*lifeline.INTERRUPTS, signal.SIGTSTP)}
    with lifeline.sigterm_as_interrupt(to_the_end=True):  # the CLI's
        with pytest.raises(StoreFault, match=r"kept in .*unsaved\.jsonl.*--resume"):
            session.measure(session.remaining(), quiet)
        assert lifeline._interrupted == signal.SIGINT
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C during the cleanup: dropped, as for any interrupt
    assert lifeline._deferred is None and lifeline._holding == 0
    monkeypatch.setattr(lifeline, "_interrupted", None)  # the CLI's process would end here
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def test_a_kept_measurement_does_not_overwrite_the_process_measured_again_meanwhile(session, monkeypatch):
    """A line kept beside a refusing store was stored on --resume with INSERT OR REPLACE: where the process had been
    measured again meanwhile (a --resume that did not see the file), the older kept line overwrote the newer."""
    from dlperf.store import spill

    session.add([CELL], {"batch": 8})
    mark = session.store.mark(session.run_id)
    spill.keep(session.store.path, session.run_id, CELL.key, 0, measured(9.0), run=mark)  # the older, kept
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, refresh, *rest: measured(1.0))
    monkeypatch.setattr(sweep, "warm_up", lambda *args: None)
    session.measure([Task(CELL, 0)], quiet, last=False)  # measured again, by a --resume not seeing the line
    assert session.take_up_kept() == 0
    assert session.durations() == {CELL.key: [1.0]} and not spill.holding(session.store.path, session.run_id)
