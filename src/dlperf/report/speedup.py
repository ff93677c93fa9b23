"""Speed-up of one cell over another, with a confidence interval that respects how the samples were taken.

Parent side only (numpy). A cell is measured in one or more fresh processes; consecutive steps of one process are
correlated, and on a shared machine two processes of the same cell differ more than steps within one. So the
interval comes from a hierarchical bootstrap: resample the processes, then the steps within each resampled process,
and take the median of the per-process medians, the same statistic a cell reports. With one process per side the
interval shows only within-process noise; `optimize` measures the baseline once per round so it never has just one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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


def median_of_medians(groups: Sequence[Sequence[float]]) -> float:
    return float(np.median([np.median(g) for g in groups if len(g)]))


def speedup(
    baseline: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    *,
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Speedup:
    """Speed-up of `candidate` over `baseline`; each is a list of processes, each a list of step times (s)."""
    baseline, candidate = [g for g in baseline if len(g)], [g for g in candidate if len(g)]
    if not baseline or not candidate:
        raise ValueError("both sides need at least one process with samples")
    rng = np.random.default_rng(seed)
    ratios = _bootstrap(baseline, rng, resamples) / _bootstrap(candidate, rng, resamples)
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return Speedup(median_of_medians(baseline) / median_of_medians(candidate), float(low), float(high), confidence)


def _bootstrap(groups: list[Sequence[float]], rng: np.random.Generator, resamples: int) -> np.ndarray:
    """`resamples` bootstrap replicates of the median of per-process medians."""
    # each process's median under resampling of its steps: shape (processes, resamples)
    per_process = np.stack(
        [np.median(rng.choice(np.asarray(g, dtype=float), size=(resamples, len(g))), axis=1) for g in groups]
    )
    picks = rng.integers(len(groups), size=(resamples, len(groups)))  # processes drawn with replacement
    return np.median(per_process[picks, np.arange(resamples)[:, None]], axis=1)
