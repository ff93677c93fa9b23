"""TensorFlow's MultiWorkerMirroredStrategy: one worker process per replica (`--parallel multiworker`), on this
machine or across machines.

dlperf's spawner (`worker/spawn.py`) starts the workers and gives each its TF_CONFIG: the cluster (`host:port` of
every worker, worker 0 first) and this worker's index. TensorFlow does the rest: its gRPC servers meet, worker 0's
coordination service watches the others, and the collective is its own, RING on CPUs and NCCL on GPUs
(`CommunicationOptions`), within the cell's --timeout per collective.

The step is MirroredStrategy's (`mirrored.py`): the backend's model, loss and optimizer, each replica a slice of the
job's total batch, its loss the slice's mean over N, the gradients all-reduced (summed) by the step itself, then
clipped and applied; with one replica per worker, a worker's slice is its index's. What the DDP worker needs of a
process group (`worker/ddp.py`: the slowest step, a barrier, everyone's figures gathered) is a collective of the same
strategy (`Strategy.gather`), outside the timed step.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from dlperf.frameworks.tensorflow import backend as tb
from dlperf.frameworks.tensorflow import mirrored
from dlperf.protocol import Cell
from dlperf.workloads.base import Workload


@dataclass(frozen=True)
class Group:
    """This worker in its job, as the DDP worker reads a process group."""

    rank: int
    world: int
    local_rank: int
    backend: str  # the collective's implementation: RING or NCCL
    strategy: Any


def version() -> str:
    return tb.version()


def configure_threads(threads: int) -> dict[str, Any]:
    return tb.configure_threads(threads)


def loss_check(workload: Workload, device: str, mode: str) -> dict[str, Any]:
    """The mode against fp32 on this worker alone, outside the job's strategy, as a one-process cell checks it."""
    return tb.loss_check(workload, device, mode)


def init(device: str, timeout_s: float) -> Group:
    """Join the job TF_CONFIG describes: on a GPU this worker sees only its local rank's; the collective is RING on
    CPUs, NCCL on GPUs, a collective waiting at most `timeout_s` for a peer."""
    cluster = json.loads(os.environ["TF_CONFIG"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if device.startswith("cuda"):
        gpus = tf.config.list_physical_devices("GPU")
        if len(gpus) <= local_rank:
            raise NotImplementedError(f"MultiWorkerMirroredStrategy on {device}: worker {local_rank} of this node "
                                      f"has no GPU of its own (tensorflow sees {len(gpus)})")  # fmt: skip
        tf.config.set_visible_devices(gpus[local_rank], "GPU")
    else:
        tf.config.set_visible_devices([], "GPU")
    implementation = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation.NCCL if device.startswith("cuda") else implementation.RING,
        timeout_seconds=timeout_s,
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    return Group(cluster["task"]["index"], strategy.num_replicas_in_sync, local_rank, options.implementation.name,
                 strategy)  # fmt: skip


def gather(values: list[float], group: Group) -> list[list[float]]:
    """Every worker's `values` (the same length on each), worker by worker."""
    local = tf.constant([values], tf.float64)
    return group.strategy.gather(local, axis=0).numpy().tolist()


def reduce(values: list[float], group: Group, op: str = "max") -> list[float]:
    """The element-wise max (or sum) over every worker: what all of them then decide on, identically."""
    everyone = gather(values, group)
    return [max(column) if op == "max" else sum(column) for column in zip(*everyone, strict=True)]


def slowest(group: Group):
    """`common.comm`'s agreement of a job: each figure the slowest worker's."""
    return lambda local_s, step_s: tuple(reduce([local_s, step_s], group))


def barrier(group: Group) -> None:
    gather([0.0], group)


def close(together: bool) -> None:
    """Nothing to leave: the spawner ends the workers once each has written its events."""


class MultiWorkerStep(mirrored.MirroredStep):
    """MirroredStrategy's step under MultiWorkerMirroredStrategy: one replica in this process, `cell.nproc` in all."""

    def __init__(self, workload: Workload, cell: Cell, group: Group, *, seed: int = 0) -> None:
        self.group = group
        super().__init__(workload, cell, seed=seed)

    def _strategy(self) -> tf.distribute.Strategy:
        self.devices = list(self.group.strategy.extended.worker_devices)
        return self.group.strategy

    def held_bytes(self) -> dict[str, list[int]]:
        """This worker's (`per_rank` gathers everyone's)."""
        return {k: v[:1] for k, v in super().held_bytes().items()}

    def state_bytes(self) -> list[int]:
        held = self.held_bytes()
        return [held["param_bytes_rank"][0], held["state_bytes_rank"][0]]

    def communication(self) -> dict[str, Any]:
        return mirrored.communication(self, agree=slowest(self.group), name="multiworker")

    def settings(self) -> dict[str, Any]:
        return {
            **super().settings(),
            "threading": f"one worker process per replica: intra-op pool of {self.cell.threads} threads each",
            "worker": self.group.rank,
            "workers": self.group.world,
            "collective": self.group.backend,
            "execution": "tf.function graph (jit_compile=False), MultiWorkerMirroredStrategy.run",
        }


def build(workload: Workload, cell: Cell, group: Group) -> MultiWorkerStep:
    """The step of this worker; NotImplementedError (the cell is unsupported, with the reason) where it does not
    apply, as for MirroredStrategy."""
    mirrored.check(workload, cell, "workers")
    return MultiWorkerStep(workload, cell, group)


def per_rank(train: MultiWorkerStep, group: Group, memory: dict[str, int] | None) -> dict[str, Any]:
    """Every worker's memory, gathered: the parameters, and with the optimizer's state, held between steps, and the
    process's resident-set peak over a step."""
    peak = (memory or {}).get("process_rss_peak_bytes")
    everyone = gather([*train.state_bytes(), -1.0 if peak is None else float(peak)], group)
    return {"param_bytes_rank": [int(r[0]) for r in everyone], "state_bytes_rank": [int(r[1]) for r in everyone],
            "peak_bytes_rank": None if any(r[2] < 0 for r in everyone) else [int(r[2]) for r in everyone],
            "peak_of": "process"}  # fmt: skip
