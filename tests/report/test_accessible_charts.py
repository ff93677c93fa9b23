"""Charts whose series and parts are told apart without colour: in grey, in print, by a colour-blind reader. Each test
failed on the tree before the fix it guards (tab10's blue, green and red for fp32, fused and bf16, every series an
`o` on a solid line, a profile's parts unlabelled)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from conftest import make_cell
from dlperf.report import charts, figures
from dlperf.report.charts import Chart, Point, Series
from dlperf.report.figure_style import MARKERS, PALETTE, ink_on, luminance

SVG = "{http://www.w3.org/2000/svg}"
MODES = ("fp32", "fused", "bf16")  # tab10's blue, green and red: alike in grey, red and green deuteranopia's pair


def cell(mode: str, threads: int, median: float):
    return make_cell("fcn-r", "torch", "cpu", threads, mode, batch=64, median_s=median, n=30, processes=1, run_id=1,
                     q1_s=0.95 * median, q3_s=1.05 * median)  # fmt: skip


def drawn(chart: Chart):
    """The chart drawn as the report draws it; the figure closed by the caller."""
    plt = figures._pyplot()
    with plt.rc_context(figures.STYLE):
        fig, ax = plt.subplots(figsize=figures._size(chart), layout="constrained")
        figures.draw(ax, chart, figures.palette([chart]))
    return fig, ax


def shapes(ax) -> dict[str, set[str]]:
    """Each colour drawn with markers (outside the legend): the markers it is drawn with."""
    from matplotlib.colors import to_hex

    found: dict[str, set[str]] = {}
    for line in ax.lines:
        if line.get_marker() not in (None, "None", "", " ", "_"):  # "_": an error bar's cap
            found.setdefault(to_hex(line.get_color()), set()).add(line.get_marker())
    return found


def test_the_palette_is_okabe_and_itos_in_order():
    chart = charts.scaling([cell(m, t, 0.1 * t) for m in MODES for t in (1, 2)])[0]
    assert list(figures.palette([chart]).values()) == list(PALETTE[:3])
    assert luminance("#ffffff") == pytest.approx(1.0) and luminance("#000000") == 0.0


@pytest.mark.parametrize("log_y", [False, True])  # a chart of lines; and bars on a log axis, drawn as points
def test_each_series_has_its_own_marker_in_the_chart_and_in_its_legend(log_y):
    if log_y:
        series = [Series(m, [Point(c, 0.1 * (i + 1)) for c in ("cpu:1", "cpu:2")]) for i, m in enumerate(MODES)]
        chart = Chart("variants-x", "bars", "x: by mode", "", "seconds", series, categories=["cpu:1", "cpu:2"])
        chart.log_y = True
    else:
        chart = charts.scaling([cell(m, t, 0.1 * t * (i + 1)) for i, m in enumerate(MODES) for t in (1, 2)])[0]
    fig, ax = drawn(chart)
    try:
        by_colour = shapes(ax)
        assert [by_colour[c.lower()] for c in PALETTE[:3]] == [{m} for m in MARKERS[:3]]  # one shape a colour
        legend = {h.get_label(): h.get_marker() for h in ax.get_legend().legend_handles if h.get_label() in MODES}
        assert legend == dict(zip(MODES, MARKERS, strict=False))
    finally:
        figures._pyplot().close(fig)


def test_a_profiles_parts_carry_their_name_and_share_where_it_fits(tmp_path):
    names = ["tiny-fcn-r cpu:1 torch fp32 (409 µs)"]
    shares = {"matmul": 40.0, "elementwise": 14.0, "loss": 13.0, "optimizer": 30.0, "copy": 2.0, "host": 1.0}
    series = [Series(k, [Point(names[0], v)]) for k, v in shares.items()]
    chart = Chart("profile", "stacked", "Where the time goes", "% of the timed step", "", series, categories=names)
    figures.save([chart], tmp_path / "profile.svg")
    texts = {"".join(t.itertext()) for t in ET.parse(tmp_path / "profile.svg").getroot().iter(f"{SVG}text")}
    assert {"matmul 40%", "optimizer 30%"} <= texts  # a wide part named, a narrow one only in the legend
    assert not {t for t in texts if t.startswith(("copy ", "host ", "2%", "1%"))}
    figures.save([chart], tmp_path / "narrow.svg", width=3.5)
    texts = {"".join(t.itertext()) for t in ET.parse(tmp_path / "narrow.svg").getroot().iter(f"{SVG}text")}
    assert {"matmul 40%", "30%", "13%"} <= texts  # its share alone where its name does not fit
    assert not {t for t in texts if t.startswith(("optimizer ", "loss ", "copy ", "host ", "2%", "1%"))}


def test_a_parts_label_is_white_on_a_dark_part_and_dark_on_a_light_one():
    assert (ink_on("#1f77b4"), ink_on("#c7c7c7"), ink_on("#ff7f0e")) == ("white", "#1d2329", "#1d2329")


@pytest.mark.parametrize("fmt", ["svg", "pdf", "png"])
def test_a_saved_chart_is_titled_in_its_metadata_by_what_it_shows(tmp_path, fmt):
    """`dlperf plot -o x.svg` had no `<title>` (its dc:title "Matplotlib v3.11.2"); a PDF and a PNG no Title."""
    chart = charts.scaling([cell("fp32", t, 0.1 * t) for t in (1, 2)])[0]
    out = tmp_path / f"scaling.{fmt}"
    figures.save([chart], out, where="run 1 on testhost")
    title = "fcn-r: thread scaling (run 1 on testhost)"
    if fmt == "svg":
        assert ET.parse(out).getroot().find(f"{SVG}title").text == title  # the document's own, its first child
    elif fmt == "pdf":
        assert b"/Title (fcn-r: thread scaling \\(run 1 on testhost\\))" in out.read_bytes()  # ASCII: as it is
    else:
        from PIL import Image

        assert Image.open(out).text["Title"] == title


def test_a_predicted_series_is_dashed_in_the_legend_as_in_the_chart():
    """Each legend entry of a chart of lines was a new line with no style: the crossover's "T4, predicted", drawn
    dashed, was solid in its legend (its caption: "dashed: predicted")."""
    measured = Series("cpu", [Point(b, 0.01 * b) for b in (1, 2, 4)])
    predicted = Series("T4, predicted", [Point(b, 0.002 * b) for b in (1, 2, 4)], dashed=True)
    chart = Chart("crossover-x", "lines", "x: when a GPU pays", "batch", "seconds", [measured, predicted])
    fig, ax = drawn(chart)
    try:
        legend = {h.get_label(): h.get_linestyle() for h in ax.get_legend().legend_handles}
        assert legend == {"cpu": "-", "T4, predicted": "--"}
    finally:
        figures._pyplot().close(fig)


def test_a_ninth_to_a_seventeenth_series_have_colours_of_their_own_in_the_chart_and_its_legend():
    """Okabe and Ito's eight colours cycled: the ninth bar of a chart (bf16+compile) was fp32's blue, its legend patch
    too (tab10 then tab20 had given twenty colours)."""
    from matplotlib.colors import to_hex

    modes = [f"mode{i}" for i in range(17)]
    series = [Series(m, [Point(c, 0.1 * (i + 1)) for c in ("cpu:1", "cpu:2")]) for i, m in enumerate(modes)]
    chart = Chart("variants-x", "bars", "x: by mode", "", "seconds", series, categories=["cpu:1", "cpu:2"])
    colours = list(figures.palette([chart]).values())
    assert len(set(colours)) == 17 and not set(colours[8:]) & set(colours[:8])
    fig, ax = drawn(chart)
    try:
        patches = [to_hex(h.get_facecolor()) for h in ax.get_legend().legend_handles]
        assert len(set(patches)) == 17
    finally:
        figures._pyplot().close(fig)


def test_a_name_that_reads_as_an_id_is_drawn_and_hovered_as_typed():
    """Each chart's ids were prefixed over the whole SVG, text and hover texts too: a category `a id="patch_1"` was
    drawn `a id="c0-patch_1"`, its hover `url(#c0-patch_1)`."""
    import html as markup

    name, tip = 'a id="patch_1"', 'a id="patch_1" url(#patch_1) href="#patch_1"'
    chart = Chart("variants-x", "bars", "x: by mode", "", "seconds", [Series("fp32", [Point(name, 0.1, tip=tip)])],
                  categories=[name])  # fmt: skip
    text, tagged = figures.svg(chart, figures.palette([chart]), "c0")
    assert tagged == 1 and ' id="c0-patch_1"' in text  # matplotlib's own patch_1 still prefixed
    drawn_text = {markup.unescape(t) for t in re.findall(r"<text\b[^>]*>([^<]*)</text>", text)}
    assert name in drawn_text
    (said,) = re.findall(r'data-tip="([^"]*)"', text)
    assert markup.unescape(said) == tip and "c0-" not in said


def test_a_doubtful_points_legend_entry_has_its_shape_or_says_any_hollow_marker():
    """The legend's entry for a doubtful point was a hollow circle whatever the point's shape: a doubtful bf16 point
    was a hollow square beside it."""

    def entry(doubtful: set[str]):
        series = [Series(m, [Point(b, 0.01 * b * (i + 1), doubtful=m in doubtful and b == 2) for b in (1, 2, 4)])
                  for i, m in enumerate(("fp32", "bf16"))]  # fmt: skip
        chart = Chart("scaling-x", "lines", "x: thread scaling", "threads", "seconds", series, doubt="busy")
        fig, ax = drawn(chart)
        try:
            return [(h.get_marker(), h.get_label()) for h in ax.get_legend().legend_handles][-1]
        finally:
            figures._pyplot().close(fig)

    assert entry({"bf16"}) == (MARKERS[1], "? busy")  # bf16's square
    assert entry({"fp32", "bf16"}) == ("o", "hollow marker, ?: busy")  # a circle and a square: said, not drawn


def contrast_on_white(colour: str) -> float:
    return 1.05 / (luminance(colour) + 0.05)


@pytest.mark.parametrize("kind", ["lines", "bars"])
def test_every_question_mark_is_legible_on_white_and_the_first_five_series_colours_are_seen(kind):
    """The "?" beside a doubtful point or bar was in its series' colour: yellow 1.3:1 on white, orange and sky blue
    2.3:1 (text needs 4.5:1). And orange was a second series' colour, under WCAG 1.4.11's 3:1 for graphics."""
    from matplotlib.colors import to_hex

    modes = [f"mode{i}" for i in range(17)]
    xs = (1, 2) if kind == "lines" else ("cpu:1", "cpu:2")
    series = [
        Series(m, [Point(x, 0.1 * (i + 1), doubtful=n == 1) for n, x in enumerate(xs)]) for i, m in enumerate(modes)
    ]
    chart = Chart("variants-x", kind, "x: by mode", "", "seconds", series, doubt="busy",
                  categories=list(xs) if kind == "bars" else [])  # fmt: skip
    fig, ax = drawn(chart)
    try:
        marks = [to_hex(t.get_color()) for t in ax.texts if t.get_text() == "?"]
    finally:
        figures._pyplot().close(fig)
    assert len(marks) == 17 and min(map(contrast_on_white, marks)) >= 4.5
    assert min(contrast_on_white(c) for c in PALETTE[:5]) >= 3.0
