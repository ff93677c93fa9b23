"""The interval of a cell's figure, the median of its per-process medians (`summarize_processes`, `cell_ci`,
`runner/collect.py`): the processes the unit, from 6 of them the distribution-free interval of their medians, with 2 to
5 Student's t on their logs. And the hierarchical bootstrap of that figure (`processes_ci`, `median_replicates`): the
processes resampled, then each one's steps; a cell's interval only where its processes' medians do not differ at all,
and a speed-up's with one process a side (`report/speedup.py`). Vectorized with numpy, so
the parent's alone: measure/ is every child's too, standard library only (numpy is imported here inside the
functions, so `import dlperf` and `dlperf --help` load none). A replicate in pure Python cost a few draws and a median
in the interpreter: 4000 of them, a speed-up's, took about 0.2 s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dlperf.measure.stats import FEW_SAMPLES, Summary, counted, median_ci, median_of_medians, summarize, summary

if TYPE_CHECKING:
    import numpy as np

RESAMPLES = 2000  # bootstrap replicates of `processes_ci`


def summarize_processes(groups: list[list[float]]) -> Summary:
    """Summary of a cell measured in one or more processes (each a list of step times): the median of the
    per-process medians, its interval from them where there are several (`cell_ci`: two processes of a cell differ
    more than two steps of one), the spread figures over the steps pooled."""
    groups = [g for g in groups if g]
    if len(groups) == 1:
        return summarize(groups[0])
    pooled = [t for g in groups for t in g]
    if not pooled:
        raise ValueError("no samples")
    kept = counted(groups)
    ci = median_ci(kept[0]) if len(kept) == 1 else cell_ci(kept)
    return summary(pooled, median_of_medians(kept), ci)


def cell_ci(groups: list[list[float]], confidence: float = 0.95) -> tuple[float, float] | None:
    """The interval of a cell of several processes' median of medians, the process the unit: from FEW_SAMPLES (6)
    processes the distribution-free interval of their medians' median (`median_ci`, as of one process's steps); with
    2 to 5 Student's t on their logs (`few_processes_ci`), the shape assumed; where their medians do not differ at
    all, the hierarchical bootstrap (`processes_ci`), which holds the steps' noise. A bootstrap of the processes was
    the interval from 2 processes up and held the true level in about half of simulated cells of 2, three in four of 3,
    and 91-94% of 6 to 8."""
    medians = [statistics.median(g) for g in groups if g]
    if len(set(medians)) > 1:  # few_processes_ci takes logs: None where a median is not above 0
        ci = median_ci(medians, confidence) if len(medians) >= FEW_SAMPLES else few_processes_ci(groups, confidence)
        if ci is not None:
            return ci
    return processes_ci(groups, confidence)


T_975 = (12.7062, 4.3027, 3.1824, 2.7764)  # Student's t at 0.975 for 1 to 4 degrees of freedom: `few_processes_ci`'s


def few_processes_ci(groups: list[list[float]], confidence: float = 0.95) -> tuple[float, float] | None:
    """The interval of a cell of 2 to FEW_SAMPLES - 1 processes: Student's t on the logs of their medians, k - 1
    degrees of freedom, widened where need be to hold the cell's median (the median of those medians). None from
    FEW_SAMPLES processes, or where their medians do not differ at all or one is not above 0. Fewer than FEW_SAMPLES
    medians have no 95% interval of their median without assuming a shape, so the logs are taken as normal, the shape
    the process levels of a cell scatter in. The t quantile of a 95% interval from `T_975`: scipy.special cost 0.3-0.5
    s to import in `dlperf run`'s parent, on the path of a cell's second process."""
    medians = [statistics.median(g) for g in groups if g]
    if not 2 <= len(medians) < FEW_SAMPLES or not all(0 < m < math.inf for m in medians):
        return None
    logs = [math.log(m) for m in medians]
    spread = statistics.stdev(logs)
    if spread == 0:
        return None
    if confidence == 0.95:
        quantile = T_975[len(logs) - 2]
    else:
        from scipy.special import stdtrit

        quantile = float(stdtrit(len(logs) - 1, (1 + confidence) / 2))
    half = quantile * spread / math.sqrt(len(logs))
    centre, middle = statistics.fmean(logs), statistics.median(medians)
    return min(math.exp(centre - half), middle), max(math.exp(centre + half), middle)


def processes_ci(groups: list[list[float]], confidence: float = 0.95, resamples: int = RESAMPLES,
                 seed: int = 0) -> tuple[float, float] | None:  # fmt: skip
    """The interval of the median of per-process medians by a hierarchical bootstrap (`median_replicates`); None
    without a step."""
    import numpy as np

    if not any(groups):
        return None
    return percentile_interval(median_replicates(counted(groups), resamples, np.random.default_rng(seed)), confidence)


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    """The bootstrap's percentile interval: the replicates' (1 - confidence) / 2 and (1 + confidence) / 2 quantiles,
    each the order statistic at or beyond its rank (no interpolation between two)."""
    import numpy as np

    ordered, tail = np.sort(replicates), (1 - confidence) / 2
    last = len(ordered) - 1
    return float(ordered[math.floor(tail * last)]), float(ordered[math.ceil((1 - tail) * last)])


def median_replicates(groups: Sequence[Sequence[float]], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """`resamples` bootstrap replicates of the median of per-process medians, hierarchical: the processes resampled
    with replacement, then each drawn process's median resampled from its steps (two processes of a cell differ more
    than two steps of one). That median is drawn directly, not by resampling n steps: the median of n values
    resampled from a process's steps lies at the order statistics of n uniforms, the h-th one Beta(h, n + 1 - h) with
    h = (n + 1) // 2 for odd n; for even n the mean of the h-th and the next, drawn above the h-th as the least of the
    n - h uniforms beyond it (1 - Beta(1, n - h) of the rest). So a replicate costs a draw or two per process however
    many steps it has, and is exact for odd and even n; every replicate's draws at once, as arrays."""
    import numpy as np

    ordered = [np.sort(np.asarray(g, dtype=float)) for g in groups if len(g)]
    sizes = np.array([len(g) for g in ordered])
    starts = np.cumsum(sizes) - sizes  # each process's first step in `steps`
    steps = np.concatenate(ordered)
    drawn = rng.integers(len(ordered), size=(resamples, len(ordered)))  # the processes of each replicate
    n, first = sizes[drawn], starts[drawn]
    h = (n + 1) // 2
    u = rng.beta(h, n + 1 - h)
    low = steps[first + _rank(n, u)]
    above = u + (1 - u) * rng.beta(1, np.maximum(n - h, 1))  # even n's next order statistic (odd n's unused)
    medians = np.where(n % 2 == 1, low, (low + steps[first + _rank(n, above)]) / 2)
    return np.median(medians, axis=1)


def _rank(n: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The 0-based rank among n sorted steps of the step at quantile u (the least whose rank reaches n u)."""
    import numpy as np

    return np.clip(np.ceil(n * u).astype(np.int64) - 1, 0, n - 1)
