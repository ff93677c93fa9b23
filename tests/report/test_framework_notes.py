"""A view of several frameworks says what differs between their cells beyond the figures: MXNet's steps are
synchronized around each one where JAX's are pipelined (a 1 ms MXNet step read up to 1.4x a plain loop's), and the
utilization's FLOPs are counted per framework (JAX's by XLA, -13% to +16% on the tiny networks; MXNet's none)."""

from conftest import make_cell
from dlperf.report import framework_notes, table


def cell(framework, median, workload="tiny-fcn-r", utilization=None):
    return make_cell(workload, framework=framework, threads=1, median_s=median, n=20, utilization=utilization)


def test_short_mxnet_steps_beside_another_framework_are_said_to_be_synchronized():
    cells = [cell("torch", 0.0004), cell("jax", 0.0002), cell("mxnet", 0.0008), cell("mxnet", 0.3, "fcn-r")]
    [said] = framework_notes.notes(cells)
    assert said.startswith("mxnet's steps are synchronized around each one") and "cells of tiny-fcn-r are" in said
    assert said.endswith("(jax's steps are pipelined, as a training loop runs them)") and "fcn-r," not in said
    assert framework_notes.notes([cell("mxnet", 0.0008)]) == []  # one framework: nothing set beside it
    assert framework_notes.notes([cell("torch", 0.0004), cell("mxnet", 0.3)]) == []  # long steps: no matter


def test_utilization_counted_differently_is_said_where_it_is_shown():
    cells = [cell("torch", 0.008, utilization=0.06), cell("jax", 0.008, utilization=0.05), cell("mxnet", 0.3, "x")]
    said = framework_notes.notes(cells)
    assert said[0].startswith("utilization (N%): FLOPs are counted per framework (jax's by XLA's cost analysis")
    assert said[1] == "utilization (N%): mxnet counts no FLOPs, so its cells have none"
    assert all(n in table.build(1, cells).notes for n in said)
    assert framework_notes.notes([cell("torch", 0.008), cell("jax", 0.008)]) == []  # no utilization shown
