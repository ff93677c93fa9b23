"""What the profilers of every backend do alike (torch, jax and tensorflow `profiler.py`): the profiled window of
steady steps, the seconds by category filled to the step, the top operators ranked, the trace kept under its cap.
Each profiler keeps its framework's own calls: starting its profiler, reading its events, classifying them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dlperf.vocab import Category

TOP_OPS = 15  # the operators a profile lists, the most time first


def window(step: Callable[[], Any], sync: Callable[[], None], steps: int) -> float:
    """Seconds per step of `steps` steps run back to back and waited for once at the end: the profiled window of a
    step already warmed up and synced (`worker/profile.py`), inside the framework's profiler."""
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - start) / steps


def fill_to_step(seconds: dict[str, float], step_s: float, rest: Category) -> dict[str, float]:
    """A profile's seconds by category and the step's remainder under `rest`, summing to `step_s` exactly (scaled
    down if over: ops on several threads may overlap)."""
    total = sum(seconds.values())
    scale = step_s / total if total > step_s else 1.0
    out = {k: v * scale for k, v in seconds.items() if v > 0}
    out[rest.value] = out.get(rest.value, 0.0) + max(0.0, step_s - total * scale)
    return out


def ranked(spent: dict[str, float]) -> list[str]:
    """The TOP_OPS names with the most time, the most first."""
    return sorted(spent, key=spent.get, reverse=True)[:TOP_OPS]


def within_cap(size: int, max_bytes: int, notes: list[str]) -> bool:
    """Whether a trace of `size` compressed bytes is kept; above `max_bytes` it is not, and a note says so."""
    if size <= max_bytes:
        return True
    notes.append(f"no trace kept: {size} bytes compressed, above the cap of {max_bytes} bytes")
    return False
