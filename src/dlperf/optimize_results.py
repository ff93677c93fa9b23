"""`dlperf optimize`'s results: each measured mode as a candidate (its speed-up over the fp32 eager baseline of the
same run, its memory, utilization and loss check), the rule that recommends one, and the search's outcome as the
command prints it and its JSON holds. The search itself is `optimize.py`'s."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dlperf.modes import SEARCH_ORDER, Mode, changes_arithmetic
from dlperf.optimize_loader import LoaderChoice, recipe
from dlperf.report.fastest import faster, speedup_interval
from dlperf.report.paper import doubts
from dlperf.report.profile import Verdict
from dlperf.spec import canonical_mode
from dlperf.store.records import CellRecord
from dlperf.vocab import ExitCode, Status

BASELINE = Mode.FP32.value
SAME_ARITHMETIC = "ok: fp32's arithmetic, nothing to check"  # a mode of process settings alone (the allocator's)
NOT_FINITE = "its timed steps' loss was not finite: it did not train"  # the cell's own loss_finite, whatever the check
MIN_GAIN = 0.03  # a recommended mode is at least 3% faster, and told apart as faster (`fastest.faster`)


@dataclass
class Candidate:
    mode: str
    status: str
    error: str | None = None
    median_s: float | None = None
    processes: int = 0
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    peak_mem_bytes: int | None = None
    peak_mem_kind: str | None = None
    utilization: float | None = None
    loss_ok: bool | None = None
    loss_reason: str | None = None
    compile_s: float | None = None
    payback_steps: int | None = None
    dimension: str | None = None
    samples: int = 0  # timed steps over all its processes: a speed-up from fewer than FEW_SAMPLES says so
    told_apart: bool | None = None  # faster than the baseline by one rule with the views' (`fastest.faster`)
    # what disturbed its timing, briefly ("other processes used 79%"; `report.paper.doubts`): few steps are said apart
    disturbed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Search:
    workload: str
    device: str
    threads: int
    run_id: int
    baseline: Candidate
    results: list[Candidate]
    best: Candidate | None  # None: keep the baseline
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    exit_code: int = ExitCode.OK
    order: str = "fixed"  # what ordered the rounds: "verdict", or "fixed" (asked for, or the profile failed)
    groups: tuple[str, ...] = SEARCH_ORDER  # the rounds, in the order searched
    verdict: Verdict | None = None  # of the fp32 baseline's profile
    cells: int = 0  # candidate cells measured (modes other than fp32 whose first process ran)
    cells_to_best: int = 0  # of those, how many had run when the best mode's first process ran; 0: fp32 is best
    loader: LoaderChoice | None = None  # with --data DIR: the loader setting searched for the best mode
    interrupted: str | None = None  # what an interrupt cut short: the baseline, its profile, a round, the loaders
    reached: tuple[str, ...] = ()  # the rounds begun, in order: all of `groups` unless an interrupt came first
    data_dir: str | None = None  # --data DIR, absolute: the recipe gives it to a factory that takes data_dir
    named: bool = False  # the workload's inputs are a dict, which the model takes by name: the recipe's model(**x)

    def to_json(self) -> dict[str, Any]:
        # None: nothing measured, no candidate searched (not "keep fp32": the text's "not searched"), or a baseline
        # that does not train (nothing to keep either)
        kept = self.baseline.status == Status.OK and self.baseline.loss_ok is not False and self.cells > 0
        best = self.best or (self.baseline if kept else None)
        loader = self.loader.to_json() if self.loader else None
        order = {"used": self.order, "groups": list(self.groups), "verdict": self.verdict and self.verdict.to_json()}
        return {
            **{key: getattr(self, key) for key in ("workload", "device", "threads", "run_id")},
            "baseline": {"mode": self.baseline.mode, "median_s": self.baseline.median_s},
            "results": [r.to_json() for r in self.results],
            "best": {"mode": best.mode, "median_s": best.median_s, "speedup": best.speedup or 1.0} if best else None,
            "recipe": best
            and recipe(best.mode, self.device, self.workload, self.loader, self.data_dir, self.named, self.threads),
            **{key: getattr(self, key) for key in ("notes", "elapsed_s")},
            "order": order,
            **{key: getattr(self, key) for key in ("cells", "cells_to_best")},
            **({"loader": loader} if loader else {}),
        }


def candidates_of(
    cells: list[CellRecord], samples: dict[str, list[list[float]]], peaks: dict[str, float]
) -> list[Candidate]:
    """Each measured mode with its speed-up over the baseline (same run), memory, utilization and loss check."""
    by_mode = {c.mode: c for c in cells}
    base = samples.get(by_mode[BASELINE].key) if BASELINE in by_mode else None
    out = []
    for cell in cells:
        loss_ok, loss_reason = loss_of(cell)
        cand = Candidate(
            mode=cell.mode,
            status=cell.status.value,
            error=cell.error,
            median_s=cell.median_s if cell.ok else None,  # a process stopped (by the budget) kept steps: no time
            processes=len(samples.get(cell.key, [])),
            samples=sum(len(s) for s in samples.get(cell.key, [])),
            peak_mem_bytes=cell.peak_mem_bytes,
            peak_mem_kind=cell.peak_mem_kind,
            loss_ok=loss_ok,
            loss_reason=loss_reason,
            compile_s=cell.compile.compile_s if cell.compile else None,
            disturbed=[d for d in doubts(cell) if not d.startswith(("few samples", "loss not finite"))],
        )
        if cell.mode == BASELINE and cell.ok:
            cand.speedup = 1.0  # by definition; an interval of the baseline against itself would mean nothing
        elif cell.ok and cell.median_s and base and samples.get(cell.key):
            s = speedup_interval(by_mode[BASELINE], cell, base, samples[cell.key])  # None: a side of too few steps
            cand.speedup = s.ratio if s else by_mode[BASELINE].median_s / cell.median_s
            cand.ci_low, cand.ci_high, cand.told_apart = s and s.low, s and s.high, faster(by_mode[BASELINE], cell, s)
        if peaks and cell.ok:
            from dlperf.report.utilization import cell_utilization

            cand.utilization = cell_utilization(cell, peaks)
        out.append(cand)
    _paybacks(out)
    return out


def loss_of(cell: CellRecord) -> tuple[bool | None, str | None]:
    """Whether `cell` still trains, and why: not where its timed steps' loss was not finite, whatever its mode; else
    its loss check against fp32, where its mode changes the arithmetic (a mode of process settings alone has none)."""
    check = cell.loss_check
    if cell.loss_finite is False:
        return False, NOT_FINITE
    if not changes_arithmetic(cell.mode):
        return True, None if cell.mode == BASELINE else SAME_ARITHMETIC
    return (check.ok, check.reason) if check else (None, None)


def _paybacks(cands: list[Candidate]) -> None:
    """Steps a compiled mode must run before its compile time is paid back by faster steps than the same mode
    eager; None when it is not faster (it never pays back) or its eager twin was not measured."""
    by_mode = {c.mode: c for c in cands}
    for c in cands:
        if c.compile_s is None or c.median_s is None:
            continue
        parts = [p for p in c.mode.split("+") if p not in (Mode.COMPILE.value, Mode.CUDA_GRAPHS.value)]
        eager = by_mode.get(canonical_mode("+".join(parts)) if parts else BASELINE)
        if eager and eager.median_s and eager.median_s > c.median_s:
            c.payback_steps = math.ceil(c.compile_s / (eager.median_s - c.median_s))


def eligible(c: Candidate) -> bool:
    """Reliably faster than the baseline and still trains: what may be recommended."""
    return (
        c.mode != BASELINE
        and c.status == Status.OK
        and c.loss_ok is True
        and c.speedup is not None
        and c.speedup >= 1 + MIN_GAIN
        and c.told_apart is True
    )


def recommend(cands: list[Candidate]) -> Candidate | None:
    return max((c for c in cands if eligible(c)), key=lambda c: c.speedup, default=None)


def quoted(cells: list[CellRecord], samples: dict[str, list[list[float]]]) -> CellRecord | None:
    """Of one run's cells of a workload at one batch and thread count, the step to quote for this machine, by the rule
    `dlperf advise` quotes its mode search by: the mode `recommend` takes (reliably at least MIN_GAIN faster than the
    run's fp32 eager and still training), else fp32 eager; None without an fp32 eager step. A mode measured faster but
    not told apart, or one that no longer trains, is never quoted: `predict --cost` quoted such a cell (328 µs, where
    advise said fp32's 473 µs)."""
    base = next((c for c in cells if c.mode == BASELINE and c.ok and c.median_s), None)
    if base is None:
        return None
    best = recommend(candidates_of(cells, samples, {}))
    return next((c for c in cells if best is not None and c.mode == best.mode), base)


def ranked(cands: list[Candidate]) -> list[Candidate]:
    """Measured modes fastest first, then those without a time (unsupported, failed)."""
    timed = sorted((c for c in cands if c.median_s is not None), key=lambda c: c.median_s)
    return timed + [c for c in cands if c.median_s is None]
