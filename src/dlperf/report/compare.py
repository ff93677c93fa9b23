"""`dlperf compare A B`: is run B faster or slower than run A, cell by cell, and can we tell?

    dlperf compare 3 4                      # two runs of --db
    dlperf compare laptop.db server.db:2    # the latest run of one file against run 2 of another

Cells are matched by key (workload|framework|device|threads|mode). Whether B differs from A is decided on the
per-process medians, never on raw steps: consecutive steps of one process are correlated, and on a shared machine two
processes of one cell differ more than the steps within one, so a test on raw steps calls that process-to-process
noise significant. The test is Welch's t-test on the logs of the per-process medians (a ratio becomes a difference),
its 95% interval turned back into one for the ratio; the p-values of one comparison are adjusted together with Holm's
step-down method, since among many cells some would pass alpha by chance. With fewer than 2 processes per side there
is nothing to test: the verdict says so. The ratio B/A (above 1, B is slower) of a tested cell is the estimate that
test and interval are built around, exp(mean log B - mean log A) of the per-process medians (the ratio of their
geometric means), so it always lies inside its interval and the threshold judges what the test judged. (B's median
over A's, the cells' medians, can lie outside: processes whose medians split into two groups put the median at one
group and the mean of the logs between them.) Without a test (and so without an interval) B/A is B's median over
A's, the quotient of the two columns beside it: the geometric means of 1, 1 and 10 ms against one process of 1.5 ms
read 0.693 beside medians of 1.01 and 1.50 ms, and the gate's untested-yet-slower note missed it.

`compare` is the pure part (cells and samples in, results out); `load` reads a side from a store; `render_*` lay the
result out; `dlperf compare` itself is `commands/compare.py`. The test is `speedup.welch_log`, a speed-up's too.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from dlperf.measure.stats import FEW_SAMPLES, counted
from dlperf.measure.units import plural
from dlperf.report.compare_data import data_note, without_data
from dlperf.report.compare_side import Side, machine_lines, machine_warning, setting_changes, setting_lines, usable
from dlperf.report.format import markup, table_seconds, terminal
from dlperf.report.speedup import log_ratio, welch_log
from dlperf.report.table import mode_label
from dlperf.report.utilization import disturbance
from dlperf.store.records import CellRecord
from dlperf.vocab import Status
from dlperf.workloads.base import split_variant, workload_diff

CONFIDENCE = 0.95  # of the interval of each ratio
MIN_PROCESSES = 2  # per side, for a test at all
ADVICE = "measure both runs with --repeats 3 or more for a verdict"
WIDE = 10.0  # an interval of the ratio whose bounds are further apart than this (x0.3 to x3) tells nothing either way


class Verdict(StrEnum):
    FASTER = "faster"
    SLOWER = "slower"
    SAME = "no significant change"
    TOO_LITTLE_DATA = "too little data"
    NOT_COMPARABLE = "not comparable"


@dataclass
class CellResult:
    """One cell measured `ok` on both sides."""

    key: str
    workload: str
    framework: str
    column: str  # cpu:N or the device, as in the table
    mode: str
    a_median_s: float
    b_median_s: float
    a_process_medians: list[float]  # the median step time of each process the cell's median counts (`counted`)
    b_process_medians: list[float]
    ratio: float  # B/A, above 1 B is slower: tested, of the per-process medians' geometric means (`log_ratio`), else
    # b_median_s / a_median_s
    ci_low: float | None = None  # 95% interval of the ratio (Welch, on log per-process medians)
    ci_high: float | None = None
    p: float | None = None  # Welch's p-value, and Holm-adjusted over the comparison's tested cells
    p_holm: float | None = None
    direction: int = 0  # sign of the tested difference of mean logs: 1 means B slower
    verdict: Verdict = Verdict.TOO_LITTLE_DATA
    reason: str = ""  # why there is no test, or why the cells are not comparable
    regression: bool = False  # slower by more than the threshold
    loader: str = ""  # the cells' loader setting (`--data DIR`); "" on synthetic data
    busy: str = ""  # what loaded the machine while either side was timed ("B: other processes used 86% of the CPUs")
    left_out: str = ""  # processes of too few steps the cells' medians leave out, so the test too ("B 2 of 3")

    @property
    def label(self) -> str:
        return f"{self.workload} {self.framework} {self.column} {mode_label(self.mode, self.loader)}"


@dataclass(frozen=True)
class Unmatched:
    """A cell that could not be compared: on one side only, or not `ok` on one side."""

    key: str
    label: str
    why: str  # "only in A", "B: failed", ...
    # a cell on one side only whose framework (else workload) the other side has no cell of: ("framework", "jax")
    whole: tuple[str, str] | None = None
    # measured in A, failed, timed out or unsupported in B: for a gate, a regression (`Comparison.failed`)
    failed_in_b: bool = False


@dataclass
class Comparison:
    alpha: float
    threshold: float
    cells: list[CellResult] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)
    data: list[str] = field(default_factory=list)  # what each side read where the folders differ; a side unfinished
    b_unfinished: str = ""  # B's run not finished (`Side.unfinished`): the cells of A it lacks may yet be measured
    b_goes_on: str = "resume it (dlperf run --resume)"  # what finishes B's run, naming its store (`commands.compare`)
    other_hardware: bool = False  # A and B ran on different hardware (`compare_side.machine_warning`)

    def regressions(self) -> list[CellResult]:
        return [c for c in self.cells if c.regression]

    def failed(self) -> list[Unmatched]:
        """The cells A measured and B did not: failed, timed out or unsupported in B. A gate must not pass them (a
        candidate whose step hangs past --timeout had read "no regression", exit 0; one whose model now calls what the
        framework lacks, "unsupported" in B, too)."""
        lacked = "B: unsupported"  # on other hardware, what B's machine lacks (a GPU count, glibc's malloc): a note
        return [u for u in self.unmatched if u.failed_in_b and not (self.other_hardware and u.why == lacked)]

    def awaited(self) -> list[Unmatched | CellResult]:
        """The cells of A an unfinished B has planned and not measured yet (`B: pending`; one B never planned is
        only in A, which no --resume measures), and those untested where B has measured fewer processes than A (an
        interrupted candidate's slowed cell, one process of three, read "too little data" beside a pass): until
        it has, no verdict is a pass."""
        if not self.b_unfinished:
            return []
        pending = [u for u in self.unmatched if u.why == "B: pending"]
        return [*pending, *(c for c in self.cells if c.verdict == Verdict.TOO_LITTLE_DATA
                            and len(c.b_process_medians) < len(c.a_process_medians))]  # fmt: skip

    def tested(self) -> list[CellResult]:
        """The cells the test could judge: faster, slower or no significant change."""
        return [c for c in self.cells if c.verdict in (Verdict.FASTER, Verdict.SLOWER, Verdict.SAME)]

    def untested_slower(self) -> list[CellResult]:
        """Cells without a verdict whose ratio alone is beyond the threshold: what a gate cannot judge but must say."""
        return [c for c in self.cells if c not in self.tested() and c.ratio > 1 + self.threshold]

    def outcome(self) -> str:
        """What a CI gate reads: a regression, no regression among the tested cells, or no verdict (none tested)."""
        if self.regressions() or self.failed():
            return "regression"
        return "no regression" if self.tested() and not self.awaited() else "no verdict"

    def counts(self) -> dict[str, int]:
        found = Counter(c.verdict for c in self.cells)
        return {v.value: found[v] for v in Verdict}

    def notes(self) -> list[str]:
        """One line per distinct reason cells got no verdict, with how many; the cells timed on a busy machine."""
        reasons = Counter(c.reason for c in self.cells if c.verdict == Verdict.TOO_LITTLE_DATA)
        busy = [f"{c.label} ({c.busy})" for c in self.cells if c.busy and not c.regression]  # a regression's: its line
        said = [f"timed on a busy machine, so their ratios measure its load as much as the runs: {'; '.join(busy)}"]
        said = said if busy else []
        left = [f"{c.label} ({c.left_out})" for c in self.cells if c.left_out]
        said += [f"processes of fewer than {FEW_SAMPLES} timed steps left out of the ratio, the test and the process "
                 f"counts, as the cells' medians leave them out: {'; '.join(left)}"] if left else []  # fmt: skip
        return [*(f"{plural(n, 'cell')} with too little data: {why}" for why, n in reasons.items()), *self.data,
                *said, *self._holm_note()]  # fmt: skip

    def _holm_note(self) -> list[str]:
        """Why a cell whose interval leaves out 1 reads "no significant change": the interval is the cell's own, the
        verdict is adjusted for the cells tested together (mlp 0.961 [0.927, 0.996], p 0.075 after Holm, said nothing
        of it)."""
        apart = [c.label for c in self.cells if c.verdict == Verdict.SAME and (c.ci_high < 1 or c.ci_low > 1)
                 and c.p is not None and c.p < self.alpha]  # fmt: skip  # Holm, not a lower --alpha, said it
        if not apart:
            return []
        return [
            f"no significant change though the 95% interval leaves out 1: {'; '.join(apart)}: each interval is "
            f"its cell's own, the verdict is adjusted for the {len(self.tested())} cells tested together (Holm)"
        ]


# ----------------------------------------------------------------------------------------------------------------------
# The statistics: pure


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: the i-th smallest of m p-values is multiplied by m - i + 1 (1-based), capped at
    1, and kept at least as large as the one before it. In the input's order."""
    m = len(pvalues)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: pvalues[j])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def process_medians(processes: Sequence[Sequence[float]]) -> list[float]:
    """The median of each process the cell's median counts (`stats.counted`: of FEW_SAMPLES timed steps or more,
    where any has that many; a failed process may have none): the unit of the test. Counting them all turned B/A
    against the medians: A 0.190 s, B 27.4 ms read 1.196, B's two processes of 1 and 2 disturbed steps outweighing
    its one of 32."""
    return [statistics.median(p) for p in counted([list(p) for p in processes])]


