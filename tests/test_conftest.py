"""The shared helpers' rule for a test that needs a quiet machine (`conftest.in_quiet_window`): locally a busy
machine is a skip that says how busy; in CI, or where DLPERF_REQUIRE lists `quiet`, the test waits a bounded time for
other processes to leave the CPUs, then fails naming every load it saw. It never passes by skipping there."""

import itertools
import sys
from types import SimpleNamespace

import pytest

import conftest
from dlperf.answers import ThreadsAnswer


@pytest.fixture
def loads(monkeypatch):
    """A measurement whose result is the share of the CPUs other processes took meanwhile, one per call, and no
    pause between tries; returns the calls made."""
    monkeypatch.setattr(conftest, "QUIET_PAUSE_S", 0.0)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("DLPERF_REQUIRE", raising=False)
    calls = []

    def measure(shares):
        it = iter(shares)
        return lambda: calls.append(1) or next(it)

    return measure, calls


def test_a_quiet_machine_is_measured_at_once_and_a_busy_one_again(loads):
    measure, calls = loads
    assert conftest.in_quiet_window(measure([0.02]), lambda share: share) == 0.02 and len(calls) == 1
    assert conftest.in_quiet_window(measure([0.6, None, 0.5]), lambda share: share) is None  # None: nothing seen
    assert len(calls) == 3


def test_locally_a_machine_busy_three_times_is_a_skip_naming_the_loads(loads):
    measure, calls = loads
    with pytest.raises(pytest.skip.Exception, match="other processes kept 63%, 40%, 20% of the CPUs busy in 3 tries"):
        conftest.in_quiet_window(measure([0.63, 0.4, 0.2, 0.0]), lambda share: share)
    assert len(calls) == 3


def unskipped(call):
    """`call()`, a skip in it a failure: where quiet is required, a skip would pass as green."""
    try:
        return call()
    except pytest.skip.Exception as skipped:
        pytest.fail(f"skipped where a quiet machine is required: {skipped}")


@pytest.mark.parametrize(("variable", "value"), [("CI", "true"), ("DLPERF_REQUIRE", "torch,quiet")])
def test_where_quiet_is_required_a_busy_machine_is_tried_until_the_bound_then_fails_naming_the_loads(
    loads, monkeypatch, variable, value
):
    measure, _ = loads
    monkeypatch.setenv(variable, value)
    assert conftest.quiet_required()
    assert unskipped(lambda: conftest.in_quiet_window(measure([0.5, 0.5, 0.5, 0.5, 0.01]), lambda share: share)) == 0.01
    clock = itertools.count(0.0, 25.0)  # each try 25 s after the last: past QUIET_WAIT_S (60 s) after the 3rd
    monkeypatch.setattr(conftest, "time", SimpleNamespace(monotonic=lambda: next(clock), sleep=lambda s: None))
    with pytest.raises(pytest.fail.Exception, match=r"kept 50%, 50%, 50% of the CPUs busy in 3 tries over 60 s"):
        unskipped(lambda: conftest.in_quiet_window(measure(itertools.repeat(0.5)), lambda share: share))


@pytest.fixture
def answers(monkeypatch):
    """The probe's answers to the thread question, given in turn without a child; returns the list to fill."""
    from dlperf.runner import probe

    given = []
    monkeypatch.setattr(probe, "ask", lambda *args, **kwargs: given.pop(0))
    monkeypatch.setattr(conftest, "framework_python", lambda name: sys.executable)
    monkeypatch.setattr(conftest, "QUIET_PAUSE_S", 0.0)
    return given


def test_the_cores_are_the_threads_ready_to_run_measured_once_whatever_the_load(answers):
    answers += [ThreadsAnswer(2, 1.0, 1.0, 1.0, 10, 0.6, {}, waited_s=0.9, runnable=1.9, thread_cpu_s=[0.5, 0.5])]
    got = conftest.cores_kept_busy("torch", 2)
    assert got["cores"] == 1.9 and got["others_cpu_share"] == 0.6 and answers == []


def test_without_the_kernels_waits_the_cores_are_cpu_over_wall_in_a_quiet_window(answers, monkeypatch):
    monkeypatch.setenv("CI", "true")
    busy, quiet = ThreadsAnswer(2, 1.0, 1.0, 1.0, 10, 0.6, {}), ThreadsAnswer(2, 3.8, 2.0, 1.9, 10, 0.05, {})
    answers += [busy, busy, busy, quiet]
    got = unskipped(lambda: conftest.cores_kept_busy("torch", 2))
    assert got["cores"] == 1.9 and got["others_cpu_share"] == 0.05 and answers == []
