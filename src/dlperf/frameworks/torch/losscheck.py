"""The "still trains" check: a faster mode must learn what fp32 learns, not only run faster.

A mode can be fast because it is broken: bf16 weights that swallow small updates, a GradScaler that skips every step,
a kernel that computes the wrong gradient. Timing cannot tell, and neither can the benchmark's random labels, whose
loss stays near ln(classes) whatever the update does. So each mode also trains a few steps on one small batch, repeated
so that the model can fit it, from the same initial weights and data as fp32, and is compared with fp32 on:

- reach: the parameter elements that received non-zero gradients actually changed;
- direction: its first update (the first step that changed the parameters: a GradScaler skips steps while it
  calibrates its scale) points where fp32's first update points, and has about its size;
- learning: its loss falls by at least half as much as fp32's, and its loss curve stays within fp32's own run-to-run
  spread (fp32 trained from other init seeds on the same batch).

Each workload trains with its own optimizer and learning rate: the mode is checked as it is timed (a larger learning
rate would also hide bf16 weights that swallow small updates). Where that rate cannot fit the batch in the check's
steps, learning is judged relative to what fp32 achieves in them.

`check` takes step factories (the backend's `loss_check` passes `build`; a test can inject a broken mode) and
compares the runs as every backend does (`frameworks.common.losscheck`); `judge` decides on the measured numbers
alone, without training.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from dlperf.frameworks.common import losscheck as common
from dlperf.frameworks.common.losscheck import (
    MIN_PROGRESS,
    Judgement,
    compare,
    first_not_finite,
    progress,
    unchecked,
)
from dlperf.modes import Mode, mode_components

# Eight steps on four samples. fp32 fits the repeated batch visibly on five of the seven networks (first loss to
# lowest: fcn-s -80%, ResNet-50 -79%, fcn-r -42%, alexnet-r -41%, resnet-56 to 0.0004); alexnet-s (SGD 0.01 without
# momentum) and the LSTM (SGD 0.1) learn too slowly at their own rates to fit anything in eight steps (-0.7%, -0.1%),
# so there the mode must match fp32's small decrease. Momentum on so small a batch makes fcn-r and ResNet-50 bounce
# after three or four steps; fp32 from other seeds bounces too, and the tolerance follows it. Cost on 2 cores, bf16:
# ResNet-50 about 30 s, fcn-s and alexnet-s about 20 s (their steps cost what their weights cost, whatever the batch),
# the others 1-4 s.
STEPS, BATCH = common.STEPS, common.BATCH  # every backend's (`frameworks.common.losscheck`)
SEEDS = 2  # spread seeds: fp32 from seeds 1 and 2 against fp32 from seed 0
STEP_SEED = 0  # seeds the randomness inside the steps (dropout): the same in every run

# Thresholds; each is explained where it is applied.
MIN_CHANGED = 0.9
MIN_COSINE = 0.9
ROUNDING_ALLOWANCE = 5.0
RANDOM_ALLOWANCE = 2.0
MIN_ALIGNED = 0.05
MAX_SIZE_RATIO = 2.0
SPREAD_FACTOR = 2.0
TOLERANCE_FLOOR = 0.02

# The precision a mode computes in, for the rounding reference: tf32 keeps fp16's 10-bit significand.
ROUNDING = {Mode.BF16: torch.bfloat16, Mode.FP16: torch.float16, Mode.TF32: torch.float16}


class StepLike(Protocol):
    """What the check needs of a train step (`step.TorchStep` is one)."""

    trainable: list[torch.Tensor]

    def step(self) -> torch.Tensor: ...


StepFactory = Callable[[int], StepLike]  # init seed -> a fresh step; the batch must not depend on the seed


# ----------------------------------------------------------------------------------------------------------------------
# Entry points


def rounding_dtype(mode: str) -> torch.dtype | None:
    """The dtype whose rounding the mode's arithmetic resembles; None for fp32 arithmetic."""
    return next((ROUNDING[c] for c in mode_components(mode) if c in ROUNDING), None)