def left_out(processes: Sequence[Sequence[float]]) -> int:
    """How many of the processes with samples `process_medians` leaves out."""
    return sum(1 for p in processes if len(p)) - len(process_medians(processes))


def compare(
    a_cells: list[CellRecord],
    b_cells: list[CellRecord],
    a_samples: dict[str, Sequence[Sequence[float]]],
    b_samples: dict[str, Sequence[Sequence[float]]],
    *,
    alpha: float = 0.05,
    threshold: float = 0.05,
    data: tuple[str | None, str | None] = (None, None),
) -> Comparison:
    """Compare two runs' cells (`Store.cells`), matched by key. `*_samples`: per cell key, the raw step times of each
    process (`Store.samples`); `data`: each run's --data folder, which its built-in loader cells read."""
    result = Comparison(alpha, threshold)
    for a, b in _pairs(a_cells, b_cells):
        key = (a or b).key
        why = _unmatched_why(a, b)
        if why:
            whole = _whole(a or b, b_cells if b is None else a_cells) if a is None or b is None else None
            failed = (
                a is not None
                and b is not None
                and usable(a)
                and (b.status.is_failure or b.status == Status.UNSUPPORTED)
            )
            result.unmatched.append(Unmatched(key, _label(a or b), why, whole, failed))
        else:
            result.cells.append(_cell(a, b, a_samples.get(a.key, []), b_samples.get(b.key, [])))
            result.data += [
                line for line in (model_note(a, b), data_note(a, b, data)) if line and line not in result.data
            ]
    _decide(result)
    return result


