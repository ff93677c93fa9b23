"""The chart data, the paper comparison and the matplotlib drawing, without a browser."""

import re
import statistics
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import make_cell
from dlperf.report import charts, figures, paper
from dlperf.report.figure_style import PALETTE
from report.pictures import assert_png_draws, pdf_pages, svg_axes


def cell(workload="fcn-r", threads=1, median=1.0, mode="fp32", framework="torch", device="cpu", **fields):
    return make_cell(workload, framework, device, threads, mode, batch=1024, median_s=median, iqr_s=0.1 * median,
                     n=30, processes=3, run_id=4, q1_s=0.95 * median, q3_s=1.05 * median,
                     workload_spec={"batch": 1024, "paper": "FCN-R"}, **fields)  # fmt: skip


def test_the_error_bar_of_several_processes_holds_their_median_of_medians():
    """Two processes at 280 and 323 us (3000 and 500 steps): the pooled steps' quartiles (about 281-283 us) left out
    the cell's median (302 us), drawn above its own bar. The bar is now the median of the processes' quartiles."""
    from dlperf.report.load import _enrich

    a = [280e-6 + i * 1e-9 for i in range(3000)]
    b = [323e-6 + i * 1e-9 for i in range(500)]
    c = _enrich(cell(median=(statistics.median(a) + statistics.median(b)) / 2), [a, b])
    assert c.q1_s <= c.median_s <= c.q3_s and c.processes == 2
    one = _enrich(cell(median=statistics.median(a)), [a])
    assert (one.q1_s, one.q3_s) == tuple(statistics.quantiles(a, n=4, method="inclusive")[::2])


def test_the_bar_and_the_hover_agree_with_the_table_beside_a_process_of_too_few_steps():
    """A cell of a one-step process (1.71 s) and one of 44 steps (6 ms): its bar ran from 6 ms to the 0.856 s point,
    drawn one-sided, and a cell whose short process was slow read "IQR 12.4 ms" on hover where the table and the
    export said 153 µs. The bar is of the processes the median counts; the hover's IQR is the table's."""
    from dlperf.bootstrap import summarize_processes
    from dlperf.report.load import _enrich

    steady = [0.006 + 1e-5 * (i % 7) for i in range(44)]
    s = summarize_processes([[1.71], steady])
    c = cell(median=s.median)
    c.iqr_s, c.n = s.iqr, s.n
    c = _enrich(c, [[1.71], steady])
    assert c.q1_s <= c.median_s <= c.q3_s < 0.007 and c.processes == 1  # the one the median counts
    assert f"IQR {charts.seconds(s.iqr)}" in charts.tip(c)
    one = cell(median=1.0)
    one.iqr_s, one.n = 0.0, 1
    assert "IQR -" in charts.tip(one)  # one step: no spread to show, not "0.00 µs"


def test_no_bar_that_leaves_out_the_median_and_no_hover_of_a_bar_not_drawn():
    """Processes of 1, 1 and 5 steps: the median (1.0 s) counts all three, the bar was of the one with quartiles,
    0.1 to 0.1 s, the point drawn outside it. And the hover of a cell of too few steps described a bar `_point`
    does not draw."""
    from dlperf.bootstrap import summarize_processes
    from dlperf.report.load import _enrich

    groups = [[1.0], [1.1], [0.1, 0.1, 0.1, 0.1, 0.12]]
    s = summarize_processes(groups)
    c = cell(median=s.median)
    c.n, c.q1_s, c.q3_s = s.n, None, None
    c = _enrich(c, groups)
    point = charts._point(c, 1)
    assert (point.y, point.low, point.high) == (1.0, None, None) and "bar " not in point.tip
    few = cell(median=1.0)
    few.n = 4  # three processes: quartiles stored, none drawn
    point = charts._point(few, 1)
    assert (point.low, point.high) == (None, None) and "bar " not in point.tip
    assert "bar 0.950 s to 1.05 s" in charts._point(cell(median=1.0), 1).tip  # n 30: drawn, and said


