"""This machine against the paper's own numbers.

The paper's Table 7 ships with dlperf as package data (`dlperf/data/shi2016_table7.csv`, seconds per mini-batch):
S. Shi, Q. Wang, P. Xu, X. Chu, "Benchmarking State-of-the-Art Deep Learning Software Tools", arXiv:1608.07249
(v7, Feb 2017). Per network, the best CPU figure is the fastest of five tools on a desktop CPU (i7-3820, 1-8
threads) and a server CPU (2x Xeon E5-2630 v3, 1-32 threads); the best GPU figure the fastest on a GTX 980,
GTX 1080 or one GK210 of a Tesla K80. Only fp32 cells at the paper's own mini-batch are held against them: the paper
trained in fp32, and another batch is another workload.

This machine's side is its fastest reliable cell: one that the table would let star a thread count (no other
processes' load, no steal time, enough samples: `charts.disturbances`) and that trains (a finite loss). Where only
unreliable cells were measured, the fastest of them is compared, marked `?`, with why; where a faster cell was passed
over as unreliable, a note names it.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from dlperf.measure.units import times
from dlperf.report.charts import DOUBT_MARK, Chart, Point, Series, disturbances, doubted, tip
from dlperf.report.format import seconds, table_seconds
from dlperf.report.notes import FIGURE_NAME, kind_of
from dlperf.store.records import CellRecord

CITATION = (
    'S. Shi, Q. Wang, P. Xu, X. Chu, "Benchmarking State-of-the-Art Deep Learning Software Tools", '
    "arXiv:1608.07249 (v7, Feb 2017), Table 7"
)
GPUS = {"gtx980": "GTX 980", "gtx1080": "GTX 1080", "k80": "Tesla K80 (one GK210)"}
DISTURBED = "a disturbed or non-training cell"  # a chart's legend: short, the notes say which and why
LEGEND = (
    f"{DOUBT_MARK} = compared from a cell of the kind that keeps the table from starring a thread count: disturbed "
    "(other processes' load, CPU steal, few samples) or not training (its loss not finite); its figure and ratio are "
    "this machine's state as much as the framework's: a quiet machine and a longer --max-time give figures to rely on"
)


@dataclass(frozen=True)
class Figure:
    seconds: float
    tool: str
    where: str  # "server CPU, 16 threads", "GTX 1080"; `paper_table`'s "desktop", "server"


@dataclass
class Row:
    network: str  # the paper's name: FCN-S, ...
    workload: str
    batch: int
    ours_cpu: CellRecord | None  # this machine's fastest fp32 CPU cell
    ours_gpu: CellRecord | None
    paper_cpu: Figure | None
    paper_gpu: Figure | None
    passed_over: dict[str, CellRecord] = field(default_factory=dict)  # "cpu"/"gpu" -> a faster, unreliable cell

    def ratio(self, ours: CellRecord | None, theirs: Figure | None) -> float | None:
        """How many times faster this machine is (>1) or slower (<1)."""
        return theirs.seconds / ours.median_s if ours and theirs else None


@cache
def table7() -> list[dict[str, str]]:
    text = resources.files("dlperf").joinpath("data/shi2016_table7.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


def _where(column: str) -> str:
    if column in GPUS:
        return GPUS[column]
    machine, _, threads = column.rpartition("_")
    return f"{machine.replace('_cpu', '')} CPU, {threads} thread{'s' if threads != '1' else ''}"


def figures_in(network: str, columns: dict[str, str]) -> list[Figure]:
    """Every tool's figure for `network` in `columns` (the table's column -> where it stands), in the table's order;
    a column the table does not have, or leaves blank for a tool, gives none."""
    return [
        Figure(float(row[column]), row["tool"], where)
        for row in table7()
        if row["network"] == network
        for column, where in columns.items()
        if row.get(column)
    ]


def columns(gpu: bool) -> dict[str, str]:
    """The table's CPU columns (every machine and thread count), or its GPU columns: column -> where it stands."""
    return {c: _where(c) for c in table7()[0] if c not in ("network", "batch", "tool") and (c in GPUS) == gpu}


def best(network: str, gpu: bool) -> Figure | None:
    """The paper's fastest figure for `network` over every tool, on CPUs or on GPUs."""
    return min(figures_in(network, columns(gpu)), key=lambda f: f.seconds, default=None)


def batch_of(network: str) -> int | None:
    return next((int(r["batch"]) for r in table7() if r["network"] == network), None)


def compare(cells: list[CellRecord]) -> tuple[list[Row], list[str]]:
    """Rows for the workloads of the paper among `cells`, each side this machine's fastest reliable cell (else its
    fastest, marked), and notes: those left out (and why), then the unreliable cells compared or passed over."""
    rows: dict[str, Row] = {}
    found: dict[tuple[str, str], list[CellRecord]] = {}  # (workload, "cpu" or "gpu") -> its comparable cells
    notes: list[str] = []
    for c in cells:
        network = c.workload_spec.get("paper")
        if not network or not c.ok or not c.median_s or c.mode != "fp32" or c.loader:  # Table 7: synthetic batches
            continue
        if c.batch != batch_of(network):
            notes.append(f"{c.workload}: batch {c.batch}, the paper used {batch_of(network)}: not compared")
            continue
        rows.setdefault(c.workload, Row(network, c.workload, c.batch, None, None, best(network, False),
                                        best(network, True)))  # fmt: skip
        found.setdefault((c.workload, "cpu" if c.device == "cpu" else "gpu"), []).append(c)
    for (workload, side), candidates in found.items():
        _choose(rows[workload], side, candidates)
    return list(rows.values()), sorted(set(notes)) + doubt_notes(list(rows.values()))


