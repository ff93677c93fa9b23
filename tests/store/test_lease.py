"""A run is leased to the one process measuring it: a second writer is refused, a dead holder's run taken over."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, dlperf, one_line_error, require, rows
from dlperf.protocol import Cell
from dlperf.store import Store, lease
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell
from dlperf.vocab import Status

CELL = PlannedCell(Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32"), {"batch": 8})
KEY = CELL.cell.key

HOLD = """
import json, sys, time
from dlperf.protocol import Cell
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell
from dlperf.vocab import Status
spec, env, fingerprint, cell = json.loads(sys.argv[2])
store = Store.open(sys.argv[1], create=True)
planned = PlannedCell(Cell.from_json(cell), {"batch": 8})
run_id = store.create_run(spec, env, fingerprint, ["dlperf", "run"], [planned])
m = ProcessMeasurement(status=Status.OK, samples=[0.01, 0.01, 0.01], duration_s=1.0)
store.record(run_id, planned.cell.key, 0, m, CellFigures(status=Status.OK, median_s=0.01, n=3))
print("holding", flush=True)
time.sleep(60)
"""

RACE = """
import sys, time
from dlperf.store import Store, lease
real = lease.alive
lease.alive = lambda holder: time.sleep(0.5) or real(holder)  # check slowly: the other racer gets its turn
store = Store.open(sys.argv[1], create=False)
try:
    store.acquire(1)
    print("won", flush=True)
except lease.LeaseHeld as exc:
    print(exc, flush=True)