def test_scaling_has_an_ideal_line_from_the_fewest_threads():
    [chart] = charts.scaling([cell(threads=1, median=1.0), cell(threads=2, median=0.6), cell(threads=4, median=0.4)])
    measured, ideal = chart.series
    assert [p.y for p in measured.points] == [1.0, 0.6, 0.4]
    assert [p.y for p in ideal.points] == [1.0, 0.5, 0.25] and ideal.ideal
    assert (measured.points[0].low, measured.points[0].high) == (0.95, 1.05)
    assert chart.log_x  # 1..4 threads
    tip = measured.points[1].tip
    assert "median 0.600 s" in tip and "IQR 60.0 ms" in tip and "n 30" in tip and "3 processes" in tip
    assert "run 4" in tip


def test_one_thread_count_draws_no_scaling_chart():
    assert charts.scaling([cell(threads=2), cell(threads=2, mode="bf16")]) == []


def test_variants_tell_series_apart_by_every_dimension_that_varies():
    cells = [cell(threads=2, median=0.5), cell(threads=2, median=0.25, mode="bf16"),
             cell(threads=2, median=0.6, framework="jax")]  # fmt: skip
    [chart] = charts.variants(cells)
    assert [s.label for s in chart.series] == ["torch fp32", "torch bf16", "jax fp32"]
    assert chart.categories == ["cpu:2"]
    assert "2.00x the speed of fp32" in chart.series[1].points[0].tip
    [slow] = charts.variants([cell(threads=2, median=0.275e-3), cell(threads=2, median=0.067, mode="bf16")])
    assert "0.0041x the speed of fp32" in slow.series[1].points[0].tip  # read "0.00x"


def test_variants_name_the_cells_they_draw_no_bar_for():
    """tensorflow fp16 (unsupported) had no bar, no legend entry and no word in the caption, where the table said it."""
    from dlperf.vocab import Status

    unsupported = replace(cell(threads=2, mode="fp16", framework="jax"), median_s=None, status=Status.UNSUPPORTED)
    failed = replace(cell(threads=1), median_s=None, status=Status.FAILED)
    cells = [cell(threads=2, median=0.5), cell(threads=2, median=0.25, mode="bf16"), unsupported, failed]
    [chart] = charts.variants(cells)
    assert [s.label for s in chart.series] == ["torch fp32", "torch bf16"]
    assert chart.caption.endswith("; no bar: jax fp16 cpu:2 (unsupported), torch fp32 cpu:1 (failed)")
    [chart] = charts.variants(cells[:2])
    assert "no bar" not in chart.caption


def test_a_new_dimension_needs_no_change_in_the_views():
    """A later measurement (data-parallel processes, say) adds its dimension to a cell's `dimensions`."""
    cells = [cell(threads=1, median=1.0, dimensions={"ddp": "1"}), cell(threads=1, median=0.6, dimensions={"ddp": "2"})]
    [chart] = charts.variants(cells)
    assert [s.label for s in chart.series] == ["ddp:1", "ddp:2"]
    assert "ddp:2" in chart.series[1].points[0].tip


def test_gpu_speedup_holds_each_gpu_against_the_best_cpu_cell():
    chart = charts.gpu_speedup([cell(threads=1, median=1.0), cell(threads=2, median=0.5),
                                cell(device="cuda:0", threads=2, median=0.02)])  # fmt: skip
    [series] = chart.series
    assert series.points[0].y == pytest.approx(25.0) and "best CPU cell (cpu:2" in series.points[0].tip
    assert charts.gpu_speedup([cell()]) is None


def test_utilization_needs_a_measured_peak():
    assert charts.utilization([cell()]) is None
    chart = charts.utilization([replace(cell(), utilization=0.25)])
    assert chart.series[0].points[0].y == pytest.approx(25.0)


def test_paper_figures_are_the_best_tool_and_configuration():
    assert paper.best("FCN-R", gpu=False) == paper.Figure(0.252, "CNTK", "server CPU, 16 threads")
    assert paper.best("FCN-R", gpu=True) == paper.Figure(0.016, "Torch", "GTX 1080")
    assert paper.best("ResNet-50", gpu=False).seconds == 3.683  # Torch, server, 16 threads
    assert paper.best("LSTM", gpu=False).tool == "CNTK"
    assert paper.batch_of("AlexNet-R") == 1024


