"""A GPU cell's measured step beside the step dlperf predicted for its GPU (predict/cells.py, stored with the run):
the prediction's error, one line per cell."""

from __future__ import annotations

from dlperf.report.format import seconds
from dlperf.store.records import CellRecord, PredictionRecord


def error(measured_s: float, predicted_s: float) -> float:
    """Signed relative error of the prediction (+0.10: predicted 10% slower than measured)."""
    return predicted_s / measured_s - 1


def lines(cells: list[CellRecord], predictions: dict[str, list[PredictionRecord]]) -> list[str]:
    """For each cell measured with a prediction for its device: measured, predicted, the error, the bound."""
    out = []
    for c in cells:
        for p in predictions.get(c.key, []):
            if p.detail.get("crossover") or c.median_s is None:
                continue  # a crossover's prediction is for another device than the cell's
            not_modelled = p.detail.get("not_modelled") or []
            modelled = f" (as {p.mode}: {', '.join(not_modelled)} not modelled)" if not_modelled else ""
            out.append(
                f"predicted: {c.workload} {c.mode} on {c.device}: measured {seconds(c.median_s)}, predicted "
                f"{seconds(p.step_s)} on {p.gpu}{modelled} ({100 * error(c.median_s, p.step_s):+.0f}%), {p.bound}-bound"
            )
    return out
