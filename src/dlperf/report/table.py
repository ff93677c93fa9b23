"""The Table-7 view of Shi et al. (2016): rows workload x framework, columns cpu:1, cpu:2, ... and one per GPU,
cells the median seconds per mini-batch, the best CPU thread count marked.

`build` computes the view from stored cells; `render_*` only lay it out. Extra dimensions (modes, loaders) become
part of the row when a run holds more than one value of them: a loader cell (`--data DIR`) is a row of its own,
labelled `fp32 · data:w2`, beside its synthetic row, never in the synthetic row's place.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field, replace

from dlperf.frameworks.common import capabilities
from dlperf.measure.stats import FEW_SAMPLES
from dlperf.modes import PRECISIONS, ROW, Mode, mode_components
from dlperf.report import data, ddp, fastest, framework_notes
from dlperf.report.charts import (
    DISTURBED_CELL,
    FEW,
    UNTRAINED_MARK,
    disturbances,
    doubt_json,
    doubt_of,
    doubtful,
    trains,
)
from dlperf.report.columns import column_order
from dlperf.report.export import CSV_LINE_END, spreadsheet_safe
from dlperf.report.fastest import tie, told_apart
from dlperf.report.fit import out_of_memory
from dlperf.report.format import markup, table_seconds
from dlperf.report.notes import KERNEL_TOOK, REMAPPED, grouped
from dlperf.report.profile import Verdict
from dlperf.store.records import CellRecord
from dlperf.vocab import LOSS_CHECK_BROKE, OUT_OF_MEMORY, Status

BEST_MARK = "*"
FEW_MARK = "?"  # a median not to rely on: of few samples, or disturbed (`charts.doubtful`), as the paper view marks it
LOSS_MARK = UNTRAINED_MARK  # a cell that did not train: its timed steps' loss was not finite, or failed its loss check


@dataclass
class Row:
    workload: str
    framework: str
    mode: str
    batch: int | None
    cells: dict[str, CellRecord] = field(default_factory=dict)  # column -> cell
    loader: str = ""  # the rows' loader setting; "" on synthetic data

    @property
    def mode_label(self) -> str:
        return mode_label(self.mode, self.loader)

    def timed_cpu_cells(self) -> dict[str, CellRecord]:
        """The CPU cells the star compares: measured, and training (a step whose loss is not finite is no setting to
        recommend, however fast)."""
        return {c: v for c, v in self.cells.items()
                if c.startswith("cpu:") and v.ok and v.median_s and trains(v)}  # fmt: skip

    def best_cpu_column(self) -> str | None:
        """The fastest thread count, only when no compared cell was disturbed (other load, steal, few samples, a
        warm-up that did not settle) and it is told apart from every other (`tied`): a recommendation from a
        disturbed comparison would be the machine's, not the thread count's, and one within the noise a coin's."""
        ok = self.timed_cpu_cells()
        if len(ok) < 2 or any(disturbances(v) for v in ok.values()) or self.tied():
            return None
        return min(ok, key=lambda c: ok[c].median_s)

    def tied(self) -> list[str]:
        """The fastest CPU column and those it is not told apart from (`fastest.told_apart`: their 95% intervals of
        the median overlap; where a cell has none, of under FEW_SAMPLES steps or from an older store, their medians are
        within MEDIANS_APART or an IQR); [] where the fastest stands apart, or nothing is compared."""
        ok = self.timed_cpu_cells()
        if len(ok) < 2:
            return []
        first, *rest = sorted(ok, key=lambda c: ok[c].median_s)
        close = [c for c in rest if not told_apart(ok[first], ok[c])]
        return [first, *close] if close else []

    def unstarred(self) -> str:
        """Why this row compares thread counts but stars none ("disturbed", "tied"), or "" where it stars one or
        compares nothing."""
        if len(self.timed_cpu_cells()) < 2 or self.best_cpu_column() is not None:
            return ""
        return "disturbed" if any(disturbances(v) for v in self.timed_cpu_cells().values()) else "tied"

    @property
    def label(self) -> str:
        mode = "" if self.mode_label == "fp32" else f" {self.mode_label}"
        return f"{self.workload} {self.framework}{mode}"