def test_paper_comparison_takes_the_fastest_fp32_cell_at_the_papers_batch():
    fast_bf16 = cell(threads=2, median=0.1, mode="bf16")
    rows, notes = paper.compare([cell(threads=1, median=0.8), cell(threads=2, median=0.5), fast_bf16])
    [row] = rows
    assert row.ours_cpu.threads == 2 and row.ratio(row.ours_cpu, row.paper_cpu) == pytest.approx(0.252 / 0.5)
    assert notes == []
    other_batch = replace(cell(), batch=64)
    assert paper.compare([other_batch]) == ([], ["fcn-r: batch 64, the paper used 1024: not compared"])
    chart = paper.chart(rows)
    assert [s.label for s in chart.series] == ["this machine, best CPU", "paper, best CPU", "paper, best GPU"]
    assert "CNTK, server CPU, 16 threads" in chart.series[1].points[0].tip


def test_svg_tags_every_point_and_keeps_hostile_names_as_text():
    name = "<b>$x$ & </svg>"
    cells = [cell(workload=name, threads=1), cell(workload=name, threads=2, median=0.5)]
    [chart] = charts.scaling(cells)
    svg, tagged = figures.svg(chart, figures.palette([chart]), "c0")
    assert tagged == 2
    root = ET.fromstring(svg)  # well-formed: nothing a name holds breaks out of its text node
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert any(name in t for t in texts)  # drawn as typed: no mathtext, no markup
    tips = [g.get("data-tip") for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "tip"]
    assert len(tips) == 2 and all(name in t for t in tips)
    assert not re.search(r"<b>", svg)


def saved(tmp_path, suffix: str) -> Path:
    """Two charts saved side by side: fcn-r's thread scaling (two points) and the paper comparison (three bars)."""
    out = tmp_path / f"fig.{suffix}"
    figures.save(two_charts(), out)
    return out


def two_charts() -> list[charts.Chart]:
    return [*charts.scaling([cell(threads=1), cell(threads=2, median=0.5)]), paper.chart(paper.compare([cell()])[0])]


SCALING_TEXT = {"fcn-r: thread scaling", "CPU threads", "seconds per mini-batch", "torch fp32", "ideal scaling"}
PAPER_TEXT = {"This machine against Shi et al. (2016)", "this machine, best CPU", "paper, best CPU", "paper, best GPU"}
FIRST = [c.lower() for c in PALETTE[:4]]  # the palette's first colours, one a series label, in order (Okabe-Ito)


def test_save_writes_a_png_with_each_chart_drawn(tmp_path):
    # each chart as wide as the widest (the chart of lines, its legend beside it) and 600 pixels high at 150 dpi
    wide = round(150 * max(figures._size(c)[0] for c in two_charts()))
    assert_png_draws(saved(tmp_path, "png"), charts=2, colours=FIRST, chart_px=(wide, 600))  # a line and 3 bars


def test_save_writes_an_svg_with_each_charts_text_and_series(tmp_path):
    scaling, comparison = svg_axes(saved(tmp_path, "svg"))
    assert set(scaling["texts"]) >= SCALING_TEXT and set(comparison["texts"]) >= PAPER_TEXT
    assert scaling["colours"] == {FIRST[0]} and len(scaling["marker_xs"]) == 2  # a point at 1 thread, one at 2
    assert comparison["colours"] == set(FIRST[1:])  # a bar of each


def test_save_writes_a_one_page_pdf_with_each_charts_text(tmp_path):
    pages, texts = pdf_pages(saved(tmp_path, "pdf"))
    assert pages == 1 and set(texts) >= (SCALING_TEXT | PAPER_TEXT)


