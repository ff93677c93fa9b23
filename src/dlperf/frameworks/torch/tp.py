"""Tensor parallelism with DTensor (`torch.distributed.tensor.parallel.parallelize_module`), in a process torchrun
started.

Consecutive linear layers are split in pairs, Megatron's way: the first by its output features (ColwiseParallel),
the second by its input features (RowwiseParallel), so the activation between them stays on each rank's slice and
one all-reduce of the pair's output (forward) and one of its input's gradient (backward) are all that cross. The
device mesh is every process. Every rank trains the whole batch, the same inputs on every rank (the backend's data
seed). It applies to networks made of linear layers only, the fully connected networks FCN-S and FCN-R: a conv net's
or an LSTM's own layers would stay whole on every rank, so such a cell is `unsupported`, with the reason.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from dlperf.frameworks.common.strategy import StrategyStep
from dlperf.frameworks.torch import ddp, fsdp
from dlperf.frameworks.torch.build import build as build_step
from dlperf.frameworks.torch.step import TorchStep
from dlperf.protocol import Cell
from dlperf.workloads.base import Workload

COLWISE, ROWWISE = "colwise", "rowwise"
STYLES = {COLWISE: ColwiseParallel, ROWWISE: RowwiseParallel}


def describe(model: torch.nn.Module) -> str:
    """What kind of network `model` is, for the reason tensor parallelism does not apply to it."""
    kinds = {type(m) for m in model.modules()}
    if any(issubclass(k, torch.nn.modules.conv._ConvNd) for k in kinds):
        return "a conv net"
    if any(issubclass(k, torch.nn.RNNBase) for k in kinds):
        return "a recurrent network"
    return "not a stack of two or more linear layers"


def plan(model: torch.nn.Module, world: int, name: str) -> dict[str, str]:
    """Each linear layer's split, by module name: consecutive linear layers paired, colwise then rowwise (an odd
    last one stays whole on every rank). NotImplementedError when `model` has parameters outside linear layers,
    fewer than two of them, or a colwise layer's outputs that do not split evenly over `world`."""
    holders = [(n, m) for n, m in model.named_modules() if any(True for _ in m.parameters(recurse=False))]
    if len(holders) < 2 or not all(isinstance(m, torch.nn.Linear) for _, m in holders):
        raise NotImplementedError(f"tp: tensor parallelism splits pairs of consecutive linear layers, so dlperf "
                                  f"applies it only to the fully connected networks (fcn-s, fcn-r); {name} is "
                                  f"{describe(model)}")  # fmt: skip
    styles = {n: COLWISE if i % 2 == 0 else ROWWISE for i, (n, _) in enumerate(holders[: len(holders) // 2 * 2])}
    split = [m.out_features for n, m in holders if styles.get(n) == COLWISE]
    for n, m in holders:
        if styles.get(n) == COLWISE and m.out_features % world:
            raise NotImplementedError(f"tp: {n}'s {m.out_features} outputs do not split evenly over {world} processes "
                                      f"({dividing(name, split)})")  # fmt: skip
    return styles


def dividing(name: str, widths: list[int]) -> str:
    """Which process counts split every one of `widths` evenly: the divisors of their greatest common divisor."""
    g = math.gcd(*widths)
    return f"{name} splits over a --nproc that divides {g}" if g > 1 else f"{name} splits over no --nproc above 1"


class TPStep(StrategyStep):
    """The torch backend's step with its linear pairs split over the processes. `params` is the whole model's."""

    computing_ranks = 1  # every rank computes its slices of the whole batch: one rank's FLOP count is the job's

    def __init__(self, step: TorchStep, group: ddp.Group, workload: Workload, mode: str,
                 styles: dict[str, str]) -> None:  # fmt: skip
        super().__init__(group, step.params, step)
        self.workload, self.mode, self.styles = workload, mode, styles
        self.mesh = init_device_mesh(group.device.type, (group.world,))
        parallelize_module(step.model, self.mesh, {n: STYLES[s]() for n, s in styles.items()})
        fsdp.reoptimize(step)

    def communication(self) -> dict[str, Any]:
        """DDP's figures, the local step being `local_copy`'s: the step minus this rank's own products alone.
        Chosen over the profiler's time inside the collectives because it is what a user pays for splitting the
        layers, measured like DDP's and FSDP's (so the strategies compare): the all-reduces compute did not hide,
        and DTensor's dispatch around every split layer. No gradient is reduced: `gradient_bytes` is None."""
        return fsdp.communication(self, self.local_copy(), None)

    def local_copy(self) -> TorchStep:
        """The same step on a plain model of this rank's slices (each split layer a Linear of its local shape), on
        the same whole batch, in this process: the products this rank computes, without a collective."""
        local = build_step(self.workload, str(self.group.device), self.mode)
        for name, style in self.styles.items():
            parent, _, child = name.rpartition(".")
            whole = local.model.get_submodule(name)
            ins, outs = whole.in_features, whole.out_features
            ins, outs = (ins, outs // self.group.world) if style == COLWISE else (ins // self.group.world, outs)
            part = torch.nn.Linear(ins, outs, bias=whole.bias is not None, device=self.group.device)
            setattr(local.model.get_submodule(parent), child, part)
        fsdp.reoptimize(local, sharded=False)
        return local

    def strategy_settings(self) -> dict[str, Any]:
        return {"per_process_batch": self.workload.batch, "tp_plan": self.styles}


def build(workload: Workload, cell: Cell, group: ddp.Group) -> TPStep:
    """The tensor-parallel step of `workload`: every rank the whole batch (`workload.batch`, the job's total)."""
    step = fsdp.local_step(workload, cell, group, "tp")
    styles = plan(step.model, group.world, workload.name)
    return TPStep(step, group, workload, cell.mode, styles)
