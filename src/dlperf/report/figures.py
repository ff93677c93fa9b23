"""Charts drawn with matplotlib: inline SVG for the HTML report, PNG, SVG or PDF files for `dlperf plot`.

In the report every drawn point or bar is an SVG group carrying its hover text (`data-tip`, and a `<title>` for
readers without JavaScript). Text stays text (`svg.fonttype: none`) and is never parsed as mathtext, so a name such
as `$x$` or `<b>` is drawn as typed; matplotlib escapes it for XML.
"""

from __future__ import annotations

import html
import io
import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path

from dlperf.report import figure_style
from dlperf.report.charts import DOUBT_MARK, Chart, Point, dots
from dlperf.report.figure_style import INK, marker

SECONDS = "seconds"  # a chart whose y label begins so has its values in seconds (`_time_unit`)

FORMATS = ("png", "svg", "pdf")
# an upright bar's widest, as a share of its axes' width (about an inch): one bar drawn as a bar, not a slab as wide
# as the axes; two columns of two modes each (the docs' variants) as wide as before, just under it
MOST_OF_AXES = 0.2
STACK_WIDTH = 0.6  # a stacked bar's width (lying: its height), in category slots
# the file the same for the same figures: no date in it (a PDF's key is CreationDate; its Date kept the time of day)
NO_DATE = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}
HATCH = "////"  # a doubtful bar's fill: told apart in print and in grey, not by colour alone
STYLE = {
    "svg.fonttype": "none",
    "pdf.fonttype": 42,  # TrueType, not Type 3, which IEEE PDF eXpress and ACM's checks refuse
    "ps.fonttype": 42,
    "text.parse_math": False,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 8,
    "legend.frameon": False,
}


# a profile's categories (`vocab.Category`) keep one colour in every report: the device's work in saturated hues,
# copies and data in their own, host and idle in greys (time the device did not compute)
CATEGORY_COLORS = {
    "matmul": "#1f77b4",
    "elementwise": "#ff7f0e",
    "normalization": "#2ca02c",
    "pooling": "#17becf",
    "loss": "#9467bd",
    "optimizer": "#8c564b",
    "copy_h2d": "#e377c2",
    "copy_d2h": "#f7b6d2",
    "copy": "#bcbd22",
    "data": "#d62728",
    "host": "#7f7f7f",
    "idle": "#c7c7c7",
    "other": "#dbdb8d",
}
# a step's parts in the input pipeline's chart: the data wait in the profile's colour for data
PART_COLORS = {"compute": CATEGORY_COLORS["matmul"], "data wait": CATEGORY_COLORS["data"]}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: never a window, never a display needed
    import matplotlib.pyplot as plt

    return plt


def palette(charts: list[Chart]) -> dict[str, str]:
    """One colour per series label across all charts, so `torch bf16` looks the same everywhere (and has one marker,
    `figure_style.marker`: its place in this order)."""
    labels: list[str] = []
    for chart in (c for c in charts if c.kind not in ("stacked", "columns")):  # their parts have fixed colours
        labels += [s.label for s in chart.series if not s.ideal and s.label not in labels]
    return figure_style.palette(labels)


def _errors(points: list[Point]) -> list[list[float]]:
    return [
        [max(p.y - p.low, 0.0) if p.low is not None else 0.0 for p in points],
        [max(p.high - p.y, 0.0) if p.high is not None else 0.0 for p in points],
    ]


