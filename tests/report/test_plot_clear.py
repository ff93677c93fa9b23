"""What makes a drawn chart readable on its own: where it was measured, each axis named, the legend beside the data
and never over it, and every series named, a lone one too. Checked on the figure objects, not on pixels."""

from collections import Counter
from dataclasses import replace

import pytest

from conftest import dlperf, make_cell
from dlperf.report import charts, figures, paper
from dlperf.report.charts import Chart, Point, Series


@pytest.fixture
def plt():
    plt = figures._pyplot()
    yield plt
    plt.close("all")


def cell(threads=1, mode="fp32", device="cpu", median=1.0, workload="fcn-r", batch=1024):
    return make_cell(workload, "torch", device, threads, mode, batch=batch, median_s=median, iqr_s=0.1 * median,
                     n=30, processes=1, run_id=1, q1_s=0.95 * median, q3_s=1.05 * median,
                     workload_spec={"batch": batch, "paper": "FCN-R"})  # fmt: skip


def drawn(plt, chart: Chart):
    with plt.rc_context(figures.STYLE):
        fig, ax = plt.subplots(figsize=figures._size(chart), layout="constrained")
        figures.draw(ax, chart, figures.palette([chart]))
        fig.canvas.draw()
    return ax


def test_ten_lines_legend_stands_beside_the_axes_not_over_them(plt):
    """Inside the axes ("best"), ten series' entries covered the fastest lines at the lower left."""
    labels = [f"torch mode{i}" for i in range(10)]
    series = [Series(label, [Point(t, (1 + i) / t) for t in (1, 2, 4, 8)]) for i, label in enumerate(labels)]
    ax = drawn(plt, Chart("scaling-x", "lines", "x: thread scaling", "CPU threads", "seconds", series))
    legend, box = ax.get_legend(), ax.get_window_extent()
    assert [t.get_text() for t in legend.get_texts()] == labels
    assert legend.get_window_extent().x0 >= box.x1 - 1  # right of the axes, overlapping none of the data


def test_a_long_legend_widens_the_figure_not_squeezes_the_axes(plt):
    """A crossover's legend ('H100-SXM5-80GB predicted faster from 1024') beside its axes left them half the
    figure: the figure grows by the legend's width, the axes keep theirs, and nothing is cut off at the edge."""
    series = [
        Series(f"{gpu}, predicted", [Point(b, 0.001 * b) for b in (1, 16, 256)]) for gpu in ("H100-SXM5-80GB", "T4")
    ]
    marks = {"H100-SXM5-80GB predicted faster from 1024": 256.0, "T4 predicted faster from 4096": 16.0}
    ax = drawn(plt, Chart("crossover", "lines", "x: CPU against GPU", "batch size", "seconds per step", series,
                          log_x=True, marks=marks))  # fmt: skip
    fig = ax.get_figure()
    assert ax.get_window_extent().width / fig.dpi >= 5.0
    assert ax.get_legend().get_window_extent().x1 <= fig.bbox.x1


def test_a_lone_series_of_bars_is_named(plt):
    """The GPU speed-up of one GPU drew one bar and no legend: which GPU it was said nowhere on the figure."""
    chart = charts.gpu_speedup([cell(threads=1), cell(threads=2, median=0.6), cell(device="cuda", median=0.01)])
    ax = drawn(plt, chart)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["torch fp32 cuda"]
    assert ax.get_xlabel() == "workload" and ax.get_ylabel() == "speed-up (x) (log scale)"


def test_a_single_line_needs_no_legend(plt):
    chart = Chart("x", "lines", "t", "CPU threads", "seconds", [Series("torch fp32", [Point(1, 1.0), Point(2, 0.5)])])
    assert drawn(plt, chart).get_legend() is None  # the title says the workload; nothing to tell apart


def test_the_category_axes_are_named():
    """The variants' bars stood over cpu:1, cpu:2 with nothing to say those are thread counts; the paper's over
    its networks with no axis label."""
    [cpu] = charts.variants([cell(threads=t, mode=m) for t in (1, 2) for m in ("fp32", "bf16")])
    assert cpu.xlabel == "CPU threads (cpu:N)"
    [mixed] = charts.variants([cell(mode=m) for m in ("fp32", "bf16")] + [cell(device="cuda", median=0.1)])
    assert mixed.xlabel == "device (cpu:N: N CPU threads)"
    assert paper.chart(paper.compare([cell()])[0]).xlabel == "network"


def test_plot_heads_its_file_with_the_run_and_the_machine(tmp_path, report_db):
    """A PNG shown on a slide said what each chart was, never where it was measured."""
    out = tmp_path / "s.svg"
    assert dlperf("plot", "scaling", "-o", str(out), db=report_db).returncode == 0
    assert "run 1 on testhost · Test CPU &lt;v2&gt; · Test GPU" in out.read_text()


