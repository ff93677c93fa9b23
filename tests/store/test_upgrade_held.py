"""A store an older dlperf is measuring is never upgraded under it. A tester's sweep of commit 5213dbac (schema 11)
measured x.db while this dlperf's `run --resume` (refused: "run 7 is being measured by pid ...") and `merge other.db
--db x.db` ran: both upgraded the file to the current schema first, and the old sweep's next cell failed ("table
measurements has 10 columns but 9 values were supplied", exit 2). A command that would have to upgrade it is refused
in one line, naming the run and its process, and writes nothing; the older dlperf goes on."""

import os
import shutil
import socket
import sqlite3
import subprocess
import sys

import pytest

from conftest import ROOT, dlperf, old_store, one_line_error
from dlperf.protocol import Cell
from dlperf.store import SCHEMA_VERSION, Store, lease
from dlperf.store.records import PlannedCell

CELL = PlannedCell(Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32"), {"batch": 8})

# An older dlperf, writing a schema-11 file as it does: run 1 interrupted, run 2 leased to it while it measures; told
# to go on (a line on stdin), it stores run 2's next process as that dlperf did, its 9 values in the 9 columns that
# `measurements` had then, and says "stored" or SQLite's refusal.
OLDER = f"""
import sqlite3, sys
from dlperf.protocol import Cell
from dlperf.store import Store
from dlperf.store.records import PlannedCell
cell = PlannedCell(Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32"), {{"batch": 8}})
store = Store(sqlite3.connect(sys.argv[1]), sys.argv[1])
store.conn.row_factory, store.version = sqlite3.Row, 11
store.set_run_status(store.create_run({{}}, {{}}, {{"cpu_model": "x"}}, ["dlperf", "run"], [cell]), "interrupted")
run = store.create_run({{}}, {{}}, {{"cpu_model": "x"}}, ["dlperf", "run"], [cell])
print("measuring", flush=True)
sys.stdin.readline()
try:
    with store.conn:
        store.conn.execute("INSERT INTO measurements VALUES (?, ?, 0, 'ok', NULL, 'now', 1.0, '[0.01]', '{{}}')",
                           (run, {CELL.cell.key!r}))
    print("stored", flush=True)
except sqlite3.Error as exc:
    print(exc, flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def measured(tmp_path):
    """A schema-11 store an older dlperf (a child process) is measuring run 2 of; the file and the child."""
    db = tmp_path / "x.db"
    conn = old_store(db, 11)
    conn.commit()
    conn.close()
    child = subprocess.Popen([sys.executable, "-c", OLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})  # fmt: skip
    try:
        assert child.stdout.readline() == "measuring\n"
        yield db, child
    finally:
        child.kill()
        child.communicate(timeout=30)


def version(db) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        conn.close()


def test_a_store_an_older_dlperf_measures_is_not_upgraded_and_its_sweep_goes_on(tmp_path, measured):
    """Each command that would upgrade the file is refused and leaves it byte for byte as it was: `merge` into it,
    any command that opens it to write (a new run, peak, fit), `--resume` of the run that process measures and of
    another run of it. The older dlperf then stores its next process."""
    db, child = measured
    other = tmp_path / "other.db"
    store = Store.open(other, create=True)
    store.set_run_status(store.create_run({}, {}, {"cpu_model": "x"}, ["dlperf", "run"], [CELL]), "complete")
    store.close()
    image = db.read_bytes()
    who = f"run 2 is being measured by pid {child.pid} on {socket.gethostname()} since "
    older = f"with an older dlperf, which writes this file at schema version 11: upgraded to version {SCHEMA_VERSION}"
    refused = dlperf("merge", str(other), db=db, timeout=120)
    one_line_error(refused, who, older, "wait for it to end, or stop it, and run this command again")
    assert db.read_bytes() == image
    with pytest.raises(lease.LeaseHeld, match=f"{who}.* {older}"):
        Store.open(db, create=True)
    store = Store.open(db, create=False)
    try:
        with pytest.raises(lease.LeaseHeld, match=f"{who}.* {older}"):
            store.acquire(2)
        assert db.read_bytes() == image  # refused before the upgrade
        with pytest.raises(lease.LeaseHeld, match=f"{who}.* {older}"):
            store.acquire(1)  # its own process dead, but the file is another's to write
        assert db.read_bytes() == image and version(db) == "11" and store.leases == {}
    finally:
        store.close()
    child.stdin.write("go on\n")
    child.stdin.flush()
    assert child.stdout.readline() == "stored\n"


def test_a_copy_or_a_dead_holders_store_is_upgraded_but_a_resume_refused_leaves_it_as_it_was(tmp_path, measured):
    """Judged as a resume judges a holder: a `cp` of the file is no file that process writes, and once it has died
    its lease stops nothing. The copy's `--resume` of the run that process measures in the original is refused before
    the upgrade (it was upgraded, then refused)."""
    db, child = measured
    copy = tmp_path / "copy.db"
    shutil.copyfile(db, copy)
    image = copy.read_bytes()
    store = Store.open(copy, create=False)
    try:
        with pytest.raises(lease.LeaseHeld, match="in the file this one was copied from, not in this one"):
            store.acquire(2)
        assert copy.read_bytes() == image
    finally:
        store.close()
    Store.open(copy, create=True).close()
    assert version(copy) == str(SCHEMA_VERSION)
    child.kill()
    child.communicate(timeout=30)
    Store.open(db, create=True).close()
    assert version(db) == str(SCHEMA_VERSION)
