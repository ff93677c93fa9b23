"""The base of a strategy's step (DDP, FSDP, tensor and pipeline parallelism): what the DDP worker asks of every one.

`worker/ddp.py` asks a strategy's step for `params`, `compiles`, `step`, `sync`, `settings`, `count_flops`,
`memory_of_step`, `state_tensors` (what the rank holds between steps) and `communication` (where the step's time goes:
`store.records.CommRecord`'s figures, measured by `common.comm`). Most strategies wrap the backend's own step (`inner`)
and forward to it; what differs is how they wrap it, their settings and their communication. Framework-free: the
methods call the wrapped step and the process group (`group.backend`, `group.world`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class StrategyStep(ABC):
    """A strategy's step around the backend's step `inner` (None where the strategy runs its own: a pipeline's
    stage). `params` is the whole model's count, as every strategy reports it."""

    compiles = False  # no first step to time apart: the strategies run eager

    def __init__(self, group: Any, params: int, inner: Any = None) -> None:
        self.group, self.params, self.inner = group, params, inner

    def step(self) -> Any:
        return self.inner.iteration()

    def sync(self) -> None:
        self.inner.sync()

    def state_tensors(self) -> dict[str, list[Any]]:
        return self.inner.state_tensors()

    def memory_of_step(self) -> dict[str, int]:
        return self.inner.memory_of_step()

    @property
    def computing_ranks(self) -> int:
        """How many ranks each compute what one rank's counted step computes: every rank its share of the batch."""
        return self.group.world

    def count_flops(self) -> dict[str, Any] | None:
        """The whole job's FLOPs per step, from one rank's counted step. Not split by dtype: a step of N processes is
        not held against one process's peak."""
        counted = self.inner.count_flops()
        if not counted:
            return None
        return {"flops_per_step": counted["flops_per_step"] * self.computing_ranks, "flops_by_dtype": None}

    def settings(self) -> dict[str, Any]:
        return {**self.inner.settings(), **self.group_settings(), **self.strategy_settings()}

    def group_settings(self) -> dict[str, Any]:
        return {"ddp_backend": self.group.backend, "world_size": self.group.world}

    def strategy_settings(self) -> dict[str, Any]:
        """What the strategy adds to the step's settings (its batch per process, its plan)."""
        return {}

    @abstractmethod
    def communication(self) -> dict[str, Any]:
        """Where the step's time goes, after the timed steps (untimed): `CommRecord`'s figures."""


def theoretical_bubble(stages: int, microbatches: int) -> float:
    """The idle share of a GPipe or 1F1B step with equal stages and no communication: (N-1) / (M+N-1)."""
    return (stages - 1) / (microbatches + stages - 1)