def check(
    make_fp32: StepFactory,
    make_mode: StepFactory,
    *,
    steps: int = STEPS,
    seeds: int = SEEDS,
    rounding: torch.dtype | None = None,
    own_draws: bool = False,
) -> dict[str, Any]:
    """Train the mode from seed 0, fp32 from seed 0 and from seeds 1..`seeds`, and judge.

    A step that changes no parameter is a no-op (a GradScaler skips steps while it calibrates its scale, and later
    when a gradient overflows): the mode runs until it has made `steps` updates, skipping at most `steps` steps, and its
    curve is compared update by update. `rounding`: the dtype the mode computes in; fp32's first update
    from initial weights rounded to it shows how well rounding leaves the direction of an update defined.
    `own_draws`: the mode draws its random numbers (dropout's masks) its own way, as compiled code does (Inductor's
    generator, not eager's): fp32's first update with other draws shows how far other masks turn an update.
    """
    if steps < 2 or seeds < 1:
        raise ValueError(f"the check needs at least 2 steps and 1 spread seed, got steps={steps}, seeds={seeds}")

    def judged(fp32: Run, mode: Run) -> Judgement:
        if not_checked := unchecked(fp32.losses, "the fp32 reference"):  # no spread runs: nothing will be judged
            curves = {"steps": steps, "fp32_losses": fp32.losses, "mode_losses": mode.losses}
            return Judgement(None, not_checked, curves)
        spread = [losses_of(make_fp32, seed, steps) for seed in range(1, seeds + 1)]
        rounding_cosine = None if rounding is None else _rounding_cosine(make_fp32, rounding, fp32)
        random_cosine = _random_cosine(make_fp32, fp32) if own_draws else None
        return _judgement(fp32, mode, spread, (rounding_cosine, random_cosine), steps)

    return compare(lambda: train(make_mode, 0, steps, wait=steps), lambda: train(make_fp32, 0, steps), judged)


def _judgement(fp32: Run, mode: Run, spread: list[list[float]], references: tuple[float | None, float | None],
               steps: int) -> Judgement:  # fmt: skip
    """`references`: the rounding cosine and the random one (`required_cosine`)."""
    rounding_cosine, random_cosine = references
    cosine = size_ratio = None
    if mode.first_update is not None and fp32.first_update is not None:
        cosine, size_ratio = compare_updates(mode.first_update, fp32.first_update)
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


# ----------------------------------------------------------------------------------------------------------------------
# Short training runs


@dataclass
class Run:
    """What one run measured. Holds no reference to the model, so the next run can reuse its memory."""

    losses: list[float]  # per step, the loss it computed before its update
    updated: list[bool]  # per step, whether it changed any parameter (a step a GradScaler skipped did not)
    first_update: list[torch.Tensor] | None  # per parameter, the change made by the first step that changed any
    changed_fraction: float | None  # of the elements that ever had a non-zero gradient, the share that changed

    @property
    def skipped(self) -> int:
        return self.updated.count(False)


def train(make_step: StepFactory, seed: int, steps: int, *, wait: int = 0) -> Run:
    """Build a step with init `seed` and run it until `steps` steps have changed the parameters or `steps + wait`
    steps have run, watching losses, gradients and parameters."""
    step = make_step(seed)
    torch.manual_seed(STEP_SEED)
    params = list(step.trainable)
    initial = [p.detach().clone() for p in params]
    previous = [p.detach().clone() for p in params]
    had_grad = [torch.zeros_like(p, dtype=torch.bool) for p in params]
    scratch = torch.empty(max((p.numel() for p in params), default=0), dtype=torch.bool, device=_device(params))
    losses: list[float] = []
    updated: list[bool] = []
    first_update = None
    while updated.count(True) < steps and len(losses) < steps + wait:
        losses.append(float(step.step()))
        for mask, p in zip(had_grad, params, strict=True):
            if p.grad is not None:  # inf and nan count as non-zero: a gradient arrived, whatever became of it
                nonzero = torch.ne(p.grad, 0, out=scratch[: p.numel()].view(p.shape))  # no fresh memory per step
                mask.logical_or_(nonzero)
        updated.append(any(not torch.equal(p, q) for p, q in zip(params, previous, strict=True)))
        if updated[-1]:
            if first_update is None:
                first_update = [p.detach().float() - p0.float() for p, p0 in zip(params, initial, strict=True)]
            for q, p in zip(previous, params, strict=True):
                q.copy_(p.detach())
    return Run(losses, updated, first_update, _changed_fraction(params, initial, had_grad, scratch))


