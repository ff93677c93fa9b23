"""Speed-up of one cell over another, with a confidence interval that respects how the samples were taken.

A cell is measured in one or more fresh processes; consecutive steps of one process are correlated, and on a shared
machine two processes of the same cell differ more than steps within one. So the interval comes from a hierarchical
bootstrap (`bootstrap.median_replicates`): resample the processes, then the steps within each resampled process,
and take the median of the per-process medians, the same statistic a cell reports. With one process per side the
interval shows only within-process noise; `optimize` measures the baseline once per round so it never has just one.
A side of one process beside one of several is given the other's spread between processes (`_strays`): one process
cannot show how far its level strays, and a candidate of one 14.4 ms process read 2.74x [1.33-4.23] faster than fp32
processes of 19.1 to 61.6 ms, where a second look measured it 0.88x.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dlperf.bootstrap import median_replicates, percentile_interval
from dlperf.measure.stats import counted, median_of_medians

RESAMPLES = 4000


@dataclass(frozen=True)
class Speedup:
    ratio: float  # baseline median / candidate median: 2.0 means twice as fast
    low: float
    high: float
    confidence: float

    def excludes_one(self) -> bool:
        return self.low > 1.0 or self.high < 1.0

    def to_json(self) -> dict:
        return {"speedup": self.ratio, "ci_low": self.low, "ci_high": self.high, "confidence": self.confidence}


def speedup(
    baseline: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    *,
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Speedup:
    """Speed-up of `candidate` over `baseline`; each is a list of processes, each a list of step times (s)."""
    baseline, candidate = counted([list(g) for g in baseline]), counted([list(g) for g in candidate])  # as the cells
    if not baseline or not candidate:
        raise ValueError("both sides need at least one process with samples")
    import numpy as np

    rng = np.random.default_rng(seed)
    base, cand = median_replicates(baseline, resamples, rng), median_replicates(candidate, resamples, rng)
    base, cand = _strays(base, baseline, candidate, rng), _strays(cand, candidate, baseline, rng)
    low, high = percentile_interval(base / cand, confidence)
    return Speedup(median_of_medians(baseline) / median_of_medians(candidate), low, high, confidence)


def _strays(replicates, side: list[list[float]], other: list[list[float]], rng):
    """`side`'s replicates, each moved as one of `other`'s processes strays from their middle, where `side` is one
    process and `other` several: a process's level (the machine's state when it ran) varies as theirs does."""
    if len(side) != 1 or len(other) < 2:
        return replicates
    middle = median_of_medians(other)
    levels = [statistics.median(p) / middle for p in other]
    return replicates * rng.choice(levels, size=len(replicates))
