"""Read what the picture views need from the store: the cells of one or more runs, each with its run id, how many
processes measured it, and the quartiles of its steps (the error bars), plus the runs themselves and what was predicted
for the cells (predict/cells.py)."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field

from dlperf.errors import UnreadableRow, UsageError
from dlperf.report import crossover
from dlperf.report.crossover import Crossover
from dlperf.report.predicted import read as predictions_of
from dlperf.report.profile import Verdict, profiles_of, verdicts
from dlperf.report.utilization import attach_utilization
from dlperf.spec import whole_number
from dlperf.store import Store
from dlperf.store.records import CellRecord, PredictionRecord, ProfileRecord, RunRecord
from dlperf.vocab import Status


@dataclass
class Loaded:
    db: str
    runs: list[RunRecord]
    cells: list[CellRecord]  # with processes, q1_s, q3_s and utilization attached
    samples: dict[str, list[list[float]]]  # cell key -> per-process step times
    peaks_found: bool  # whether any peak of this machine was stored (utilization needs one)
    unreadable: list[UnreadableRow]  # cells left out: their stored rows no longer decode
    profiles: dict[str, ProfileRecord] = field(default_factory=dict)  # cell key -> its run's profile of it
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # cell key -> what bounds its profiled step
    crossovers: list[Crossover] = field(default_factory=list)  # the chosen runs that are `dlperf crossover` runs
    predictions: dict[str, list[PredictionRecord]] = field(default_factory=dict)  # cell key -> its own run's


def parse_runs(text: str | None) -> list[int] | str | None:
    """`--run`: None (the latest), "all", or a comma list of ids."""
    if text is None or text == "all":
        return text
    try:
        ids = [whole_number(part, "--run", least=1) for part in text.split(",") if part.strip()]
    except UsageError:
        raise UsageError(f"--run {text!r}: expected a run id, a comma list of ids, or all") from None
    if not ids:
        raise UsageError(f"--run {text!r}: expected a run id, a comma list of ids, or all")
    return ids


def load(db: str, runs: list[int] | str | None = None) -> Loaded:
    """Cells of the chosen runs; where two runs measured the same cell, the later run's measurement is shown.

    Runs from different machines are refused: one picture mixing two machines would mislead (`dlperf compare` is for
    that). A cell whose stored row no longer decodes is left out and named in `unreadable`, for the command to say."""
    store = Store.open(db, create=False)
    try:
        rows = _runs(store, runs)
        machines = {json.dumps(r.fingerprint, sort_keys=True) for r in rows}
        if len(machines) > 1:
            ids = ", ".join(str(r.id) for r in rows)
            raise UsageError(
                f"--run: runs {ids} were measured on different machines; report them one at a time, or set them "
                "side by side with dlperf compare"
            )
        latest: dict[str, CellRecord] = {}
        samples: dict[str, list[list[float]]] = {}
        predictions: dict[str, list[PredictionRecord]] = {}
        unreadable: list[UnreadableRow] = []
        for run in rows:
            predicted = predictions_of(store, run.id, unreadable.append)
            for cell in store.cells(run.id, unreadable=unreadable.append):
                if cell.status is Status.PENDING and cell.key in latest:
                    continue  # an unfinished later run does not hide an earlier measurement
                try:
                    per_process = [s for s in store.samples(run.id, cell.key) if s]
                except UnreadableRow as fault:
                    unreadable.append(fault)
                    continue
                latest[cell.key] = _enrich(cell, per_process)
                samples[cell.key] = per_process
                predictions[cell.key] = predicted.get(cell.key, [])  # the shown measurement's run predicted these
        cells = list(latest.values())
        found = attach_utilization(store, rows[-1].fingerprint, cells)
        profiles, bounds = _profiles(store, rows[-1].fingerprint, cells, unreadable)
        crossovers = crossover.read(store, [r.id for r in rows], unreadable.append)
    finally:
        store.close()
    return Loaded(db, rows, cells, samples, found, unreadable, profiles, bounds, crossovers, predictions)


def _profiles(store: Store, fingerprint: dict, cells: list[CellRecord], unreadable: list[UnreadableRow]
              ) -> tuple[dict[str, ProfileRecord], dict[str, Verdict]]:  # fmt: skip
    """The cells' profiles and verdicts; a profile row that no longer decodes leaves the report without profiles,
    named in `unreadable`, rather than without a report."""
    try:
        return profiles_of(store, cells), verdicts(store, fingerprint, cells)
    except UnreadableRow as fault:
        unreadable.append(fault)
        return {}, {}


def _runs(store: Store, runs: list[int] | str | None) -> list[RunRecord]:
    if runs is None:
        return [store.run()]
    if runs == "all":
        rows = store.runs()
        if not rows:
            store.run()  # raises the "no runs yet" error
        return rows
    return sorted((store.run(i) for i in dict.fromkeys(runs)), key=lambda r: r.id)


def _enrich(cell: CellRecord, per_process: list[list[float]]) -> CellRecord:
    pooled = [x for s in per_process for x in s]
    cell.processes = len(per_process)
    if len(pooled) >= 2 and cell.ok:
        cell.q1_s, _, cell.q3_s = statistics.quantiles(pooled, n=4, method="inclusive")
    return cell
