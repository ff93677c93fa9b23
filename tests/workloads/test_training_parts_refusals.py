"""`dlperf.training_parts` refuses what `dlperf run` refuses, in its words and naming the argument: a workload at a
batch out of range (`resnet-50@b0` gave an empty batch, torch.Size([0, 3, 224, 224])), and a device that is no
device (`meta`, `bogus`: torch's ValueError and RuntimeError) or is not present here (cuda on a PyTorch without CUDA:
torch's AssertionError traceback)."""

from __future__ import annotations

import pytest

from conftest import require
from dlperf import training_parts
from dlperf.errors import UsageError

torch = require("torch")

ABSENT = "cuda:99"  # no machine that runs these has a hundred GPUs


def refused(**given) -> str:
    with pytest.raises(UsageError) as caught:
        training_parts(**{"workload": "tiny-fcn-r", **given})
    return str(caught.value)


@pytest.mark.parametrize("batch", [0, 65537])
def test_a_batch_out_of_range_is_refused_as_run_refuses_it(batch):
    said = refused(workload=f"resnet-50@b{batch}")
    assert said == f"workload 'resnet-50@b{batch}': the batch after @b must be from 1 to 65,536"


def test_a_batch_in_range_is_the_batch_built():
    assert training_parts("tiny-fcn-r@b3")[3].shape[0] == 3


@pytest.mark.parametrize("device", ["meta", "bogus", "tpu"])
def test_an_unknown_device_is_refused_naming_the_argument(device):
    assert refused(device=device) == f"device: unknown device {device!r} (expected cpu, cuda, cuda:N or mps)"


def test_a_device_not_present_is_refused_naming_the_argument():
    present = "cpu" if not torch.cuda.is_available() else ""  # with GPUs, the list names them too
    said = refused(device=ABSENT)
    assert said.startswith(f"device: {ABSENT!r} is not present on this machine (present: {present}"), said


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: cuda is present")
def test_cuda_on_a_machine_without_it_is_one_line():
    assert refused(device="cuda") == "device: 'cuda' is not present on this machine (present: cpu)"


@pytest.mark.parametrize("device", ["cpu,cuda", None, 0])
def test_one_device_is_expected(device):
    assert refused(device=device) == f"device={device!r}: expected one device, cpu, cuda, cuda:N or mps"


def test_a_torch_device_is_taken_as_its_name():
    assert training_parts("tiny-fcn-r@b2", device=torch.device("cpu"))[3].device.type == "cpu"


def test_an_unknown_workload_names_the_argument():
    assert refused(workload="tiny-fcn").startswith("workload: unknown workload 'tiny-fcn' (did you mean")