def test_a_crossover_plot_is_headed_by_its_run_and_machine(tmp_path):
    from dlperf.commands.crossover import plot
    from dlperf.report import crossover
    from dlperf.report.run_list import machine
    from report.test_crossover import crossover_run

    store, run_id = crossover_run(tmp_path / "d.db", {1: 0.001, 8: 0.004}, {1: 0.002, 8: 0.003})
    [answer] = crossover.read(store, [run_id])
    where = f"run {run_id} on {machine(store.run(run_id))}"
    store.close()
    plot(answer, str(tmp_path / "x.svg"), str(tmp_path / "d.db"), run_id)
    assert where in (tmp_path / "x.svg").read_text() and " · " in where


def test_a_bar_charts_legend_widens_the_figure_not_squeezes_the_axes(plt):
    """The GPU speed-up of seven workloads, one of them from a disturbed cell, kept its 6.4-inch figure and the
    legend beside took 4 inches of it ('? from a disturbed cell (busy CPUs, ...)'): seven bars in 2.6 inches, their
    names tilted into each other. The figure grows by the legend's width, as a chart of lines' does."""
    names = ["fcn-s", "alexnet-s", "resnet-50", "fcn-r", "alexnet-r", "resnet-56", "lstm"]
    cells = [cell(workload=w, threads=t, median=1.0 / t) for w in names for t in (1, 2)]
    cells += [cell(workload=w, device="cuda", median=0.01) for w in names]
    cells[-2].warnings = ["other processes used 60% of the CPUs while this cell was timed"]
    chart = charts.gpu_speedup(cells)
    assert chart.doubt
    ax = drawn(plt, chart)
    fig = ax.get_figure()
    assert ax.get_window_extent().width / fig.dpi >= 5.0
    assert ax.get_legend().get_window_extent().x1 <= fig.bbox.x1


def test_a_profiled_cell_timed_on_busy_cpus_is_marked_beside_its_verdict(plt):
    """dlperf profile of three tiny workloads while other processes used 49-60% of the 2 cores (its notes: 'the
    shares and the verdict vary from run to run') drew each bar and verdict as a quiet one's. A disturbed cell's
    verdict now has a '?' and the axis says what it means; its parts keep their categories' colours (hatched white,
    small parts could not be told apart), and the 8 categories' legend fills two rows alike (7 + 1 stacked
    'elementwise' under 'matmul')."""
    from dlperf.protocol import Profiled
    from dlperf.report import profile
    from dlperf.store.records import ProfileRecord
    from dlperf.vocab import Status

    busy = replace(cell(threads=2, median=0.5), warnings=["other processes used 60% of the CPUs while..."])
    cells = [cell(median=1.0), busy]
    parts = dict.fromkeys(("matmul", "elementwise", "normalization", "pooling", "loss", "optimizer", "copy"), 0.1)
    profiles = {c.key: ProfileRecord(1, c.key, "", Status.OK, figures=Profiled(1, 1.0, {**parts, "host": 0.3}))
                for c in cells}  # fmt: skip
    found = {c.key: profile.Verdict(profile.Bound.COMPUTE, "highly", "matmul 70%", ()) for c in cells}
    chart = profile.breakdown(cells, profiles, found)
    ax = drawn(plt, chart)
    beside = [t.get_text() for t in ax.texts]
    assert [text.endswith(" ?") for text in beside] == [False, True]
    assert ax.get_xlabel().endswith(f"? beside a bar: {charts.DISTURBED_CELL}")
    assert all(bar.get_facecolor() != (1.0, 1.0, 1.0, 1.0) for bar in ax.patches)
    rows = Counter(round(t.get_window_extent().y0) for t in ax.get_legend().get_texts())
    assert sorted(rows.values()) == [4, 4]
    nan = replace(cell(threads=3, median=0.4), loss_finite=False)  # a step that did not train: its bar unmarked
    profiles[nan.key] = profiles[cells[0].key]
    chart = profile.breakdown([cells[0], nan], profiles, {})
    assert [p.doubtful for p in chart.points if p.x.startswith("fcn-r cpu:3")] == [True] * 8
    assert chart.doubt == charts.NOT_TRAINING


def test_a_speed_up_bar_rises_from_one_on_its_log_axis(plt):
    """The GPU speed-up's bars on a log axis rose from wherever the axis began (9.5x for seven workloads of 11x to
    123x): resnet-56's 11x a sliver a tenth of alexnet-s' 123x. Each bar now stands on 1x (as fast) and a slower
    GPU's hangs below it."""
    cells = [cell(workload=w, median=1.0) for w in ("fcn-r", "lstm")]
    cells += [cell(workload="fcn-r", device="cuda", median=0.1), cell(workload="lstm", device="cuda", median=2.0)]
    ax = drawn(plt, charts.gpu_speedup(cells))
    bars = [(b.get_y(), b.get_y() + b.get_height()) for b in ax.patches]
    assert bars == [pytest.approx((1.0, 10.0)), pytest.approx((1.0, 0.5))]
    assert ax.get_ylim()[0] <= 0.5


