"""The one timer. Every framework is measured by this loop; frameworks differ only in `sync`.

    warm up until steady  ->  sample adaptively  ->  stop when the median is known to about 2%, or at max_time

The device is synchronized on both sides of every timed step, so the clock brackets the work itself and not just its
launch. Each sample is handed to `on_sample` as soon as it exists, so a child killed by a timeout keeps what it
measured.

A device that runs asynchronously and can mark points in its own queue (CUDA events), or whose steps' outputs the
host can wait for one by one (JAX's asynchronous dispatch, `HostClock`), is timed without that sync:
`pipelined` lets the host launch the next steps while the device still runs the last ones, as a plain training loop
does, and a step's time is the device's time between the ends of consecutive steps. Synchronizing every step would
add the host's launch time to the device's whenever the two are close: on an H100 the LSTM step took 5.92 ms timed
that way against 4.98 ms in a plain loop, because its many small kernels leave the host little room to run ahead.
"""

from __future__ import annotations

import numbers
import re
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dlperf.errors import BadValue
from dlperf.measure.stats import sorted_ci_halfwidth


@dataclass(frozen=True)
class TimerConfig:
    """How each cell's steps are timed (`dlperf run`'s --min-steps, --min-time, --max-time, ...): the warm-up is
    discarded until the step is steady, then steps are sampled until the median's 95% interval is within
    `ci_target`, at least `min_steps` steps and `min_time` seconds, at most `max_time` seconds."""

    min_steps: int = 10  # sample at least this many steps ...
    min_time: float = 1.0  # ... and for at least this many seconds
    max_time: float = 60.0  # stop sampling here even if the median is not yet tight
    max_warmup: int = 30  # discard at most this many steps while waiting for steady state
    warmup_window: int = 3  # "the last few steps" whose median is compared with the few before
    warmup_tolerance: float = 0.05  # steady when the two medians differ by at most 5%
    ci_target: float = 0.02  # stop when the 95% CI of the median is within 2% of it

    def __post_init__(self) -> None:
        """A bad value is a BadValue (a ValueError and a UsageError: one line in a notebook) naming the field, as a
        Python caller wrote it (`dlperf.TimerConfig(...)`); the command line's flags are checked before
        (`commands/run.timer`), in the flags' names."""
        for name in WHOLE_FIELDS:
            value, least = getattr(self, name), 1 if name == "warmup_window" else 0
            if not _whole(value) or value < least:  # 1.5 steps, or '3', was taken
                raise BadValue(f"TimerConfig: {name} {value!r}: expected a whole number, {least} or more")
        for name in REAL_FIELDS:
            if not _real(value := getattr(self, name)):  # max_time='1': a TypeError from a comparison within
                raise BadValue(f"TimerConfig: {name} {value!r}: expected a number")
        for name in ("warmup_tolerance", "ci_target"):
            if not getattr(self, name) >= 0:  # ci_target=-1 was taken (0: never tight enough, sampled to max_time)
                said = f"{name} {getattr(self, name)!r}"
                raise BadValue(f"TimerConfig: {said}: expected a fraction, 0 or more (0.02: 2%)")
        if not self.min_time >= 0:
            raise BadValue(f"TimerConfig: min_time {self.min_time!r}: expected a number of seconds, 0 or more")
        if not self.max_time > 0:  # nan too: sampling would end before its first step; the cell would measure nothing
            raise BadValue(f"TimerConfig: max_time {self.max_time!r}: expected a number of seconds above 0")
        if self.min_time > self.max_time:
            default = " (its default)" if self.min_time == TimerConfig.min_time else ""
            raise BadValue(f"TimerConfig: min_time {self.min_time:g}{default} is above max_time {self.max_time:g}: "
                           f"give a min_time of at most {self.max_time:g} too, or a longer max_time")  # fmt: skip
        for name in WHOLE_FIELDS + REAL_FIELDS:  # numpy's int64 as Python's int: the task's JSON takes it
            object.__setattr__(self, name, (int if name in WHOLE_FIELDS else float)(getattr(self, name)))


WHOLE_FIELDS = ("min_steps", "max_warmup", "warmup_window")
REAL_FIELDS = ("min_time", "max_time", "warmup_tolerance", "ci_target")


