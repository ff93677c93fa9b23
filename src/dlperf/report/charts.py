"""What the pictures show, as data: each chart a list of series of points, every point with the hover text that
traces it to its cell (n, IQR, processes, run). Pure functions of stored cells; `figures` draws them with matplotlib
for the HTML report and for `dlperf plot`.

Series are told apart by the cell dimensions other than the chart's axes: framework and mode today, and whatever a
later measurement adds to a cell's `dimensions` (e.g. `{"ddp": "2"}`), so a new dimension needs no change here.
Columns (`cpu:4`, `cuda:0`, ...) are each cell's `column`, so new kinds of column appear in the bar charts as is.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from dlperf.measure.stats import FEW_SAMPLES, few
from dlperf.report.columns import column_order
from dlperf.report.format import count, seconds
from dlperf.store.records import CellRecord
from dlperf.vocab import Status

BASELINE_MODE = "fp32"


@dataclass
class Point:
    x: float | str  # a number on a numeric axis, a category name on a bar chart
    y: float
    low: float | None = None  # error bar: the first and third quartile of the steps
    high: float | None = None
    tip: str = ""  # what hovering shows
    doubtful: bool = False  # a figure not to rely on (the chart's `doubt` says why): drawn hollow, with a "?"


@dataclass
class Series:
    label: str
    points: list[Point]
    ideal: bool = False  # a reference line (ideal scaling), drawn dashed and without hover
    dashed: bool = False  # a series of predictions: drawn dashed, with its points and hover


@dataclass
class Chart:
    id: str  # stable and unique within a report: the HTML anchor and the `dlperf plot` selector
    kind: str  # "lines" (numeric x), "bars" (categories on x, one bar per series in each), "stacked" (one
    # horizontal bar per category, the series its parts, in percent) or "columns" (one upright bar per category,
    # the series its parts stacked bottom up, in the axis' unit) or "hbars" (one lying bar per category, its
    # value written beside it, the labels level at the left)
    title: str
    xlabel: str
    ylabel: str
    series: list[Series]
    categories: list[str] = field(default_factory=list)  # bars: the groups, in order
    log_x: bool = False
    log_y: bool = False
    caption: str = ""
    labels: dict[str, str] = field(default_factory=dict)  # stacked: category -> the text beside its bar
    lines: dict[str, float] = field(default_factory=dict)  # columns: a reference's label -> its height, drawn dashed
    marks: dict[str, float] = field(default_factory=dict)  # lines: a marked x's label -> x, drawn as a dotted upright
    doubt: str = ""  # what a doubtful point is, for the legend and the caption ("fewer than 6 samples")
    base: float = 0.0  # bars: where each rises from (a speed-up's 1x: on a log axis a bar from its bottom says nothing)

    @property
    def points(self) -> list[Point]:
        return [p for s in self.series if not s.ideal for p in s.points]


# ----------------------------------------------------------------------------------------------------------------------
# Dimensions


def dimensions(cell: CellRecord) -> dict[str, str]:
    """A cell's dimensions besides workload and column: framework, mode, its loader when it reads real data (`data`),
    and any a measurement adds."""
    return {"framework": cell.framework, "mode": cell.mode, **({"data": cell.loader} if cell.loader else {}),
            **cell.dimensions}  # fmt: skip


def varying(cells: list[CellRecord]) -> list[str]:
    """The dimensions that take more than one value among `cells`, a cell without one counting as "": the ones a
    label must show (a loader cell's `data:w2` beside the synthetic cell's nothing)."""
    found = [dimensions(c) for c in cells]
    keys = dict.fromkeys(k for d in found for k in d)
    return [k for k in keys if len({d.get(k, "") for d in found}) > 1]


def series_label(cell: CellRecord, shown: list[str]) -> str:
    dims = dimensions(cell)
    keys = shown or ["framework", "mode"]
    dims.setdefault("data", "synthetic")  # beside loader cells, the paper's batch on the device is named too
    return " ".join(dims[k] if k in ("framework", "mode") else f"{k}:{dims[k]}" for k in keys if k in dims)


ERROR_BARS = "interquartile range of the steps; of several processes, the median of their quartiles"
DOUBT_MARK = "?"  # beside a doubtful point, as beside a table's cell of few samples (report/table.py's FEW_MARK)
FEW = f"fewer than {FEW_SAMPLES} samples"  # what the mark says, here and in the tables' legends


def few_samples(cell: CellRecord) -> bool:
    """A median of fewer than FEW_SAMPLES timed steps: its error bar, from as few steps, says nothing of its spread
    (none at all for one step)."""
    return few(cell.n)


DISTURBANCES = ("CPU steal", "other processes", "few samples", "warm-up did not settle", "processes disagree")
DISTURBED_CELL = "a disturbed cell (busy CPUs, steal, few steps, warm-up)"  # the mark, where not only few samples


def disturbances(cell: CellRecord) -> list[str]:
    """The cell's warnings that say its median is not only the model's: other processes' load, steal time, too few
    samples, a warm-up that did not settle (the timed steps may still drift). A wide IQR alone is not one: steps
    vary, and the star compares medians (their intervals, which a wide spread widens, say when they tie)."""
    return [w for w in cell.warnings if w.startswith(DISTURBANCES)]


def doubtful(cell: CellRecord) -> bool:
    """A figure not to rely on, by the judgement for which the table stars no thread count (`disturbances`) or marks
    a cell `?` (few samples): a chart draws it hollow or hatched, as the paper's row marks it."""
    return few_samples(cell) or bool(disturbances(cell))


