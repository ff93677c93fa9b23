"""Figures not to rely on are marked wherever they are drawn or compared, by the judgement the table makes.

A user's report set `FCN-R | 0.877 (jax cpu:1) | 0.252 (CNTK, ...) | 0.29x` against the paper from a cell of 4 steps
timed while other processes used 74% of the CPUs, while the table above it starred no thread count because "a compared
cell was disturbed"; and `plot scaling` drew one-step cells as precise points with no error bar, where the table marks
them `?`."""

import re
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from conftest import make_cell
from dlperf.report import charts, figures, paper, table
from dlperf.store.records import LossCheckRecord
from report.pictures import SVG, svg_axes

BUSY = "other processes used 74% of the CPUs while this cell was timed"
FEW = "few samples: the median of 4 timed steps (fewer than 6: raise --max-time or --min-steps for a figure to rely on)"


def cell(framework="torch", threads=1, median=1.0, n=30, warnings=(), mode="fp32", **fields):
    """A paper cell (FCN-R at its batch); `warnings` as runner/collect.py stores them."""
    return make_cell("fcn-r", framework, "cpu", threads, mode, batch=1024, median_s=median, n=n, processes=1,
                     q1_s=0.95 * median, q3_s=1.05 * median, warnings=list(warnings),
                     workload_spec={"batch": 1024, "paper": "FCN-R"}, **fields)  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------------
# Against the paper


def test_the_paper_compares_the_fastest_reliable_cell_and_names_the_faster_disturbed_one():
    disturbed = cell("jax", median=0.5, n=4, warnings=[FEW, BUSY])
    reliable = cell("torch", threads=2, median=0.8)
    [row], notes = paper.compare([disturbed, reliable, cell("torch", median=1.2)])
    assert row.ours_cpu is reliable and row.passed_over == {"cpu": disturbed}
    assert row.ratio(row.ours_cpu, row.paper_cpu) == pytest.approx(0.252 / 0.8)
    values = paper.values(row)
    assert values[2] == "0.800 s (torch cpu:2)" and "?" not in "".join(values)
    assert notes == ["FCN-R: jax cpu:1 was faster (0.500 s) but few samples n=4, other processes used 74%: compared "
                     "is torch cpu:2, the fastest reliable CPU cell"]  # fmt: skip
    assert paper.legend([row]) == paper.legend([])  # nothing marked, nothing to explain


def test_a_row_with_no_reliable_cell_is_marked_with_why_and_the_tables_reason():
    """The star's judgement (`charts.disturbances`), not one of the paper's own: where the table stars no thread count,
    the paper's row says its figure is of a disturbed cell."""
    cells = [
        cell("jax", median=0.877, n=4, warnings=[FEW, BUSY]),
        cell("torch", threads=2, median=1.9, warnings=[BUSY]),
    ]
    [row], notes = paper.compare(cells)
    assert [r.best_cpu_column() for r in table.build(1, cells).rows] == [None, None]  # the table stars none either
    assert row.ours_cpu is cells[0] and row.passed_over == {}
    assert paper.values(row)[2:5] == ["0.877 s? (jax cpu:1)", "0.252 s (CNTK, server CPU, 16 threads)", "0.29x?"]
    assert paper.values(row)[6] == "0.018x?"  # against the paper's GPU (0.016 s): the same mark; 0.02x had one figure
    assert notes == ["FCN-R: best CPU jax cpu:1 compared though few samples n=4, other processes used 74% (?): no "
                     "reliable CPU cell of it was measured"]  # fmt: skip
    assert paper.LEGEND in paper.legend([row]) and "disturbed" in paper.LEGEND


def test_a_gpu_cell_passed_over_is_named_in_its_own_unit():
    fast = make_cell("fcn-r", "torch", "cuda:0", 1, "fp32", batch=1024, median_s=0.012, n=4, warnings=[FEW],
                     workload_spec={"batch": 1024, "paper": "FCN-R"})  # fmt: skip
    steady = replace(fast, key="b", framework="jax", median_s=0.02, n=40, warnings=[])
    [row], [note] = paper.compare([fast, steady])
    assert row.ours_gpu is steady and note.startswith("FCN-R: torch cuda:0 was faster (12.0 ms) but few samples n=4")
    assert paper.values(row)[7] == "20.0 ms (jax cuda:0)"