def _whole(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def as_flags(message: str) -> str:
    """A TimerConfig's ValueError in the words of the command line that set its fields (a stored run's `--resume`)."""
    for name in ("min_steps", "min_time", "max_time", "max_warmup"):
        message = re.sub(rf"\b{name}\b", f"--{name.replace('_', '-')}", message)
    return message.removeprefix("TimerConfig: ")


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


# how a step without a DeviceClock is timed (`timed_step`); a CPU step's sync does nothing: it is over when it returns
SYNCHRONIZED = "bracketed: the clock read around each step, the device synchronized on both sides"


class DeviceClock(Protocol):
    """Points in an asynchronous device's queue (CUDA events): marking one returns at once. `HOW`: how a step is
    timed with it, in words stored with each cell (its settings' `timing`)."""

    HOW: str

    def mark(self) -> Any: ...

    def seconds(self, start: Any, end: Any) -> float:
        """The device's time from mark `start` to mark `end`; waits until the device has reached `end`."""
        ...


class HostClock:
    """A `DeviceClock` for a framework that runs steps asynchronously but offers no events in the device's queue
    (JAX's dispatch): a mark is the latest step's output, and its time is when the host finds that output ready,
    waited for only when `pipelined` reads it, which is after the host has launched the steps behind it. While the
    device is the slower, the host is already waiting when the output becomes ready, so the time is the device's;
    while the host is, the output is ready before the host asks, and the time between two marks is the host's time
    to launch a step: either way what a training loop gets. The first mark is the device idle (nothing launched
    yet), at the time it is taken."""

    HOW = "pipelined: each step's end when the host finds its output ready"

    def __init__(self, latest: Callable[[], Any], wait: Callable[[Any], Any], clock=time.perf_counter) -> None:
        self.latest, self.wait, self.clock = latest, wait, clock
        self.marked = False

    def mark(self) -> list:
        if not self.marked:
            self.marked = True
            return [None, self.clock()]
        return [self.latest(), None]  # [output, when it was seen ready]

    def seconds(self, start: list, end: list) -> float:
        return self._ready(end) - self._ready(start)

    def _ready(self, mark: list) -> float:
        if mark[1] is None:
            self.wait(mark[0])
            mark[1] = self.clock()
        return mark[1]


PIPELINE_DEPTH = 2  # steps the host may launch beyond the last one whose time is read


def pipelined(step: Callable[[], None], clock: DeviceClock, depth: int = PIPELINE_DEPTH) -> Callable[[], float]:
    """A `run` for `warm_up` and `sample` that never waits for the step it has just launched.

    Each call launches one step and returns the time of the step `depth` launches before it: the device's time from
    the end of the step before that one to its end, which includes any time the device sat idle waiting for the host
    to launch work, so in steady state it is the step's time in a plain training loop. The first call launches
    `depth + 1` steps to fill the pipeline; the last `depth` steps launched are never read (they finish at the
    caller's next sync). Samples come in the order the steps ran."""
    marks = deque([clock.mark()])  # the device's idle start: the first step's time includes its launch latency

    def run() -> float:
        while len(marks) < depth + 2:
            step()
            marks.append(clock.mark())
        start = marks.popleft()
        return clock.seconds(start, marks[0])

    return run


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


SPACING = 64  # beyond this many samples the stopping rule is checked once each time their number grows by 1/64


def sample(
    run: Callable[[], float],
    cfg: TimerConfig,
    on_sample: Callable[[float], None] = lambda t: None,
    clock=time.perf_counter,
) -> list[float]:
    """Timed steps until `enough`; every sample is passed to `on_sample` as it is taken.

    What runs between two steps stays a few microseconds however many steps there are: on a device that runs ahead
    of the host (`pipelined`) the host's time between launches can become the step's, and a millisecond step may be
    sampled a hundred thousand times. So the samples are not inserted in order one by one (moving up to n of them
    each time): they are sorted when the rule is checked, which is after every step up to `SPACING` steps, then each
    time their number has grown by 1/`SPACING` (a sort that merges the new ones into the sorted rest). The time limit
    is checked after every step."""
    samples: list[float] = []
    ordered: list[float] = []
    start = clock()
    due = 0  # the number of samples at which the rule is next checked in full
    while True:
        elapsed = clock() - start
        if elapsed >= cfg.max_time:
            return samples
        if len(samples) >= due:
            ordered += samples[len(ordered) :]
            ordered.sort()
            if enough(ordered, elapsed, cfg):
                return samples
            due = len(samples) + max(1, len(samples) // SPACING)
        t = run()
        samples.append(t)
        on_sample(t)
