"""The loss check's comparison, the same for every backend that makes one: does a mode still train like its
reference (fp32; for TensorFlow's XLA, graph mode)?

Both train STEPS steps on one small batch (at most BATCH samples, repeated, so the model can fit it and the losses
visibly fall) from the same weights and data: the mode first, so a mode that cannot be built fails before the
reference trains, then the reference. The backend's `judge` decides on what the two runs measured (and may train
more runs to see its own spread); the result is the verdict (`ok`), the first failed criterion (`reason`), the
measured figures and the seconds it all took, as the JSON of `protocol.LossCheck`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

STEPS = 8  # steps of each run
BATCH = 4  # samples of the one batch every run trains on
MIN_PROGRESS = 0.5  # the mode's loss must fall by at least half as much as the reference's

R = TypeVar("R")  # what one run measured (its losses, its first update, ...): the backend's own record


@dataclasses.dataclass(frozen=True)
class Judgement:
    ok: bool | None  # None: nothing was checked (`reason` says why: the reference diverged, say)
    reason: str | None  # one line: the first failed criterion; None when ok
    figures: dict[str, Any]  # what was measured, JSON-ready: the curves, the distances, the bars applied


def small(workload: Any, batch: int = BATCH) -> Any:
    """The workload (a `workloads.base.Workload`) at a batch of at most `batch` samples."""
    return dataclasses.replace(workload, batch=min(workload.batch, batch))


def compare(train_mode: Callable[[], R], train_reference: Callable[[], R], judge: Callable[[R, R], Judgement]) -> dict:
    """Train the mode, then the reference, judge them (reference first), and time it all: the check's JSON."""
    start = time.perf_counter()
    mode = train_mode()
    reference = train_reference()
    judged = judge(reference, mode)
    return {"ok": judged.ok, "reason": judged.reason, **judged.figures, "seconds": time.perf_counter() - start}


def fall(losses: Sequence[float]) -> float:
    """How far a loss curve fell: first loss to lowest. Lowest, not last: a momentum update that overshoots on a
    tiny batch bounces the last value, in the reference as much as in the mode."""
    return losses[0] - min(losses)


def progress(reference: Sequence[float], mode: Sequence[float]) -> float | None:
    """The mode's fall over the reference's; None where the reference did not fall (or the mode has no curve)."""
    if not mode or fall(reference) <= 0:
        return None
    return fall(mode) / fall(reference)


def first_not_finite(losses: Sequence[float]) -> int | None:
    """The index of the first loss that is inf or nan: where the run diverged."""
    return next((i for i, value in enumerate(losses) if not math.isfinite(value)), None)


def unchecked(reference: Sequence[float], who: str) -> str | None:
    """Why a mode cannot be checked against this reference run: its loss is not finite, and a reference that diverged
    says nothing of the mode (the check is "not checked", never "failed"); None when the reference is whole."""
    bad = first_not_finite(reference)
    return None if bad is None else f"not checked: {who}'s loss is {reference[bad]} at step {bad + 1}"