def trains(cell: CellRecord) -> bool:
    """Not known not to train: its timed steps' loss was finite (or not said) and it did not fail its loss check
    against fp32 (a mode fast because it no longer learns is no setting to recommend, however fast)."""
    return cell.loss_finite is not False and not (cell.loss_check and cell.loss_check.ok is False)


def marked(cell: CellRecord) -> bool:
    """What a chart draws hollow or hatched: a figure not to rely on (`doubtful`), or a step that did not train (the
    table's `!`: a NaN loss's bars were drawn solid, as sure as any, its legend silent)."""
    return doubtful(cell) or not trains(cell)


def doubt_json(cell: CellRecord) -> dict:
    """A table's `?` for a script: `doubtful` and why (few samples, other processes' load, steal, warm-up, processes
    apart), each reason as its note says it; nothing for a cell to rely on."""
    said = disturbances(cell)
    few = [FEW] if few_samples(cell) and not any(w.startswith("few samples") for w in said) else []
    return {"doubtful": True, "doubts": [*said, *few]} if said or few else {}


def doubt_of(cells: list[CellRecord]) -> str:
    """What a chart's mark says: few samples where that is all its doubtful cells have, else that they were
    disturbed (other processes' load, steal, an unsettled warm-up: one plot file of a busy run drew them as
    precise as a quiet one's, with nothing said)."""
    marked = [c for c in cells if doubtful(c)]
    alone = all(all(w.startswith("few samples") for w in disturbances(c)) for c in marked)
    return FEW if alone else DISTURBED_CELL


NOT_TRAINING = "a step that did not train (its loss not finite, or failing its check against fp32)"


def marks_of(cells: list[CellRecord]) -> str:
    """What a chart's mark says of its `marked` points: `doubt_of`, and that a step did not train where one did not."""
    if all(map(trains, cells)):
        return doubt_of(cells)
    return f"{doubt_of(cells)}, or {NOT_TRAINING}" if any(map(doubtful, cells)) else NOT_TRAINING


def dots(chart: Chart) -> bool:
    """Bars on a log axis from no base of their own: drawn as points, since a bar's length from the axis's arbitrary
    floor says nothing (a 275 µs bar a sliver, a 108 ms one ten times taller rather than 400)."""
    return chart.kind == "bars" and chart.log_y and not chart.base


def doubted(chart: Chart, doubt: str = FEW) -> Chart:
    """`chart` with `doubt` in its legend and caption, when any point it draws is doubtful: said as it is drawn (a
    bar on a log axis is a dot, `dots`: hollow, not hatched)."""
    if any(p.doubtful for p in chart.points):
        chart.doubt = doubt
        how = {"lines": f"hollow, with {DOUBT_MARK}", "stacked": f"{DOUBT_MARK} beside its bar"}
        drawn = f"hollow, with {DOUBT_MARK}" if dots(chart) else how.get(chart.kind, f"hatched, with {DOUBT_MARK}")
        said = f"{drawn}: {doubt}"
        chart.caption = f"{chart.caption}; {said}" if chart.caption else said
    return chart


