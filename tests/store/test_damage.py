"""A store damaged under dlperf (a page overwritten, the file cut short while a command ran): SQLite's own error was a
traceback in every command that read past the damage, and one met while a finished process was stored lost its
measurement. Each is now one line naming the store, and the measurement is kept for --resume (`store/spill.py`)."""

from __future__ import annotations

import sqlite3

import pytest

from conftest import dlperf, one_line_error
from dlperf.errors import StoreFault
from dlperf.store import Store, spill
from dlperf.store.process import ProcessMeasurement
from dlperf.vocab import Status
from report.runs import MACHINE, cell

PLAN = [cell("fcn-r", threads=1), cell("fcn-r", threads=2)]


def overwrite_table(db, table: str) -> None:
    """The first page of `table` overwritten with bytes no b-tree page holds; the schema and the other tables whole."""
    conn = sqlite3.connect(db)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    conn.close()
    with open(db, "r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xa5" * page_size)


@pytest.mark.parametrize(
    ("command", "table"),
    [(["table"], "cells"), (["export"], "cells"), (["list", "--runs"], "cells"), (["report"], "cells"),
     (["run", "--resume"], "runs"), (["table"], "runs")],
)  # fmt: skip
def test_a_damaged_page_is_one_line_naming_the_store(report_db, tmp_path, command, table):
    overwrite_table(report_db, table)
    out = ["-o", str(tmp_path / "r.html")] if command == ["report"] else []
    proc = dlperf(*command, *out, "--db", str(report_db), timeout=120)
    one_line_error(proc, f"--db '{report_db}': ", "malformed")


def test_a_store_damaged_while_a_process_ran_keeps_its_measurement(tmp_path):
    """The cell's figures are recomputed from its stored processes before the new one is written: a read that
    SQLite refused there escaped as sqlite3.OperationalError, and the measurement was not kept."""
    from dlperf.runner import sweep
    from dlperf.runner.session import Session
    from dlperf.runner.tasks import Task
    from dlperf.spec import RunSpec

    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    run_id = store.create_run({}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], PLAN)
    ctx = Session(store, run_id, RunSpec(("fcn-r",)), {c.cell.key: {"batch": 4} for c in PLAN}, cores=8)
    m = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=1.0)
    store.conn.execute("DROP TABLE measurements")  # as a file cut short under it reads: "no such table"
    try:
        with pytest.raises(StoreFault, match=r"no such table: measurements.*is kept in"):
            sweep.store_or_keep(ctx, Task(PLAN[0].cell, 0), m)
    finally:
        store.close()
    (line,) = spill.kept(db, run_id)
    assert (line.key, line.repeat, line.measurement.samples) == (PLAN[0].cell.key, 0, [0.01] * 5)


def test_a_lock_held_past_the_timeout_is_not_called_damage():
    """A store another program held locked past SQLite's timeout was said to be damaged, with an integrity check to
    run; it is a lock, and the command can simply be run again."""
    from dlperf.store.location import unreadable

    said = unreadable(sqlite3.OperationalError("database is locked"), "runs.db")
    assert said.startswith("--db 'runs.db': another program held it locked past the timeout (database is locked)")
    assert "nothing is damaged" in said and "integrity_check" not in said
    assert "damaged" in unreadable(sqlite3.DatabaseError("database disk image is malformed"), "runs.db")
