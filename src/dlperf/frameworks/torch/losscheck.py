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
from typing import Any, Protocol

import torch

from dlperf.frameworks.common import losscheck as common
from dlperf.frameworks.common.losscheck import (
    Judgement,
    compare,
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
SEEDS = common.SEEDS  # spread seeds: fp32 from seeds 1 and 2 against fp32 from seed 0
STEP_SEED = 0  # seeds the randomness inside the steps (dropout): the same in every run

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
        direction = (None, None)
        if mode.first_update is not None and fp32.first_update is not None:
            direction = compare_updates(mode.first_update, fp32.first_update)
        return common.judgement(fp32, mode, spread, steps=steps, direction=direction,
                                references=(rounding_cosine, random_cosine))  # fmt: skip

    return compare(lambda: train(make_mode, 0, steps, wait=steps), lambda: train(make_fp32, 0, steps), judged)


# ----------------------------------------------------------------------------------------------------------------------
# Short training runs


Run = common.Run


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
