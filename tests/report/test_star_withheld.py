"""The table's star claims a fastest thread count only where the comparison can tell one: a docs helper saw a row
starred though a compared cell's warm-up had not settled, its steps spread by half their median."""

from conftest import make_cell
from dlperf.report import table

UNSETTLED = "warm-up did not settle within --max-warmup steps or --max-time"


def cell(threads, median, low=None, high=None, warnings=()):
    return make_cell("fcn-s", threads=threads, batch=64, median_s=median, iqr_s=0.01, n=20, ci_low_s=low,
                     ci_high_s=high, warnings=list(warnings))  # fmt: skip


def test_a_warm_up_that_did_not_settle_withholds_the_star_and_the_note_says_so():
    view = table.build(1, [cell(1, 1.0), cell(2, 0.6, warnings=[UNSETTLED, "noisy: IQR is 50% of the median"])])
    assert view.rows[0].best_cpu_column() is None
    assert table.row_values(view, view.rows[0])[3:] == ["1.000 s n=20", "0.600 s? n=20"]  # marked, as the paper view
    assert "no fastest thread count starred in fcn-s torch: a compared cell was disturbed (above)" in view.notes
    assert any(n.startswith("fcn-s torch cpu:2: warm-up did not settle") for n in view.notes)
    assert table.BEST_LEGEND not in table.legend(view)[0]


def test_overlapping_intervals_are_a_tie_and_star_nothing():
    tied = table.build(1, [cell(1, 1.0, 0.95, 1.05), cell(2, 0.98, 0.90, 1.10), cell(4, 1.5, 1.4, 1.6)])
    row = tied.rows[0]
    assert row.best_cpu_column() is None and row.tied() == ["cpu:2", "cpu:1"]
    assert tied.notes == [
        "no fastest thread count starred in fcn-s torch (cpu:2, cpu:1): a tie, their 95% intervals of the median "
        "overlap, so none is told apart as the fastest"
    ]
    apart = table.build(1, [cell(1, 1.0, 0.95, 1.05), cell(2, 0.8, 0.75, 0.85)])
    assert apart.rows[0].best_cpu_column() == "cpu:2" and not apart.notes and apart.rows[0].tied() == []


def test_cells_without_an_interval_are_judged_on_their_medians():
    view = table.build(1, [cell(1, 1.0), cell(2, 0.6)])  # an older store's cells: no interval stored
    assert view.rows[0].best_cpu_column() == "cpu:2" and not view.notes
    equal = table.build(1, [cell(1, 0.6), cell(2, 0.6)])
    assert equal.rows[0].best_cpu_column() is None and "a tie" in equal.notes[0]


def test_disturbed_and_tied_rows_are_one_note_each():
    cells = [cell(1, 1.0, 0.9, 1.1), cell(2, 0.99, 0.9, 1.1)]
    busy = ["other processes used 48% of the CPUs while this cell was timed"]
    cells += [make_cell("lstm", threads=t, batch=64, median_s=m, n=20, warnings=w)
              for t, m, w in ((1, 1.0, []), (2, 0.5, busy))]  # fmt: skip
    notes = table.build(1, cells).notes
    assert [n for n in notes if n.startswith("no fastest")] == [
        "no fastest thread count starred in lstm torch: a compared cell was disturbed (above)",
        "no fastest thread count starred in fcn-s torch (cpu:2, cpu:1): a tie, their 95% intervals of the median "
        "overlap, so none is told apart as the fastest",
    ]


def test_the_fastest_framework_line_says_a_compared_cell_whose_warm_up_did_not_settle_was_disturbed():
    cells = [make_cell("fcn-s", framework=fw, batch=64, median_s=m, n=20, key=fw, warnings=w)
             for fw, m, w in (("torch", 0.5, []), ("jax", 0.4, [UNSETTLED]))]  # fmt: skip
    _, line = table.build(1, cells).fastest
    assert line.endswith("as fast as torch, a compared cell disturbed")


def test_the_report_says_why_a_row_stars_nothing_as_the_table_does():
    """`dlperf table` said 'no fastest thread count starred in fcn-r torch (cpu:2, cpu:1): a tie, ...'; the report's
    Table-7 view showed the row unstarred and said nothing of why."""
    from types import SimpleNamespace

    from dlperf.report import html

    cells = [cell(1, 1.0, 0.95, 1.05), cell(2, 0.98, 0.90, 1.10)]
    data = SimpleNamespace(runs=[SimpleNamespace(id=1)], cells=cells, samples={}, sources={}, notes=[])
    said = html._table7(data)
    assert "no fastest thread count starred in fcn-s torch (cpu:2, cpu:1): a tie" in said


def test_a_cell_whose_load_was_not_read_is_marked_and_withholds_the_star():
    """A cell timed for 0.25 s on 2 CPUs, too briefly for the CPUs' busy counters, had no share of other processes'
    load and read as quiet beside a loop that held a CPU: `418 µs*`. Not read is not quiet: `?`, no star, and one
    note naming each such cell with its window."""
    unread = ("other processes' load not read: its warm-up and timed steps took 0.26 s, under the 0.30 s the CPUs' "
              "busy counters need here: a --min-time of 0.3 s or more reads it")  # fmt: skip
    view = table.build(1, [cell(1, 0.000418, warnings=[unread]), cell(2, 0.000527, warnings=[unread])])
    assert view.rows[0].best_cpu_column() is None
    assert table.row_values(view, view.rows[0])[3:] == ["418 µs? n=20", "527 µs? n=20"]
    assert "no fastest thread count starred in fcn-s torch: a compared cell was disturbed (above)" in view.notes
    [said] = [n for n in view.notes if "load not read" in n]
    assert said.startswith("other processes' load not read: these cells' warm-up and timed steps were too short")
    assert said.endswith("fcn-s torch cpu:1 (0.26 s), fcn-s torch cpu:2 (0.26 s)")
