"""The interval of a cell's figure, the median of its per-process medians (`summarize_processes`,
`runner/collect.py`): from FEW_SAMPLES (6) processes a hierarchical bootstrap (`processes_ci`), with 2 to 5 Student's t
on the logs of their medians (`few_processes_ci`), too few for a bootstrap's 95%. The bootstrap is also a speed-up's
with one process a side (`report/speedup.py`). Vectorized with numpy, so
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
    per-process medians, its interval from a hierarchical bootstrap where there are several (`processes_ci`: two
    processes of a cell differ more than two steps of one), the spread figures over the steps pooled."""
    groups = [g for g in groups if g]
    if len(groups) == 1:
        return summarize(groups[0])
    pooled = [t for g in groups for t in g]
    if not pooled:
        raise ValueError("no samples")
    kept = counted(groups)
    ci = median_ci(kept[0]) if len(kept) == 1 else few_processes_ci(kept) or processes_ci(kept)
    return summary(pooled, median_of_medians(kept), ci)


def few_processes_ci(groups: list[list[float]], confidence: float = 0.95) -> tuple[float, float] | None:
    """The interval of a cell of 2 to FEW_SAMPLES - 1 processes: Student's t on the logs of their medians, k - 1
    degrees of freedom, widened where need be to hold the cell's median (the median of those medians). None from
    FEW_SAMPLES processes (the
    bootstrap's), or where their medians do not differ at all. Fewer than FEW_SAMPLES medians have no 95% interval of
    their median without assuming a shape: the bootstrap of 2 processes is the range between them and a little
    within-process noise (it held the true value in about half of simulated cells, 3 processes in about three in
    four), so the logs are taken as normal, the shape the process levels of a cell scatter in."""
    medians = [statistics.median(g) for g in groups if g]
    if not 2 <= len(medians) < FEW_SAMPLES:
        return None
    logs = [math.log(m) for m in medians]
    spread = statistics.stdev(logs)
    if spread == 0:
        return None
    from scipy.special import stdtrit

    half = float(stdtrit(len(logs) - 1, (1 + confidence) / 2)) * spread / math.sqrt(len(logs))
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