def draw(ax, chart: Chart, colors: dict, tag: Callable[[object, str], None] | None = None,
         narrow: float | None = None) -> None:  # fmt: skip
    """Draw `chart` into matplotlib axes; `tag(artist, tip)` marks each hoverable element. `narrow`: the inches the
    chart is given where its legend would not fit beside it (`dlperf plot --width`): the legend goes under the title,
    in as many columns as fit, and a long title is folded."""
    drawer = {"lines": _lines, "bars": _bars, "stacked": _stacked, "columns": _columns, "hbars": _hbars}[chart.kind]
    drawer(ax, chart, colors, tag or (lambda artist, text: None))
    if narrow and chart.kind in LABELLED:
        _fold_labels(ax, chart, narrow)
    title = _folded(chart.title, narrow - _left_margin(chart, narrow)) if narrow else chart.title
    ax.set_title(title, loc="left")
    said = chart.kind == "stacked" and chart.doubt and any(p.doubtful for p in chart.points)
    ax.set_xlabel(f"{chart.xlabel}\n{DOUBT_MARK} beside a bar: {chart.doubt}" if said else chart.xlabel)
    ax.set_ylabel(f"{chart.ylabel} (log scale)" if chart.log_y else chart.ylabel)
    if chart.log_y:
        _log_y(ax, chart)
    _time_unit(ax, chart)
    handles = _handles(ax, chart, colors)
    if chart.kind == "stacked" or (narrow and handles and (len(handles) > 1 or chart.kind != "lines")):
        _legend_under_title(ax, title, handles, _columns_in(chart, narrow) if narrow else None, narrow or 0.0)
    elif handles and (len(handles) > 1 or chart.kind != "lines"):
        # beside the axes, never over the data (inside, ten lines' entries hid the fastest); a bar chart's one series
        # named too: the GPU of a speed-up's bars is said only there
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _time_unit(ax, chart: Chart) -> None:
    """A y axis of seconds in the unit the tables write its times in (`measure.units.seconds`): ms where its largest
    value is under 0.1 s, µs under 1 ms; its ticks read 225, 250, 275 and its label "µs per mini-batch", where they
    read 0.000225, 0.000250, 0.000275 seconds."""
    from matplotlib.ticker import FuncFormatter

    values = [v for s in chart.series for p in s.points for v in (p.y, p.high) if v is not None and v > 0]
    values += [v for v in chart.lines.values() if v > 0]
    if not chart.ylabel.startswith(SECONDS) or chart.kind not in ("lines", "bars", "columns") or not values:
        return
    unit, scale = ("µs", 1e6) if max(values) < 1e-3 else ("ms", 1e3) if max(values) < 0.1 else (None, 1.0)
    if unit is not None:
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v * scale:g}"))
        ax.set_ylabel(unit + chart.ylabel.removeprefix(SECONDS) + (" (log scale)" if chart.log_y else ""))


