"""`dlperf export`: the records' CSV is safe to open in a spreadsheet."""

import csv
import io

import pytest

from conftest import make_cell
from dlperf.report import export


def test_csv_text_that_starts_a_formula_gets_a_quote_and_numbers_stay_numbers():
    """OWASP's CSV injection: `=`, `+`, `-`, `@`, tab and CR start a formula; a leading `'` makes it text."""
    error = "@SUM(1+1)*cmd|' /C calc'!A0"
    hostile = make_cell('=HYPERLINK("http://evil.example","click")', status="failed", error=error,
                        warnings=["-2+3 looks like a formula"], median_s=None, n=0)  # fmt: skip
    fine = make_cell("fcn-r", median_s=0.25, n=12, warnings=[], steal_fraction=-0.0)
    [bad, good] = csv.DictReader(io.StringIO(export.render([export.record(hostile), export.record(fine)], "csv")))
    assert bad["workload"] == '\'=HYPERLINK("http://evil.example","click")'
    assert bad["error"] == "'@SUM(1+1)*cmd|' /C calc'!A0"
    assert bad["warnings"] == "'-2+3 looks like a formula"
    assert (good["workload"], good["median_s"], good["n"], good["steal_fraction"]) == ("fcn-r", "0.25", "12", "-0.0")


@pytest.mark.parametrize(
    ("value", "written"),
    [("=1+1", "'=1+1"), ("+1+1", "'+1+1"), ("-x", "'-x"), ("@x", "'@x"), ("\tx", "'\tx"), ("\rx", "'\rx"),
     ("-1.5", "-1.5"), ("+3e-2", "+3e-2"), (-2, -2), (-0.5, -0.5), ("fcn-r", "fcn-r"), (None, None)],
)  # fmt: skip
def test_spreadsheet_safe(value, written):
    assert export.spreadsheet_safe(value) == written


def test_a_carriage_return_in_a_name_stays_inside_its_field():
    # with "\n" line ends Python 3.11 left a bare "\r" unquoted, and a reader split the row there
    cell = make_cell("fcn\rr", median_s=0.25, n=12, warnings=[])
    rows = list(csv.DictReader(io.StringIO(export.render([export.record(cell)] * 2, "csv"), newline="")))
    assert [r["workload"] for r in rows] == ["fcn\rr", "fcn\rr"]