def test_a_cell_whose_loss_was_not_finite_is_no_reliable_figure():
    """The table's star leaves out a step that does not train, however fast; so does the paper's best cell."""
    diverged = cell("jax", median=0.3, loss_finite=False)
    [row], notes = paper.compare([diverged, cell("torch", median=0.9)])
    assert row.ours_cpu.framework == "torch" and row.passed_over == {"cpu": diverged}
    assert "jax cpu:1 was faster (0.300 s) but loss not finite" in notes[0]


def test_the_report_and_plot_paper_mark_the_disturbed_cell():
    """`report`'s section and `plot paper`'s chart: the row marked, the legend and notes under the table, the bar
    hatched with a "?" and the legend saying what it means."""
    from dlperf.report.html import _paper

    rows, notes = paper.compare([cell("jax", median=0.877, n=4, warnings=[FEW, BUSY])])
    section = _paper(rows, notes, "")
    assert "0.877 s? (jax cpu:1)" in section and "0.29x?" in section and "compared though few samples n=4" in section
    chart = paper.chart(rows)
    ours = chart.series[0].points[0]
    assert ours.doubtful and "? few samples n=4, other processes used 74%" in ours.tip
    assert not any(p.doubtful for s in chart.series[1:] for p in s.points)  # the paper's own figures
    assert chart.doubt == paper.DISTURBED and f"hollow, with ?: {paper.DISTURBED}" in chart.caption  # a dot: log y


# ----------------------------------------------------------------------------------------------------------------------
# Charts: a median of few samples


def test_scaling_and_variants_mark_the_cells_the_table_marks_with_a_question_mark():
    one_step = cell(threads=2, median=0.6, n=1, warnings=[FEW])
    cells = [cell(threads=1), one_step, cell("jax", threads=1, median=0.9), cell("jax", threads=2, median=0.5)]
    view = table.build(1, cells)
    marked = {(r.framework, c) for r in view.rows for c in r.cells if "?" in table.cell_text(r, c)}
    [scaling] = charts.scaling(cells)
    [variants] = charts.variants(cells)
    for chart in (scaling, variants):
        drawn = {(s.label.split()[0], f"cpu:{p.x}" if chart.kind == "lines" else p.x)
                 for s in chart.series if not s.ideal for p in s.points if p.doubtful}  # fmt: skip
        assert drawn == marked == {("torch", "cpu:2")}
        assert chart.doubt == "fewer than 6 samples"
    assert scaling.caption.endswith("; hollow, with ?: fewer than 6 samples")
    assert variants.caption.endswith("; hatched, with ?: fewer than 6 samples")


def test_a_cell_timed_while_other_processes_used_the_cpus_is_marked_as_the_table_stars_none():
    """A busy run's plot files drew its cells as precise as a quiet run's, with nothing said (a 2-thread cell 10x its
    1-thread one while other processes used 68% of the CPUs), where the table starred no thread count for it and the
    paper's row marks such a cell: each chart marks it, its tip says why, its legend that it was disturbed."""
    busy = cell(threads=2, median=0.6, warnings=[BUSY])
    cells = [cell(threads=1), busy, cell("jax", threads=1, median=0.9), cell("jax", threads=2, median=0.5)]
    assert [r.best_cpu_column() for r in table.build(1, cells).rows] == [None, "cpu:2"]
    [scaling] = charts.scaling(cells)
    [variants] = charts.variants(cells)
    for chart in (scaling, variants):
        marked = [p for s in chart.series if not s.ideal for p in s.points if p.doubtful]
        assert len(marked) == 1 and marked[0].tip.endswith(f"? {BUSY}")
        assert chart.doubt == charts.DISTURBED_CELL and chart.caption.endswith(f"with ?: {charts.DISTURBED_CELL}")
    drawn = marks(figures.svg(variants, figures.palette([variants]), "c0")[0])
    assert (drawn["questions"], drawn["hatched"]) == (1, 1) and f"? {charts.DISTURBED_CELL}" in drawn["legend"]


def test_charts_of_enough_samples_say_nothing_of_doubt():
    [chart] = charts.scaling([cell(threads=1), cell(threads=2, median=0.5)])
    assert chart.doubt == "" and "?" not in chart.caption
    assert not any(p.doubtful for p in chart.points)


