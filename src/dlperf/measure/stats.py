"""Summary statistics of step times, standard library only (the worker runs where numpy may be absent).

The confidence interval of the median is distribution-free: it comes from order statistics and the binomial
distribution, so it holds for the skewed, heavy-tailed distributions step times have. The interval of a cell of
several processes (a t interval on their log medians below 6, their medians' order statistics from 6) is the
parent's alone (`bootstrap.py`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    iqr: float
    mean: float
    stdev: float
    ci_low: float | None  # 95% confidence interval of the median; None when n is too small for one
    ci_high: float | None

    def to_json(self) -> dict:
        return asdict(self)


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the order statistics bounding the median with at least `confidence` coverage.

    The number of samples below the true median is Binomial(n, 1/2); the interval [x_(l), x_(n-l+1)] (1-based)
    covers the median with probability 1 - 2 P(B <= l-1). None when even the full range is not enough (n < 6).
    The binomial's terms by their ratio, not each from scratch (the timer asks often: a few microseconds at n = 300).
    """
    tail = (1.0 - confidence) / 2.0
    if n > 300:  # normal approximation of the binomial; exact sums get slow and the two agree closely here
        low = math.floor(n / 2 - 0.5 * 1.959964 * math.sqrt(n))
        return (low - 1, n - low) if low >= 1 else None
    term = 0.5**n  # P(B = 0); P(B = k+1) = P(B = k) (n-k)/(k+1)
    cdf, low = term, 0  # cdf = P(B <= low)
    while cdf <= tail:
        term *= (n - low) / (low + 1)
        low += 1
        cdf += term
    return (low - 1, n - low) if low >= 1 else None


# A median of fewer timed steps says little, and its IQR nothing: the fewest that have a 95% interval of the median
# (6), so that a cell without one is always marked few and warned of (at 5, one had neither: starred on a 1% gap)
FEW_SAMPLES = next(n for n in range(1, 64) if median_ci_ranks(n) is not None)


def few(n: int | None) -> bool:
    """A median of `n` timed steps is of too few to rely on (fewer than FEW_SAMPLES: it has no 95% interval of its own,
    and a bootstrap over as few steps is no 95% interval either); None, not known, is not few."""
    return n is not None and n < FEW_SAMPLES


def median_ci(samples: list[float], confidence: float = 0.95) -> tuple[float, float] | None:
    ranks = median_ci_ranks(len(samples), confidence)
    if ranks is None:
        return None
    ordered = sorted(samples)
    return ordered[ranks[0]], ordered[ranks[1]]


def sorted_ci_halfwidth(ordered: list[float]) -> float:
    """How far the 95% interval reaches from the median, as a fraction of it (inf when there is no interval).

    `ordered` must be sorted."""
    ranks = median_ci_ranks(len(ordered))
    med = sorted_median(ordered)
    if ranks is None or med <= 0:
        return math.inf
    return max(med - ordered[ranks[0]], ordered[ranks[1]] - med) / med


def sorted_median(ordered: list[float]) -> float:
    """The median of a sorted list, by index (statistics.median sorts a copy: O(n log n) on every call)."""
    n = len(ordered)
    if n == 0:
        return 0.0
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def ci_relative_halfwidth(samples: list[float]) -> float:
    return sorted_ci_halfwidth(sorted(samples))


def iqr(samples: list[float]) -> float:
    if len(samples) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q3 - q1


def summarize(samples: list[float]) -> Summary:
    """Summary of one process's raw samples: the median and its order-statistics interval."""
    if not samples:
        raise ValueError("no samples")
    return summary(samples, statistics.median(samples), median_ci(samples))


def counted(groups: list[list[float]]) -> list[list[float]]:
    """The processes a cell's median counts: those of FEW_SAMPLES timed steps or more, where any has that many, else
    every one with a step. A median of fewer steps has no interval of its own, and in a median of two medians it
    weighed as much as the other: a process of one disturbed 1.71 s step beside one of 44 at 6 ms made 0.856 s."""
    groups = [g for g in groups if len(g)]
    return [g for g in groups if not few(len(g))] or groups


def summary(samples: list[float], median: float, ci: tuple[float, float] | None) -> Summary:
    return Summary(
        n=len(samples),
        median=median,
        iqr=iqr(samples),
        mean=statistics.fmean(samples),
        stdev=statistics.stdev(samples) if len(samples) > 1 else 0.0,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
    )


def median_of_medians(groups) -> float:
    """A cell's figure: the median of its processes' medians, of those `counted` (a process without a step, or of
    too few beside one of enough, left out)."""
    return statistics.median([statistics.median(g) for g in counted(groups)])


MEAN_BATCHES = 10  # consecutive batches each process's steps are cut into for `mean_ci`


def mean_ci(groups: list[list[float]], confidence: float = 0.95) -> tuple[float, float] | None:
    """The interval of the mean step over every process's steps pooled (what a long run pays: its time is the sum of
    its steps), by batch means: each process's steps, in order, cut into MEAN_BATCHES consecutive batches, the
    Student-t interval of their means around the pooled mean. Consecutive steps are correlated (a loader's worker
    behind every few steps, another process's load for a while): the steps' own standard error is too narrow where
    the load drifts (a 4% half-width where the batches' is 9%). None for fewer than MEAN_BATCHES batches (steps)."""
    groups = [g for g in groups if g]
    pooled = [t for g in groups for t in g]
    means = [statistics.fmean(b) for g in groups for b in _batches(g, min(MEAN_BATCHES, len(g)))]
    if len(means) < MEAN_BATCHES:
        return None
    half = t_quantile((1 + confidence) / 2, len(means) - 1) * statistics.stdev(means) / math.sqrt(len(means))
    mean = statistics.fmean(pooled)
    return mean - half, mean + half


def _batches(steps: list[float], k: int) -> list[list[float]]:
    """`steps` cut into `k` consecutive batches of (nearly) equal length."""
    return [steps[i * len(steps) // k : (i + 1) * len(steps) // k] for i in range(k)]


def t_quantile(p: float, dof: int) -> float:
    """Student's t quantile by the Cornish-Fisher expansion about the normal's (within 0.2% of the tables from 9
    degrees of freedom: 2.258 for 2.262; mean_ci asks for 9 or more). Not scipy's: importing scipy.special (stdtrit)
    costs 0.44 s, scipy.stats 1.1 s, on the path of every run's first cell, for a figure this already gives."""
    z = statistics.NormalDist().inv_cdf(p)
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def bus_bandwidth(nbytes: float, seconds: float, world: int) -> tuple[float, float]:
    """(algorithm bandwidth, bus bandwidth) of an all-reduce of `nbytes` per rank taking `seconds`, bytes/s, as
    nccl-tests reports them: a ring all-reduce moves 2 (n - 1) / n times the message over each link."""
    if seconds <= 0:
        return float("nan"), float("nan")
    algbw = nbytes / seconds
    return algbw, algbw * (2 * (world - 1) / world if world > 1 else 0.0)
