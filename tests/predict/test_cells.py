"""A run's GPU cells predicted for their own GPU (predict/cells.py); the table's measured against predicted."""

import pytest

from conftest import dlperf
from dlperf.errors import UsageError
from dlperf.frameworks.common.ops import Count, Op
from dlperf.predict import cells as gpu_predictions
from dlperf.predict import count, roofline
from dlperf.protocol import Cell
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell, Prediction
from dlperf.vocab import Status
from dlperf.workloads import BUILTIN

W = BUILTIN["tiny-fcn-r"]


def env(model="NVIDIA H100 80GB HBM3"):
    devices = [{"name": "cpu"}, {"name": "cuda:0", "model": model, "capability": "9.0"}]
    return {"frameworks": {"torch": {"devices": devices}}}


CELLS = [
    Cell(W.name, "torch", "cuda:0", 1, "fp32"),
    Cell(W.name, "torch", "cuda:0", 1, "bf16+compile"),
    Cell(W.name, "torch", "cuda:0", 1, "bf16+cuda_graphs"),
    Cell(W.name, "torch", "cuda:0", 1, "fp32", nproc=2, scaling="strong"),  # DDP: not predicted
    Cell(W.name, "torch", "cpu", 2, "fp32"),  # not a GPU
]
WORKLOADS = {c.key: W.to_json() for c in CELLS}


def fake_counts(requests, timeout=None):
    op = Op("matmul", "fp32", 2 * 1024**3, 3 * 1024 * 1024 * 4)
    return [Count(w.name, mode, w.batch, (op,), 4096, 100) for w, mode in requests]


def test_each_plain_gpu_cell_is_predicted_for_its_own_gpu_as_its_precision(monkeypatch):
    asked = []
    monkeypatch.setattr(count, "counts", lambda requests, timeout=None: asked.append(requests) or fake_counts(requests))
    rows, warnings = gpu_predictions.predictions(CELLS, WORKLOADS, env())
    assert warnings == [] and len(asked) == 1 and [m for _, m in asked[0]] == ["fp32", "bf16", "bf16"]
    assert [r.cell_key for r in rows] == [CELLS[0].key, CELLS[1].key, CELLS[2].key]
    assert {r.gpu for r in rows} == {"H100-SXM5-80GB"} and [r.mode for r in rows] == ["fp32", "bf16", "bf16"]
    assert all(r.transfer_s == 0 and r.step_s == r.device_s for r in rows)  # synthetic: on the device
    assert rows[1].detail["not_modelled"] == ["compile"] and rows[0].detail["not_modelled"] == []


def test_cuda_graphs_are_modelled_one_launch_a_step(monkeypatch):
    many = Op("memory", "bf16", 0, 4096, calls=500)  # a launch-bound step: 500 tiny kernels
    counted = lambda requests, timeout=None: [Count(w.name, m, w.batch, (many,), 0, 1) for w, m in requests]  # noqa: E731
    monkeypatch.setattr(count, "counts", counted)
    rows, _ = gpu_predictions.predictions(CELLS[1:3], WORKLOADS, env())
    compiled, graphs = rows
    assert graphs.detail["not_modelled"] == [] and graphs.detail["modelled_as"] == "bf16+cuda_graphs"
    assert graphs.detail["parts"]["host"] == roofline.GRAPH_LAUNCH_S
    assert graphs.step_s < compiled.step_s / 3  # eager issues 500 kernels, a graph one launch
    assert rows[0].detail["uncertainty"] == roofline.uncertainty()
    assert "left out of the fit" in rows[0].detail["uncertainty"]


def test_a_gpu_not_in_the_table_and_a_failed_count_warn_and_predict_nothing(monkeypatch):
    monkeypatch.setattr(count, "counts", fake_counts)
    rows, warnings = gpu_predictions.predictions(CELLS, WORKLOADS, env("Some Future Accelerator 9000"))
    assert rows == [] and warnings == [
        "no prediction for Some Future Accelerator 9000: it is not in dlperf's GPU table (dlperf predict --list-gpus); "
        "give its figures with --gpu-specs FILE.csv, in a row named 'Some Future Accelerator 9000'"
    ]

    def broken(requests, timeout=None):
        raise UsageError("the torch probe timed out")

    monkeypatch.setattr(count, "counts", broken)
    rows, warnings = gpu_predictions.predictions(CELLS, WORKLOADS, env())
    assert rows == [] and "the operator count failed (the torch probe timed out)" in warnings[0]