def _log_y(ax, chart: Chart) -> None:
    """A log y axis whose ticks are plain numbers (mathtext is off, so 10^x would show as its source), and that names
    a tick at or below its lowest value and one at or above its highest: across more than a decade 1, 2 and 5 named
    none under a crossover's 0.33 ms nor under the paper chart's 0.016 s, so the axis reaches the nearest named tick
    either side. Within a decade 1.5, 3 and 7 are named too (1, 2, 5 named two ticks: a crossover's 0.43 to 1.7 ms)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    low, high = ax.get_ylim()
    subs = (1.0, 2.0, 5.0) if high >= 10 * low else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    values = [v for s in chart.series for p in s.points for v in (p.y, p.low, p.high) if v is not None and v > 0]
    values += [v for v in (chart.base, *chart.lines.values()) if v > 0]
    if values:
        ax.set_ylim(min(low, _log_tick(min(values), subs, below=True)), max(high, _log_tick(max(values), subs)))


def _log_tick(value: float, subs: tuple[float, ...], below: bool = False) -> float:
    """The nearest tick of `subs` per decade at or above `value` (at or below it where `below`)."""
    decade = math.floor(math.log10(value))
    ticks = sorted(s * 10.0**e for e in (decade - 1, decade, decade + 1) for s in subs)
    slack = value * 1e-9  # 0.0005 may be drawn as 5 * 10**-4, a hair above it
    if below:
        return max(t for t in ticks if t <= value + slack)
    return min(t for t in ticks if t >= value - slack)


def _legend_under_title(ax, title: str, handles: list, most: int | None = None, inches: float = 0.0) -> None:
    """The legend between the title and the bars, in the categories' order: the title raised by the legend's height
    (at 1.06 of the axes' height the legend stood over the title, which stays where it is whatever is above it).
    `most`: the columns of entries that fit across a narrowed chart `inches` wide (`draw`), each entry's text folded
    to its column; else 7."""
    import textwrap

    labels = [h.get_label() for h in handles]
    if most:  # a narrowed chart's: an entry longer than its column folded, else the legend widens the figure
        per = max(12, int(((inches - 0.6) / most - 0.5) / 0.06))  # characters: the axis' labels, each entry's sample
        labels = ["\n".join(textwrap.wrap(label, per)) or label for label in labels]
    most = most or 7
    legend = ax.legend(
        handles=handles,
        labels=labels,
        loc="lower left",
        bbox_to_anchor=(0.0, 1.0),
        borderaxespad=0.4,  # in font sizes: above the axes' top by as much as under the title
        ncol=math.ceil(len(handles) / math.ceil(len(handles) / most)),  # rows filled alike: 8 entries are 4 + 4
        handlelength=1.2,
        columnspacing=1.0,
    )
    fig = ax.figure
    tall = legend.get_window_extent(fig.canvas.get_renderer()).height * 72 / fig.dpi  # in points, as a title's pad
    ax.set_title(title, loc="left", pad=tall + 2 * legend.borderaxespad * legend.prop.get_size_in_points())


def _handles(ax, chart: Chart, colors: dict) -> list:
    """The legend's entries: the series drawn (a predicted series' line dashed, as drawn), then the ideal line's and a
    doubtful point's where there are any."""
    handles, labels = ax.get_legend_handles_labels()
    if chart.doubt and chart.kind in ("bars", "hbars") and not dots(chart):  # a first bar may be hatched: its colour
        from matplotlib.patches import Patch

        handles = [Patch(facecolor=colors.get(label, "grey"), label=label) for label in labels]
    if dots(chart) or chart.kind == "lines":  # a first point may be hollow: its entry is its marker, filled
        from matplotlib.lines import Line2D

        dashed = {s.label for s in chart.series if s.dashed and not dots(chart)}  # a prediction's line: dashed too
        handles = [Line2D([], [], marker=marker(colors, label), ms=7, lw=2.5 if dots(chart) else 1.5,
                          ls="--" if label in dashed else "-", color=colors.get(label, "grey"), label=label)
                   if label in colors else handle for handle, label in zip(handles, labels, strict=True)]  # fmt: skip
    if any(s.ideal for s in chart.series):
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], ls="--", color="grey", label="ideal scaling"))
    if chart.doubt and chart.kind != "stacked" and any(p.doubtful for p in chart.points):  # stacked: under its axis
        handles.append(_doubt_handle(chart, colors))
    return handles


def _doubted(chart: Chart) -> list[str]:
    """The series with a doubtful point, in order."""
    return [s.label for s in chart.series if not s.ideal and any(p.doubtful for p in s.points)]


def _doubt_label(chart: Chart) -> str:
    """A doubtful point's legend entry: named by the chart's `doubt`, said to be any hollow marker where points of
    several series (of several shapes) are doubtful, its one shape not theirs."""
    several = (chart.kind == "lines" or dots(chart)) and len(_doubted(chart)) > 1
    return f"hollow marker, {DOUBT_MARK}: {chart.doubt}" if several else f"{DOUBT_MARK} {chart.doubt}"


def _doubt_handle(chart: Chart, colors: dict):
    """The legend's entry for a doubtful point: a hollow marker (its series' shape: a doubtful bf16 point's square,
    not always a circle), or a hatched bar, named by `_doubt_label`."""
    label = _doubt_label(chart)
    if chart.kind == "lines" or dots(chart):
        from matplotlib.lines import Line2D

        shapes = {marker(colors, s) for s in _doubted(chart)}
        shape = shapes.pop() if len(shapes) == 1 else "o"
        return Line2D([], [], marker=shape, ls="", ms=6, mfc="white", color="grey", label=label)
    from matplotlib.patches import Patch

    return Patch(facecolor="white", edgecolor="grey", hatch=HATCH, label=label)