def losses_of(make_step: StepFactory, seed: int, steps: int) -> list[float]:
    """The loss curve alone: all that the spread runs need."""
    step = make_step(seed)
    torch.manual_seed(STEP_SEED)
    return [float(step.step()) for _ in range(steps)]


def _device(params: Sequence[torch.Tensor]) -> torch.device:
    return params[0].device if params else torch.device("cpu")


def _changed_fraction(params, initial, had_grad, scratch: torch.Tensor) -> float | None:
    """Counted per element: one frozen layer hides in a count per parameter tensor, and so do bf16 weights, which
    round away the updates smaller than half a unit in their last place and keep the larger ones."""
    touched = sum(int(torch.count_nonzero(mask)) for mask in had_grad)
    if touched == 0:
        return None
    changed = 0
    for p, p0, mask in zip(params, initial, had_grad, strict=True):
        moved = torch.ne(p, p0, out=scratch[: p.numel()].view(p.shape))
        changed += int(torch.count_nonzero(moved.logical_and_(mask)))
    return changed / touched


def _rounding_cosine(make_fp32: StepFactory, dtype: torch.dtype, fp32: Run) -> float | None:
    """Cosine between fp32's first update and fp32's first update from the same initial weights rounded to `dtype`."""
    if fp32.first_update is None:
        return None
    step = make_fp32(0)
    with torch.no_grad():
        for p in step.trainable:
            p.copy_(p.to(dtype))
    initial = [p.detach().clone() for p in step.trainable]
    torch.manual_seed(STEP_SEED)
    step.step()
    update = [p.detach().float() - p0.float() for p, p0 in zip(step.trainable, initial, strict=True)]
    return compare_updates(update, fp32.first_update)[0]


def _random_cosine(make_fp32: StepFactory, fp32: Run) -> float | None:
    """Cosine between fp32's first update and fp32's first update from the same weights with other random draws (1.0
    for a model that draws none)."""
    if fp32.first_update is None:
        return None
    step = make_fp32(0)
    initial = [p.detach().clone() for p in step.trainable]
    torch.manual_seed(STEP_SEED + 1)
    step.step()
    update = [p.detach().float() - p0.float() for p, p0 in zip(step.trainable, initial, strict=True)]
    return compare_updates(update, fp32.first_update)[0]


def compare_updates(update: Sequence[torch.Tensor], reference: Sequence[torch.Tensor]) -> tuple[float, float]:
    """Cosine similarity and norm ratio of two parameter updates, each flattened over all parameters."""
    if [u.shape for u in update] != [r.shape for r in reference]:
        raise ValueError("the mode's trainable parameters do not match fp32's in number or shape")
    dot = norm2 = ref2 = 0.0
    for u, r in zip(update, reference, strict=True):
        u, r = u.reshape(-1), r.reshape(-1)  # logical order, whatever the memory layout
        dot += _dot(u, r)
        norm2 += _dot(u, u)
        ref2 += _dot(r, r)
    if norm2 == 0.0 or ref2 == 0.0:
        return 0.0, math.sqrt(norm2 / ref2) if ref2 else math.inf
    return dot / math.sqrt(norm2 * ref2), math.sqrt(norm2 / ref2)


def _dot(a: torch.Tensor, b: torch.Tensor, chunk: int = 1 << 16) -> float:
    """Float32 products summed in float32 within chunks and in float64 across them: about 1e-7 relative on 100M
    elements (one float32 sum over them all drifts by 1e-3), without float64 copies of the parameters."""
    return sum(float(torch.dot(x.float(), y.float())) for x, y in zip(a.split(chunk), b.split(chunk), strict=True))


# ----------------------------------------------------------------------------------------------------------------------
# The decision


@dataclass(frozen=True)
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
