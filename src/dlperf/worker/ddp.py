"""The DDP worker: one process of a data-parallel cell (a `DDPTask`), started by torchrun (`runner/launch.py`).

    python -m torch.distributed.run ... -m dlperf.worker.ddp TASK.json EVENTS.jsonl

Each process writes its own events, EVENTS.jsonl.rankR, flushed per event like the plain worker's. All processes
take the same number of steps (a process that stopped early would leave the others waiting in an all-reduce): each
step's time is the maximum over the processes, and the warm-up and stopping rules of the one timer run on those
maxima and on a clock made of them, so every process decides alike. Each process still records its own step times;
the cell's time is the slowest process's median. Before the first timed step, a barrier.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType, SimpleNamespace

from dlperf.figures import CommFigures
from dlperf.frameworks.common import heap
from dlperf.measure.timer import SYNCHRONIZED, timed_step, warm_up
from dlperf.parallel import STRATEGIES
from dlperf.protocol import Built, Comm, DDPTask, Done, Ranks, Reporter, Warmup
from dlperf.worker.cell import affinity, check_loss, count_flops, measure_memory, pin, said_out_of_memory, timed_samples
from dlperf.worker.child import exit_now, serve
from dlperf.workloads import Workload

Engine = SimpleNamespace | ModuleType  # a framework's processes: torch's (`torch_engine`) or TensorFlow's module


class AgreedClock:
    """Seconds as the sum of agreed step times: the same on every process, so time limits end the loop alike."""

    def __init__(self) -> None:
        self.elapsed = 0.0

    def __call__(self) -> float:
        return self.elapsed


def torch_engine() -> SimpleNamespace:
    """What the worker needs of its framework's processes (TensorFlow's: `worker/multiworker.py`): threads, the
    group joined, the step built, the framework's version, and the group's collectives outside the timed step."""
    from dlperf.frameworks.torch import backend as torch_backend
    from dlperf.frameworks.torch import ddp as torch_ddp
    from dlperf.frameworks.torch import parallel as torch_parallel

    return SimpleNamespace(configure_threads=torch_backend.configure_threads, init=torch_ddp.init,
                           build=torch_parallel.build, version=torch_backend.version, reduce=torch_ddp.reduce,
                           barrier=lambda group: torch_ddp.barrier(), gather=torch_ddp.gather,
                           per_rank=torch_ddp.per_rank, loss_check=torch_backend.loss_check)  # fmt: skip


def measure(task: DDPTask, emit: Reporter, engine: Callable[[], Engine] = torch_engine) -> None:
    """`engine` imports the framework: after the allocator's mode is applied, as in a one-process cell."""
    kept = heap.applied(task.cell.mode)  # the allocator's mode, before the framework's import (`worker/cell.py`)
    framework = engine()
    cell = task.cell
    settings = {**framework.configure_threads(cell.threads), **kept}
    start = time.perf_counter()
    group = framework.init(cell.device, task.group_timeout_s)
    train = framework.build(Workload.from_json(task.workload), cell, group)
    noted = {"nvtx": "not emitted: a multi-process cell has no NVTX ranges yet"} if task.nvtx else {}
    timing = {"timing": f"{SYNCHRONIZED}; the step of the slowest process"}
    emit(Built(train.params, time.perf_counter() - start, {**settings, **train.settings(), **noted, **timing},
               framework.version()))  # fmt: skip
    clock, mine = AgreedClock(), []

    def run() -> float:
        """One step; its slowest time over the processes (this process's own is kept in `mine`)."""
        mine.append(timed_step(train.step, train.sync))
        (slowest,) = framework.reduce([mine[-1]], group)  # outside the timed region
        clock.elapsed += slowest
        return slowest

    framework.barrier(group)
    warm = warm_up(run, task.timer, clock=clock)
    emit(Warmup(warm.steps, warm.steady, warm.times))
    mine.clear()
    sampled = timed_samples(run, task.timer, emit, clock=clock, own=lambda _: mine[-1])
    # Not measured: while the processes wait on each other's sockets the kernel is busy in ways no process is
    # charged for (here 3.9 of 9.4 busy CPU-seconds with two processes): busy time that is not this process's
    # would wrongly say another program ran.
    unmeasured = {"others_cpu_share": None, "others_unread": None}
    emit(replace(sampled, **unmeasured, median_s=statistics.median(mine) if mine else None))
    if task.count_flops:
        emit(count_flops(train))
    memory = measure_memory(train)  # every rank's, always: memory per rank is what sets strategies apart
    if task.measure_memory:
        emit(memory)
    figures = {**train.communication(), **framework.per_rank(train, group, memory.figures), "strategy": cell.parallel}
    emit(Comm(CommFigures.of(figures)))
    everyone = framework.gather(mine, group)
    if group.local_rank == 0:  # every node stores every process's steps, so a node's store holds the whole job
        emit(Ranks(everyone))
    if task.loss_check and group.rank == 0:  # last, alone: the others wait to leave the group together
        check_loss(task, sampled.median_s, framework, Workload.from_json(task.workload), emit)
    emit(Done())


def run_process(task: DDPTask, emit: Reporter, engine: Callable[[], Engine] = torch_engine) -> None:
    pin((task.rank_cpus or {}).get(os.environ.get("LOCAL_RANK", "0")))
    emit(affinity())
    world = int(os.environ.get("WORLD_SIZE") or 0)  # torchrun's, and dlperf's spawner's (`worker/multiworker.py`)
    strategy = STRATEGIES.get(task.cell.parallel)  # a str finds its StrEnum key; None for no strategy of a process
    share = world if strategy and strategy.shares_batch and world > 1 else None
    with said_out_of_memory(task, share):  # "out of memory at batch 16, 8 a process: MemoryError: ...", as a
        measure(task, emit, engine)  # one-process cell says it


def main(argv: list[str]) -> int:
    """Measure, then leave the process group: together when this process finished or found the cell unsupported
    (every process decides alike, so none is left waiting), alone when it failed. Its events are on disk first."""
    code = serve(argv, run_process)
    if "torch" in sys.modules:
        from dlperf.frameworks.torch import ddp as torch_ddp

        torch_ddp.close(together=code == 0)
    return code


if __name__ == "__main__":
    exit_now(main(sys.argv))  # every event is on disk: skip the teardown that can abort under gloo
