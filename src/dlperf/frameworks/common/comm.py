"""The exposed communication of a step spread over processes or replicas, measured one way for every strategy.

A strategy's step communicates (all-reduces gradients, all-gathers shards, sends activations); the same work without
the communication (DDP's `no_sync`, an unsharded copy, a stage alone, a replica updating from its own gradients) is
what computing alone costs. The two are alternated LOCAL_STEPS times, so both see the machine in the same state, and
their medians compared: the step minus the local step is the communication compute did not hide. The framework gives
the steps (callables); this module times them with the one timer and says what bounds the step.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dlperf.measure.timer import timed_step

LOCAL_STEPS = 5  # alternated pairs of steps (local, communicating): a median of a few, each as long as a training step
BOUND_SHARE = 0.5  # exposed communication of half the step or more bounds the step

Step = tuple[Callable[[], Any], Callable[[], None]]  # (one step, the sync that waits for it)


class CommBound(StrEnum):
    """What bounds a multi-process step, by its exposed share."""

    COMPUTE = "compute"
    COMMUNICATION = "communication"  # collectives compute did not hide
    PIPELINE = "pipeline"  # a pipeline's sends and receives and its bubble


@dataclass(frozen=True)
class Exposed:
    """The figures every strategy reports under these names (`store.records.CommRecord`)."""

    local_step_s: float  # computing alone
    step_s: float  # the strategy's step, communicating
    exposed_comm_s: float  # the step minus the local step: what compute did not hide
    comm_share: float | None  # exposed / step; None for a step of no time
    bound: str | None  # a `CommBound` value: `bound_by` when the share is BOUND_SHARE or more, else compute


def nothing() -> None:
    """No barrier: the replicas of one process start together anyway."""


def figures(local_s: float, step_s: float, bound_by: CommBound = CommBound.COMMUNICATION) -> Exposed:
    exposed = max(0.0, step_s - local_s)
    share = exposed / step_s if step_s > 0 else None
    bound = None if share is None else (bound_by if share >= BOUND_SHARE else CommBound.COMPUTE).value
    return Exposed(local_s, step_s, exposed, share, bound)


def alternate(local: Step, communicating: Step, before: Callable[[], None] = nothing) -> tuple[float, float]:
    """This process's medians of the local and the communicating step, alternated LOCAL_STEPS times; `before` each
    (a barrier: every process starts each step together)."""
    alone, together = [], []
    for _ in range(LOCAL_STEPS):
        before()
        alone.append(timed_step(*local))
        before()
        together.append(timed_step(*communicating))
    return statistics.median(alone), statistics.median(together)


def measure(
    local: Step,
    communicating: Step,
    *,
    before: Callable[[], None] = nothing,
    agree: Callable[[float, float], tuple[float, float]] = lambda local_s, step_s: (local_s, step_s),
    bound_by: CommBound = CommBound.COMMUNICATION,
) -> Exposed:
    """The exposed communication of `communicating` over `local`. `agree` turns this process's medians into the
    figures every process reports alike (the slowest process's, by an all-reduce); one process keeps its own."""
    local_s, step_s = agree(*alternate(local, communicating, before))
    return figures(local_s, step_s, bound_by)
