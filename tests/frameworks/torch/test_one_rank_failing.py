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


@pytest.fixture
def others_failed(monkeypatch, torch):
    """ddp.failed_everywhere, the store's answer whether every other rank's check failed too, set by the test
    (`answer`); how many times it was asked (`asked`)."""
    from dlperf.frameworks.torch import ddp

    said = SimpleNamespace(answer=True, asked=0)

    def failed_everywhere(group, began):
        said.asked += 1
        return said.answer

    monkeypatch.setattr(ddp, "failed_everywhere", failed_everywhere, raising=False)
    return said


def test_fsdp_first_step_failing_only_sharded_is_agreed_where_every_rank_failed(no_collective, others_failed):
    """A forward that fails sharded but runs unsharded (it reads a unit's weights outside the unit) fails alike on
    every rank: agreed, without a collective, and the model sharded as one unit; so is one whose unsharded copy does
    not fit in memory, which tells neither way."""
    from dlperf.frameworks.torch import fsdp

    mixed = RuntimeError("aten.addmm.default got mixed torch.Tensor and DTensor")
    why = f"sharded unit by unit, its forward and backward raise RuntimeError: {mixed}"
    assert fsdp.fails(_fsdp_train(_step(mixed), _step())) == why
    assert fsdp.fails(_fsdp_train(_step(mixed), _step(_out_of_memory()))) == why
    assert fsdp.fails(_fsdp_train(_step(), _step())) is None
    assert no_collective == [] and others_failed.asked == 2


def test_a_step_failing_only_sharded_on_one_rank_raises_its_own_error_without_a_collective(
    no_collective, others_failed
):
    """A user's forward raising on rank 1 alone, only when its layer's weight is sharded or split (under `--nproc 2
    --parallel fsdp,tp`). FSDP's rank 1 went on to agree in an all-reduce while rank 0 waited in the sharded
    forward's all-gather: the job hung until --timeout (stored `timeout` after 61 s with --timeout 60, rank 0's
    "exceeded --timeout"); tp's rank 1 aborted gloo, its all-reduce meeting rank 0's of the split forward (`rank 1:
    worker killed by SIGABRT`, not its error). The other rank not saying its step failed too, the rank raises its
    own error."""
    from dlperf.frameworks.torch import fsdp, tp

    others_failed.answer = False
    own = ValueError("rank 1 cannot take a sharded fc1")
    with pytest.raises(ValueError, match="rank 1 cannot take a sharded fc1"):
        fsdp.fails(_fsdp_train(_step(own), _step()))
    train = SimpleNamespace(inner=_step(own), group=SimpleNamespace(allowed=False), styles={})
    with pytest.raises(ValueError, match="rank 1 cannot take a sharded fc1"):
        tp.check_split(train, [], "net")
    assert no_collective == [] and others_failed.asked == 2
    others_failed.answer = True  # every rank's split forward raised: refused alike
    with pytest.raises(NotImplementedError, match="does not give its output: it raises ValueError: rank 1 cannot"):
        tp.check_split(train, [], "net")


def test_every_rank_failing_is_told_from_one_failing_alone_in_the_jobs_store(monkeypatch, torch):
    """ddp.failed_everywhere on a store of its own, as rank 1 of 2: rank 0 said its check failed too; rank 0 said
    nothing (waiting in a collective) within the wait, and rank 1 gave up, saying so; rank 0's check, failing after
    that (its collective cut off by rank 1's exit), finding rank 1 gave up."""
    import time

    import torch.distributed as dist

    from dlperf.frameworks.torch import ddp

    store = dist.HashStore()
    monkeypatch.setattr(ddp, "default_store", lambda: store)
    monkeypatch.setattr(ddp, "FAILED_ALIKE_S", 0.05)
    monkeypatch.setattr(ddp, "_agreements", [0])
    one, zero = SimpleNamespace(rank=1, world=2), SimpleNamespace(rank=0, world=2)
    store.set("dlperf/failed/1/0", "1")
    assert ddp.failed_everywhere(one, time.perf_counter())
    assert not ddp.failed_everywhere(one, time.perf_counter())  # the job's second check: rank 0 silent
    assert store.get("dlperf/failed/2/gave-up") == b"1"
    monkeypatch.setattr(ddp, "_agreements", [1])
    assert not ddp.failed_everywhere(zero, time.perf_counter())


def test_tp_split_forward_running_out_of_memory_raises_it_without_a_collective(no_collective):
    from dlperf.frameworks.torch import tp

    train = SimpleNamespace(inner=_step(_out_of_memory()), group=SimpleNamespace(allowed=False), styles={})
    with pytest.raises(type(_out_of_memory()), match="CUDA out of memory"):
        tp.check_split(train, [], "net")
    assert no_collective == []
