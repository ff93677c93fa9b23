"""The best-mode view: per workload, framework and column, the fastest mode and its speed-up over the framework's
fp32 step, which is not eager everywhere: PyTorch's is eager, TensorFlow's a tf.function graph (without XLA), JAX's
compiled by jax.jit, MXNet's a hybridized graph (`capabilities.fp32_step`, said under the table).

Only modes measured in the same run as their fp32 baseline are compared, and a mode whose loss check failed is never
"best": it is faster because it stopped learning properly; nor is a cell whose timed steps' loss was not finite, which
did not train at all (fp32 included: a speed-up over it would be over steps that did not train).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from dlperf.frameworks.common import capabilities
from dlperf.measure.stats import FEW_SAMPLES, counted, few
from dlperf.modes import Mode, changes_arithmetic
from dlperf.report.charts import disturbances, doubtful
from dlperf.report.fastest import faster, speedup_interval
from dlperf.report.table import DOUBT_LEGEND, FEW_LEGEND, FEW_MARK
from dlperf.store.records import CellRecord
from dlperf.vocab import Status

BASELINE = Mode.FP32.value


@dataclass
class Best:
    workload: str
    framework: str
    column: str
    baseline_s: float | None
    mode: str | None  # None: nothing measured beat or matched the baseline
    median_s: float | None
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    rejected: list[str]  # modes left out: their loss check failed, or their loss was not finite
    baseline_n: int | None = None  # the timed steps behind each median
    n: int | None = None
    timed: int = 0  # the modes timed (besides those rejected): 1 means fp32 alone, nothing to compare
    told_apart: bool | None = None  # the best mode told apart from fp32 as faster (`fastest.faster`); None: fp32's
    processes: int | None = None  # the processes behind the interval on its side of more: those its median counts
    # (`stats.counted`): a process of under FEW_SAMPLES steps beside one of more is none
    steps_only: bool = False  # the interval holds only the steps' noise (`Speedup.steps_only`): the note says so
    unchecked: str | None = None  # why the best mode's loss check has no verdict (--no-loss-check: none ran)
    why_rejected: dict[str, str] = field(default_factory=dict)  # each mode of `rejected`: why (`left_out`)
    doubtful: bool = False  # either step not one to rely on (`charts.doubtful`): the speed-up marked as the steps are
    baseline_doubtful: bool = False  # the fp32 step not one to rely on: marked `?` as the run's table marks it
    best_doubtful: bool = False  # the best mode's step, likewise
    status: str | None = None  # why no mode has a step: the fp32 cell's status (failed, timeout, unsupported)
    disturbed: bool = False  # either step disturbed (busy CPUs, steal, warm-up...), not only of few samples

    @property
    def few(self) -> bool:
        """A median of fewer than FEW_SAMPLES steps on either side: the speed-up gets no interval."""
        return few(self.baseline_n) or few(self.n)

    def to_json(self) -> dict:
        return dict(self.__dict__)


NO_CHECK = "no check ran: --no-loss-check"
NO_CHECK_BY = {"profile": "no check ran: dlperf profile checks no loss (dlperf run --modes does)"}


def build(cells: list[CellRecord], samples: dict[str, list[list[float]]],
          made_by: dict[int, str | None] | None = None) -> list[Best]:  # fmt: skip
    """`samples`: cell key -> per-process step times (for the speed-up's interval; may be empty). Modes compare on
    the synthetic batch: a loader cell's step is the input pipeline's too (`report/data.py` compares those).
    `made_by`: run id -> the command that made it (`store.state.made_by`), to say why a loss was not checked."""
    groups: dict[tuple[str, str, str], list[CellRecord]] = {}
    for c in (c for c in cells if not c.loader):
        groups.setdefault((c.workload, c.framework, c.column), []).append(c)
    out = []
    for (workload, framework, column), group in groups.items():
        why = {c.mode: said for c in group if (said := left_out(c))}
        rejected = list(why)
        base = next((c for c in group if c.mode == BASELINE and c.ok and c.median_s and c.mode not in rejected), None)
        timed = [c for c in group if c.ok and c.median_s and c.mode not in rejected]
        best = min(timed, key=lambda c: c.median_s, default=None)
        row = Best(workload, framework, column, base and base.median_s, None, None, None, None, None, rejected,
                   base and base.n, timed=len(timed), why_rejected=why)  # fmt: skip
        row.baseline_doubtful = base is not None and doubtful(base)
        row.disturbed = any(not w.startswith("few samples") for c in (base, best) if c for w in disturbances(c))
        fp32 = next((c for c in group if c.mode == BASELINE), None)
        if not timed and fp32 is not None and (fp32.status.is_failure or fp32.status is Status.UNSUPPORTED):
            row.status = fp32.status.value  # a failed resnet-50 read "- - -", as a cell never run
        if best is not None:
            row.mode, row.median_s, row.n, row.best_doubtful = best.mode, best.median_s, best.n, doubtful(best)
            if changes_arithmetic(best.mode) and not (best.loss_check and best.loss_check.ok):
                no_check = NO_CHECK_BY.get((made_by or {}).get(best.run_id) or "", NO_CHECK)
                row.unchecked = (best.loss_check and best.loss_check.reason) or no_check
        if best is not None and base is not None:
            row.speedup = base.median_s / best.median_s
            row.doubtful = doubtful(base) or doubtful(best)  # a 12.72x of a disturbed fp32 step read as sure
        if best is not None and base is not None and best is not base:
            s = speedup_interval(base, best, samples.get(base.key), samples.get(best.key))
            row.told_apart = faster(base, best, s)  # without an interval, on their medians (`fastest.told_apart`)
            if s is not None:
                row.speedup, row.ci_low, row.ci_high = s.ratio, s.low, s.high
                row.processes = max(len(counted(samples[c.key])) for c in (base, best))  # as the interval counts
                row.steps_only = s.steps_only
        out.append(row)
    return out


def left_out(cell: CellRecord) -> str | None:
    """Why `cell`'s mode is never the best, as the note says it: its timed steps' loss was not finite (it did not
    train at all), its loss check against fp32 failed (it no longer trains as fp32 does), or both; None: neither."""
    failed = cell.loss_check is not None and cell.loss_check.ok is False
    if cell.loss_finite is False:
        return "its loss was not finite" + (", and its loss check failed" if failed else "")
    return "its loss check failed" if failed else None


def render_json(rows: list[Best]) -> str:
    return json.dumps([r.to_json() for r in rows], indent=2)


def _speed(r: Best) -> str:
    """ "1.42x [1.38-1.47]"; no interval where either median is of too few steps, or the best is fp32 itself. Where
    the best mode is not told apart from fp32 (an interval that holds 1x; without one, medians within
    `fastest.MEDIANS_APART` or an IQR), it says so, as the fastest-framework lines do."""
    if r.speedup is None:  # a mode without an fp32 step beside it: none in the run, failed, or not in --modes
        return "-: no fp32 step to compare with" if r.mode and r.baseline_s is None else "-"
    if r.mode == BASELINE:
        if r.timed > 1:
            return "1.00x: fp32 is the fastest"
        return f"-: {', '.join(r.rejected)} left out (notes)" if r.rejected else "-: fp32 alone was measured"
    apart = "" if r.told_apart else ", not told apart"
    ratio = f"{r.speedup:.2f}x{FEW_MARK if r.doubtful else ''}"
    if r.ci_low is not None:
        return f"{ratio} [{r.ci_low:.2f}-{r.ci_high:.2f}]{apart}"
    why = f"a median of under {FEW_SAMPLES} steps" if r.few else "no samples"
    return f"{ratio} [no interval: {why}]{apart}"


HEAD = ("workload", "framework", "column", "fp32 step", "best mode", "best step", "speed-up [95% CI]")


def values(r: Best) -> list[str]:
    from dlperf.report.format import table_seconds

    def secs(v, doubted):  # `?` as the run's table marks the step: few samples, or disturbed (busy CPUs, ...)
        return table_seconds(v) + (FEW_MARK if doubted else "") if v else "-"

    base, best = secs(r.baseline_s, r.baseline_doubtful), secs(r.median_s, r.best_doubtful)
    return [r.workload, r.framework, r.column, r.status or base, r.mode or "-", best, _speed(r)]


def legend(rows: list[Best]) -> list[str]:
    """What the baseline is, for the frameworks shown (each framework's fp32 step); the `?` explained, where a step
    carries it."""
    shown = list(dict.fromkeys(r.framework for r in rows))
    said = [f"speed-up over each framework's fp32 step: {capabilities.fp32_steps(shown)}"] if shown else []
    marked = [r for r in rows if r.baseline_doubtful or r.best_doubtful]
    doubts = DOUBT_LEGEND.replace("its note says which", "the run's table notes which")  # this view has no notes
    said += [doubts if any(r.disturbed for r in marked) else FEW_LEGEND] if marked else []  # few samples alone: FEW
    return said + ([DOUBTFUL_SPEEDUP] if any(r.doubtful and r.mode != BASELINE for r in rows) else [])


DOUBTFUL_SPEEDUP = (f"{FEW_MARK} on a speed-up: either step's figure is not one to rely on (busy CPUs, steal, few "
                    "steps, warm-up: the notes say which)")  # fmt: skip


def render_markdown(rows: list[Best]) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "|".join("---" for _ in HEAD) + "|"]
    said = [*legend(rows), *(f"note: {n}" for n in notes(rows))]
    legend_lines = ["", *said] if said else []
    return "\n".join(lines + ["| " + " | ".join(values(r)) + " |" for r in rows] + legend_lines)


def render_rich(rows: list[Best], run_id: int):
    from rich.table import Table

    from dlperf.report.format import markup

    table = Table(title=f"Run {run_id}: the fastest mode per workload")
    for i, name in enumerate(HEAD):
        table.add_column(name, justify="left" if i in (0, 1, 2, 4) else "right")
    for r in rows:
        table.add_row(*(markup(v) for v in values(r)))
    return table


FP32_ALONE = (
    "the run measured fp32 alone, so there is no mode to compare: measure modes beside it (dlperf run --modes "
    "fp32,bf16,channels_last,fused,malloc_keep) or let dlperf optimize WORKLOAD search them"
)
ONE_PROCESS = (
    "rests on the steps of one process a side (or of processes whose medians agree to the last digit): it holds "
    "only their noise, not the spread between processes (--repeats 3 or more)"
)


def notes(rows: list[Best]) -> list[str]:
    """The modes left out (loss check), and the speed-ups whose interval holds only the steps' noise (one process a
    side; one beside several is given their spread: `report/speedup.py`): a run of one process per cell read "fused
    2.13x [2.02-2.31]" on tiny-alexnet-r, where three processes each timed it 0.95x."""
    said = [f"{r.workload} {r.framework} {r.column}: left out: "
            + ", ".join(f"{mode} ({r.why_rejected.get(mode, 'not training')})" for mode in r.rejected)
            for r in rows if r.rejected]  # fmt: skip
    said += [f"{r.workload} {r.framework} {r.column}: {r.mode}'s loss was not checked against fp32 ({r.unchecked}): "
             "whether it still trains is not known, and a mode that no longer learns can be fast" for r in rows
             if r.unchecked]  # fmt: skip
    if rows and all(r.mode == BASELINE and r.timed == 1 and not r.rejected for r in rows):
        said.append(FP32_ALONE)
    with_interval = [r for r in rows if r.ci_low is not None]
    alone = [r for r in with_interval if r.steps_only]
    if alone and len(alone) == len(with_interval) > 1:
        return [*said, f"each speed-up's interval {ONE_PROCESS}"]
    return said + [f"{r.workload} {r.framework} {r.column}: {r.mode}'s interval {ONE_PROCESS}" for r in alone]
