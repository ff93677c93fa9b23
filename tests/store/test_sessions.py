"""A run's sessions (schema version 12, `measurements.session`): after Ctrl-C and `--resume`, `dlperf list --runs` and
the table showed `complete` and the original command, and nothing said the cells were measured by two commands,
perhaps hours apart (a row's thread counts, even one cell's processes, across the gap)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import dlperf, old_store
from dlperf.errors import StoreFault
from dlperf.runner import sweep
from dlperf.runner.session import Session
from dlperf.runner.tasks import Task
from dlperf.spec import RunSpec
from dlperf.store import Store, spill
from dlperf.store.process import ProcessMeasurement
from dlperf.store.state import run_state
from dlperf.vocab import Status
from report.runs import MACHINE, cell, measured

PLAN = [cell("fcn-r", threads=1), cell("fcn-r", threads=2)]
SPEC = RunSpec(("fcn-r",))


def process(store: Store, run_id: int, c, repeat: int) -> None:
    m = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=1.0)
    store.record(run_id, c.cell.key, repeat, m, measured([[0.01] * 5]))


def interrupted_then_resumed(db) -> None:
    """cpu:1's first process in the first session; cpu:2, and cpu:1's second process, after --resume took it up."""
    store = Store.open(db, create=True)
    run_id = store.create_run({"repeats": 2}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], PLAN)
    process(store, run_id, PLAN[0], 0)
    store.set_run_status(run_id, "interrupted")
    store.close()
    store = Store.open(db, create=False)
    store.acquire(run_id)  # what --resume does
    store.set_run_status(run_id, "running")
    for c, repeat in ((PLAN[1], 0), (PLAN[0], 1), (PLAN[1], 1)):
        process(store, run_id, c, repeat)
    store.set_run_status(run_id, "complete")
    store.close()


def test_a_resumed_run_says_it_was_measured_in_two_sessions_and_which_cell_spans_them(tmp_path):
    db = tmp_path / "t.db"
    interrupted_then_resumed(db)
    store = Store.open(db, create=False)
    try:
        sessions = run_state(store, store.run(1)).sessions
    finally:
        store.close()
    assert (sessions.count, sessions.spanning) == (2, [PLAN[0].cell.key])
    said = " ".join(dlperf("table", db=db).stdout.split())
    assert "run 1 was measured in 2 sessions (resumed after it stopped)" in said
    assert "the processes of fcn-r torch cpu:1 span sessions" in said and "cpu:2 span" not in said
    listed = " ".join(dlperf("list", "--runs", db=db, env={"COLUMNS": "200"}).stdout.split())
    assert "complete, measured in 2 sessions" in listed


def test_a_run_of_one_session_says_nothing_of_sessions(tmp_path):
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    run_id = store.create_run({"repeats": 2}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], PLAN)
    for repeat in (0, 1):
        for c in PLAN:
            process(store, run_id, c, repeat)
    store.set_run_status(run_id, "complete")
    store.close()
    assert "session" not in dlperf("table", db=db).stdout
    [row] = json.loads(dlperf("list", "--runs", "--format", "json", db=db).stdout)
    assert row["sessions"] == 1


def test_an_older_file_cannot_tell_then_counts_its_old_processes_as_one_session(tmp_path):
    """A v11 file's processes have no session: unknown, never "one session"; resumed after the upgrade, its old
    processes are one session and the resume's another."""
    db = tmp_path / "old.db"
    conn = old_store(db, 11)
    conn.commit()
    conn.close()
    old = Store(sqlite3.connect(db), str(db))
    old.conn.row_factory = sqlite3.Row
    old.version = 11
    run_id = old.create_run({}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], PLAN)
    process(old, run_id, PLAN[0], 0)
    old.set_run_status(run_id, "interrupted")
    old.close()
    store = Store.open(db, create=False)  # upgraded
    try:
        assert run_state(store, store.run(run_id)).sessions is None
        store.acquire(run_id)
        process(store, run_id, PLAN[1], 0)
        assert run_state(store, store.run(run_id)).sessions.count == 2
    finally:
        store.close()


def test_merge_keeps_the_sessions(tmp_path):
    db, target = tmp_path / "t.db", tmp_path / "m.db"
    interrupted_then_resumed(db)
    assert dlperf("merge", str(db), db=target).returncode == 0
    store = Store.open(target, create=False)
    try:
        assert run_state(store, store.run(1)).sessions.count == 2
    finally:
        store.close()


def refused_after(db, monkeypatch, stored: int) -> int:
    """A run of `PLAN` whose first `stored` cells' processes are stored, and the next one refused by the store and
    kept beside it (`store/spill.py`), measured by its first session; then interrupted. Its id."""
    store = Store.open(db, create=True)
    run_id = store.create_run({"repeats": 1}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], PLAN)
    ctx = Session(store, run_id, SPEC, {c.cell.key: {"batch": 4} for c in PLAN}, cores=8)
    m = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=1.0)
    for c in PLAN[:stored]:
        sweep.store_or_keep(ctx, Task(c.cell, 0), m)
    with monkeypatch.context() as refusing:
        refusing.setattr(store, "record", lambda *args, **kwargs: (_ for _ in ()).throw(StoreFault("disk full")))
        with pytest.raises(StoreFault, match="is kept in"):
            sweep.store_or_keep(ctx, Task(PLAN[stored].cell, 0), m)
    store.set_run_status(run_id, "interrupted")
    store.close()
    (line,) = spill.kept(db, run_id)
    assert line.session == 1
    return run_id


def test_a_measurement_kept_beside_a_refusing_store_is_stored_under_the_session_that_measured_it(tmp_path, monkeypatch):
    """The first session stores cpu:1's process, then the store refuses cpu:2's, which is kept in the spill file;
    `--resume` stored it as measured by the resuming session, so the run read as two sessions and cpu:2 as the
    second's."""
    db = tmp_path / "t.db"
    run_id = refused_after(db, monkeypatch, 1)
    store = Store.open(db, create=False)
    try:
        store.acquire(run_id)  # what --resume does: the second session
        assert sweep.take_up_kept(Session.resume(store, run_id, SPEC, 8)) == 1
        assert run_state(store, store.run(run_id)).sessions.count == 1
        found = store.conn.execute("SELECT cell_key, session FROM measurements ORDER BY cell_key").fetchall()
        assert [tuple(r) for r in found] == [(PLAN[0].cell.key, 1), (PLAN[1].cell.key, 1)]
    finally:
        store.close()


def test_a_resume_after_the_store_took_nothing_is_a_second_session_of_what_was_kept(tmp_path, monkeypatch):
    """A store deleted while its run measured the first process: the run rescued with no measurement stored, that
    process kept beside the copy (session 1). `--resume` took the session as the latest stored plus one, 1, so every
    process read as one session's, and nothing said the run was measured by two commands."""
    db = tmp_path / "t.db"
    run_id = refused_after(db, monkeypatch, 0)
    store = Store.open(db, create=False)
    try:
        store.acquire(run_id)  # what --resume does: the second session, after the one whose process was kept
        assert store.sessions[run_id] == 2
        assert sweep.take_up_kept(Session.resume(store, run_id, SPEC, 8)) == 1
        process(store, run_id, PLAN[1], 0)
        assert run_state(store, store.run(run_id)).sessions.count == 2
    finally:
        store.close()
