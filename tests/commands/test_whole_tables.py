"""Tables read whole at 80 and 60 columns: rich shrank a table too wide by cutting its widest columns short, so
`dlperf predict --cost` at 80 columns showed each price as "$0.00…" and each GPU as "H100-SX…"; every table printed
through commands/common.py's console now keeps each figure on one line and each word whole, in parts where it must."""

from __future__ import annotations

import re

import pytest
from rich.console import Console, Group
from rich.table import Table

from conftest import dlperf
from dlperf.commands.common import console

HEAD = ("GPU", "mode", "step", "samples/s", "time", "cost", "$ per M samples", "$/GPU-hour", "memory")
ROWS = [
    ("H100-SXM5-80GB", "fp32", "1.62 ms", "9,847", "6.09 s", "$0.00640-$0.0208", "$0.107-$0.347", "$3.78-$12.29",
     "fits"),
    ("T4", "fp16", "2.08 ms", "7,710", "7.78 s", "$0.00128-$0.00175", "$0.0213-$0.0292", "$0.590-$0.810", "fits"),
]  # fmt: skip


def cost_table() -> Table:
    """The shape of `dlperf predict --cost`'s table (report/cost.py)."""
    table = Table(title="tiny-fcn-r at batch 16, one epoch: time and cost predicted on each GPU")
    for name in HEAD:
        table.add_column(name, justify="left" if name in ("GPU", "mode", "memory") else "right", no_wrap=name == "GPU")
    for row in ROWS:
        table.add_row(*row)
    return table


def printed(renderable, width: int) -> str:
    out = console(width)
    with out.capture() as captured:
        out.print(renderable)
    return captured.get()


def cells(text: str) -> list[str]:
    """Each cell of each table row, stripped (a part's rows too)."""
    return [c.strip() for line in text.splitlines() if line.startswith("│") for c in line.strip("│").split("│")]


@pytest.mark.parametrize("width", [80, 60])
def test_a_table_too_wide_prints_in_parts_each_figure_whole_and_the_key_columns_repeated(width):
    text = printed(cost_table(), width)
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= width
    found = cells(text)
    for row in ROWS:
        for value in row:
            assert value in found, (value, text)  # on one line, in a cell of its own
    parts = text.count("┏")
    assert parts >= 2 and found.count("H100-SXM5-80GB") == parts  # each part names the row
    assert "(continued)" in text


def test_the_old_layout_cut_these_figures():
    """What the test above guards against: rich's own layout at 80 columns."""
    plain = Console(width=80)
    with plain.capture() as captured:
        plain.print(cost_table())
    assert "…" in captured.get()


def test_a_table_that_fits_is_printed_as_rich_prints_it():
    table = Table(title="small")
    table.add_column("workload")
    table.add_column("cpu:1", justify="right")
    table.add_row("tiny-fcn-r", "236 µs n=2161")
    plain = Console(width=80)
    with plain.capture() as captured:
        plain.print(table)
    assert printed(table, 80) == captured.get()


def test_a_text_column_wraps_between_words_and_a_numeric_one_stays_on_one_line():
    table = Table()
    table.add_column("GPU")
    table.add_column("batch 16")
    table.add_column("largest batch", justify="right")
    table.add_row("A100-SXM4-80GB", "fits (0.06 GiB of 78.6) with some room to spare on this one", "1,048,576 or more")
    text = printed(table, 60)
    assert "…" not in text and "1,048,576 or more" in text and "A100-SXM4-80GB" in text
    assert text.count("┏") == 1  # wrapping the text column was enough
    words = " ".join(cells(text)).split()
    assert {"(0.06", "GiB", "78.6)"} <= set(words)


def test_tables_inside_a_group_are_whole_too():
    """compare prints its table in a Group between lines of text."""
    text = printed(Group("B / A", cost_table(), "summary"), 80)
    assert "…" not in text and "$0.00128-$0.00175" in cells(text) and text.rstrip().endswith("summary")


def test_a_column_wider_than_the_screen_is_printed_wider_rather_than_folded_or_cut():
    table = Table()
    table.add_column("key")
    table.add_column("figure", justify="right")
    table.add_row("a", "1234567890" * 5)
    text = printed(table, 30)
    assert "…" not in text and "1234567890" * 5 in cells(text)


@pytest.mark.parametrize("width", [50, 60, 70])
def test_a_long_word_in_a_text_column_folds_rather_than_widen_the_table(width):
    """A table whose workload was `examples/my_model.py:make` and mode `bf16+channels_last+compile` was printed 74
    columns wide at 50, 60 and 70 (a whole table wider than the screen for a word): a text column's word folds to
    the room its figures leave, the figures still whole."""
    table = Table(title="seconds per mini-batch")
    table.add_column("workload")
    table.add_column("mode")
    for threads in (1, 2, 4):
        table.add_column(f"cpu:{threads}", justify="right")
    for workload in ("examples/my_model.py:make", "fcn-r"):
        for mode in ("fp32", "bf16+channels_last+compile"):
            table.add_row(workload, mode, "0.200 s* n=10", "0.400 s n=10", "0.800 s n=10")
    text = printed(table, width)
    assert max(len(line) for line in text.splitlines()) <= width, text
    assert {"0.200 s* n=10", "0.400 s n=10", "0.800 s n=10"} <= set(cells(text)), text


def test_at_40_columns_each_price_and_gpu_name_is_whole():
    """`predict --cost` at 40 columns folded its parts' cells: "$0.00100-$0.0" over "0137", "H100-SXM5-80G" over "B"."""
    found = cells(printed(cost_table(), 40))
    assert {"H100-SXM5-80GB", "$0.00640-$0.0208", "$0.00128-$0.00175", "$3.78-$12.29"} <= set(found), found