def timed(cells: list[CellRecord]) -> list[CellRecord]:
    return [c for c in cells if c.ok and c.median_s]


def none_timed(cells: list[CellRecord]) -> str | None:
    """'no cell has a time to draw: 3 failed, 1 unsupported' where cells ran and none has a time (a store of failed
    cells said "every workload was measured with one framework in one mode"); None where one has, or none ran."""
    if not cells or timed(cells):
        return None
    counted = Counter(c.status.value for c in cells)
    return "no cell has a time to draw: " + ", ".join(f"{n} {status}" for status, n in counted.most_common())


def tip(cell: CellRecord, headline: str = "") -> str:
    """Hover text: which cell, and how much to trust its median (IQR, steps, processes, run)."""
    lines = [headline] if headline else []
    lines.append(f"{cell.workload} {cell.column} {series_label(cell, list(dimensions(cell)))}")
    # the table's IQR, of every step; a bar of several processes spans the median of their quartiles (`load._enrich`)
    iqr = f"IQR {seconds(cell.iqr_s)}" if cell.iqr_s and not few(cell.n) else "IQR -"
    lines.append(f"median {seconds(cell.median_s)} · {iqr} · n {count(cell.n)}")
    q1, q3 = error_bar(cell)  # as drawn: a hover described a bar of too few steps that `_point` leaves out
    if (cell.processes or 0) > 1 and q1 is not None and q3 is not None:
        lines.append(f"bar {seconds(q1)} to {seconds(q3)}: the median of the processes' quartiles")
    processes = cell.processes
    lines.append(f"{processes or '?'} process{'es' if processes != 1 else ''} · run {cell.run_id}")
    lines += doubt_lines(cell)
    return "\n".join(lines)


def doubt_lines(cell: CellRecord) -> list[str]:
    """A hover text's lines for what disturbed `cell` ("? other processes used 68% ..."), and that it did not train
    ("! ..."); none for a quiet cell that trained."""
    untrained = [] if trains(cell) else [f"{UNTRAINED_MARK} {NOT_TRAINING.removeprefix('a ')}"]
    return [f"{DOUBT_MARK} {w}" for w in disturbances(cell)] + untrained


UNTRAINED_MARK = "!"  # the table's LOSS_MARK


def error_bar(cell: CellRecord) -> tuple[float | None, float | None]:
    """A cell's error bar, its quartiles (`load._enrich`); none from fewer than FEW_SAMPLES steps (whose spread they
    do not tell, as its hover's `IQR -` says)."""
    return (None, None) if few(cell.n) else (cell.q1_s, cell.q3_s)


def _point(cell: CellRecord, x: float | str, headline: str = "") -> Point:
    """A cell's point: its median, and its error bar (`error_bar`)."""
    return Point(x, cell.median_s, *error_bar(cell), tip(cell, headline), marked(cell))


def _by(cells: list[CellRecord], *keys) -> dict[tuple, list[CellRecord]]:
    groups: dict[tuple, list[CellRecord]] = {}
    for c in cells:
        groups.setdefault(tuple(k(c) if callable(k) else getattr(c, k) for k in keys), []).append(c)
    return groups


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _spread(values: list[float]) -> float:
    positive = [v for v in values if v and v > 0]
    return max(positive) / min(positive) if positive else 1.0


# ----------------------------------------------------------------------------------------------------------------------
# The charts


def scaling(cells: list[CellRecord]) -> list[Chart]:
    """Per workload: seconds per mini-batch against CPU threads, one line per series, each with its ideal line
    (the fewest threads' time divided by the thread ratio). Only workloads measured at two or more thread counts."""
    cpu = [c for c in timed(cells) if c.device == "cpu" and c.column.startswith("cpu:")]
    shown = varying(cells)
    charts = []
    for (workload,), group in _by(cpu, "workload").items():
        if len({c.threads for c in group}) < 2:
            continue
        series = []
        for (label,), line in _by(group, lambda c: series_label(c, shown)).items():
            if len(line) < 2:
                continue  # one thread count is not a scaling curve; the variants chart shows it
            line.sort(key=lambda c: c.threads)
            series.append(Series(label, [_point(c, c.threads) for c in line]))
            t0, first = line[0].threads, line[0].median_s
            ideal = [Point(c.threads, first * t0 / c.threads) for c in line]
            series.append(Series(f"{label} ideal", ideal, ideal=True))
        if not series:
            continue
        threads = sorted({c.threads for c in group})
        charts.append(
            doubted(Chart(
                f"scaling-{_slug(workload)}", "lines", f"{workload}: thread scaling", "CPU threads",
                "seconds per mini-batch", series, log_x=threads[-1] / threads[0] >= 4,
                log_y=_spread([c.median_s for c in group]) >= 10,
                caption=f"median step time (error bars: {ERROR_BARS}); dashed: ideal scaling "
                "from the fewest threads measured",
            ), marks_of(group))
        )  # fmt: skip
    return charts


