"""Sharded data parallelism with FSDP2 (`torch.distributed.fsdp.fully_shard`), in a process torchrun started.

The usual FSDP2 recipe: each layer-ish submodule (`units`) sharded on its own, then the root, over a device mesh of
every process. Each rank holds a 1/N shard of every parameter, gradient and optimizer state (DTensors); a layer's
parameters are all-gathered before its forward and again before its backward, its gradients reduce-scattered. The
train step is the torch backend's; its optimizer is rebuilt over the sharded parameters, since `fully_shard` swaps
every parameter for a new DTensor one (a user's optimizer too, with its own groups and hyper-parameters). The batch
is DDP's: each process its share of the total (strong scaling) or the workload's batch (weak scaling: the planner
sets the total), on its own data (synthetic, or a user's `make_batch`'s).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

from dlperf.frameworks.common import comm
from dlperf.frameworks.common.strategy import StrategyStep
from dlperf.frameworks.torch import ddp
from dlperf.frameworks.torch.build import build as build_step
from dlperf.frameworks.torch.opcount import call
from dlperf.frameworks.torch.optimizers import parameter_names, rebuild_optimizer, regrouped
from dlperf.frameworks.torch.step import TorchStep
from dlperf.modes import strategy_refusal
from dlperf.protocol import Cell
from dlperf.vocab import OUT_OF_MEMORY_SAID
from dlperf.workloads.base import Workload


class FSDPStep(StrategyStep):
    """The torch backend's step with its model sharded by FSDP2. `params` is the whole model's count; each rank
    computes the whole model on its share of the batch (its layers all-gathered), so the job's FLOPs are every
    rank's count, times N."""

    def __init__(self, step: TorchStep, group: ddp.Group, workload: Workload, mode: str,
                 whole_only: str | None = None) -> None:  # fmt: skip
        super().__init__(group, step.params, step)
        self.workload, self.mode, self.per_process_batch = workload, mode, workload.batch
        self.mesh = init_device_mesh(group.device.type, (group.world,))
        names = parameter_names(step.model)
        self.whole_only = whole_only  # why the model is sharded as one unit, the root, if it is
        self.sharded = shard(step.model, self.mesh, per_unit=whole_only is None)
        reoptimize(step, names)

    def communication(self) -> dict[str, Any]:
        local = self.local_copy()
        return communication(self, local, sum(p.numel() * p.element_size() for p in local.trainable))

    def local_copy(self) -> TorchStep:
        """The same step on an unsharded model in this process, on this rank's batch: its compute alone. Built when
        asked (after the memory figures, which it would otherwise swell)."""
        local = build_step(self.workload, str(self.group.device), self.mode)
        local.inputs, local.targets = self.inner.inputs, self.inner.targets
        return local

    def strategy_settings(self) -> dict[str, Any]:
        one = {"fsdp_root_only": self.whole_only} if self.whole_only else {}
        return {"per_process_batch": self.per_process_batch, "fsdp_units": self.sharded, **one}


def units(model: torch.nn.Module) -> list[str]:
    """The submodules sharded on their own, by name: the model's children with parameters, a ModuleList's or a
    Sequential's elements taken one by one (an FCN's layers, a ResNet's blocks). Each becomes one all-gather
    before its forward, so a layer's full parameters live only while it runs. A submodule that shares a parameter
    with a module outside it (a language model's embedding tied to its output layer) is left to the root, which
    FSDP2 needs to hold a shared parameter once."""
    found: list[str] = []

    def walk(prefix: str, module: torch.nn.Module) -> None:
        for name, child in module.named_children():
            path = f"{prefix}{name}"
            if isinstance(child, torch.nn.ModuleList | torch.nn.Sequential):
                walk(f"{path}.", child)
            elif any(True for _ in child.parameters()):
                found.append(path)

    walk("", model)
    owners: dict[int, set[str]] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        for p in module.parameters(recurse=False):
            owners.setdefault(id(p), set()).add(path)
    return [u for u in found if all(o == u or o.startswith(f"{u}.") for p in model.get_submodule(u).parameters()
                                    for o in owners[id(p)])]  # fmt: skip


def shard(model: torch.nn.Module, mesh, per_unit: bool = True) -> list[str]:
    """fully_shard each unit (`per_unit`), then the root (which takes what no unit holds); the units' names."""
    names = units(model) if per_unit else []
    for name in names:
        fully_shard(model.get_submodule(name), mesh=mesh)
    fully_shard(model, mesh=mesh)
    return names


