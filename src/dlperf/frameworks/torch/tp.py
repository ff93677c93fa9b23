"""Tensor parallelism with DTensor (`torch.distributed.tensor.parallel.parallelize_module`), in a process torchrun
started.

Consecutive linear layers are split in pairs, Megatron's way: the first by its output features (ColwiseParallel),
the second by its input features (RowwiseParallel), so the activation between them stays on each rank's slice and
one all-reduce of the pair's output (forward) and one of its input's gradient (backward) are all that cross. The
device mesh is every process. Every rank trains the whole batch, the same inputs on every rank: rank 0's, with its
weights (`as_rank_zeros`). It applies to networks made of linear layers only, the fully connected networks FCN-S and
FCN-R or a user's model whose parameters all lie in linear layers: a conv net's or an LSTM's own layers would stay
whole on every rank, so such a cell is `unsupported`, with the reason. Split, the forward must still give the whole
model's output (it would not where the forward does more than element-wise work between a pair's layers, or runs
them out of the order they are defined in): checked once on the cell's batch, and the cell is `unsupported` where it
does not, saying why.
"""

from __future__ import annotations

import math
import time
from functools import partial
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.utils._pytree import tree_flatten, tree_leaves, tree_unflatten

from dlperf.frameworks.common.strategy import StrategyStep
from dlperf.frameworks.torch import ddp, fsdp
from dlperf.frameworks.torch.build import build as build_step
from dlperf.frameworks.torch.opcount import call
from dlperf.frameworks.torch.optimizers import parameter_names
from dlperf.frameworks.torch.peak import tensor_float32
from dlperf.frameworks.torch.step import TorchStep
from dlperf.protocol import Cell
from dlperf.workloads.base import Workload

COLWISE, ROWWISE = "colwise", "rowwise"
STYLES = {COLWISE: ColwiseParallel, ROWWISE: RowwiseParallel}
RTOL, ATOL = 1e-4, 1e-5  # the split forward against the whole one, fp32


def describe(model: torch.nn.Module) -> str:
    """What kind of network `model` is, for the reason tensor parallelism does not apply to it."""
    kinds = {type(m) for m in model.modules()}
    if any(issubclass(k, torch.nn.modules.conv._ConvNd) for k in kinds):
        return "a conv net"
    if any(issubclass(k, torch.nn.RNNBase) for k in kinds):
        return "a recurrent network"
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) and any(True for _ in module.parameters(recurse=False)):
            return f"not linear layers alone: its {name or 'model'} ({type(module).__name__}) holds parameters"
    return "not a stack of two or more linear layers"


