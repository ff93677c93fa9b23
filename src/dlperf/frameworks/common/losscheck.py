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


SEEDS = 2  # spread seeds: fp32 from seeds 1 and 2 against fp32 from seed 0

# Thresholds; each is explained where it is applied.
MIN_CHANGED = 0.9
MIN_COSINE = 0.9
ROUNDING_ALLOWANCE = 5.0
RANDOM_ALLOWANCE = 2.0
MIN_ALIGNED = 0.05
MAX_SIZE_RATIO = 2.0
SPREAD_FACTOR = 2.0
TOLERANCE_FLOOR = 0.02


# ----------------------------------------------------------------------------------------------------------------------
# The decision: a mode of lower precision against fp32 (the torch and jax backends)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The decision and the bars it applied."""

    ok: bool | None  # None: not checked (the fp32 reference diverged)
    reason: str | None  # one line, when not ok
    tolerance: list[float]  # per step of the fp32 curve: how far the mode's loss may be from fp32's
    min_cosine: float  # what the first update's cosine had to reach
    progress: float | None  # the mode's loss decrease / fp32's over the compared steps; None if fp32's was none


def judge(
    fp32: Sequence[float],
    mode: Sequence[float],
    spread: Sequence[Sequence[float]],
    *,
    updated: Sequence[bool] | None = None,
    changed: float | None,
    fp32_changed: float | None,
    cosine: float | None,
    size_ratio: float | None,
    rounding_cosine: float | None = None,
    random_cosine: float | None = None,
) -> Verdict:
    """Decide on measured numbers alone; the first failed criterion gives the reason. Against an fp32 curve that is
    not finite nothing is decided: not checked, with the reason.

    `fp32`, `mode`: loss per step (the loss a step computed before its update), both from init seed 0; `spread`: fp32's
    curves from other init seeds. `updated`: per mode step, whether it changed the parameters (None: every step did);
    the mode's curve is compared at the steps that did, since a skipped step is a no-op. `changed`, `fp32_changed`:
    shares of the elements with non-zero gradients that changed. `cosine`, `size_ratio`: the mode's first update
    against fp32's. `rounding_cosine`: fp32's first update against fp32's from initial weights rounded to the mode's
    precision (None: the mode computes in fp32); `random_cosine`: fp32's first update against fp32's with other random
    draws (None: the mode draws as eager does).
    """
    tolerance = spread_tolerance(fp32, spread)
    min_cosine = required_cosine(rounding_cosine, random_cosine)
    if not_checked := unchecked(fp32, "the fp32 reference"):
        return Verdict(None, not_checked, tolerance, min_cosine, None)
    updated = [True] * len(mode) if updated is None else list(updated)
    compared = [loss for loss, did in zip(mode, updated, strict=True) if did][: len(fp32)]
    reference = list(fp32[: len(compared)])
    fell = progress(reference, compared)
    reason = (
        _diverged(mode, "the mode")
        or _too_few_updates(len(compared), len(fp32), len(mode))
        or _unchanged(changed, fp32_changed)
        or _wrong_direction(cosine, size_ratio, min_cosine)
        or _too_little_progress(fell, reference, compared)
        or _off_curve(reference, compared, tolerance, skipped=updated.count(False))
    )
    return Verdict(reason is None, reason, tolerance, min_cosine, fell)


def spread_tolerance(fp32: Sequence[float], spread: Sequence[Sequence[float]]) -> list[float]:
    """Per step, SPREAD_FACTOR (2) times the largest distance between fp32 from seed 0 and fp32 from another seed at
    that step or its neighbours, and at least TOLERANCE_FLOOR (2%) of fp32's first loss.

    Other initial weights are a variation training must tolerate, so a mode may differ from fp32 about as much as fp32
    differs from itself. The neighbours count because two curves that cross agree at one step by accident. The factor:
    where momentum on the tiny batch makes the curves bounce (fcn-r, ResNet-50), a correct mode soon behaves like one
    more seed, and one more seed exceeds the largest of two others' distances one time in three; twice that distance,
    taken over three steps, about one time in sixty per step even if every step were independent. The floor is
    rounding: a loss computed from bf16 activations (8 significant bits) differs from fp32's by up to about 1% at the
    same weights, and once every curve has fitted the batch no spread is left to absorb that.
    """
    floor = TOLERANCE_FLOOR * abs(fp32[0])
    gaps = [
        max((abs(value - other[t]) for other in spread if t < len(other)), default=0.0) for t, value in enumerate(fp32)
    ]
    return [max(floor, SPREAD_FACTOR * max(gaps[max(0, t - 1) : t + 2])) for t in range(len(fp32))]