def _pairs(a_cells: list[CellRecord], b_cells: list[CellRecord]) -> list[tuple[CellRecord | None, CellRecord | None]]:
    """Each cell of A with B's of its key (then one of another batch is said not comparable), else with B's of the
    same work (`_same_work`); A's order, then B's cells left, as (None, b)."""
    a_keys, b_by_key = {c.key for c in a_cells}, {c.key: c for c in b_cells}
    left = {_same_work(c): c for c in b_cells if c.key not in a_keys}
    pairs = [(a, b_by_key.get(a.key) or left.pop(_same_work(a), None)) for a in a_cells]
    return pairs + [(None, b) for b in left.values()]


def _same_work(cell: CellRecord) -> tuple[str, str, int | None]:
    """What matches a cell to the other run's where no key does: its key, with a workload at a batch of its own
    (`fcn-r@b1024`, as advise's and crossover's thread searches name theirs) read as the workload at that batch.
    advise's `fcn-r@b1024` and a run's `fcn-r`, at its batch of 1024, are one cell ("share no cell" said otherwise)."""
    base, _ = split_variant(cell.workload)
    return base, cell.key.removeprefix(cell.workload), cell.batch


def _whole(cell: CellRecord, other: list[CellRecord]) -> tuple[str, str] | None:
    """What of a one-sided `cell` the other side measured none of: its framework, else its workload; None if both."""
    if cell.framework not in {c.framework for c in other}:
        return "framework", cell.framework
    if _same_work(cell)[::2] not in {_same_work(c)[::2] for c in other}:  # the workload at its batch
        return "workload", cell.workload
    return None


