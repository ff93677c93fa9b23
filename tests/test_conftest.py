"""The shared helpers' rule for a test that needs a quiet machine (`conftest.in_quiet_window`): locally a busy
machine is a skip that says how busy; in CI, or where DLPERF_REQUIRE lists `quiet`, the test waits a bounded time for
other processes to leave the CPUs, then fails naming every load it saw. It never passes by skipping there."""

import itertools
from types import SimpleNamespace

import pytest

import conftest


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


@pytest.mark.parametrize(("variable", "value"), [("CI", "true"), ("DLPERF_REQUIRE", "torch,quiet")])
def test_where_quiet_is_required_a_busy_machine_is_tried_until_the_bound_then_fails_naming_the_loads(
    loads, monkeypatch, variable, value
):
    measure, _ = loads
    monkeypatch.setenv(variable, value)
    assert conftest.quiet_required()
    assert conftest.in_quiet_window(measure([0.5, 0.5, 0.5, 0.5, 0.01]), lambda share: share) == 0.01  # no skip
    clock = itertools.count(0.0, 25.0)  # each try 25 s after the last: past QUIET_WAIT_S (60 s) after the 3rd
    monkeypatch.setattr(conftest, "time", SimpleNamespace(monotonic=lambda: next(clock), sleep=lambda s: None))
    with pytest.raises(pytest.fail.Exception, match=r"kept 50%, 50%, 50% of the CPUs busy in 3 tries over 60 s"):
        conftest.in_quiet_window(measure(itertools.repeat(0.5)), lambda share: share)