def test_a_log_axis_within_a_decade_names_more_than_two_ticks(plt):
    """A crossover's steps from 0.43 to 1.7 ms named 0.0005 and 0.001 alone on its log axis (ticks at 1, 2 and 5
    per decade), the GPUs' lines above the last; within a decade 1.5, 3 and 7 are named too."""
    series = [Series("CPU, measured", [Point(1, 0.00066), Point(32, 0.00043), Point(256, 0.00113)]),
              Series("T4, predicted", [Point(1, 0.00162), Point(256, 0.00168)], dashed=True)]  # fmt: skip
    chart = Chart("crossover-1", "lines", "x", "batch size", "seconds per step", series, log_x=True, log_y=True)
    # and one named at or below the lowest step and at or above the highest (test_a_log_axis_names_a_tick_either_side)
    ax = drawn(plt, chart)  # in ms, the unit the tables write these steps in
    assert named_ticks(ax) == ["0.3", "0.5", "0.7", "1", "1.5", "2"] and ax.get_ylabel() == "ms per step (log scale)"


def test_a_time_axis_is_in_the_unit_the_tables_write_its_steps_in(plt):
    """A thread-scaling chart of a 216-292 µs step read 0.000225, 0.000250 ... on an axis of "seconds per
    mini-batch", where the table says 216 µs; a step of 0.1 s or more stays in seconds."""
    series = [Series("torch fp32", [Point(1, 216e-6, 212e-6, 226e-6), Point(2, 292e-6, 287e-6, 305e-6)])]
    chart = Chart("scaling-x", "lines", "x", "CPU threads", "seconds per mini-batch", series)
    ax = drawn(plt, chart)
    assert ax.get_ylabel() == "µs per mini-batch"
    assert named_ticks(ax)[:3] == ["220", "240", "260"]
    series = [Series("torch fp32", [Point(1, 2.42e-3), Point(2, 1.70e-3)])]
    assert drawn(plt, Chart("s", "lines", "x", "CPU threads", "seconds per mini-batch", series)).get_ylabel() == (
        "ms per mini-batch"
    )
    series = [Series("torch fp32", [Point(1, 0.42), Point(2, 0.30)])]
    ax = drawn(plt, Chart("s", "lines", "x", "CPU threads", "seconds per mini-batch", series))
    assert ax.get_ylabel() == "seconds per mini-batch" and "0.30" in named_ticks(ax)


def named_ticks(ax) -> list[str]:
    """The y tick labels the axes show, read off the drawn axes: those inside its limits (a hair's slack: a tick at a
    limit may be computed an ulp outside it)."""
    low, high = ax.get_ylim()
    inside = [t for t in ax.get_yticklabels() if low * (1 - 1e-9) <= t.get_position()[1] <= high * (1 + 1e-9)]
    return [t.get_text() for t in inside if t.get_text()]


def test_a_log_axis_names_a_tick_either_side(plt):
    """Across more than a decade (1, 2 and 5 named), dlperf crossover's lowest CPU step, 0.33 ms, had no named tick
    below it (0.0005 the lowest), nor the paper chart's GPU bar, 0.016 s (0.02 the lowest): the axis reaches the
    nearest named tick either side of its values, error bars included."""
    series = [Series("CPU, measured", [Point(1, 0.00033), Point(16, 0.00043), Point(4096, 0.0085, 0.008, 0.0089)]),
              Series("T4, predicted", [Point(1, 0.0016), Point(4096, 0.0025)], dashed=True)]  # fmt: skip
    chart = Chart("crossover-1", "lines", "x", "batch size", "seconds per step", series, log_x=True, log_y=True)
    assert named_ticks(drawn(plt, chart)) == ["0.2", "0.5", "1", "2", "5", "10"]  # ms
    bars = [Series(label, [Point("FCN-R", y)]) for label, y in (("here", 0.673), ("paper, CPU", 0.252),
                                                                 ("paper, GPU", 0.016))]  # fmt: skip
    chart = Chart("paper", "bars", "x", "network", "seconds", bars, categories=["FCN-R"], log_y=True)
    assert named_ticks(drawn(plt, chart)) == ["0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1"]


def test_bars_across_decades_are_points_on_a_log_axis_that_says_so(plt):
    """Modes 400 times apart drew bars on a log axis from its arbitrary floor, unsaid: a 275 µs bar a sliver, a 108 ms
    one ten times taller. They are points (a level as wide as the bar) on an axis named log; within a decade, bars."""
    from matplotlib.patches import Rectangle

    cells = [cell(threads=2, median=275e-6), cell(threads=2, mode="bf16", median=0.108)]
    [chart] = charts.variants(cells)
    ax = drawn(plt, chart)
    assert chart.log_y and figures.dots(chart) and ax.get_yscale() == "log"
    assert ax.get_ylabel() == "seconds per mini-batch (log scale)"
    assert not [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0]  # no bar
    assert {0.000275, 0.108} <= {round(y, 6) for line in ax.lines for y in line.get_ydata()}  # and the caps
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fp32", "bf16"]
    [near] = charts.variants([cell(threads=2, median=0.01), cell(threads=2, mode="bf16", median=0.02)])
    linear = drawn(plt, near)
    assert not figures.dots(near) and len([p for p in linear.patches if isinstance(p, Rectangle)]) >= 2