def reoptimize(step: TorchStep, names: dict[int, str], sharded: bool = True) -> None:
    """The step's optimizer (the workload's or the user's own), still without state, rebuilt over the model's current
    parameters, its groups and their values kept (`optimizers.regrouped`; `names`: the parameters' names before they
    were replaced): sharding and parallelizing replace each nn.Parameter, and the old optimizer would update the
    replaced ones. Under fp16, a `sharded` step's gradient scaler is FSDP's, which all-reduces the overflow check:
    every rank skips a step when any rank's shard overflowed."""
    opt = step.optimizer
    step.trainable = [p for p in step.model.parameters() if p.requires_grad]
    step.optimizer = rebuild_optimizer(opt, regrouped(opt, names, step.model))
    if sharded and step.scaler is not None:
        step.scaler = ShardedGradScaler(step.device.type)


def local_step(workload: Workload, cell: Cell, group: ddp.Group, name: str) -> TorchStep:
    """The torch backend's step of `workload` on this rank's device; NotImplementedError (the same on every rank)
    for what strategy `name` does not measure."""
    if why := strategy_refusal(name, cell.mode):
        raise NotImplementedError(why)
    return build_step(workload, str(group.device), cell.mode)


def build(workload: Workload, cell: Cell, group: ddp.Group) -> FSDPStep:
    """The FSDP2 step of `workload`: its `batch` is the job's total, split evenly over the processes."""
    local = ddp.share(workload, group)
    step = local_step(local, cell, group, "fsdp")
    ddp.draw_own_batch(step, local, group)
    train = FSDPStep(step, group, local, cell.mode)
    if train.sharded and (why := fails(train)):  # built again, every rank alike, its root the one unit
        step = local_step(local, cell, group, "fsdp")
        ddp.draw_own_batch(step, local, group)
        train = FSDPStep(step, group, local, cell.mode, whole_only=why)
    return train


def fails(train: FSDPStep) -> str | None:
    """Why a forward and backward of the model sharded unit by unit fail (once, untimed), the same on every rank;
    None when they run. A forward that reads a unit's parameters without calling the unit (`F.linear(x,
    self.fc.weight)`) finds them sharded, since FSDP2 gathers a unit's parameters in its own forward: such a model is
    sharded as one unit, its root, whose forward gathers them all, as a user of FSDP2 would have to. Any other
    failure is raised by the rank that failed, its exit ending the job (torchrun stops the others): at once, running
    out of memory (`out_of_memory`) or an error the same step raises unsharded too (the user's model, on this rank
    alone perhaps); an error raised only sharded, once the others have not said theirs failed too
    (`ddp.failed_everywhere`: a rank failing alone leaves them waiting in an all-gather it will never join, which no
    collective could reach; an all-reduce there hung every rank until the group's timeout). A rank whose step ran
    asks nothing: every rank joined the step's collectives, and one failing after the last of them gives up."""
    began = time.perf_counter()
    try:
        forward_backward(train.inner)
    except Exception as exc:
        if out_of_memory(exc) or fails_unsharded(train) or not ddp.failed_everywhere(train.group, began):
            raise
        why = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
        return f"sharded unit by unit, its forward and backward raise {why}"
    finally:
        train.inner.model.zero_grad(set_to_none=True)
    return None


def forward_backward(step: TorchStep) -> None:
    with step.autocast():
        loss = step.loss_fn(call(step.model, step.inputs), step.targets)
    loss.backward()


def fails_unsharded(train: FSDPStep) -> bool:
    """Whether the step that failed sharded fails on an unsharded copy of the model in this process too (no
    collective): then it failed on its own, not for the sharding. A copy that does not fit in memory tells neither,
    and is taken for the sharding, as before."""
    try:
        forward_backward(train.local_copy())
    except Exception as exc:
        return not out_of_memory(exc)
    return False


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is running out of memory: torch's OutOfMemoryError (a GPU's), Python's MemoryError, or the CPU
    allocator's RuntimeError ("DefaultCPUAllocator: can't allocate memory", under a memory limit): what the worker
    reports as out of memory (`worker/child.describe`)."""
    text = str(exc).lower()
    return isinstance(exc, torch.OutOfMemoryError | MemoryError) or any(said in text for said in OUT_OF_MEMORY_SAID)


def communication(train: StrategyStep, local: TorchStep, moved: int | None) -> dict[str, Any]:
    """Where a sharded step's time goes (untimed, after the timed steps), as DDP's `communication` says it:

    - `local_step_s`: `local`, the same step of the unsharded model on the same inputs in this process: what this
      rank's compute costs alone;
    - `gradient_bytes`: `moved`, the gradient bytes the step reduces, when it reduces gradients;
    - `step_s`: the strategy's step; `exposed_comm_s`: it minus the local step (`common.comm`: alternated, medians,
      the slowest process's): the communication that compute did not hide, and the strategy's own bookkeeping
      (FSDP2's copies into and out of its all-gather buffers; DTensor's dispatch), part of its cost."""
    group = train.group
    exposed = comm.measure(
        (local.step, local.sync), (train.step, train.sync), before=ddp.barrier, agree=ddp.slowest(group)
    )
    return {"gradient_bytes": moved, **asdict(exposed), "backend": group.backend, "world": group.world}
