"""A GPU cell's measured step beside the step dlperf predicted for its GPU (predict/cells.py, stored with the run):
the prediction's error, one row per cell, read by `dlperf table`, the HTML report and `dlperf export`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dlperf.errors import UnreadableRow
from dlperf.predict import roofline
from dlperf.predict.validate import relative_error
from dlperf.report.format import seconds
from dlperf.store import Store
from dlperf.store.records import CellRecord, PredictionRecord

HEAD = ("workload", "mode", "device", "GPU (as predicted)", "measured step", "predicted step", "error", "bound",
        "not modelled")  # fmt: skip


def read(store: Store, run_id: int, unreadable: Callable[[UnreadableRow], None]) -> dict[str, list[PredictionRecord]]:
    """The run's predictions by cell key; a row that no longer decodes leaves the run without them, handed to
    `unreadable`, rather than the view without its cells."""
    try:
        return store.predictions(run_id)
    except UnreadableRow as fault:
        unreadable(fault)
        return {}


def own(cell: CellRecord, predictions: dict[str, list[PredictionRecord]]) -> PredictionRecord | None:
    """The cell's prediction for its own device; a crossover's predictions are for other GPUs than the cell's."""
    return next((p for p in predictions.get(cell.key, []) if not p.detail.get("crossover")), None)


@dataclass(frozen=True)
class Row:
    """A measured cell and its own device's prediction."""

    cell: CellRecord
    prediction: PredictionRecord

    @property
    def error(self) -> float:
        return relative_error(self.prediction.step_s, self.cell.median_s)

    @property
    def not_modelled(self) -> list[str]:
        return self.prediction.detail.get("not_modelled") or []

    def line(self) -> str:
        c, p = self.cell, self.prediction
        modelled = f" (as {p.mode}: {', '.join(self.not_modelled)} not modelled)" if self.not_modelled else ""
        return (f"predicted: {c.workload} {c.mode} on {c.device}: measured {seconds(c.median_s)}, predicted "
                f"{seconds(p.step_s)} on {p.gpu}{modelled} ({100 * self.error:+.0f}%), {p.bound}-bound")  # fmt: skip

    def values(self) -> list[str]:
        """The row's texts, in HEAD's order."""
        c, p = self.cell, self.prediction
        not_modelled = f"{', '.join(self.not_modelled)} (predicted as {p.mode})" if self.not_modelled else "-"
        return [c.workload, c.mode, c.device, p.gpu, seconds(c.median_s), seconds(p.step_s),
                f"{100 * self.error:+.0f}%", p.bound, not_modelled]  # fmt: skip


def rows(cells: list[CellRecord], predictions: dict[str, list[PredictionRecord]]) -> list[Row]:
    """Each measured cell with a prediction for its own device, in the cells' order."""
    found = ((c, own(c, predictions)) for c in cells if c.median_s)  # a step of 0 s has no error
    return [Row(c, p) for c, p in found if p is not None]


def lines(found: list[Row]) -> list[str]:
    """For each row: measured, predicted, the error, the bound; then the predictor's uncertainty."""
    return [*(r.line() for r in found), note(found)] if found else []


def note(found: list[Row]) -> str:
    """The uncertainty the predictions were stored with (the validation's error then), or today's for rows without."""
    stored = dict.fromkeys(r.prediction.detail.get("uncertainty") or roofline.uncertainty() for r in found)
    said = "; ".join(u for u in stored if u) or "unknown (no fit)"
    return f"the predictor's uncertainty: {said}; error: predicted / measured - 1, + when predicted slower"
