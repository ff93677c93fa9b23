"""advise.check's errors name what the caller gave: the command's flag (`--budget`), a Python caller's argument
(`budget_s=0`), as `Options.flags` says; a Python caller's numbers are checked as the command line's parser does."""

from __future__ import annotations

import pytest

from dlperf import advise
from dlperf.errors import UsageError


def said(flags: bool = False, **given) -> str:
    with pytest.raises(UsageError) as caught:
        advise.check(advise.Options("tiny-fcn-r", gpus="T4", flags=flags, **given))
    return str(caught.value)


@pytest.mark.parametrize(
    ("given", "start"),
    [({"batch": 0}, "batch=0: expected a batch"), ({"budget_s": 0}, "budget_s=0: expected seconds above zero"),
     ({"budget_s": float("nan")}, "budget_s=nan: expected seconds"), ({"samples": 0}, "samples=0: expected a whole"),
     ({"samples": 2.5}, "samples=2.5: expected a whole"), ({"epochs": -1.0}, "epochs=-1.0: expected a number above 0"),
     ({"samples": 10, "epochs": 1.0}, "samples and epochs: give one"), ({"timeout": 0}, "timeout=0: expected"),
     ({"deadline": "2x"}, "deadline='2x': expected a duration with its unit"),
     ({"data": "/no/such/dir"}, "data='/no/such/dir': no such directory"),
     ({"loaders": "w2"}, "loaders: loader settings read real data; name it with data=DIR")],
)  # fmt: skip
def test_a_python_caller_is_told_its_argument_not_a_flag(given, start):
    message = said(**given)
    assert message.startswith(start) and " --" not in message, message


@pytest.mark.parametrize(
    ("given", "start"),
    [({"batch": 0}, "--batch '0': expected a batch"), ({"samples": 10, "epochs": 1.0}, "--samples and --epochs"),
     ({"deadline": "2x"}, "--deadline '2x': expected"), ({"loaders": "w2"}, "--loaders: loader settings read real "
     "data; name it with --data DIR")],
)  # fmt: skip
def test_the_command_is_told_its_flag(given, start):
    assert said(flags=True, **given).startswith(start)


def test_good_values_pass():
    assert advise.check(advise.Options("tiny-fcn-r", gpus="T4", samples=100, deadline="2h", budget_s=60))[1] == 7200
