"""A ratio printed with its 95% interval lies inside it: `dlperf compare`'s B/A and the speed-ups of the
fastest-framework lines, `table --best` and optimize (helper 104 saw compare print 1.49 [1.098, 1.482])."""

import numpy as np
import pytest

from dlperf.report import compare as cmp
from dlperf.report.compare import Verdict
from dlperf.report.speedup import speedup, welch_log
from report.runs import cell, record


def one_cell(a_procs, b_procs, **kwargs) -> cmp.CellResult:
    c = cell()
    result = cmp.compare([record(c, a_procs)], [record(c, b_procs)], {c.cell.key: a_procs}, {c.cell.key: b_procs},
                         **kwargs)  # fmt: skip
    [only] = result.cells
    return only


def test_process_medians_split_in_two_groups_give_a_ratio_inside_its_interval():
    """B's processes at 1.0 and 1.5: B's median (1.5) over A's was printed beside an interval around the mean of the
    logs, [1.098, 1.482], and the threshold judged the 1.5."""
    a, b = [[1.0]] * 10, [[1.0]] * 4 + [[1.5]] * 6
    _, low, high, _ = welch_log([1.0] * 10, [1.0] * 4 + [1.5] * 6)
    result = one_cell(a, b, threshold=0.3)
    assert result.b_median_s / result.a_median_s == pytest.approx(1.5)  # the cells' medians: outside [low, high]
    assert result.ratio == pytest.approx(1.5**0.6) and low <= result.ratio <= high
    assert (result.ci_low, result.ci_high) == (low, high)
    assert result.verdict == Verdict.SLOWER and not result.regression  # 1.275, not 1.5, against the 30% threshold


def test_one_process_a_side_is_the_medians_ratio():
    result = one_cell([[0.1, 0.2, 0.3]], [[0.3, 0.4, 0.5]])
    assert result.ratio == pytest.approx(2.0) and result.verdict == Verdict.TOO_LITTLE_DATA


@pytest.mark.parametrize("seed", range(40))
def test_compare_ratio_lies_inside_its_interval(seed):
    rng = np.random.default_rng(seed)

    def side() -> list[list[float]]:  # process levels in two groups (a machine's two states), steps around each
        fast, slow = rng.choice([1.0, 1.2]), rng.choice([1.5, 3.0])
        levels = rng.choice([fast, slow], size=int(rng.integers(2, 16))) * rng.lognormal(0, 0.01, 1)
        return [list(level * rng.lognormal(0, 0.01, int(rng.integers(1, 12)))) for level in levels]

    result = one_cell(side(), side())
    if result.ci_low is not None:
        assert result.ci_low <= result.ratio <= result.ci_high, (seed, result.ratio, result.ci_low, result.ci_high)


@pytest.mark.parametrize("seed", range(40))
def test_a_speedup_lies_inside_its_interval(seed):
    """The fastest-framework lines, `table --best` and optimize print `speedup`'s ratio, the cells' medians', beside
    its interval: with several processes on a side the t interval (about the log medians' means) widened to hold it;
    with one a side the bootstrap's, which resamples that same statistic."""
    rng = np.random.default_rng(1000 + seed)

    def side() -> list[list[float]]:
        levels = rng.choice([1.0, 1.5, 5.0], size=int(rng.integers(1, 7)))
        return [list(level * rng.lognormal(0, rng.uniform(0, 0.8), int(rng.integers(1, 10)))) for level in levels]

    s = speedup(side(), side(), resamples=300)
    assert s.low <= s.ratio <= s.high, (seed, s)
