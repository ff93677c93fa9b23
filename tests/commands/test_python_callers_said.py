"""What fit, optimize and crossover take from a Python caller: a zero where the command refuses one (`threads=0`
ran a whole search at the default counts, as `--threads` not given), and what they say to one: the device
(`--devices: unknown device`, make_spec's flag; a device not present, the plan's), a batch fit has no argument for
(`with --batch`), the plan's warnings (`--threads 8 exceeds the cores`; dlperf.run's too), the default budget's
(`--budget 23`, minutes). A bool where a number is expected (Python's True is 1) and fit's max_memory of 0 or below
are refused before anything runs, and fit's --threads past the cores is warned of as run warns. The commands keep
their flags."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pytest

import dlperf
from dlperf import api, crossover, fit, optimize
from dlperf.cli import main
from dlperf.errors import UsageError
from dlperf.measure import system
from dlperf.plan.devices import resolve_devices
from dlperf.runner.session import budget_check
from dlperf.spec import MAX_SECONDS


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
    monkeypatch.setattr(optimize, "make_plan", lambda spec, **_: SimpleNamespace(warnings=[OVER], cells=[]))
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
    assert python.endswith("(6 candidates, 2 processes each): budget_s=1620 gives 6") and "--" not in python
    command = budget_check(15 * 60, step_s=31.0, candidates=6, repeats=2, process_s=20.0)
    assert command.startswith("the default --budget 15 gives") and command.endswith(": --budget 27 gives 6")


ABSENT = "cuda:99"  # no machine that runs these has a hundred GPUs
SECONDS = f"expected a number of seconds above 0, at most {MAX_SECONDS:.0f}"


def over_the_cores() -> int:
    return system.usable_cores()["cores"] + 1


def test_a_device_not_present_is_named_as_the_request_named_it():
    info = {"torch": {"devices": [{"name": "cpu"}]}}
    assert refused(lambda: resolve_devices((ABSENT,), info)).startswith(f"--devices: {ABSENT!r} is not present")
    said = refused(lambda: resolve_devices((ABSENT,), info, "--device"))
    assert said == f"--device: {ABSENT!r} is not present on this machine (present: cpu)"


@pytest.mark.parametrize(
    "call",
    [lambda db: fit.fit(fit.Options("tiny-fcn-r", device=ABSENT), db),
     lambda db: optimize.optimize(optimize.Options("tiny-fcn-r", device=ABSENT), db)],
    ids=["fit", "optimize"],
)  # fmt: skip
def test_a_python_caller_of_fit_or_optimize_hears_of_its_device_argument(call, tmp_path):
    """The plan said run's --devices to them (`device=`): it is told what the devices came from."""
    message = refused(lambda: call(str(tmp_path / "x.db")))
    assert message.startswith(f"device: {ABSENT!r} is not present on this machine"), message


@pytest.mark.parametrize("command", ["fit", "optimize"])
def test_fit_and_optimize_from_the_command_line_name_their_device_flag(command, capsys, tmp_path):
    line = command_line([command, "tiny-fcn-r", "--device", ABSENT], capsys, tmp_path)
    assert line.startswith(f"--device: {ABSENT!r} is not present on this machine"), line


def test_dlperf_run_from_python_says_the_plans_warnings_as_its_arguments(monkeypatch, tmp_path):
    heard, n = [], over_the_cores()
    monkeypatch.setattr(api, "for_plan", lambda *args: None)  # no pilot step: the warnings come before it
    dlperf.run(["tiny-fcn-r"], threads=[n], dry_run=True, db=str(tmp_path / "x.db"), warn=heard.append)
    [over] = [w for w in heard if "exceeds" in w]
    assert re.fullmatch(rf"threads {n} exceeds the \d+ usable cores: expect oversubscription .*", over), over


def test_dlperf_run_from_the_command_line_keeps_its_flags(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(api, "for_plan", never_planned)  # the estimate, after the warnings
    n = over_the_cores()
    with pytest.raises(Planned):
        main(["run", "--workloads", "tiny-fcn-r", "--threads", str(n), "--dry-run", "--db", str(tmp_path / "x.db")])
    assert f"dlperf: warning: --threads {n} exceeds the" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("call", "said"),
    [(lambda: fit.Options("tiny-fcn-r", timeout=True), f"timeout=True: {SECONDS}"),
     (lambda: optimize.Options("tiny-fcn-r", repeats=True), "repeats=True: expected a whole number of at least 1"),
     (lambda: optimize.Options("tiny-fcn-r", timeout=True), f"timeout=True: {SECONDS}"),
     (lambda: optimize.Options("tiny-fcn-r", compile_timeout=True), f"compile_timeout=True: {SECONDS}"),
     (lambda: crossover.Options("tiny-fcn-r", repeats=True), "repeats=True: expected a whole number of at least 1"),
     (lambda: crossover.Options("tiny-fcn-r", timeout=False), f"timeout=False: {SECONDS}")],
)  # fmt: skip
def test_a_bool_is_no_number_to_a_search(call, said, unplanned, monkeypatch, tmp_path):
    """Python counts True as 1: fit's timeout=True was one second, optimize's repeats=True one process."""
    opts = call()
    search = {fit.Options: fit.fit, optimize.Options: optimize.optimize, crossover.Options: crossover.crossover}
    monkeypatch.setattr(crossover, "make_plan", never_planned)
    assert refused(lambda: search[type(opts)](opts, str(tmp_path / "x.db"))) == said


def test_dlperf_run_refuses_a_bool_naming_its_argument():
    said = refused(lambda: dlperf.run(["tiny-fcn-r"], repeats=True, dry_run=True, db="unused.db"))
    assert said == "repeats=True: expected a whole number of at least 1"


@pytest.mark.parametrize("text", ["30", [30]])
def test_dlperf_run_refuses_a_timeout_of_no_number_in_one_line(text):
    """timeout="30" (text) was a TypeError, '<' not supported between 'int' and 'str'."""
    said = refused(lambda: dlperf.run(["tiny-fcn-r"], timeout=text, dry_run=True, db="unused.db"))
    assert said.startswith(f"timeout={text!r}: expected a number of seconds above 0")


@pytest.mark.parametrize("size", [0, -1, math.nan, True, 2.5e9])
def test_fit_refuses_a_memory_limit_of_no_size_before_its_probe(size, unplanned, monkeypatch, tmp_path):
    """It was refused once the probe had measured a start, as 'below what a training process needs'."""
    monkeypatch.setattr(fit, "start_bytes", lambda *args: pytest.fail("the probe ran"))
    message = refused(lambda: fit.fit(fit.Options("tiny-fcn-r", max_memory=size), str(tmp_path / "x.db")))
    assert message == f"max_memory={size!r}: expected a size above 0, a whole number of bytes below 8 EiB"


def test_fit_warns_of_threads_past_the_cores_as_run_does(monkeypatch, capsys, tmp_path):
    """fit planned at the default thread counts, so its --threads was never said to be past the cores."""
    monkeypatch.setattr(fit, "memory_limit", lambda *args: (2**30, "1 GiB", 2**28))  # no probe child
    monkeypatch.setattr(fit, "Search", never_planned)  # the tries, after the warnings
    n = over_the_cores()
    with pytest.raises(Planned):
        main(["fit", "tiny-fcn-r", "--threads", str(n), "--db", str(tmp_path / "x.db")])
    assert re.search(rf"dlperf: warning: --threads {n} exceeds the \d+ usable cores", capsys.readouterr().err)