def star_notes(rows: list[Row]) -> list[str]:
    """One line naming the rows that star no thread count for a disturbed cell (the disturbances themselves are the
    cells' notes), and per reason they tie (`fastest.tie`) one naming those whose fastest is not told apart, with the
    columns tied."""
    disturbed = [r.label for r in rows if r.unstarred() == "disturbed"]
    tied: dict[str, list[str]] = {}  # why they tie (`fastest.tie`) -> the rows, each with its columns tied
    for r in (r for r in rows if r.unstarred() == "tied"):
        tied.setdefault(tie([r.cells[c] for c in r.tied()]), []).append(f"{r.label} ({', '.join(r.tied())})")
    return [
        *([f"no fastest thread count starred in {', '.join(disturbed)}: a compared cell was disturbed (above)"]
          if disturbed else []),
        *(f"no fastest thread count starred in {', '.join(named)}: a tie, {why}, so none is told apart as the fastest"
          for why, named in tied.items()),
    ]  # fmt: skip


@dataclass
class TableView:
    run_id: int
    columns: list[str]
    rows: list[Row]
    show_mode: bool
    notes: list[str]
    versions: list[str] = field(default_factory=list)  # which framework versions measured the cells, from where
    verdicts: dict[str, Verdict] | None = None  # cell key -> what bounds it (`--explain`); None: no verdict column
    pipeline: list[data.Group] = field(default_factory=list)  # the loader cells' groups (the input pipeline view)
    fastest: list[str] = field(default_factory=list)  # which framework is fastest where several measured a cell
    fastest_json: list[dict] = field(default_factory=list)
    machine: str = ""  # the machine that measured the run (`run_list.machine`): a store may hold several


def build(
    run_id: int,
    cells: list[CellRecord],
    verdicts: dict[str, Verdict] | None = None,
    profiles_left: bool = False,
    samples: dict[str, list[list[float]]] | None = None,
) -> TableView:
    """`profiles_left`: the run is unfinished, with profiles of measured cells still to take (`store/state.py`);
    `samples`: cell key -> per-process step times, for the fastest framework's interval (none without them)."""
    rows: dict[tuple, Row] = {}
    for cell in cells:
        key = (cell.workload, cell.framework, cell.mode, cell.loader)
        row = rows.setdefault(key, Row(*key[:3], batch=cell.batch, loader=cell.loader))
        row.cells[cell.column] = cell
    columns = sorted({c.column for c in cells}, key=column_order)
    # one mode is shown too unless it is plain fp32 on synthetic data: `table --modes bf16` read as fp32 figures
    show_mode = len(shown := {(c.mode, c.loader) for c in cells}) > 1 or shown not in ({("fp32", "")}, set())
    notes = _notes(cells) + star_notes(list(rows.values()))
    if verdicts is not None and any(c.key not in verdicts for c in cells):
        how = ("this unfinished run profiles its cells when it goes on (below)" if profiles_left else
               "`dlperf profile WORKLOAD` or `dlperf run --profile` profiles its cells")  # fmt: skip
        notes.append(f"verdict: a cell without a profile shows none; {how}")
    view = TableView(run_id, columns, list(rows.values()), show_mode, notes, versions(cells), verdicts)
    view.pipeline = data.build(cells)
    found = fastest.build(framework_groups(view), samples or {}, lambda c: bool(disturbances(c)), cores_beyond_threads)
    view.fastest, view.fastest_json = fastest.lines(found), [f.to_json() for f in found]
    return view


def framework_groups(view: TableView) -> dict[tuple[str, str, str], list[CellRecord]]:
    """(workload, mode label, column) -> the timed cells that trained, one per framework (`report/fastest.py`)."""
    groups: dict[tuple[str, str, str], list[CellRecord]] = {}
    for row in view.rows:
        mode = row.mode_label if view.show_mode else ""
        for column in view.columns:
            c = row.cells.get(column)
            if c is not None and c.ok and c.median_s and trains(c) and not c.nproc:
                groups.setdefault((row.workload, mode, column), []).append(c)
    return groups


