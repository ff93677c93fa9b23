"""Speed-up of one cell over another, with a 95% interval that respects how the samples were taken.

A cell is measured in one or more fresh processes; consecutive steps of one process are correlated, and on a shared
machine two processes of the same cell differ more than steps within one. So the unit of the interval is the process:
its median step. With two or more processes a side, the interval is Welch's t on the logs of the per-process medians
(`welch_log`, as `dlperf compare` tests them; a ratio becomes a difference). With one process beside several, the one
process may stray as theirs do: its log median against their mean, with their spread as a prediction's, (1 + 1/k)
times their variance on k - 1 degrees of freedom (`_one_beside_several`): a candidate of one 14.4 ms process read 2.74x
[1.33-4.23] faster than fp32 processes of 19.1 to 61.6 ms, where a second look measured it 0.88x. Only with one
process a side (or processes whose medians do not differ at all) is there no spread between processes to go by: the
interval is then a bootstrap of the steps within each (`bootstrap.median_replicates`), the noise of that process
alone (`Speedup.steps_only`), and the views say so.

The speed-up itself is the cells' medians' ratio (the median of per-process medians, each side), the figure the step
columns beside it give and the views choose the fastest by; the t interval is about the log medians' means, so where
one disturbed process parts the two (the median left where the others are, the mean moved) it is widened to hold the
ratio: never narrowed, so never a verdict surer than the test's (a "fastest" read 0.84x [0.28-2.54] of the mean's).

A bootstrap of the processes was the interval with few of them too, and it was far too narrow: two processes a side
can be resampled in three ways. In `tests/report/test_speedup.py`'s simulation (process levels 5% apart, steps 3%) its
percentile interval held a true 1.1x in 68.5% of pairs of two processes a side, 89.5% of three, 79.5% of three against
one, and told identical cells apart in 30.5%, 12% and 26%; the t intervals hold it in 95-97% and tell them apart in
2.5-8%, at the price of width: two processes a side have about 2 degrees of freedom (t = 4.3), and tell apart only
what their spread leaves clear.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dlperf.bootstrap import median_replicates, percentile_interval
from dlperf.measure.stats import counted, median_of_medians

RESAMPLES = 4000


@dataclass(frozen=True)
class Speedup:
    ratio: float  # baseline over candidate, 2.0 means twice as fast: the cells' medians' (of per-process medians)
    low: float
    high: float
    confidence: float
    steps_only: bool = False  # the interval holds only the steps' noise within processes (the bootstrap's: one
    # process a side, or processes whose medians do not differ at all), not how far two processes' levels stray

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
    base, cand = [statistics.median(g) for g in baseline], [statistics.median(g) for g in candidate]
    ratio = median_of_medians(baseline) / median_of_medians(candidate)
    interval = _interval(cand, base, confidence)
    if interval is not None:
        return Speedup(ratio, min(interval[0], ratio), max(interval[1], ratio), confidence)
    import numpy as np

    rng = np.random.default_rng(seed)
    replicates = median_replicates(baseline, resamples, rng) / median_replicates(candidate, resamples, rng)
    low, high = percentile_interval(replicates, confidence)
    return Speedup(ratio, low, high, confidence, steps_only=True)


def _interval(a: list[float], b: list[float], confidence: float) -> tuple[float, float] | None:
    """The interval of b/a from process medians: Welch's with two or more a side, else a prediction for one beside
    several; None with one a side, without spread between processes, or with a median not above 0 (no log)."""
    if not all(0 < m < math.inf for m in a + b):
        return None
    if len(a) > 1 and len(b) > 1:
        tested = welch_log(a, b, confidence)
        return tested and (tested[1], tested[2])
    return _one_beside_several(a, b, confidence)


def log_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """exp(mean log b - mean log a): the ratio of the geometric means, the point estimate of `welch_log`'s test, at
    the centre (on the log scale) of its interval. With one value a side, b over a."""
    return math.exp(statistics.fmean(map(math.log, b)) - statistics.fmean(map(math.log, a)))


def welch_log(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float, int] | None:
    """Welch's t-test of log(b) against log(a): (p, ratio b/a's interval low, high, sign of the difference), or None
    when the values have no spread on either side (no test is possible), as scipy.stats.ttest_ind(equal_var=False)
    and its confidence_interval give them. The t distribution from scipy.special: importing scipy.stats took 1.1-2.4 s
    on the path of `dlperf table`'s fastest-framework lines, scipy.special 0.5 s. None too with a side of one value, or
    a value not above 0."""
    if len(a) < 2 or len(b) < 2 or not all(0 < x < math.inf for x in [*a, *b]):
        return None
    from scipy.special import stdtr, stdtrit

    log_a, log_b = [math.log(x) for x in a], [math.log(x) for x in b]
    var_a, var_b = (statistics.variance(v) / len(v) for v in (log_a, log_b))  # each mean's variance
    if var_a + var_b == 0:
        return None
    diff, se = statistics.fmean(log_b) - statistics.fmean(log_a), math.sqrt(var_a + var_b)
    dof = (var_a + var_b) ** 2 / (var_a**2 / (len(a) - 1) + var_b**2 / (len(b) - 1))  # Welch-Satterthwaite
    half = float(stdtrit(dof, (1 + confidence) / 2)) * se
    p = 2 * float(stdtr(dof, -abs(diff) / se))
    if not (math.isfinite(p) and math.isfinite(half)):
        return None
    return p, math.exp(diff - half), math.exp(diff + half), (diff > 0) - (diff < 0)


def _one_beside_several(a: Sequence[float], b: Sequence[float], confidence: float) -> tuple[float, float] | None:
    """The interval of b/a where one side is one process median and the other k of them: the one's log against the
    k's mean, as a prediction of one more of theirs, sqrt(1 + 1/k) times their standard deviation on k - 1 degrees
    of freedom. None with one a side, or where the k do not differ at all."""
    one, several = (a, b) if len(a) == 1 else (b, a)
    if len(one) != 1 or len(several) < 2:
        return None
    spread = statistics.stdev(map(math.log, several))
    if spread == 0:
        return None
    from scipy.special import stdtrit

    half = float(stdtrit(len(several) - 1, (1 + confidence) / 2)) * spread * math.sqrt(1 + 1 / len(several))
    centre = math.log(log_ratio(a, b))
    return math.exp(centre - half), math.exp(centre + half)
