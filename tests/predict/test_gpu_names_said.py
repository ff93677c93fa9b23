"""A GPU name that is not in the table is said as where it came from: the flag typed (--gpu), a Python caller's
argument (`'Z9000' in gpus`), the store (looked up as stored, never forgivingly), or dlperf's own constant (a bug in
dlperf, not the user's input). Each of these said "--gpu 'Z9000'" before, where no one had typed --gpu."""

import re
from types import SimpleNamespace

import pytest

from dlperf import advise, crossover
from dlperf.errors import UsageError
from dlperf.predict import cost, gpus, memory, roofline
from dlperf.report import cost as cost_view
from dlperf.report import crossover as crossover_view


def said(call) -> str:
    with pytest.raises(UsageError) as caught:
        call()
    return str(caught.value)


def test_a_python_callers_prediction_names_its_argument():
    """A prediction made for a GPU of the caller's own (roofline.predict with a GPU object the table lacks)."""
    mine = roofline.Prediction("My-GPU", "w", "fp32", 8, 0.01, 0.001, "compute")
    work = SimpleNamespace(name="w", batch=8)
    assert said(lambda: cost.costs(work, [mine], 100, "100 samples", {})).startswith("'My-GPU' in predictions: unknown")
    rows = [SimpleNamespace(gpu="My-GPU", mode="fp32")]  # checked before any step is traced
    assert said(lambda: memory.largest_left_out(work, rows, 10)).startswith("'My-GPU' in left_out: unknown GPU")


def test_advise_checked_from_python_names_its_gpus_argument_and_the_command_its_flag():
    assert said(lambda: advise.check(advise.Options("tiny-fcn-r", gpus="Z9000"))).startswith("'Z9000' in gpus: unknown")
    empty = said(lambda: advise.check(advise.Options("tiny-fcn-r", gpus=" ,")))
    assert empty == "gpus: expected one or more GPU names, e.g. gpus='H100-SXM5-80GB,T4'"  # a comma list here
    flagged = advise.Options("tiny-fcn-r", gpus="Z9000", flags=True)
    assert said(lambda: advise.check(flagged)).startswith("--gpu 'Z9000': unknown GPU")


def test_a_name_dlperf_gives_itself_that_the_table_lacks_is_a_bug_not_a_flag(monkeypatch):
    monkeypatch.setattr(crossover_view, "PAPER_GPU", "GTX 1090")
    with pytest.raises(RuntimeError, match=re.escape("dlperf's own GPU name 'GTX 1090' is not in its GPU table")):
        crossover.paper()  # before the paper's networks are counted
    monkeypatch.setattr(gpus, "_CUDA_NAMES", {"NVIDIA H100 80GB HBM3": "H100-SXM9"})
    with pytest.raises(RuntimeError, match="a bug in dlperf, please report it"):
        gpus.for_device("NVIDIA H100 80GB HBM3")


def test_a_stored_name_is_the_tables_gpu_of_that_name_never_a_forgiving_match():
    """A crossover's stored GPU of a run's own --gpu-specs ("T4 16GB", not given now) was priced as the table's T4,
    the GPU a person typing "T4 16GB" means."""
    assert gpus.lookup("T4 16GB").name == "T4" and gpus.known("T4 16GB") is None
    assert cost_view._price("T4 16GB") is None and cost_view._price("T4").gpu == "T4"
    assert gpus.known("t4").name == "T4"  # the table's spelling, normalized as every name is


@pytest.mark.parametrize("name", ["mi300x", "AMD Instinct MI250", "TPU v5e", "Gaudi 3"])
def test_a_gpu_of_another_maker_is_said_to_be_outside_the_table_not_a_near_name(name):
    """`--gpu mi300x` read "did you mean B300?"."""
    line = said(lambda: gpus.lookup(name))
    assert line.startswith(f"--gpu {name!r}: unknown GPU: the table holds NVIDIA GPUs only")
    assert "did you mean" not in line
    assert "did you mean" in said(lambda: gpus.lookup("H1OO-SXM5"))  # a typo of one still gets its near names
