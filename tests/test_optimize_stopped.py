"""What `dlperf optimize` says of what its budget cut (a user QA pass): the budget echoed in the unit a person reads
("--budget 60s" said "--budget 1"), no Python None in a note ("pending: None"), and a candidate whose process the
budget stopped shown as stopped, never with the time of its cut measurement ("6.88 ms ... not checked")."""

from __future__ import annotations

import re
import time

import pytest

from dlperf import optimize as opt
from dlperf.commands import optimize as opt_cmd
from dlperf.errors import UsageError
from dlperf.measure.timer import TimerConfig
from dlperf.runner.session import Budget
from dlperf.runner.sweep import Deadline
from dlperf.store import Store
from dlperf.vocab import ExitCode, Status
from test_optimize import _fake_children, _Quiet, steps


def test_the_budget_is_said_in_seconds_or_minutes_whatever_unit_it_was_given_in():
    assert Budget(60.0, None).text() == "60 s"
    assert Budget(1.0, None).text() == "1 s"
    assert Budget(900.0, None).text() == "15 min"
    assert Budget(150.0, None).text() == "2.5 min"


def test_a_baseline_the_budget_left_unstarted_says_so_without_a_none(tmp_path, monkeypatch):
    """`--budget 1s`: planning spends it, so not even fp32 starts; the notes said "--budget 0.0166667 ran out" and
    "the fp32 baseline did not measure (pending: None)"."""
    from dlperf.runner import sweep

    _fake_children(monkeypatch, [])
    started = []
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, poll: started.append(task) or None)
    quick = TimerConfig(min_steps=1, min_time=0.0)  # --budget's least is the baseline's --min-time: none here
    opts = opt.Options(
        "tiny-fcn-r", threads=1, repeats=1, budget_s=0.001, timer=quick, flags=True
    )  # as dlperf optimize
    search = opt.optimize(opts, str(tmp_path / "o.db"), progress_factory=lambda n: _Quiet(), warn=print)
    assert started == [] and search.best is None and search.exit_code == ExitCode.CELLS_FAILED
    assert "--budget 0.001 s ran out: fp32 not started" in search.notes, search.notes
    assert any(n.startswith("the fp32 baseline was not measured (not started: --budget 0.001 s ran out)")
               for n in search.notes), search.notes  # fmt: skip
    assert not any("None" in n for n in search.notes), search.notes


def _stopped_search(tmp_path, monkeypatch, stopped_mode: str):
    """A search whose `stopped_mode` process is stopped by the budget after timing steps faster than fp32's (the
    child keeps what it timed), the budget running out there."""
    from dlperf.runner import sweep
    from dlperf.store.process import ProcessMeasurement

    _fake_children(monkeypatch, [])
    fake = sweep.run_task

    def run_task(task, ctx, poll):
        if task.cell.mode != stopped_mode:
            return fake(task, ctx, poll)
        ctx.deadline = time.monotonic() - 1  # the budget ran out while it ran: nothing starts after it
        return ProcessMeasurement(status=Status.TIMEOUT, error=Deadline.REASON, samples=steps(0.5, 1)[0],
                                  duration_s=1.0)  # fmt: skip

    monkeypatch.setattr(sweep, "run_task", run_task)
    opts = opt.Options("tiny-fcn-r", threads=1, repeats=2, budget_s=900.0, order="fixed", flags=True)
    return opt.optimize(opts, str(tmp_path / "o.db"), progress_factory=lambda n: _Quiet(), warn=print)


def test_a_baseline_the_budget_stopped_is_exit_1_as_one_it_left_unstarted_is(tmp_path, monkeypatch):
    """`optimize --budget 1s` measured nothing either way, but exited 0 where the budget stopped the fp32 baseline and
    1 where it left it unstarted, by the machine's pace: nothing measured is exit 1 (a timeout, docs' exit codes)."""
    search = _stopped_search(tmp_path, monkeypatch, "fp32")
    assert search.baseline.status == Status.TIMEOUT and search.best is None and search.results == [search.baseline]
    assert search.exit_code == ExitCode.CELLS_FAILED


def test_a_budget_below_what_the_baseline_is_timed_is_refused_before_anything_runs(tmp_path, monkeypatch):
    """`optimize --budget 1s` planned and started the baseline, which its --repeats 2 processes of --min-time 2 s
    cannot fit: the least is said in one line, nothing stored."""
    _fake_children(monkeypatch, [])
    opts = opt.Options("tiny-fcn-r", threads=1, repeats=2, budget_s=1.0, flags=True)  # the command's words
    with pytest.raises(UsageError) as caught:
        opt.optimize(opts, str(tmp_path / "o.db"), progress_factory=lambda n: _Quiet(), warn=print)
    assert str(caught.value) == ("--budget 1 s: below the 4 s the fp32 baseline alone is timed at the least (--repeats "
                                 "2 processes of --min-time 2 s each): give at least 4s")  # fmt: skip
    assert not (tmp_path / "o.db").exists()


