"""How fast processes exchange data: the all-reduce of float32 messages of several sizes, timed like nccl-tests.

The rank side of `dlperf comm`, imported only by `dlperf.worker.comm` in each process torchrun started, after
the parent fixed the thread variables. Every collective is torch.distributed's own (gloo on CPUs, NCCL on CUDA):
what a data-parallel training step uses, so the figures say what its gradient all-reduce can reach.

Per size: one all-reduce checks the result (rank r sends r + 1, every element must come back as 1 + 2 + ... + world),
`warmup` untimed ones follow, then `iters` timed ones, each after a barrier (all ranks start together) and timed with
the one timer (`dlperf.measure.timer.timed_step`, the device synchronized on both sides). A rank's figure is the
median of its iterations; the job's is the slowest rank's median, the time a user waits for. Every rank ends with
the same figures (they are reduced over all ranks), so any rank can report them.

Imports the standard library, torch and dlperf's standard-library-only modules, nothing else.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from dlperf.frameworks.torch.threads import configure_threads
from dlperf.measure.stats import bus_bandwidth
from dlperf.measure.timer import timed_step
from dlperf.protocol import CommTask

FP32_BYTES = 4


def run(
    task: CommTask,
    on_joined: Callable[[], None] = lambda: None,
    on_size: Callable[[dict[str, Any]], None] = lambda part: None,
) -> dict[str, Any]:
    """Join the process group torchrun set up (its environment), measure every size of `task`, leave the group.
    `on_joined` is called once every rank has joined; `on_size` as each size is measured, with the job's figures of
    that size alone (the answer's shape), so a job stopped later keeps it."""
    settings = configure_threads(task.threads)
    device = device_for(task.backend)
    start = time.perf_counter()
    dist.init_process_group(
        task.backend,
        timeout=timedelta(seconds=task.timeout),
        device_id=device if device.type == "cuda" else None,
    )
    measured, sizes = False, []
    try:
        on_joined()
        sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
        job = job_figures(task, device, settings)
        for nbytes in task.sizes:
            sizes.append(measure_size(nbytes, device, task.warmup, task.iters, sync))
            on_size({**job, "sizes": sizes[-1:], "duration_s": time.perf_counter() - start})
        measured = True
    finally:
        leave(together=measured)
    return {**job, "sizes": sizes, "duration_s": time.perf_counter() - start}


def job_figures(task: CommTask, device: torch.device, settings: dict[str, Any]) -> dict[str, Any]:
    """What every size of the job shares: the collective, where it ran, the processes and their threads."""
    world = dist.get_world_size()
    return {
        "op": "all_reduce",
        "dtype": "float32",
        "backend": task.backend,
        "device": device.type,
        "world": world,
        "nnodes": int(os.environ.get("GROUP_WORLD_SIZE", 1)),  # torchrun's agents: one per node
        "nproc": int(os.environ.get("LOCAL_WORLD_SIZE", world)),
        "threads": task.threads,
        "torch_version": torch.__version__,
        "iters": task.iters,
        "warmup": task.warmup,
        "settings": settings,
    }


def leave(together: bool) -> None:
    """Leave the process group; `together` after a finished measurement: a process that destroys the group while
    another still talks to it aborts (gloo: "terminate called without an active exception", 6 exits in 12 of a
    DDP job without the barrier here). A failed process leaves at once: waiting at a barrier would keep torchrun
    from seeing it fail."""
    if dist.is_initialized():
        try:
            if together:
                dist.barrier()
        finally:
            dist.destroy_process_group()


def device_for(backend: str) -> torch.device:
    """The CPU for gloo; for NCCL this process's own GPU, cuda:LOCAL_RANK (one GPU per process)."""
    if backend != "nccl":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(f"--backend nccl needs CUDA GPUs; torch {torch.__version__} sees none (use --backend gloo)")
    local = int(os.environ.get("LOCAL_RANK", 0))
    if local >= torch.cuda.device_count():
        raise RuntimeError(
            f"--backend nccl: process {local} of this node has no GPU of its own "
            f"({torch.cuda.device_count()} visible): use --nproc {torch.cuda.device_count()} or fewer"
        )
    torch.cuda.set_device(local)
    return torch.device("cuda", local)


def measure_size(nbytes: int, device: torch.device, warmup: int, iters: int, sync) -> dict[str, Any]:
    """One message size: checked, warmed up, timed; the slowest rank's median time and the bandwidths of it."""
    rank, world = dist.get_rank(), dist.get_world_size()
    count = nbytes // FP32_BYTES
    tensor = torch.empty(count, dtype=torch.float32, device=device)
    wrong = wrong_elements(tensor, rank, world, sync)

    def once() -> float:
        tensor.fill_(rank + 1)  # the same message every time, and values that never overflow
        dist.barrier()
        return timed_step(lambda: dist.all_reduce(tensor), sync)

    for _ in range(warmup):
        once()
    times = [once() for _ in range(iters)]
    medians = gathered(statistics.median(times), world, device)
    time_s = max(medians)
    algbw, busbw = bus_bandwidth(nbytes, time_s, world)
    return {
        "bytes": nbytes,
        "count": count,
        "time_s": time_s,
        "algbw": algbw,
        "busbw": busbw,
        "wrong": wrong,
        "rank_medians_s": medians,  # rank order
        "samples_max_s": reduced(times, dist.ReduceOp.MAX, device),  # each iteration's slowest rank
    }


def wrong_elements(tensor: torch.Tensor, rank: int, world: int, sync) -> int:
    """Elements that differ from 1 + 2 + ... + world after one all-reduce of rank + 1, summed over every rank.

    The sums are small integers, exact in float32, so any difference is an error, not rounding."""
    tensor.fill_(rank + 1)
    dist.all_reduce(tensor)
    sync()
    mine = int((tensor != world * (world + 1) // 2).sum())
    return int(reduced([mine], dist.ReduceOp.SUM, device=tensor.device, dtype=torch.int64)[0])


def reduced(values: list, op, device: torch.device, dtype: torch.dtype = torch.float64) -> list:
    """`values` all-reduced element-wise with `op` over every rank (the same list on each)."""
    t = torch.tensor(values, dtype=dtype, device=device)
    dist.all_reduce(t, op=op)
    return t.tolist()


def gathered(value: float, world: int, device: torch.device) -> list[float]:
    """Every rank's `value`, in rank order (the same list on each)."""
    mine = torch.tensor([value], dtype=torch.float64, device=device)
    parts = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(parts, mine)
    return [p.item() for p in parts]
