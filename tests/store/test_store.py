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


def test_a_run_into_a_newer_stores_file_is_refused_before_planning(tmp_path, monkeypatch):
    """`dlperf run` (and `dlperf.run`) planned first (probe children, the warm parents started: seconds on a GPU
    machine) and refused only as the store opened; the file's version is now read, read-only, before the plan."""
    import dlperf.api

    store = Store.open(tmp_path / "d.db", create=True)
    with store.conn:
        store.conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    store.close()
    before = (tmp_path / "d.db").read_bytes()

    def planned(*args, **kwargs):
        raise AssertionError("planned before the store's version was read")

    monkeypatch.setattr(dlperf.api, "make_plan", planned)
    with pytest.raises(UsageError, match=r"d\.db': schema version 999 is newer than this dlperf \(\d+\): upgrade"):
        dlperf.api.run(["tiny-fcn-r"], db=str(tmp_path / "d.db"), frameworks="torch", threads="1")
    assert (tmp_path / "d.db").read_bytes() == before


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
    from dlperf.store.records import comm_of

    assert comm_of({"ddp_step_s": 0.5, "local_step_s": 0.4}).step_s == 0.5
    assert comm_of({"step_s": 0.6, "ddp_step_s": 0.5}).step_s == 0.6
    assert comm_of(None) is None


def every_figure() -> tuple[CellFigures, ProcessDetail]:
    """A cell's figures and a process's detail with every field away from its default."""
    from dlperf.figures import CommFigures, LoaderFigures
    from dlperf.store.records import CommRecord, CompileRecord, LoaderRecord, LossCheckRecord, Provenance

    check = LossCheckRecord(True, None, 1.5, {"steps": 8})
    compiled = CompileRecord(first_step_s=2.0, compile_s=1.9, graphs=1, graph_breaks=0, frames_compiled=1)
    cell = CellFigures(
        status=Status.OK, error="x", median_s=1.5, iqr_s=0.1, mean_s=1.6, stdev_s=0.2, ci_low_s=1.4, ci_high_s=1.7,
        mean_ci_low_s=1.55, mean_ci_high_s=1.65,
        n=20, samples_s=640.0, warmup_steps=3, params=100, flops_per_step=2000, peak_mem_bytes=4096,
        peak_mem_kind="live_tensors", memory_figures={"live_tensor_peak_bytes": 4096}, flops_by_dtype={"fp32": 2000},
        compile=compiled, loss_check=check, comm=CommRecord(gradient_bytes=400, bound="compute", stage_s=[0.1]),
        data=LoaderRecord("w2", 2, 1, 2, True, "MNIST", 60000, 900.0, 0.2, 0.01, "high"),
        settings={"torch_threads": 1}, warnings=["noisy"], steal_fraction=0.01, others_cpu_share=0.02,
        cpu_utilization=0.9, minor_faults_per_step=3.0, kernel_cpu_share=0.3, build_s=0.5, warmup_steady=False,
        per_process_medians=[1.5],
        dimensions={"ddp": "2"}, shared_from={"flops": "other"}, loss_finite=False,
        provenance=Provenance("torch", "2.13.0", "2.13.0", "dlperf"),
    )  # fmt: skip
    detail = ProcessDetail(
        params=100, build_s=0.5, settings={"torch_threads": 1}, flops_per_step=2000, flops_by_dtype={"fp32": 2000},
        compile=compiled, loss_check=check, stopped_early="2.0x slower", memory={"live_tensor_peak_bytes": 4096},
        warmup_steps=3, warmup_steady=True, warmup_times=[2.0, 1.5], python="/py", framework_version="2.13.0",
        environment="dlperf", affinity=[0], thread_env={"OMP_NUM_THREADS": "1"}, comm=CommFigures(world=2),
        loader=LoaderFigures(setting="w2", wait_s=[0.01]), notes=["no FLOP count"], steal_fraction=0.01,
        others_cpu_share=0.02, others_unread="too short", cpu_utilization=0.9, minor_faults_per_step=3.0,
        kernel_cpu_share=0.3,
        process_hwm_increase_bytes=8192,
        pool_threads=2,
        timeline=[["start", 0.1]], started_at=1795812491.1, phases={"startup_s": 0.1}, traceback="tb",
        stderr_tail="err", ranks=[[1.5], [1.4]],
        slowest_rank=0, hosts=["h"], exit_after_result="worker exited with code 1", loss="nan", started="cold",
        cold_because="a GPU cell starts cold", sources={"/m/layers.py": [9, 1795812490000000000, "ab12"]},
    )  # fmt: skip
    return cell, detail


def test_every_figure_of_a_cell_and_of_a_process_reads_back_as_written(tmp_path):
    """A stored figure is one field: each field of CellFigures and of ProcessDetail is written and read back alike."""
    from dataclasses import fields

    figures, detail = every_figure()
    for record, cls in ((figures, CellFigures), (detail, ProcessDetail)):
        assert all(getattr(record, f.name) not in (None, [], {}, f.default) for f in fields(cls)), "a field is unset"
    store = Store.open(tmp_path / "d.db", create=True)
    run_id = new_run(store)
    store.record(run_id, KEY, 0, ProcessMeasurement(status=Status.OK, samples=[1.5], detail=detail), figures)
    [cell] = store.cells(run_id)
    assert CellFigures(**{f.name: getattr(cell, f.name) for f in fields(CellFigures)}) == figures
    assert store.measurements(run_id, KEY)[0].detail == detail
    store.close()