def verdict_text(view: TableView, row: Row) -> str:
    """What bounds the row's profiled cells and the modes to try (those that apply and have a fast path here, as
    `dlperf profile` advises): "memory (highly): try fused", or per column when it has several cells."""
    found = [(c, view.verdicts[row.cells[c].key]) for c in view.columns if c in row.cells
             and row.cells[c].key in (view.verdicts or {})]  # fmt: skip
    text = [f"{v.bound.value} ({v.level})" + (f": try {', '.join(v.modes)}" if v.modes else "") for _, v in found]
    return "; ".join(f"{c} {t}" for (c, _), t in zip(found, text, strict=True)) if len(row.cells) > 1 else "".join(text)


def versions(cells: list[CellRecord]) -> list[str]:
    """ "torch 2.13.0+cpu (dlperf's environment)", one per framework version that measured a cell."""
    found = dict.fromkeys((c.framework, c.framework_version, c.environment) for c in cells if c.framework_version)
    return [f"{fw} {version} ({environment_label(where)})" for fw, version, where in found]


def environment_label(where: str | None) -> str:
    if where is None:
        return "environment unknown"
    return "dlperf's environment" if where == "dlperf" else f"its own environment, {where}"


def _notes(cells: list[CellRecord]) -> list[str]:
    notes = parameter_notes(cells) + grouped([(label, text) for label, _, text in cell_notes(cells)])
    return notes + ddp.notes(ddp.build(cells)) + utilization_notes(cells) + framework_notes.notes(cells)


def utilization_notes(cells: list[CellRecord]) -> list[str]:
    """Where some cells have a utilization and others with FLOPs have none, the columns that lack a measured peak
    (of this machine, device, threads and the dtypes the steps ran in), and how to measure it. Said only once
    `dlperf peak` has measured something, so a run without peaks gets no note for every column."""
    counted = [c for c in cells if c.ok and c.median_s and c.flops_by_dtype]
    if not any(c.utilization is not None for c in counted):
        return []
    notes = []
    missing = sorted({c.column for c in counted if c.utilization is None}, key=column_order)
    if missing:
        how = "dlperf peak --devices D --threads N --dtypes fp32,bf16,fp16 measures them"
        notes.append(f"utilization: no peak of this machine measured for {', '.join(missing)} in the dtypes "
                     f"their steps ran ({how})")  # fmt: skip
    above = [c for c in counted if c.utilization is not None and c.utilization > 1]
    if above:
        named = ", ".join(f"{cell_label(c)} {100 * c.utilization:.0f}%" for c in above)
        notes.append(f"utilization above 100% ({named}): these steps ran faster than the stored peaks allow, so "
                     "those peaks are too low for this machine (measured under load, or with other settings): "
                     "measure them again with dlperf peak on a quiet machine")  # fmt: skip
    return notes


def mode_label(mode: str, loader: str) -> str:
    """The mode column: the mode, and the loader setting of a cell that reads real data (`fp32 · data:w2`)."""
    return f"{mode} · data:{loader}" if loader else mode


def cell_label(cell: CellRecord) -> str:
    """A cell as a person names it: workload, framework, the mode unless fp32 on synthetic data, and its column. A
    cell over real data names its mode as the table's mode column does (`fp32 · data:w0`, `mode_label`)."""
    mode = "" if cell.mode == "fp32" and not cell.loader else f" {mode_label(cell.mode, cell.loader)}"
    return f"{cell.workload} {cell.framework}{mode} {cell.column}"


def note_kind(warning: str) -> str:
    """What a stored warning is about: `noise`, `oversubscription`, or `warning`."""
    if warning.startswith(("CPU steal", "other processes", *OF_THE_FIGURE)):
        return "noise"
    return "oversubscription" if warning.startswith("oversubscribed") else "warning"


# warnings about a median's steps: none where none is shown
OF_THE_FIGURE = ("noisy", "slow steps", "few samples", "processes disagree")


