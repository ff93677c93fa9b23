"""A table note names a cell over real data by the mode the table's row shows (helper 124: the note said
"tiny-gpt torch data:w0 cpu:1" beside a row whose mode read "fp32 · data:w0")."""

from dataclasses import replace

from conftest import make_cell
from dlperf.report import table


def over_data(loader: str, **fields):
    return replace(make_cell("tiny-gpt", **fields), loader=loader)


def test_a_loader_cell_is_named_with_the_tables_mode_text():
    cell = over_data("w0", warnings=["few samples: the median of 1 timed step"])
    [(label, kind, _)] = table.cell_notes([cell])
    assert table.mode_label(cell.mode, cell.loader) == "fp32 · data:w0"
    assert label == "tiny-gpt torch fp32 · data:w0 cpu:1" and kind == "noise"
    assert table.cell_label(over_data("w2", mode="bf16")) == "tiny-gpt torch bf16 · data:w2 cpu:1"


def test_a_synthetic_cell_keeps_its_short_name():
    assert table.cell_label(make_cell("tiny-gpt")) == "tiny-gpt torch cpu:1"
    assert table.cell_label(make_cell("tiny-gpt", mode="bf16")) == "tiny-gpt torch bf16 cpu:1"
