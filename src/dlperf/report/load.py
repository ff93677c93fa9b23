"""Read what the picture views need from the store: the cells of one or more runs, each with its run id, how many
processes measured it, and the quartiles of its steps (the error bars), plus the runs themselves and what was predicted
for the cells (predict/cells.py)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from itertools import combinations

from dlperf.envinfo import differences
from dlperf.errors import UnreadableRow, UsageError
from dlperf.flagtext import split_list, whole_number
from dlperf.measure.stats import counted
from dlperf.report import crossover
from dlperf.report.crossover import Crossover
from dlperf.report.fleet import one_node, ray_node
from dlperf.report.predicted import read as predictions_of
from dlperf.report.profile import Verdict, verdicts
from dlperf.report.run_list import continued_by
from dlperf.report.utilization import attach_utilization, cells_busy_notes
from dlperf.store import Store
from dlperf.store.records import CellRecord, PredictionRecord, ProfileRecord, RunRecord, in_measured_order
from dlperf.store.state import RunState, run_state, search_of
from dlperf.vocab import Status


@dataclass
class Loaded:
    db: str
    runs: list[RunRecord]  # in the order they were measured, the latest last (`records.measured_order`)
    cells: list[CellRecord]  # with processes, q1_s, q3_s and utilization attached
    samples: dict[str, list[list[float]]]  # cell key -> per-process step times
    peaks_found: bool  # whether any peak of this machine was stored (utilization needs one)
    unreadable: list[UnreadableRow]  # cells left out: their stored rows no longer decode
    profiles: dict[str, ProfileRecord] = field(default_factory=dict)  # cell key -> its run's profile of it
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # cell key -> what bounds its profiled step
    crossovers: list[Crossover] = field(default_factory=list)  # the chosen runs that are `dlperf crossover` runs
    predictions: dict[str, list[PredictionRecord]] = field(default_factory=dict)  # cell key -> its own run's
    sources: dict[str, int] = field(default_factory=dict)  # workload -> the run its cells come from (several runs)
    notes: list[str] = field(default_factory=list)  # what several runs' report left out, and why
    states: dict[int, RunState] = field(default_factory=dict)  # run id -> its state (`store/state.py`)
    searches: dict[int, str] = field(default_factory=dict)  # run id -> the search command it is a run of (api)
    continued: dict[int, RunRecord] = field(default_factory=dict)  # a lost Ray node's run -> the run measuring the rest
    busy_peaks: list[str] = field(default_factory=list)  # utilization held against peaks of a busy machine, said so


def parse_runs(text: str | None) -> list[int] | str | None:
    """`--run`: None (the latest), "all", or a comma list of ids."""
    if text is None or text == "all":
        return text
    parts = split_list(text, "--run")  # a blank (1,,2) said as every list flag says it, not read past
    try:
        ids = [whole_number(part, "--run", least=1) for part in parts]
    except UsageError:
        raise UsageError(f"--run {text!r}: expected a run id, a comma list of ids, or all") from None
    if not ids:
        raise UsageError(f"--run {text!r}: expected a run id, a comma list of ids, or all")
    return ids


def _one_machine(rows: list[RunRecord]) -> None:
    """Runs of one machine and software, or a UsageError naming how two differ. A hostname is a difference here: two
    Ray nodes, or two VMs of one kind, differ by it alone, and one picture of the latest cells would hide one. So is
    the Ray node that measured a run where `fleet.one_node` says so, as `fleet.group` tells machines apart (`table
    --runs`): two nodes of one host in one sweep are two machines, and a node's run is another machine's than a local
    run of its host; two `--ray local` sweeps of one host, a new node id each, are one machine."""
    for a, b in combinations(rows, 2):
        why = differences(a.fingerprint, b.fingerprint)
        if not one_node(a, b):
            node_a, node_b = ray_node(a), ray_node(b)
            of_one = " of one sweep" if node_a and node_b else ""
            why.append(f"Ray node {_node(node_a)} -> {_node(node_b)}{of_one}")
        if why:
            ids = ", ".join(str(r.id) for r in rows)
            raise UsageError(
                f"--run: runs {ids} were measured on different machines or software (run {a.id} -> {b.id}: "
                f"{'; '.join(why)}); report them one at a time, or set them side by side with dlperf report --runs "
                f"{ids.replace(', ', ',')} or dlperf compare"
            )


def _node(node: str | None) -> str:
    return node[:8] if node else "none (not a Ray sweep's run)"


def load(db: str, runs: list[int] | str | None = None) -> Loaded:
    """Cells of the chosen runs: each workload's from the latest run that measured it, so that what a view compares
    (thread counts, modes, frameworks, CPU against GPU) was measured together; another run's cells of that workload
    are left out, named in `notes`. A cell's profile is the latest the chosen runs took of it, whichever run that was.

    Runs from different machines are refused: one picture mixing two machines would mislead (`dlperf compare` is for
    that). A cell whose stored row no longer decodes is left out and named in `unreadable`, for the command to say."""
    store = Store.open(db, create=False)
    try:
        rows = _runs(store, runs)
        _one_machine(rows)
        latest: dict[str, CellRecord] = {}
        samples: dict[str, list[list[float]]] = {}
        predictions: dict[str, list[PredictionRecord]] = {}
        unreadable: list[UnreadableRow] = []
        found = {run.id: store.cells(run.id, unreadable=unreadable.append) for run in rows}
        sources = _sources(found)
        for run in rows:
            predicted = predictions_of(store, run.id, unreadable.append)
            for cell in found[run.id]:
                if sources[cell.workload] != run.id:
                    continue  # measured apart from the cells shown beside it
                try:
                    per_process = [s for s in store.samples(run.id, cell.key) if s]
                except UnreadableRow as fault:
                    unreadable.append(fault)
                    continue
                latest[cell.key] = _enrich(cell, per_process)
                samples[cell.key] = per_process
                predictions[cell.key] = predicted.get(cell.key, [])  # the shown measurement's run predicted these
        cells = list(latest.values())
        peaks = attach_utilization(store, rows[-1].fingerprint, cells)
        busy = cells_busy_notes(store, rows[-1].fingerprint, [c for c in cells if c.utilization is not None])
        profiles, bounds = _profiles(store, rows, cells, unreadable)
        crossovers = crossover.read(store, [r.id for r in rows], unreadable.append)
        states = {r.id: run_state(store, r) for r in rows}
        searches = {
            r.id: s for r in rows if (s := search_of(r, lambda r=r: bool(predictions_of(store, r.id, _ignore))))
        }
        continued = {k: v for k, v in continued_by(store.runs()).items() if k in states}
    finally:
        store.close()
    shown = sources if len(rows) > 1 else {}
    return Loaded(db, rows, cells, samples, peaks, unreadable, profiles, bounds, crossovers, predictions, shown,
                  left_out(found, sources), states, searches, continued, busy)  # fmt: skip


def campaign_of(runs: list[RunRecord]) -> str | None:
    """The campaign the reported runs name (`dlperf run --campaign`), when they name one and the same."""
    named = {r.spec.get("campaign") for r in runs}
    return named.pop() if len(named) == 1 else None


def _sources(found: dict[int, list[CellRecord]]) -> dict[str, int]:
    """Workload -> the latest run that measured it (a run that only planned it counts where no run measured it: an
    unfinished later run does not hide an earlier measurement)."""
    sources: dict[str, int] = {}
    for measured in (False, True):
        for run_id, cells in found.items():  # in the order the runs were measured: the later run wins
            for cell in cells:
                if not measured or cell.status is not Status.PENDING:
                    sources[cell.workload] = run_id
    return sources


def left_out(found: dict[int, list[CellRecord]], sources: dict[str, int]) -> list[str]:
    """Per workload, the cells other runs measured that its run did not: not shown, since they were measured apart
    (a run's cell that the shown run measured again is replaced, not left out)."""
    notes = []
    for workload, run_id in sources.items():
        shown = {c.key for c in found[run_id] if c.workload == workload}
        apart = {c.key: (r, c) for r, cells in found.items() if r != run_id for c in cells
                 if c.workload == workload and c.key not in shown and c.status is not Status.PENDING}  # fmt: skip
        if apart:
            named = ", ".join(f"{_short(c)} of run {r}" for r, c in apart.values())
            flags = ", ".join(f"--run {r}" for r in sorted({r for r, _ in apart.values()}))
            notes.append(f"{workload}: from run {run_id}; {named} left out, measured apart from run {run_id}'s cells "
                         f"(dlperf report {flags} shows them)")  # fmt: skip
    return notes


def _short(cell: CellRecord) -> str:
    return f"{cell.column} {cell.mode}" + (f" data:{cell.loader}" if cell.loader else "")


def _profiles(store: Store, rows: list[RunRecord], cells: list[CellRecord], unreadable: list[UnreadableRow]
              ) -> tuple[dict[str, ProfileRecord], dict[str, Verdict]]:  # fmt: skip
    """The cells' profiles, each the latest the chosen runs took of it (a later run that measured the cell again
    without profiling it does not drop it), and their verdicts; a profile row that no longer decodes leaves the
    report without profiles, named in `unreadable`, rather than without a report."""
    try:
        shown = {c.key for c in cells}
        profiles = {k: p for run in rows for k, p in store.profiles(run.id).items() if k in shown}
        return profiles, verdicts(store, rows[-1].fingerprint, cells, profiles)
    except UnreadableRow as fault:
        unreadable.append(fault)
        return {}, {}


def _runs(store: Store, runs: list[int] | str | None) -> list[RunRecord]:
    """The chosen runs in the order they were measured, the latest last (by its start, not its id: `dlperf merge`
    gives the runs it copies ids in its own order)."""
    if runs is None:
        return [store.run()]
    if runs == "all":
        rows = store.runs()
        if not rows:
            store.run()  # raises the "no runs yet" error
        return in_measured_order(rows)
    return in_measured_order(store.run(i) for i in dict.fromkeys(runs))


def _enrich(cell: CellRecord, per_process: list[list[float]]) -> CellRecord:
    """The cell's process count and its error bars' quartiles, both of the processes its median counts
    (`stats.counted`: a hover read 3 processes where the median kept 1): of its steps, and with several processes the
    median of each process's quartiles, as its median is the median of theirs (so the point lies within its bar: each
    process's median lies between its quartiles, and a median keeps that order). That holds only over the same
    processes: where a process the median counts has one step (it has no quartiles), no bar; a bar of the others
    (processes of 1, 1 and 5 steps: 0.1 to 0.1 s) left the median (1.0 s) outside it."""
    kept = counted(per_process)
    cell.processes = len(kept)
    if kept and cell.ok and all(len(s) >= 2 for s in kept):
        quartiles = [statistics.quantiles(s, n=4, method="inclusive") for s in kept]
        cell.q1_s = statistics.median(q[0] for q in quartiles)
        cell.q3_s = statistics.median(q[2] for q in quartiles)
    return cell


def _ignore(fault: UnreadableRow) -> None:
    """A prediction row that no longer decodes: the cells' own read reports it."""