def cell_notes(cells: list[CellRecord]) -> list[tuple[str, str, str]]:
    """(cell label, kind, text) for every stored warning and every cell that was not measured, with its reason.
    Kinds: noise, oversubscription, warning, threads (more cores busy than threads), and the statuses failed,
    timeout, unsupported; a fit try that ran out of memory is kind and text "out of memory ..." (its reason says so),
    as its row says, not "failed"."""
    notes = []
    for c in cells:
        label = cell_label(c)
        for warning in c.warnings:
            if c.ok or not warning.startswith(OF_THE_FIGURE):  # a cell with no figure: what loaded the machine stays
                notes.append((label, note_kind(warning), warning))
        if out_of_memory(c):
            notes.append((label, OUT_OF_MEMORY, c.error))
        elif c.status in (Status.FAILED, Status.TIMEOUT, Status.UNSUPPORTED) and c.error:
            notes.append((label, c.status.value, f"{c.status}: {c.error}"))
        if c.ok and c.loss_check and c.loss_check.ok is False:
            why = f"loss check failed: {c.loss_check.reason}"
            notes.append((label, "warning", f"{why}; the time is kept, but this mode does not train as fp32 does"))
        elif c.ok and c.loss_check and (c.loss_check.reason or "").startswith(LOSS_CHECK_BROKE):  # said in export only
            notes.append((label, "warning", f"loss not checked: {c.loss_check.reason}; whether this mode trains as "
                                            "fp32 does is not known"))  # fmt: skip
        if busy := cores_beyond_threads(c):
            notes.append((label, "threads", f"{CORES_NOTE} {busy:.2f} cores at {c.threads} thread(s)"))
        if said := kernel_note(c, cells):
            notes.append((label, "kernel", said))
        if said := precision_note(c):
            notes.append((label, "precision", said))
    return notes


PRECISION_SHARE = 0.5  # of a cell's counted FLOPs in its mode's precision: below it, a note says where they ran


def precision_note(cell: CellRecord) -> str | None:
    """Where most of a cell's counted FLOPs ran in another dtype than its mode's precision, in which, and why: a
    model built in bf16 runs its fp32 cell in bf16 (an fp32 cell has no autocast: the model runs as built), and
    products autocast does not cast (or run with it disabled) stay fp32 in a bf16 cell. The column's precision is
    then not the one the step ran in."""
    counted = {dtype: flops for dtype, flops in (cell.flops_by_dtype or {}).items() if flops}
    total = sum(counted.values())
    precision = next(p.value for p in mode_components(cell.mode) if p in PRECISIONS)
    if not cell.ok or not total or counted.get(precision, 0) >= PRECISION_SHARE * total:
        return None
    ran = sorted(counted.items(), key=lambda item: -item[1])
    said = ", ".join(f"{100 * flops / total:.0f}% in {dtype}" for dtype, flops in ran)
    own = f"the model's own dtype (its weights or inputs are {ran[0][0]})"
    if precision == Mode.FP32:
        why = f"{own}: an fp32 cell runs the model as built"
    elif ran[0][0] == "fp32":
        why = f"autocast left them so (operations it does not cast to {precision}, or run with it disabled)"
    else:
        why = f"{own}, which autocast does not cast"
    article = "an" if precision.startswith("f") else "a"
    return f"{article} {precision} cell, but its products ran {said} (by FLOPs), {why}"


KERNEL_SHARE = 0.2  # of a CPU cell's CPU time over its timed steps, spent in the kernel: above it, a note says so
REMAPPED_FAULTS = 10_000  # page faults a step (40 MB of 4 KiB pages) beyond it: memory mapped afresh every step


def kernel_note(cell: CellRecord, beside: list[CellRecord] = ()) -> str | None:
    """Where the kernel took KERNEL_SHARE or more of a CPU cell's timed CPU time, what it did: with many page faults
    a step, a backend that keeps glibc's heap and no allocator in the mode yet, the mode to try (`malloc_keep`:
    ResNet-50 at batch 16, 2 threads, faulted in 760,000 pages a step without it, 527 with it), unless a cell
    `beside` it measured that mode (`--modes fp32,malloc_keep` was told to try malloc_keep); else the share and the
    faults, as measured."""
    share, faults = cell.kernel_cpu_share, cell.minor_faults_per_step or 0
    if cell.device != "cpu" or not cell.ok or share is None or share < KERNEL_SHARE:
        return None
    figures = f"{faults:,.0f} page faults a step, the kernel {100 * share:.0f}% of its CPU time"
    allocator = any(ROW[c].group == ROW[Mode.MALLOC_KEEP].group for c in mode_components(cell.mode))
    if faults >= REMAPPED_FAULTS and not allocator and Mode.MALLOC_KEEP in capabilities.of(cell.framework).modes:
        mode = Mode.MALLOC_KEEP.value if cell.mode == Mode.FP32 else f"{cell.mode}+{Mode.MALLOC_KEEP}"  # canonical
        if not any(o.ok and o.mode == mode and replace(o.cell, mode=cell.mode) == cell.cell for o in beside):
            return f"{REMAPPED} {figures}; try --modes {mode}"
    return f"{KERNEL_TOOK} {100 * share:.0f}% of the timed steps' CPU time ({faults:,.0f} page faults a step)"


