"""The PyTorch definitions of the Shi et al. (2016) networks: parameter counts, shapes, one training step each."""

import dataclasses
import math

import pytest

from conftest import require

torch = require("torch")

from dlperf.frameworks.torch import backend as torch_backend  # noqa: E402
from dlperf.frameworks.torch.models import build_model  # noqa: E402
from dlperf.workloads.shi2016 import BUILTIN, SUITE, TINY  # noqa: E402

# The numbers printed in shared/reference/shi2016.md, typed again here so that an edit to shi2016.py cannot make the
# code and the reference agree by accident.
REFERENCE_PARAMS = {
    "fcn-s": 117_997_696,
    "alexnet-s": 62_378_344,
    "resnet-50": 25_557_032,
    "fcn-r": 14_205_962,
    "alexnet-r": 85_098,
    "resnet-56": 855_050,
    "lstm": 6_182_672,
}


def _count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def _on_meta(workload):
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        return build_model(workload)


def _batch(workload, n: int, device: str = "cpu"):
    shape = (n, *workload.input.shape)
    with torch.device(device):
        if workload.input.kind == "tokens":
            return torch.randint(workload.input.vocab, shape)
        return torch.randn(shape)


def _expected_output(workload, n: int) -> tuple[int, ...]:
    if workload.input.kind == "tokens":
        return (n, workload.input.shape[0], workload.outputs)  # a prediction at every position
    return (n, workload.outputs)


def test_suite_is_the_seven_networks():
    assert {w.name for w in SUITE} == set(REFERENCE_PARAMS)


@pytest.mark.parametrize("workload", SUITE, ids=lambda w: w.name)
def test_full_size_parameter_counts(workload):
    count = _count(_on_meta(workload))
    assert count == workload.params
    assert count == REFERENCE_PARAMS[workload.name]


@pytest.mark.parametrize("workload", SUITE, ids=lambda w: w.name)
def test_full_size_output_shapes(workload):
    model = _on_meta(workload)
    assert tuple(model(_batch(workload, 2, "meta")).shape) == _expected_output(workload, 2)


def test_resnet56_without_bias_matches_the_reference():
    resnet56 = BUILTIN["resnet-56"]
    workload = dataclasses.replace(resnet56, config={**resnet56.config, "bias": False})
    assert _count(_on_meta(workload)) == 853_018


@pytest.mark.parametrize("workload", TINY, ids=lambda w: w.name)
def test_tiny_parameter_counts_and_shapes(workload):
    torch.manual_seed(0)
    model = build_model(workload)
    assert workload.params is not None and _count(model) == workload.params
    assert tuple(model(_batch(workload, 3)).shape) == _expected_output(workload, 3)


@pytest.mark.parametrize("workload", TINY, ids=lambda w: w.name)
def test_tiny_step_trains(workload):
    train = torch_backend.build(workload, "cpu", "fp32")
    with torch.no_grad():
        first_loss = train.loss_fn(train.model(train.inputs), train.targets).item()
    # Random labels and a freshly initialised net: the softmax starts close to uniform.
    assert abs(first_loss - math.log(workload.outputs)) < 0.5
    before = [p.detach().clone() for p in train.model.parameters()]
    train.step()
    unchanged = [n for (n, p), a in zip(train.model.named_parameters(), before, strict=True) if torch.equal(a, p)]
    # A bias right before BatchNorm (ResNet-56's convolutions) has a zero gradient: BN removes any constant shift.
    assert all(name.endswith("bias") for name in unchanged)
    assert len(unchanged) < len(before) / 2
