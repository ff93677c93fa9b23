"""The best-mode view: per workload, framework and column, the fastest mode and its speed-up over fp32 eager.

Only modes measured in the same run as their fp32 baseline are compared, and a mode whose loss check failed is never
"best": it is faster because it stopped learning properly; nor is a cell whose timed steps' loss was not finite, which
did not train at all (fp32 included: a speed-up over it would be over steps that did not train).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from dlperf.modes import Mode
from dlperf.store.records import CellRecord

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

    def to_json(self) -> dict:
        return dict(self.__dict__)


def build(cells: list[CellRecord], samples: dict[str, list[list[float]]]) -> list[Best]:
    """`samples`: cell key -> per-process step times (for the speed-up's interval; may be empty). Modes compare on
    the synthetic batch: a loader cell's step is the input pipeline's too (`report/data.py` compares those)."""
    groups: dict[tuple[str, str, str], list[CellRecord]] = {}
    for c in (c for c in cells if not c.loader):
        groups.setdefault((c.workload, c.framework, c.column), []).append(c)
    out = []
    for (workload, framework, column), group in groups.items():
        rejected = [c.mode for c in group if (c.loss_check and c.loss_check.ok is False) or c.loss_finite is False]
        base = next((c for c in group if c.mode == BASELINE and c.ok and c.median_s and c.mode not in rejected), None)
        timed = [c for c in group if c.ok and c.median_s and c.mode not in rejected]
        best = min(timed, key=lambda c: c.median_s, default=None)
        row = Best(workload, framework, column, base and base.median_s, None, None, None, None, None, rejected)
        if best is not None:
            row.mode, row.median_s = best.mode, best.median_s
        if best is not None and base is not None:
            row.speedup = base.median_s / best.median_s
            if samples.get(base.key) and samples.get(best.key) and best is not base:
                from dlperf.report.speedup import speedup

                s = speedup(samples[base.key], samples[best.key])
                row.speedup, row.ci_low, row.ci_high = s.ratio, s.low, s.high
        out.append(row)
    return out


def render_json(rows: list[Best]) -> str:
    return json.dumps([r.to_json() for r in rows], indent=2)


def _speed(r: Best) -> str:
    if r.speedup is None:
        return "-"
    interval = f" [{r.ci_low:.2f}-{r.ci_high:.2f}]" if r.ci_low is not None else ""
    return f"{r.speedup:.2f}x{interval}"


HEAD = ("workload", "framework", "column", "fp32 step", "best mode", "best step", "speed-up [95% CI]")


def values(r: Best) -> list[str]:
    from dlperf.report.format import table_seconds

    def secs(v):
        return table_seconds(v) if v else "-"

    return [r.workload, r.framework, r.column, secs(r.baseline_s), r.mode or "-", secs(r.median_s), _speed(r)]


def render_markdown(rows: list[Best]) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "|".join("---" for _ in HEAD) + "|"]
    return "\n".join(lines + ["| " + " | ".join(values(r)) + " |" for r in rows])


def render_rich(rows: list[Best], run_id: int):
    from rich.table import Table

    from dlperf.report.format import markup

    table = Table(title=f"Run {run_id}: the fastest mode per workload")
    for i, name in enumerate(HEAD):
        table.add_column(name, justify="left" if i in (0, 1, 2, 4) else "right")
    for r in rows:
        table.add_row(*(markup(v) for v in values(r)))
    return table


def notes(rows: list[Best]) -> list[str]:
    return [
        f"{r.workload} {r.framework} {r.column}: {', '.join(r.rejected)} left out: the loss check failed or the loss "
        "was not finite"
        for r in rows
        if r.rejected
    ]
