"""A child's outcome, of every kind of child: its status, and the reason in one line when it is not `ok`.

One function reads what every child reports the same way (`worker/child.serve`): `Unsupported` (the cell does not
apply: skipped, never failed), `Error` (the child's own exception), the result it was started for (a cell's `Done`,
a profile's `Profiled`, a peak's or a probe's `Answer`), and how the process ended (`launch.ChildResult`: a timeout,
a signal, an exit code, the last line it wrote to stderr).
"""

from __future__ import annotations

from dataclasses import dataclass

from dlperf.protocol import Done, Error, Event, Unsupported, first
from dlperf.runner.launch import ChildResult
from dlperf.vocab import Status

TAIL_CHARS = 300  # of the last line of stderr, in a reason


@dataclass(frozen=True)
class Outcome:
    status: Status
    reason: str | None = None  # None when ok

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


def outcome(
    events: list[Event],
    child: ChildResult,
    timeout: float,
    *,
    result: type[Event] = Done,
    flag: str | None = "--timeout",
    measured: bool = False,
    kept: str = "",
    ended: str = "worker ended without a result",
) -> Outcome:
    """The child's status and reason, the first of: `unsupported` (its reason), `failed` with the child's own error;
    `ok` when the caller knows it `measured` what it was started for whatever happened later; `timeout` (a `limit`'s
    stop reason, else exceeding `timeout`, the value of `flag` (None: a limit no flag set), then `kept`: what was
    kept of it); `failed` when the process died (the signal or exit code, and its last line of stderr); `failed`
    when it ended without a `result` event (`ended` says so, with that line); `ok`."""
    if unsupported := first(events, Unsupported):
        return Outcome(Status.UNSUPPORTED, unsupported.reason)
    if failure := first(events, Error):
        return Outcome(Status.FAILED, failure.error)
    if measured:
        return Outcome(Status.OK)
    if child.timed_out:
        limit = f"{flag} {timeout:g} s" if flag else f"{timeout:g} s"
        return Outcome(Status.TIMEOUT, child.stop_reason or f"exceeded {limit}{kept}")
    if child.crashed_reason:
        return Outcome(Status.FAILED, f"{child.crashed_reason}{tail(child)}")
    if not first(events, result):
        return Outcome(Status.FAILED, f"{ended}{tail(child)}")
    return Outcome(Status.OK)


def tail(child: ChildResult) -> str:
    """The last line the child wrote to stderr that says something, as the end of a reason: ": <line>", or "" when
    it wrote none. torchrun closes its reports with rules of '=', which say nothing; a line is cut at TAIL_CHARS."""
    lines = [line.strip() for line in child.stderr_tail.splitlines() if line.strip().strip("=*-")]
    return f": {lines[-1][:TAIL_CHARS]}" if lines else ""
