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
    assert "pipeline bubble 30% of the step (the bubble alone, in theory: 20%)" in pipe_note


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


def test_the_exposed_share_names_the_step_it_is_of_not_the_median():
    """The exposed communication is the step minus the compute alone, both timed apart after the timed steps
    (`frameworks/common/comm.py`); its share is of that step, which can be far from the cell's median: a shrunk run
    printed "exposed communication 4.47 ms (88%) of the step" for a 1.47 ms median step."""
    ddp_cell = cell("ddp", 2, 1.47e-3, gradient_bytes=107496, allreduce_s=4.2e-4, busbw_bytes_s=2.6e8,
                    local_step_s=0.61e-3, step_s=5.08e-3, exposed_comm_s=4.47e-3, comm_share=4.47 / 5.08,
                    bound="communication")  # fmt: skip
    fsdp_cell = cell("fsdp", 2, 29.3e-3, local_step_s=1e-3, step_s=33e-3, exposed_comm_s=32e-3, comm_share=32 / 33)
    rows = {r.column: r for r in ddp.build([cell("ddp", 1, 0.4e-3), ddp_cell, fsdp_cell])}
    column = dict(zip(ddp.HEAD, ddp.values(rows["ddp:2x1"]), strict=True))
    assert column["step"] == "1.47 ms" and column["exposed comm"] == "4.47 ms of 5.08 ms (88%)"
    notes = ddp.notes(list(rows.values()))
    [ddp_note] = [n for n in notes if "ddp:2x1" in n]
    assert "exposed communication 4.47 ms (88%) of a 5.08 ms step timed apart, beside its compute alone (610 µs)" in (
        ddp_note
    )
    assert "of the step" not in ddp_note
    [fsdp_note] = [n for n in notes if "fsdp:2x1" in n]
    assert "exposed communication 32.0 ms (97%) of a 33.0 ms step timed apart" in fsdp_note


def test_one_process_communicates_nothing_and_its_difference_is_the_strategys_own_cost():
    """A one-process DDP cell's report read "exposed comm 397 µs of 1.19 ms (33%)" with no process to talk to: the
    step beside its compute alone is DDP's own buckets and hooks."""
    one = cell("ddp", 1, 1.2e-3, local_step_s=0.79e-3, step_s=1.19e-3, exposed_comm_s=0.397e-3, comm_share=0.334)
    [row] = ddp.build([one])
    assert dict(zip(ddp.HEAD, ddp.values(row), strict=True))["exposed comm"] == (
        "none: 1 process; the strategy's own cost 397 µs of 1.19 ms (33%)")  # fmt: skip
    fsdp = cell("fsdp", 1, 3.9e-3, local_step_s=1.2e-3, step_s=3.86e-3, exposed_comm_s=2.66e-3, comm_share=0.69,
                bound="communication")  # fmt: skip
    [alone] = ddp.build([fsdp])
    assert dict(zip(ddp.HEAD, ddp.values(alone), strict=True))["bound"] == "-"  # read "communication-bound"


def test_a_step_no_slower_than_its_compute_alone_has_no_exposed_communication():
    """A mirrored cell whose step timed apart (7.18 ms) was under its compute alone (7.22 ms), the difference within
    their noise, read "exposed communication 0.00 µs (0%)"."""
    mirrored = cell("mirrored", 2, 7.3e-3, local_step_s=7.22e-3, step_s=7.18e-3, exposed_comm_s=0.0, comm_share=0.0)
    [row] = ddp.build([mirrored])
    assert dict(zip(ddp.HEAD, ddp.values(row), strict=True))["exposed comm"] == "0 of 7.18 ms (0%)"
    [note] = ddp.notes([row])
    assert "no exposed communication: a 7.18 ms step timed apart, no slower than its compute alone (7.22 ms)" in note
    assert "µs (0%)" not in note


def test_an_exposed_share_without_its_step_says_so_without_a_figure():
    [row] = ddp.build([cell("tp", 2, 0.5, exposed_comm_s=0.1, comm_share=0.2)])  # a record without step_s
    assert dict(zip(ddp.HEAD, ddp.values(row), strict=True))["exposed comm"] == "0.100 s (20%)"
    assert "exposed communication 0.100 s (20%) of the step timed beside its compute alone" in ddp.notes([row])[0]
    [bare] = ddp.build([cell("tp", 2, 0.5)])
    assert dict(zip(ddp.HEAD, ddp.values(bare), strict=True))["exposed comm"] == "-"


def test_a_report_of_multi_process_cells_none_timed_says_they_were_planned():
    """A report of an interrupted run, both of its ddp:2x1 cells pending, said "No multi-process cell in this run"."""
    from dlperf.report import html
    from dlperf.report.load import Loaded
    from dlperf.vocab import Status

    pending = [make_cell("fcn-r", nproc=2, scaling="strong", parallel="ddp", status=Status.PENDING) for _ in range(2)]
    said = html._ddp(Loaded("d.db", [], pending, {}, False, []))
    assert "No multi-process cell timed: 2 planned, none measured ok (the run&#x27;s table says why)." in said
    assert "No multi-process cell in this run" in html._ddp(Loaded("d.db", [], [make_cell("fcn-r")], {}, False, []))


def test_a_peak_of_the_whole_process_is_said_apart_from_one_of_live_tensors():
    """TF's multiworker reports each worker's resident memory (591 MiB: TensorFlow's runtime) under the peak/rank a
    torch strategy fills with its live tensors (446 KiB): the same label, a 1300x gap of definitions."""
    whole = {"peak_bytes_rank": [2**30, 2**30], "peak_of": "process"}
    cells = [cell("multiworker", 2, 0.6, param_bytes_rank=[400, 400], **whole),
             cell("ddp", 2, 0.6, param_bytes_rank=[400, 400], peak_bytes_rank=[900, 1000])]  # fmt: skip
    rows = {r.strategy: r for r in ddp.build(cells)}
    values = {s: dict(zip(ddp.HEAD, ddp.values(r), strict=True)) for s, r in rows.items()}
    assert values["multiworker"]["peak/rank"].endswith("(process)") and "(" not in values["ddp"]["peak/rank"]
    notes = ddp.notes(list(rows.values()))
    assert sum("(the process's resident memory, the framework's runtime included)" in n for n in notes) == 1