def not_compared(unmatched: list[Unmatched]) -> str:
    """The cells not compared, by reason ("only in B: every jax, tensorflow and mxnet cell (42)"): a framework or
    workload of two or more cells that the other side has none of is said as a whole (a run of four frameworks against
    one of PyTorch listed its 42 other cells one by one), any other cell by its label."""
    parts = []
    for why in dict.fromkeys(u.why for u in unmatched):
        members, items = [u for u in unmatched if u.why == why], []
        for kind in ("framework", "workload"):
            wholes = [u for u in members if u.whole and u.whole[0] == kind]
            if len(wholes) > 1:
                names = list(dict.fromkeys(u.whole[1] for u in wholes))
                named = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
                items.append(f"every {named} cell ({len(wholes)})")
                members = [u for u in members if u not in wholes]
        parts.append(f"{why}: " + ", ".join([*items, *(u.label for u in members)]))
    return "; ".join(parts)


def _unmatched_why(a: CellRecord | None, b: CellRecord | None) -> str | None:
    if a is None or b is None:  # a cell its unfinished run planned and has not measured yet is not "only" there
        pending = ", not measured yet" if (a or b).status == Status.PENDING else ""
        return f"only in {'B' if a is None else 'A'}{pending}"
    bad = [f"{name}: {_failure(c)}" for name, c in (("A", a), ("B", b)) if not usable(c)]
    return ", ".join(bad) or None


def _failure(cell: CellRecord) -> str:
    return cell.status.value if not cell.ok else "no median"


def _label(cell: CellRecord) -> str:
    return f"{cell.workload} {cell.framework} {cell.column} {mode_label(cell.mode, cell.loader)}"


def _cell(a: CellRecord, b: CellRecord, a_processes, b_processes) -> CellResult:
    cell = CellResult(
        a.key, a.workload, a.framework, a.column, a.mode, a.median_s, b.median_s,
        process_medians(a_processes), process_medians(b_processes), ratio=b.median_s / a.median_s, loader=a.loader,
        busy=busy(a, b),
    )  # fmt: skip
    ran = {"A": a_processes, "B": b_processes}
    left = {name: n for name, processes in ran.items() if (n := left_out(processes))}
    cell.left_out = ", ".join(f"{name} {n} of {sum(1 for p in ran[name] if len(p))}" for name, n in left.items())
    differs = _workload_diff(a, b, ignore=MODEL_KEYS)
    if differs:
        cell.verdict, cell.reason = Verdict.NOT_COMPARABLE, f"the workloads differ: {differs}"
        return cell
    few = [
        f"{name} has {plural(n, 'process', 'es')} " + (f"of {FEW_SAMPLES} timed steps or more" if name in left
                                                        else "with samples")
        for name, n in (("A", len(cell.a_process_medians)), ("B", len(cell.b_process_medians)))
        if n < MIN_PROCESSES
    ]  # fmt: skip
    if few:
        steps = f", each process timed for {FEW_SAMPLES} steps or more (a longer --max-time)," if left else ""
        cell.reason = f"{' and '.join(few)}; {ADVICE.replace(' for a verdict', steps + ' for a verdict')}"
        return cell
    tested = welch_log(cell.a_process_medians, cell.b_process_medians, CONFIDENCE)
    if tested is None:
        cell.reason = "the per-process medians have zero spread, so no test is possible; measure with more --repeats"
        return cell
    cell.p, cell.ci_low, cell.ci_high, cell.direction = tested
    # what the test and its interval are about; untested, B/A stays B's median over A's, as the columns beside it
    # read (A 1, 1 and 10 ms, B one process of 1.5 ms: the geometric means' 0.693 beside medians of 1.01 and 1.50 ms)
    cell.ratio = log_ratio(cell.a_process_medians, cell.b_process_medians)
    return cell