def required_cosine(rounding_cosine: float | None, random_cosine: float | None = None) -> float:
    """What the first update's cosine with fp32's must reach.

    MIN_COSINE (0.9) where the direction of an update is well defined at the mode's precision: rounding turns a correct
    update by a few degrees, while a sign error, a permutation or a missing layer turns it far. How well defined, fp32
    itself shows: its first update from initial weights rounded to the mode's precision keeps `rounding_cosine` with
    its first update. The mode rounds activations too, so it turns further: where rounding turns fp32 by degrees, the
    tangent of the mode's angle was 1.4 to 3.1 times rounding's (bf16 and fp16 on resnet-56, ResNet-50 and tiny
    ResNet-50). Up to ROUNDING_ALLOWANCE (5) times is accepted, which lowers the bar where rounding alone turns fp32 by
    more than 5.5 degrees: resnet-56 in bf16 (7 degrees, bar 0.85) and ResNet-50 at its initialization, whose gradient
    is so sensitive that rounding its weights to bf16 leaves a cosine of 0.36 and bf16 autocast reaches 0.13 (bar
    0.077). The bar never drops below MIN_ALIGNED (0.05), clearly aligned: a negated update has -1 and a random one
    about 1/sqrt(parameters). The loss curve has to carry the rest.

    A mode that draws its own random numbers (compiled dropout) turns its update as far as other masks do:
    `random_cosine`, fp32's first update against fp32's with other draws. A 3-layer transformer with dropout 0.1
    compiled kept 0.870 and 0.872 with fp32's update, and fp32's own other draws 0.862-0.874 (failed at the bar of
    0.9 before); RANDOM_ALLOWANCE (2) times that tangent is accepted (bar 0.66 there), the two tangents added in
    quadrature where the mode also rounds. A model that draws nothing keeps 1.0: the bar is unchanged.
    """
    if rounding_cosine is None and random_cosine is None:
        return MIN_COSINE
    if min(c for c in (rounding_cosine, random_cosine) if c is not None) <= 0:
        return MIN_ALIGNED
    measured = ((ROUNDING_ALLOWANCE, rounding_cosine), (RANDOM_ALLOWANCE, random_cosine))
    tangent2 = sum(allowance**2 * (1 / c**2 - 1) for allowance, c in measured if c is not None)
    return max(MIN_ALIGNED, min(MIN_COSINE, 1 / math.sqrt(1 + tangent2)))


def _diverged(losses: Sequence[float], who: str) -> str | None:
    bad = first_not_finite(losses)
    return None if bad is None else f"{who}'s loss is {losses[bad]} at step {bad + 1}"


def _too_few_updates(updates: int, wanted: int, steps: int) -> str | None:
    """A GradScaler halves its scale at each skipped step: one that still skips after as many steps as the check makes
    has been cut by 2**steps (256 for eight) and is not calibrating any more."""
    if updates == 0:
        return f"no step changed the parameters in {steps} steps"
    if updates < wanted:
        return f"only {updates} of {steps} steps changed the parameters"
    return None


def _unchanged(changed: float | None, fp32_changed: float | None) -> str | None:
    """At least MIN_CHANGED (90%) of fp32's own share: even fp32 rounds away an update below half a unit in the last
    place, and a mode with fp32 weights changes as many elements as fp32 (bf16, fp16 autocast: within 0.1% of it)."""
    if changed is None or fp32_changed is None or changed >= MIN_CHANGED * fp32_changed:
        return None
    return f"only {changed:.0%} of parameters with gradients changed (fp32: {fp32_changed:.0%})"


