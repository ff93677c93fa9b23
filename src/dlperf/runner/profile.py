"""The parent side of a profiled cell (`dlperf profile`, `run --profile`): after a cell's timed processes, one untimed
child runs the cell's `ProfileTask` (`worker/profile.py`) through the one launcher, and its `Profiled` event
becomes the cell's row of the store's profiles table. A child that cannot profile the cell reports `unsupported`
with the reason (skipped, not failed). Nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.errors import UsageError
from dlperf.frameworks.common import profiling
from dlperf.measure.units import seconds
from dlperf.protocol import Cell, Event, Profiled, ProfileTask, first
from dlperf.runner.lifeline import _alive as alive  # a process that has ended, zombies included
from dlperf.runner.outcome import outcome
from dlperf.store.records import ProfileOutcome
from dlperf.vocab import Status

PROFILE_WARMUP = ProfileTask.warmup  # the profile child's warm-up steps, when they fit

if TYPE_CHECKING:
    from dlperf.runner.launch import ChildResult, Launched, Watch
    from dlperf.spec import RunSpec


def wanted(spec: RunSpec, repeat: int, status: str) -> bool:
    """A cell is profiled once, after its last timed process, when it was measured: a cell that failed or does not
    apply has no step to explain."""
    return spec.profile and repeat == spec.repeats - 1 and status == Status.OK


def steps_that_fit(spec: RunSpec, median_s: float | None) -> tuple[int, int]:
    """The profile child's (warm-up, profiled) steps: PROFILE_WARMUP and --steps when their time at the cell's timed
    median fits the timer's max_time, else as many as fit, profiled ones first, at least one of each. Asked for
    regardless, a 31 s step made `dlperf profile --max-time 10` run ten of them (5 min) in its profile alone."""
    return fitted_steps(spec.profile_steps, spec.timer.max_time, median_s)


def fitted_steps(profile_steps: int, max_time: float, median_s: float | None) -> tuple[int, int]:
    """`steps_that_fit` of --steps and --max-time (the dry run's estimate fits them to a pilot's step)."""
    if not median_s:
        return PROFILE_WARMUP, profile_steps
    fit = int(max_time // median_s)
    steps = max(1, min(profile_steps, fit - 1))
    return max(1, min(PROFILE_WARMUP, fit - steps)), steps


def task_of(cell: Cell, workload: dict[str, Any], spec: RunSpec, median_s: float | None = None) -> ProfileTask:
    """The profile child's task, its steps fitted to the timer's max_time at the cell's timed median
    (`steps_that_fit`); the trace directory is made here, so the child only writes into it."""
    if spec.trace_dir is not None:
        try:
            Path(spec.trace_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # what changed since the probe before planning (`spec.probe_trace_dir`)
            raise UsageError(f"--trace-dir {spec.trace_dir!r}: cannot be made ({exc.strerror or exc})") from None
    data = spec.data if cell.loader else None
    warmup, steps = steps_that_fit(spec, median_s)
    return ProfileTask(cell, workload, steps=steps, warmup=warmup, trace_dir=spec.trace_dir, nvtx=spec.nvtx,
                       data=data, max_trace_bytes=int(spec.max_trace_mib * 2**20))  # fmt: skip


def profile(
    cell: Cell, workload: dict[str, Any], spec: RunSpec, python: str, poll: Callable[[], None] = lambda: None,
    *, median_s: float | None = None, watch: Watch | None = None,
) -> ProfileOutcome:  # fmt: skip
    """Profile one cell in a fresh child; its outcome for `Store.record_profile` (never raises for a child's
    failure). `median_s`: the cell's timed median, which fits the profiled steps to the timer's max_time; `watch`
    may stop the child with a reason (a search's budget running out). A child suspended while it ran (Ctrl-Z) is
    launched again, as a timed one is (`launch.unsuspended`): the pause would be in its profiled steps' wall time, put
    down to the host or the device's idle time, and in its trace; the suspended one's trace is removed."""
    from dlperf.runner.launch import launch, unsuspended

    task = task_of(cell, workload, spec, median_s)
    try:
        launched, notes = unsuspended(lambda: launch(task, python, cell.threads, spec.timeout, poll=poll, watch=watch),
                                      discard=remove_trace, did="profiled")  # fmt: skip
    finally:  # the child has ended, whole or killed (a timeout, an interrupt): a trace it did not finish goes
        remove_cut_short(spec.trace_dir)
    row = row_of(launched.main, launched.child, spec.timeout)
    if row.profiled is not None:
        row.profiled.notes.extend(notes)
    if row.profiled is not None and (task.steps, task.warmup) != (spec.profile_steps, PROFILE_WARMUP):
        row.profiled.notes.append(
            f"{task.steps} profiled step{'s' * (task.steps > 1)} after {task.warmup} warm-up, not --steps "
            f"{spec.profile_steps} after {PROFILE_WARMUP}: at the timed median, {seconds(median_s)}, no more fit "
            f"the {seconds(spec.timer.max_time)} the profile's steps may take"
        )
    return row


def remove_trace(launched: Launched) -> None:
    """Remove the trace of a profile that is not kept (suspended while it ran)."""
    profiled = first(launched.main, Profiled)
    if profiled is not None and profiled.trace:
        Path(profiled.trace).unlink(missing_ok=True)


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
    return ProfileOutcome(found.status, found.reason, child.duration_s, profiled if found.ok else None,
                          child.started, child.cold_because)  # fmt: skip
