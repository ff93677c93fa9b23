"""A user's own model over processes (frameworks/torch/ddp.py, fsdp.py, tp.py, pipeline.py): DDP, FSDP2, tensor
parallelism and a pipeline against the same model in one process, on 2 gloo processes, with the user's batch maker,
loss, optimizer (two parameter groups of their own hyper-parameters) and gradient clipping; what tp cannot split
refused in its words."""

import json
import os
from pathlib import Path

import pytest

from conftest import FAST, dlperf, require
from dlperf.protocol import Cell
from dlperf.store import Store
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload
from frameworks.torch.test_torch_fsdp_tp import _free_port, gathered_batch

MODELS = """
import numpy as np
import torch
import dlperf


class MLP(torch.nn.Module):
    def __init__(self, head=False):
        super().__init__()
        self.fc1, self.fc2, self.out = torch.nn.Linear(6, 8), torch.nn.Linear(8, 6), torch.nn.Linear(6, 3)
        self.head = torch.nn.Linear(6, 3) if head else None  # defined, never used in the forward

    def forward(self, x):
        return self.out(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class Mixed(MLP):
    def forward(self, x):  # a softmax over fc1's features: tp's slices of them would each be normalized alone
        return self.out(torch.relu(self.fc2(torch.softmax(self.fc1(x), -1))))


def batch(n, device):
    return torch.randn(n, 6, device=device), torch.randint(3, (n,), device=device)


def groups(params):  # the weights decayed, the biases not, each group at its own learning rate
    params = list(params)
    return torch.optim.AdamW([{"params": [p for p in params if p.dim() > 1], "weight_decay": 0.5},
                              {"params": [p for p in params if p.dim() == 1], "weight_decay": 0.0, "lr": 0.02}],
                             lr=0.05)


def make(model=None, maker=batch):
    return dlperf.user_workload("mlp", model or MLP(), maker, torch.nn.functional.cross_entropy, batch_size=8,
                                optimizer=groups, clip_grad_norm=0.05)


def drawn(n, device):  # numpy's generators, never seeded: each process draws its own
    x = torch.from_numpy(np.random.rand(n, 6).astype("float32"))
    return x.to(device), torch.from_numpy(np.random.default_rng().integers(3, size=n)).to(device)


class Drawn(MLP):  # its weights drawn by numpy too, out (an odd last layer, whole under tp) included
    def __init__(self):
        super().__init__()
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.from_numpy(np.random.default_rng().normal(0, 0.4, tuple(p.shape)).astype("float32")))


class Hungry(MLP):
    def __init__(self, ranks):
        super().__init__()
        self.ranks = ranks

    def forward(self, x):  # the ranks that run out of memory
        if torch.distributed.get_rank() in self.ranks:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return super().forward(x)


def numpy_batch():
    return make(maker=drawn)


def numpy_weights():
    return make(Drawn())


def hungry():
    return make(Hungry((0, 1)))


class Direct(MLP):
    def forward(self, x):  # fc2's parameters read without calling fc2: FSDP2 gathers them only in fc2's forward
        h = torch.relu(torch.nn.functional.linear(torch.relu(self.fc1(x)), self.fc2.weight, self.fc2.bias))
        return self.out(h)


def mixed():
    return make(Mixed())


def direct():
    return make(Direct())


def unused():
    return make(MLP(head=True))
"""

STEPS = 3


def _workload(source: str, factory: str, batch: int = 8) -> Workload:
    return Workload("mlp", "user", {}, InputSpec("user", (6,)), 0, batch, OptimizerSpec("user"),
                    source=f"{source}:{factory}")  # fmt: skip


def _rank(rank: int, world: int, port: int, out: str, source: str, jobs: tuple[str, ...]) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))  # fmt: skip
    import torch

    from dlperf.frameworks.torch import ddp
    from dlperf.worker.child import exit_now

    torch.set_num_threads(1)
    group = ddp.init("cpu", 60)
    found = {job: JOBS[job](source, group) for job in jobs}
    Path(f"{out}.{rank}").write_text(json.dumps(found))
    ddp.close(together=True)
    exit_now(0)  # as a worker ends: gloo's destructors in the interpreter's teardown abort now and then (SIGABRT)


def _whole(train, group) -> dict:
    """The parameters of `train`'s model (a DDP, FSDP or tp step), made whole."""
    return {n: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach()
            for n, p in train.inner.model.named_parameters()}  # fmt: skip


