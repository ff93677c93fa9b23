"""The DDP worker: one process of a data-parallel cell, started by torchrun (`runner/distributed.py`).

    python -m torch.distributed.run ... -m dlperf.runner.ddp_worker TASK.json RESULT_PREFIX

Each process writes its own JSON lines, RESULT_PREFIX.rankR.jsonl, flushed per event like the plain worker's. All
processes take the same number of steps (a process that stopped early would leave the others waiting in an
all-reduce): each step's time is the maximum over the processes, and the warm-up and stopping rules of the one timer
run on those maxima and on a clock made of them, so every process decides alike. Each process still records its own
step times; the cell's time is the slowest process's median. Before the first timed step, a barrier.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import time
import traceback

from dlperf.measure import system
from dlperf.measure.timer import TimerConfig, timed_step, warm_up
from dlperf.runner.distributed import exit_now
from dlperf.runner.worker import Events, _describe, timed_samples
from dlperf.workloads import Workload


class AgreedClock:
    """Seconds as the sum of agreed step times: the same on every process, so time limits end the loop alike."""

    def __init__(self) -> None:
        self.elapsed = 0.0

    def __call__(self) -> float:
        return self.elapsed


def measure(task: dict, emit: Events, group_timeout_s: float) -> None:
    from dlperf.frameworks.torch import backend as torch_backend
    from dlperf.frameworks.torch import ddp as torch_ddp

    cell, cfg = task["cell"], TimerConfig(**task["timer"])
    settings = torch_backend.configure_threads(cell["threads"])
    start = time.perf_counter()
    group = torch_ddp.init(cell["device"], group_timeout_s)
    train = torch_ddp.build(Workload.from_json(task["workload"]), cell["device"], cell["mode"], group)
    emit("built", params=train.params, build_s=time.perf_counter() - start, settings={**settings, **train.settings()})
    clock, mine = AgreedClock(), []

    def run() -> float:
        """One step; its slowest time over the processes (this process's own is kept in `mine`)."""
        mine.append(timed_step(train.step, train.sync))
        (slowest,) = torch_ddp.reduce([mine[-1]], group)  # outside the timed region
        clock.elapsed += slowest
        return slowest

    torch_ddp.barrier()
    warm = warm_up(run, cfg, clock=clock)
    emit("warmup", steps=warm.steps, steady=warm.steady, times=warm.times)
    mine.clear()
    sampled = timed_samples(run, cfg, emit, clock=clock, own=lambda _: mine[-1])
    # Not measured: while the processes wait on each other's sockets the kernel is busy in ways no process is
    # charged for (here 3.9 of 9.4 busy CPU-seconds with two processes): busy time that is not this process's
    # would wrongly say another program ran.
    sampled["others_cpu_share"] = None
    sampled["median_s"] = statistics.median(mine) if mine else None
    emit("sampled", **sampled)
    emit("flops", **(train.count_flops() or {"flops_per_step": None}))
    emit("memory", **train.memory_of_step())
    emit("comm", **torch_ddp.communication(train))
    everyone = torch_ddp.gather(mine, group)
    if group.local_rank == 0:  # every node stores every process's steps, so a node's store holds the whole job
        emit("ranks", samples=everyone)
    emit("done")


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        task = json.load(f)
    rank = int(os.environ.get("RANK", 0))
    emit = Events(f"{argv[2]}.rank{rank}.jsonl")
    emit("start", pid=os.getpid(), python=sys.executable, rank=rank, world=int(os.environ.get("WORLD_SIZE", 1)),
         local_rank=int(os.environ.get("LOCAL_RANK", 0)), host=socket.gethostname())  # fmt: skip
    finished = False
    try:
        cpus = (task.get("pin_cpus") or {}).get(os.environ.get("LOCAL_RANK", "0"))
        if cpus:
            os.sched_setaffinity(0, cpus)
        emit("affinity", cpus=sorted(os.sched_getaffinity(0)), thread_env=system.inherited_thread_env(os.environ))
        measure(task, emit, task.get("group_timeout_s", 600.0))
        finished = True
    except NotImplementedError as exc:  # every process decides alike: none is left waiting
        emit("unsupported", reason=str(exc) or "not supported")
        finished = True
    except Exception as exc:
        emit("error", error=_describe(exc), traceback=traceback.format_exc())
        return 1
    finally:
        if "torch" in sys.modules:
            from dlperf.frameworks.torch import ddp as torch_ddp

            torch_ddp.close(together=finished)
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv))  # every event is on disk: skip the teardown that can abort under gloo
