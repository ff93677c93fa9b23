"""The probe's child: answers a question that needs a framework (a `ProbeTask`) with one `Answer` event.

    python -m dlperf.worker.probe TASK.json EVENTS.jsonl

The parent's side, which asks and reads the answer, is `runner/probe.py`.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from dlperf.answers import (
    ProbeRequest,
    SelftestAnswer,
    SelftestRequest,
    StartAnswer,
    StartRequest,
    ThreadsAnswer,
    ThreadsRequest,
)
from dlperf.errors import UsageError
from dlperf.protocol import Answer, Error, ProbeTask, Reporter
from dlperf.wire import Wire
from dlperf.worker import sources
from dlperf.worker.child import exit_now, own_temp_folder, serve


def respond(framework: str, request: ProbeRequest) -> Wire:
    """The framework-independent questions are answered here through the backend contract; the rest by the
    backend's own `probe`, whose dict becomes the request's answer type here (a key it lacks is an error naming it)."""
    from dlperf.frameworks import backend

    fw = backend(framework)
    if isinstance(request, SelftestRequest):
        return selftest(fw, framework)
    if isinstance(request, ThreadsRequest):
        return thread_use(fw, request.threads, request.seconds)
    if isinstance(request, StartRequest):
        return start(fw, request.threads)
    found = request.answer_of(fw.probe(request.to_json()))
    if hasattr(found, "sources"):  # a count, a trace, a description: kept with the user's files it was made from
        return dataclasses.replace(found, sources=sources.imported(own_temp_folder()))
    return found


def selftest(fw, framework: str) -> SelftestAnswer:
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
    return SelftestAnswer(
        framework=framework,
        python=sys.version.split()[0],
        versions=_versions(PACKAGES.get(framework, (framework,))),
        params=train.params,
        losses=losses,
        step_s=round(time.perf_counter() - start, 3),
        settings=settings,
    )


def start(fw, threads: int) -> StartAnswer:
    """The data segment with the framework imported, its threads set and its pool started by a small product."""
    from dlperf.measure import system

    fw.configure_threads(threads)
    fw.matmul(64)()
    return StartAnswer(data_bytes=system.data_bytes() or 0, threads=threads)


def _versions(packages) -> dict:
    from importlib import metadata

    found = {}
    for name in (*packages, "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def thread_use(fw, threads: int, seconds: float, size: int = 1024) -> ThreadsAnswer:
    """Back-to-back fp32 matrix products at `threads` for `seconds`: the cores they keep busy, about 1 at one thread
    and 2 at two when the framework honours the setting (ratios, so they do not depend on how fast the machine is).
    Each thread's CPU time and waits for a CPU are read too: summed, other processes' load does not change them."""
    import time

    from dlperf.measure import system

    settings = fw.configure_threads(threads)
    product = fw.matmul(size)
    for _ in range(3):  # compile, allocate, spin the pool up
        product()
    count, machine0, tasks0 = 0, system.cpu_times(), system.thread_times()
    cpu0, wall0 = _cpu_s(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        product()
        count += 1
    cpu, wall = _cpu_s() - cpu0, time.perf_counter() - wall0
    used, waited = _thread_deltas(tasks0, system.thread_times())
    return ThreadsAnswer(
        threads=threads,
        cpu_s=cpu,
        wall_s=wall,
        ratio=cpu / wall,
        products=count,
        # other processes' load meanwhile: a busy machine lowers the ratio whatever the framework does
        others_cpu_share=system.others_cpu_share(machine0, system.cpu_times(), cpu, wall),
        settings=settings,
        waited_s=waited,
        runnable=None if waited is None else (sum(used) + waited) / wall,
        thread_cpu_s=[round(s, 4) for s in used],
    )


def _thread_deltas(before: dict, after: dict) -> tuple[list[float], float | None]:
    """Each thread's CPU seconds between two `thread_times` readings (busiest first, idle threads left out), and
    their waits for a CPU summed (None without schedstat). A thread started meanwhile counts from zero."""
    used, waited = [], 0.0
    for tid, (cpu, wait) in after.items():
        cpu0, wait0 = before.get(tid, (0.0, 0.0))
        if cpu > cpu0:
            used.append(cpu - cpu0)
        waited = None if wait is None or waited is None else waited + wait - (wait0 or 0.0)
    return sorted(used, reverse=True), waited


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def answer(task: ProbeTask, emit: Reporter) -> None:
    try:
        emit(Answer(respond(task.framework, task.request).to_json()))
    except UsageError as exc:  # the user's input (a factory that does not build), not the probe's failure
        emit(Error(str(exc), usage=True))


def main(argv: list[str]) -> int:
    return serve(argv, answer)


if __name__ == "__main__":
    exit_now(main(sys.argv))  # every event is on disk: skip the interpreter's teardown
