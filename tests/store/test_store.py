import re
import sqlite3

import pytest

from dlperf.errors import UsageError
from dlperf.protocol import Cell
from dlperf.store import SCHEMA_VERSION, Store
from dlperf.store.process import ProcessDetail, ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell
from dlperf.vocab import Status

CELL = PlannedCell(Cell("fcn-r", "torch", "cpu", 1, "fp32"), {"batch": 1024})
KEY = CELL.cell.key


def new_run(store):
    return store.create_run({"spec": 1}, {"cpu": {"model": "x"}}, {"cpu_model": "x"}, ["dlperf", "run"], [CELL])


def test_schema_is_created_with_its_version(tmp_path):
    store = Store.open(tmp_path / "d.db", create=True)
    version = store.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert int(version) == SCHEMA_VERSION
    cols = {r[1]: r[2] for r in store.conn.execute("PRAGMA table_info(cells)")}
    assert cols["median_s"] == "REAL" and cols["threads"] == "INTEGER" and cols["extra_json"] == "TEXT"


def test_plan_is_stored_pending_then_one_transaction_per_measurement(tmp_path):
    store = Store.open(tmp_path / "d.db", create=True)
    run_id = new_run(store)
    assert store.run().status == "running"
    assert [c.status for c in store.cells(run_id)] == ["pending"]
    m = ProcessMeasurement(status=Status.OK, samples=[1.0, 2.0], detail=ProcessDetail(warmup_steps=3), duration_s=4.0)
    store.record(run_id, KEY, 0, m, CellFigures(status=Status.OK, median_s=1.5, n=2))
    cell = store.cells(run_id)[0]
    assert cell.status == "ok" and cell.median_s == 1.5 and cell.warnings == [] and cell.memory is None
    assert cell.workload_spec == {"batch": 1024} and cell.batch == 1024
    assert store.samples(run_id, KEY) == [[1.0, 2.0]]
    assert store.measurements(run_id, KEY)[0].detail == ProcessDetail(warmup_steps=3)
    assert store.done_repeats(run_id) == {(KEY, 0)}
    store.set_run_status(run_id, "complete")
    assert store.latest_unfinished_run() is None


def test_readers_never_create_a_file(tmp_path):
    with pytest.raises(UsageError, match="no such database"):
        Store.open(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()


def test_corrupt_file_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "bad.db"
    path.write_bytes(b"this is not a database" * 100)
    before = path.read_bytes()
    for create in (True, False):
        with pytest.raises(UsageError, match="not a dlperf database or corrupt"):
            Store.open(path, create=create)
    assert path.read_bytes() == before


def test_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE songs (title TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(UsageError):
        Store.open(path, create=True)


def test_newer_schema_is_refused(tmp_path):
    store = Store.open(tmp_path / "d.db", create=True)
    with store.conn:
        store.conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    store.close()
    with pytest.raises(UsageError, match="newer"):
        Store.open(tmp_path / "d.db", create=True)


def test_unwritable_location(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        Store.open(tmp_path / "nope" / "d.db", create=True)
    with pytest.raises(UsageError, match="directory"):
        Store.open(tmp_path, create=True)


def test_unknown_run(tmp_path):
    store = Store.open(tmp_path / "d.db", create=True)
    with pytest.raises(UsageError, match="no runs yet"):
        store.run()
    new_run(store)
    with pytest.raises(UsageError, match="--run 42"):
        store.run(42)
    assert store.run().env == {"cpu": {"model": "x"}}


def test_check_run_decodes_every_row_and_names_the_one_that_does_not(tmp_path):
    store = Store.open(tmp_path / "d.db", create=True)
    run_id = new_run(store)
    m = ProcessMeasurement(status=Status.OK, samples=[1.0, 2.0], duration_s=4.0)
    store.record(run_id, KEY, 0, m, CellFigures(status=Status.OK, median_s=1.5, n=2))
    assert [r["key"] for r in store.check_run(run_id).cells] == [KEY]
    for sql, where in [
        ("UPDATE measurements SET samples_json = '[1.0, \"x\"]'", f"cell {KEY}, process 0"),
        ("UPDATE cells SET extra_json = '{not json'", f"cell {KEY}: unreadable"),
        ("UPDATE runs SET env_json = 'garbage'", f"run {run_id}: unreadable"),
    ]:
        store.conn.execute(sql)
        with pytest.raises(UsageError, match=re.escape(where)):
            store.check_run(run_id)
    store.close()


def test_a_communication_record_stored_under_its_former_name_reads_as_the_step():
    """CommRecord.step_s was `ddp_step_s` before FSDP, tp, the pipeline and MirroredStrategy reported it too: stores
    written then read the same."""
    from dlperf.store.records import CommRecord

    assert CommRecord.of({"ddp_step_s": 0.5, "local_step_s": 0.4}).step_s == 0.5
    assert CommRecord.of({"step_s": 0.6, "ddp_step_s": 0.5}).step_s == 0.6
    assert CommRecord.of(None) is None
