"""Measurements kept beside a store that refused them (`store/spill.py`) were matched to their run by its id alone:
a store deleted and made again at the same path starts again at run 1, and its `--resume` took up the old run 1's
kept lines as its own, measurements of another run (perhaps another machine or code). Each line now carries its
run's mark (start and a digest of its spec and machine), and a line of another run stays where it is."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from unittest.mock import ANY

import pytest
from test_faults import TINY, dlperf, env, planned

import dlperf.store as stores
from conftest import old_store
from dlperf import api
from dlperf.errors import StoreFault
from dlperf.runner import sweep
from dlperf.runner.session import Session
from dlperf.runner.tasks import Task
from dlperf.spec import RunSpec
from dlperf.store import Store, spill
from dlperf.store.process import ProcessDetail, ProcessMeasurement
from dlperf.vocab import Status
from report.runs import MACHINE, cell

PLAN = [cell("fcn-r", threads=1), cell("fcn-r", threads=2)]
M = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=1.0)


def a_run(db, started: str, monkeypatch) -> tuple[Store, Session]:
    monkeypatch.setattr(stores, "now", lambda: started)
    store = Store.open(db, create=True)
    run_id = store.create_run({"repeats": 1}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], PLAN)
    return store, Session(store, run_id, RunSpec(("fcn-r",)), {c.cell.key: {"batch": 4} for c in PLAN}, cores=8)


def refused(ctx: Session, monkeypatch, planned=PLAN[1]) -> None:
    """A process of `planned` (cpu:2) measured while the store refuses it: kept beside the store."""
    with monkeypatch.context() as refusing:
        refusing.setattr(ctx.store, "record", lambda *args, **kwargs: (_ for _ in ()).throw(StoreFault("disk full")))
        with pytest.raises(StoreFault, match="is kept in"):
            sweep.store_or_keep(ctx, Task(planned.cell, 0), M)


def resumed(db) -> tuple[Store, Session]:
    store = Store.open(db, create=False)
    store.acquire(1)  # what --resume does
    return store, Session.resume(store, 1, RunSpec(("fcn-r",)), 8)


def test_a_store_made_again_at_the_path_does_not_take_up_the_old_runs_kept_lines(tmp_path, monkeypatch):
    db = tmp_path / "t.db"
    store, ctx = a_run(db, "2026-12-01T10:00:00+00:00", monkeypatch)
    refused(ctx, monkeypatch)
    store.close()
    (line,) = spill.kept(db, 1)
    assert line.run == {"started_at": "2026-12-01T10:00:00+00:00", "digest": line.run["digest"], "token": ANY}
    assert line.run == store.mark(1) and len(line.run["token"]) == 32
    db.unlink()  # deleted, then made again: its first run is run 1 too
    store, _ = a_run(db, "2026-12-02T09:00:00+00:00", monkeypatch)
    store.set_run_status(1, "interrupted")
    store.close()
    store, ctx = resumed(db)
    try:
        assert [t.cell for t in ctx.remaining()] == [c.cell for c in PLAN]  # cpu:2 is measured again, not taken up
        assert sweep.take_up_kept(ctx) == 0 and store.done_repeats(1) == set()
        (kept,) = spill.holding(db)  # left where it was
        assert {p: [k.key for k in lines] for p, lines in spill.aside(db, 1, store.mark(1)).items()} == {
            kept: [PLAN[1].cell.key]
        }
        said = api._left_aside(store.run(1), spill.aside(db, 1, store.mark(1)), store.mark(1))
    finally:
        store.close()
    assert said == (f"left 1 measurement kept for a run 1 in {kept} where it is: not this run's (started "
                    "2026-12-02T09:00:00+00:00) but another run 1's, started 2026-12-01T10:00:00+00:00")  # fmt: skip


def test_the_runs_own_kept_line_is_taken_up_and_another_runs_stays(tmp_path, monkeypatch):
    db = tmp_path / "t.db"
    store, ctx = a_run(db, "2026-12-02T09:00:00+00:00", monkeypatch)
    refused(ctx, monkeypatch)
    other = {"started_at": "2026-12-01T10:00:00+00:00", "digest": "0123456789abcdef"}
    spill.keep(db, 1, PLAN[0].cell.key, 0, M, 1, other)  # an older store's run 1, kept in the same file
    store.set_run_status(1, "interrupted")
    store.close()
    store, ctx = resumed(db)
    try:
        assert [t.cell for t in ctx.remaining()] == [PLAN[0].cell]
        assert sweep.take_up_kept(ctx) == 1 and store.done_repeats(1) == {(PLAN[1].cell.key, 0)}
        assert [k.run for k in spill.kept(db, 1)] == [other]  # the other's line stays; the run's own is gone
    finally:
        store.close()


def an_earlier_run(db, started: str, monkeypatch, version: int = 12) -> None:
    """Run 1 begun, then interrupted, by an earlier dlperf, in a store at schema `version`: a run with no token."""
    monkeypatch.setattr(stores, "now", lambda: started)
    conn = old_store(db, version)
    conn.commit()
    conn.close()
    old = Store(sqlite3.connect(db), str(db))
    old.conn.row_factory, old.version = sqlite3.Row, version
    old.create_run({"repeats": 1}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], PLAN)
    old.set_run_status(1, "interrupted")
    old.close()


def old_line(db, key: str, started_at: float | None) -> None:
    """A line as the previous dlperf kept it: no mark of its run."""
    m = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, detail=ProcessDetail(started_at=started_at))
    entry = {"run_id": 1, "key": key, "repeat": 0, "measurement": m.to_json(), "session": 1}
    with open(spill.path_for(db), "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def test_an_earlier_dlperfs_line_is_taken_up_only_where_its_process_started_after_the_run(tmp_path, monkeypatch):
    """Such a line says no more than its run's id: it is the run's (one an earlier dlperf began, schema version 12)
    only where its process started after the run did (one measured before cannot be), and one that does not say when
    it started is left where it is."""
    db = tmp_path / "t.db"
    start = "2026-12-02T09:00:00+00:00"
    at = datetime.fromisoformat(start).astimezone(UTC).timestamp()
    an_earlier_run(db, start, monkeypatch)
    old_line(db, PLAN[0].cell.key, at + 5)  # this run's
    old_line(db, PLAN[1].cell.key, at - 3600)  # a store's of an hour before
    old_line(db, PLAN[1].cell.key, None)  # cannot tell
    store, ctx = resumed(db)
    try:
        assert "token" not in store.mark(1)
        assert sweep.take_up_kept(ctx) == 1 and store.done_repeats(1) == {(PLAN[0].cell.key, 0)}
        assert [k.measurement.detail.started_at for k in spill.kept(db, 1)] == [at - 3600, None]
        said = api._left_aside(store.run(1), spill.aside(db, 1, store.mark(1)), store.mark(1))
    finally:
        store.close()
    assert said.startswith(f"left 2 measurements kept for a run 1 in {spill.path_for(db)} where they are: not this ")
    assert said.endswith("but an earlier dlperf's, whose process did not start after this run did (or does not say "
                         "when)")  # fmt: skip


def test_a_run_with_a_token_leaves_an_earlier_dlperfs_line_and_says_why_by_its_mark(tmp_path, monkeypatch):
    """A run begun with a token (schema 13) never takes an unmarked line, whenever its process started: it was said
    to be left as one 'whose process did not start after this run did', though this one started after."""
    db = tmp_path / "t.db"
    start = "2026-12-02T09:00:00+00:00"
    store, _ = a_run(db, start, monkeypatch)
    store.set_run_status(1, "interrupted")
    store.close()
    old_line(db, PLAN[1].cell.key, datetime.fromisoformat(start).astimezone(UTC).timestamp() + 5)
    store, ctx = resumed(db)
    try:
        assert "token" in store.mark(1) and sweep.take_up_kept(ctx) == 0
        said = api._left_aside(store.run(1), spill.aside(db, 1, store.mark(1)), store.mark(1))
    finally:
        store.close()
    assert said == (f"left 1 measurement kept for a run 1 in {spill.path_for(db)} where it is: not this run's "
                    f"(started {start}) but an earlier dlperf's, unmarked (every line this run keeps carries its "
                    "mark)")  # fmt: skip


@pytest.mark.slow
def test_resume_leaves_the_kept_line_of_the_deleted_stores_run_1_and_says_so(tmp_path):
    """End to end: run 1 of a.db has a measurement kept beside it; a.db is deleted, and a new run 1 made there is cut
    off (its process killed). `dlperf run --resume` measures the new run's cell itself, and one line says the kept
    line, the old run 1's, is left where it is."""
    db = tmp_path / "a.db"
    assert dlperf("run", *TINY, "--db", db).returncode == 0
    store = Store.open(db, create=False)
    try:
        key, old = store.cells(1)[0].key, store.mark(1)
    finally:
        store.close()
    kept = spill.keep(db, 1, key, 0, ProcessMeasurement(status=Status.OK, samples=[9.0] * 3), 1, old)
    db.unlink()
    cmd = [sys.executable, "-m", "dlperf", "run", *TINY, "--db", str(db)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(),
                            start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not planned(db):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    resumed = dlperf("run", "--resume", "--db", db)
    assert resumed.returncode == 0, resumed.stderr
    store = Store.open(db, create=False)
    try:
        started = store.run(1).started_at
        (m,) = store.measurements(1, key)
    finally:
        store.close()
    assert m.samples != [9.0] * 3 and "stored 1 measurement" not in resumed.stderr
    assert (f"dlperf: warning: left 1 measurement kept for a run 1 in {kept} where it is: not this run's (started "
            f"{started}) but another run 1's, started {old['started_at']}") in resumed.stderr.splitlines()  # fmt: skip
    assert [k.run for k in spill.kept(db, 1)] == [old]


def test_a_new_runs_reminder_tells_apart_the_kept_lines_of_runs_no_longer_in_the_store(tmp_path, monkeypatch):
    """The reminder said `--resume` stores every kept line, though it leaves those of a store deleted and made again
    at the path (another run 1, a run 5 the new store does not have)."""
    db = tmp_path / "t.db"
    store, _ = a_run(db, "2026-12-02T09:00:00+00:00", monkeypatch)
    try:
        spill.keep(db, 1, PLAN[0].cell.key, 0, M, 1, store.mark(1))  # run 1's own
        assert api.kept_measurements(str(db), store)[0].endswith("stores those of the latest unfinished run")
        spill.keep(db, 1, PLAN[1].cell.key, 0, M, 1, {"started_at": "2026-12-01T10:00:00+00:00", "digest": "0"})
        spill.keep(db, 5, PLAN[1].cell.key, 0, M, 1, {"started_at": "2026-12-01T11:00:00+00:00", "digest": "0"})
        (said,) = api.kept_measurements(str(db), store)
    finally:
        store.close()
    assert said == (f"{spill.path_for(db)} keeps measurements the store refused (run 1: 2, run 5: 1); `dlperf run "
                    f"--resume --db {db}` stores those of the latest unfinished run, not the 2 of runs no longer in it "
                    "(a store made before at this path), which it leaves")  # fmt: skip


@pytest.mark.parametrize("overlapping", [False, True])
def test_two_runs_of_one_spec_and_machine_started_in_one_second_keep_their_own_lines(tmp_path, monkeypatch,
                                                                                      overlapping):  # fmt: skip
    """A run's mark was its start, to the second, and a digest of its spec and machine: two runs of one command on
    one machine started in the same second at one path (the store deleted and made again at once, `overlapping`:
    while the first run still measures) had the same mark, and the second's --resume took up the first's kept
    line as its own. Each run now has a token of its own, in its mark."""
    db, start = tmp_path / "t.db", "2026-12-02T09:00:00+00:00"
    first, first_ctx = a_run(db, start, monkeypatch)
    if not overlapping:
        refused(first_ctx, monkeypatch)
        first.close()
    db.unlink()  # made again within the same second: its first run is run 1 too
    store, ctx = a_run(db, start, monkeypatch)
    if overlapping:
        refused(first_ctx, monkeypatch)  # kept beside the path, where the second run's store is now
        first.close()
    assert first.mark(1) != store.mark(1)
    refused(ctx, monkeypatch, PLAN[0])  # the second run's own
    store.set_run_status(1, "interrupted")
    store.close()
    store, ctx = resumed(db)
    try:
        assert [t.cell for t in ctx.remaining()] == [PLAN[1].cell]  # cpu:2 is measured again, not taken up
        assert sweep.take_up_kept(ctx) == 1 and store.done_repeats(1) == {(PLAN[0].cell.key, 0)}
        (left,) = spill.kept(db, 1)
        assert (left.key, left.run) == (PLAN[1].cell.key, first.mark(1))  # the first run's stays where it is
    finally:
        store.close()


def test_a_line_the_previous_dlperf_marked_is_taken_up_by_its_run_once_the_store_is_upgraded(tmp_path, monkeypatch):
    """The previous dlperf marked a line with its run's start and digest, no token: a run it began (no token, at
    schema version 12) takes it up after the upgrade, as it did."""
    db, start = tmp_path / "t.db", "2026-12-02T09:00:00+00:00"
    an_earlier_run(db, start, monkeypatch)
    digest = spill.mark(start, json.dumps({"repeats": 1}), json.dumps(MACHINE))["digest"]
    spill.keep(db, 1, PLAN[1].cell.key, 0, M, 1, {"started_at": start, "digest": digest})  # as it kept it
    store, ctx = resumed(db)  # upgraded
    try:
        assert store.version == stores.SCHEMA_VERSION and store.mark(1) == {"started_at": start, "digest": digest}
        assert [t.cell for t in ctx.remaining()] == [PLAN[0].cell]
        assert sweep.take_up_kept(ctx) == 1 and store.done_repeats(1) == {(PLAN[1].cell.key, 0)}
        assert spill.holding(db) == []
    finally:
        store.close()


def test_a_run_with_a_token_takes_up_no_line_an_earlier_dlperf_kept_in_the_same_second(tmp_path, monkeypatch):
    """An earlier dlperf's run 1 began in the same second as this dlperf's run 1 of a store made again at the path:
    its lines (marked without a token, or not marked and started after the second the new run's start reads) are
    not the new run's, whose dlperf marks every line it keeps with its token."""
    db, start = tmp_path / "t.db", "2026-12-02T09:00:00+00:00"
    an_earlier_run(db, start, monkeypatch)
    digest = spill.mark(start, json.dumps({"repeats": 1}), json.dumps(MACHINE))["digest"]
    spill.keep(db, 1, PLAN[1].cell.key, 0, M, 1, {"started_at": start, "digest": digest})
    old_line(db, PLAN[0].cell.key, datetime.fromisoformat(start).timestamp() + 0.5)
    kept = spill.path_for(db).read_text()
    db.unlink()
    store, _ = a_run(db, start, monkeypatch)
    store.set_run_status(1, "interrupted")
    store.close()
    store, ctx = resumed(db)
    try:
        assert [t.cell for t in ctx.remaining()] == [c.cell for c in PLAN]
        assert sweep.take_up_kept(ctx) == 0 and store.done_repeats(1) == set()
        assert sum(map(len, spill.aside(db, 1, store.mark(1)).values())) == 2
    finally:
        store.close()
    assert spill.path_for(db).read_text() == kept