def _against(train, whole, group, job_loss) -> dict:
    """`train` and `whole` stepped STEPS times: the largest difference of their parameters and of their last losses
    (`job_loss`: the job's loss of this rank's), how much the loss moved, and every rank's parameters (to compare
    across ranks)."""
    from dlperf.frameworks.torch import ddp

    start = float(whole.loss_fn(whole.model(whole.inputs), whole.targets))
    for _ in range(STEPS):
        mine, ref = train.step(), whole.step()
    found = _whole(train, group)
    diff = max((found[n] - p).abs().max().item() for n, p in whole.model.named_parameters())
    return {"diff": diff, "loss_diff": abs(job_loss(float(mine)) - float(ref)), "moved": abs(float(ref) - start),
            "ranks": ddp.gather({n: t.tolist() for n, t in found.items()}, group),
            "weight_decay": [g["weight_decay"] for g in train.inner.optimizer.param_groups],
            "lr": [g["lr"] for g in train.inner.optimizer.param_groups]}  # fmt: skip


def _data_parallel(source: str, group, strategy: str, factory: str = "make") -> dict:
    """Each rank its half of a total batch of 16 against the whole batch (the halves the ranks drew) in one
    process: the mean loss's gradient is the mean of the halves'."""
    import torch

    from dlperf.frameworks.torch import backend, ddp, fsdp

    workload = _workload(source, factory, 16)
    if strategy == "ddp":
        train = ddp.build(workload, "cpu", "fp32", group)
    else:
        train = fsdp.build(workload, Cell("mlp", "torch", "cpu", 1, "fp32", nproc=2, parallel="fsdp"), group)
    whole = backend.build(workload, "cpu", "fp32")
    halves = gathered_batch(train.inner, group)
    whole.inputs, whole.targets = (torch.cat(parts) for parts in halves)
    found = _against(train, whole, group, lambda loss: ddp.reduce([loss], group, op="sum")[0] / group.world)
    settings = {k: v for k, v in train.strategy_settings().items() if k.startswith("fsdp")}
    return {**found, "halves_differ": not torch.equal(*halves[0]), "batch": train.inner.inputs.shape[0], **settings}


def _tensor_parallel(source: str, group, factory: str = "make") -> dict:
    """The whole batch on every rank (the same inputs), against the unsplit model; for a factory that draws from
    numpy (its batch or its weights, apart in each process), against the unsplit model on rank 0's."""
    from dlperf.frameworks.torch import backend, ddp, tp

    workload = _workload(source, factory)
    try:
        train = tp.build(workload, Cell("mlp", "torch", "cpu", 1, "fp32", nproc=2, parallel="tp"), group)
    except NotImplementedError as exc:
        return {"refused": str(exc)}
    whole = backend.build(workload, "cpu", "fp32")
    inputs = ddp.gather([train.inner.inputs.tolist(), train.inner.targets.tolist()], group)
    if factory != "make":
        whole.model.load_state_dict(_whole(train, group))
        whole.inputs, whole.targets = train.inner.inputs, train.inner.targets
    return {**_against(train, whole, group, lambda loss: loss), "plan": train.styles, "inputs": inputs}


def _out_of_memory(source: str, group) -> str:
    """FSDP's untimed first forward and backward running out of memory on every rank's sharded model, what each rank
    raises as the worker says it (one rank alone running out: `test_fsdp_first_step_failing_on_one_rank_raises_it_
    without_a_collective`, in one process, since the other rank would wait in its next all-gather)."""
    import torch

    from dlperf.frameworks.torch import fsdp
    from dlperf.worker.child import describe

    cell = Cell("mlp", "torch", "cpu", 1, "fp32", nproc=2, parallel="fsdp")
    try:
        return f"returned {fsdp.build(_workload(source, 'hungry', 16), cell, group).settings()}"
    except torch.OutOfMemoryError as exc:
        return describe(exc)


def _pipeline(source: str, group) -> dict:
    """This rank's stage, the whole batch in 2 micro-batches, against the unsplit model: its parameters after the
    steps (the clipping's norm is over both stages' gradients), its optimizer's groups."""
    from dlperf.frameworks.torch import backend, pipeline

    workload = _workload(source, "make")
    cell = Cell("mlp", "torch", "cpu", 1, "fp32", nproc=2, parallel="gpipe", microbatches=2)
    train, whole = pipeline.build(workload, cell, group), backend.build(workload, "cpu", "fp32")
    for _ in range(STEPS):
        train.step(), whole.step()
    ref = dict(whole.model.named_parameters())
    return {"diff": max((p - ref[n]).abs().max().item() for n, p in train.module.named_parameters()),
            "weight_decay": [g["weight_decay"] for g in train.optimizer.param_groups],
            "lr": [g["lr"] for g in train.optimizer.param_groups]}  # fmt: skip


def _refused(source: str, group) -> str:
    from dlperf.frameworks.torch import tp

    try:
        tp.build(_workload(source, "mixed"), Cell("mlp", "torch", "cpu", 1, "fp32", nproc=2, parallel="tp"), group)
    except NotImplementedError as exc:
        return str(exc)
    return "built"


