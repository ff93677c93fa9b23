import math
import random
import statistics

import pytest

from dlperf.measure.stats import ci_relative_halfwidth, iqr, median_ci, median_ci_ranks, sorted_median, summarize


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


def test_interval_tightens_with_more_samples():
    rng = random.Random(0)
    few = [1 + rng.gauss(0, 0.05) for _ in range(20)]
    many = [1 + rng.gauss(0, 0.05) for _ in range(2000)]
    assert ci_relative_halfwidth(many) < ci_relative_halfwidth(few) / 3


def test_summary_and_iqr():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median == 3.0 and s.n == 5 and s.mean == 22.0
    assert iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == 2.0
    assert summarize([1.0, 2.0, 3.0], median=7.0).median == 7.0  # median of per-process medians overrides


def test_summary_needs_samples():
    with pytest.raises(ValueError):
        summarize([])
