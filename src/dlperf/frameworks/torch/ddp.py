"""Data-parallel training with DistributedDataParallel, in a process torchrun started: gloo on CPUs, NCCL on CUDA.

Every collective is torch.distributed's own. The train step is the torch backend's, its model wrapped in DDP, so a
DDP cell differs from a plain one only by the gradient all-reduce. Each process trains its share of the total batch
(strong scaling) or the workload's batch (weak scaling: the planner sets the total), on its own data: synthetic for a
built-in network, its `make_batch`'s for a user's model, whose loss, optimizer (DDP keeps the parameters, so the
user's own optimizer, its groups and hyper-parameters) and gradient clipping are the user's as in a plain cell.
"""

from __future__ import annotations

import datetime
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from dlperf.frameworks.common import comm
from dlperf.frameworks.common.strategy import StrategyStep
from dlperf.frameworks.torch import comm as torch_comm
from dlperf.frameworks.torch.build import build as build_step
from dlperf.frameworks.torch.opcount import call
from dlperf.frameworks.torch.step import DATA_SEED, TorchStep, synthetic_batch
from dlperf.measure.stats import bus_bandwidth
from dlperf.modes import strategy_refusal
from dlperf.workloads.base import Workload

DEFAULT_BUCKET_BYTES = 25 * 2**20  # DDP's bucket_cap_mb default
COMM_REPEATS = 10  # standalone all-reduces of the gradient buckets


@dataclass(frozen=True)
class Group:
    rank: int
    world: int
    local_rank: int
    backend: str

    @property
    def device(self) -> torch.device:
        """Each process its own GPU (the node-local rank's); the CPU is shared."""
        return torch.device(f"cuda:{self.local_rank}" if self.backend == "nccl" else "cpu")


def init(device: str, timeout_s: float) -> Group:
    """Join the process group torchrun set up (its environment variables name the rendezvous)."""
    backend = "nccl" if device.startswith("cuda") else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return Group(dist.get_rank(), dist.get_world_size(), local_rank, backend)


def close(together: bool) -> None:
    torch_comm.leave(together)


def reduce(values: list[float], group: Group, op: str = "max") -> list[float]:
    """The element-wise max (or sum) over every process: what all of them then decide on, identically."""
    return torch_comm.reduced(values, dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM, group.device)


FAILED_ALIKE_S = 10.0  # at least this long a rank whose untimed check failed waits for the others to say so too
_agreements = [0]  # this process's agreements so far: each one's keys in the job's store are its own


def failed_everywhere(group: Group, began: float) -> bool:
    """For a rank whose untimed check (begun at `began`, `time.perf_counter`) failed, where the others may not have:
    whether every rank's failed too, each saying so in the job's store. Not a collective: a rank that failed alone
    left the others waiting in one of the step's that it will never join, where an all-reduce hung every rank until
    the group's timeout (FSDP's all-gather) or aborted gloo (tensor parallelism's all-reduce). The others, doing the
    same work, say so within about as long as this rank took (`FAILED_ALIKE_S` at least); False when one has not:
    the rank then raises its own error, and its exit ends the job. A rank that gave up says so first, for the others
    whose collective its exit then cuts off: their failure is not alike, only its consequence."""
    _agreements[0] += 1
    store, key = default_store(), f"dlperf/failed/{_agreements[0]}"
    store.set(f"{key}/{group.rank}", "1")
    wait_s = max(FAILED_ALIKE_S, 2 * (time.perf_counter() - began))
    try:
        store.wait([f"{key}/{rank}" for rank in range(group.world)], datetime.timedelta(seconds=wait_s))
    except dist.DistStoreError:
        store.set(f"{key}/gave-up", str(group.rank))
        return False
    return not store.check([f"{key}/gave-up"])


def default_store() -> dist.Store:
    """The store of the job's process group: its rendezvous's, every process's."""
    return dist.distributed_c10d._get_default_store()