def test_ddp_scaling_draws_processes_with_the_ideal_of_each_protocol():
    strong = [cell(threads=2 // n, median=m, nproc=n, scaling="strong") for n, m in ((1, 1.0), (2, 0.8))]
    weak = [cell(threads=1, median=m, nproc=n, scaling="weak") for n, m in ((1, 1.0), (2, 1.25))]
    [chart] = charts.ddp_scaling(strong + weak + [cell(threads=2)])  # the plain cell is not a DDP point
    by_name = {s.label: s for s in chart.series}
    assert [p.y for p in by_name["torch fp32 ddp strong ideal"].points] == [1.0, 0.5]
    assert [p.y for p in by_name["torch fp32 ddp weak ideal"].points] == [1.0, 1.0]
    assert [p.x for p in by_name["torch fp32 ddp strong"].points] == [1, 2]
    assert chart.ylabel == "seconds per mini-batch"  # as every other chart and the table; was "seconds per step"
    assert "strong scaling, ddp:2x1" in by_name["torch fp32 ddp strong"].points[1].tip


def network_labels(svg_text: str, names: set[str]) -> dict[str, float]:
    """Each network name's angle in the SVG: matplotlib writes a label's as `rotate(-30 x y)`, or `rotate(-0 x y)`."""
    root = ET.fromstring(svg_text)
    texts = ((("".join(t.itertext())), t.get("transform") or "") for t in root.iter("{http://www.w3.org/2000/svg}text"))
    turned = {text: re.search(r"rotate\((-?[\d.]+)", transform) for text, transform in texts if text in names}
    return {text: abs(float(found[1])) if found else 0.0 for text, found in turned.items()}


def test_the_seven_networks_names_are_tilted_where_they_would_overlap(tmp_path):
    """The paper chart's seven names of up to 9 letters, 21 bars and the legend beside them: upright, "AlexNet-S"
    ran into "ResNet-50" (`_bars` tilted only names over 9 letters). With the figure wider by its legend they have
    room and stand upright, in a file and in the report's SVG alike; squeezed into 4 inches, they are tilted once
    laid out; one network's name, with room, stays upright."""
    from dlperf.workloads import BUILTIN

    seven = [replace(cell(w, median=0.5), batch=BUILTIN[w].batch, workload_spec=BUILTIN[w].to_json())
             for w in ("fcn-s", "alexnet-s", "resnet-50", "fcn-r", "alexnet-r", "resnet-56", "lstm")]  # fmt: skip
    rows, _ = paper.compare(seven)
    chart, names = paper.chart(rows), {r.network for r in rows}
    figures.save([chart], tmp_path / "paper.svg")
    for drawn in (tmp_path.joinpath("paper.svg").read_text(), figures.svg(chart, figures.palette([chart]), "c0")[0]):
        assert network_labels(drawn, names) == dict.fromkeys(names, 0.0)
    plt = figures._pyplot()
    with plt.rc_context(figures.STYLE):
        fig, ax = plt.subplots(figsize=(4.0, 4.0), layout="constrained")
        try:
            figures.draw(ax, chart, figures.palette([chart]))
            figures.tilt_crowded(fig)
            assert {t.get_text(): t.get_rotation() for t in ax.get_xticklabels()} == dict.fromkeys(names, 30.0)
        finally:
            plt.close(fig)
    one = paper.chart(paper.compare([cell()])[0])
    assert network_labels(figures.svg(one, figures.palette([one]), "c1")[0], {"FCN-R"}) == {"FCN-R": 0.0}


def test_a_pdf_embeds_truetype_fonts_and_is_the_same_file_each_time(tmp_path):
    """`plot -o x.pdf` embedded Type 3 fonts, which IEEE PDF eXpress and ACM's checks refuse, and two saves of the
    same charts differed in their CreationDate (the Date key set to None is an SVG's)."""
    first, second = saved(tmp_path, "pdf").read_bytes(), None
    (tmp_path / "again").mkdir()
    second = saved(tmp_path / "again", "pdf").read_bytes()
    assert b"/Type3" not in first and b"/CIDFontType2" in first  # TrueType outlines, in a CID font
    assert b"/CreationDate" not in first and first == second


def test_a_figure_as_wide_as_a_papers_column_keeps_its_fonts_and_puts_each_legend_under_its_title(tmp_path):
    """A chart of lines is 6.4 inches and its legend beside it; scaled down to a 3.5-inch column its text was a third
    of the paper's. `--width 3.5`: one chart a row, 3.5 inches across, each legend that would not fit beside its
    chart under its title, its long entries folded, and matplotlib never short of room."""
    import warnings

    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "constrained layout not applied", "axes sizes collapsed to zero"
        figures.save(two_charts(), tmp_path / "column.png", dpi=100, width=3.5)
        figures.save(two_charts(), tmp_path / "column.svg", width=3.5)
    wide, high = Image.open(tmp_path / "column.png").size
    assert wide == 350 and high >= 2 * 200  # two rows
    scaling, comparison = svg_axes(tmp_path / "column.svg")
    title = "This machine against Shi et al. (2016)"  # folded in two lines at 3.5 inches, each a text element
    assert set(scaling["texts"]) >= SCALING_TEXT and set(comparison["texts"]) >= PAPER_TEXT - {title}
    assert " ".join(comparison["texts"]).count(title.split(" (")[0].split(" against")[0]) and "(2016)" in " ".join(
        comparison["texts"]
    )
    assert ET.parse(tmp_path / "column.svg").getroot().get("width") == "252pt"  # 3.5 inches

    plt = figures._pyplot()
    [chart] = charts.scaling([cell(threads=1), cell(threads=2, median=0.5)])
    for narrow, under in ((3.5, True), (None, False)):
        fig, ax = plt.subplots(figsize=(3.5, 3), layout="constrained")
        figures.draw(ax, chart, figures.palette([chart]), narrow=narrow)
        fig.canvas.draw()
        legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
        assert (legend.y0 >= box.y1) == under and (legend.x0 >= box.x1) == (not under), narrow  # above, or beside
        plt.close(fig)
    assert figures._folded("a title " * 10, 3.5).count("\n") >= 1


def test_lying_bars_at_a_columns_width_fold_their_names_and_keep_room_to_draw():
    """`plot profile --width 3.5`: a bar's name, "tiny-fcn-r cpu:1 torch fp32 (422 µs)", and the verdict beside it
    left the axes no width at all (matplotlib: "axes sizes collapsed to zero"), the title cut short. The names and the
    labels beside the bars are folded to a share of the width."""
    import warnings

    names = ["tiny-fcn-r cpu:1 torch fp32 (422 µs)", "tiny-resnet-56 cpu:2 torch bf16 (1.20 ms)"]
    parts = [
        charts.Series(kind, [charts.Point(n, share) for n in names])
        for kind, share in (("matmul", 60.0), ("host", 40.0))
    ]
    chart = charts.Chart("profile-1", "stacked", "Where the time goes, by kind of operator", "% of the timed step", "",
                         parts, categories=names, labels={n: "launch-bound (highly)" for n in names})  # fmt: skip
    plt = figures._pyplot()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig, ax = plt.subplots(figsize=(3.5, figures._narrowed(chart, 3.5)[0]), layout="constrained")
        figures.draw(ax, chart, figures.palette([chart]), narrow=3.5)
        fig.canvas.draw()
    assert all("\n" in t.get_text() for t in ax.get_yticklabels())  # folded
    assert all("\n" in t.get_text() for t in ax.texts)
    assert ax.get_window_extent().width > 0.4 * fig.dpi * 3.5 / 2  # the bars keep width to be read
    plt.close(fig)


def test_cells_that_all_failed_are_said_so_not_as_a_sweep_of_one_mode():
    """A store of failed cells: the report said "Every workload was measured with one framework in one mode", and
    `plot scaling` "no workload was measured at two or more CPU thread counts"."""
    from dlperf.vocab import Status

    failed = replace(cell(threads=1), median_s=None, status=Status.FAILED)
    refused = replace(cell(threads=2, mode="bf16"), median_s=None, status=Status.UNSUPPORTED)
    assert charts.none_timed([failed, refused, replace(failed, key="k2")]) == (
        "no cell has a time to draw: 2 failed, 1 unsupported")  # fmt: skip
    assert charts.none_timed([failed, cell(threads=2)]) is None and charts.none_timed([]) is None
