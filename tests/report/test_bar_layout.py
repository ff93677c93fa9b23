"""Where `figures` puts a bar chart's pieces, read back from the laid-out matplotlib figure: the profile's legend under
its title, a lone bar no wider than a bar, a column's bars centred over its tick. Each test failed on the tree before
the fix it guards (the legend over the title, one bar as wide as the axes, a lone bf16-less column's bar off its tick).
"""

from __future__ import annotations

import pytest

from conftest import make_cell
from dlperf.report import charts, figures
from dlperf.report.charts import Chart, Point, Series
from dlperf.report.figures import CATEGORY_COLORS


def cell(workload="fcn-r", threads=1, median=1.0, mode="fp32", device="cpu"):
    return make_cell(workload, "torch", device, threads, mode, batch=1024, median_s=median, n=30, processes=1,
                     run_id=1, q1_s=0.95 * median, q3_s=1.05 * median)  # fmt: skip


def laid_out(chart: Chart, how: str):
    """The chart drawn and laid out as the report's SVG draws it (its own size) or as `dlperf plot` saves it (4
    inches high at least); the figure is closed by the caller."""
    plt = figures._pyplot()
    with plt.rc_context(figures.STYLE):
        size = figures._size(chart)
        size = size if how == "report" else (size[0], max(4.0, size[1]))
        fig, ax = plt.subplots(figsize=size, layout="constrained")
        figures.draw(ax, chart, figures.palette([chart]))
        fig.draw_without_rendering()
    return fig, ax


def bars(ax) -> list[tuple[float, float]]:
    """Each drawn bar's centre and width, in the x axis' units (a category's tick is at its index)."""
    from matplotlib.container import BarContainer  # not an error bar's container

    return [(b.get_x() + b.get_width() / 2, b.get_width()) for c in ax.containers if isinstance(c, BarContainer)
            for b in c]  # fmt: skip


@pytest.mark.parametrize("how", ["report", "plot"])
@pytest.mark.parametrize("kinds", [3, len(CATEGORY_COLORS)])  # one row of the legend, and two
def test_the_profiles_title_stands_above_its_legend_and_the_legend_above_the_bars(how, kinds):
    names = ["tiny-alexnet-r cpu:1 (3.2 ms)", "tiny-alexnet-r cpu:2 (2.1 ms)"]
    series = [Series(k, [Point(n, 100 / kinds) for n in names]) for k in list(CATEGORY_COLORS)[:kinds]]
    chart = Chart("profile", "stacked", "Where the time goes", "% of the timed step", "", series, categories=names)
    fig, ax = laid_out(chart, how)
    try:
        renderer = fig.canvas.get_renderer()
        [title] = [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]
        heading = title.get_window_extent(renderer)
        legend = ax.get_legend().get_window_extent(renderer)
        top = ax.get_window_extent(renderer).y1
        assert heading.y0 >= legend.y1 and legend.y0 >= top  # in pixels, y upwards: title, legend, then the bars
        assert fig.bbox.y1 >= heading.y1  # and the title inside the picture
    finally:
        figures._pyplot().close(fig)


@pytest.mark.parametrize("gpus", [1, 2])
def test_one_workloads_speed_up_draws_bars_no_wider_than_a_fifth_of_the_axes(gpus):
    cells = [cell(threads=1, median=1.0), *(cell(device=f"cuda:{i}", median=0.1 / (i + 1)) for i in range(gpus))]
    chart = charts.gpu_speedup(cells)
    fig, ax = laid_out(chart, "report")
    try:
        drawn = bars(ax)
        low, high = ax.get_xlim()
        assert len(drawn) == gpus and all(w <= 0.2 * (high - low) for _, w in drawn)
        assert sum(x for x, _ in drawn) / gpus == pytest.approx(0.0)  # centred over the workload's tick
    finally:
        figures._pyplot().close(fig)


def test_a_column_with_fewer_series_centres_its_bars_over_its_tick():
    cells = [cell(threads=1, median=2.0), cell(threads=2, median=1.5), cell(threads=1, median=1.0, mode="bf16"),
             cell(threads=4, median=1.0), cell(threads=4, median=0.6, mode="bf16")]  # fmt: skip
    [chart] = charts.variants(cells)
    assert chart.categories == ["cpu:1", "cpu:2", "cpu:4"]
    fig, ax = laid_out(chart, "report")
    try:
        columns: dict[int, list[float]] = {}
        for x, width in bars(ax):
            columns.setdefault(round(x), []).append(x)
            assert width == pytest.approx(0.4 * 0.92)  # every bar as wide: two series at most in a column
        assert {k: len(v) for k, v in columns.items()} == {0: 2, 1: 1, 2: 2}
        for tick, xs in columns.items():
            assert sum(xs) / len(xs) == pytest.approx(tick)
    finally:
        figures._pyplot().close(fig)