def _mark_doubt(ax, x, y, above: bool = False) -> None:
    """A "?" beside (x, y), up and to the right (a point), or just above it (a bar's top), offset in points: the same
    on a linear or a log axis. In the report's near-black text colour, not its series': yellow, orange and sky blue
    were 1.3, 2.3 and 2.3 to 1 on white."""
    ax.annotate(DOUBT_MARK, (x, y), xytext=(0, 2) if above else (4, 3), textcoords="offset points", color=INK,
                ha="center" if above else "left", fontsize=9, fontweight="bold", annotation_clip=False)  # fmt: skip


def _lines(ax, chart: Chart, colors: dict, tag) -> None:
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    xs_all: set[float] = set()
    for s in chart.series:
        xs, ys = [p.x for p in s.points], [p.y for p in s.points]
        xs_all.update(xs)
        colour = colors.get(s.label.removesuffix(" ideal"), "grey")
        if s.ideal:
            ax.plot(xs, ys, ls="--", lw=1, color=colour, alpha=0.6)
            continue
        ax.errorbar(xs, ys, yerr=_errors(s.points), color=colour, lw=1.5, capsize=3, label=s.label,
                    ls="--" if s.dashed else "-")  # fmt: skip
        shape = marker(colors, s.label.removesuffix(" ideal"))
        for p in s.points:  # above every line; a doubtful point hollow: its error bar says nothing
            (point,) = ax.plot([p.x], [p.y], shape, ms=6, color=colour, mfc="white" if p.doubtful else colour, zorder=3)
            tag(point, p.tip)
            if p.doubtful:
                _mark_doubt(ax, p.x, p.y)
    for i, (label, x) in enumerate(chart.marks.items()):
        ax.axvline(x, ls=":", lw=1.2, color="black", alpha=0.4 + 0.6 / (i + 1), label=label)
    if chart.log_x:
        ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(xs_all))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def _bars(ax, chart: Chart, colors: dict, tag) -> None:
    drawn = [s for s in chart.series if s.points]
    index = {c: i for i, c in enumerate(chart.categories)}
    held = {c: [s.label for s in drawn if any(p.x == c for p in s.points)] for c in chart.categories}
    width = 0.8 / max(map(len, held.values()), default=1)  # the fullest category's bars fill 0.8 of its slot
    for s in drawn:
        points = [p for p in s.points if p.x in index]
        # a category's bars centred over its tick, in the series' order: only the series it has take a place
        positions = [index[p.x] + width * (held[p.x].index(s.label) + 0.5 - len(held[p.x]) / 2) for p in points]
        if dots(chart):
            _dots(ax, positions, points, s.label, colors, tag, width * 0.92)
            continue
        has_errors = any(p.low is not None for p in points)
        bars = ax.bar(
            positions, [p.y - chart.base for p in points], width * 0.92, bottom=chart.base, label=s.label,
            color=colors.get(s.label, "grey"), yerr=_errors(points) if has_errors else None, capsize=2,
            error_kw={"lw": 1},
        )  # fmt: skip
        for bar, p in zip(bars, points, strict=True):
            tag(bar, p.tip)
            if p.doubtful:
                _hatch(bar, colors.get(s.label, "grey"))
                top = max(p.y, p.high or p.y)  # above its error bar
                _mark_doubt(ax, bar.get_x() + bar.get_width() / 2, top, above=True)
    tilt = max((len(c) for c in chart.categories), default=0) > 9
    ax.set_xticks(
        range(len(chart.categories)), chart.categories, rotation=30 if tilt else 0, ha="right" if tilt else "center"
    )
    _room(ax, len(chart.categories), width)
    if chart.base:
        ax.axhline(chart.base, color="black", lw=0.8)  # 1x: a bar above it is faster, below it slower
    ax.grid(axis="x", visible=False)


