"""fit, optimize, crossover and advise called from Python named the command's flags (`--max-batch`, `--budget`,
`--db 'PATH'`, `raise --budget`), which a Python caller never typed: each names the caller's argument unless
`Options.flags` (set by the commands), through the one wording of `store.location.said_to`."""

from __future__ import annotations

import pytest

from dlperf import advise, crossover, fit, optimize
from dlperf.errors import UsageError
from dlperf.store.location import as_arguments, named, said_to


def refused(call) -> str:
    with pytest.raises(UsageError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize(
    ("given", "said"),
    [({"device": "tpu"}, "device='tpu': expected cpu, cuda, cuda:N or mps"),
     ({"max_batch": 0}, "max_batch=0: expected a batch, a whole number from 1 to 65,536"),
     ({"modes": ("fp99",)}, "modes: unknown mode 'fp99'"),
     ({"device": "cuda", "max_memory": 2**30}, "max_memory limits a CPU process's memory; on cuda the GPU's own "
      "memory is the limit: give no max_memory")],
)  # fmt: skip
def test_fit_from_python_names_its_arguments(given, said):
    message = refused(lambda: fit.fit(fit.Options("tiny-fcn-r", **given), "unused.db"))
    assert message.startswith(said) and "--" not in message, message


def test_fit_from_the_command_keeps_its_flags():
    assert refused(lambda: fit.fit(fit.Options("tiny-fcn-r", max_batch=0, flags=True))).startswith("--max-batch")


@pytest.mark.parametrize(
    ("given", "said"),
    [({"budget_s": 0}, "budget_s must be positive"), ({"repeats": 0}, "repeats must be at least 1"),
     ({"budget_s": 1}, "budget_s 1 s: below the 4 s the fp32 baseline alone is timed at the least (repeats 2 "
      "processes of timer.min_time 2 s each)"), ({"order": "x"}, "order must be verdict or fixed, not 'x'"),
     ({"workload": "nosuch"}, "workload: unknown workload 'nosuch'")],
)  # fmt: skip
def test_optimize_from_python_names_its_arguments(given, said):
    message = refused(lambda: optimize.optimize(optimize.Options(**{"workload": "tiny-fcn-r", **given}), "unused.db"))
    assert message.startswith(said) and "--" not in message, message


def test_optimize_from_the_command_keeps_its_flags():
    message = refused(lambda: optimize.optimize(optimize.Options("tiny-fcn-r", budget_s=1, flags=True)))
    assert message.startswith("--budget 1 s: below") and "--repeats 2 processes of --min-time" in message


@pytest.mark.parametrize("module", [fit, optimize, crossover, advise])
def test_the_store_is_said_as_the_caller_named_it(module, monkeypatch):
    """db='PATH' to a Python caller, --db 'PATH' to the command's; an outer Python caller's wording holds within
    (advise from Python measures through crossover's Options with flags)."""
    monkeypatch.delenv("DLPERF_DB", raising=False)
    with said_to(module.Options("tiny-fcn-r"), module.FLAGS):
        assert named("x.db") == "db='x.db'"
        with said_to(crossover.Options("tiny-fcn-r", flags=True), crossover.FLAGS):
            assert named("x.db") == "db='x.db'"
    with said_to(module.Options("tiny-fcn-r", flags=True), module.FLAGS):
        assert named("x.db") == "--db 'x.db'"


def test_advise_notes_name_a_python_callers_arguments():
    """The notes advise returns (its own, and the thread search's it quotes) said the command's flags."""
    opts = advise.Options("tiny-fcn-r")
    note = as_arguments(advise.NO_EPOCH_NOTE.format("synthetic"), advise.FLAGS, opts)
    assert note.endswith("(samples=N gives your data set's size)"), note
    quoted = "threads: 2 was the only count measured at batch 8; 1 not measured: the budget ran out (raise --budget)"
    assert as_arguments(quoted, advise.FLAGS, opts).endswith("(raise budget_s)")


def test_a_flag_is_not_taken_for_another_that_ends_the_same():
    """--compile-timeout is not --timeout, --batches not --batch, --max-batch not --batch."""
    opts = optimize.Options("w", timeout=5, compile_timeout=7)
    line = "--timeout '5' and --compile-timeout '7'; --batches 1,2 with --max-batch 8"
    said = as_arguments(line, optimize.FLAGS, opts)
    assert said == "timeout=5 and compile_timeout=7; --batches 1,2 with --max-batch 8"
    opts = crossover.Options("w", batch=4)
    said = as_arguments("--batches 1,2 with --max-batch 8, --batch '4'", crossover.FLAGS, opts)
    assert said == "batches 1,2 with max_batch 8, batch=4"