def ddp_scaling(cells: list[CellRecord]) -> list[Chart]:
    """Per workload: seconds per step against DDP processes, one line per series and protocol, with its ideal:
    strong scaling divides the fewest processes' time by the process ratio, weak scaling keeps it flat."""
    ddp = [c for c in timed(cells) if c.nproc]
    shown = varying(cells)
    charts = []
    for (workload,), group in _by(ddp, "workload").items():
        series = []
        for (label, protocol, strategy), line in _by(group, lambda c: series_label(c, shown), "scaling",
                                                     lambda c: c.column.split(":")[0]).items():  # fmt: skip
            if len({c.nproc for c in line}) < 2:
                continue
            line = sorted(line, key=lambda c: (c.nproc, c.median_s))
            line = [c for i, c in enumerate(line) if i == 0 or c.nproc != line[i - 1].nproc]  # fastest per N
            name = f"{label} {strategy} {protocol}"  # ddp named too: beside fsdp, "torch fp32 strong" said none
            series.append(Series(name, [_point(c, c.nproc, f"{protocol} scaling, {c.column}") for c in line]))
            n0, t0 = line[0].nproc, line[0].median_s
            ideal = [Point(c.nproc, t0 * n0 / c.nproc if protocol == "strong" else t0) for c in line]
            series.append(Series(f"{name} ideal", ideal, ideal=True))
        if series:
            charts.append(
                doubted(Chart(f"ddp-{_slug(workload)}", "lines", f"{workload}: multi-process scaling", "processes",
                              "seconds per mini-batch", series,
                              caption="median step of the slowest process (error bars: interquartile range); "
                              "dashed: ideal (strong: time / processes, weak: flat)"),
                        marks_of(group))
            )  # fmt: skip
    return charts


def variants(cells: list[CellRecord]) -> list[Chart]:
    """Per workload: a bar per series (framework, mode, ...) in each column, with IQR error bars. Only where a
    workload has more than one series: modes, frameworks and `optimize` results side by side."""
    shown = varying(cells)
    charts = []
    for (workload,), group in _by(timed(cells), "workload").items():
        labels = _by(group, lambda c: series_label(c, shown))
        if len(labels) < 2:
            continue
        columns = sorted({c.column for c in group}, key=column_order)
        series = []
        for (label,), members in labels.items():
            by_column = {c.column: c for c in members}
            series.append(
                Series(label, [_point(by_column[col], col, _vs_baseline(by_column[col], group)) for col in columns
                               if col in by_column])
            )  # fmt: skip
        dims = " and ".join(shown) or "variant"
        charts.append(
            doubted(Chart(
                f"variants-{_slug(workload)}", "bars", f"{workload}: by {dims}", column_axis(columns),
                "seconds per mini-batch",
                series, categories=columns, log_y=_spread([c.median_s for c in group]) >= 20,
                caption=f"median step time per column (error bars: {ERROR_BARS})" + _no_bar(cells, workload, shown),
            ), marks_of(group))
        )  # fmt: skip
    return charts


def _no_bar(cells: list[CellRecord], workload: str, shown: list[str]) -> str:
    """'; no bar: tensorflow fp16 cpu:1 (unsupported)': the workload's cells that ran and have no time (unsupported,
    failed), which the chart left out with no word of them, where the table says each."""
    untimed = [c for c in cells if c.workload == workload and c.status is not Status.PENDING and not (c.ok and
               c.median_s)]  # fmt: skip
    said = [f"{series_label(c, shown) or c.framework} {c.column} ({c.status.value})" for c in untimed]
    return f"; no bar: {', '.join(said[:MAX_NAMED])}{f' and {len(said) - MAX_NAMED} more' * (len(said) > MAX_NAMED)}" \
        if said else ""  # fmt: skip