def busy(a: CellRecord, b: CellRecord) -> str:
    """What loaded the machine while each side's cell was timed, by its stored load (`utilization.disturbance`: other
    processes' share of the CPUs, the CPU steal), "" where neither was: a run timed beside another job reads slower
    for that job (a user's tiny-fcn-r, x1.975 with others on 86% of the CPUs: a regression, exit 1, unsaid)."""
    said = [(name, disturbance({"others_cpu_share": c.others_cpu_share, "steal_fraction": c.steal_fraction}))
            for name, c in (("A", a), ("B", b))]  # fmt: skip
    return "; ".join(f"{name}: {why}" for name, why in said if why)


def _workload_diff(a: CellRecord, b: CellRecord, ignore: tuple[str, ...] = ()) -> str:
    """How two cells' workload definitions differ, e.g. "batch 64 -> 128"; "" when they are the same but for the keys
    in `ignore`. The data (its folder and size, `compare_data.DATA_KEYS`) is no part of the model: `data_note` says
    when it differs. A key of `extra` one run holds and the other lacks is what one dlperf recorded and the other did
    not yet (the probe's `input_names`, `no_checkpoint`), not a change of the model: only the keys both hold are
    compared."""
    sa, sb = without_data(a.workload_spec), without_data(b.workload_spec)
    both = sa["extra"].keys() & sb["extra"].keys()
    # a workload at a batch of its own is named for it and has no paper figure or DDP batch (`plan.workloads`)
    named = VARIANT_KEYS if a.workload != b.workload else ()
    kept = [{**s, "extra": {k: v for k, v in s["extra"].items() if k in both}} for s in (sa, sb)]
    if "extra" in ignore:  # the model's own record left out, not the shape of its inputs: the step's work
        kept = [{**s, **{f"extra.{k}": s["extra"][k] for k in WORK_EXTRA if k in both}} for s in kept]
    return workload_diff(*kept, ignore=(*named, *ignore))


VARIANT_KEYS = ("name", "paper", "ddp_batch")  # what `NAME@bN` changes of NAME but its batch
WORK_EXTRA = ("input_shapes",)  # of `extra`, what is the step's work: a dict of inputs' shapes (a sequence 32 -> 128)
# What a change of the model under one name changes: its layers (`params`, `config`, `outputs`), its optimizer, the
# file it is defined in and what the probe recorded of it (`extra`). The change a CI gate judges (a user's model one
# commit later, its file in another checkout): compared and tested, with `model_note` naming it. What the step's work
# is (its batch, its input, its data, its kind of network) still makes two cells not comparable.
MODEL_KEYS = ("params", "config", "outputs", "optimizer", "source", "notes", "hidden", "extra")


def model_note(a: CellRecord, b: CellRecord) -> str | None:
    """One line when the two cells' models differ but not their work (`MODEL_KEYS`): the ratio compares the two
    definitions, which is what a gate on a change of the model asks."""
    every = _workload_diff(a, b)
    if not every or _workload_diff(a, b, ignore=MODEL_KEYS):
        return None
    return f"{a.workload}: the model differs ({every}): its ratio compares the two definitions"


def _decide(result: Comparison) -> None:
    """Holm over every tested cell, then each tested cell's verdict and whether it is a regression."""
    tested = [c for c in result.cells if c.p is not None]
    for cell, adjusted in zip(tested, holm([c.p for c in tested]), strict=True):
        cell.p_holm = adjusted
        if adjusted >= result.alpha and cell.ci_low and cell.ci_high / cell.ci_low > WIDE:
            cell.reason = (f"a 95% interval of B/A whose bounds are over {WIDE:g} times apart (its column) tells "
                           f"neither a change nor none; {_more_processes(cell)}")  # fmt: skip
        elif adjusted >= result.alpha:
            cell.verdict = Verdict.SAME
        else:
            cell.verdict = Verdict.SLOWER if cell.direction > 0 else Verdict.FASTER
        cell.regression = cell.verdict == Verdict.SLOWER and cell.ratio > 1 + result.threshold


