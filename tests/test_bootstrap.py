"""A cell's interval over its processes (`bootstrap.cell_ci`: t on log medians below 6 processes, their medians' order
statistics from 6), its coverage simulated; and the hierarchical bootstrap of a median of per-process medians
(`processes_ci`: a cell's where its processes' medians agree, a speed-up's of one process a side) checked against what
it stands for: the binomial ranks of one process's median, the median of n steps resampled, and the whole
hierarchical resampling done the slow way (the processes drawn, then each drawn process's steps)."""

import bisect
import math
import random
import statistics
from collections import Counter

import numpy as np
import pytest

from dlperf.bootstrap import cell_ci, few_processes_ci, median_replicates, processes_ci, summarize_processes
from dlperf.measure.stats import FEW_SAMPLES, counted, median_ci, median_of_medians, summarize


def test_the_median_of_medians_is_the_cells_figure():
    assert summarize_processes([[1.0, 2.0, 3.0], [7.0], [8.0, 9.0]]).median == 7.0


def test_the_bootstrap_of_one_process_is_its_order_statistics_interval():
    """A replicate's median drawn as an order statistic of Beta rank (not n steps resampled) gives the interval the
    binomial ranks give, for odd and even n."""
    for n, seed in ((301, 1), (2000, 2), (51, 3)):
        rng = random.Random(seed)
        x = [rng.lognormvariate(0, 0.3) for _ in range(n)]
        lo, hi = median_ci(x)
        b_lo, b_hi = processes_ci([x])
        ordered = sorted(x)
        assert abs(bisect.bisect_left(ordered, b_lo) - ordered.index(lo)) <= max(2, n // 100)
        assert abs(bisect.bisect_left(ordered, b_hi) - ordered.index(hi)) <= max(2, n // 100)


@pytest.mark.parametrize("steps", [[1.0, 2.0, 10.0, 100.0], [1.0, 2.0, 3.0, 50.0, 60.0, 70.0], [1.0, 5.0, 9.0]])
def test_a_drawn_median_has_the_distribution_of_a_resampled_one_for_odd_and_even_n(steps):
    """The median of n steps resampled with replacement, drawn directly (`median_replicates`), against resampling
    itself: every value it takes, as often. For even n it is the mean of the two middle order statistics (drawn as
    the lower one alone, it sat half a rank low: [1, 2, 10, 100] gave 2 or less in 69% of replicates, against 31%)."""
    n, draws = len(steps), 40_000
    rng = random.Random(8)
    drawn = Counter(round(v, 9) for v in median_replicates([steps], draws, np.random.default_rng(8)))
    resampled = Counter(round(statistics.median(rng.choices(steps, k=n)), 9) for _ in range(draws))
    for value in set(drawn) | set(resampled):
        assert abs(drawn[value] - resampled[value]) / draws < 0.012, (value, drawn[value], resampled[value])


def test_the_interval_of_several_processes_covers_the_spread_between_them():
    """Processes that differ more than their steps do (a shared machine): the interval of the median of medians
    reaches across them, where the pooled steps' would be narrow and beside the point."""
    rng = random.Random(4)
    groups = [[m + rng.gauss(0, 0.001) for _ in range(500)] for m in (1.0, 1.1, 1.2)]
    s = summarize_processes(groups)
    assert s.median == statistics.median([statistics.median(g) for g in groups]) and s.n == 1500
    assert s.ci_low < 1.01 and s.ci_high > 1.19 and s.ci_low <= s.median <= s.ci_high
    assert summarize_processes([groups[0], []]) == summarize(groups[0])  # a process without steps is left out
    assert processes_ci([]) is None


def test_the_bootstrap_covers_the_cells_median_about_as_often_as_it_says():
    """Coverage, simulated: processes whose medians scatter about a true value (each process's steps about its own);
    with 5 processes the 95% interval of their median of medians holds the true value in most trials (a bootstrap of
    5 under-covers a little), where the pooled steps' interval, narrow about whichever processes ran, rarely does."""
    rng = random.Random(5)
    hits = pooled_hits = trials = 0
    for _ in range(150):
        groups = [[1.0 + offset + rng.gauss(0, 0.01) for _ in range(201)]
                  for offset in (rng.gauss(0, 0.05) for _ in range(5))]  # fmt: skip
        lo, hi = processes_ci(groups, resamples=400)
        p_lo, p_hi = median_ci([t for g in groups for t in g])
        hits += lo <= 1.0 <= hi
        pooled_hits += p_lo <= 1.0 <= p_hi
        trials += 1
    assert hits / trials > 0.8 and pooled_hits / trials < 0.5


def test_a_process_of_too_few_steps_beside_one_of_enough_is_left_out_of_the_median():
    """A QA run's cell: one process timed one disturbed 1.71 s step, the other 44 steps of about 6 ms; the median of
    the two medians, 0.856 s, was the cell in every view. A median of fewer than FEW_SAMPLES steps has no interval of
    its own: beside a process of enough it is left out; where every process has too few, each still counts."""
    rng = random.Random(5)
    steady = [0.006 + rng.gauss(0, 1e-4) for _ in range(44)]
    s = summarize_processes([[1.71], steady])
    assert s.median == statistics.median(steady) and s.n == 45  # n and the spread still count every step
    assert (s.ci_low, s.ci_high) == median_ci(steady)
    assert median_of_medians([[1.71], steady]) == statistics.median(steady)
    assert counted([[1.71], [], steady]) == [steady] and counted([[1.0], [2.0, 3.0]]) == [[1.0], [2.0, 3.0]]
    third = [0.0062] * FEW_SAMPLES
    assert summarize_processes([[1.71], steady, third]).median == statistics.median([statistics.median(steady), 0.0062])


def resampled_in_full(groups: list[list[float]], resamples: int, rng: random.Random) -> list[float]:
    """The hierarchical bootstrap as it is defined, step by step: k processes drawn with replacement, each drawn
    process's n steps drawn with replacement, the median of their medians."""
    k = len(groups)
    return [statistics.median(statistics.median(rng.choices(g, k=len(g))) for g in rng.choices(groups, k=k))
            for _ in range(resamples)]  # fmt: skip


def largest_gap(a, b) -> float:
    """The two-sample Kolmogorov-Smirnov distance: the largest gap between the two empirical distributions."""
    a, b = np.sort(a), np.sort(b)
    at = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, at, "right") / len(a) - np.searchsorted(b, at, "right") / len(b))))


