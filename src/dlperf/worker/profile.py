"""The profile child: one untimed process warms a cell's train step up, then runs a few steady steps under the
framework's profiler (a `ProfileTask`) and reports where the time went.

    python -m dlperf.worker.profile TASK.json EVENTS.jsonl

Never a timed process: the labels and the profiler's own cost per operator would be in the samples. Like the cell
worker, it imports the standard library, dlperf's standard-library-only modules and one framework. A backend without a
profiler raises NotImplementedError: the profile is `unsupported`, with the reason.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time

from dlperf import loaders
from dlperf.frameworks import backend, build_step
from dlperf.frameworks.common import heap, profiling
from dlperf.protocol import Built, Done, Profiled, ProfileTask, Reporter
from dlperf.worker import feed
from dlperf.worker.child import exit_now, serve
from dlperf.workloads import Workload


def run_profile(task: ProfileTask, emit: Reporter) -> None:
    """build -> warm up (the first step compiles, when the mode does) -> `task.steps` steps under the profiler."""
    cell = task.cell
    kept = heap.applied(cell.mode)  # the allocator's mode, as the cell it profiles has it (`worker/cell.py`)
    fw = backend(cell.framework)  # thread settings already in place (the launcher's environment)
    settings = {**fw.configure_threads(cell.threads), **kept}
    start = time.perf_counter()
    workload = Workload.from_json(task.workload)
    train, noted = build_step(fw, cell.framework, workload, cell.device, cell.mode, nvtx=task.nvtx)
    emit(Built(train.params, time.perf_counter() - start, {**settings, **train.settings(), **noted}, fw.version()))
    if task.data is not None:
        fed_by_loader(task, fw, workload, train)
    for _ in range(max(task.warmup, 2 if train.compiles else 0)):  # the compiling step, and one steady after it
        train.step()
    train.sync()
    kept = trace_path(task)
    found = fw.profile(train, task.steps, None if kept is None else profiling.partial_of(kept), task.max_trace_bytes)
    found["trace"] = keep(found.get("trace"), kept)
    emit(Profiled(**found))
    emit(Done())


def keep(written: str | None, kept: str | None) -> str | None:
    """The trace, whole, renamed from the partial name it was written under to its own; a partial trace the backend
    did not keep (over its cap) is removed."""
    if kept is None:
        return None
    partial = profiling.partial_of(kept)
    if written is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        return None
    os.replace(partial, kept)
    return kept


def fed_by_loader(task: ProfileTask, fw, workload: Workload, train) -> None:
    """A loader cell's step waits for its batch from the loader first (`feed.Feed`), as the timed step does; the
    profiler sees the step's `feed` and puts the wait under its own label: `data` on the CPU (PyTorch); on a CUDA
    device the wait shows as the device's gaps (host, idle) and the batch's copy as copy_h2d."""
    setting = loaders.setting(task.cell.loader)
    train.feed = feed.Feed(fw.loader(workload, task.data, setting, task.cell.device, train), train)
    train.step = train.feed.step  # the instance's: the feed calls the step's own


def trace_path(task: ProfileTask) -> str | None:
    """A new file in the task's trace directory, named after the cell (and this process, so none is overwritten)."""
    if task.trace_dir is None:
        return None
    os.makedirs(task.trace_dir, exist_ok=True)
    cell = task.cell
    name = re.sub(r"[^\w.+-]+", "_", f"{cell.workload}-{cell.framework}-{cell.device}-t{cell.threads}-{cell.mode}")
    return os.path.join(task.trace_dir, profiling.trace_name(name, os.getpid()))


def main(argv: list[str]) -> int:
    # a profiler's temporary files (torch writes the whole trace uncompressed first) go in the folder the launcher
    # gave this child (`child.own_temp`), which it removes however the child ends: nothing is left elsewhere
    return serve(argv, run_profile)


if __name__ == "__main__":
    exit_now(main(sys.argv))  # every event is on disk: skip the interpreter's teardown
