"""One rank's untimed first step failing under FSDP or tensor parallelism (frameworks/torch/fsdp.py, tp.py): the
rank raises its error at once, joining no collective. Before, it went on to agree with the others in an all-reduce
while they waited in the sharded forward's all-gather it would never join: every rank hung until the process group's
timeout (a user's model raising on rank 1 under `--nproc 2 --parallel fsdp`: the cell stored `timeout` after the
--timeout's 90 s, rank 0's "exceeded --timeout" its reason). One process, the collectives refused."""

from types import SimpleNamespace

import pytest


class Collective(AssertionError):
    """A collective this rank called: the others, waiting in another one, would never answer it."""


@pytest.fixture
def no_collective(monkeypatch, torch):
    """ddp.reduce, the agreement both checks end with, refused; what it was asked, where allowed (`agreed`)."""
    from dlperf.frameworks.torch import ddp

    asked: list[list[float]] = []

    def reduce(values, group, op="max"):
        if not group.allowed:
            raise Collective(f"a collective: ddp.reduce({values})")
        asked.append(values)
        return values

    monkeypatch.setattr(ddp, "reduce", reduce)
    return asked


def _step(fails_with=None):
    """A torch step of a two-layer model whose forward raises `fails_with` (an exception) when given."""
    import torch

    from dlperf.frameworks.torch.step import TorchStep

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)

        def forward(self, x):
            if fails_with is not None:
                raise fails_with
            return self.fc2(torch.relu(self.fc1(x)))

    model = Net()
    batch = (torch.randn(4, 4), torch.randint(2, (4,)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    return TorchStep(model, batch, torch.nn.functional.cross_entropy, optimizer, None, torch.device("cpu"))


def _out_of_memory():
    import torch

    return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def _fsdp_train(sharded, unsharded, allowed=False):
    group = SimpleNamespace(rank=1, world=2, allowed=allowed)
    return SimpleNamespace(inner=sharded, group=group, local_copy=lambda: unsharded)


def test_fsdp_first_step_failing_on_one_rank_raises_it_without_a_collective(no_collective):
    """Out of memory, and an error the model raises unsharded too (a user's forward raising on this rank alone),
    are this rank's own: raised at once, as they were raised."""
    from dlperf.frameworks.torch import fsdp

    oom = _out_of_memory()
    with pytest.raises(type(oom), match="CUDA out of memory"):
        fsdp.fails(_fsdp_train(_step(oom), _step()))
    own = RuntimeError("rank 1's own forward raised")
    with pytest.raises(RuntimeError, match="rank 1's own forward raised"):
        fsdp.fails(_fsdp_train(_step(own), _step(own)))
    assert no_collective == []


def test_fsdp_first_step_failing_only_sharded_is_still_agreed(no_collective):
    """A forward that fails sharded but runs unsharded (it reads a unit's weights outside the unit) fails alike on
    every rank: agreed, and the model sharded as one unit; so is one whose unsharded copy does not fit in memory,
    which tells neither way."""
    from dlperf.frameworks.torch import fsdp

    mixed = RuntimeError("aten.addmm.default got mixed torch.Tensor and DTensor")
    why = f"sharded unit by unit, its forward and backward raise RuntimeError: {mixed}"
    assert fsdp.fails(_fsdp_train(_step(mixed), _step(), allowed=True)) == why
    assert fsdp.fails(_fsdp_train(_step(mixed), _step(_out_of_memory()), allowed=True)) == why
    assert fsdp.fails(_fsdp_train(_step(), _step(), allowed=True)) is None
    assert no_collective == [[1.0], [1.0], [0.0]]


def test_tp_split_forward_running_out_of_memory_raises_it_without_a_collective(no_collective):
    from dlperf.frameworks.torch import tp

    train = SimpleNamespace(inner=_step(_out_of_memory()), group=SimpleNamespace(allowed=False), styles={})
    with pytest.raises(type(_out_of_memory()), match="CUDA out of memory"):
        tp.check_split(train, [], "net")
    assert no_collective == []
