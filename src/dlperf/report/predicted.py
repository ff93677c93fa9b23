"""A GPU cell's measured step beside the step dlperf predicted for its GPU (predict/cells.py, stored with the run):
the prediction's error, one row per cell, read by `dlperf table`, the HTML report and `dlperf export`.

The predictor models the device and the batch's copy, not the loader that feeds it. A loader cell (`--data DIR`)
measured its loader alone too (`LoaderRecord.alone_samples_per_s`), so its prediction is set against the measurement
with that loader's batch time (`with_loader`): added to the step where the step's own process loads (w0), the larger
of the two where workers load beside it; input-bound where the loader's time is the larger. On an H200 (issue 27,
10eb4c4) the device alone was 46-94% under the loader cells it predicted (fcn-r w0: 2.47 against 39.2 ms); with the
loader, fcn-r w0 38.2 ms (-3%), fcn-r w2+pin 16.2 (+3%), resnet-50 w0 102 (-6%)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

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


@dataclass(frozen=True)
class Fed:
    """A loader cell's prediction with its loader: the step, the loader's batch alone, and whether the step's own
    process loads (w0)."""

    step_s: float
    loader_s: float
    serial: bool
    bound: str

    def said(self) -> str:
        where = "in the step's process" if self.serial else "beside the step"
        return f"with this host's loader ({seconds(self.loader_s)} a batch {where}): {seconds(self.step_s)}"


def with_loader(cell: CellRecord, p: PredictionRecord) -> Fed | None:
    """The predicted step of a loader cell fed by its loader as measured alone; None for a cell on synthetic data or
    whose loader was not measured alone."""
    data = cell.data
    if not cell.loader or data is None or not data.alone_samples_per_s or not cell.batch:
        return None
    loader_s = cell.batch / data.alone_samples_per_s
    serial = not data.workers
    step_s = p.step_s + loader_s if serial else max(p.step_s, loader_s)
    return Fed(step_s, loader_s, serial, "input" if loader_s > p.step_s else p.bound)


def step_and_bound(cell: CellRecord, p: PredictionRecord, fed: Fed | None = None) -> tuple[float, str]:
    """What the cell's measurement is set against: the predicted step and its bound, with its loader where it has
    one (`fed`, when the caller has it already)."""
    fed = fed or with_loader(cell, p)
    return (fed.step_s, fed.bound) if fed else (p.step_s, p.bound)


def own(cell: CellRecord, predictions: dict[str, list[PredictionRecord]]) -> PredictionRecord | None:
    """The cell's prediction for its own device; a crossover's predictions are for other GPUs than the cell's."""
    return next((p for p in predictions.get(cell.key, []) if not p.detail.get("crossover")), None)


@dataclass(frozen=True)
class Row:
    """A measured cell and its own device's prediction."""

    cell: CellRecord
    prediction: PredictionRecord

    @cached_property
    def fed(self) -> Fed | None:
        return with_loader(self.cell, self.prediction)

    @property
    def step_and_bound(self) -> tuple[float, str]:
        return step_and_bound(self.cell, self.prediction, self.fed)

    @property
    def error(self) -> float:
        return relative_error(self.step_and_bound[0], self.cell.median_s)

    @property
    def not_modelled(self) -> list[str]:
        return self.prediction.detail.get("not_modelled") or []

    def line(self) -> str:
        c, p = self.cell, self.prediction
        modelled = f" (as {p.mode}: {', '.join(self.not_modelled)} not modelled)" if self.not_modelled else ""
        loader = f" {c.loader}" if c.loader else ""
        return (f"predicted: {c.workload} {c.mode}{loader} on {c.device}: measured {seconds(c.median_s)}, predicted "
                f"{seconds(p.step_s)} on {p.gpu}{modelled}{f', {self.fed.said()}' if self.fed else ''} "
                f"({100 * self.error:+.0f}%), {self.step_and_bound[1]}-bound")  # fmt: skip

    def values(self) -> list[str]:
        """The row's texts, in HEAD's order."""
        c, p = self.cell, self.prediction
        not_modelled = f"{', '.join(self.not_modelled)} (predicted as {p.mode})" if self.not_modelled else "-"
        step, bound = self.step_and_bound
        mode = f"{c.mode} data:{c.loader}" if c.loader else c.mode
        return [c.workload, mode, c.device, p.gpu, seconds(c.median_s), seconds(step),
                f"{100 * self.error:+.0f}%", bound, not_modelled]  # fmt: skip


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
