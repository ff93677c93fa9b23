"""A store file that goes away while a command writes to it: deleted, moved, replaced, its directory deleted. SQLite
then refuses every write as "attempt to write a readonly database"; the line says what happened to the file and where
what it held is now (its new name, or a copy made from the file still open), and nothing measured is lost."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from conftest import cells, rows
from dlperf.store import Store, spill
from dlperf.store.location import StoreGone
from dlperf.store.process import ProcessDetail, ProcessMeasurement
from dlperf.store.records import CellFigures
from dlperf.vocab import Status
from store.test_faults import SHORT, env, planned, worker_runs
from store.test_store import KEY, new_run

M = ProcessMeasurement(status=Status.OK, samples=[1.0, 2.0], detail=ProcessDetail(), duration_s=1.0)
FIGURES = CellFigures(status=Status.OK, median_s=1.5, n=2)


@pytest.fixture
def running(tmp_path, monkeypatch):
    """A store with one run in it, open for writing, in a folder of its own; DATA_DIR elsewhere."""
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "runs").mkdir()
    store = Store.open(tmp_path / "runs" / "a.db", create=True)
    run_id = new_run(store)
    yield store, run_id
    store.close()


def refused(store, run_id) -> StoreGone:
    return refused_as(store, run_id, "attempt to write a readonly database")


def refused_as(store, run_id, sqlite_said: str) -> StoreGone:
    with pytest.raises(StoreGone) as caught:
        store.record(run_id, KEY, 0, M, FIGURES)
    message = str(caught.value)
    assert "\n" not in message and f"--db {store.path!r}: " in message and sqlite_said in message
    return caught.value


def held_runs(path) -> list[int]:
    return [r["id"] for r in rows(path, "SELECT id FROM runs")]


def test_a_deleted_store_is_said_so_and_copied_from_the_file_still_open(running, tmp_path):
    store, run_id = running
    os.unlink(store.path)
    fault = refused(store, run_id)
    copy = tmp_path / "runs" / "a-rescued.db"
    assert "the file was deleted while this command ran" in str(fault) and f"copied to {str(copy)!r}" in str(fault)
    assert fault.now_at == copy and held_runs(copy) == [run_id]
    again = refused(store, run_id)  # every later write says the same, and copies nothing again
    assert again.now_at == copy and sorted(p.name for p in copy.parent.iterdir()) == ["a-rescued.db"]


def test_a_moved_store_is_named_where_it_went_and_not_copied(running, tmp_path):
    store, run_id = running
    moved = tmp_path / "elsewhere.db"
    os.rename(store.path, moved)
    fault = refused(store, run_id)
    assert f"the file was moved to {str(moved)!r}" in str(fault) and "copied" not in str(fault)
    assert fault.now_at == moved and list((tmp_path / "runs").iterdir()) == []


def test_a_replaced_store_is_copied_and_the_other_file_left_alone(running, tmp_path):
    store, run_id = running
    other = tmp_path / "other.db"
    other.write_bytes(b"")
    os.replace(other, store.path)
    fault = refused(store, run_id)
    assert "the file was replaced by another one" in str(fault)
    assert fault.now_at == tmp_path / "runs" / "a-rescued.db" and held_runs(fault.now_at) == [run_id]
    assert (tmp_path / "runs" / "a.db").read_bytes() == b""


def test_a_store_whose_directory_is_deleted_is_copied_into_the_data_dir(running, tmp_path):
    store, run_id = running
    shutil.rmtree(tmp_path / "runs")
    fault = refused(store, run_id)
    assert f"its directory {str(tmp_path / 'runs')!r} was deleted" in str(fault)
    assert fault.now_at.parent == tmp_path / "data" / "unsaved" and held_runs(fault.now_at) == [run_id]
    assert not (tmp_path / "runs").exists()  # not made again


def test_a_store_whose_directory_is_deleted_and_data_dir_refuses_is_copied_into_the_temporary_directory(
    running, tmp_path, monkeypatch
):
    """Its folder deleted and DATA_DIR read-only: what it held was lost ("could not be copied ... and is lost with
    it"), though the temporary directory, where `keep` puts a measurement, was writable."""
    import tempfile

    store, run_id = running
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    shutil.rmtree(tmp_path / "runs")
    (tmp_path / "data").write_text("a file where DATA_DIR's folder would be")
    fault = refused(store, run_id)
    assert fault.now_at.parent == tmp_path / "tmp" and fault.now_at.name.startswith("dlperf-a.db-")
    assert f"copied to {str(fault.now_at)!r}" in str(fault) and held_runs(fault.now_at) == [run_id]
    assert fault.now_at.stat().st_mode & 0o777 == 0o600  # in a shared folder: this user's alone


def test_a_store_that_cannot_be_copied_says_what_is_lost(running, tmp_path, monkeypatch):
    import tempfile

    store, run_id = running
    shutil.rmtree(tmp_path / "runs")
    (tmp_path / "data").write_text("a file where DATA_DIR's folder would be")
    (tmp_path / "tmp").write_text("nor a temporary directory")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    fault = refused(store, run_id)
    assert "could not be copied" in str(fault) and "is lost with it" in str(fault) and fault.now_at is None


def test_a_store_still_at_its_path_is_no_store_gone(running):
    store, run_id = running
    store.conn.execute("PRAGMA query_only = ON")  # a refusal that is not the file going away
    with pytest.raises(Exception) as caught:
        store.record(run_id, KEY, 0, M, FIGURES)
    assert not isinstance(caught.value, StoreGone) and "could not store cell" in str(caught.value)


@pytest.mark.slow
def test_a_store_deleted_mid_run_keeps_the_measurement_for_its_copy_which_resume_completes(tmp_path):
    """`dlperf run` whose store file is deleted while a cell runs: one line that says so, the measurement kept for
    the copy, and the resume command it names stores it there."""
    (tmp_path / "runs").mkdir()
    db = tmp_path / "runs" / "s.db"
    cmd = [sys.executable, "-m", "dlperf", "run", *SHORT, "--db", str(db)]
    run_env = {**env(), "DLPERF_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=run_env)
    try:
        deadline = time.monotonic() + 90
        while not (planned(db) and worker_runs(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        db.unlink()
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    copy = tmp_path / "runs" / "s-rescued.db"
    last = stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and "Traceback" not in stderr, stderr
    assert last.startswith(f"dlperf: error: --db {str(db)!r}: the file was deleted while this command ran"), last
    assert f"is kept in {spill.path_for(copy)}: `dlperf run --resume --db {shlex.quote(str(copy))}` stores it" in last
    resumed = subprocess.run([*cmd[:4], "--resume", "--db", str(copy)], capture_output=True, text=True, env=run_env,
                             timeout=120)  # fmt: skip
    assert resumed.returncode == 0 and "stored 1 measurement kept in" in resumed.stderr, resumed.stderr
    assert cells(copy)[0]["status"] == "ok" and len(rows(copy, "SELECT * FROM measurements")) == 1
    assert not db.exists() and spill.holding(copy) == []


def test_a_place_that_cannot_take_the_line_is_not_left_behind(tmp_path, monkeypatch):
    """On a full disk the file beside the store was made but took no line: left empty, it outlived --resume (nothing
    of the run in it to forget), and a line whose fsync failed stayed in it as well as in the next place."""
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    db, m = tmp_path / "d.db", ProcessMeasurement(status=Status.OK, samples=[0.1])
    fsync, calls, failing = os.fsync, [], {1, 4}

    def full_now_and_then(fd):
        calls.append(fd)
        if len(calls) in failing:
            raise OSError(28, "No space left on device")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", full_now_and_then)
    kept = spill.keep(db, 1, "a", 0, m)
    beside, in_data, _ = spill.places(db)
    assert kept == in_data and not beside.exists() and spill.holding(db) == [in_data]
    assert spill.keep(db, 1, "b", 0, m) == beside
    assert spill.keep(db, 1, "c", 0, m) == in_data  # a file that was there before is never removed
    assert [k.key for k in spill.kept(db, 1)] == ["b", "c", "a", "c"]


def test_a_transaction_on_a_store_gone_says_so_not_that_it_is_damaged(running, tmp_path):
    """`dlperf merge` into a target deleted meanwhile read 'SQLite could not read it (attempt to write a readonly
    database): damaged, or changed by another program'; the copy is rolled back and what the target held copied."""
    store, run_id = running
    os.unlink(store.path)
    said = "the file was deleted while this command ran, so SQLite could not store what it copied"
    with pytest.raises(StoreGone, match=said), store.transaction():
        store.conn.execute("UPDATE runs SET status = 'complete' WHERE id = ?", (run_id,))
    copy = tmp_path / "runs" / "a-rescued.db"
    assert rows(copy, "SELECT status FROM runs")[0]["status"] == "running"


def test_a_store_emptied_mid_run_says_its_runs_went_with_it(running, tmp_path):
    """Truncated to nothing (`: > a.db`), the same file at the same path read 'could not store ... (no such table:
    measurements)', and the resume it named found no run to resume."""
    store, run_id = running
    open(store.path, "w").close()
    fault = refused_as(store, run_id, "no such table")
    assert "the file was emptied while this command ran" in str(fault) and "the runs it held went with" in str(fault)
    assert fault.now_at is None and sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["a.db"]
