"""The parent side of a profiled cell (`dlperf profile`, `run --profile`): after a cell's timed processes, one untimed
child runs the cell's `ProfileTask` (`worker/profile.py`) through the one launcher, and its `Profiled` event
becomes the cell's row of the store's profiles table. A child that cannot profile the cell reports `unsupported`
with the reason (skipped, not failed). Nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.frameworks.common import profiling
from dlperf.protocol import Cell, Event, Profiled, ProfileTask, first
from dlperf.runner.lifeline import _alive as alive  # a process that has ended, zombies included
from dlperf.runner.outcome import outcome
from dlperf.store.records import ProfileOutcome
from dlperf.vocab import Status

if TYPE_CHECKING:
    from dlperf.runner.launch import ChildResult
    from dlperf.spec import RunSpec


def wanted(spec: RunSpec, repeat: int, status: str) -> bool:
    """A cell is profiled once, after its last timed process, when it was measured: a cell that failed or does not
    apply has no step to explain."""
    return spec.profile and repeat == spec.repeats - 1 and status == Status.OK


def task_of(cell: Cell, workload: dict[str, Any], spec: RunSpec) -> ProfileTask:
    """The profile child's task; the trace directory is made here, so the child only writes into it."""
    if spec.trace_dir is not None:
        Path(spec.trace_dir).mkdir(parents=True, exist_ok=True)
    data = spec.data if cell.loader else None
    return ProfileTask(cell, workload, steps=spec.profile_steps, trace_dir=spec.trace_dir, nvtx=spec.nvtx, data=data,
                       max_trace_bytes=int(spec.max_trace_mib * 2**20))  # fmt: skip


def profile(
    cell: Cell, workload: dict[str, Any], spec: RunSpec, python: str, poll: Callable[[], None] = lambda: None
) -> ProfileOutcome:
    """Profile one cell in a fresh child; its outcome for `Store.record_profile` (never raises for a child's
    failure)."""
    from dlperf.runner.launch import launch

    try:
        launched = launch(task_of(cell, workload, spec), python, cell.threads, spec.timeout, poll=poll)
    finally:  # the child has ended, whole or killed (a timeout, an interrupt): a trace it did not finish goes
        remove_cut_short(spec.trace_dir)
    return row_of(launched.main, launched.child, spec.timeout)


def remove_cut_short(trace_dir: str | None) -> None:
    """Remove the traces in `trace_dir` still under their partial name whose writer has ended: cut short."""
    for path, writer in profiling.partials(trace_dir) if trace_dir else ():
        if not alive(writer):
            Path(path).unlink(missing_ok=True)


def row_of(events: list[Event], child: ChildResult, timeout: float) -> ProfileOutcome:
    """The profile's outcome: its Profiled event, or None and why there is none (`runner/outcome.py`)."""
    profiled = first(events, Profiled)
    measured = profiled is not None and not child.timed_out
    found = outcome(events, child, timeout, result=Profiled, measured=measured, ended="ended without a profile")
    return ProfileOutcome(found.status, found.reason, child.duration_s, profiled if found.ok else None)
