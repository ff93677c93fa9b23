"""What fit, optimize and crossover take from a Python caller: a zero where the command refuses one (`threads=0`
ran a whole search at the default counts, as `--threads` not given), and what they say to one: the device
(`--devices: unknown device`, make_spec's flag), a batch fit has no argument for (`with --batch`), the plan's
warnings (`--threads 8 exceeds the cores`), the default budget's (`--budget 23`, minutes). The commands keep their
flags."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from dlperf import crossover, fit, optimize
from dlperf.cli import main
from dlperf.errors import UsageError
from dlperf.runner.session import budget_check


class Planned(Exception):
    """Planning was reached: the Options were taken, and a search would have run."""


def never_planned(*args, **kwargs):
    raise Planned


@pytest.fixture
def unplanned(monkeypatch):
    monkeypatch.setattr("dlperf.plan.make_plan", never_planned)
    monkeypatch.setattr(optimize, "make_plan", never_planned)


def refused(call) -> str:
    with pytest.raises(UsageError) as caught:
        call()
    return str(caught.value)


def command_line(args: list[str], capsys, tmp_path) -> str:
    """The one line a bad command line prints, exit code 2."""
    assert main([*args, "--db", str(tmp_path / "x.db")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    return line.removeprefix("dlperf: error: ")


@pytest.mark.parametrize("threads", [0, 0.0, -1, True, math.nan])
def test_fit_refuses_a_thread_count_the_command_refuses(threads, unplanned):
    message = refused(lambda: fit.fit(fit.Options("tiny-fcn-r", threads=threads), "unused.db"))
    assert message == f"threads={threads!r}: expected a whole number of at least 1"


@pytest.mark.parametrize("max_batch", [0, math.nan, True])
def test_fit_refuses_a_batch_limit_the_command_refuses(max_batch, unplanned):
    message = refused(lambda: fit.fit(fit.Options("tiny-fcn-r", max_batch=max_batch), "unused.db"))
    assert message == f"max_batch={max_batch!r}: expected a batch, a whole number from 1 to 65,536"


def test_fit_from_the_command_says_its_threads_flag(unplanned, capsys, tmp_path):
    assert refused(lambda: fit.fit(fit.Options("tiny-fcn-r", threads=0, flags=True))).startswith("--threads '0'")
    assert command_line(["fit", "tiny-fcn-r", "--threads", "0"], capsys, tmp_path).startswith("--threads '0'")


def test_fit_refuses_a_workload_at_a_batch_naming_its_limit_not_a_batch_flag(unplanned, capsys, tmp_path):
    """fit searches the batch: neither it nor its command has a --batch to give one with."""
    message = refused(lambda: fit.fit(fit.Options("tiny-fcn-r@b8"), "unused.db"))
    assert message == ("workload 'tiny-fcn-r@b8': fit searches the batch itself, from the workload's own up to "
                       "max_batch; name tiny-fcn-r")  # fmt: skip
    line = command_line(["fit", "tiny-fcn-r@b8"], capsys, tmp_path)
    assert line.endswith("from the workload's own up to --max-batch; name tiny-fcn-r"), line


@pytest.mark.parametrize(
    ("given", "said"),
    [({"threads": 0}, "threads=0: expected a whole number of at least 1"),
     ({"threads": 0.0}, "threads=0.0: expected a whole number of at least 1"),
     ({"budget_s": math.nan}, "budget_s must be positive"),
     ({"device": "tpu"}, "device: unknown device 'tpu' (expected cpu, cuda, cuda:N or mps)")],
)  # fmt: skip
def test_optimize_refuses_what_the_command_refuses_naming_the_argument(given, said, unplanned):
    message = refused(lambda: optimize.optimize(optimize.Options("tiny-fcn-r", **given), "unused.db"))
    assert message == said


def test_optimize_from_the_command_says_its_device_flag(capsys, tmp_path):
    line = command_line(["optimize", "tiny-fcn-r", "--device", "tpu"], capsys, tmp_path)
    assert line.startswith("--device") and "unknown device 'tpu'" in line, line


OVER = (
    "--threads 8 exceeds the 2 usable cores: expect oversubscription (steps can be many times slower); measured anyway"
)


@pytest.mark.parametrize(("flags", "said"), [(False, OVER.replace("--threads", "threads")), (True, OVER)])
def test_optimize_says_the_plans_warnings_as_the_caller_gave_its_arguments(flags, said, monkeypatch):
    heard = []
    monkeypatch.setattr(optimize, "make_plan", lambda spec: SimpleNamespace(warnings=[OVER], cells=[]))
    opts = optimize.Options("tiny-fcn-r", threads=8, flags=flags)
    refused(lambda: optimize.optimize(opts, "unused.db", warn=heard.append))  # no cell planned: refused after
    assert heard == [said]


@pytest.mark.parametrize(("flags", "said"), [(False, OVER.replace("--threads", "threads")), (True, OVER)])
def test_crossover_says_the_plans_warnings_as_the_caller_gave_its_arguments(flags, said, monkeypatch):
    heard = []

    def planned(opts, db, argv, progress_factory, warn, made_by):
        warn(OVER)
        return crossover.Result(None, None, 0, [])

    monkeypatch.setattr(crossover, "_crossover", planned)
    crossover.crossover(crossover.Options("tiny-fcn-r", threads=8, flags=flags), "unused.db", warn=heard.append)
    assert heard == [said]


def test_the_default_budgets_check_says_seconds_to_a_python_caller():
    """optimize.Options(budget_default=True) reaches it from Python, where the budget is budget_s, in seconds; the
    command's --budget is in minutes."""
    python = budget_check(15 * 60, step_s=31.0, candidates=6, repeats=2, process_s=20.0, flags=False)
    assert python.startswith("the default budget_s=900 gives about 2 timed steps per candidate at 31.0 s per step")
    assert python.endswith("(6 candidates, 2 processes each): budget_s=1380 gives 5") and "--" not in python
    command = budget_check(15 * 60, step_s=31.0, candidates=6, repeats=2, process_s=20.0)
    assert command.startswith("the default --budget 15 gives") and command.endswith(": --budget 23 gives 5")
