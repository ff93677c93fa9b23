"""The "still trains" check of a bf16 mode against fp32 for the backends whose parameters read as numpy arrays (jax,
tensorflow): PyTorch's decision (`losscheck.judge`) on the same measurements.

The mode and fp32 train `STEPS` steps from init seed 0 on one batch of at most `BATCH` samples, repeated so the model
can fit it; fp32 trains again from seeds 1 and 2 (its seed-to-seed spread, which sets the loss curve's tolerance), and
once more from seed 0's weights rounded to bf16 (how far rounding alone turns its first update, which sets the bar of
the direction). A backend gives its step factories and how to read and write a step's trainable parameters.

These backends' steps return the loss and leave the updated weights, not the gradients, so the share of parameters
that changed is of every element rather than of those with a gradient. The mode and fp32 train the same model on the
same batch, so the elements without a gradient are the same on both sides, and the bar (90% of fp32's share) means
what it means for PyTorch. No step is skipped: bf16 needs no loss scaling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dlperf.frameworks.common import losscheck as common

Read = Callable[[Any], list[np.ndarray]]  # a step -> its trainable parameters, host copies, in a fixed order
Write = Callable[[Any, list[np.ndarray]], None]  # (a step, parameters in that order) -> the step holds them


def check(
    make_fp32: Callable[[int], Any],
    make_mode: Callable[[int], Any],
    *,
    read: Read,
    write: Write,
    steps: int = common.STEPS,
    seeds: int = common.SEEDS,
) -> dict[str, Any]:
    """Train the mode from seed 0, fp32 from seed 0 and from seeds 1..`seeds`, fp32 once from seed 0's weights rounded
    to bf16, and judge. A factory takes an init seed and returns a step (its `step()` returns the loss); the batch is
    the same whatever the seed."""

    def judged(fp32: common.Run, mode: common.Run) -> common.Judgement:
        if not_checked := common.unchecked(fp32.losses, "the fp32 reference"):  # no spread runs: nothing is judged
            curves = {"steps": steps, "fp32_losses": fp32.losses, "mode_losses": mode.losses}
            return common.Judgement(None, not_checked, curves)
        spread = [train(make_fp32, seed, steps, read).losses for seed in range(1, seeds + 1)]
        references = (rounding_cosine(make_fp32, fp32, read, write), None)  # the built-in networks draw nothing
        direction = (None, None)
        if mode.first_update is not None and fp32.first_update is not None:
            direction = compare_updates(mode.first_update, fp32.first_update)
        return common.judgement(fp32, mode, spread, steps=steps, direction=direction, references=references)

    return common.compare(lambda: train(make_mode, 0, steps, read), lambda: train(make_fp32, 0, steps, read), judged)


def train(make_step: Callable[[int], Any], seed: int, steps: int, read: Read) -> common.Run:
    """`steps` steps from init `seed`, reading the loss and the parameters after each."""
    step = make_step(seed)
    initial = previous = read(step)
    losses: list[float] = []
    updated: list[bool] = []
    first_update = None
    for _ in range(steps):
        losses.append(float(step.step()))
        now = read(step)
        updated.append(any(not np.array_equal(p, q) for p, q in zip(now, previous, strict=True)))
        if updated[-1] and first_update is None:
            first_update = [p - p0 for p, p0 in zip(now, initial, strict=True)]
        previous = now
    total = sum(p.size for p in initial)
    changed = sum(int(np.count_nonzero(p != p0)) for p, p0 in zip(previous, initial, strict=True))
    return common.Run(losses, updated, first_update, changed / total if total else None)


def to_bf16(values: np.ndarray) -> np.ndarray:
    """fp32 values rounded to the nearest bfloat16 (ties to even), kept as fp32: the top 16 bits of each."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded & np.uint32(0xFFFF0000)).view(np.float32)


def rounding_cosine(make_fp32: Callable[[int], Any], fp32: common.Run, read: Read, write: Write) -> float | None:
    """Cosine between fp32's first update and fp32's first update from the same initial weights rounded to bf16."""
    if fp32.first_update is None:
        return None
    step = make_fp32(0)
    write(step, [to_bf16(p) for p in read(step)])
    initial = read(step)
    step.step()
    update = [p - p0 for p, p0 in zip(read(step), initial, strict=True)]
    return compare_updates(update, fp32.first_update)[0]


def compare_updates(update: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> tuple[float, float]:
    """Cosine similarity and norm ratio of two parameter updates, each flattened over all parameters (sums in
    float64)."""
    if [u.shape for u in update] != [r.shape for r in reference]:
        raise ValueError("the mode's trainable parameters do not match fp32's in number or shape")
    dot = norm2 = ref2 = 0.0
    for u, r in zip(update, reference, strict=True):
        u, r = u.ravel().astype(np.float64), r.ravel().astype(np.float64)
        dot, norm2, ref2 = dot + float(u @ r), norm2 + float(u @ u), ref2 + float(r @ r)
    if norm2 == 0.0 or ref2 == 0.0:
        return 0.0, float(np.sqrt(norm2 / ref2)) if ref2 else float("inf")
    return dot / float(np.sqrt(norm2 * ref2)), float(np.sqrt(norm2 / ref2))
