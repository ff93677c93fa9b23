"""The probe: a short child process that answers questions needing a framework (a `ProbeTask`).

    python -m dlperf.runner.probe TASK.json EVENTS.jsonl

The parent never imports a framework; it asks the probe which devices exist, which versions are installed, and what a
user's workload factory builds. The answer is an `Answer` event; a bad factory is an `Error` marked as the user's.
"""

from __future__ import annotations

import os
import sys

from dlperf.errors import UsageError
from dlperf.protocol import Answer, Error, ProbeTask, Reporter, first
from dlperf.runner.child import exit_now, serve

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


def respond(framework: str, request: dict) -> dict:
    """The framework-independent questions are answered here through the backend contract; the rest by the
    backend's own `probe`."""
    from dlperf.frameworks import backend

    fw = backend(framework)
    what = request.get("what")
    if what == "selftest":
        return selftest(fw, framework)
    if what == "threads":
        return thread_use(fw, int(request["threads"]), float(request.get("seconds", 1.0)))
    return fw.probe(request)


def selftest(fw, framework: str) -> dict:
    """Import the framework and train the tiniest workload for two steps: what `dlperf env install` verifies."""
    import time

    from dlperf.envs import PACKAGES
    from dlperf.workloads import BUILTIN

    settings = fw.configure_threads(1)
    start = time.perf_counter()
    train = fw.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32")
    losses = []
    for _ in range(2):
        losses.append(float(train.step()))
        train.sync()
    return {
        "framework": framework,
        "python": sys.version.split()[0],
        "versions": _versions(PACKAGES.get(framework, (framework,))),
        "params": train.params,
        "losses": losses,
        "step_s": round(time.perf_counter() - start, 3),
        "settings": settings,
    }


def _versions(packages) -> dict:
    from importlib import metadata

    found = {}
    for name in (*packages, "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def thread_use(fw, threads: int, seconds: float, size: int = 1024) -> dict:
    """CPU time over wall time of back-to-back fp32 matrix products at `threads`: about 1 at one thread, about 2 at
    two when the framework honours the setting (a ratio, so it does not depend on how fast the machine is)."""
    import time

    from dlperf.measure import system

    settings = fw.configure_threads(threads)
    product = fw.matmul(size)
    for _ in range(3):  # compile, allocate, spin the pool up
        product()
    count, machine0, cpu0, wall0 = 0, system.cpu_times(), _cpu_s(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        product()
        count += 1
    cpu, wall = _cpu_s() - cpu0, time.perf_counter() - wall0
    return {
        "threads": threads,
        "cpu_s": cpu,
        "wall_s": wall,
        "ratio": cpu / wall,
        "products": count,
        # other processes' load meanwhile: a busy machine lowers the ratio whatever the framework does
        "others_cpu_share": system.others_cpu_share(machine0, system.cpu_times(), cpu, wall),
        "settings": settings,
    }


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def answer(task: ProbeTask, emit: Reporter) -> None:
    try:
        emit(Answer(respond(task.framework, task.request)))
    except UsageError as exc:  # the user's input (a factory that does not build), not the probe's failure
        emit(Error(str(exc), usage=True))


def main(argv: list[str]) -> int:
    return serve(argv, answer)


if __name__ == "__main__":
    exit_now(main(sys.argv))  # every event is on disk: skip the interpreter's teardown