def slowest(group: Group) -> Callable[[float, float], tuple[float, float]]:
    """`common.comm`'s agreement of a process group: each figure the slowest process's."""
    return lambda local_s, step_s: tuple(reduce([local_s, step_s], group))


def barrier() -> None:
    dist.barrier()


def gather(obj: Any, group: Group) -> list[Any]:
    out: list[Any] = [None] * group.world
    dist.all_gather_object(out, obj)
    return out


class DDPStep(StrategyStep):
    """The torch backend's step with its model wrapped in DistributedDataParallel: its `step` (the inner step's
    iteration) returns when DDP's backward has all-reduced every bucket."""

    def __init__(self, step: TorchStep, group: Group, per_process_batch: int) -> None:
        super().__init__(group, step.params, step)
        self.per_process_batch = per_process_batch
        ids = [group.local_rank] if group.backend == "nccl" else None
        self.unused = unused_parameters(step) if step.user is not None else []
        find_unused = step.user is not None and reduce([float(len(self.unused))], group)[0] > 0  # any rank's: all
        self.ddp = DistributedDataParallel(step.model, device_ids=ids, find_unused_parameters=find_unused)
        step.forward = self.ddp

    def local_step(self) -> torch.Tensor:
        """The same step without the all-reduce: what computing alone costs."""
        with self.ddp.no_sync():
            return self.inner.iteration()

    def communication(self) -> dict[str, Any]:
        return communication(self)

    def strategy_settings(self) -> dict[str, Any]:
        unused = {"ddp_unused_parameters": self.unused} if self.unused else {}
        return {"per_process_batch": self.per_process_batch, "bucket_bytes": self.bucket_sizes(), **unused}

    def memory_of_step(self) -> dict[str, int]:
        """The peak of a DDP step, traced anew: the FLOP count's trace ran the model unwrapped (`iteration(model)`),
        without DDP's gradient buckets, which hold a copy of every gradient."""
        return self.inner.memory_of_step(retrace=True)

    def gradient_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.inner.trainable)

    def bucket_sizes(self) -> list[int]:
        """Bytes per all-reduce bucket, as DDP's logger reports them; one bucket per 25 MiB otherwise."""
        try:
            sizes = self.ddp._get_ddp_logging_data().get("bucket_sizes")
            if sizes:
                return [int(s) for s in str(sizes).split(",") if s.strip()]
        except Exception:
            pass
        total = self.gradient_bytes()
        return [min(DEFAULT_BUCKET_BYTES, total - i) for i in range(0, total, DEFAULT_BUCKET_BYTES)]


def build(workload: Workload, device: str, mode: str, group: Group) -> DDPStep:
    """The DDP step of `workload`: its `batch` is the job's total, split evenly over the processes."""
    if why := strategy_refusal("ddp", mode):
        raise NotImplementedError(why)
    local = share(workload, group)
    step = build_step(local, str(group.device), mode)
    draw_own_batch(step, local, group)
    if step.forward is not step.model:
        raise NotImplementedError(f"{mode}: its step does not call the model directly, so DDP cannot wrap it")
    return DDPStep(step, group, local.batch)