def _more_processes(cell: CellResult) -> str:
    """What would narrow a wide interval: 3 processes a side where a side has fewer (`ADVICE`); where both have 3 or
    more, more processes still, or a quieter machine (the spread between processes is what widens it)."""
    n = min(len(cell.a_process_medians), len(cell.b_process_medians))
    if n < 3:
        return ADVICE
    return (f"each side has {n} or more processes whose medians spread too far: measure both again with more "
            f"--repeats than {n}, or with fewer other processes on the machine")  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------------
# Rendering


def ratio_text(cell: CellResult) -> str:
    ci = f" [{bound(cell.ci_low)}, {bound(cell.ci_high)}]" if cell.ci_low is not None else ""
    return f"{cell.ratio:.3f}{ci}"


def bound(value: float) -> str:
    """An interval's bound: two processes a side gave [0.000, 1069194920802.435]."""
    return "<0.001" if value < 0.001 else ">1000" if value > 1000 else f"{value:.3f}"


def p_text(p: float | None) -> str:
    if p is None:
        return "-"
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


RATIO_LEGEND = (
    "B/A: with an interval, the ratio of the processes' geometric means (of each process's median step), what the "
    "test judges; without, B median / A median"
)
# what each cell's `ratio` (and `ci_low`, `ci_high`) is, in the JSON output: the field beside it that says so
RATIO_OF = (
    "B/A of the geometric means of the per-process medians (exp(mean log B - mean log A)), what the test and its "
    "interval judge; it can differ from b_median_s / a_median_s (the cells' medians of process medians), which it is "
    "where there is no interval (ci_low null)"
)
VISIBLE = 0.01  # a B/A this far from B median / A median: beyond what the medians' three figures shown explain


def ratio_legend(result: Comparison) -> list[str]:
    """The line saying what B/A is, where a cell's reads visibly unlike its B median / A median (the medians' quotient
    is B/A itself with one process a side, and close to it where the processes agree)."""
    differs = any(abs(c.ratio * c.a_median_s / c.b_median_s - 1) > VISIBLE for c in result.cells)
    return [RATIO_LEGEND] if differs else []


HEAD = ["workload", "framework", "column", "mode", "A median", "B median", "B/A [95% CI]", "processes A/B", "p (Holm)"]


def row_values(cell: CellResult) -> list[str]:
    return [
        cell.workload,
        cell.framework,
        cell.column,
        mode_label(cell.mode, cell.loader),
        table_seconds(cell.a_median_s),
        table_seconds(cell.b_median_s),
        ratio_text(cell),
        f"{len(cell.a_process_medians)}/{len(cell.b_process_medians)}",
        p_text(cell.p_holm),
    ]


def without_regression(result: Comparison, beyond: str) -> str:
    """The verdict's line where no cell regressed: no verdict (B unfinished, or nothing tested) or no regression."""
    if awaited := result.awaited():
        some = " (or not all their processes)" if any(isinstance(c, CellResult) for c in awaited) else ""
        return (f"no verdict: B's {result.b_unfinished}, and it has not measured {plural(len(awaited), 'cell')} of A "
                f"yet{some}; {result.b_goes_on}, then compare again: that is not a pass")  # fmt: skip
    if result.outcome() == "no verdict":
        return (f"no verdict: none of the {plural(len(result.cells), 'cell')} compared could be tested (the notes say "
                "why), and that is not a pass")  # fmt: skip
    return f"no regression: no tested cell {beyond}"


