"""One run whose stored row no longer decodes (a damaged page: its environment not even UTF-8) stopped every command
that read the store's runs, `table --run 2` of an intact run and a new sweep's dry run included, while a damaged
cell row was left out with a warning. The run is now left out and named once, the command exits 1, and the other
runs are shown; asked for by its id, it is one line (exit 2)."""

from __future__ import annotations

import sqlite3

from commands.test_table_unfinished import planned_run
from conftest import dlperf, one_line_error
from dlperf.store import Store

SAID = "dlperf: warning: run 1: its stored row cannot be read (UnicodeDecodeError: "


def test_a_damaged_run_is_left_out_and_the_others_shown(tmp_path):
    db = tmp_path / "d.db"
    store = Store.open(db, create=True)
    planned_run(store, 3, "complete")
    planned_run(store, 3, "complete")
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET env_json = ? WHERE id = 1", (b"\xff\x00\xff",))
    conn.close()
    for args, shown in ((("table", "--run", "2"), "Run 2"), (("list", "--runs"), "complete")):
        said = dlperf(*args, db=db, env={"COLUMNS": "200"})
        assert said.returncode == 1, said.stderr
        assert said.stderr.count(SAID) == 1 and said.stderr.startswith(SAID), said.stderr
        assert shown in said.stdout
    assert dlperf("list", "--runs", db=db).stdout.count("complete") == 1  # run 2's, run 1 left out
    one_line_error(dlperf("table", "--run", "1", db=db), "run 1: its stored row cannot be read")


def test_a_reason_naming_a_file_whose_name_is_not_utf8_is_stored(tmp_path):
    """A truncated image in a class folder named in Latin-1 (`zz_lat\\xe9n`, copied from an old archive) reached the
    store as lone surrogates: SQLite refused them with a traceback, the cell stayed pending, and `--resume` met the
    same traceback every time. The reason is stored with the byte escaped."""
    import dataclasses

    from dlperf.store.process import ProcessMeasurement
    from dlperf.vocab import Status
    from report.runs import cell, measured

    db = tmp_path / "d.db"
    store = Store.open(db, create=True)
    run_id = planned_run(store, 0, None)
    reason = "/data/u2/zz_lat\udce9n/ok3.jpg: image file is truncated"
    key = cell("fcn-r").cell.key
    failed = dataclasses.replace(measured([], "failed"), error=reason)
    store.record(run_id, key, 0, ProcessMeasurement(status=Status.FAILED, error=reason), failed)
    [stored] = [c for c in store.cells(run_id) if c.key == key]
    store.close()
    assert stored.status == "failed" and stored.error == "/data/u2/zz_lat\\udce9n/ok3.jpg: image file is truncated"