def _choose(row: Row, side: str, candidates: list[CellRecord]) -> None:
    """The fastest reliable cell, else the fastest; a faster one passed over is kept to be named."""
    fastest = min(candidates, key=lambda c: c.median_s)
    chosen = min((c for c in candidates if not doubts(c)), key=lambda c: c.median_s, default=fastest)
    setattr(row, f"ours_{side}", chosen)
    if chosen is not fastest:
        row.passed_over[side] = fastest


def doubts(cell: CellRecord) -> list[str]:
    """Why `cell`'s median is not to rely on, a few words each ("other processes used 74%", "few samples n=4"): the
    disturbances for which the table stars no thread count, and a loss that was not finite (no training step)."""
    return [_briefly(w) for w in disturbances(cell)] + (["loss not finite"] if cell.loss_finite is False else [])


def _briefly(warning: str) -> str:
    """A stored warning as its kind and figure: "other processes used 74%"."""
    kind = kind_of(warning)
    figure = re.search(kind.figure, warning) if kind and kind.figure else None
    if kind is None or figure is None:
        return warning
    value = figure.group(1) if figure.groups() else figure.group()
    return f"{kind.prefix} {FIGURE_NAME.get(kind.prefix, '{}').format(value)}"


def named(cell: CellRecord) -> str:
    return f"{cell.framework} {cell.column}"


def doubt_notes(rows: list[Row]) -> list[str]:
    """A line per side compared from an unreliable cell (none reliable was measured), and per faster unreliable cell
    passed over for a reliable one: what the `?` and the choice rest on."""
    lines = []
    for r in rows:
        for side, ours in (("CPU", r.ours_cpu), ("GPU", r.ours_gpu)):
            if ours and (why := doubts(ours)):
                lines.append(f"{r.network}: best {side} {named(ours)} compared though {', '.join(why)} "
                             f"({DOUBT_MARK}): no reliable {side} cell of it was measured")  # fmt: skip
            if faster := r.passed_over.get(side.lower()):
                lines.append(f"{r.network}: {named(faster)} was faster ({seconds(faster.median_s)}) but "
                             f"{', '.join(doubts(faster))}: compared is {named(ours)}, the fastest reliable "
                             f"{side} cell")  # fmt: skip
    return lines


HEAD = ("network", "batch", "here, best CPU", "paper, best CPU", "here vs paper CPU", "paper, best GPU",
        "here (CPU) vs paper GPU", "here, best GPU")  # fmt: skip


def values(r: Row) -> list[str]:
    """The row's text under HEAD; a figure from an unreliable cell, and each ratio from it, marked."""

    def ours(cell: CellRecord | None) -> str:
        return f"{table_seconds(cell.median_s)}{_mark(cell)} ({named(cell)})" if cell else "-"

    def theirs(fig: Figure | None) -> str:
        return f"{table_seconds(fig.seconds)} ({fig.tool}, {fig.where})" if fig else "-"

    def ratio(theirs: Figure | None) -> str:
        value = r.ratio(r.ours_cpu, theirs)
        return "-" if value is None else f"{times(value)}{_mark(r.ours_cpu)}"  # 0.0093x, not 0.00x

    return [r.network, str(r.batch), ours(r.ours_cpu), theirs(r.paper_cpu), ratio(r.paper_cpu), theirs(r.paper_gpu),
            ratio(r.paper_gpu), ours(r.ours_gpu)]  # fmt: skip


def _mark(cell: CellRecord | None) -> str:
    return DOUBT_MARK if cell and doubts(cell) else ""


def legend(rows: list[Row]) -> list[str]:
    """What the figures are, and what `?` means where a row shows one."""
    lines = ["seconds per mini-batch in fp32 at the paper's batch; \"1.50x\" means this machine is 1.5 times as fast, "
             "\"0.50x\" half as fast"]  # fmt: skip
    marked = any(_mark(r.ours_cpu) or _mark(r.ours_gpu) for r in rows)
    return lines + [LEGEND] * marked


def chart(rows: list[Row]) -> Chart:
    series = {
        "this machine, best CPU": Series("this machine, best CPU", []),
        "this machine, best GPU": Series("this machine, best GPU", []),
        "paper, best CPU": Series("paper, best CPU", []),
        "paper, best GPU": Series("paper, best GPU", []),
    }
    for r in rows:
        for name, ours in (("this machine, best CPU", r.ours_cpu), ("this machine, best GPU", r.ours_gpu)):
            if ours:
                why = f" ({DOUBT_MARK} {', '.join(doubts(ours))})" if doubts(ours) else ""
                text = tip(ours, f"{name}: {named(ours)}{why}")
                series[name].points.append(Point(r.network, ours.median_s, tip=text, doubtful=bool(why)))
        for name, theirs in (("paper, best CPU", r.paper_cpu), ("paper, best GPU", r.paper_gpu)):
            if theirs:
                text = f"{name}: {seconds(theirs.seconds)}\n{theirs.tool}, {theirs.where}\n{CITATION}"
                series[name].points.append(Point(r.network, theirs.seconds, tip=text))
    return doubted(Chart(
        "paper", "bars", "This machine against Shi et al. (2016)", "network", "seconds per mini-batch (fp32)",
        [s for s in series.values() if s.points], categories=[r.network for r in rows], log_y=True,
        caption=f"fastest reliable fp32 cell here against the fastest tool and configuration in {CITATION}",
    ), DISTURBED)  # fmt: skip