def _wrong_direction(cosine: float | None, size_ratio: float | None, min_cosine: float) -> str | None:
    """A size off by more than MAX_SIZE_RATIO (2x) is a halved or doubled learning rate: another training run. (A
    GradScaler that forgot to unscale is off by thousands.)"""
    if cosine is None or size_ratio is None:
        return None  # fp32 itself did not update: nothing to compare with
    if cosine < min_cosine:
        return f"first update cosine {cosine:.3g} < {min_cosine:.3g} (against fp32's first update)"
    if not 1 / MAX_SIZE_RATIO <= size_ratio <= MAX_SIZE_RATIO:
        allowed = f"{1 / MAX_SIZE_RATIO:g}x-{MAX_SIZE_RATIO:g}x"
        return f"first update is {size_ratio:.3g}x the size of fp32's (allowed {allowed})"
    return None


def _too_little_progress(progress: float | None, reference: Sequence[float], compared: Sequence[float]) -> str | None:
    """At least MIN_PROGRESS (half) of fp32's decrease: a mode that learns half as fast is not the same training."""
    if progress is None or progress >= MIN_PROGRESS:
        return None
    return (
        f"loss did not decrease: {compared[0]:.3g} -> {min(compared):.3g} while fp32 went {reference[0]:.3g} -> "
        f"{min(reference):.3g} ({progress:.0%} of fp32's decrease, needs {MIN_PROGRESS:.0%})"
    )


def _off_curve(
    reference: Sequence[float], compared: Sequence[float], tolerance: Sequence[float], *, skipped: int
) -> str | None:
    counted = f" (counting the mode's steps that updated; {skipped} skipped)" if skipped else ""
    for t, (want, got) in enumerate(zip(reference, compared, strict=True)):
        if abs(got - want) > tolerance[t]:
            return (
                f"loss {got:.3g} at step {t + 1} is {abs(got - want):.2g} from fp32's {want:.3g}, beyond the "
                f"tolerance {tolerance[t]:.2g} from fp32's seed-to-seed spread{counted}"
            )
    return None


@dataclasses.dataclass
class Run:
    """What one short training run measured. Holds no reference to the model, so the next run can reuse its memory."""

    losses: list[float]  # per step, the loss it computed before its update
    updated: list[bool]  # per step, whether it changed any parameter (a step a GradScaler skipped did not)
    first_update: Any  # per parameter, the change made by the first step that changed any (the backend's arrays)
    changed_fraction: float | None  # of the elements that ever had a non-zero gradient, the share that changed

    @property
    def skipped(self) -> int:
        return self.updated.count(False)


def judgement(fp32: Run, mode: Run, spread: list[list[float]], *, steps: int,
              direction: tuple[float | None, float | None],
              references: tuple[float | None, float | None]) -> Judgement:  # fmt: skip
    """`judge`'s verdict on two runs and the spread's curves, with every figure it rests on. `direction`: the cosine
    and the size ratio of the mode's first update against fp32's (None, None where either made none); `references`:
    the rounding cosine and the random one (`required_cosine`)."""
    (cosine, size_ratio), (rounding_cosine, random_cosine) = direction, references
    verdict = judge(fp32.losses, mode.losses, spread, updated=mode.updated, changed=mode.changed_fraction,
                    fp32_changed=fp32.changed_fraction, cosine=cosine, size_ratio=size_ratio,
                    rounding_cosine=rounding_cosine, random_cosine=random_cosine)  # fmt: skip
    figures = {
        "steps": steps,
        "fp32_losses": fp32.losses,
        "mode_losses": mode.losses,  # every step, skipped ones included
        "mode_updated": mode.updated,
        "spread_losses": spread,
        "tolerance": verdict.tolerance,  # per step of the fp32 curve, in loss units
        "skipped_steps": mode.skipped,
        "changed_fraction": mode.changed_fraction,
        "fp32_changed_fraction": fp32.changed_fraction,
        "cosine": cosine,
        "min_cosine": verdict.min_cosine,
        "rounding_cosine": rounding_cosine,
        "random_cosine": random_cosine,
        "size_ratio": size_ratio,
        "progress": verdict.progress,
    }
    return Judgement(verdict.ok, verdict.reason, figures)