def marks(svg_text: str) -> dict:
    """What an SVG draws for doubt, outside its legend (a report's ids prefixed with its chart's, `c0-`): the "?"
    texts, the hollow markers (filled white), the hatched bars; and the legend's texts."""
    root = ET.fromstring(svg_text)
    legend = {id(e) for g in root.iter(f"{SVG}g") if re.match(r"(c\d+-)?legend_", g.get("id") or "") for e in g.iter()}
    outside = [e for e in root.iter() if id(e) not in legend]
    texts = ["".join(t.itertext()).strip() for t in outside if t.tag == f"{SVG}text"]
    styles = [e.get("style") or "" for e in outside if e.tag in (f"{SVG}use", f"{SVG}path")]
    return {
        "questions": texts.count("?"),
        "hollow": sum("fill: #ffffff" in s and re.search(r"stroke: #(?!ffffff)", s) is not None for s in styles),
        "hatched": sum(re.search(r"url\(#(c\d+-)?h", s) is not None for s in styles),  # a report's ids prefixed
        "legend": ["".join(t.itertext()) for e in root.iter() if id(e) in legend for t in e.iter(f"{SVG}text")],
    }


def test_the_reports_charts_draw_a_few_samples_point_hollow_with_a_question_mark():
    few = cell(threads=2, median=0.6, n=1)
    [lines] = charts.scaling([cell(threads=1), few])
    drawn = marks(figures.svg(lines, figures.palette([lines]), "c0")[0])
    assert (drawn["questions"], drawn["hollow"]) == (1, 1)
    assert "? fewer than 6 samples" in drawn["legend"]
    [bars] = charts.variants([cell(threads=1), replace(few, framework="jax", threads=1)])
    drawn = marks(figures.svg(bars, figures.palette([bars]), "c1")[0])
    assert (drawn["questions"], drawn["hatched"]) == (1, 1)
    assert "? fewer than 6 samples" in drawn["legend"]


def test_a_chart_without_doubt_draws_no_mark():
    [chart] = charts.scaling([cell(threads=1), cell(threads=2, median=0.5)])
    drawn = marks(figures.svg(chart, figures.palette([chart]), "c0")[0])
    assert (drawn["questions"], drawn["hollow"], drawn["hatched"]) == (0, 0, 0)
    assert not any("?" in t for t in drawn["legend"])


def test_plot_files_mark_them_too(tmp_path):
    """`dlperf plot` saves through `figures.save`: the same marks in its SVG (and its PNG and PDF)."""
    [chart] = charts.scaling([cell(threads=1, n=1), cell(threads=2, median=0.5)])
    out = tmp_path / "scaling.svg"
    figures.save([chart], out)
    [axes] = svg_axes(out)
    assert axes["texts"].count("?") == 1 and "? fewer than 6 samples" in axes["texts"]
    assert marks(out.read_text())["hollow"] == 1


def test_a_step_that_did_not_train_is_marked_in_every_chart_as_the_table_marks_it():
    """A model whose loss was NaN (the table's `!`, "timed, but not training") was drawn as solid bars and points, as
    sure as any, the legend silent; one disturbed beside it says both."""
    nan = cell(threads=2, median=0.6, loss_finite=False)
    cells = [cell(threads=1), nan, cell("jax", threads=1, median=0.9), cell("jax", threads=2, median=0.5)]
    view = table.build(1, cells)
    untrained = [(r.framework, c) for r in view.rows for c in r.cells if "!" in table.cell_text(r, c)]
    assert untrained == [("torch", "cpu:2")]
    [scaling] = charts.scaling(cells)
    [variants] = charts.variants(cells)
    for chart in (scaling, variants):
        [drawn] = [p for s in chart.series if not s.ideal for p in s.points if p.doubtful]
        assert drawn.y == 0.6 and drawn.tip.endswith(f"! {charts.NOT_TRAINING.removeprefix('a ')}")
        assert chart.doubt == charts.NOT_TRAINING and chart.caption.endswith(f"with ?: {charts.NOT_TRAINING}")
    svg = marks(figures.svg(variants, figures.palette([variants]), "c0")[0])
    assert (svg["questions"], svg["hatched"]) == (1, 1) and f"? {charts.NOT_TRAINING}" in svg["legend"]
    failed_check = replace(nan, loss_finite=None, loss_check=LossCheckRecord(False, "the loss rose"))
    [chart] = charts.variants([*cells[:1], failed_check, *cells[2:]])
    assert chart.doubt == charts.NOT_TRAINING
    busy = cell("jax", threads=2, median=0.5, warnings=[BUSY])
    [chart] = charts.variants([*cells[:3], busy])
    assert chart.doubt == f"{charts.DISTURBED_CELL}, or {charts.NOT_TRAINING}"
