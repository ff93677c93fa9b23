"""`check_data`'s errors: a line of the data probe's is given the flag it concerns (`--data DIR: no ...`), once;
a probe that failed (ProbeFailed, exit 1) is not the user's data and keeps its own line."""

import pytest

from dlperf.errors import ProbeFailed, UsageError
from dlperf.plan import workloads as plan_workloads
from dlperf.runner import probe
from dlperf.spec import RunSpec
from dlperf.workloads import BUILTIN


@pytest.mark.parametrize(
    "raised, said",
    [
        (UsageError("/d: no train-images-idx3-ubyte"), "--data /d: no train-images-idx3-ubyte"),
        (UsageError("--data /d: not a directory"), "--data /d: not a directory"),  # named once, not '--data --data'
        (ProbeFailed("the data probe was killed by SIGKILL"), "the data probe was killed by SIGKILL"),
    ],
)
def test_the_data_probes_error_names_the_flag_once_and_a_failed_probe_keeps_its_line(monkeypatch, raised, said):
    def ask(*args, **kwargs):
        raise raised

    monkeypatch.setattr(probe, "ask", ask)
    with pytest.raises(UsageError) as caught:
        plan_workloads.check_data(RunSpec(("tiny-fcn-r",), data="/d"), [BUILTIN["tiny-fcn-r"]])
    assert str(caught.value) == said and type(caught.value) is type(raised)