BEYOND_THREADS = 1.25  # cores kept busy over the threads asked: above it, the framework ran work on threads of its own
CORES_NOTE = "more cores busy than threads:"


def cores_beyond_threads(cell: CellRecord) -> float | None:
    """The cores a CPU cell's timed steps kept busy, where that is well above its thread count: the framework ran
    work on threads beside the N asked (MXNet's engine worker beside the Python thread that feeds it, say), so the
    cell's thread count does not mean the same as another framework's."""
    used = cell.cpu_utilization
    if cell.device != "cpu" or not cell.ok or not cell.threads or used is None or cell.nproc:
        return None
    return used if used > BEYOND_THREADS * cell.threads else None


def parameter_notes(cells: list[CellRecord]) -> list[str]:
    """Where frameworks train a different number of parameters for one workload, say so, with the deviation each
    backend documents: rows of one workload compare like with like only up to that."""
    notes = []
    by_workload: dict[str, dict[str, CellRecord]] = {}
    for c in cells:
        if c.params is not None:
            by_workload.setdefault(c.workload, {}).setdefault(c.framework, c)
    for workload, per_framework in by_workload.items():
        if len({c.params for c in per_framework.values()}) < 2:
            continue
        parts = []
        for framework, c in per_framework.items():
            reference = c.workload_spec.get("params")
            deviations = (c.settings or {}).get("deviations") or []
            # a backend's other documented deviations (initializers, say) do not explain a count that matches
            why = "; ".join(deviations) if reference is None or c.params != reference else ""
            parts.append(f"{framework} {c.params:,}" + (f" ({why})" if why else ""))
        notes.append(f"{workload}: the frameworks train different parameter counts: {', '.join(parts)}")
    return notes


def marks(row: Row, column: str) -> str:
    """The marks of a timed cell, as the text view puts them after its median: `!` or `*`, then `?` (few samples, or
    disturbed: a 2-thread cell slowed 2.1x by other processes read as plainly slower than 1 thread, its cause said
    only in the notes below, where the paper view and the report marked it)."""
    cell = row.cells.get(column)
    if cell is None or not cell.ok or cell.median_s is None:
        return ""
    mark = LOSS_MARK if not trains(cell) else BEST_MARK if column == row.best_cpu_column() else ""
    return mark + (FEW_MARK if doubtful(cell) else "")


def cell_text(row: Row, column: str) -> str:
    cell = row.cells.get(column)
    if cell is None:
        return ""
    if not cell.ok or cell.median_s is None:
        return OUT_OF_MEMORY if out_of_memory(cell) else cell.status.value  # a batch that did not fit, as it says
    n = f" n={cell.n}" if cell.n is not None else ""
    util = f" ({100 * cell.utilization:.0f}%)" if cell.utilization is not None else ""
    return f"{table_seconds(cell.median_s)}{marks(row, column)}{n}{util}"


def head(view: TableView) -> list[str]:
    explain = ["verdict"] if view.verdicts is not None else []
    return ["workload", "framework", *(["mode"] if view.show_mode else []), "batch", *view.columns, *explain]


def fixed_count(view: TableView) -> int:
    """The columns before the device columns."""
    return 3 + view.show_mode


def row_values(view: TableView, row: Row) -> list[str]:
    fixed = [row.workload, row.framework, *([row.mode_label] if view.show_mode else []), str(row.batch or "")]
    explain = [verdict_text(view, row)] if view.verdicts is not None else []
    return fixed + [cell_text(row, c) for c in view.columns] + explain