def _unused(source: str, group) -> dict:
    """A model with a layer its forward never calls: DDP is told so, and steps."""
    from dlperf.frameworks.torch import ddp

    train = ddp.build(_workload(source, "unused", 16), "cpu", "fp32", group)
    losses = [float(train.step()) for _ in range(STEPS)]
    return {"unused": train.strategy_settings().get("ddp_unused_parameters"), "stepped": len(losses)}


JOBS = {
    "ddp": lambda source, group: _data_parallel(source, group, "ddp"),
    "fsdp": lambda source, group: _data_parallel(source, group, "fsdp"),
    "tp": _tensor_parallel,
    "refused": _refused,
    "unused": _unused,
    "direct": lambda source, group: _data_parallel(source, group, "fsdp", "direct"),
    "gpipe": _pipeline,
    "numpy_batch": lambda source, group: _tensor_parallel(source, group, "numpy_batch"),
    "numpy_weights": lambda source, group: _tensor_parallel(source, group, "numpy_weights"),
    "oom": _out_of_memory,
}


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> list[dict]:
    """Every job of JOBS run by one pair of gloo processes on MODELS, for the tests below (starting the processes
    takes most of the time): what each rank found, by job."""
    require("torch")
    import torch.multiprocessing as mp

    folder = tmp_path_factory.mktemp("user-parallel")
    (folder / "mine.py").write_text(MODELS)
    out = str(folder / "found")
    mp.spawn(_rank, args=(2, _free_port(), out, str(folder / "mine.py"), tuple(JOBS)), nprocs=2, join=True)
    return [json.loads(Path(f"{out}.{rank}").read_text()) for rank in (0, 1)]


def test_a_users_model_under_each_strategy_computes_what_one_process_does(job):
    """The user's optimizer's two groups keep their weight decay and learning rate through FSDP's and tp's rebuild;
    its gradient clipping (0.05, below the gradients' norm: every step clips) is over the whole model's gradients."""
    for found in job:
        for strategy in ("ddp", "fsdp", "tp"):
            got = found[strategy]
            assert got["moved"] > 1e-3, (strategy, got)  # the steps changed the loss: the comparison can fail
            assert got["diff"] < 1e-5 and got["loss_diff"] < 1e-5, (strategy, got)
            assert got["ranks"][0] == got["ranks"][1], strategy  # every rank ends with the same parameters
            assert got["weight_decay"] == [0.5, 0.0] and got["lr"] == [0.05, 0.02], (strategy, got)
        for strategy in ("ddp", "fsdp"):
            assert found[strategy]["halves_differ"] and found[strategy]["batch"] == 8, strategy
        assert found["tp"]["plan"] == {"fc1": "colwise", "fc2": "rowwise"}
        assert found["refused"] == (
            "tp: mlp's forward with its linear layers split in pairs (fc1 colwise, fc2 rowwise) does not give its "
            "output; tensor parallelism needs each pair's first layer to feed the second through element-wise "
            "operations alone (an activation, as in an FCN), the layers paired in the order they are defined in"
        )
        assert found["unused"] == {"unused": ["head.weight", "head.bias"], "stepped": STEPS}
        gpipe = found["gpipe"]  # each stage's weights and biases: both groups, at their own values
        assert gpipe["diff"] < 1e-5 and gpipe["weight_decay"] == [0.5, 0.0] and gpipe["lr"] == [0.05, 0.02], gpipe
        assert found["fsdp"]["fsdp_units"] == ["fc1", "fc2", "out"] and "fsdp_root_only" not in found["fsdp"]
        direct = found["direct"]  # sharded as one unit, the root: FSDP2 as its user would have to run it
        assert direct["fsdp_units"] == [] and direct["fsdp_root_only"].startswith(
            "sharded unit by unit, its forward and backward raise RuntimeError: aten."
        )
        assert direct["diff"] < 1e-5 and direct["loss_diff"] < 1e-5 and direct["moved"] > 1e-3, direct


def test_tp_trains_rank_zeros_batch_and_weights_where_the_user_draws_them_from_numpy(job):
    """A factory drawing its batch (or its weights) from numpy's unseeded generators draws apart in each process
    (the warm parent reseeds numpy after each fork, as a fresh interpreter is seeded): tp's split forward then
    computed rank 0's weights on each rank's own batch, and the cell was refused as a model tp cannot split. Every
    rank now trains rank 0's batch with rank 0's weights, as one process would."""
    for found in job:
        for factory in ("numpy_batch", "numpy_weights"):
            got = found[factory]
            assert "refused" not in got, (factory, got)
            assert got["inputs"][0] == got["inputs"][1], factory  # the same batch on every rank
            # the batch unseeded, the loss may move little (0.0004 once): still 40 times what the ranks may differ by
            assert got["moved"] > 1e-4 and got["diff"] < 1e-5 and got["loss_diff"] < 1e-5, (factory, got)
            assert got["ranks"][0] == got["ranks"][1], factory