def test_a_candidate_the_budget_stopped_shows_as_stopped_not_as_a_measured_time(tmp_path, monkeypatch, capsys):
    search = _stopped_search(tmp_path, monkeypatch, "bf16")
    [bf16] = [c for c in search.results if c.mode == "bf16"]
    assert bf16.median_s is None and bf16.speedup is None, bf16
    assert search.best is None  # a cut measurement wins nothing
    assert not any(n.startswith("bf16: measured in one process only") for n in search.notes), search.notes
    assert any(n.startswith("--budget 15 min ran out: bf16 stopped") for n in search.notes), search.notes
    assert search.results[0].mode == "fp32"  # the one measured mode first, the stopped one among those without a time
    store = Store.open(tmp_path / "o.db", create=False)
    try:  # the cell keeps the steps its process timed before the budget stopped it: the time the table showed
        assert next(c for c in store.cells(search.run_id) if c.mode == "bf16").median_s is not None
    finally:
        store.close()
    monkeypatch.setenv("COLUMNS", "300")
    opt_cmd.print_text(search)
    [row] = [line for line in capsys.readouterr().out.splitlines() if "│ bf16 " in line]
    assert "stopped" in row and "--budget ran out" in row and " ms" not in row and "not checked" not in row, row


def test_a_loss_check_not_run_says_why_wherever_it_shows():
    cand = opt.Candidate("bf16", Status.OK.value, median_s=0.5, loss_ok=None)
    assert opt_cmd.NO_CHECK.startswith("not checked: ")
    table = opt_cmd.render_rich(opt.Search("w", "cpu", 1, 1, cand, [cand], None))
    from rich.console import Console

    console = Console(width=300, record=True)
    console.print(table)
    assert opt_cmd.NO_CHECK in console.export_text()


def test_a_candidate_without_a_time_says_why_in_words():
    stopped = opt.Candidate("bf16", Status.TIMEOUT.value, error=Deadline.REASON)
    assert opt_cmd.unmeasured(stopped) == ("stopped", "stopped: --budget ran out")
    assert opt_cmd.unmeasured(opt.Candidate("bf16", Status.PENDING.value)) == ("not started", "")
    unsupported = opt.Candidate("fp16", "unsupported", error="no fp16 here")
    assert opt_cmd.unmeasured(unsupported) == ("unsupported", "no fp16 here")


def test_a_candidate_not_faster_than_the_baseline_says_it_was_timed_against_the_baseline_then(tmp_path, monkeypatch):
    """`optimize` printed fp32 at 5.69 ms in its table and, under it, "bf16: ... 7.95 ms per step is not faster than
    fp32 (7.39 ms)": the bar is fp32's median when bf16 was measured, its processes since moved the row's figure."""
    _fake_children(monkeypatch, [])
    opts = opt.Options("tiny-fcn-r", threads=1, repeats=1, budget_s=900.0, order="fixed", flags=True)
    search = opt.optimize(opts, str(tmp_path / "o.db"), progress_factory=lambda n: _Quiet(), warn=print)
    slower = [n for n in search.notes if ": measured in one process only: " in n]
    assert any(n.endswith("not faster than fp32 as timed before it (1.00 s)") for n in slower), search.notes
    assert all(re.search(r"not faster than \S+ as timed before it \([\d.]+ s\)$", n) for n in slower), slower


def test_a_mode_hundreds_of_times_slower_reads_as_such_and_the_step_has_its_unit(capsys, monkeypatch):
    """A walkthrough's fused row read 'step 0.177' beside '0.00x': two decimals of a 0.0025x speed-up, and no unit for
    the step column anywhere under the table."""
    base = opt.Candidate("fp32", Status.OK.value, median_s=0.00045, speedup=1.0)
    fused = opt.Candidate("fused", Status.OK.value, median_s=0.177, speedup=0.00254, ci_low=0.00249, ci_high=0.0026)
    monkeypatch.setenv("COLUMNS", "300")
    opt_cmd.print_text(opt.Search("w", "cpu", 1, 1, base, [base, fused], None))
    out = capsys.readouterr().out
    [row] = [line for line in out.splitlines() if "│ fused " in line]
    assert "0.0025x [0.0025-0.0026]" in row and "0.00x" not in row, row
    assert opt_cmd.STEP_LEGEND in out.replace("\n", " ")