def _dots(ax, positions: list[float], points: list[Point], label: str, colors: dict, tag, width: float) -> None:
    """A series of `_bars` as points in the series' marker with their error bars, each a level as wide as its bar
    would be: a doubtful one hollow, marked."""
    colour = colors.get(label, "grey")
    for i, (x, p) in enumerate(zip(positions, points, strict=True)):
        drawn = ax.errorbar([x], [p.y], yerr=_errors([p]) if p.low is not None else None, fmt=marker(colors, label),
                            ms=7, capsize=2, lw=1, color=colour, mfc="white" if p.doubtful else colour,
                            label=label if i == 0 else None)  # fmt: skip
        ax.hlines(
            p.y, x - width / 2, x + width / 2, colors=colour, lw=2.5, linestyles="dashed" if p.doubtful else "solid"
        )
        tag(drawn.lines[0], p.tip)
        if p.doubtful:
            _mark_doubt(ax, x, p.y)


def _room(ax, categories: int, width: float) -> None:
    """The x axis wide enough that a bar `width` wide takes at most MOST_OF_AXES of it, the categories in its middle:
    one workload's speed-up was one bar as wide as the axes, and two categories' bars slabs."""
    margin = (width / MOST_OF_AXES - categories) / 2  # each side of the categories' slots
    if margin > 0:  # more categories: the axis as matplotlib fits it
        ax.set_xlim(-0.5 - margin, categories - 0.5 + margin)


def tilt_crowded(fig) -> None:
    """Tilt the upright x labels of an axes where, once the figure is laid out, two of them overlap (the paper chart's
    seven networks of 9 letters each beside its legend: "AlexNet-SResNet-50"); `_bars` tilts only names over 9
    letters, since how much room a category has depends on the figure, its legend and its neighbours."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text() and not t.get_rotation()]
        boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
        if any(a.x1 + 2 > b.x0 for a, b in itertools.pairwise(boxes)):  # 2 px: touching reads as one
            for t in labels:
                t.set(rotation=30, ha="right")  # as `_bars` tilts long names


def _hatch(bar, colour) -> None:
    """A doubtful bar: its outline and hatching in its colour, over white."""
    bar.set_facecolor("white")
    bar.set_edgecolor(colour)
    bar.set_hatch(HATCH)


def _stack(
    ax, chart: Chart, colors: dict, tag, upright: bool, hatch: bool = True
) -> tuple[dict[str, int], list[float]]:
    """Each category's bar, its parts the series in order: upright from the bottom, or lying from the left, a
    doubtful bar's hatched where `hatch`. Returns each category's place and its bar's length."""
    index = {c: i for i, c in enumerate(chart.categories)}
    ends = [0.0] * len(chart.categories)
    for s in chart.series:
        colour = (CATEGORY_COLORS | PART_COLORS).get(s.label) or colors.get(s.label, "grey")
        for n, p in enumerate(p for p in s.points if p.x in index):
            i = index[p.x]
            label = s.label if n == 0 else "_nolegend_"  # one legend entry per category, not per part
            if upright:
                (bar,) = ax.bar([i], [p.y], STACK_WIDTH, bottom=[ends[i]], color=colour, label=label)
            else:
                (bar,) = ax.barh([i], [p.y], left=[ends[i]], height=STACK_WIDTH, color=colour, label=label)
            tag(bar, p.tip)
            if p.doubtful and hatch:
                _hatch(bar, colour)
            if chart.kind == "stacked":  # its parts told apart in grey too: each its share, where it fits
                figure_style.segment(bar, s.label, p.y)
            ends[i] += p.y
    return index, ends