def plan(model: torch.nn.Module, world: int, name: str) -> dict[str, str]:
    """Each linear layer's split, by module name: consecutive linear layers paired, colwise then rowwise (an odd
    last one stays whole on every rank). NotImplementedError when `model` has parameters outside linear layers,
    fewer than two of them, or a colwise layer's outputs that do not split evenly over `world`."""
    holders = [(n, m) for n, m in model.named_modules() if any(True for _ in m.parameters(recurse=False))]
    if len(holders) < 2 or not all(isinstance(m, torch.nn.Linear) for _, m in holders):
        raise NotImplementedError(f"tp: tensor parallelism splits pairs of consecutive linear layers, so dlperf "
                                  f"applies it only to the fully connected networks (fcn-s, fcn-r, or a model of "
                                  f"yours whose parameters all lie in linear layers); {name} is "
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
        names = parameter_names(step.model)
        parallelize_module(step.model, self.mesh, {n: STYLES[s]() for n, s in styles.items()})
        fsdp.reoptimize(step, names)
        step._clip = partial(clip_split, step)  # as nvtx.py and the profiler wrap it: the step calls it by name

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
        local.inputs, local.targets = self.inner.inputs, self.inner.targets
        names = parameter_names(local.model)
        for name, style in self.styles.items():
            parent, _, child = name.rpartition(".")
            whole = local.model.get_submodule(name)
            ins, outs = whole.in_features, whole.out_features
            ins, outs = (ins, outs // self.group.world) if style == COLWISE else (ins // self.group.world, outs)
            part = torch.nn.Linear(ins, outs, bias=whole.bias is not None, device=self.group.device)
            setattr(local.model.get_submodule(parent), child, part)
        fsdp.reoptimize(local, names, sharded=False)
        return local

    def strategy_settings(self) -> dict[str, Any]:
        return {"per_process_batch": self.workload.batch, "tp_plan": self.styles}


def build(workload: Workload, cell: Cell, group: ddp.Group) -> TPStep:
    """The tensor-parallel step of `workload`: every rank the whole batch (`workload.batch`, the job's total)."""
    step = fsdp.local_step(workload, cell, group, "tp")
    styles = plan(step.model, group.world, workload.name)
    as_rank_zeros(step, group, workload.name)
    whole = output_of(step)
    train = TPStep(step, group, workload, cell.mode, styles)
    check_split(train, whole, workload.name)
    return train


def as_rank_zeros(step: TorchStep, group: ddp.Group, name: str) -> None:
    """Rank 0's batch and weights on every rank (broadcast once, untimed): tensor parallelism trains one batch with
    one model split over the ranks, each split layer's weights taken from rank 0 and each rank's input to the first
    layer of a pair taken as alike. A user's factory may draw from a generator dlperf does not seed, which differs
    between processes: numpy's global one (seeded from the system's entropy in each, as in a fresh interpreter: the
    warm parent's `reseed` after a fork), or a `default_rng()`. The split forward then differed from each rank's
    whole one, and the cell was refused as a model tp cannot split. A batch of another structure or other dtypes on
    another rank is refused (NotImplementedError, alike on every rank); its shapes are rank 0's."""
    leaves, spec = tree_flatten((step.inputs, step.targets))
    mine = [(tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else None for t in leaves]
    everyone = ddp.gather((str(spec), mine), group)
    kinds = [(s, [d and d[1] for d in m]) for s, m in everyone]
    if any(k != kinds[0] for k in kinds):
        raise NotImplementedError(f"tp: {name}'s batch is not alike on every rank (its structure or dtypes differ): "
                                  f"tensor parallelism trains one batch on every rank")  # fmt: skip
    with torch.no_grad():
        for t in [*step.model.parameters(), *step.model.buffers()]:
            t.copy_(rank_zeros(t, t.shape, group))
        got = [rank_zeros(t, d[0], group) if d else t for t, d in zip(leaves, everyone[0][1], strict=True)]
    step.inputs, step.targets = tree_unflatten(got, spec)


def rank_zeros(t: torch.Tensor, shape: tuple[int, ...], group: ddp.Group) -> torch.Tensor:
    """Rank 0's `t` (of `shape` there), contiguous, broadcast to the other ranks, as `t` requires grad or not."""
    out = t.detach().contiguous() if group.rank == 0 else t.new_empty(shape)
    dist.broadcast(out, 0)
    return out.requires_grad_(t.requires_grad)


def clip_split(step: TorchStep) -> None:
    """The workload's gradient clipping by the norm over the whole model's gradients, as clip_grad_norm_ computes
    it, where some are split (DTensors: each norm made whole by an all-reduce) and some whole on every rank (an odd
    last layer): torch's clip_grad_norm_ refuses such a mix."""
    if step.clip_grad_norm is None:
        return
    grads = [p.grad for p in step.trainable if p.grad is not None]
    norms = [torch.linalg.vector_norm(g) for g in grads]
    total = torch.linalg.vector_norm(torch.stack([n.full_tensor() if hasattr(n, "full_tensor") else n for n in norms]))
    scale = torch.clamp(step.clip_grad_norm / (total + 1e-6), max=1.0)
    for g in grads:
        ddp.local(g).mul_(scale)


def output_of(step: TorchStep) -> list[torch.Tensor]:
    """The model's output on the step's inputs, its tensors whole: evaluated (no dropout), in fp32, no gradients.
    Its products in fp32 even in the tf32 mode (`build._set_tf32`): TensorFloat-32 rounds each product's inputs to 10
    bits, where a split layer's inputs, an fp32 rounding apart from the whole one's, round apart, 4-6 times the
    tolerance (fcn-s, fcn-r) on a model that splits exactly."""
    training = step.model.training
    step.model.eval()
    try:
        with torch.no_grad(), tensor_float32(step.device, False):
            out = call(step.model, step.inputs)
    finally:
        step.model.train(training)
    tensors = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
    return [t.full_tensor() if hasattr(t, "full_tensor") else t for t in tensors]


def check_split(train: TPStep, whole: list[torch.Tensor], name: str) -> None:
    """NotImplementedError (alike on every rank) unless the split model gives `whole`, the output it gave whole. A
    split forward that raises on this rank (the whole one ran) raises that NotImplementedError where every rank's
    raised (`ddp.failed_everywhere`); else this rank's own error is raised, as is running out of memory, at once:
    the others may be waiting in a collective of the split forward that it will never join, and its exit ends the
    job (torchrun stops them), where an all-reduce there aborted gloo ('rank 1: worker killed by SIGABRT')."""
    began = time.perf_counter()
    try:
        split = output_of(train.inner)
    except Exception as exc:  # e.g. a layer fed the whole activation where it holds a slice of its inputs
        if fsdp.out_of_memory(exc) or not ddp.failed_everywhere(train.group, began):
            raise
        why = f": it raises {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
        raise NotImplementedError(refusal(train, name, why)) from None
    same = len(split) == len(whole) and all(
        a.shape == b.shape and torch.allclose(a, b, rtol=RTOL, atol=ATOL) for a, b in zip(split, whole, strict=False)
    )
    (differs,) = ddp.reduce([0.0 if same else 1.0], train.group)
    if differs:
        raise NotImplementedError(refusal(train, name, ""))


def refusal(train: TPStep, name: str, why: str) -> str:
    pairs = ", ".join(f"{n} {s}" for n, s in train.styles.items())
    return (f"tp: {name}'s forward with its linear layers split in pairs ({pairs}) does not give its output{why}; "
            f"tensor parallelism needs each pair's first layer to feed the second through element-wise operations "
            f"alone (an activation, as in an FCN), the layers paired in the order they are defined in")  # fmt: skip
