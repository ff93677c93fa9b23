"""Every verdict between two measured cells (the table's star, the fastest framework, the best mode, the fleet's
fastest machine, optimize's choice, crossover's thread count) tells them apart by one rule (`report/fastest.py`): a
95% interval where there is one, and where a median has none (fewer than FEW_SAMPLES steps, or an older store's cell),
medians more than 5% and an IQR apart. A cell of 5 steps had no interval, yet no few-samples mark or warning (those
began under 5), and the table starred a thread count 1% faster on it; the fastest framework and the best mode were
named on a 2% gap of medians of 3 steps, and the fleet called two machines 3x apart a tie for want of intervals."""

from conftest import make_cell
from dlperf.measure.stats import FEW_SAMPLES, few, median_ci_ranks
from dlperf.report import best, fleet, table

MEDIANS = "their medians within 5% or an IQR of each other, without 95% intervals to judge them by"


def test_a_median_is_of_few_samples_exactly_where_it_has_no_95_percent_interval():
    assert median_ci_ranks(FEW_SAMPLES - 1) is None and median_ci_ranks(FEW_SAMPLES) is not None
    assert few(5) and not few(6)


def cpu(threads, median, n=5):
    return make_cell("fcn-s", threads=threads, batch=64, median_s=median, iqr_s=0.002, n=n)


def test_the_table_stars_no_thread_count_on_a_1_percent_gap_between_medians_of_5_steps():
    view = table.build(1, [cpu(1, 0.500), cpu(2, 0.495)])  # no interval at 5 steps, and no stored warning
    row = view.rows[0]
    assert row.best_cpu_column() is None and row.tied() == ["cpu:2", "cpu:1"]
    assert view.notes == [f"no fastest thread count starred in fcn-s torch (cpu:2, cpu:1): a tie, {MEDIANS}, so none "
                          "is told apart as the fastest"]  # fmt: skip
    assert table.row_values(view, row)[3:] == ["0.500 s? n=5", "0.495 s? n=5"]  # and both marked few
    apart = table.build(1, [cpu(1, 0.500), cpu(2, 0.400)])  # 25% apart: told apart on the medians alone
    assert apart.rows[0].best_cpu_column() == "cpu:2" and not apart.notes


def test_a_cell_of_several_processes_and_few_steps_is_judged_on_its_median_not_its_bootstrap_interval():
    narrow = [make_cell("fcn-s", threads=t, batch=64, median_s=m, iqr_s=0.001, n=4, ci_low_s=m - 1e-4,
                        ci_high_s=m + 1e-4) for t, m in ((1, 0.500), (2, 0.490))]  # fmt: skip
    assert table.build(1, narrow).rows[0].best_cpu_column() is None


def framework(name, median, n=3):
    return make_cell("fcn-r", framework=name, batch=16, median_s=median, iqr_s=0.001, n=n, key=name)


def test_the_fastest_framework_on_medians_of_3_steps_2_percent_apart_is_not_told_apart():
    steps = {"torch": [[0.500, 0.501, 0.502]], "jax": [[0.490, 0.491, 0.492]]}
    view = table.build(1, [framework("torch", 0.501), framework("jax", 0.491)], steps)
    assert view.fastest[1].endswith("jax, 1.02x [no interval: a median of under 6 steps] as fast as torch, not told "
                                    "apart")  # fmt: skip
    assert view.fastest_json[0]["told_apart"] is False and view.fastest_json[0]["ci_low"] is None
    apart = table.build(1, [framework("torch", 0.6), framework("jax", 0.3)], steps)
    assert apart.fastest[1].endswith("jax, 2.00x [no interval: a median of under 6 steps] as fast as torch")


def test_the_best_mode_on_medians_of_3_steps_2_percent_apart_is_not_told_apart_from_fp32():
    cells = [
        make_cell("fcn-r", mode=m, median_s=s, iqr_s=0.001, n=3, key=m) for m, s in (("fp32", 0.5), ("bf16", 0.49))
    ]
    [row] = best.build(cells, {"fp32": [[0.5, 0.5, 0.5]], "bf16": [[0.49, 0.49, 0.49]]})
    assert best.values(row)[-1] == "1.02x? [no interval: a median of under 6 steps], not told apart"
    assert row.mode == "bf16" and row.ci_low is None and row.told_apart is False


def machine(name, median, ci=None):
    low, high = ci or (None, None)
    cell = make_cell("lstm", threads=2, median_s=median, iqr_s=0.001, n=4 if ci is None else 50, ci_low_s=low,
                     ci_high_s=high, key=name)  # fmt: skip
    return fleet.Entry(name, cell)


def row(*entries):
    return fleet.FleetRow("lstm", "torch", "fp32", "", cpu={e.machine: e for e in entries})


def test_the_fleet_tells_two_machines_apart_without_intervals_by_their_medians():
    far = row(machine("alpha", 0.9), machine("beta", 0.3))  # 3x apart at 4 steps each
    assert far.winner() is far.cpu["beta"]
    assert far.verdict() == ("lstm torch: fastest on beta, 2 threads: 0.300 s? [no interval], 3.00x faster than alpha, "
                             "2 threads: 0.900 s? [no interval]")  # fmt: skip
    close = row(machine("alpha", 0.302), machine("beta", 0.300))
    assert close.winner() is None
    assert close.verdict() == ("lstm torch: fastest not told apart: beta, 2 threads: 0.300 s? [no interval]; alpha, 2 "
                               f"threads: 0.302 s? [no interval]: {MEDIANS}")  # fmt: skip
    overlapping = row(machine("alpha", 0.31, (0.29, 0.33)), machine("beta", 0.30, (0.28, 0.32)))
    assert overlapping.verdict().endswith("overlap")  # with intervals, as before
