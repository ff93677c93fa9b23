"""The one timer. Every framework is measured by this loop; frameworks differ only in `sync`.

    warm up until steady  ->  sample adaptively  ->  stop when the median is known to about 2%, or at max_time

The device is synchronized on both sides of every timed step, so the clock brackets the work itself and not just its
launch. Each sample is handed to `on_sample` as soon as it exists, so a child killed by a timeout keeps what it
measured.
"""

from __future__ import annotations

import bisect
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from dlperf.measure.stats import sorted_ci_halfwidth


@dataclass(frozen=True)
class TimerConfig:
    min_steps: int = 10  # sample at least this many steps ...
    min_time: float = 1.0  # ... and for at least this many seconds
    max_time: float = 60.0  # stop sampling here even if the median is not yet tight
    max_warmup: int = 30  # discard at most this many steps while waiting for steady state
    warmup_window: int = 3  # "the last few steps" whose median is compared with the few before
    warmup_tolerance: float = 0.05  # steady when the two medians differ by at most 5%
    ci_target: float = 0.02  # stop when the 95% CI of the median is within 2% of it

    def __post_init__(self) -> None:
        for name in ("min_steps", "max_warmup", "warmup_window"):
            if getattr(self, name) < (1 if name == "warmup_window" else 0):
                raise ValueError(f"--{name.replace('_', '-')} must not be negative")
        if not 0 <= self.min_time <= self.max_time:
            raise ValueError("--min-time must be between 0 and --max-time")


@dataclass(frozen=True)
class WarmupResult:
    steps: int
    steady: bool  # False when max_warmup (or max_time) ran out first
    times: list[float]


def timed_step(step: Callable[[], None], sync: Callable[[], None], clock=time.perf_counter) -> float:
    sync()  # nothing queued may spill into this step's time
    start = clock()
    step()
    sync()  # the step is over when the device says so
    return clock() - start


def is_steady(times: list[float], window: int, tolerance: float) -> bool:
    if len(times) < 2 * window:
        return False
    last = statistics.median(times[-window:])
    before = statistics.median(times[-2 * window : -window])
    return abs(last - before) <= tolerance * before


def warm_up(run: Callable[[], float], cfg: TimerConfig, clock=time.perf_counter) -> WarmupResult:
    """Run steps until their time stops changing; those steps are discarded (and counted)."""
    times: list[float] = []
    start = clock()
    while len(times) < cfg.max_warmup and clock() - start < cfg.max_time:
        times.append(run())
        if is_steady(times, cfg.warmup_window, cfg.warmup_tolerance):
            return WarmupResult(len(times), True, times)
    return WarmupResult(len(times), cfg.max_warmup == 0, times)


def enough(ordered: list[float], elapsed: float, cfg: TimerConfig) -> bool:
    """`ordered`: the samples so far, sorted (kept sorted incrementally: re-sorting each step costs O(n log n))."""
    if elapsed >= cfg.max_time:
        return True
    if len(ordered) < cfg.min_steps or elapsed < cfg.min_time:
        return False
    return sorted_ci_halfwidth(ordered) <= cfg.ci_target


def sample(
    run: Callable[[], float],
    cfg: TimerConfig,
    on_sample: Callable[[float], None] = lambda t: None,
    clock=time.perf_counter,
) -> list[float]:
    """Timed steps until `enough`; every sample is passed to `on_sample` as it is taken."""
    samples: list[float] = []
    ordered: list[float] = []
    start = clock()
    while not enough(ordered, clock() - start, cfg):
        t = run()
        samples.append(t)
        bisect.insort(ordered, t)
        on_sample(t)
    return samples
