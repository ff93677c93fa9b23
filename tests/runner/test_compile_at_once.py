"""`dlperf run --compile-at-once N` (runner/sweep.py's groups, measure/gate.py's lock): compiled cells on one
device compile side by side, each timed alone; an interrupt stops every child of the group."""

from __future__ import annotations

import json
import threading

import pytest

from conftest import FAST, cells, dlperf, require, rows
from dlperf.errors import StoreFault, UsageError
from dlperf.protocol import Cell
from dlperf.runner import sweep
from dlperf.runner.session import Session
from dlperf.runner.tasks import Task
from dlperf.spec import RunSpec
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.vocab import Status

A = Cell("tiny-fcn-r", "torch", "cpu", 1, "compile")
B = Cell("tiny-resnet-56", "torch", "cpu", 1, "bf16+compile")
C = Cell("tiny-lstm", "torch", "cpu", 1, "compile")
EAGER = Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32")
ELSEWHERE = Cell("tiny-resnet-56", "torch", "cuda:0", 1, "compile")


@pytest.mark.parametrize(
    ("cells", "at_once", "profile", "expected"),
    [
        ("ABC", 2, False, ["AB", "C"]),  # up to N
        ("ABC", 3, False, ["ABC"]),
        ("AEB", 3, False, ["AB", "E"]),  # a compiled cell takes the next ones along; the eager one runs after
        ("EAEBEC", 2, False, ["E", "AB", "E", "E", "C"]),  # `--modes fp32,compile`: every workload's eager cell
        ("AXB", 2, False, ["AB", "X"]),  # on one device
        ("XAB", 2, False, ["X", "AB"]),
        ("EA", 2, False, ["E", "A"]),  # an eager cell is timed alone, as always
        ("AB", 1, False, ["A", "B"]),  # the default: one at a time
        ("AB", 2, True, ["A", "B"]),  # a profiled run's profiles come between its cells
    ],
)
def test_a_compiled_cell_takes_the_next_compiled_cells_on_its_device_along(cells, at_once, profile, expected):
    named = {"A": A, "B": B, "C": C, "E": EAGER, "X": ELSEWHERE}
    spec = RunSpec(("tiny-fcn-r",), compile_at_once=at_once, profile=profile)
    tasks = [Task(named[c], r) for r, c in enumerate(cells)]  # repeats tell apart the same cell's processes
    found = sweep.groups(tasks, spec)
    assert ["".join(next(k for k, c in named.items() if c == t.cell) for t in g) for g in found] == expected
    assert sorted(t.repeat for g in found for t in g) == list(range(len(cells)))  # every task once


@pytest.mark.parametrize("n", [0, 17, 1.5, "2"])
def test_compile_at_once_is_a_whole_number_from_1_to_16(n):
    with pytest.raises(UsageError, match="--compile-at-once"):
        RunSpec(("tiny-fcn-r",), compile_at_once=n)


class Shown:
    """A progress display that keeps what it was told."""

    def __init__(self):
        self.said = []

    def __enter__(self):
        return self

    def __exit__(self, *exc): ...

    def start(self, i, task):
        self.said.append(("start", i, task.cell.key))

    def start_together(self, i, tasks):
        self.said.append(("together", i, [t.cell.key for t in tasks]))

    def refresh(self): ...

    def finish(self, i, task, m, figures):
        self.said.append(("finish", i, task.cell.key))


@pytest.fixture
def session(tmp_path):
    store = Store.open(tmp_path / "s.db", create=True)
    spec = RunSpec(("tiny-fcn-r",), threads=(1,), compile_at_once=2)
    made = Session.create(store, spec, {"cores": {"cores": 2}}, 2, ["dlperf", "run"])
    made.add([A, B, EAGER], {"batch": 4})
    yield made
    store.close()


def test_a_group_runs_at_once_each_child_given_the_lock_and_is_stored_in_order(session, monkeypatch):
    seen, both = {}, threading.Barrier(2, timeout=60)  # the two children of the group run at the same time

    def run_task(task, ctx, poll, group_of=None, k=0):
        if group_of is not None:
            both.wait()
            child = group_of.tasks[k]
            seen[task.cell.key] = (child.gate, child.gate_group, threading.current_thread() is threading.main_thread())
        return ProcessMeasurement(status=Status.OK, samples=[0.01] * 3, duration_s=1.0)

    monkeypatch.setattr(sweep, "run_task", run_task)
    shown = Shown()
    tasks = [Task(A, 0), Task(EAGER, 0), Task(B, 0)]  # the eager cell between them runs after the group
    assert session.measure(tasks, lambda total: shown) == ["ok"] * 3
    (gate_a, n_a, main_a), (gate_b, n_b, main_b) = seen[A.key], seen[B.key]
    assert gate_a == gate_b and gate_a.endswith("gate") and n_a == n_b == 2 and not (main_a or main_b)
    assert shown.said == [("together", 0, [A.key, B.key]), ("finish", 0, A.key), ("finish", 1, B.key),
                          ("start", 2, EAGER.key), ("finish", 2, EAGER.key)]  # fmt: skip
    assert [c.key for c in session.cells() if c.ok] == [A.key, B.key, EAGER.key]