def test_fsdp_running_out_of_memory_in_its_first_step_is_raised_as_out_of_memory(job):
    """fsdp.fails' untimed forward and backward caught a CUDA out-of-memory error as a forward reading a layer's
    weights directly: the model was sharded again as one unit, its setting saying it fell back for that reason.
    Now it is raised as the out of memory it is, by every rank that ran out, its own error."""
    own = "out of memory: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert [found["oom"] for found in job] == [own, own], job


def test_fsdp_leaves_a_unit_sharing_a_parameter_with_another_to_the_root(torch):
    """A language model's output layer tied to its embedding: sharded on their own, the two units would each hold
    the one parameter; FSDP2 needs it in one, the root."""
    from dlperf.frameworks.torch import fsdp

    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.mid, self.out = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 10)
            self.out.weight = self.embed.weight

    assert fsdp.units(Tied()) == ["mid"]
    untied = Tied()
    untied.out.weight = torch.nn.Parameter(untied.embed.weight.detach().clone())
    assert fsdp.units(untied) == ["embed", "mid", "out"]


def test_tp_names_what_in_a_users_model_is_not_a_linear_layer(torch):
    from dlperf.frameworks.torch import tp

    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    with pytest.raises(
        NotImplementedError,
        match=r"\(fcn-s, fcn-r, or a model of yours whose parameters all lie in "
        r"linear layers\); mine is not linear layers alone: its 0 \(Embedding\) holds parameters$",
    ):
        tp.plan(model, 2, "mine")


@pytest.mark.slow
def test_a_users_model_over_processes_end_to_end(tmp_path, torch):
    """`dlperf run --workloads mine.py:make --nproc 2 --parallel ddp,fsdp,tp`: every cell measured, with its
    communication figures as a built-in network's; tp on the user's conv net unsupported in tp's words."""
    (tmp_path / "mine.py").write_text(MODELS + CONV)
    db = tmp_path / "d.db"
    done = dlperf("run", "--workloads", f"{tmp_path / 'mine.py'}:make,{tmp_path / 'mine.py'}:conv", "--nproc", "2",
                  "--parallel", "ddp,fsdp,tp", "--threads", "1", *FAST, db=db, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(db, create=False)
    cells = {(c.workload, c.parallel): c for c in store.cells(1)}
    store.close()
    for strategy in ("ddp", "fsdp", "tp"):
        cell = cells["mlp", strategy]
        assert cell.status == "ok" and cell.median_s > 0, (strategy, cell.error)
        assert cell.comm.strategy == strategy and cell.comm.world == 2 and cell.comm.local_step_s > 0
        assert len(cell.comm.param_bytes_rank) == 2
    params = cells["mlp", "ddp"].params
    assert cells["mlp", "ddp"].comm.gradient_bytes == 4 * params and cells["mlp", "ddp"].comm.allreduce_s > 0
    assert cells["mlp", "ddp"].comm.param_bytes_rank == [4 * params, 4 * params]
    assert cells["mlp", "fsdp"].comm.gradient_bytes == 4 * params
    assert sum(cells["mlp", "fsdp"].comm.param_bytes_rank) == 4 * params  # each rank its shard
    assert cells["mlp", "tp"].comm.gradient_bytes is None
    for strategy in ("ddp", "fsdp"):
        assert cells["conv", strategy].status == "ok", (strategy, cells["conv", strategy].error)
    refused = cells["conv", "tp"]
    assert refused.status == "unsupported" and refused.error.endswith("; conv is a conv net"), refused.error


CONV = """

def conv():
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 3))

    def images(n, device):
        return torch.randn(n, 1, 6, 6, device=device), torch.randint(3, (n,), device=device)

    return dlperf.user_workload("conv", model, images, torch.nn.functional.cross_entropy, batch_size=8)
"""


@pytest.mark.parametrize("mode", ["channels_last", "fp32"])
def test_each_process_draws_its_own_batch_in_the_format_the_build_gave_it(torch, mode):
    """DDP's and FSDP's own batch per process replaced the NHWC batch channels_last's build made with an NCHW one."""
    from dlperf.frameworks.torch import ddp
    from dlperf.frameworks.torch.build import build
    from dlperf.workloads import BUILTIN

    local = ddp.share(BUILTIN["tiny-resnet-56"], ddp.Group(1, 2, 1, "gloo"))
    step = build(local, "cpu", mode)
    before = step.inputs.clone()
    ddp.draw_own_batch(step, local, ddp.Group(1, 2, 1, "gloo"))
    assert step.inputs.shape == before.shape and not torch.equal(step.inputs, before)  # this rank's own samples
    assert step.inputs.is_contiguous(memory_format=torch.channels_last) is (mode == "channels_last")
    assert step.inputs.is_contiguous() is (mode != "channels_last")