LEGEND = (
    "seconds per mini-batch (under 0.1 s in ms or µs): median of n steady-state training steps (forward, backward, "
    "update)"
)
# the CSV's device columns: a number of seconds whatever its size (the text view writes ms and µs)
CSV_LEGEND = (
    "seconds per mini-batch, as a plain number (never ms or µs): median of n steady-state training steps (forward, "
    "backward, update)"
)
BEST_LEGEND = f"{BEST_MARK} = fastest CPU thread count (only when no compared cell was disturbed, nor tied with it)"
FEW_LEGEND = f"{FEW_MARK} = {FEW}"
UTILIZATION_LEGEND = (
    "(N%) = utilization: the step's FLOPs at the peak `dlperf peak` measured for the same device and threads, as a "
    "share of the step time"
)


PROCESSES_LEGEND = (
    f"a cell of several processes (--repeats): the median of their medians (of {FEW_SAMPLES} steps or "
    "more, where one has that many), n all their steps"
)
LOSS_LEGEND = (
    f"{LOSS_MARK} = the loss was not finite (nan or inf) after the timed steps, or the mode failed its loss check "
    "against fp32 (the notes say which): timed, but not training"
)


DOUBT_LEGEND = (
    f"{FEW_MARK} = a median not to rely on (busy CPUs, steal, few steps, warm-up, processes apart: its note says which)"
)


def _doubt_legend(shown: list[CellRecord]) -> str:
    """`?` explained: few samples where that is all the marked cells have, else any disturbance (the notes say how)."""
    return FEW_LEGEND if doubt_of(shown) != DISTURBED_CELL else DOUBT_LEGEND


def mark_legends(view: TableView) -> list[str]:
    """Each mark a timed cell of the view carries, explained."""
    shown = [c for r in view.rows for c in r.cells.values() if c.ok and c.median_s is not None]
    return [
        *([BEST_LEGEND] if any(r.best_cpu_column() for r in view.rows) else []),
        *([_doubt_legend(shown)] if any(map(doubtful, shown)) else []),
        *([UTILIZATION_LEGEND] if any(c.utilization is not None for c in shown) else []),
        *([PROCESSES_LEGEND] if any(len(c.per_process_medians or ()) > 1 for c in shown) else []),
        *([LOSS_LEGEND] if not all(map(trains, shown)) else []),
    ]


def legend(view: TableView) -> list[str]:
    """The table's legend, each mark explained only where a cell carries it."""
    found = mark_legends(view)
    inline = [m for m in found if m != LOSS_LEGEND]
    head = LEGEND + "; " + ", ".join(inline) if inline else LEGEND
    return [head, *([LOSS_LEGEND] if LOSS_LEGEND in found else [])]


def render_markdown(view: TableView) -> str:
    header = head(view)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row_values(view, r)) + " |" for r in view.rows]
    pipeline = ["", data.render_markdown(view.pipeline)] if view.pipeline else []
    notes = ["", *(f"- note: {note}" for note in view.notes), ""] if view.notes else []  # the text view's, as a list
    fastest = [*view.fastest, ""] if view.fastest and not notes else view.fastest  # its list ends before what follows
    return "\n".join([*lines, "", *legend(view), *fastest, *notes, *version_lines(view), *pipeline])


def version_lines(view: TableView) -> list[str]:
    """The machine and the frameworks' versions that measured the cells."""
    on = [f"measured on: {view.machine}"] if view.machine else []
    return on + ([f"measured with: {'; '.join(view.versions)}"] if view.versions else [])