sys.stdin.read()  # hold what was won until the test ends
"""


def python(script: str, *args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env, text=True, stdout=subprocess.PIPE,
                            **kwargs)  # fmt: skip


def dump(db) -> dict:
    return {t: rows(db, f"SELECT * FROM {t} ORDER BY rowid") for t in ("runs", "cells", "measurements", "leases")}


def reaped_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


def new_run(path) -> Store:
    store = Store.open(path, create=True)
    store.create_run({"spec": 1}, {}, {"cpu_model": "x"}, ["dlperf", "run"], [CELL])
    return store


def put_lease(path, run_id: int, pid: int, host: str, token: str | None, seen: str) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?, ?, ?)", (run_id, pid, host, token, seen, seen))
    conn.close()


def test_a_second_resume_is_refused_while_the_holder_lives_and_takes_over_when_it_dies(tmp_path):
    require("torch")
    from dlperf import api, envinfo, plan

    env = envinfo.capture(plan.framework_info(["torch"]))
    spec = api.make_spec(["tiny-fcn-r"], threads=[1]).to_json()
    db = tmp_path / "d.db"
    holder = python(HOLD, str(db), json.dumps([spec, env, envinfo.fingerprint(env), CELL.cell.to_json()]))
    try:
        assert holder.stdout.readline() == "holding\n"
        before, image = dump(db), db.read_bytes()
        refused = dlperf("run", "--resume", db=db, timeout=60)
        one_line_error(refused, f"pid {holder.pid} on {socket.gethostname()}", "since ")
        assert dump(db) == before and db.read_bytes() == image  # nothing written
    finally:
        holder.kill()
        holder.communicate(timeout=30)
    resumed = dlperf("run", "--resume", db=db, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    [note] = [line for line in resumed.stderr.splitlines() if "taken over" in line]
    assert f"run 1 was left running by pid {holder.pid} on {socket.gethostname()}, last seen " in note
    after = dump(db)
    assert after["leases"] == [] and after["runs"][0]["status"] == "complete"
    assert after["cells"][0]["updated_at"] == before["cells"][0]["updated_at"]  # what was measured is kept


def test_two_processes_racing_for_a_dead_holders_run_one_wins(tmp_path):
    db = tmp_path / "d.db"
    new_run(db).close()
    put_lease(db, 1, reaped_pid(), socket.gethostname(), "gone:1", "2000-01-01T00:00:00+00:00")
    racers = [python(RACE, str(db), stdin=subprocess.PIPE) for _ in range(2)]
    try:
        said = sorted(r.stdout.readline().strip() for r in racers)
    finally:
        for r in racers:
            r.communicate("", timeout=30)
    winner = next(r for r in racers if rows(db, "SELECT pid FROM leases")[0]["pid"] == r.pid)
    assert said[1] == "won" and said[0].startswith(f"run 1 is being measured by pid {winner.pid} on "), said


def test_a_lease_is_released_when_the_run_ends_or_its_process_closes_the_store(tmp_path):
    db = tmp_path / "d.db"
    store = new_run(db)
    [held] = rows(db, "SELECT * FROM leases")
    assert (held["run_id"], held["pid"], held["host"]) == (1, os.getpid(), socket.gethostname())
    store.set_run_status(1, "interrupted")
    assert rows(db, "SELECT * FROM leases") == []
    assert store.acquire(1) is None  # --resume: nobody held it
    assert len(rows(db, "SELECT * FROM leases")) == 1
    store.close()
    assert rows(db, "SELECT * FROM leases") == []


@pytest.mark.parametrize(
    ("host", "token", "seen", "held"),
    [
        ("here", "mine", "now", False),  # this process: it may take its own lease again
        ("here", "recycled", "now", False),  # this pid, but started after the holder: the holder is dead
        ("elsewhere", None, "now", True),  # another host's process, heard of lately: alive
        ("elsewhere", None, "2000-01-01T00:00:00+00:00", False),  # unheard of for longer than STALE_AFTER_S
    ],
)
def test_who_is_alive(tmp_path, host, token, seen, held):
    db = tmp_path / "d.db"
    new_run(db).close()
    me = lease.me()
    host = me.host if host == "here" else "elsewhere.example"
    token = me.token if token == "mine" else token
    put_lease(db, 1, os.getpid(), host, token, lease.stamp() if seen == "now" else seen)
    store = Store.open(db, create=False)
    try:
        if held:
            by = re.escape(f"run 1 is being measured by pid {os.getpid()} on {host}")
            with pytest.raises(lease.LeaseHeld, match=by):
                store.acquire(1)
        else:
            dead = store.acquire(1)
            assert dead is None if token == me.token else dead.host == host
            assert rows(db, "SELECT token FROM leases") == [{"token": me.token}]
    finally:
        store.close()


def test_a_process_whose_run_was_taken_over_writes_nothing_more(tmp_path):
    db = tmp_path / "d.db"
    store = new_run(db)
    put_lease(db, 1, 4321, "elsewhere.example", None, lease.stamp())  # another host took it over
    m = ProcessMeasurement(status=Status.OK, samples=[1.0], duration_s=1.0)
    with pytest.raises(lease.LeaseHeld, match=r"run 1 was taken over by pid 4321 on elsewhere\.example"):
        store.record(1, KEY, 0, m, CellFigures(status=Status.OK, median_s=1.0, n=1))
    with pytest.raises(lease.LeaseHeld):  # no longer its run: its status is the new holder's to set
        store.set_run_status(1, "interrupted")
    assert rows(db, "SELECT * FROM measurements") == []
    assert rows(db, "SELECT status FROM runs")[0]["status"] == "running"
    store.close()
    assert rows(db, "SELECT pid FROM leases") == [{"pid": 4321}]


def test_the_holder_refreshes_its_heartbeat(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "HEARTBEAT_S", 0.05)
    db = tmp_path / "d.db"
    old = "2000-01-01T00:00:00+00:00"
    store = new_run(db)
    try:
        put_lease(db, 1, os.getpid(), socket.gethostname(), lease.me().token, old)
        deadline = time.monotonic() + 10
        while rows(db, "SELECT seen FROM leases")[0]["seen"] == old and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rows(db, "SELECT seen FROM leases")[0]["seen"] != old
    finally:
        store.close()


def test_a_killed_holder_leaves_a_lease_that_names_it(tmp_path):
    """What `--resume` finds after `kill -9`: the lease of a pid that no longer runs, which it may take."""
    db = tmp_path / "d.db"
    holder = python(HOLD, str(db), json.dumps([{"spec": 1}, {}, {"cpu_model": "x"}, CELL.cell.to_json()]))
    assert holder.stdout.readline() == "holding\n"
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate(timeout=30)
    [held] = rows(db, "SELECT * FROM leases")
    assert held["pid"] == holder.pid and not lease.alive(lease.Holder(holder.pid, held["host"], held["token"]))