@pytest.mark.parametrize("sizes", [(7, 8, 9), (20, 31, 6, 44)])
def test_the_replicates_and_interval_are_those_resampling_every_step_gives(sizes):
    """Processes of odd and even step counts at different levels: the replicates drawn (numpy, every one at once)
    against those of the bootstrap done the slow way, independent of the code under test. Their distributions agree
    (5000 a side: a gap of 0.01-0.02, where leaving the steps' resampling out makes 0.10-0.26), and so do the
    intervals."""
    rng = random.Random(9)
    groups = [[level * rng.lognormvariate(0, 0.1) for _ in range(n)]
              for n, level in zip(sizes, (1.0, 1.3, 0.9, 1.1), strict=False)]  # fmt: skip
    fast = median_replicates(groups, 5000, np.random.default_rng(0))
    slow = sorted(resampled_in_full(groups, 5000, random.Random(10)))
    assert largest_gap(fast, slow) < 0.04
    low, high = processes_ci(groups, resamples=5000)
    spread = max(map(max, groups)) - min(map(min, groups))
    assert low == pytest.approx(slow[math.floor(0.025 * 4999)], abs=0.02 * spread)
    assert high == pytest.approx(slow[math.ceil(0.975 * 4999)], abs=0.02 * spread)


def test_the_same_seed_draws_the_same_interval():
    rng = random.Random(11)
    groups = [[rng.lognormvariate(0, 0.1) for _ in range(30)] for _ in range(5)]
    assert processes_ci(groups) == processes_ci(groups)
    assert processes_ci(groups, seed=1) != processes_ci(groups)
    assert all(type(x) is float for x in processes_ci(groups))  # plain floats: a record's JSON takes them


@pytest.mark.parametrize("k", [2, 3, 5, 6, 8])
def test_a_cell_of_several_processes_has_an_interval_that_holds_its_true_level_95_times_in_100(k):
    """Process levels scattered lognormally about a true 1.0, steps about each level: the bootstrap of the processes
    held the true level in about half of the cells of 2, three in four of 3, nine in ten of 5 to 8. The cell's
    interval now (`cell_ci`): the t interval on their log medians below 6 processes (`few_processes_ci`), the
    distribution-free interval of their medians from 6, in 95% or more."""
    rng = np.random.default_rng(20 + k)
    cells = 400
    held = booted = 0
    for _ in range(cells):
        groups = [list(np.exp(0.05 * rng.standard_normal() + 0.02 * rng.standard_normal(15))) for _ in range(k)]
        s = summarize_processes(groups)
        held += s.ci_low <= 1.0 <= s.ci_high
        medians = [statistics.median(g) for g in groups]
        want = few_processes_ci(groups) if k < FEW_SAMPLES else median_ci(medians)
        assert s.ci_low <= s.median <= s.ci_high and (s.ci_low, s.ci_high) == want
        low, high = processes_ci(groups, resamples=400)
        booted += low <= 1.0 <= high
    assert 0.92 * cells <= held <= (0.985 if k < FEW_SAMPLES else 1) * cells, held  # 3000 cells: 94.9-95.4% (2-5)
    assert booted < {2: 0.7, 3: 0.85, 5: 0.95, 6: 0.96, 8: 0.96}[k] * cells, booted  # what the bootstrap held
    assert few_processes_ci([[1.0, 1.1]] * 2) is None  # no spread between the processes: the bootstrap's
    assert cell_ci([[1.0, 1.1]] * 2) == processes_ci([[1.0, 1.1]] * 2)
    assert few_processes_ci([[1.0]] * FEW_SAMPLES) is None  # six and more: `median_ci`'s


def test_a_process_median_of_zero_has_an_interval_and_no_log():
    """A step timed 0 s (a coarse clock) has no logarithm: the cell's interval is then the bootstrap's, not an error
    in the parent's collection (`math domain error`)."""
    s = summarize_processes([[0.0] * 10, [1e-6] * 10, [2e-6] * 10])
    assert s.ci_low == 0.0 and s.ci_high == 2e-6
    assert few_processes_ci([[0.0] * 10, [1e-6] * 10]) is None


def test_the_t_quantiles_of_few_processes_are_scipys():
    from scipy.special import stdtrit

    from dlperf.bootstrap import T_975

    assert pytest.approx([float(stdtrit(dof, 0.975)) for dof in (1, 2, 3, 4)], abs=1e-4) == T_975
    groups = [[1.0, 1.1], [1.2, 1.3], [0.9]]
    wide, narrow = few_processes_ci(groups, 0.99), few_processes_ci(groups)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]  # another confidence: scipy's quantile