def _stacked(ax, chart: Chart, colors: dict, tag) -> None:
    """One horizontal bar per category, its parts the series in order, left to right; the chart's label of each bar
    written beside it."""
    index, left = _stack(ax, chart, colors, tag, upright=False, hatch=False)  # parts in their colours, a '?' beside
    doubtful = {p.x for p in chart.points if p.doubtful}
    for name, text in chart.labels.items():
        if name in index:
            text = f"{text} {DOUBT_MARK}" if name in doubtful else text
            ax.text(max(left[index[name]], 100.0) + 1.5, index[name], text, va="center", clip_on=False)
    ax.set_yticks(range(len(chart.categories)), chart.categories)
    ax.set_xlim(0, 100)
    ax.invert_yaxis()  # the first cell on top, as in the table under it
    ax.grid(axis="y", visible=False)


def _hbars(ax, chart: Chart, colors: dict, tag) -> None:
    """One lying bar per category, coloured by its series, its value beside it: level labels however many bars
    (upright bars grouped by series became hairlines under tilted labels)."""
    index, ends = _stack(ax, chart, colors, tag, upright=False)
    doubtful = {p.x for p in chart.points if p.doubtful}
    for name, i in index.items():
        ax.text(ends[i], i, f" {ends[i]:.1f}{DOUBT_MARK * (name in doubtful)}", va="center", fontsize=8)
    ax.set_yticks(range(len(chart.categories)), chart.categories)
    ax.set_xlim(0, max(ends, default=1.0) * 1.15 or 1.0)
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)


def _columns(ax, chart: Chart, colors: dict, tag) -> None:
    """One upright bar per category, its parts the series stacked bottom up; each of the chart's `lines` a dashed
    reference across them (the synthetic step under the loader settings' steps)."""
    _stack(ax, chart, colors, tag, upright=True)
    _room(ax, len(chart.categories), STACK_WIDTH)
    for label, y in chart.lines.items():
        ax.axhline(y, ls="--", lw=1, color="black", alpha=0.7, label=label)
    ax.set_xticks(range(len(chart.categories)), chart.categories, rotation=30, ha="right")
    ax.grid(axis="x", visible=False)


def _size(chart: Chart) -> tuple[float, float]:
    if chart.kind == "lines":  # its axes 6.4 inches wide less the y labels, and room for the legend beside them
        return (6.4 + _legend_width(chart), 3.8)
    if chart.kind in ("stacked", "hbars"):
        return (9.0, 1.4 + 0.32 * len(chart.categories))
    if chart.kind == "columns":
        return (min(max(5.0, 2.5 + 0.5 * len(chart.categories)), 12.0), 3.8)
    bars = sum(len(s.points) for s in chart.series)  # the axes' width, and room for the legend beside them
    return (min(max(6.4, 1.0 + 0.28 * bars), 16.0) + _legend_width(chart), 4.0)


TWO_COLUMNS = 10.0  # inches from which several charts are laid out two a row
LABELLED = ("stacked", "hbars")  # lying bars named at their left, a label or a value at their right
LABEL_SHARE, BESIDE_SHARE = 0.3, 0.25  # of a narrowed chart's width: its bars' names, the labels beside the bars
CHAR_IN = 0.065  # inches a character of the tick labels' size takes, about


def _left_margin(chart: Chart, inches: float) -> float:
    """Inches left of the axes, where a left-aligned title begins: the y axis's numbers and label, or the bars' names
    (`_fold_labels`)."""
    return LABEL_SHARE * inches + 0.2 if chart.kind in LABELLED else 0.8


def _fold_labels(ax, chart: Chart, inches: float) -> None:
    """A narrowed chart of lying bars: each bar's name folded into lines that fit `LABEL_SHARE` of its width, and the
    label beside each bar into `BESIDE_SHARE` (at 3.5 inches, a profile's "tiny-fcn-r cpu:1 torch fp32 (422 µs)"
    left its axes no width at all)."""
    import textwrap

    def fold(text: str, share: float) -> str:
        return "\n".join(textwrap.wrap(text, max(8, int(share * inches / CHAR_IN)))) or text

    ax.set_yticks(range(len(chart.categories)), [fold(c, LABEL_SHARE) for c in chart.categories])
    for text in ax.texts:
        text.set_text(fold(text.get_text(), BESIDE_SHARE))


