"""The probe: a short child process that answers questions needing a framework (a `ProbeTask`).

The parent never imports a framework; it asks the probe which devices exist, which versions are installed, and what a
user's workload factory builds. The question is a typed request (`answers.py`), the answer an `Answer` event read
back as the request's answer type; a bad factory is an `Error` marked as the user's.
This is the parent's side; the child's is `worker/probe.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from dlperf.answers import A, ProbeRequest
from dlperf.errors import ProbeFailed, UsageError
from dlperf.protocol import Answer, Error, ProbeTask, first
from dlperf.runner.outcome import outcome
from dlperf.vocab import OUT_OF_MEMORY, Status

PROBE_TIMEOUT_S = 180.0


def ask(
    framework: str, request: ProbeRequest[A], python: str = sys.executable, timeout: float = PROBE_TIMEOUT_S,
    threads: int = 1, *, timeout_flag: str | None = None, stopped: Callable[[], bool] | None = None,
) -> A:  # fmt: skip
    """Run the probe (with the thread variables of `threads`) and return its answer, typed by the request. A user
    error in the child (a bad factory) becomes a UsageError here, and so does a probe that gives no answer, but one
    killed by a signal (by hand, the out-of-memory killer) or out of memory is a ProbeFailed (exit 1, not 2);
    `timeout_flag` is the flag that set `timeout`, named when the probe runs out of it. `stopped` (asked a few
    times a second) stops the child's tree once it says so: how a probe asked from a thread, which an interrupt
    never reaches, is stopped with the command."""
    from dlperf.runner.launch import launch

    watch = (lambda new: "stopped: the command ended" if stopped() else None) if stopped else None
    launched = launch(ProbeTask(framework, request), python, threads, timeout, watch=watch)
    if launched.child.orphaned:  # killed with the warm parent it was forked from, which died: asked once more
        launched = launch(ProbeTask(framework, request), python, threads, timeout, watch=watch)
    answer, error = first(launched.main, Answer), first(launched.main, Error)
    if error is not None and error.usage:
        raise UsageError(error.error)
    found = outcome(launched.main, launched.child, timeout, result=Answer, flag=timeout_flag,
                    measured=answer is not None, ended="gave no answer")  # fmt: skip
    if not found.ok:
        why = found.reason if found.status is Status.TIMEOUT else f"failed: {found.reason}"
        killed = error is None and (launched.child.returncode or 0) < 0  # by a signal: no input of the user's
        short = error is not None and error.error.startswith(OUT_OF_MEMORY)  # as the out-of-memory killer's kill
        said = f"{request.subject()}: the {framework} probe {why}{mend(framework, python, why)}"
        raise (ProbeFailed if killed or short else UsageError)(said)
    return request.answer_of(answer.result)


def mend(framework: str, python: str, why: str) -> str:
    """What to do where a dedicated environment cannot import what it was verified with (a package uninstalled or
    changed by hand since): `dlperf env list` still reads its install record as verified."""
    from dlperf import envs

    broken = "ModuleNotFoundError" in why or "ImportError" in why
    if not broken or framework not in envs.PACKAGES or python != str(envs.env_python(framework)):
        return ""
    return f"; its environment is broken: dlperf env install {framework} --force makes it again"
