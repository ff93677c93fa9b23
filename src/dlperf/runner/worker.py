"""The worker: one child process measures one cell and reports JSON lines to a file.

    python -m dlperf.runner.worker TASK.json RESULT.jsonl

It imports the standard library, dlperf's standard-library-only modules and exactly one framework (through its
backend), so it runs in an environment that has nothing else installed. The thread variables were set by the parent
before this interpreter started; the framework is imported only after the CPU pinning below. Every event is
flushed as it happens: if the parent kills this process at its timeout, the samples taken so far survive.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
import traceback
from collections.abc import Callable

from dlperf.frameworks import backend
from dlperf.measure import system
from dlperf.measure.timer import TimerConfig, sample, timed_step, warm_up
from dlperf.modes import Mode, mode_components
from dlperf.workloads import Workload

SLOW_FACTOR = 2.0  # see `measure`: a search's candidate slower than this many times its bar stops after timing


class Events:
    """Append-only JSON lines, one flushed write per event."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def __call__(self, event: str, **fields) -> None:
        self._file.write(json.dumps({"event": event, **fields}) + "\n")
        self._file.flush()


def measure(task: dict, emit: Events) -> None:
    """build -> (compile) -> warm up -> timed steps -> FLOPs, memory and the loss check (untimed).

    The timed loop sees exactly the history a plain training loop has: the FLOP-counting and memory-tracking steps
    come after it, because they leave the allocator (and its mmap threshold) in another state than training alone."""
    cell, cfg = task["cell"], TimerConfig(**task["timer"])
    fw = backend(cell["framework"])  # the framework is imported here, thread settings already in place
    settings = fw.configure_threads(cell["threads"])
    start = time.perf_counter()
    workload = Workload.from_json(task["workload"])
    train = fw.build(workload, cell["device"], cell["mode"])
    emit("built", params=train.params, build_s=time.perf_counter() - start, settings={**settings, **train.settings()})

    def run() -> float:
        return timed_step(train.step, train.sync)

    if train.compiles:  # the first step compiles (or captures a CUDA graph): timed apart, never a sample
        emit("compiling")
        first = run()
        emit("compiled", first_step_s=first, **train.compile_stats())
    warm = warm_up(run, cfg)
    emit("warmup", steps=warm.steps, steady=warm.steady, times=warm.times)
    sampled = timed_samples(run, cfg, emit)
    emit("sampled", **sampled)
    if train.compiles:
        emit("compile_end", **train.compile_stats())  # frames compiled since the first step are recompiles
    bar = task.get("check_if_faster_than_s")
    candidate = wants_check({**task, "check_if_faster_than_s": None}, None)  # the baseline is never stopped
    if candidate and bar and sampled["median_s"] and sampled["median_s"] > SLOW_FACTOR * bar:
        # a search's candidate this much slower than the mode it would replace is out: its extra steps (FLOPs,
        # memory, the loss check) would only spend the search's budget
        emit("loss_check", ok=None, reason=f"not checked: {sampled['median_s'] / bar:.1f}x slower than {bar:.4g} s")
        emit("done", stopped_early=f"{sampled['median_s'] / bar:.1f}x slower than the mode it would replace")
        return
    emit("flops", **(train.count_flops() or {"flops_per_step": None}))
    emit("memory", **train.memory_of_step())
    if wants_check(task, sampled["median_s"]):
        emit("checking")
        emit("loss_check", **still_trains(fw, workload, cell))
    elif candidate and (not_faster := bar):
        reason = f"not checked: {sampled['median_s']:.4g} s per step is not faster than {not_faster:.4g} s"
        emit("loss_check", ok=None, reason=reason)
    emit("done")


def wants_check(task: dict, median_s: float | None) -> bool:
    """The loss check runs once per cell, in its first process (it trains from fixed seeds: another process would
    repeat it), for every mode but fp32 (the reference). A search may ask to skip it for a mode that is not faster
    than the one it would replace: such a mode is never chosen, and a slow mode's check is slow too."""
    cell = task["cell"]
    if not task.get("loss_check", True) or task.get("repeat", 0) != 0 or mode_components(cell["mode"]) == [Mode.FP32]:
        return False
    threshold = task.get("check_if_faster_than_s")
    return threshold is None or (median_s is not None and median_s < threshold)


def still_trains(fw, workload: Workload, cell: dict) -> dict:
    """The mode's short training against fp32 from the same start (untimed). A check that cannot run is reported
    with its reason and decides nothing; the timing stands either way."""
    start = time.perf_counter()
    try:
        return fw.loss_check(workload, cell["device"], cell["mode"])
    except Exception as exc:
        return {
            "ok": None,
            "reason": f"the check could not run: {_describe(exc)}",
            "seconds": time.perf_counter() - start,
        }


def timed_samples(
    run, cfg: TimerConfig, emit: Events, clock=time.perf_counter, own: Callable[[float], float] = lambda t: t
) -> dict:
    """The timed steps, each sample emitted as it is taken; returns what the machine did meanwhile.

    `clock` and `own` are for a DDP process: `run` returns the step's slowest time over the processes and `clock`
    sums those, so the stopping rule decides alike everywhere; `own(t)` is the process's own time of that step,
    which is what it emits."""
    before, rss_before, hwm_reset = system.cpu_times(), system.rss_bytes(), system.reset_rss_hwm()
    own_before, wall_before, faults_before = _own_cpu_s(), time.perf_counter(), _minor_faults()
    samples = sample(run, cfg, on_sample=lambda t: emit("sample", t=own(t)), clock=clock)
    after, own, wall = system.cpu_times(), _own_cpu_s() - own_before, time.perf_counter() - wall_before
    faults = _minor_faults() - faults_before
    return {
        "n": len(samples),
        "median_s": statistics.median(samples) if samples else None,
        "steal_fraction": system.steal_fraction(before, after),
        "others_cpu_share": system.others_cpu_share(before, after, own, wall),
        "cpu_utilization": own / wall if wall > 0 else None,  # cores kept busy on average: ~threads when it scales
        "minor_faults_per_step": faults / len(samples) if samples else None,  # memory mapped afresh each step
        "process_hwm_increase_bytes": (system.rss_hwm_bytes() - rss_before) if hwm_reset else None,
    }


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def _describe(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:500]
    lowered = text.lower()
    if "out of memory" in lowered or "not enough memory" in lowered or "can't allocate memory" in lowered:
        return f"out of memory: {text}"
    return text


def pin(cpus: list[int] | None) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        task = json.load(f)
    emit = Events(argv[2])
    emit("start", pid=os.getpid(), python=sys.executable)
    try:
        pin(task.get("pin_cpus"))
        emit("affinity", cpus=sorted(os.sched_getaffinity(0)), thread_env=system.inherited_thread_env(os.environ))
        measure(task, emit)
    except NotImplementedError as exc:  # a mode or device this workload does not support: skipped, not failed
        emit("unsupported", reason=str(exc) or "not supported")
    except MemoryError:
        emit("error", error="out of memory (MemoryError)", traceback=traceback.format_exc())
        return 1
    except Exception as exc:
        emit("error", error=_describe(exc), traceback=traceback.format_exc())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
