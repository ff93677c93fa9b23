"""advise.check from Python with the values' types a caller is likely to give: GPUs as a tuple, as
crossover.Options takes them (an AttributeError traceback: 'tuple' object has no attribute 'split'), and a batch as
text (let through, the batch "4" later predicted and measured as text)."""

from __future__ import annotations

import pytest

from dlperf import advise
from dlperf.errors import UsageError


@pytest.mark.parametrize("given", [("T4", "L4"), ["T4", "L4"]])
def test_gpus_as_a_sequence_of_names_are_those_gpus(given):
    chosen, _ = advise.check(advise.Options("tiny-fcn-r", gpus=given))
    assert [g.name for g in chosen] == ["T4", "L4"]


def test_no_gpus_in_a_sequence_is_one_line():
    with pytest.raises(UsageError, match=r"^gpus: expected one or more GPU names"):
        advise.check(advise.Options("tiny-fcn-r", gpus=()))


def test_a_batch_given_as_text_is_refused_naming_it():
    with pytest.raises(UsageError, match=r"^batch='4': expected a batch, a whole number"):
        advise.check(advise.Options("tiny-fcn-r", gpus="T4", batch="4"))