MAX_NAMED = 4  # the cells without a bar a caption names, the rest counted


def column_axis(columns: list[str]) -> str:
    """The axis of columns named: what `cpu:2` means, and the other kinds of column where there are some."""
    if all(c.startswith("cpu:") for c in columns):
        return "CPU threads (cpu:N)"
    return "device (cpu:N: N CPU threads)"


def _vs_baseline(cell: CellRecord, group: list[CellRecord]) -> str:
    """'1.84x fp32' when the same framework and column has an fp32 cell to hold this one against."""
    if cell.mode == BASELINE_MODE:
        return ""
    base = next(
        (
            b
            for b in group
            if b.mode == BASELINE_MODE
            and b.framework == cell.framework
            and b.column == cell.column
            and dimensions(b) == {**dimensions(cell), "mode": BASELINE_MODE}
        ),
        None,
    )
    if base is None:
        return ""
    ratio = base.median_s / cell.median_s  # a mode 240 times slower: 0.0041x, not 0.00x
    return f"{ratio:.{'2f' if ratio >= 0.1 else '2g'}}x the speed of {BASELINE_MODE}"


def gpu_speedup(cells: list[CellRecord]) -> Chart | None:
    """Per workload and series: the best CPU time over each GPU's time. None when no GPU cell was measured."""
    ok = timed(cells)
    gpus = sorted({c.device for c in ok if c.device != "cpu"}, key=column_order)
    if not gpus:
        return None
    shown = varying(cells)
    series: dict[str, Series] = {}
    categories = []
    for (workload, label), group in _by(ok, "workload", lambda c: series_label(c, shown)).items():
        cpu = [c for c in group if c.device == "cpu"]
        if not cpu:
            continue
        best = min(cpu, key=lambda c: c.median_s)
        for gpu_cell in (c for c in group if c.device != "cpu"):
            name = f"{label} {gpu_cell.device}"
            ratio = best.median_s / gpu_cell.median_s
            headline = f"{ratio:.1f}x faster than the best CPU cell ({best.column}, {seconds(best.median_s)})"
            point = Point(workload, ratio, tip=tip(gpu_cell, headline), doubtful=marked(best) or marked(gpu_cell))
            series.setdefault(name, Series(name, [])).points.append(point)
            if workload not in categories:
                categories.append(workload)
    if not series:
        return None
    return doubted(Chart(
        "gpu-speedup", "bars", "GPU speed-up over the best CPU thread count", "workload", "speed-up (x)",
        list(series.values()), categories=categories, log_y=True, base=1.0,
        caption="best CPU median / GPU median, per workload; each bar from 1x (as fast), below it where slower",
    ), f"from {marks_of(ok)}")  # fmt: skip


def utilization(cells: list[CellRecord]) -> Chart | None:
    """The share of each cell's step its FLOPs would take at the peak measured by `dlperf peak`. None without any
    (cells need `utilization` attached, see `utilization.attach_utilization`)."""
    measured = [c for c in timed(cells) if c.utilization is not None]
    if not measured:
        return None
    shown = varying(cells)
    series: dict[str, Series] = {}
    categories = []
    for c in measured:
        label = series_label(c, shown)
        category = f"{c.workload} {c.column} {label}"  # a bar of its own: in groups, many series made hairlines
        headline = f"{100 * c.utilization:.1f}% of the measured peak"
        series.setdefault(label, Series(label, [])).points.append(
            Point(category, 100 * c.utilization, tip=tip(c, headline), doubtful=marked(c))
        )
        if category not in categories:
            categories.append(category)
    return doubted(Chart(
        "utilization", "hbars", "Utilization of the measured peak", "% of peak FLOP/s", "", list(series.values()),
        categories=categories, caption="the step's FLOPs at the matmul peak `dlperf peak` measured for the same "
        "device, dtype and threads, as a share of the measured step time",
    ), marks_of(measured))  # fmt: skip


def all_charts(cells: list[CellRecord]) -> list[Chart]:
    """Every chart the cells make; the paper comparison's chart is `paper.chart`, which builds on these types."""
    charts = [*scaling(cells), *ddp_scaling(cells), *variants(cells)]
    return charts + [c for c in (gpu_speedup(cells), utilization(cells)) if c is not None]