def test_predict_cost_at_80_columns_prints_every_price_whole(tmp_path):
    said = dlperf("predict", "tiny-fcn-r", "--gpu", "H100-SXM5-80GB,T4", "--cost", cwd=tmp_path,
                  env={"COLUMNS": "80", "DLPERF_PRICES": ""})  # fmt: skip
    assert said.returncode == 0, said.stderr
    assert "…" not in said.stdout, said.stdout
    assert max(len(line) for line in said.stdout.splitlines()) <= 80
    assert re.search(r"│ +\$\d+\.\d+-\$\d+\.\d+ │", said.stdout)  # a price range, whole in its cell


def test_a_rich_without_the_private_measures_prints_the_table_as_rich_does(monkeypatch):
    """`Whole` reads rich's private column measures (rich 15); a rich without them prints the table as rich would,
    not a traceback in the middle of a command's output."""
    from dlperf.commands import whole

    def older_rich(*args):
        raise AttributeError("'Table' object has no attribute '_get_padding_width'")

    monkeypatch.setattr(whole, "_column_need", older_rich)
    table = Table("GPU", "step")
    table.add_row("H100-SXM5-80GB", "1.62 ms")
    text = printed(table, 80)
    assert "H100-SXM5-80GB" in text and "1.62 ms" in text


def compare_table(workloads: list[str]) -> Table:
    """The shape of `dlperf compare`'s table (report/compare.py): each workload at two columns and two modes, torch
    on every row."""
    table = Table(title="B / A")
    for name in ("workload", "framework", "column", "mode"):
        table.add_column(name)
    for name in ("A median", "B median", "B/A [95% CI]", "processes A/B", "p (Holm)", "verdict"):
        table.add_column(name, justify="right")
    for workload in workloads:
        for column in ("cpu:1", "cpu:2"):
            for mode in ("fp32", "bf16"):
                table.add_row(workload, "torch", column, mode, "275 µs", "271 µs", "0.987 [0.741, 1.314]", "2/2",
                              "1.000", "no significant change")  # fmt: skip
    return table


def test_a_key_column_the_same_on_every_row_goes_before_one_that_tells_rows_apart():
    """compare at 80 columns kept workload, framework and column beside each part but not the mode: torch was on
    every row, and two rows, fp32 and bf16, read 'tiny-fcn-s torch cpu:1' with different figures."""
    text = printed(compare_table(["tiny-fcn-s"]), 60)
    assert "(continued)" in text and "torch" not in text.split("(continued)")[1]
    # what it left out is said once: `table --best` at 40 columns lost its workload column, said nowhere
    assert text.rstrip().endswith("all rows: framework torch")
    for part in text.split("(continued)"):
        assert "cpu:2" in part and "bf16" in part  # each part tells its rows apart


def test_a_key_column_that_tells_rows_apart_is_never_dropped_however_narrow():
    """`predict --memory` at 40 columns dropped its verdict column from every part: "does not fit (needs 4.9 GiB of
    3.5 GiB)" was printed nowhere; `predict --cost` dropped the mode, two rows of each GPU reading alike."""
    table = Table(title="qa-emb: does batch 256 fit")
    for name in ("GPU", "mode", "batch 256"):
        table.add_column(name)
    table.add_column("largest batch", justify="right")
    for gpu, verdict in (("GTX 980", "does not fit (needs 4.9 GiB of 3.5 GiB)"), ("T4", "fits (4.95 GiB of 14.1 GiB)")):
        for mode in ("fp32", "bf16"):
            table.add_row(gpu, mode, verdict, "1,048,576 or more")
    text = printed(table, 40)
    assert "does not" in text and "(needs" in text and text.count("bf16") == text.count("fp32") >= 2, text
    assert text.count("1,048,576 or more") == 4  # the figures whole: the verdict goes to a part of its own


@pytest.mark.parametrize("width", [36, 40, 50, 60])
def test_every_part_tells_its_rows_apart(width):
    """Moving the last key column, the mode, into a part of its own left the parts after it reading "tiny-fcn-s |
    cpu:1" twice with different figures: a key column is moved only where the others still tell every row apart."""
    from dlperf.commands.whole import _column_groups

    table = compare_table(["tiny-fcn-s", "tiny-lstm"])
    needs = [12, 9, 7, 6, 10, 10, 22, 15, 10, 23]
    rows = len(table.columns[0]._cells)
    for group in _column_groups(table, needs, width):
        keys = [i for i in group if i < 4]
        told = {tuple(str(table.columns[i]._cells[r]) for i in keys) for r in range(rows)}
        assert len(told) == rows, (width, group)


def test_the_all_rows_line_says_a_cell_as_printed_not_its_markup():
    """A workload named `net[a-rather-long-name]`, escaped for rich as the views write it, was said "all rows:
    workload net\\[a-rather-long-name]"."""
    from rich.markup import escape

    table = Table(title="seconds per mini-batch")
    for name in ("workload", "mode"):
        table.add_column(name)
    for threads in (1, 2):
        table.add_column(f"cpu:{threads}", justify="right")
    for mode in ("fp32", "bf16"):
        table.add_row(escape("net[a-rather-long-name]"), mode, "0.200 s* n=10", "0.400 s n=10")
    said = " ".join(printed(table, 34).split("all rows:")[1].split())
    assert said.startswith("workload net[a-rather-long-name]"), said
