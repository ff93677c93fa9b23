"""`dlperf table --best`'s speed-up is over each framework's own fp32 step, which is not eager everywhere: its help and
the table said "over fp32 eager" for TensorFlow's graph and JAX's jax.jit-compiled step alike."""

import subprocess
import sys

from conftest import ROOT, make_cell
from dlperf.report import best


def test_the_best_table_says_each_frameworks_baseline_for_the_frameworks_it_shows():
    measured = (("tensorflow", "fp32", 0.2), ("tensorflow", "compile", 0.1), ("jax", "fp32", 0.1))
    cells = [make_cell("tiny-fcn-r", framework=f, mode=m, median_s=s, n=50, key=f + m) for f, m, s in measured]
    [said] = best.legend(best.build(cells, {}))
    assert said == ("speed-up over each framework's fp32 step: jax: compiled by jax.jit; "
                    "tensorflow: a tf.function graph, without XLA")  # fmt: skip
    assert "eager" not in said and best.legend([]) == []


def test_the_help_of_table_best_says_what_each_frameworks_fp32_step_is():
    env = {"COLUMNS": "400", "PATH": "", "PYTHONPATH": str(ROOT / "src")}  # src: where dlperf is not installed
    out = subprocess.run([sys.executable, "-m", "dlperf", "table", "--help"], capture_output=True, text=True,
                         check=True, env=env).stdout  # fmt: skip
    assert "speed-up over its framework's fp32 step (torch: eager; jax: compiled by jax.jit; tensorflow: a " in out
    assert "over fp32 eager" not in out


def test_a_disturbed_step_is_marked_as_the_runs_table_marks_it_and_a_failed_cell_says_failed():
    """`table --best` showed 1.920 where the run's table showed "1.920? n=11" (other processes used 81% of the CPUs):
    its `?` meant few samples alone; and a failed resnet-50 read "- - - -", as a cell never run."""
    busy = "other processes used 81% of the CPUs while this cell was timed"
    cells = [make_cell("fcn-s", median_s=1.92, n=11, warnings=[busy]),
             make_cell("resnet-50", median_s=None, status="failed", error="worker killed by SIGKILL")]  # fmt: skip
    rows = best.build(cells, {})
    assert best.values(rows[0])[3:6] == ["1.920 s?", "fp32", "1.920 s?"]
    assert best.values(rows[1])[3:6] == ["failed", "-", "-"]
    assert best.legend(rows)[-1].startswith("? = a median not to rely on (busy CPUs")
    assert best.legend(rows)[-1].endswith("the run's table notes which)")


def test_a_group_of_rejected_modes_says_no_status_and_the_legend_says_why_each_mark_is():
    """fp32 alone, its loss NaN: the fp32 step column read "ok"; a busy fp32 step (n=11) beside a bf16 one of 3 steps
    had a legend of few samples alone."""
    [rejected] = best.build([make_cell("a", median_s=1.0, n=20, loss_finite=False)], {})
    assert best.values(rejected)[3] == "-"
    busy = "other processes used 81% of the CPUs while this cell was timed"
    rows = best.build([make_cell("a", median_s=1.0, n=11, warnings=[busy], key="a"),
                       make_cell("a", mode="bf16", median_s=0.5, n=3, key="b")], {})  # fmt: skip
    assert best.legend(rows)[1].startswith("? = a median not to rely on (busy CPUs")
    few_only = best.build([make_cell("a", median_s=1.0, n=20, key="a"), make_cell("a", mode="bf16", median_s=0.5, n=3,
                          warnings=["few samples: the median of 3 timed steps"], key="b")], {})  # fmt: skip
    assert best.legend(few_only)[1] == best.FEW_LEGEND
