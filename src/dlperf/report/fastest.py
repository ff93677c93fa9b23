"""Which framework trains each workload fastest, per column: the Table-7 view's answer to "which framework", with by
how much and how sure.

Where a run measured one workload, mode and column under two or more frameworks, the fastest is named with its
speed-up over the next fastest (the runner-up's median over its own) and, where both cells' steps are at hand and
neither median is of too few steps, the 95% interval of that speed-up (`report/speedup.py`). A comparison that rests on
a disturbed cell (other processes' load, steal time, few samples, an unsettled warm-up: `charts.disturbances`) says
so: its order may be the machine's, not the frameworks'. So does a fastest cell that kept more cores busy than its
threads (MXNet's engine worker beside the Python thread: `table.cores_beyond_threads`): it was not faster on the same
cores. An interval from one process per cell holds only the noise within that process.

Here too is the one rule by which every view and search tells two measured cells apart (`faster`, `told_apart`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dlperf.measure.stats import FEW_SAMPLES, few
from dlperf.report.columns import column_order
from dlperf.report.speedup import Speedup, speedup
from dlperf.store.records import CellRecord

HEAD = "fastest framework per workload and column (its speed-up over the next fastest, 95% interval)"


@dataclass(frozen=True)
class Fastest:
    workload: str
    mode: str  # the mode label ("fp32", "bf16", "fp32 · data:w2"), "" when the view shows no mode column
    column: str
    cell: CellRecord  # the fastest framework's cell
    next: CellRecord  # the runner-up's
    compared: int  # how many frameworks measured it
    interval: Speedup | None  # None: a side without samples, or a median of too few steps
    disturbed: bool  # a compared cell was disturbed (`charts.disturbances`)
    busy: float | None = None  # the cores the fastest cell kept busy, where well above its threads; else None

    @property
    def ratio(self) -> float:
        return self.next.median_s / self.cell.median_s

    def text(self) -> str:
        where = " ".join(p for p in (self.workload, self.mode, self.column) if p)
        if self.interval:
            told = f" [{self.interval.low:.2f}-{self.interval.high:.2f}]"
        else:
            told = f" [no interval: a median of under {FEW_SAMPLES} steps]" if self.few else " [no interval]"
        line = f"{where}: {self.cell.framework}, {self.ratio:.2f}x{told} as fast as {self.next.framework}"
        line += f" (of {self.compared})" if self.compared > 2 else ""
        line += "" if self.apart else ", not told apart"
        if self.busy:
            line += f", {self.cell.framework} kept {self.busy:.2f} cores busy at {self.cell.threads} thread(s)"
        return line + (", a compared cell disturbed" if self.disturbed else "")

    @property
    def few(self) -> bool:
        return few(self.cell.n) or few(self.next.n)

    @property
    def apart(self) -> bool:
        """Told apart from the runner-up (`faster`): by the speed-up's interval, else by their medians."""
        return faster(self.next, self.cell, self.interval)

    def to_json(self) -> dict:
        return {
            "workload": self.workload, "mode": self.mode, "column": self.column,
            "framework": self.cell.framework, "median_s": self.cell.median_s,
            "next": self.next.framework, "next_median_s": self.next.median_s, "speedup": self.ratio,
            "ci_low": self.interval and self.interval.low, "ci_high": self.interval and self.interval.high,
            "told_apart": self.apart, "frameworks": self.compared, "disturbed": self.disturbed,
            "cores_busy_beyond_threads": self.busy,
        }  # fmt: skip


def build(
    groups: dict[tuple[str, str, str], list[CellRecord]],
    samples: dict[str, list[list[float]]],
    disturbed,
    beyond=lambda cell: None,
) -> list[Fastest]:
    """`groups`: (workload, mode label, column) -> its timed, training cells, one per framework; `disturbed(cell)`:
    whether the cell's median is not only the model's; `beyond(cell)`: the cores it kept busy where well above its
    threads, else None. Groups of one framework compare nothing and are left out."""
    out = []
    for (workload, mode, column), cells in groups.items():
        if len({c.framework for c in cells}) < 2:
            continue
        first, second = sorted(cells, key=lambda c: c.median_s)[:2]
        interval = speedup_interval(second, first, samples.get(second.key), samples.get(first.key))
        busy = beyond(first)
        out.append(
            Fastest(workload, mode, column, first, second, len(cells), interval, any(map(disturbed, cells)), busy)
        )
    order = list(dict.fromkeys((w, m) for w, m, _ in groups))  # the rows' order, then the columns'
    return sorted(out, key=lambda f: (order.index((f.workload, f.mode)), column_order(f.column)))


def lines(found: list[Fastest]) -> list[str]:
    """The view's lines: its head (where every interval rests on one process a side, that said), then one line per
    comparison, a list item ("- ") in text and Markdown alike: four workloads at two thread counts were eight
    comparisons run together in one paragraph, the answer to "which framework" the hardest line to read. A line whose
    interval alone rests on one process a side, among others of more, says so itself. A cell's processes are those its
    median and interval count (`stats.counted`), not those left out for too few steps."""
    if not found:
        return []
    told = [f for f in found if f.interval]
    steps_only = [f for f in told if f.interval.steps_only]  # `Speedup.steps_only`: one process a side
    every = bool(told) and len(steps_only) == len(told)
    noise = "; each cell one process: its interval holds only that process's noise (--repeats 3 for more)"
    its = ", its interval only its one process a side's noise"
    return [f"{HEAD}{noise if every else ''}:", *(f"- {f.text()}{its if f in steps_only and not every else ''}"
                                                  for f in found)]  # fmt: skip


