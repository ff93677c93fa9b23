"""A campaign of two "machines" written through the Store API, for the fleet view's tests (report/fleet.py): the
machines told apart by their fingerprints, as `dlperf merge`'s tests fake a second one. The figures are made up for
the view to lay out; nothing here is presented as a measurement of anything."""

from pathlib import Path

from dlperf.protocol import Cell
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell, Prediction
from dlperf.vocab import Status

ALPHA = {"hostname": "alpha", "cpu_model": "Xeon Test", "cores": {"cores": 8}, "gpus": []}
BETA = {"hostname": "beta", "cpu_model": "EPYC Test", "cores": {"cores": 64}, "gpus": ["NVIDIA H100 80GB HBM3"]}
GPU = Cell("fcn-r", "torch", "cuda:0", 1, "fp32")

# machine -> (cell, median seconds, 95% interval of the median)
CELLS = {
    "alpha": [(Cell("fcn-r", "torch", "cpu", 1, "fp32"), 0.80, (0.78, 0.82)),
              (Cell("fcn-r", "torch", "cpu", 2, "fp32"), 0.45, (0.44, 0.46)),
              (Cell("lstm", "torch", "cpu", 1, "fp32"), 0.300, (0.29, 0.31))],
    "beta": [(Cell("fcn-r", "torch", "cpu", 1, "fp32"), 0.50, (0.49, 0.51)),
             (GPU, 0.010, (0.0098, 0.0102)),
             (Cell("lstm", "torch", "cpu", 1, "fp32"), 0.305, (0.295, 0.315))],  # overlaps alpha's lstm
}  # fmt: skip


def write(store: Store, fingerprint: dict, cells: list, campaign: str | None) -> int:
    env = {"hostname": fingerprint["hostname"], "cpu": {"model": fingerprint["cpu_model"]}}
    planned = [PlannedCell(c, {"batch": 64}) for c, _, _ in cells]
    spec = {"spec": 1, **({"campaign": campaign} if campaign else {})}
    run_id = store.create_run(spec, env, fingerprint, ["dlperf", "run"], planned)
    for cell, median, (low, high) in cells:
        m = ProcessMeasurement(status=Status.OK, samples=[median] * 20)
        figures = CellFigures(status=Status.OK, median_s=median, ci_low_s=low, ci_high_s=high, n=20)
        store.record(run_id, cell.key, 0, m, figures)
    return run_id


def make_lab(db: Path) -> Path:
    """Run 1 on alpha and run 2 on beta, campaign "lab" (beta's GPU cell predicted at 12.5 ms); run 3 on alpha in
    no campaign, slower, which the campaign must not show."""
    store = Store.open(db, create=True)
    write(store, ALPHA, CELLS["alpha"], "lab")
    beta = write(store, BETA, CELLS["beta"], "lab")
    store.record_predictions(beta, [Prediction(GPU.key, "H100-SXM5-80GB", "fp32", 64, 0.0125, 0.012, 0.0005,
                                               "compute", {})])  # fmt: skip
    write(store, ALPHA, [(Cell("fcn-r", "torch", "cpu", 2, "fp32"), 9.0, (8.9, 9.1))], None)
    store.close()
    return db
