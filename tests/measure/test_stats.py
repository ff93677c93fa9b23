import bisect
import math
import random
import statistics
from collections import Counter

import pytest

from dlperf.measure.stats import (
    FEW_SAMPLES,
    ci_relative_halfwidth,
    counted,
    few,
    iqr,
    median_ci,
    median_ci_ranks,
    median_of_medians,
    median_replicates,
    processes_ci,
    sorted_median,
    summarize,
    summarize_processes,
)


def binom_cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


@pytest.mark.parametrize("n", [6, 7, 10, 20, 50, 100, 299, 301, 1000])
def test_median_ci_covers_at_least_95_percent(n):
    lo, hi = median_ci_ranks(n)
    # the interval [x_(lo), x_(hi)] (0-based) misses the median when fewer than lo+1 or more than hi samples fall below
    coverage = binom_cdf(hi, n) - binom_cdf(lo, n)
    assert coverage >= 0.95
    assert 0 <= lo < n // 2 <= hi < n


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_the_exact_ranks_are_the_binomial_sums_for_every_n_up_to_300(confidence):
    """The terms are built by their ratio (cheap enough for every step); the ranks are those of the exact sums."""
    tail = (1 - confidence) / 2
    for n in range(6, 301):
        low = next(k for k in range(n + 1) if binom_cdf(k, n) > tail)
        assert median_ci_ranks(n, confidence) == ((low - 1, n - low) if low >= 1 else None), n


def test_the_median_of_a_sorted_list_is_read_by_index():
    rng = random.Random(1)
    for n in range(1, 40):
        ordered = sorted(rng.random() for _ in range(n))
        assert sorted_median(ordered) == statistics.median(ordered)
    assert sorted_median([]) == 0.0


def test_median_ci_is_the_tightest_exact_interval():
    lo, hi = median_ci_ranks(20)
    assert binom_cdf(hi - 1, 20) - binom_cdf(lo + 1, 20) < 0.95  # one rank narrower on each side is not enough


def test_too_few_samples_have_no_interval():
    assert median_ci_ranks(5) is None
    assert median_ci([1.0, 2.0]) is None
    assert ci_relative_halfwidth([1.0, 2.0]) == math.inf


def test_few_is_a_known_count_under_few_samples():
    assert few(0) and few(1) and few(FEW_SAMPLES - 1)
    assert not few(FEW_SAMPLES) and not few(100)
    assert not few(None)  # not known: nothing is said of it


def test_interval_tightens_with_more_samples():
    rng = random.Random(0)
    few = [1 + rng.gauss(0, 0.05) for _ in range(20)]
    many = [1 + rng.gauss(0, 0.05) for _ in range(2000)]
    assert ci_relative_halfwidth(many) < ci_relative_halfwidth(few) / 3


def test_summary_and_iqr():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median == 3.0 and s.n == 5 and s.mean == 22.0
    assert iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == 2.0
    assert summarize_processes([[1.0, 2.0, 3.0], [7.0], [8.0, 9.0]]).median == 7.0  # the median of the medians


def test_summary_needs_samples():
    with pytest.raises(ValueError):
        summarize([])


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
    drawn = Counter(round(v, 9) for v in median_replicates([steps], draws, rng))
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


def test_the_mean_steps_interval_is_of_batch_means_wide_enough_for_a_drifting_load():
    """A long run pays the mean step (a loader cell's waits for data among them). Steps whose load drifts (another
    process busy for a while) are correlated: the steps' own standard error (1.96 sd / sqrt n) is too narrow for their
    mean; the interval of batch means is wider, holds the pooled mean, and is none under MEAN_BATCHES steps."""
    from dlperf.measure.stats import MEAN_BATCHES, mean_ci, t_quantile

    rng = random.Random(0)
    drifting = [0.010 * (1.5 if (i // 50) % 2 else 1.0) + rng.gauss(0, 0.0005) for i in range(400)]
    low, high = mean_ci([drifting])
    naive = 1.96 * statistics.stdev(drifting) / math.sqrt(len(drifting))
    assert low < statistics.fmean(drifting) < high and (high - low) / 2 > 1.5 * naive
    # several processes: the pooled mean, every process's batches
    other = [t * 1.2 for t in drifting[:100]]
    low, high = mean_ci([drifting, other, []])
    assert low < statistics.fmean(drifting + other) < high
    assert mean_ci([[0.01] * (MEAN_BATCHES - 1)]) is None and mean_ci([]) is None
    assert t_quantile(0.975, 9) == pytest.approx(2.262, abs=0.005)
    assert t_quantile(0.975, 10**6) == pytest.approx(1.96, abs=1e-3)


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
