"""An interrupt (Ctrl-C, SIGTERM, SIGHUP) that lands inside one of the store's writes. `dlperf run` holds it while a
measurement is stored (`lifeline.held`) and raises it once the write is done, so the status is stored afterwards on
the normal path; `dlperf run --ray`'s driver stored each node's rows unheld (the interrupted sweep then met the
transaction it had cut short: "cannot start a transaction within a transaction", a traceback, the node's run lost),
and `dlperf fit`, like `dlperf run` itself, stored its run complete unheld (the run left running, its lease a dead
process's; run's line said nothing was stored). Each runs in a child process, whose main thread takes the signals; the
store's connection sends the SIGINT right after the statement named, as if it had come while SQLite ran it."""

from __future__ import annotations

import sys
import textwrap

import pytest

from conftest import ROOT, require, rows
from test_signals import in_a_child

INTERRUPTING = """
import os, signal, sys
sys.path[:0] = [{tests!r}]
from dlperf.store import Store


class Interrupting:
    '''A store's connection that sends this process SIGINT right after its `nth` statement starting `sql`.'''

    def __init__(self, real, sql, nth=1):
        self.real, self.sql, self.nth, self.seen = real, sql, nth, 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __enter__(self):
        return self.real.__enter__()

    def __exit__(self, *exc):
        return self.real.__exit__(*exc)

    def execute(self, statement, *args):
        done = self.real.execute(statement, *args)
        if statement.lstrip().upper().startswith(self.sql):
            self.seen += 1
            if self.seen == self.nth:
                os.kill(os.getpid(), signal.SIGINT)
        return done


def interrupting(db, sql, nth=1):
    '''Every store opened at `db` interrupted so.'''
    opened = Store.open.__func__

    def open_(cls, path, **kwargs):
        store = opened(cls, path, **kwargs)
        if str(path) == db:
            store.conn = Interrupting(store.conn, sql, nth)
        return store

    Store.open = classmethod(open_)
"""


def script(body: str) -> str:
    return INTERRUPTING.format(tests=str(ROOT / "tests")) + textwrap.dedent(body)


def test_ctrl_c_inside_the_drivers_copy_of_a_nodes_first_rows_leaves_its_run_interrupted(tmp_path):
    """The SIGINT lands once the copy's transaction has begun (BEGIN IMMEDIATE returned: it waited for another
    writer, say): the transaction was left open, the stop's own copy of the node's rows then raised OperationalError
    'cannot start a transaction within a transaction' out of the driver, and the node's run was never stored."""
    db = str(tmp_path / "driver.db")
    proc = in_a_child(
        script(f"""
        from pathlib import Path
        from dlperf import fleet
        from dlperf.runner.lifeline import sigterm_as_interrupt
        from test_fleet_lost import ALPHA, node_run
        from test_ray import NODES, PollingRay, Remote

        local = Store.open({str(tmp_path / "a.db")!r}, create=True)
        rows = local.check_run(node_run(local, ALPHA, {{0: 2, 1: 1}}, "running"))
        local.close()

        class Actor:
            poll = Remote({{"rows": rows, "exit": None, "error": "", "said": []}})
            stop = close = Remote(None)

        interrupting({db!r}, "BEGIN IMMEDIATE")
        store = Store.open({db!r}, create=True)
        node = fleet.Node(fleet.select(NODES, None)[0], Actor(), ["dlperf", "run"])
        with sigterm_as_interrupt(to_the_end=True):  # the CLI's, around the driver
            print("exit", fleet.follow(PollingRay, store, [node], "auto"), "run", node.run_id)
        store.close()
    """)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["exit 130 run 1"]
    assert [(r["id"], r["status"]) for r in rows(db, "SELECT * FROM runs")] == [(1, "interrupted")]
    assert rows(db, "SELECT * FROM leases") == []


SWEEP = ["--threads", "1", "--no-loss-check"]
FAKE = """
from dlperf.runner import sweep
from dlperf.store.process import ProcessMeasurement
from dlperf.vocab import Status


def run_task(task, ctx, poll):  # a try up to batch 32 fits
    batch = int(task.cell.workload.rpartition("@b")[2] or 0) if "@b" in task.cell.workload else 0
    if batch > 32:
        return ProcessMeasurement(status=Status.FAILED, error=f"out of memory at batch {batch}", duration_s=0.1)
    return ProcessMeasurement(status=Status.OK, samples=[0.001] * 6, duration_s=0.1)


sweep.run_task = run_task
"""


def command(db: str, *argv: str) -> str:
    """`dlperf ARGV` with its children faked, the store at `db` interrupted as its run is stored complete: the SIGINT
    lands once its lease is released (the last statement of that write, which the rollback undid)."""
    return script(
        FAKE
        + textwrap.dedent(f"""
        from dlperf.cli import main

        interrupting({db!r}, "DELETE FROM LEASES")
        sys.argv = ["dlperf", *{list(argv)!r}]
        print("exit", main(sys.argv[1:]))
    """)
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals as Linux delivers them")
def test_ctrl_c_as_fit_stores_its_run_complete_says_its_answers_and_leaves_the_run_interrupted(tmp_path):
    require("torch")  # the planning probe
    db = str(tmp_path / "f.db")
    proc = in_a_child(command(db, "fit", "tiny-fcn-r", "--threads", "1", "--max-batch", "64", "--db", db))
    assert proc.stdout.splitlines()[-1] == "exit 130", (proc.stdout, proc.stderr)
    assert "fp32: the largest batch that fits is 32" in proc.stdout, proc.stdout  # the answer, not 'interrupted' alone
    assert proc.stderr.splitlines()[-1].startswith("dlperf: interrupted; 8 of 8 cells measured, 6 of them failed, are")
    assert [(r["id"], r["status"]) for r in rows(db, "SELECT * FROM runs")] == [(1, "interrupted")]
    assert rows(db, "SELECT * FROM leases") == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals as Linux delivers them")
def test_ctrl_c_as_run_stores_its_run_complete_says_what_is_stored(tmp_path):
    """Its line said 'nothing is stored: no cell was measured yet. Run the same command to start again'."""
    require("torch")
    db = str(tmp_path / "r.db")
    proc = in_a_child(command(db, "run", "--workloads", "tiny-fcn-r", *SWEEP, "--no-predict", "--db", db))
    assert proc.stdout.splitlines()[-1] == "exit 130", (proc.stdout, proc.stderr)
    assert proc.stderr.splitlines()[-1] == (
        f"dlperf: interrupted; 1 of 1 cell measured is stored in run 1. Continue with: dlperf run --resume --db {db}"
    )
    assert [(r["id"], r["status"]) for r in rows(db, "SELECT * FROM runs")] == [(1, "interrupted")]
    assert rows(db, "SELECT * FROM leases") == []
