"""Pipeline parallelism (frameworks/torch/pipeline.py): the balancing, the chain a forward is cut into, and one
pipeline step on 2 gloo processes (or 2 GPUs over NCCL) against the unsplit model on the same micro-batches."""

import socket
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from dlperf.frameworks.torch import backend as torch_backend
from dlperf.frameworks.torch import ddp
from dlperf.frameworks.torch import pipeline as pp
from dlperf.protocol import Cell
from dlperf.worker.child import exit_now
from dlperf.workloads import BUILTIN

# ----------------------------------------------------------------------------------------------------------------------
# Balancing: costs -> cut points


@pytest.mark.parametrize(
    "costs,stages,starts",
    [
        ([1, 1, 1, 1], 2, [2]),
        ([3, 1, 1, 1], 2, [1]),  # the costly first unit alone
        ([1, 1, 1, 3], 2, [3]),
        ([1, 2, 3, 4, 5, 6, 7, 8, 9], 3, [5, 7]),  # 15 | 13 | 17: no cut does better than 17
        ([5, 5], 2, [1]),
        ([0, 0, 0], 3, [1, 2]),  # every stage at least one unit, even of no cost
        ([1, 9, 1], 1, []),
    ],
)
def test_balance_cuts_where_the_costliest_stage_is_cheapest(costs, stages, starts):
    assert pp.balance(costs, stages) == starts


def test_balance_is_optimal_against_every_cut():
    costs = [4.0, 1.0, 7.0, 2.0, 2.0, 3.0, 9.0, 1.0]
    best = min(max(sum(costs[:i]), sum(costs[i:j]), sum(costs[j:])) for i in range(1, 7) for j in range(i + 1, 8))
    i, j = pp.balance(costs, 3)
    assert max(sum(costs[:i]), sum(costs[i:j]), sum(costs[j:])) == best


def test_balance_refuses_more_stages_than_units():
    with pytest.raises(ValueError, match="2 units cannot make 3"):
        pp.balance([1.0, 2.0], 3)


# ----------------------------------------------------------------------------------------------------------------------
# The chain


def plan_of(name: str, stages: int = 2, micro: int = 2) -> pp.Plan:
    step = torch_backend.build(BUILTIN[name], "cpu", "fp32")
    return pp.plan(step.model, step.inputs[:micro], step.targets[:micro], step.loss_fn, step.sync, stages)


def test_a_forward_is_cut_where_one_tensor_passes():
    plan = plan_of("tiny-resnet-56")
    names = [n for n, _ in plan.costs]
    # a residual block is one unit (its input lives on for the shortcut); the pooling between blocks and fc is one
    assert names == ["stem.0", "stem.1", "stem.2", "blocks.0", "blocks.1", "blocks.2", "mean", "fc"]
    assert plan.split_by == "measured" and all(c > 0 for _, c in plan.costs)
    assert len(plan.split) == len(plan.cuts) == 1 and plan.split[0] in names[1:]
    assert plan.shapes[-1] == ([2, 10], "float32")  # the last stage's output: the logits of a micro-batch


def test_fcn_is_cut_between_its_layers_and_activations():
    plan = plan_of("tiny-fcn-s", stages=3)
    assert [n for n, _ in plan.costs] == ["layers.0", "sigmoid", "layers.1", "sigmoid_1", "layers.2", "sigmoid_2",
                                           "layers.3"]  # fmt: skip
    assert len(plan.split) == 2


def test_costs_by_flops_count_each_unit():
    step = torch_backend.build(BUILTIN["tiny-fcn-s"], "cpu", "fp32")  # widths 64, 32, 32, 32, 64; batch 2 here
    traced = pp.trace(step.model)
    modules = [pp.module_of(traced, g) for g in pp.units(traced, step.inputs[:2])]
    flops = pp.unit_costs(modules, step.inputs[:2], step.targets[:2], step.loss_fn, step.sync, "flops")
    # a linear layer's forward and backward: 3 products of 2 x a x b (the first layer's input needs no gradient)
    assert flops[0] == 2 * (2 * 2 * 64 * 32) and flops[2] == 3 * (2 * 2 * 32 * 32) and flops[1] == 0