def share(workload: Workload, group: Group) -> Workload:
    """`workload` at this process's share of its batch, the job's total split evenly over the processes."""
    if workload.batch % group.world:
        raise NotImplementedError(
            f"a total batch of {workload.batch} does not split evenly over {group.world} processes"
        )
    return replace(workload, batch=workload.batch // group.world)


def draw_own_batch(step: TorchStep, local: Workload, group: Group) -> None:
    """This process's own batch of `local.batch` samples, as data parallelism has each process read its own data:
    drawn after seeding by the rank, synthetic for a built-in network, the user's `make_batch` for a user's model (a
    batch maker that draws no random numbers gives every process the same samples, as it gives every step), in the
    memory format the step's build gave its batch (channels_last's NHWC)."""
    nhwc = isinstance(step.inputs, torch.Tensor) and step.inputs.dim() == 4 and not step.inputs.is_contiguous()
    torch.manual_seed(DATA_SEED + group.rank)
    if step.user is not None:
        step.inputs, step.targets = step.user.make_batch(local.batch, group.device)
    else:
        step.inputs, step.targets = synthetic_batch(local, group.device)
    if nhwc:
        step.inputs = step.inputs.contiguous(memory_format=torch.channels_last)


def unused_parameters(step: TorchStep) -> list[str]:
    """The names of the trainable parameters one forward and backward of the step's model leaves without a gradient
    (untimed, before DDP wraps it): DDP waits for every parameter's gradient unless told that some get none
    (`find_unused_parameters`, which then costs a walk of the autograd graph every step, as it costs the user)."""
    step.model.zero_grad(set_to_none=True)
    with step.autocast():
        loss = step.loss_fn(call(step.model, step.inputs), step.targets)
    loss.backward()
    unused = [n for n, p in step.model.named_parameters() if p.requires_grad and p.grad is None]
    step.model.zero_grad(set_to_none=True)
    return unused


def communication(train: DDPStep) -> dict[str, Any]:
    """Where a DDP step's time goes, measured after the timed steps (untimed):

    - `allreduce_s`: all-reducing the step's gradient buckets alone, on tensors of their sizes (median of
      COMM_REPEATS, the slowest process's), and the algorithm and bus bandwidth that achieves;
    - `local_step_s`: the step under `no_sync`, computing without all-reducing;
    - `exposed_comm_s`: the DDP step minus the local step (`common.comm`: alternated, medians, the slowest
      process's): the communication that compute did not hide."""
    group = train.group
    buckets = train.bucket_sizes()
    (allreduce_s,) = reduce([statistics.median(allreduce_times(train, buckets))], group)
    exposed = comm.measure(
        (train.local_step, train.sync), (train.step, train.sync), before=barrier, agree=slowest(group)
    )
    nbytes = train.gradient_bytes()
    algbw, busbw = bus_bandwidth(nbytes, allreduce_s, group.world)
    return {
        "gradient_bytes": nbytes, "buckets": len(buckets), "allreduce_s": allreduce_s, "algbw_bytes_s": algbw,
        "busbw_bytes_s": busbw, **asdict(exposed), "backend": group.backend, "world": group.world,
    }  # fmt: skip


def allreduce_times(train: DDPStep, buckets: list[int]) -> list[float]:
    """Seconds of COMM_REPEATS all-reduces of tensors of the buckets' sizes, each after a barrier."""
    tensors = [torch.zeros(max(1, size // 4), dtype=torch.float32, device=train.group.device) for size in buckets]
    times = []
    for _ in range(COMM_REPEATS):
        barrier()
        start = time.perf_counter()
        for t in tensors:
            dist.all_reduce(t)
        train.sync()
        times.append(time.perf_counter() - start)
    return times


def local(t: torch.Tensor) -> torch.Tensor:
    """A rank's own part of a tensor: a DTensor's local shard (FSDP2, tensor parallelism), else the tensor."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(local(t).numel() * local(t).element_size() for t in tensors)


MEMORY_PEAKS = ("cuda_allocator_peak_bytes", "live_tensor_peak_bytes")  # a rank's peak in a step, first found


def per_rank(train, group: Group, memory: dict[str, int] | None) -> dict[str, Any]:
    """Every rank's memory, gathered (each strategy's step has `state_tensors`): the parameters, and with their
    gradients and the optimizer's state, held between steps, and the peak during a step (`memory`: this rank's
    Memory figures)."""
    held = train.state_tensors()
    mine = [nbytes(held["params"]), sum(nbytes(v) for v in held.values())]
    peak = next((memory[k] for k in MEMORY_PEAKS if memory and memory.get(k) is not None), None)
    everyone = gather([*mine, peak], group)
    return {"param_bytes_rank": [r[0] for r in everyone], "state_bytes_rank": [r[1] for r in everyone],
            "peak_bytes_rank": None if any(r[2] is None for r in everyone) else [r[2] for r in everyone]}  # fmt: skip
