"""A CPU cell whose timed steps spent much of their CPU time in the kernel is said so under the table, with its page
faults a step; where those are many and its backend keeps glibc's heap, the note names the mode to try
(`malloc_keep`). Several such cells make one line, each with its share."""

import pytest

from conftest import make_cell
from dlperf.report import table
from dlperf.report.notes import grouped

REMAPPING = {"kernel_cpu_share": 0.28, "minor_faults_per_step": 760_000.0}


def notes_of(*cells):
    return [text for _, kind, text in table.cell_notes(list(cells)) if kind == "kernel"]


def test_many_faults_a_step_name_the_mode_that_keeps_the_heap():
    [said] = notes_of(make_cell("resnet-50", **REMAPPING))
    assert said == (
        "memory mapped afresh each step: 760,000 page faults a step, the kernel 28% of its CPU time; "
        "try --modes malloc_keep"
    )
    [said] = notes_of(make_cell("resnet-50", mode="bf16+channels_last", **REMAPPING))
    assert said.endswith("try --modes bf16+channels_last+malloc_keep")


@pytest.mark.parametrize(
    "why, cell",
    [
        ("already in the mode", make_cell("resnet-50", mode="malloc_keep", **REMAPPING)),
        ("another allocator in the mode", make_cell("resnet-50", mode="jemalloc", **REMAPPING)),
        ("few faults: the kernel busy otherwise", make_cell("lstm", kernel_cpu_share=0.4, minor_faults_per_step=12.0)),
    ],
)
def test_without_that_cause_or_that_remedy_it_says_the_share_alone(why, cell):
    [said] = notes_of(cell)
    assert said.startswith("the kernel took ") and "malloc_keep" not in said, (why, said)


@pytest.mark.parametrize(
    "cell",
    [
        make_cell("resnet-50", kernel_cpu_share=0.05, minor_faults_per_step=760_000.0),  # the kernel little
        make_cell("resnet-50", device="cuda:0", **REMAPPING),  # a GPU cell's host
        make_cell("resnet-50", status="failed", **REMAPPING),
        make_cell("resnet-50"),  # a cell stored before the figure was
    ],
)
def test_no_note_below_the_share_off_the_cpu_or_without_a_time(cell):
    assert notes_of(cell) == []


def test_several_cells_make_one_line_each_with_its_share_under_its_own_mode_to_try():
    """A bf16 cell is told bf16+malloc_keep, an fp32 one malloc_keep: the line said "try these cells with --modes
    malloc_keep" for both (measured: lstm at bf16 0.359 s a step, 51% in the kernel; bf16+malloc_keep 0.190 s). Each
    mode is said once, before its cells: `make run` named "--modes malloc_keep" after each of its 8 cells."""
    shares = (("resnet-50", "fp32", 0.28), ("lstm", "bf16", 0.51), ("fcn-s", "fp32", 0.38))
    cells = [make_cell(w, mode=m, **{**REMAPPING, "kernel_cpu_share": s}) for w, m, s in shares]
    [line] = grouped([(label, text) for label, kind, text in table.cell_notes(cells) if kind == "kernel"])
    assert line.startswith("memory mapped afresh each step, the kernel faulting its pages in")
    assert line.endswith("freed): try --modes malloc_keep: resnet-50 torch cpu:1 (28% kernel), fcn-s torch cpu:1 (38% "
                         "kernel); --modes bf16+malloc_keep: lstm torch bf16 cpu:1 (51% kernel)")  # fmt: skip


def test_every_backend_is_told_the_mode_and_one_without_it_the_share_alone(monkeypatch):
    """The allocator's modes are the process's, so every backend has them (JAX's MLP faulted 35,000 pages a step in
    glibc's heap); a backend without malloc_keep would be told the share alone."""
    from types import SimpleNamespace

    from dlperf.modes import Mode

    for framework in ("jax", "tensorflow", "mxnet"):
        [said] = notes_of(make_cell("resnet-50", framework=framework, **REMAPPING))
        assert said.endswith("try --modes malloc_keep"), (framework, said)
    monkeypatch.setattr(table.capabilities, "of", lambda framework: SimpleNamespace(modes=frozenset({Mode.FP32})))
    [said] = notes_of(make_cell("resnet-50", framework="jax", **REMAPPING))
    assert said.startswith("the kernel took 28%") and "malloc_keep" not in said


def test_a_cell_whose_run_measured_the_mode_beside_it_is_not_told_to_try_it():
    """`dlperf run --modes fp32,malloc_keep` noted of its fp32 cell "try --modes malloc_keep", the malloc_keep cell a
    row away. Where the run measured that mode on the same column it says the share alone; a failed cell of the mode,
    or one on another column, still leaves the advice."""
    fp32, keep = make_cell("resnet-50", **REMAPPING), make_cell("resnet-50", mode="malloc_keep", median_s=2.03)
    [said] = notes_of(fp32, keep)
    assert said.startswith("the kernel took 28% of the timed steps' CPU time (760,000 page faults a step)")
    elsewhere = make_cell("resnet-50", mode="malloc_keep", threads=2, median_s=2.03)
    failed = make_cell("resnet-50", mode="malloc_keep", status="failed")
    for other in (elsewhere, failed):
        assert notes_of(fp32, other)[0].endswith("; try --modes malloc_keep"), other
    bf16 = make_cell("lstm", mode="bf16", **REMAPPING)
    assert notes_of(bf16, make_cell("lstm", mode="bf16+malloc_keep", median_s=0.19))[0].startswith("the kernel took")
