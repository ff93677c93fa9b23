"""`dlperf compare`'s B/A is the ratio of the processes' geometric means (4f8e4b2), its "A median" and "B median"
the cells' medians of process medians: where the two read visibly apart (A 288 µs, B 2.52 ms, B/A 8.221), one line
under the table says which the ratio is; where they agree (one process a side), no line."""

import json

import pytest

from dlperf.cli import main
from dlperf.report import compare as cmp
from report.runs import at_levels, make_db

SPLIT = {  # B's processes in two groups: its median at the slow one, the mean of the logs between them
    "a": {"fcn-r": at_levels(1, [0.100, 0.101, 0.099])},
    "b": {"fcn-r": at_levels(2, [0.100, 0.150, 0.151])},
}
ONE_EACH = {"a": {"fcn-r": at_levels(3, [0.100])}, "b": {"fcn-r": at_levels(4, [0.150])}}


def compared(tmp_path, capsys, runs, *flags: str) -> str:
    db = tmp_path / "d.db"
    make_db(db, runs["a"], runs["b"])
    main(["compare", "1", "2", "--db", str(db), *flags])
    return capsys.readouterr().out


@pytest.mark.parametrize("form", ["text", "md"])
def test_a_ratio_unlike_the_medians_quotient_is_said_to_be_the_geometric_means(tmp_path, capsys, form):
    out = compared(tmp_path, capsys, SPLIT, "--format", form)
    [line] = [line for line in out.splitlines() if line.removeprefix("- ").startswith("B/A: ")]  # md: a bullet
    assert line.removeprefix("- ") == cmp.RATIO_LEGEND and "geometric means" in line and "B median / A median" in line
    lines = out.splitlines()
    assert lines.index(line) < next(i for i, t in enumerate(lines) if "measured in both runs:" in t)  # first


def test_the_json_ratio_is_the_one_the_line_explains(tmp_path, capsys):
    """The JSON says it too: `ratio_of` beside the cells (the text and md tables have their line; a script had no
    word of which ratio `ratio` is)."""
    out = json.loads(compared(tmp_path, capsys, SPLIT, "--format", "json"))
    assert out["ratio_of"] == cmp.RATIO_OF and "geometric means of the per-process medians" in out["ratio_of"]
    assert "b_median_s / a_median_s" in out["ratio_of"]  # the fields it may differ from, by their JSON names
    cell = out["cells"][0]
    assert cell["b_median_s"] / cell["a_median_s"] == pytest.approx(1.5, rel=0.02)
    assert cell["ratio"] == pytest.approx((1.5 * 1.51) ** (1 / 3), rel=0.02)  # visibly not 1.5


@pytest.mark.parametrize("form", ["text", "md"])
def test_no_line_where_the_ratio_is_the_medians_quotient(tmp_path, capsys, form):
    out = compared(tmp_path, capsys, ONE_EACH, "--format", form)
    assert "B median" in out and "B/A: " not in out and "geometric" not in out


def test_an_untested_ratio_is_the_medians_quotient_and_the_gate_names_its_slowdown(tmp_path, capsys):
    """Without a test there is no interval for the geometric means' ratio to lie in: A's processes at 1, 1 and 10 ms
    against B's one at 1.5 ms read B/A 0.693 (the geometric means) beside medians of 1.01 and 1.50 ms, and the
    gate's "untested, yet B/A above 1.05" note missed a cell 49% slower."""
    runs = {"a": {"fcn-r": at_levels(5, [0.001, 0.001, 0.010])}, "b": {"fcn-r": at_levels(6, [0.0015])}}
    db = tmp_path / "d.db"
    make_db(db, runs["a"], runs["b"])
    assert main(["compare", "1", "2", "--db", str(db), "--format", "json"]) == 2  # nothing tested: no verdict
    out = json.loads(capsys.readouterr().out)
    [cell] = out["cells"]
    assert cell["verdict"] == "too little data" and cell["ci_low"] is None
    assert cell["ratio"] == pytest.approx(cell["b_median_s"] / cell["a_median_s"]) and cell["ratio"] > 1.4
    assert main(["compare", "1", "2", "--db", str(db)]) == 2
    text = capsys.readouterr().out
    assert "note: untested, yet B/A above 1.05: fcn-r torch cpu:1 fp32 x1.5" in text and "B/A: " not in text
