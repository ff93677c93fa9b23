"""What the profilers of every backend do alike (torch, jax and tensorflow `profiler.py`): the profiled window of
steady steps, the seconds by category filled to the step, the top operators ranked, the trace kept under its cap.
Each profiler keeps its framework's own calls: starting its profiler, reading its events, classifying them.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from dlperf.vocab import Category

TOP_OPS = 15  # the operators a profile lists, the most time first
PARTIAL = ".partial-"  # a trace being written is named so, hidden in its directory, until it is whole
_WRITER = re.compile(r"-(\d+)-\d+\.json\.gz$")  # the pid of the process writing a trace, in its name


UNEVEN = 3.0  # a profiled step over this many times the median of the window's is said (`uneven`)


def window(step: Callable[[], Any], sync: Callable[[], None], steps: int, each: list[float] | None = None) -> float:
    """Seconds per step of `steps` steps run back to back and waited for once at the end: the profiled window of a
    step already warmed up and synced (`worker/profile.py`), inside the framework's profiler. `each`: filled with
    each step's seconds as the host saw it, which are the step's own where it has ended when `step` returns (a
    PyTorch step on the CPU)."""
    start = last = time.perf_counter()
    for _ in range(steps):
        step()
        if each is not None:
            each.append(-last + (last := time.perf_counter()))
    sync()
    return (time.perf_counter() - start) / steps


def uneven(each: list[float]) -> str | None:
    """A note where one profiled step took over UNEVEN times the median of the window's: the shares are the window's
    sums, so one step disturbed (another process on the cores, a page fault storm) weighs in them as if typical, and
    can decide the verdict. None where the steps were even."""
    if len(each) < 3:
        return None
    ordered = sorted(each)
    median, slowest = ordered[len(ordered) // 2], ordered[-1]
    if not median or slowest <= UNEVEN * median:
        return None
    return (f"uneven profile: one of the {len(each)} profiled steps took {slowest * 1e3:.3g} ms, "
            f"{slowest / median:.1f}x their median of {median * 1e3:.3g} ms (disturbed: another process on the "
            "cores?), and the shares above count it as a typical step; profile again for a steady one")  # fmt: skip


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
    """Whether a trace of `size` compressed bytes is kept; above `max_bytes` it is not (the caller removes what it
    wrote), and a note says so, and how to keep it: the profile's figures are kept either way."""
    if size <= max_bytes:
        return True
    notes.append(f"no trace kept: {size} bytes compressed, above the cap of {max_bytes} bytes ({max_bytes / 2**20:.2g} "
                 "MiB: --max-trace-mib raises it); the figures above are the whole profile's")  # fmt: skip
    return False


def written(write: Callable[[], Any], path: str, notes: list[str]) -> bool:
    """Whether `write` wrote the trace at `path` whole. Where its folder refused it (a full disk, a quota, a folder
    made read-only), what was written of it is removed and a note says why: the profile's figures are kept, as a trace
    above the cap leaves them."""
    try:
        write()
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(path)
        notes.append(f"no trace kept: writing it in {os.path.dirname(path) or '.'} failed ({exc.strerror or exc}); "
                     "the figures above are the whole profile's")  # fmt: skip
        return False
    return True


def trace_name(stem: str, pid: int) -> str:
    """A trace's file name: its cell, the process writing it (`pid`) and the time, so that none is overwritten."""
    return f"{stem}-{pid}-{time.time_ns()}.json.gz"


def partial_of(path: str) -> str:
    """Where the trace kept at `path` is written first: hidden beside it, renamed to `path` once whole, so that a trace
    cut short (its process killed, an interrupt) never takes a trace's name."""
    head, name = os.path.split(path)
    return os.path.join(head, PARTIAL + name)


def partials(trace_dir: str) -> Iterator[tuple[str, int]]:
    """The traces being written in `trace_dir` (or left cut short), with the pid of the process writing each."""
    for name in os.listdir(trace_dir) if os.path.isdir(trace_dir) else []:
        if name.startswith(PARTIAL) and (writer := _WRITER.search(name)):
            yield os.path.join(trace_dir, name), int(writer.group(1))
