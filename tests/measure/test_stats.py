import math
import random
import statistics

import pytest

from dlperf.measure.stats import (
    FEW_SAMPLES,
    ci_relative_halfwidth,
    few,
    iqr,
    median_ci,
    median_ci_ranks,
    sorted_median,
    summarize,
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


def test_summary_needs_samples():
    with pytest.raises(ValueError):
        summarize([])


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
