"""The scaling view of every strategy (`report/ddp.py`): each multi-process cell against its own strategy's
one-process cell (else DDP's), against DDP on the same processes, with its memory per rank and its bubble."""

from __future__ import annotations

import pytest

from conftest import make_cell
from dlperf.report import ddp
from dlperf.store.records import CommRecord


def cell(parallel, nproc, median, micro=0, **comm):
    return make_cell("fcn-r", nproc=nproc, scaling="strong", parallel=parallel, microbatches=micro, median_s=median,
                     comm=CommRecord(**comm))  # fmt: skip


def test_each_strategy_against_its_own_one_process_cell_and_against_ddp():
    cells = [
        cell("ddp", 1, 1.0),
        cell("ddp", 2, 0.6, param_bytes_rank=[400, 400]),
        cell("fsdp", 1, 1.1),
        cell("fsdp", 2, 0.8, param_bytes_rank=[200, 200], peak_bytes_rank=[900, 1000]),
        cell("gpipe", 2, 0.75, micro=4, bubble=0.3, bubble_theory=0.2, param_bytes_rank=[100, 300]),
    ]
    rows = {r.column: r for r in ddp.build(cells)}
    assert list(rows) == ["ddp:1x1", "fsdp:1x1", "ddp:2x1", "fsdp:2x1", "gpipe.m4:2x1"]  # per process count
    fsdp = rows["fsdp:2x1"]
    assert fsdp.t1_column == "fsdp:1x1" and fsdp.efficiency == pytest.approx(1.1 / (2 * 0.8))
    assert fsdp.vs_ddp == pytest.approx(0.6 / 0.8) and fsdp.param_bytes == 200 and fsdp.peak_bytes == 1000
    pipe = rows["gpipe.m4:2x1"]
    assert pipe.t1_column == "ddp:1x1"  # no one-process pipeline cell: DDP's
    assert pipe.param_bytes == 300  # the largest stage
    assert rows["ddp:2x1"].vs_ddp is None
    text = dict(zip(ddp.HEAD, ddp.values(pipe), strict=True))
    assert text["bubble (theory)"] == "30% (20%)" and text["vs DDP"] == "0.80x"
    [fsdp_note] = [n for n in ddp.notes(list(rows.values())) if n.startswith("fcn-r fp32 fsdp:2x1")]
    assert "0.75x the speed of DDP" in fsdp_note and "parameters 200 B per rank" in fsdp_note
    [pipe_note] = [n for n in ddp.notes(list(rows.values())) if "gpipe" in n]
    assert "pipeline bubble 30% (20%)" in pipe_note


def test_a_strategy_without_any_one_process_cell_has_no_efficiency_but_is_shown():
    [row] = ddp.build([cell("tp", 2, 0.5)])
    assert row.t1_column is None and row.efficiency is None and row.vs_ddp is None
    assert "no 1-process cell" in ddp.notes([row])[0]


def test_export_carries_the_strategy_and_its_figures():
    from dlperf.report import export

    rec = export.record(cell("gpipe", 2, 0.75, micro=4, bubble=0.3, bubble_theory=0.2, param_bytes_rank=[100, 300]))
    assert (rec["parallel"], rec["microbatches"], rec["bubble"], rec["param_bytes_rank"]) == (
        "gpipe",
        4,
        0.3,
        [100, 300],
    )
    plain = export.record(make_cell("fcn-r", median_s=1.0))
    assert plain["parallel"] is None and plain["microbatches"] is None and plain["bubble"] is None