# One rule tells two measured cells apart wherever a view or a search says "fastest", "faster", "best" or recommends a
# setting: a speed-up's 95% interval where one is computed (`speedup_interval`, `faster`), else their 95% intervals of
# the median (`told_apart`), and where either has none, their medians (MEDIANS_APART). The table's star, the fastest
# framework, the best mode, the fleet's fastest machine, the loader recommendation, optimize's and crossover's choices.


def speedup_interval(baseline: CellRecord, candidate: CellRecord, baseline_steps, candidate_steps) -> Speedup | None:
    """`candidate`'s speed-up over `baseline` with its 95% interval (`report/speedup.py`), from each side's steps per
    process; None where a side has no steps, or either median is of too few (`few`): a bootstrap over fewer steps than
    have a 95% interval of the median is no 95% interval either (over 3 steps, the range of the 3: 75%)."""
    if not baseline_steps or not candidate_steps or few(baseline.n) or few(candidate.n):
        return None
    return speedup(baseline_steps, candidate_steps)


def faster(baseline: CellRecord, candidate: CellRecord, interval: Speedup | None) -> bool:
    """Whether `candidate` is told apart from `baseline` as the faster: its speed-up's interval (`speedup_interval`)
    lies above 1 where there is one, else `told_apart` says so of its lower median."""
    if interval is not None:
        return interval.low > 1.0
    return candidate.median_s < baseline.median_s and told_apart(baseline, candidate)


def overlap(a: CellRecord, b: CellRecord) -> bool:
    """Whether two cells' 95% intervals of the median overlap: neither is told apart as the faster."""
    (a_low, a_high), (b_low, b_high) = span(a), span(b)
    return a_low <= b_high and b_low <= a_high


# Two medians without a 95% interval to judge them by (a cell of under 6 timed steps has none, nor an older store's) are
# told apart only this far apart, as a share of the faster's, and beyond either cell's IQR (the spread its timer
# recorded): two processes on a shared machine differ by a few percent, and a few steps cannot say which is which.
MEDIANS_APART = 0.05


def has_interval(cell: CellRecord) -> bool:
    """A 95% interval of the median to judge the cell by: stored (an older store's cell has none), and of enough steps
    (`few`: a cell of several processes stores an interval however few its steps)."""
    return cell.ci_low_s is not None and cell.ci_high_s is not None and not few(cell.n)


def told_apart(a: CellRecord, b: CellRecord) -> bool:
    """Whether one of two cells' steps is measurably slower than the other's: their 95% intervals of the median do not
    overlap; where either has none, their medians differ by more than MEDIANS_APART of the faster's and by more
    than either cell's IQR. What the loader recommendation ties on (`report.data.recommend`, `optimize_loader`), the
    table's star, the fleet's fastest machine and crossover's thread count."""
    intervals = (span(a), span(b)) if has_interval(a) and has_interval(b) else None
    return _apart(a, b, a.median_s, b.median_s, intervals)


def _apart(a: CellRecord, b: CellRecord, ours: float, theirs: float, intervals: tuple | None) -> bool:
    """Two steps of cells `a` and `b` told apart: their 95% `intervals` ((low, high) each) do not overlap; without
    them, the steps differ by more than MEDIANS_APART of the faster's and by more than either cell's IQR."""
    if intervals is not None:
        (a_low, a_high), (b_low, b_high) = intervals
        return a_high < b_low or b_high < a_low
    return abs(ours - theirs) > max(MEDIANS_APART * min(ours, theirs), a.iqr_s or 0.0, b.iqr_s or 0.0)


# A loader cell's step is bursty: most steps find a batch ready, some wait for the worker, and the median leaves the
# waits out (one core, tiny-alexnet-s over 32 images, w1: 200 samples/s at the median step, 128 at the mean; a plain
# loop over the same data trained 145 samples/s). Its rate and the loader settings are judged on the mean step, the
# long run's, and told apart by the 95% intervals of the mean (`stats.mean_ci`), else as medians are without theirs.


def long_run_s(cell: CellRecord) -> float | None:
    """A cell's mean step: what a long run pays a step (its time is the sum of its steps, each wait for data
    included); its median where the cell kept no mean."""
    return cell.mean_s or cell.median_s


def has_mean_interval(cell: CellRecord) -> bool:
    return cell.mean_ci_low_s is not None and cell.mean_ci_high_s is not None


def told_apart_long_run(a: CellRecord, b: CellRecord) -> bool:
    """`told_apart` of the mean steps: their 95% intervals of the mean do not overlap; where either has none, the mean
    steps differ by more than MEDIANS_APART of the faster's and by more than either cell's IQR."""
    both = has_mean_interval(a) and has_mean_interval(b)
    intervals = ((a.mean_ci_low_s, a.mean_ci_high_s), (b.mean_ci_low_s, b.mean_ci_high_s)) if both else None
    return _apart(a, b, long_run_s(a), long_run_s(b), intervals)


def span(cell: CellRecord) -> tuple[float, float]:
    """A cell's 95% interval of the median; its median alone where it has none (an older store's cell)."""
    if cell.ci_low_s is None or cell.ci_high_s is None:
        return cell.median_s, cell.median_s
    return cell.ci_low_s, cell.ci_high_s


def tie(cells: list[CellRecord]) -> str:
    """Why `cells` are not told apart (`told_apart`), as a note says it."""
    if all(has_interval(c) for c in cells):
        return "their 95% intervals of the median overlap"
    return f"their medians within {MEDIANS_APART:.0%} or an IQR of each other, without 95% intervals to judge them by"
