"""Pipeline parallelism with torch.distributed.pipelining, in a process torchrun started: one stage per rank.

The model is cut into `--nproc` stages of consecutive parts of its forward; each step feeds `--microbatches`
micro-batches through them by ScheduleGPipe (every forward, then every backward) or Schedule1F1B (forwards and
backwards interleaved once the pipeline is full). Every rank builds the whole model from the same seed, keeps its
stage (a `PipelineStage` built from its own module) and an optimizer of the stage's parameters; activations and
their gradients go between neighbouring ranks by the pipeline's own sends and receives (gloo on CPUs).

The chain: a model's top-level children are rarely its forward (FCN applies an activation between its layers, a
ResNet pools before its classifier), so the forward is read as torch.fx traces it and cut only where one tensor is
all that passes from what came before to what follows. The parts between such points are the units stages are made
of; their chain is run once against model(x) on a micro-batch. Rank 0 traces, checks, times every unit (forward and
backward on one micro-batch, the median of a few) or, when timing fails, counts its FLOPs, balances the stages and
broadcasts its plan: every rank builds the same stages, or finds the cell unsupported alike.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.fx as fx
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata
from torch.utils.flop_counter import FlopCounterMode

from dlperf.frameworks.common import comm
from dlperf.frameworks.common.strategy import StrategyStep, theoretical_bubble
from dlperf.frameworks.torch import ddp
from dlperf.frameworks.torch.build import build as build_step
from dlperf.frameworks.torch.instruments import LiveTensorBytes
from dlperf.frameworks.torch.optimizers import parameter_names, rebuild_optimizer, regrouped
from dlperf.frameworks.torch.step import TorchStep, state_tensors
from dlperf.measure.timer import timed_step
from dlperf.modes import strategy_refusal
from dlperf.protocol import Cell
from dlperf.vocab import Parallel
from dlperf.workloads.base import Workload

SCHEDULES = {Parallel.GPIPE: ScheduleGPipe, Parallel.ONE_F_ONE_B: Schedule1F1B}
COST_REPEATS = 3  # timed forward+backward runs of each unit (after one untimed), their median
CHAIN_RTOL, CHAIN_ATOL = 1e-4, 1e-5  # the chain of units against model(x), fp32


# ----------------------------------------------------------------------------------------------------------------------
# Balancing: pure


def balance(costs: list[float], stages: int) -> list[int]:
    """Where each stage after the first starts: `costs` (one per unit, in order) cut into `stages` consecutive,
    non-empty groups whose costliest group is as cheap as it can be (the linear partition problem, solved exactly)."""
    n = len(costs)
    if not 1 <= stages <= n:
        raise ValueError(f"{n} units cannot make {stages} non-empty stages")
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    # best[k][i]: the smallest costliest-group cost of the first i units in k groups; start[k][i]: its last cut
    best = [[float("inf")] * (n + 1) for _ in range(stages + 1)]
    start = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for i in range(k, n - (stages - k) + 1):
            for j in range(k - 1, i):
                worst = max(best[k - 1][j], prefix[i] - prefix[j])
                if worst < best[k][i]:
                    best[k][i], start[k][i] = worst, j
    cuts, i = [], n
    for k in range(stages, 1, -1):
        i = start[k][i]
        cuts.append(i)
    return cuts[::-1]


# ----------------------------------------------------------------------------------------------------------------------
# The chain: the traced forward cut where one tensor passes


def trace(model: torch.nn.Module) -> fx.GraphModule:
    try:
        traced = fx.symbolic_trace(model)
    except Exception as exc:  # data-dependent control flow, calls fx cannot follow
        why = first_line(exc)
        raise NotImplementedError(f"its forward cannot be traced into one chain of operations ({why})") from exc
    traced.graph.eliminate_dead_code()
    return traced


def first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"


def units(traced: fx.GraphModule, example: torch.Tensor) -> list[list[fx.Node]]:
    """The traced forward's operations grouped into units: a unit ends where the one value alive, for what follows,
    is its own result and a tensor. NotImplementedError when the forward is not one input to one tensor."""
    nodes = [n for n in traced.graph.nodes if n.op != "output"]
    inputs = [n for n in nodes if n.op == "placeholder"]
    (output,) = [n for n in traced.graph.nodes if n.op == "output"]
    if len(inputs) != 1 or output.args[0] is not nodes[-1]:
        raise NotImplementedError("its forward is not one input to one output: it is not a chain")
    ShapeProp(traced).propagate(example)
    order = {n: i for i, n in enumerate(nodes)}
    last_use = {n: max((order.get(u, len(nodes)) for u in n.users), default=-1) for n in nodes}
    groups: list[list[fx.Node]] = [[]]
    live: set[fx.Node] = set()
    for i, node in enumerate(nodes):
        live = {n for n in (*live, node) if last_use[n] > i}  # what is still read after this node
        if node.op == "placeholder":
            continue
        groups[-1].append(node)
        if live == {node} and isinstance(node.meta.get("tensor_meta"), TensorMetadata):
            groups.append([])
    return [g for g in groups if g]


def module_of(traced: fx.GraphModule, nodes: list[fx.Node], contiguous: bool = False) -> fx.GraphModule:
    """The nodes as a module of their own: one input (what the node before them made), their last node's output
    (`contiguous`: made contiguous, as gloo sends only contiguous tensors; an LSTM's batch-first output is not).
    Its submodules and parameters are the traced model's own, shared."""
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    (source,) = {a for n in nodes for a in n.all_input_nodes if a not in nodes}
    env[source] = graph.placeholder("x")
    for n in nodes:
        env[n] = graph.node_copy(n, lambda a: env[a])
    out = env[nodes[-1]]
    graph.output(graph.call_method("contiguous", (out,)) if contiguous else out)
    return fx.GraphModule(traced, graph)


def name_of(nodes: list[fx.Node]) -> str:
    """A unit's name: the innermost module its operations all ran in (`blocks.3`, `layers.1`), else its first
    operation's (`sigmoid_1`: a function the model's own forward calls)."""
    paths = [module_path(n) for n in nodes]
    common = paths[0]
    for p in paths[1:]:
        common = common[: next((i for i, (a, b) in enumerate(zip(common, p, strict=False)) if a != b), len(p))]
    return ".".join(common) or nodes[0].name


def module_path(node: fx.Node) -> list[str]:
    """The qualified name, split, of the module a traced operation ran in (fx records the stack); [] at the top."""
    stack = list(node.meta.get("nn_module_stack") or {})
    return stack[-1].split(".") if stack else []


def check_chain(model: torch.nn.Module, modules: list[torch.nn.Module], x: torch.Tensor) -> None:
    """The chain of units against the model itself, on one micro-batch, from the same random state."""
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(0)
        whole = model(x)
        torch.manual_seed(0)
        y = x
        for m in modules:
            y = m(y)
    if not (isinstance(whole, torch.Tensor) and torch.allclose(whole, y, rtol=CHAIN_RTOL, atol=CHAIN_ATOL)):
        raise NotImplementedError("its parts run one after the other do not give its forward's output")


# ----------------------------------------------------------------------------------------------------------------------
# What each unit costs


def unit_costs(modules, x, y, loss_fn, sync, by: str) -> list[float]:
    """Each unit's forward and backward on one micro-batch, in order (each fed the previous one's output):
    seconds (`by` "measured", the median of COST_REPEATS after one untimed run) or FLOPs (`by` "flops")."""
    costs = []
    for i, m in enumerate(modules):
        last = i == len(modules) - 1
        inp = x.detach().requires_grad_(i > 0 and x.is_floating_point())  # as in the pipeline: not the batch

        def run(m=m, inp=inp, last=last) -> torch.Tensor:
            out = m(inp)
            if last:
                loss_fn(out, y).backward()
            elif out.requires_grad:
                out.backward(torch.ones_like(out))
            return out

        if by == "flops":
            with FlopCounterMode(display=False) as counter:
                out = run()
            costs.append(float(counter.get_total_flops()))
        else:
            out = run()
            costs.append(statistics.median(timed_step(run, sync) for _ in range(COST_REPEATS)))
        m.zero_grad(set_to_none=True)
        x = out.detach()
    return costs


@dataclass(frozen=True)
class Plan:
    """What rank 0 decides and every rank builds: the stages' boundaries and what passes them."""

    cuts: list[str] = field(default_factory=list)  # the traced node each stage but the last ends at
    split: list[str] = field(default_factory=list)  # the unit each stage after the first starts at
    split_by: str = ""  # "measured" or "flops"
    shapes: list[tuple[list[int], str]] = field(default_factory=list)  # each stage's output on a micro-batch
    costs: list[tuple[str, float]] = field(default_factory=list)  # every unit and its cost (seconds or FLOPs)
    unsupported: str = ""  # why the model cannot be a pipeline of this many stages
    error: str = ""  # rank 0 failed deciding


def plan(model, x, y, loss_fn, sync, stages: int) -> Plan:
    """Trace, check and balance `model` into `stages` stages on the micro-batch (x, y)."""
    traced = trace(model)
    groups = units(traced, x)
    if len(groups) < stages:
        parts = f"{len(groups)} part" + ("s" if len(groups) > 1 else "")
        raise NotImplementedError(f"its forward has {parts} that can run one after another, fewer than {stages} "
                                  "stages")  # fmt: skip
    modules = [module_of(traced, g) for g in groups]
    check_chain(model, modules, x)
    try:
        by, costs = "measured", unit_costs(modules, x, y, loss_fn, sync, "measured")
    except RuntimeError:
        by, costs = "flops", unit_costs(modules, x, y, loss_fn, sync, "flops")
    starts = balance(costs, stages)
    ends = [groups[s - 1][-1] for s in starts] + [groups[-1][-1]]
    shapes = [
        (list(n.meta["tensor_meta"].shape), str(n.meta["tensor_meta"].dtype).removeprefix("torch.")) for n in ends
    ]
    names = [name_of(g) for g in groups]
    return Plan(
        [n.name for n in ends[:-1]], [names[s] for s in starts], by, shapes, list(zip(names, costs, strict=True))
    )


def decide(model, x, y, loss_fn, sync, group: ddp.Group) -> Plan:
    """Rank 0's plan, broadcast: every rank builds the same stages, or raises alike."""
    box: list[Any] = [None]
    if group.rank == 0:
        try:
            box[0] = plan(model, x, y, loss_fn, sync, group.world)
        except NotImplementedError as exc:
            box[0] = Plan(unsupported=str(exc))
        except Exception as exc:
            box[0] = Plan(error=first_line(exc))
    dist.broadcast_object_list(box, src=0)
    decided: Plan = box[0]
    if decided.unsupported:
        raise NotImplementedError(f"the model cannot be cut into {group.world} pipeline stages: {decided.unsupported}")
    if decided.error:
        raise RuntimeError(f"rank 0 could not plan the pipeline's stages ({decided.error})")
    return decided


def stage_module(traced: fx.GraphModule, cuts: list[str], rank: int) -> fx.GraphModule:
    """Rank `rank`'s stage: the traced operations after cut `rank - 1` up to cut `rank` (the end for the last)."""
    nodes = [n for n in traced.graph.nodes if n.op not in ("placeholder", "output")]
    ends = [i for i, n in enumerate(nodes) if n.name in cuts]
    bounds = [-1, *ends, len(nodes) - 1]
    return module_of(traced, nodes[bounds[rank] + 1 : bounds[rank + 1] + 1], contiguous=rank < len(cuts))


# ----------------------------------------------------------------------------------------------------------------------
# The step


class NoUpdate:
    """The optimizer of a stage without parameters: torch.optim refuses an empty parameter list."""

    def __init__(self) -> None:
        self.state: dict = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        pass

    def step(self) -> None:
        pass


class PipelineStep(StrategyStep):
    """One rank's stage under its schedule, and the optimizer of the stage's parameters.

    A step is the schedule's step over every micro-batch, then (with the workload's gradient clipping, over every
    stage's gradients: one all-reduce of a scalar) the optimizer's update. Every rank returns when its own part is
    done; the worker's step time is the slowest rank's, so a step lasts until the whole pipeline has finished. The
    stage runs itself: the whole model's step (`inner`) is not kept, only its settings."""

    def __init__(self, inner: TorchStep, module: fx.GraphModule, decided: Plan, cell: Cell,
                 group: ddp.Group) -> None:  # fmt: skip
        super().__init__(group, inner.params)
        self.decided, self.microbatches = decided, cell.microbatches
        self.module, self.loss_fn, self.device = module, inner.loss_fn, group.device
        self.inputs, self.targets, self.clip = inner.inputs, inner.targets, inner.clip_grad_norm
        self.trainable = [p for p in module.parameters() if p.requires_grad]
        opt = inner.optimizer
        # the mode's own implementation (foreach, fused), the groups' own values (a user's: optimizers.regrouped); a
        # stage of no parameters (an activation alone) updates none
        groups = regrouped(opt, parameter_names(inner.model), module) if self.trainable else []
        self.optimizer = rebuild_optimizer(opt, groups) if groups else NoUpdate()
        self.base_settings = inner.settings()
        self.first, self.last = group.rank == 0, group.rank == group.world - 1
        micro = inner.inputs.shape[0] // cell.microbatches
        example = self.inputs[:micro] if self.first else self._activation(decided.shapes[group.rank - 1])
        self.stage = PipelineStage(module, group.rank, group.world, self.device, input_args=example,
                                   output_args=self._activation(decided.shapes[group.rank]))  # fmt: skip
        schedule = SCHEDULES[Parallel(cell.parallel)]
        self.schedule = schedule(self.stage, cell.microbatches, loss_fn=self.loss_fn)
        self.alone_inputs = self._alone_inputs(micro, example)

    def _activation(self, shape: tuple[list[int], str]) -> torch.Tensor:
        """An activation between stages, as the static metadata of a PipelineStage describes it: its gradient is
        sent back (from `requires_grad`, the stages derive what to send and to receive)."""
        return torch.zeros(shape[0], dtype=getattr(torch, shape[1]), device=self.device, requires_grad=True)

    def _alone_inputs(self, micro: int, example: torch.Tensor) -> list[torch.Tensor]:
        """The micro-batches the stage computes alone (`local_step`): the batch's own on the first stage, random
        activations of the shape it receives on the others, which the pipeline differentiates too."""
        if self.first:
            return list(self.inputs.split(micro))
        return [torch.randn_like(example).requires_grad_() for _ in range(self.microbatches)]

    def step(self) -> torch.Tensor | None:
        """One pipeline step; the mean of the micro-batches' losses on the last stage (the workload's loss, as the
        unsplit step's mean over the whole batch), None elsewhere."""
        self.optimizer.zero_grad(set_to_none=True)
        losses: list[torch.Tensor] = []
        args = (self.inputs,) if self.first else ()
        target = self.targets if self.last else None
        self.schedule.step(*args, target=target, losses=losses, return_outputs=False)
        self._clip(together=True)
        self.optimizer.step()
        return torch.stack(losses).mean().detach() if losses else None

    def local_step(self) -> None:
        """The stage's share of a step computed alone, no pipeline around it: the forward and backward of every
        micro-batch, one after the other, then the update."""
        self.optimizer.zero_grad(set_to_none=True)
        targets = self.targets.tensor_split(self.microbatches)
        for x, y in zip(self.alone_inputs, targets, strict=True):
            out = self.module(x)
            if self.last:
                self.loss_fn(out, y).backward()
            else:
                out.backward(torch.ones_like(out))
        self._clip(together=False)
        self.optimizer.step()

    def _clip(self, together: bool) -> None:
        """The workload's gradient clipping by the norm over every stage's gradients (as clip_grad_norm_ computes it
        over the whole model), without reading it on the host."""
        if self.clip is None:
            return
        grads = [p.grad for p in self.trainable if p.grad is not None]
        squares = torch.stack([g.detach().pow(2).sum() for g in grads]).sum() if grads else torch.zeros(())
        if together:
            dist.all_reduce(squares)
        scale = torch.clamp(self.clip / (squares.sqrt() + 1e-6), max=1.0)
        for g in grads:
            g.mul_(scale)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def communication(self) -> dict[str, Any]:
        return communication(self)

    def state_tensors(self) -> dict[str, list[torch.Tensor]]:
        return state_tensors(self.module, self.optimizer)

    def settings(self) -> dict[str, Any]:
        return {**self.base_settings, **self.group_settings(), **self.strategy_settings()}

    def strategy_settings(self) -> dict[str, Any]:
        d = self.decided
        return {"pipeline_schedule": type(self.schedule).__name__, "microbatches": self.microbatches,
                "microbatch_size": self.inputs.shape[0] // self.microbatches, "pipeline_split": d.split,
                "pipeline_split_by": d.split_by, "pipeline_unit_costs": [[n, c] for n, c in d.costs]}  # fmt: skip

    def count_flops(self) -> dict[str, Any] | None:
        """The whole job's FLOPs per step: every stage's forward and backward of every micro-batch, counted on the
        stage computing alone and summed over the ranks. A rank whose counter fails fails them all alike."""
        try:
            with FlopCounterMode(display=False) as counter:
                self.local_step()
            mine, failed = float(counter.get_total_flops()), 0.0
        except Exception:
            mine, failed = 0.0, 1.0
        total, failures = ddp.reduce([mine, failed], self.group, op="sum")
        if failures:
            raise RuntimeError(f"the FLOP counter failed on {int(failures)} of {self.group.world} stages")
        return {"flops_per_step": int(total), "flops_by_dtype": None}

    def memory_of_step(self) -> dict[str, int]:
        """This rank's peak during an untimed pipeline step: the CUDA allocator's, else the live tensor bytes (its
        stage's parameters, gradients, optimizer state, data and the activations its schedule keeps)."""
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.step()
            self.sync()
            return {"cuda_allocator_peak_bytes": torch.cuda.max_memory_allocated(self.device)}
        held = self.state_tensors()
        existing = [*held["params"], *held["grads"], *held["optimizer"], self.inputs, self.targets]
        with LiveTensorBytes(existing) as live:
            self.step()
        return {"live_tensor_peak_bytes": live.peak}


def check_mode(mode: str) -> None:
    """NotImplementedError for a mode the pipeline's stages do not run in."""
    if why := strategy_refusal("gpipe", mode):
        raise NotImplementedError(why)


def build(workload: Workload, cell: Cell, group: ddp.Group) -> PipelineStep:
    """This rank's stage of `workload` (its `batch` the job's total, cut into `cell.microbatches` micro-batches)
    under `cell.parallel`'s schedule; NotImplementedError, alike on every rank, for what cannot be a pipeline."""
    check_mode(cell.mode)
    m = cell.microbatches
    if m < 1 or workload.batch % m:
        raise NotImplementedError(f"a total batch of {workload.batch} does not divide into {m} micro-batches")
    inner = build_step(workload, str(group.device), cell.mode)
    if not (isinstance(inner.inputs, torch.Tensor) and isinstance(inner.targets, torch.Tensor)):
        raise NotImplementedError("its batch is not one input tensor and one target tensor to cut into micro-batches")
    micro = workload.batch // m
    x, y = inner.inputs[:micro], inner.targets[:micro]
    decided = decide(inner.model, x, y, inner.loss_fn, inner.sync, group)
    module = stage_module(trace(inner.model), decided.cuts, group.rank)
    return PipelineStep(inner, module, decided, cell, group)


def communication(train: PipelineStep) -> dict[str, Any]:
    """Where a pipeline step's time goes, measured after the timed steps (untimed): the pipeline step and each
    stage's share of it computed alone (`local_step`), alternated and compared by `common.comm`.

    - `stage_s`: every stage's computing alone; `local_step_s`: the busiest stage's, the step's floor;
    - `exposed_comm_s`: the pipeline step (the slowest rank's) minus that floor: the sends and receives compute did
      not hide *and the bubble*, the time the busiest stage waits while the pipeline fills and drains;
    - `bubble` (= `comm_share`): that share of the step, against `bubble_theory`, (N-1)/(M+N-1) for equal stages
      and free communication."""
    group, stage_s = train.group, []

    def busiest(local_s: float, step_s: float) -> tuple[float, float]:
        stage_s.extend(ddp.gather(local_s, group))
        (slowest,) = ddp.reduce([step_s], group)
        return max(stage_s), slowest

    exposed = comm.measure((train.local_step, train.sync), (train.step, train.sync), before=ddp.barrier,
                           agree=busiest, bound_by=comm.CommBound.PIPELINE)  # fmt: skip
    return {
        **asdict(exposed), "bubble": exposed.comm_share,
        "bubble_theory": theoretical_bubble(group.world, train.microbatches), "stage_s": stage_s,
        "split": train.decided.split, "split_by": train.decided.split_by, "backend": group.backend,
        "world": group.world,
    }  # fmt: skip