def _entries(chart: Chart) -> list[str]:
    """The legend's entries' labels, as `_handles` makes them."""
    labels = [s.label for s in chart.series if not s.ideal] + list(chart.marks)
    labels += ["ideal scaling"] * any(s.ideal for s in chart.series)
    return labels + [_doubt_label(chart)] * any(p.doubtful for p in chart.points) * bool(chart.doubt)


def _columns_in(chart: Chart, inches: float) -> int:
    """How many of the legend's entries fit side by side across `inches` (an entry: its sample and its text)."""
    entry = 0.55 + 0.06 * max(map(len, _entries(chart)), default=1)
    return max(1, min(7, int(inches // entry)))


def _folded(title: str, inches: float) -> str:
    """A title folded into lines that fit across `inches` at the title's size (about 0.075 inch a character)."""
    import textwrap

    return "\n".join(textwrap.wrap(title, max(16, int(inches / 0.075)))) or title


def _narrowed(chart: Chart, inches: float) -> tuple[float, bool]:
    """A chart's height across `inches`, and whether it is narrowed (its legend under its title): its own height,
    less in proportion where it is drawn narrower (to 0.65 of it), and the rows of legend and title it then takes."""
    wide, high = _size(chart)
    if inches >= wide:
        return high, False
    beside = _legend_width(chart)
    rows = math.ceil(len(_entries(chart)) / _columns_in(chart, inches)) if beside else 0
    titled = _folded(chart.title, inches - _left_margin(chart, inches)).count("\n")
    if chart.kind in LABELLED:  # a row a bar, as tall as its names folded take: not made shorter
        folded = max((len(c) * CHAR_IN / (LABEL_SHARE * inches) for c in chart.categories), default=1.0)
        return high * max(1.0, min(2.5, math.ceil(folded) * 0.6)) + 0.2 * rows + 0.18 * titled, True
    return high * min(1.0, max(0.65, inches / (wide - beside))) + 0.2 * rows + 0.18 * titled, True


def _legend_width(chart: Chart) -> float:
    """Inches a legend takes beside its axes (`_handles`' entries): its longest entry at the legend's font, and the
    sample before it; none where a chart of lines' one entry has no legend (a bar chart's one series has one)."""
    labels = _entries(chart)
    shown = len(labels) > 1 or (labels and chart.kind != "lines")
    return 0.7 + 0.06 * max(len(label) for label in labels) if shown else 0.0


def svg(chart: Chart, colors: dict, prefix: str) -> tuple[str, int]:
    """The chart as an inline `<svg>` element, every tagged element carrying its hover text as its name too,
    focusable, and how many are. It has no `<title>` of its own (a saved file's, `save`): the report names it
    (`html._figure`), and the script that takes each point's `<title>` away would leave the chart's to show as a
    native tooltip over the point's."""
    plt = _pyplot()
    tips: dict[str, str] = {}

    def tag(artist, text: str) -> None:
        gid = f"{prefix}-{len(tips)}"
        artist.set_gid(gid)
        tips[gid] = text

    with plt.rc_context({**STYLE, "svg.hashsalt": prefix}):  # salt: ids stable across reports, unique per chart
        fig, ax = plt.subplots(figsize=_size(chart), layout="constrained")
        try:
            draw(ax, chart, colors, tag)
            tilt_crowded(fig)
            figure_style.segment_labels(fig)
            buf = io.StringIO()
            # no <title>: its aria-label names it (a <title> was its name twice, and a native tooltip over each point)
            fig.savefig(buf, format="svg", metadata={"Date": None})
        finally:
            plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE: the SVG lives inside an HTML document
    text = own_ids(text, prefix)  # before the hover texts: a name in them is text, not an id
    for gid, tip_text in tips.items():
        quoted = html.escape(tip_text, quote=True).replace("\n", "&#10;")
        opening = f'<g id="{gid}">'
        if opening not in text:
            raise RuntimeError(f"matplotlib did not write the group {gid!r}")  # a matplotlib change: fail loudly
        # a point a keyboard reaches, named by its text (the script takes its <title> away, not its name)
        named = f'class="tip" data-tip="{quoted}" tabindex="0" role="img" aria-label="{quoted}"'
        text = text.replace(opening, f'<g id="{gid}" {named}><title>{quoted}</title>', 1)
    return text, len(tips)


def own_ids(text: str, prefix: str) -> str:
    """Every id of one chart's SVG, and every reference to one (`url(#id)`, `href="#id"`), prefixed with the chart's
    own: matplotlib names its groups alike in every figure (figure_1, axes_1, line2d_1, ...), so that two charts in one
    page shared some 55 ids (invalid HTML, and a reference could reach the other chart's). Its tagged groups, named
    `prefix-N` already, are kept. Only tags are read and rewritten: a category named `a id="patch_1"` is drawn so."""
    tags = re.findall(r"<[^>]+>", text)  # an attribute's < and > escaped by matplotlib: a tag ends at its first >
    ids = {i for tag in tags for i in re.findall(r' id="([^"]+)"', tag) if not i.startswith(f"{prefix}-")}
    renamed = lambda m: m[1] + (f"{prefix}-{m[2]}" if m[2] in ids else m[2])  # noqa: E731
    return re.sub(r"<[^>]+>", lambda tag: re.sub(r'( id="|url\(#|href="#)([^")]+)', renamed, tag[0]), text)


def save(charts: list[Chart], path: str | Path, dpi: int = 150, where: str = "", width: float | None = None) -> None:
    """One file with every chart, in a grid of two columns when there are several: for papers and slides. `where`,
    the machine and run the figures come from, heads the file: a chart's own title says only what it shows. `width`:
    the figure's inches across (a paper's column, 3.5), fonts at their size: one column below `TWO_COLUMNS`, and a
    chart narrower than it needs has its legend under its title; None: each chart as wide as it needs."""
    plt = _pyplot()
    fmt = Path(path).suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise ValueError(f"{fmt!r}: expected one of {', '.join(FORMATS)}")
    cols = 1 if len(charts) == 1 or (width is not None and width < TWO_COLUMNS) else 2
    rows = math.ceil(len(charts) / cols)
    each = max(_size(c)[0] for c in charts) if width is None else width / cols
    fitted = [_narrowed(c, each) for c in charts]
    # a lying bar per cell: room for each label; a narrowed figure's charts as tall as they need, from 2.5 inches
    height = max(4.0 if not any(narrow for _, narrow in fitted) else 2.5, *(h for h, _ in fitted))
    colors = palette(charts)
    with plt.rc_context({**STYLE, "svg.hashsalt": "dlperf"}):
        fig, axes = plt.subplots(rows, cols, figsize=(each * cols, height * rows), layout="constrained", squeeze=False)
        try:
            for ax, chart, (_, narrow) in zip(axes.flat, charts, fitted, strict=False):
                draw(ax, chart, colors, narrow=each if narrow else None)
            for ax in list(axes.flat)[len(charts) :]:
                ax.set_visible(False)
            if where:  # folded to a narrow figure's width, as its titles are
                said = _folded(where, each * cols) if width is not None else where
                fig.suptitle(said, x=0.01, ha="left", fontsize=STYLE["font.size"], color="dimgrey")
            tilt_crowded(fig)
            figure_style.segment_labels(fig)
            fig.savefig(path, format=fmt, dpi=dpi, metadata={**NO_DATE.get(fmt, {}), "Title": titled(charts, where)})
        finally:
            plt.close(fig)


def titled(charts: list[Chart], where: str = "") -> str:
    """A file's title in its metadata (an SVG's `<title>`, a PDF's Title, a PNG's Title text), what a screen reader or
    a file browser names it by: its charts' titles, and where they come from. It was none, or "Matplotlib v3.x"."""
    return "; ".join(c.title for c in charts) + (f" ({where})" if where else "")
