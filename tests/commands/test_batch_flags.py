"""Every batch flag is one parser with one range, said the same way: `predict --batch 0` said 'at least 1' (and took
up to 1,048,576), `advise --batch 0` 'from 1 to 65536', crossover's flags took any size until a check said 'at most
1,048,576'. The commands that measure a batch take 1 to 65,536 (as NAME@bN); predict, which only counts it on fake
tensors, up to 1,048,576, and its help says why."""

from __future__ import annotations

import pytest

from dlperf.cli import build_parser
from dlperf.errors import UsageError

MEASURED = "expected a batch, a whole number from 1 to 65,536"
FLAGS = [  # (the command line before the flag, the flag, the range said)
    (["advise", "tiny-fcn-r"], "--batch", MEASURED),
    (["crossover", "tiny-fcn-r"], "--batch", MEASURED),
    (["crossover", "tiny-fcn-r"], "--max-batch", MEASURED),
    (["crossover", "tiny-fcn-r"], "--batches", MEASURED),
    (["fit", "tiny-fcn-r"], "--max-batch", MEASURED),
    (["predict", "tiny-fcn-r"], "--batch", "expected a batch, a whole number from 1 to 1,048,576"),
]


@pytest.mark.parametrize(("head", "flag", "said"), FLAGS)
def test_each_batch_flag_says_its_range_whatever_the_value(head, flag, said):
    parser = build_parser()
    most = 2**20 if head[0] == "predict" else 2**16
    for bad in ("0", str(most + 1), "x", "1.5"):
        with pytest.raises(UsageError) as caught:
            parser.parse_args([*head, flag, bad])
        assert str(caught.value) == f"{flag} {bad!r}: {said}"
    assert parser.parse_args([*head, flag, str(most)]) is not None


def test_the_python_api_checks_a_batch_as_the_command_line_does():
    from dlperf import advise, crossover

    with pytest.raises(UsageError, match=f"^batch=0: {MEASURED}$"):  # the argument, not the flag
        advise.check(advise.Options("tiny-fcn-r", batch=0))
    with pytest.raises(UsageError, match=f"^--batch '0': {MEASURED}$"):  # the command's
        advise.check(advise.Options("tiny-fcn-r", batch=0, flags=True))
    with pytest.raises(UsageError, match=f"^batches=70000: {MEASURED}$"):  # the argument, not the flag
        crossover.check(crossover.Options("tiny-fcn-r", batches=(8, 70000)))


def test_the_measuring_range_is_the_one_of_a_batch_named_in_the_workload():
    from dlperf.spec import FIT_MAX_BATCH, parse_workload

    assert parse_workload(f"tiny-fcn-r@b{FIT_MAX_BATCH}", None, variant=True)
    with pytest.raises(UsageError, match="from 1 to 65,536"):
        parse_workload(f"tiny-fcn-r@b{FIT_MAX_BATCH + 1}", None, variant=True)
