"""A cell whose counted FLOPs ran mostly in another dtype than its mode's precision says so under the table, with the
shares and why: a model built in bf16 runs its fp32 cell in bf16 (the column said fp32 and nothing else), and the
products autocast does not cast, or runs with it disabled, stay fp32 in a bf16 cell."""

import pytest

from conftest import make_cell, require
from dlperf.report import table


def notes_of(*cells):
    return [text for _, kind, text in table.cell_notes(list(cells)) if kind == "precision"]


def test_a_model_built_in_bf16_is_said_to_run_its_fp32_cell_so():
    [said] = notes_of(make_cell("mine", mode="fp32", flops_by_dtype={"bf16": 3_000_000}))
    assert said == (
        "an fp32 cell, but its products ran 100% in bf16 (by FLOPs), the model's own dtype (its weights or inputs "
        "are bf16): an fp32 cell runs the model as built"
    )


def test_products_left_in_fp32_under_autocast_are_said_with_their_shares():
    [said] = notes_of(make_cell("mine", mode="bf16+channels_last", flops_by_dtype={"fp32": 81, "bf16": 19}))
    assert said == (
        "a bf16 cell, but its products ran 81% in fp32, 19% in bf16 (by FLOPs), autocast left them so (operations "
        "it does not cast to bf16, or run with it disabled)"
    )


def test_a_model_of_a_dtype_autocast_does_not_cast_is_said_so_in_a_bf16_cell():
    [said] = notes_of(make_cell("mine", mode="bf16", flops_by_dtype={"fp64": 100}))
    assert said.endswith("ran 100% in fp64 (by FLOPs), the model's own dtype (its weights or inputs are fp64), which "
                         "autocast does not cast")  # fmt: skip


@pytest.mark.parametrize(
    "cell",
    [
        make_cell("fcn-r", mode="bf16", flops_by_dtype={"bf16": 60, "fp32": 40}),  # most in the mode's precision
        make_cell("fcn-r", mode="tf32", flops_by_dtype={"fp32": 100}),  # tf32 runs fp32 tensors
        make_cell("fcn-r", mode="compile", flops_by_dtype={"fp32": 100}),  # fp32 implied
        make_cell("fcn-r", mode="bf16", status="failed", flops_by_dtype={"fp32": 100}),
        make_cell("fcn-r", mode="bf16", flops_by_dtype={"fp32": 0}),  # nothing counted
        make_cell("fcn-r", mode="bf16"),  # no count
    ],
)
def test_no_note_where_the_products_ran_in_the_modes_precision_or_nothing_was_counted(cell):
    assert notes_of(cell) == []


def test_the_counter_sees_a_bf16_models_products_in_bf16_and_a_guarded_block_in_fp32():
    """What the note reads, from PyTorch's own counter as the worker counts a step: the dtype each product ran in."""
    torch = require("torch")
    from dlperf.frameworks.torch.instruments import DtypeFlopCounter

    x = torch.randn(8, 16)
    with DtypeFlopCounter() as counted:
        torch.nn.Linear(16, 4).to(torch.bfloat16)(x.to(torch.bfloat16)).sum().backward()
    assert set(counted.by_dtype) == {"bf16"}
    layer = torch.nn.Linear(16, 4)
    with DtypeFlopCounter() as counted, torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.autocast("cpu", enabled=False):
            guarded = layer(x)
        layer(x).sum().backward()
    assert set(counted.by_dtype) == {"fp32", "bf16"} and guarded.dtype == torch.float32