def render_csv(view: TableView) -> str:
    """The text view for a spreadsheet or a script: a device column holds the raw median (a number) or the cell's
    status, as it always has; after the view's own columns, each device column's n and marks (`*`, `?`, `!`, as the
    text view shows them); then the unit and the legend of the marks shown, the notes, and the machine and versions
    that measured the cells, one row each, "legend", "note", "measured on" or "measured with" first; then the input
    pipeline's section, where there are loader cells (`data.csv_rows`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=CSV_LINE_END)
    writer.writerow([*head(view), *(f"{c} {what}" for c in view.columns for what in ("n", "marks"))])
    for row in view.rows:
        values = row_values(view, row)
        fixed, explain = values[: fixed_count(view)], values[fixed_count(view) + len(view.columns) :]
        raw = [_raw(row.cells.get(c)) for c in view.columns]
        counted = [v for c in view.columns for v in (_n(row.cells.get(c)), marks(row, c))]
        writer.writerow([spreadsheet_safe(v) for v in fixed] + raw + [spreadsheet_safe(v) for v in explain] + counted)
    shown = [line for line in mark_legends(view) if line != UTILIZATION_LEGEND]  # no utilization in these columns
    writer.writerows(["legend", spreadsheet_safe(line)] for line in [CSV_LEGEND, *shown])
    writer.writerows(["fastest", spreadsheet_safe(line)] for line in view.fastest)
    writer.writerows(["note", spreadsheet_safe(note)] for note in view.notes)
    writer.writerows([what, spreadsheet_safe(line.split(": ", 1)[1])] for what, line in
                     zip(("measured on", "measured with"), version_lines(view), strict=False))  # fmt: skip
    pipeline = data.csv_rows(view.pipeline) if view.pipeline else []
    writer.writerows([spreadsheet_safe(v) for v in row] for row in pipeline)
    return out.getvalue()


def _n(cell: CellRecord | None) -> str:
    return "" if cell is None or cell.n is None or not cell.ok else str(cell.n)


def _raw(cell: CellRecord | None) -> str:
    if cell is None:
        return ""
    return repr(cell.median_s) if cell.ok and cell.median_s is not None else cell.status.value


def render_json(view: TableView) -> str:
    rows = []
    for row in view.rows:
        best = row.best_cpu_column()
        rows.append({
            "workload": row.workload, "framework": row.framework, "mode": row.mode, "batch": row.batch,
            **({"loader": row.loader} if row.loader else {}),
            "cells": {c: {"status": v.status.value, "median_s": v.median_s, "iqr_s": v.iqr_s, "n": v.n,
                          "best": c == best, "error": v.error, "utilization": v.utilization,
                          "framework_version": v.framework_version, "environment": v.environment,
                          **({"loss_finite": False} if v.loss_finite is False else {}),
                          **({"loss_ok": False} if v.loss_check and v.loss_check.ok is False else {}),
                          **doubt_json(v), **_verdict_json(view, v)}
                      for c, v in row.cells.items()},
        })  # fmt: skip
    data = {
        "run_id": view.run_id,
        "columns": view.columns,
        "rows": rows,
        "notes": view.notes,
        "versions": view.versions,
        **({"machine": view.machine} if view.machine else {}),
        **({"fastest": view.fastest_json} if view.fastest_json else {}),
        **({"input_pipeline": [g.to_json() for g in view.pipeline]} if view.pipeline else {}),
    }
    return json.dumps(data, indent=2)


def _verdict_json(view: TableView, cell: CellRecord) -> dict:
    if view.verdicts is None:
        return {}
    v = view.verdicts.get(cell.key)
    return {"verdict": v and {"bound": v.bound.value, "level": v.level, "figure": v.figure, "modes": list(v.modes),
                              "advice": v.advice or None, "left_out": dict(v.left_out),
                              "measured": dict(v.measured)}}  # fmt: skip


def render_rich(view: TableView):
    from rich.table import Table

    table = Table(title=f"Run {view.run_id}: seconds per mini-batch")
    for i, name in enumerate(head(view)):
        numeric = fixed_count(view) <= i < fixed_count(view) + len(view.columns)
        table.add_column(name, justify="right" if numeric else "left")
    for row in view.rows:
        values = row_values(view, row)
        best = row.best_cpu_column()
        names = (
            [None] * fixed_count(view) + view.columns + [None] * (len(values) - fixed_count(view) - len(view.columns))
        )
        styled = [f"[bold green]{markup(v)}[/]" if c is not None and c == best else _style(v)
                  for c, v in zip(names, values, strict=True)]  # fmt: skip
        table.add_row(*styled)
    return table


def _style(text: str) -> str:
    quiet = {"unsupported": "dim", OUT_OF_MEMORY: "dim", "pending": "yellow"}  # out of memory: a fit's try, as it says
    colour = {"failed": "red", "timeout": "red", **quiet}.get(text)
    return f"[{colour}]{markup(text)}[/]" if colour else markup(text)
