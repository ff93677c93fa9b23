"""This machine against the paper's own numbers.

The paper's Table 7 ships with dlperf as package data (`dlperf/data/shi2016_table7.csv`, seconds per mini-batch):
S. Shi, Q. Wang, P. Xu, X. Chu, "Benchmarking State-of-the-Art Deep Learning Software Tools", arXiv:1608.07249
(v7, Feb 2017). Per network, the best CPU figure is the fastest of five tools on a desktop CPU (i7-3820, 1-8
threads) and a server CPU (2x Xeon E5-2630 v3, 1-32 threads); the best GPU figure the fastest on a GTX 980,
GTX 1080 or one GK210 of a Tesla K80. Only fp32 cells at the paper's own mini-batch are held against them: the paper
trained in fp32, and another batch is another workload.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from importlib import resources

from dlperf.report.charts import Chart, Point, Series, tip
from dlperf.report.format import seconds
from dlperf.store.records import CellRecord

CITATION = (
    'S. Shi, Q. Wang, P. Xu, X. Chu, "Benchmarking State-of-the-Art Deep Learning Software Tools", '
    "arXiv:1608.07249 (v7, Feb 2017), Table 7"
)
GPUS = {"gtx980": "GTX 980", "gtx1080": "GTX 1080", "k80": "Tesla K80 (one GK210)"}


@dataclass(frozen=True)
class Figure:
    seconds: float
    tool: str
    where: str  # "server CPU, 16 threads", "GTX 1080"


@dataclass
class Row:
    network: str  # the paper's name: FCN-S, ...
    workload: str
    batch: int
    ours_cpu: CellRecord | None  # this machine's fastest fp32 CPU cell
    ours_gpu: CellRecord | None
    paper_cpu: Figure | None
    paper_gpu: Figure | None

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


def best(network: str, gpu: bool) -> Figure | None:
    """The paper's fastest figure for `network` over every tool, on CPUs or on GPUs."""
    figures = [
        Figure(float(value), row["tool"], _where(column))
        for row in table7()
        if row["network"] == network
        for column, value in row.items()
        if value and column not in ("network", "batch", "tool") and (column in GPUS) == gpu
    ]
    return min(figures, key=lambda f: f.seconds, default=None)


def batch_of(network: str) -> int | None:
    return next((int(r["batch"]) for r in table7() if r["network"] == network), None)


def compare(cells: list[CellRecord]) -> tuple[list[Row], list[str]]:
    """Rows for the workloads of the paper among `cells`, and notes on those left out (and why)."""
    rows: dict[str, Row] = {}
    notes: list[str] = []
    for c in cells:
        network = c.workload_spec.get("paper")
        if not network or not c.ok or not c.median_s or c.mode != "fp32" or c.loader:  # Table 7: synthetic batches
            continue
        if c.batch != batch_of(network):
            notes.append(f"{c.workload}: batch {c.batch}, the paper used {batch_of(network)}: not compared")
            continue
        row = rows.setdefault(
            c.workload, Row(network, c.workload, c.batch, None, None, best(network, False), best(network, True))
        )
        side = "ours_cpu" if c.device == "cpu" else "ours_gpu"
        if getattr(row, side) is None or c.median_s < getattr(row, side).median_s:
            setattr(row, side, c)
    return list(rows.values()), sorted(set(notes))


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
                where = f"{ours.framework} {ours.column}"
                series[name].points.append(Point(r.network, ours.median_s, tip=tip(ours, f"{name}: {where}")))
        for name, theirs in (("paper, best CPU", r.paper_cpu), ("paper, best GPU", r.paper_gpu)):
            if theirs:
                text = f"{name}: {seconds(theirs.seconds)}\n{theirs.tool}, {theirs.where}\n{CITATION}"
                series[name].points.append(Point(r.network, theirs.seconds, tip=text))
    return Chart(
        "paper", "bars", "This machine against Shi et al. (2016)", "", "seconds per mini-batch (fp32)",
        [s for s in series.values() if s.points], categories=[r.network for r in rows], log_y=True,
        caption=f"fastest fp32 cell here against the fastest tool and configuration in {CITATION}",
    )  # fmt: skip