def test_an_interrupt_stops_every_child_of_the_group(session, monkeypatch):
    told = []

    def run_task(task, ctx, poll, group_of=None, k=0):
        stop = group_of.watch(k, lambda new: None)
        for _ in range(600):  # as the launcher polls its child's watch until it says stop
            reason = stop([])
            if reason:
                told.append(reason)
                break
            threading.Event().wait(0.05)
        return ProcessMeasurement(status=Status.FAILED, samples=[], duration_s=1.0)

    class Interrupting(Shown):
        def refresh(self):
            raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_task", run_task)
    with pytest.raises(sweep.Interrupted):
        session.measure([Task(A, 0), Task(B, 0)], lambda total: Interrupting())
    assert told == [sweep.Together.STOPPED] * 2
    assert session.store.run(session.run_id).status == "interrupted"


def test_a_measurement_the_store_refuses_stops_the_groups_other_children(session, monkeypatch):
    told = []

    def run_task(task, ctx, poll, group_of=None, k=0):
        stop = group_of.watch(k, lambda new: None)
        for _ in range(0 if k == 0 else 600):  # the first ends at once, the second runs until told to stop
            if reason := stop([]):
                told.append(reason)
                break
            threading.Event().wait(0.05)
        return ProcessMeasurement(status=Status.OK, samples=[0.01] * 3, duration_s=1.0)

    def refused(ctx, task, m):
        raise StoreFault("the disk is full")

    monkeypatch.setattr(sweep, "run_task", run_task)
    monkeypatch.setattr(sweep, "store_or_keep", refused)
    with pytest.raises(StoreFault, match="disk is full"):
        session.measure([Task(A, 0), Task(B, 0)], lambda total: Shown())
    assert told == [sweep.Together.STOPPED]


def test_a_full_temporary_folder_stops_the_group_in_one_line_naming_the_cell(session, monkeypatch):
    """The group's lock file, or a cell's task written from the group's thread, refused for want of room: an OSError
    traceback; now the sweep's one line (`sweep.OutOfRoom`), naming the cell whose files could not be written."""
    import errno
    import tempfile

    from dlperf.runner import room

    def refused(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as full:
        full.setattr(tempfile, "TemporaryDirectory", refused)
        lock = (
            r"^tiny-fcn-r torch cpu:1 compile not measured: dlperf could not make the folder of cells "
            r"compiling at once \(the temporary folder .* is full: No space left on device\); every cell's"
        )
        with pytest.raises(sweep.OutOfRoom, match=lock):
            session.measure([Task(A, 0), Task(B, 0)], lambda total: Shown())

    said = room.NoRoom("the temporary folder '/t' is full", "free space there")

    def run_task(task, ctx, poll, group_of=None, k=0):
        if k == 1:
            raise room.Unwritten("write the task of a cell process", said)
        return ProcessMeasurement(status=Status.OK, samples=[0.01] * 3, duration_s=1.0)

    monkeypatch.setattr(sweep, "run_task", run_task)
    with pytest.raises(sweep.OutOfRoom, match=r"^tiny-resnet-56 torch cpu:1 bf16\+compile not measured: dlperf could "
                                              r"not write the task of a cell process \(the temporary folder '/t' is "
                                              r"full\); every cell's worker would fail alike, so the sweep stopped: "
                                              r"free space there, then `dlperf run --resume"):  # fmt: skip
        session.measure([Task(A, 0), Task(B, 0)], lambda total: Shown())


def intervals(detail: dict) -> dict[str, tuple[float, float]]:
    """A process's phases as wall-clock intervals, from its timeline and the moment it was started."""
    at = {name: detail["started_at"] + t for name, t in detail["timeline"]}
    last = max(at.values())
    return {
        "compiling": (at["compiling"], at["compiled"]),
        "timed": (at["gated"], at["sampled"]),
        "before": (at["affinity"], at["compiled"]),  # its import, build and compilation
        "after": (at.get("compile_end", at["sampled"]), last),  # its FLOP count and memory step
    }


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.slow
def test_compiled_cells_compile_side_by_side_and_each_is_timed_alone(tmp_path):
    """Two compiled cells of a run, `--compile-at-once 2`: both ok, their compilations overlap, and neither's
    warm-up and timed steps overlap anything the other did but wait."""
    require("torch")
    db = tmp_path / "d.db"
    proc = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", "--modes", "compile,bf16+compile",
                  "--compile-at-once", "2", "--no-loss-check", *FAST, db=db, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(c["status"] for c in cells(db)) == ["ok", "ok"]
    details = [json.loads(m["detail_json"]) for m in rows(db, "SELECT detail_json FROM measurements")]
    assert [d["settings"]["compiled_at_once"] for d in details] == [2, 2]
    one, other = (intervals(d) for d in details)
    assert overlap(one["compiling"], other["compiling"])
    for mine, theirs in ((one, other), (other, one)):
        assert not overlap(mine["timed"], theirs["before"]) and not overlap(mine["timed"], theirs["after"])
    assert all(d["phases"]["gate_s"] is not None for d in details)