def test_a_cpu_only_plan_asks_for_nothing(monkeypatch):
    monkeypatch.setattr(count, "counts", lambda *a, **k: pytest.fail("counted"))
    assert gpu_predictions.predictions(CELLS[3:], WORKLOADS, env()) == ([], [])


def test_the_real_count_predicts_the_cells():
    rows, warnings = gpu_predictions.predictions(CELLS[:1], WORKLOADS, env("Tesla T4"))
    assert warnings == [] and len(rows) == 1 and rows[0].gpu == "T4" and rows[0].bound == "launch"


def test_the_table_shows_measured_against_predicted_for_a_gpu_cell(tmp_path):
    db = tmp_path / "gpu.db"
    store = Store.open(db, create=True)
    key = CELLS[0].key
    run_id = store.create_run(
        {"spec": 1}, env(), {"cpu_model": "x"}, ["dlperf", "run"], [PlannedCell(CELLS[0], W.to_json())]
    )
    m = ProcessMeasurement(status=Status.OK, samples=[0.010])
    store.record(run_id, key, 0, m, CellFigures(status=Status.OK, median_s=0.010))
    store.record_predictions(
        run_id, [Prediction(key, "H100-SXM5-80GB", "fp32", 16, 0.008, 0.008, 0.0, "launch", {"not_modelled": []})]
    )
    store.close()
    proc = dlperf("table", db=db, env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "predicted: tiny-fcn-r fp32 on cuda:0: measured 10.0 ms, predicted 8.00 ms on H100-SXM5-80GB (-20%)" in (
        proc.stdout
    )


@pytest.fixture
def planned(monkeypatch):
    """`dlperf run` up to its cells: the plan is the GPU cell of an H100 (no probe child), and no cell runs."""
    from dlperf import api

    def plan(spec, before_data=None):
        return api.Plan(spec, CELLS[:1], {CELLS[0].key: WORKLOADS[CELLS[0].key]}, env(), cores=2)

    monkeypatch.setattr(api, "make_plan", plan)
    monkeypatch.setattr(api, "_execute", lambda ctx, tasks, plan, *_: api.Outcome(0, ctx.run_id, plan))
    monkeypatch.setattr(count, "counts", fake_counts)
    return api


def test_a_run_predicts_its_gpu_cells_and_no_predict_skips_it(tmp_path, planned, monkeypatch):
    db = str(tmp_path / "p.db")
    predicted = planned.run("tiny-fcn-r", db=db, argv=["dlperf", "run"]).run_id
    monkeypatch.setattr(gpu_predictions, "predictions", lambda *a: pytest.fail("predicted with predict=False"))
    skipped = planned.run("tiny-fcn-r", db=db, argv=["dlperf", "run"], predict=False).run_id
    store = Store.open(db, create=False)
    try:
        assert list(store.predictions(predicted)) == [CELLS[0].key] and store.predictions(skipped) == {}
        assert store.run(predicted).spec["predict"] is True and store.run(skipped).spec["predict"] is False
    finally:
        store.close()


def test_run_no_predict_on_the_command_line(tmp_path, planned, monkeypatch, capsys):
    from dlperf.cli import main

    monkeypatch.setattr(gpu_predictions, "predictions", lambda *a: pytest.fail("predicted with --no-predict"))
    assert main(["run", "--workloads", "tiny-fcn-r", "--no-predict", "--db", str(tmp_path / "p.db")]) == 0
    assert "predicted:" not in capsys.readouterr().out


def test_a_tf32_cell_is_predicted_at_the_tensor_cores_tf32_peak(monkeypatch):
    monkeypatch.setattr(count, "counts", fake_counts)
    cells = [Cell(W.name, "torch", "cuda:0", 1, "fp32"), Cell(W.name, "torch", "cuda:0", 1, "tf32")]
    rows, _ = gpu_predictions.predictions(cells, {c.key: W.to_json() for c in cells}, env())
    fp32, tf32 = rows
    assert tf32.mode == "tf32" and tf32.detail["not_modelled"] == []
    assert tf32.step_s < fp32.step_s
    assert tf32.detail["parts"]["compute"] < fp32.detail["parts"]["compute"] / 3  # the H100's TF32 peak: 7x FP32
