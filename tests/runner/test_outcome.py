"""One child outcome (runner/outcome.py): a child's status and reason from its events and how it ended, for every
kind of child: what it reported first, then how the process ended."""

import pytest

from dlperf.protocol import Answer, Done, Error, Profiled, Start, Unsupported
from dlperf.runner.launch import ChildResult
from dlperf.runner.outcome import Outcome, outcome, tail
from dlperf.vocab import Status

CLEAN = ChildResult(0, False, 1.0, "")
TIMED_OUT = ChildResult(None, True, 30.0, "")
CRASHED = ChildResult(-9, False, 1.0, "loading...\nFatal: killed\n")
EXITED = ChildResult(1, False, 1.0, "")
KILLED = "worker killed by SIGKILL (killed: out of memory?)"
PROFILED = Profiled(steps=1, step_s=0.1, categories={})


@pytest.mark.parametrize(
    ("events", "child", "want"),
    [
        ([Start(1, "py"), Done()], CLEAN, Outcome(Status.OK)),
        # what the child said comes first: a cell that does not apply is never failed, however the process ended
        ([Unsupported("no bf16 here")], TIMED_OUT, Outcome(Status.UNSUPPORTED, "no bf16 here")),
        ([Error("RuntimeError: bad")], EXITED, Outcome(Status.FAILED, "RuntimeError: bad")),
        ([Start(1, "py")], TIMED_OUT, Outcome(Status.TIMEOUT, "exceeded --timeout 30 s")),
        ([Start(1, "py")], CRASHED, Outcome(Status.FAILED, f"{KILLED}: Fatal: killed")),
        ([Start(1, "py")], EXITED, Outcome(Status.FAILED, "worker exited with code 1")),
        ([Start(1, "py")], CLEAN, Outcome(Status.FAILED, "worker ended without a result")),
    ],
)
def test_a_cells_child(events, child, want):
    assert outcome(events, child, 30) == want


def test_each_kind_of_child_names_its_result_its_flag_and_what_it_kept():
    """A profile child's result is its Profiled event, a probe's or a peak's its Answer; the timeout is said with
    the flag that set it, and what was kept of the work."""
    assert outcome([PROFILED], CLEAN, 30, result=Profiled).ok
    assert outcome([Done()], CLEAN, 30, result=Profiled, ended="no profile") == Outcome(Status.FAILED, "no profile")
    assert outcome([Answer({"x": 1})], CLEAN, 30, result=Answer).ok
    stopped = outcome([], TIMED_OUT, 180, flag="--probe-timeout", kept=" (kept 3 samples)")
    assert stopped == Outcome(Status.TIMEOUT, "exceeded --probe-timeout 180 s (kept 3 samples)")
    limited = ChildResult(None, True, 5.0, "", stop_reason="compilation exceeded --compile-timeout 5 s")
    assert outcome([], limited, 600).reason == "compilation exceeded --compile-timeout 5 s"


def test_a_child_that_measured_what_it_was_started_for_is_ok_whatever_ended_it():
    """The caller knows: a cell killed during its untimed loss check was measured in full."""
    assert outcome([Start(1, "py")], TIMED_OUT, 30, measured=True) == Outcome(Status.OK)
    assert outcome([Start(1, "py")], CRASHED, 30, measured=True).ok
    assert outcome([Error("x")], CRASHED, 30, measured=True).status is Status.FAILED  # its own error still counts


def test_the_tail_is_the_last_line_of_stderr():
    assert tail(CRASHED) == ": Fatal: killed" and tail(CLEAN) == ""


def test_the_tail_says_something_torchrun_s_closing_rules_do_not_and_a_long_line_is_cut():
    torchrun = ChildResult(1, False, 1.0, "RuntimeError: rank 1 lost\n" + "=" * 60 + "\n  ***  \n")
    assert tail(torchrun) == ": RuntimeError: rank 1 lost"
    assert len(tail(ChildResult(1, False, 1.0, "x" * 1000))) == len(": ") + 300


def test_a_child_that_ended_quietly_without_its_result_names_what_it_wrote_last():
    quiet = ChildResult(0, False, 1.0, "warning: no devices\n")
    assert outcome([Start(1, "py")], quiet, 30, result=Answer, ended="gave no answer") == Outcome(
        Status.FAILED, "gave no answer: warning: no devices"
    )


def test_a_limit_no_flag_set_is_said_as_seconds():
    assert outcome([], TIMED_OUT, 180, result=Answer, flag=None).reason == "exceeded 180 s"
