"""The probe: a short child process that answers questions needing a framework (a `ProbeTask`).

The parent never imports a framework; it asks the probe which devices exist, which versions are installed, and what a
user's workload factory builds. The answer is an `Answer` event; a bad factory is an `Error` marked as the user's.
This is the parent's side; the child's is `worker/probe.py`.
"""

from __future__ import annotations

import sys

from dlperf.errors import UsageError
from dlperf.protocol import Answer, Error, ProbeTask, first

PROBE_TIMEOUT_S = 180.0


def ask(
    framework: str, request: dict, python: str = sys.executable, timeout: float = PROBE_TIMEOUT_S, threads: int = 1,
    *, timeout_flag: str | None = None,
) -> dict:  # fmt: skip
    """Run the probe (with the thread variables of `threads`) and return its answer. A user error in the child (a bad
    factory) becomes a UsageError here, and so does a probe that gives no answer; `timeout_flag` is the flag that
    set `timeout`, named when the probe runs out of it."""
    from dlperf.runner.launch import launch

    launched = launch(ProbeTask(framework, request), python, threads, timeout)
    answer, error, result = first(launched.main, Answer), first(launched.main, Error), launched.child
    if error is not None and error.usage:
        raise UsageError(error.error)
    if error is not None:
        raise UsageError(f"{_subject(request)}: the {framework} probe failed: {error.error}")
    if answer is None:
        limit = f"{timeout_flag} {timeout:g}" if timeout_flag else f"{timeout:g}"
        why = f"timed out after {limit} s" if result.timed_out else (result.crashed_reason or "gave no answer")
        last = result.stderr_tail.strip().splitlines()[-1:] or [""]
        raise UsageError(f"{_subject(request)}: the {framework} probe {why}{': ' + last[0] if last[0] else ''}")
    return answer.result


def _subject(request: dict) -> str:
    if request.get("what") == "data":
        return f"--data {request['data']}"
    if request.get("what") == "ops":
        return "counting the step's operators"
    return f"--workloads {request['source']!r}" if "source" in request else "checking the frameworks and devices"