def summary_lines(result: Comparison) -> list[str]:
    counts = ", ".join(f"{n} {verdict}" for verdict, n in result.counts().items() if n)
    lines = [f"{plural(len(result.cells), 'cell')} measured in both runs: {counts or 'none'} (alpha "
             f"{result.alpha:g}, Holm-adjusted)"]  # fmt: skip
    regressions, untested, failed = result.regressions(), result.untested_slower(), result.failed()
    beyond = f"significantly slower, and B/A above {1 + result.threshold:g}"
    if regressions:
        listed = "; ".join(f"{c.label} x{c.ratio:.3f}" + (f" (timed on a busy machine: {c.busy})" if c.busy else "")
                           for c in regressions)  # fmt: skip
        lines.append(f"{plural(len(regressions), 'regression')} ({beyond}): {listed}")
    if failed:
        listed = "; ".join(f"{u.label} ({u.why})" for u in failed)
        lines.append(
            f"{plural(len(failed), 'regression')} (measured in A, failed, timed out or unsupported in B): {listed}"
        )
    if not regressions and not failed:
        lines.append(without_regression(result, beyond))
    if untested:
        listed = "; ".join(f"{c.label} x{c.ratio:.3f}" for c in untested)
        lines.append(f"note: untested, yet B/A above {1 + result.threshold:g}: {listed}")
    lines += [f"note: {c.label}: not comparable: {c.reason}" for c in result.cells if c.verdict == "not comparable"]
    lines += [f"note: {note}" for note in result.notes()]
    if left := [u for u in result.unmatched if u not in failed]:
        lines.append(f"note: {plural(len(left), 'cell')} not compared: {not_compared(left)}")
    return lines


VERDICT_STYLE = {
    Verdict.SLOWER: "red",
    Verdict.FASTER: "green",
    Verdict.SAME: "dim",
    Verdict.TOO_LITTLE_DATA: "yellow",
    Verdict.NOT_COMPARABLE: "magenta",
}


def render_rich(result: Comparison, a: Side, b: Side):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    files = os.path.realpath(a.db) != os.path.realpath(b.db)  # "run 1 against run 1" of two files read as itself
    names = {s.name: os.path.basename(s.db) for s in (a, b)}
    names = names if len(set(names.values())) == 2 else {s.name: s.db for s in (a, b)}  # two folders' run.db
    runs = [f"run {s.run_id}" + (f" of {names[s.name]}" if files else "") for s in (b, a)]
    table = Table(title=f"B / A: {runs[0]} against {runs[1]}, seconds per mini-batch")
    for i, name in enumerate([*HEAD, "verdict"]):
        right = 4 <= i < len(HEAD)
        table.add_column(name, justify="right" if right else "left", no_wrap=name in ("B/A [95% CI]", "verdict"))
    for cell in result.cells:
        style = ("bold " if cell.regression else "") + VERDICT_STYLE[cell.verdict]
        table.add_row(*(markup(v) for v in row_values(cell)), f"[{style}]{markup(cell.verdict.value)}[/]")
    lines = [a.heading(), b.heading(), *machine_lines(a, b), *setting_lines(a, b)]
    after = [*ratio_legend(result), *summary_lines(result)]
    return Group(*(Text(terminal(line)) for line in lines), table, *(Text(terminal(s)) for s in after))


def render_markdown(result: Comparison, a: Side, b: Side) -> str:
    head = [*HEAD, "verdict"]
    lines = [f"- {line}" for line in (a.heading(), b.heading(), *machine_lines(a, b), *setting_lines(a, b))]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join([*row_values(c), c.verdict.value]) + " |" for c in result.cells]
    return "\n".join([*lines, "", *(f"- {line}" for line in [*ratio_legend(result), *summary_lines(result)])])


def to_json(result: Comparison, a: Side, b: Side) -> dict[str, Any]:
    return {
        "a": a.to_json(),
        "b": b.to_json(),
        "same_machine": not machine_lines(a, b),
        "settings_differ": setting_changes(a, b),
        "hardware_warning": machine_warning(a, b),
        "alpha": result.alpha,
        "threshold": result.threshold,
        "confidence": CONFIDENCE,
        "ratio_of": RATIO_OF,
        "cells": [{**asdict(c), "verdict": c.verdict.value, "label": c.label} for c in result.cells],
        "unmatched": [asdict(u) for u in result.unmatched],
        "summary": {
            **result.counts(),
            "compared": len(result.cells),
            "tested": len(result.tested()),
            "not_compared": len(result.unmatched),
        },
        "outcome": result.outcome(),
        "regressions": [
            {k: getattr(c, k) for k in ("key", "label", "ratio", "ci_low", "ci_high", "p_holm", "busy")}
            for c in result.regressions()
        ],
        "failed_in_b": [{"key": u.key, "label": u.label, "why": u.why} for u in result.failed()],
        "awaited_in_b": [{"key": u.key, "label": u.label} for u in result.awaited()],
        "notes": result.notes(),
    }