class Skip(nn.Module):
    """Its input is added to its output: no point between the layers passes one tensor alone."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x)) + x


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:  # data-dependent: fx cannot trace it
            return self.a(x)
        return x


@pytest.mark.parametrize(
    "model,reason", [(Skip(), "fewer than 2 stages"), (Branchy(), "cannot be traced into one chain")]
)
def test_a_model_that_is_not_a_chain_cannot_be_split(model, reason):
    x = torch.randn(2, 4)
    with pytest.raises(NotImplementedError, match=reason):
        pp.plan(model, x, torch.zeros(2, dtype=torch.long), torch_backend.cross_entropy, lambda: None, 2)


def test_a_chain_that_does_not_give_the_forward_is_refused():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    traced = pp.trace(model)
    modules = [pp.module_of(traced, g) for g in pp.units(traced, torch.randn(2, 4))]
    pp.check_chain(model, modules, torch.randn(2, 4))  # the true chain passes
    with pytest.raises(NotImplementedError, match="do not give its forward"):
        pp.check_chain(model, modules[::-1], torch.randn(2, 4))


def test_modes_other_than_fp32_are_refused():
    pp.check_mode("fp32")
    with pytest.raises(NotImplementedError, match="bf16 in a pipeline"):
        pp.check_mode("bf16")


@pytest.mark.gpu
def test_a_stage_on_a_gpu_waits_for_it_and_reads_the_allocators_peak():
    """PipelineStep's sync and memory figure on one GPU, around a stand-in step that holds 64 MiB more at its peak
    (the whole pipeline, over NCCL, needs 2 GPUs: test_a_pipeline_step_is_the_unsplit_step)."""
    device = torch.device("cuda", 0)
    stage = SimpleNamespace(device=device, step=lambda: torch.ones(2**24, device=device).sum())
    stage.sync = lambda: pp.PipelineStep.sync(stage)
    torch.cuda._sleep(100_000_000)  # 10^8 cycles, tens of ms: a sync that does not wait returns while it runs
    stage.sync()
    assert torch.cuda.current_stream(device).query(), "sync() returned while the GPU was busy"
    before = torch.cuda.memory_allocated(device)
    memory = pp.PipelineStep.memory_of_step(stage)
    assert set(memory) == {"cuda_allocator_peak_bytes"} and memory["cuda_allocator_peak_bytes"] >= before + 2**26


# ----------------------------------------------------------------------------------------------------------------------
# One step on 2 processes (gloo, or NCCL on 2 GPUs) against one process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_step(rank: int, world: int, port: int, name: str, schedules: tuple[str, ...], micro: int, device: str,
             out: dict) -> None:  # fmt: skip
    """A rank: one pipeline step of each schedule, built afresh in one process group; for each, its loss (last
    stage), its stage's parameters after the update and the batch it drew. On CUDA (NCCL, one GPU per rank) also
    whether its sync waits for the GPU, and its memory figure."""
    torch.set_num_threads(1)
    backend = "nccl" if device == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        group = ddp.Group(rank, world, rank, backend)
        for parallel in schedules:
            out[(parallel, rank)] = pipeline_step(name, parallel, micro, device, world, group)
    finally:
        dist.destroy_process_group()
    exit_now(0)  # as a worker ends: gloo's destructors in the interpreter's teardown abort now and then (SIGABRT)


def pipeline_step(name: str, parallel: str, micro: int, device: str, world: int, group: ddp.Group) -> dict:
    cell = Cell(name, "torch", device, 1, "fp32", nproc=world, scaling="strong", parallel=parallel,
                microbatches=micro)  # fmt: skip
    train = pp.build(stepped(name), cell, group)
    loss = train.step()
    found = {"loss": None if loss is None else loss.item(), "split": train.decided.split,
             "params": {k: v.detach().cpu().clone() for k, v in train.module.named_parameters()},
             "batch": (train.inputs.cpu(), train.targets.cpu())}  # fmt: skip
    if device == "cuda":
        found["sync_waits"] = sync_waits(train)
        found["stage_bytes"] = sum(p.numel() * p.element_size() for p in train.module.parameters())
        found["memory"] = train.memory_of_step()  # one more pipeline step: every rank takes it
    return found


def sync_waits(train: pp.PipelineStep) -> bool:
    """Whether the step's sync returns only once its GPU is idle: a kernel that spins for 10^8 cycles (tens of ms)
    is queued first, so a sync that does not wait returns while it still runs."""
    torch.cuda._sleep(100_000_000)
    train.sync()
    return torch.cuda.current_stream(train.device).query()


def reference(name: str, micro: int, batch=None) -> tuple[float, dict[str, torch.Tensor]]:
    """The unsplit model, one process: the mean of the micro-batches' losses, its gradient, one update; on `batch`
    (inputs, targets) when given, else on the one the backend draws on the CPU."""
    step = torch_backend.build(stepped(name), "cpu", "fp32")
    if batch is not None:
        step.inputs, step.targets = batch
    step.optimizer.zero_grad(set_to_none=True)
    xs, ys = step.inputs.tensor_split(micro), step.targets.tensor_split(micro)
    loss = torch.stack([step.loss_fn(step.model(x), y) for x, y in zip(xs, ys, strict=True)]).mean()
    loss.backward()
    if step.clip_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_(step.model.parameters(), step.clip_grad_norm)
    step.optimizer.step()
    return loss.item(), {k: v.detach() for k, v in step.model.named_parameters()}


CLIP = 0.05  # below tiny-lstm's gradient norm here (about 0.19): its clipping, over both stages' gradients, applies


def stepped(name: str):
    """The workload both sides step: a workload that clips its gradients clips them at CLIP, so that clipping acts
    (at its own 5.0 it never would on one step of tiny-lstm, and a pipeline clipping each stage alone would pass)."""
    w = BUILTIN[name]
    clips = w.optimizer.clip_grad_norm is not None
    return replace(w, optimizer=replace(w.optimizer, clip_grad_norm=CLIP)) if clips else w


@pytest.mark.parametrize(
    "name,micro,device",
    [
        ("tiny-lstm", 2, "cpu"),  # the pipeline case of the fast run (make test)
        pytest.param("tiny-resnet-56", 4, "cpu", marks=pytest.mark.slow),
        pytest.param("tiny-fcn-r", 4, "cuda", marks=pytest.mark.gpu(2)),
    ],
)
def test_a_pipeline_step_is_the_unsplit_step(name, micro, device):
    """Both schedules, 2 stages: the same loss, and after the update the same parameters, as the whole model
    stepping once on the mean of the same micro-batches' losses (BatchNorm sees each micro-batch alone in both;
    tiny-lstm's gradient clipping is over both stages' gradients, and its batch-first output, not contiguous from
    2 sequences on, crosses to the next stage). On 2 GPUs over NCCL, against the CPU on the batch the GPUs drew
    (CUDA's generator is not the CPU's), within float32's differences between the two; and each rank's sync waits for
    its GPU, and its memory figure is the CUDA allocator's peak, above its stage's parameters and their gradients."""
    rtol, atol = (1e-5, 1e-6) if device == "cpu" else (1e-4, 1e-5)
    schedules = ("gpipe", "1f1b")
    with mp.Manager() as manager:  # one pair of processes steps both, each schedule's stages built afresh
        out = manager.dict()
        mp.spawn(one_step, args=(2, free_port(), name, schedules, micro, device, out), nprocs=2)
        stepped_by = dict(out)
    for parallel in schedules:
        ranks = {rank: stepped_by[(parallel, rank)] for rank in (0, 1)}
        drawn = (ranks[0]["batch"][0], ranks[1]["batch"][1]) if device == "cuda" else None
        want_loss, want = reference(name, micro, drawn)
        assert ranks[0]["loss"] is None and ranks[1]["loss"] == pytest.approx(want_loss, rel=rtol)
        assert ranks[0]["split"] == ranks[1]["split"]  # rank 0 decided for both
        got = {**ranks[0]["params"], **ranks[1]["params"]}
        assert set(got) == set(want) and not set(ranks[0]["params"]) & set(ranks[1]["params"])  # each stage its own
        for k, v in want.items():
            torch.testing.assert_close(got[k], v, rtol=rtol, atol=atol, msg=f"{parallel}: {k}")
        if device == "cuda":
            for rank in ranks.values():
                assert rank["sync_waits"], f"{parallel}: sync() returned while the GPU was busy"
                assert set(rank["memory"]) == {"cuda_allocator_peak_bytes"}, rank["memory"]
                assert rank["memory"]["cuda_allocator_peak_bytes"] >= 2 * rank["stage_bytes"] > 0, rank


def test_a_single_layer_is_one_part_fewer_than_two_stages():
    x = torch.randn(2, 8)
    with pytest.raises(NotImplementedError, match=r"^its forward has 1 part that can run one after another, "):
        pp.plan(nn.Linear(8, 3), x, torch.zeros(2, dtype=torch.long), torch_backend.cross_entropy, lambda: None, 2)
