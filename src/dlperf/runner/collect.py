"""Turn what a worker reported into a stored measurement, and a cell's measurements into its figures.

A cell measured in R processes (`--repeats R`) is summarized by the median of the per-process medians, because on a
shared machine the variation between processes is often larger than within one; spread and n pool every sample.
"""

from __future__ import annotations

import math
import re
import signal
import statistics
from dataclasses import replace
from pathlib import Path

from dlperf import envs
from dlperf.bootstrap import summarize_processes
from dlperf.figures import LoaderFigures
from dlperf.loaders import input_bound, restarts_every
from dlperf.measure import units
from dlperf.measure.stats import FEW_SAMPLES, counted, few, mean_ci
from dlperf.protocol import (
    MEMORY_KINDS,
    Affinity,
    Built,
    Checking,
    Comm,
    Compiled,
    CompileEnd,
    Compiling,
    Done,
    Error,
    Event,
    Flops,
    Loader,
    LossCheck,
    Memory,
    Ranks,
    Sample,
    Sampled,
    Sources,
    Start,
    Warmup,
    Warned,
    all_of,
    first,
)
from dlperf.runner.launch import ChildResult, signal_reason
from dlperf.runner.outcome import Outcome, outcome, tail
from dlperf.store.process import ProcessDetail, ProcessMeasurement
from dlperf.store.records import CellFigures, CellRecord, CompileRecord, LoaderRecord, LossCheckRecord, Provenance
from dlperf.vocab import LOAD_UNREAD, OUT_OF_MEMORY, Status

NOISY_IQR_RATIO = 0.10
# The mean step this far above the median: slow steps now and then (a host that stalls, a collector), which the
# median leaves out and a long run pays. JAX's resnet-56 on an H200 (issue 27): median 15.2 ms, mean 18.6.
SLOW_STEPS_RATIO = 0.10
# A cell's processes whose medians are this many times apart: the figure sits between them and is not the model's
# (two processes of a cell, one at 2.40 ms, one at 49.8 ms under another's load: their median, the mean of two, 26.1)
PROCESSES_APART = 1.5
SLOW_COMPILE_S = 30.0  # a compile this long is said with its reasons
OTHERS_BUSY_SHARE = 0.10  # of the machine's CPU capacity, while the cell was timed
COLD_RATIO = 1.5  # a first timed step this many times its process's median, with no warm-up before it, is a cold one


def measurement(events: list[Event], child: ChildResult, timeout: float) -> ProcessMeasurement:
    """One process's outcome: status, error, every raw sample and the worker's details."""
    samples = [e.t for e in all_of(events, Sample)]
    result = _outcome(events, child, timeout, len(samples))
    built, warm, done = first(events, Built), first(events, Warmup), first(events, Sampled)
    flops, memory, start = first(events, Flops), first(events, Memory), first(events, Start)
    comm, finished = first(events, Comm), first(events, Done)
    pinned = (all_of(events, Affinity) or [None])[-1]  # the last: what the cell ran on, where its backend pinned itself
    detail = ProcessDetail(
        params=built and built.params,
        build_s=built and built.build_s,
        settings=built and built.settings,
        flops_per_step=flops and flops.flops_per_step,
        flops_by_dtype=flops and flops.flops_by_dtype,
        compile=_compile_detail(events),
        loss_check=_loss_check(events, child),
        stopped_early=finished and finished.stopped_early,
        memory=dict(memory.figures) if memory else {},
        warmup_steps=warm and warm.steps,
        warmup_steady=warm and warm.steady,
        warmup_times=warm and warm.times,
        python=start and start.python,  # the interpreter: dlperf's, or the framework's own
        framework_version=built and built.version,
        environment=start and environment_of(start.python),
        affinity=pinned and pinned.cpus,
        thread_env=pinned and pinned.thread_env,
        comm=comm.figures if comm else None,  # multi-process cells
        loader=LoaderFigures.merged([e.figures for e in all_of(events, Loader)]),  # cells with a loader (--data DIR)
        notes=[n for n in (flops and flops.note, memory and memory.note) if n]  # analyses that failed; user warnings
        + [f"the model warned: {said}" for warned in all_of(events, Warned) for said in warned.messages],
        sources=(sources := first(events, Sources)) and sources.files,  # the user's files its figures came from
        **{k: getattr(done, k) if done else None for k in MACHINE_FIGURES},
        loss=done and done.loss,
        timeline=timeline(events, child),
        started_at=child.started_at,
        phases=phases(events, child),
        started=child.started,
        cold_because=child.cold_because,
    )
    if not result.ok:
        error_event = first(events, Error)
        detail.traceback = error_event and error_event.traceback
        detail.stderr_tail = child.stderr_tail
    return ProcessMeasurement(
        status=result.status, error=result.reason, samples=samples, detail=detail, duration_s=child.duration_s
    )


def known_unsupported(reason: str, python: str) -> ProcessMeasurement:
    """The measurement of a cell known to be unsupported before any child starts (`Task.unsupported`): what its
    child would have recorded, its reason and interpreter, without the child's life."""
    detail = ProcessDetail(python=python, environment=environment_of(python))
    return ProcessMeasurement(status=Status.UNSUPPORTED, error=reason, detail=detail, duration_s=0.0)


def timeline(events: list[Event], child: ChildResult) -> list[list] | None:
    """[event, seconds since the child was started] for every event but the samples: where the process's time went."""
    if child.started_at is None:
        return None
    return [[e.NAME, round(e.at - child.started_at, 4)] for e in events if not isinstance(e, Sample)]


def phases(events: list[Event], child: ChildResult) -> dict[str, float | None] | None:
    """A process's wall-clock time by phase, from its events' times (None where a phase did not happen):
    startup (interpreter and dlperf), framework (its import and thread setup), build, compile (the first step), the
    wait for the device alone (`run --compile-at-once`), warm-up, timed steps, FLOP counting, the memory step, the
    loss check, and exit (teardown after the last event)."""
    if child.started_at is None:
        return None
    at: dict[str, float] = {}
    for e in events:
        at.setdefault(e.NAME, e.at - child.started_at)

    def gap(after: str | None, name: str) -> float | None:
        return round(at[name] - at[after], 4) if after in at and name in at else None

    def before(*names: str) -> str | None:
        """The latest of these events that happened (the untimed extras a task asks for vary)."""
        return next((n for n in names if n in at), None)

    built = first(events, Built)
    build_s = built.build_s if built else None
    framework_s = gap("affinity", "built")
    return {
        "startup_s": round(at.get("start"), 4) if "start" in at else None,
        "framework_s": round(framework_s - build_s, 4) if framework_s is not None and build_s is not None else None,
        "build_s": build_s,
        "compile_s": gap("compiling", "compiled"),
        "gate_s": gap("compiled", "gated"),
        "warmup_s": gap(before("gated", "compiled", "built"), "warmup"),
        "timed_s": gap("warmup", "sampled"),
        "flops_s": gap(before("compile_end", "sampled"), "flops"),
        "memory_s": gap(before("flops", "compile_end", "sampled"), "memory"),
        "loss_check_s": gap(before("memory", "flops", "compile_end", "sampled"), "loss_check"),
        "exit_s": round(child.duration_s - at.get("done"), 4) if "done" in at else None,
    }


# what a cell's worker is doing once it has reported each of these events, until the next of them
DOING = {
    "start": "while importing the framework and building the step",
    "built": "in the warm-up",
    "compiling": "while compiling (the first step)",
    "compiled": "in the warm-up",
    "warmup": "in the timed steps",
    "sampled": "after the timed steps (counting FLOPs, measuring memory)",
    "done": "as it exited, after its result",
}


def during(events: list[Event]) -> str:
    """What a cell's worker was doing when it was stopped, from the last of its phase events (`DOING`)."""
    doing = "while starting (before the worker's first event)"
    for event in events:
        doing = DOING.get(event.NAME, doing)
    return doing


# what the machine did while the cell was timed, from the `Sampled` event
MACHINE_FIGURES = ("steal_fraction", "others_cpu_share", "others_unread", "cpu_utilization", "minor_faults_per_step",
                   "kernel_cpu_share", "process_hwm_increase_bytes", "pool_threads")  # fmt: skip


def environment_of(python: str) -> str:
    """Where a child's framework came from: "dlperf" (dlperf's own environment) or the directory of the framework's
    own environment (`dlperf env install`)."""
    if envs.is_current(python):
        return "dlperf"
    parents = Path(python).parents  # ENV/bin/python -> ENV
    return str(parents[1]) if len(parents) > 1 else python


def torchrun_exits(text: str) -> dict[int, int]:
    """Rank -> exit code from torchrun's failure summary ("rank : 1 (local_rank: 1)" then "exitcode : -9 ...")."""
    return {int(rank): int(code) for rank, code in re.findall(r"rank\s*:\s*(\d+).*?\n\s*exitcode\s*:\s*(-?\d+)", text)}


def _died(code: int, oom_kills: int | None = None) -> str:
    """A process's exit `code` in words; a SIGKILL by the rule of `launch.signal_reason`, with the job's count of the
    kernel's out-of-memory kills (a rank's exit comes from torchrun's summary; the count is its agent's)."""
    return signal_reason(-code, oom_kills) if code < 0 else f"worker exited with code {code}"


def ddp_measurement(
    by_rank: dict[int, list[Event]], child: ChildResult, timeout: float, exits: dict[int, int] | None = None
) -> ProcessMeasurement:
    """One DDP job's outcome from every process's events: the first failure (naming its rank), or the slowest
    process's steps as the samples (the step a user waits for), with every process's steps in the detail."""
    started = {r: ev for r, ev in by_rank.items() if first(ev, Start)}
    if not started:
        why = "no process started: the rendezvous did not complete"
        status = Status.TIMEOUT if child.timed_out else Status.FAILED
        error = f"{why} within --timeout {timeout:g} s" if child.timed_out else f"{why}{tail(child)}"
        return ProcessMeasurement(status=status, error=error, duration_s=child.duration_s,
                                  detail=ProcessDetail(stderr_tail=child.stderr_tail))  # fmt: skip
    finished = all(first(ev, Done) for ev in started.values()) and not child.timed_out
    # every process reported its result: a crash while they tear down does not undo what they measured
    per = {r: measurement(ev, ChildResult(0, False, child.duration_s, child.stderr_tail) if finished else child,
                          timeout) for r, ev in sorted(started.items())}  # fmt: skip
    if finished and child.crashed_reason:
        for m in per.values():
            m.detail.exit_after_result = child.crashed_reason
    first_bad = _first_failure(per, started, exits or {}, child.oom_kills)
    if first_bad is not None:
        return first_bad
    everyone = next((ranks.samples for ev in started.values() if (ranks := first(ev, Ranks))), None)
    steps = dict(enumerate(everyone)) if everyone else {r: per[r].samples for r in per}
    # the slowest of every rank, this machine's or another node's (each node stores the job: all say the same time)
    slowest = max(steps, key=lambda r: statistics.median(steps[r]) if steps[r] else 0.0)
    chosen = per[slowest] if slowest in per else replace(per[min(per)], samples=list(steps[slowest]))
    chosen.detail.ranks = everyone or [per[r].samples for r in sorted(per)]
    chosen.detail.slowest_rank = slowest
    chosen.detail.hosts = sorted({first(ev, Start).host for ev in started.values()})
    if chosen.detail.loss_check is None:  # rank 0 checks the mode (`worker/ddp.py`); the slowest may be another
        chosen.detail.loss_check = next((m.detail.loss_check for m in per.values() if m.detail.loss_check), None)
    return chosen


def _first_failure(
    per: dict[int, ProcessMeasurement], events: dict[int, list[Event]], exits: dict[int, int], oom_kills: int | None
) -> ProcessMeasurement | None:
    """The measurement that says why the job failed, naming its rank: `unsupported` first; then a process killed
    by a signal (not torchrun's SIGTERM to the rest) before it could say anything, since the others' errors
    ("connection reset by peer") are only its consequence; then the process's own error that came first, since a
    rank that raised and left makes the others' collectives fail after it (gloo's "Connection closed by peer" on
    rank 0 after rank 1 ran out of memory); then a timeout; then a process that ended without a result."""
    unsupported = next((r for r, m in per.items() if m.status is Status.UNSUPPORTED), None)
    if unsupported is not None:  # rank 0 included
        return replace(per[unsupported], error=f"rank {unsupported}: {per[unsupported].error}")
    for rank, code in sorted(exits.items()):
        silent = rank in per and not first(events[rank], Error) and not first(events[rank], Done)
        if silent and code < 0 and code != -signal.SIGTERM:
            return replace(per[rank], status=Status.FAILED, error=f"rank {rank}: {_died(code, oom_kills)}")
    raised = {r: error.at for r, m in per.items() if m.status is Status.FAILED and (error := first(events[r], Error))}
    if raised:
        rank = min(raised, key=raised.__getitem__)
        return replace(per[rank], error=_of_rank(rank, per[rank].error))
    for rank, m in per.items():
        if m.status is Status.TIMEOUT:
            return replace(m, error=f"rank {rank}: {m.error}")
    unfinished = [r for r in per if not first(events[r], Done)]
    if unfinished:
        m = per[unfinished[0]]
        return replace(m, status=Status.FAILED, error=f"rank {unfinished[0]}: {m.error}")
    return None


def _of_rank(rank: int, error: str | None) -> str:
    """A rank's own error, naming the rank: after its kind where it ran out of memory ("out of memory on rank 1 at
    batch 8: ..."), so that the views read the cell as out of memory as they read a one-process cell's
    (`report/fit.out_of_memory`: the reason starts with it); before it otherwise ("rank 1: RuntimeError: ...")."""
    error = error or ""
    if error.startswith(OUT_OF_MEMORY):
        return f"{OUT_OF_MEMORY} on rank {rank}{error.removeprefix(OUT_OF_MEMORY)}"
    return f"rank {rank}: {error}"


def _loss_check(events: list[Event], child: ChildResult) -> LossCheckRecord | None:
    if check := first(events, LossCheck):
        return LossCheckRecord.reported(check.ok, check.reason, check.figures)
    if first(events, Checking):
        why = child.stop_reason or ("the cell's --timeout" if child.timed_out else child.crashed_reason or "no result")
        return LossCheckRecord(None, f"the check did not finish: {why}")
    return None


def _compile_detail(events: list[Event]) -> CompileRecord | None:
    """First-step time and the compiler's counts for a compiled cell; None for an eager one."""
    if not first(events, Compiling):
        return None
    compiled, end = first(events, Compiled), first(events, CompileEnd)
    if compiled is None:
        return CompileRecord(finished=False)
    stats, after = compiled.stats, end.stats if end else None
    counted = {} if after is None else {
        "recompiles": after.get("frames_compiled", 0) - stats.get("frames_compiled", 0),
        "graph_breaks_after_first_step": after.get("graph_breaks", 0) - stats.get("graph_breaks", 0),
    }  # fmt: skip
    return CompileRecord.of({**stats, "first_step_s": compiled.first_step_s, **counted, "finished": True})


def _outcome(events: list[Event], child: ChildResult, timeout: float, n: int) -> Outcome:
    """A cell process's status: a process killed during the loss check was measured in full, only the untimed check
    was cut short (see `_loss_check`); `ok` means measured, so a process without a timed step has no figure to stand
    for it."""
    cut_short = (child.timed_out or child.crashed_reason) and first(events, Checking) and not first(events, LossCheck)
    kept = f" {during(events)} (kept {units.plural(n, 'sample')})"
    found = outcome(events, child, timeout, measured=bool(cut_short), kept=kept)
    if found.ok and not cut_short and n == 0:
        return Outcome(
            Status.FAILED, "no timed step: sampling ended before the first one (a --max-time shorter than one step?)"
        )
    return found


def left_out_warnings(groups: list[list[float]]) -> list[str]:
    """The processes a cell's median leaves out, too few steps beside others of enough (`stats.counted`)."""
    left = [g for g in groups if few(len(g))] if len(counted(groups)) < len(groups) else []
    if not left:
        return []
    theirs = ", ".join(f"{units.seconds(statistics.median(g))} (n={len(g)})" for g in left)
    return [f"{len(left)} process{'es' * (len(left) > 1)} of fewer than {FEW_SAMPLES} timed steps left out of the "
            f"median, theirs {theirs}: it is the median of the {len(groups) - len(left)} with more"]  # fmt: skip


def cell_figures(
    measurements: list[ProcessMeasurement], batch: int, threads: int, cores: int, device: str,
    framework: str | None = None,
) -> CellFigures:  # fmt: skip
    """A cell's figures from all its measured processes."""
    details = [m.detail for m in measurements]
    figures = _static(details)
    figures.status, figures.error = _cell_status(measurements)
    figures.provenance = provenance(details, framework)
    measured = [m for m in measurements if m.samples]
    warnings = []
    if measured:
        medians = [statistics.median(m.samples) for m in measured]
        s = summarize_processes([m.samples for m in measured])
        figures.median_s, figures.iqr_s, figures.mean_s, figures.stdev_s = s.median, s.iqr, s.mean, s.stdev
        figures.ci_low_s, figures.ci_high_s, figures.n = s.ci_low, s.ci_high, s.n
        figures.samples_s = batch / s.median if s.median > 0 else None
        figures.mean_ci_low_s, figures.mean_ci_high_s = mean_ci([m.samples for m in measured]) or (None, None)
        figures.per_process_medians = medians
        if compiled := _first_compile(details):
            # the first step's time beyond a steady step is what compiling (or capturing) cost
            figures.compile = replace(compiled, compile_s=max(0.0, compiled.first_step_s - s.median))
            warnings += compile_warnings(figures.compile, s.median)
        warnings += cold_warnings(measured) + left_out_warnings([m.samples for m in measured])
        warnings += disagreeing([m.samples for m in measured], s.median)
        if few(s.n):
            warnings.append(f"few samples: the median of {s.n} timed step{'s' * (s.n != 1)} (fewer than "
                            f"{FEW_SAMPLES}: raise --max-time or --min-steps for a figure to rely on)")  # fmt: skip
        if s.median > 0 and s.iqr / s.median > NOISY_IQR_RATIO:
            warnings.append(f"noisy: IQR is {100 * s.iqr / s.median:.0f}% of the median")
        if s.median > 0 and (above := s.mean / s.median - 1) > SLOW_STEPS_RATIO:
            warnings.append(f"slow steps now and then: the mean step, {units.seconds(s.mean)}, is {100 * above:.0f}% "
                            "above the median; a long run pays the mean")  # fmt: skip
    figures.loss_finite, diverged = loss_finite(details)
    warnings += diverged + _warnings(details, threads, cores, device) + _version_note(figures.provenance)
    if loader := loader_summary(measurements):
        figures.data = loader
        warnings += loader_warnings(loader, batch)
    figures.warnings = warnings
    return figures


GROWTH_FLOOR = 64 * 2**20  # bytes the process's high-water mark may rise over the timed steps unsaid ...
GROWTH_TIMES = 4  # ... or this many times the step's peak: a first step's allocations, the allocator's own caching


def growing(details: list[ProcessDetail], step_peak: int | None) -> list[str]:
    """A warning where the process's memory grew over the timed steps far beyond what one step holds: something keeps
    memory step by step (losses kept as tensors, a list of outputs, a cache that fills), and a longer run than the
    timed one may run out of it. A model that grew 855 MiB over its timed steps, a step's peak 1.9 MiB, was unsaid."""
    grew = max((d.process_hwm_increase_bytes or 0 for d in details), default=0)
    if grew <= max(GROWTH_FLOOR, GROWTH_TIMES * (step_peak or 0)):
        return []
    step = f"a step's peak of {step_peak / 2**20:,.1f} MiB" if step_peak else "what a step holds"
    return [f"memory grew over the timed steps: the process's peak rose {grew / 2**20:,.0f} MiB, against {step}: "
            "something keeps memory step by step (losses kept as tensors, a cache that fills), and a longer run "
            "may run out of it"]  # fmt: skip


def loss_finite(details: list[ProcessDetail]) -> tuple[bool | None, list[str]]:
    """Whether every process's last timed step had a finite loss (None: no process said), and a warning where one did
    not: its time is kept, the cell stays ok, and the warning (the table's notes, the export's warnings) says that
    the steps timed did not train."""
    losses = [d.loss for d in details if d.loss is not None]
    bad = [loss for loss in losses if not (isinstance(loss, int | float) and math.isfinite(loss))]
    if not losses or not bad:
        return (True if losses else None), []
    where = f" (in {len(bad)} of {len(losses)} processes)" if len(losses) > 1 else ""
    return False, [f"loss not finite: {bad[0]} after the timed steps{where}; the time is kept, but the steps did not "
                   "train"]  # fmt: skip


def loader_summary(measurements: list[ProcessMeasurement]) -> LoaderRecord | None:
    """A cell's input pipeline over its processes: the wait share pools every timed step (seconds waited over
    seconds stepped), the loader alone is the median over processes; the rest is the first process's, where it has
    it."""
    figures = [(m.detail.loader, m.samples) for m in measurements if m.detail.loader]
    if not figures:
        return None
    one = LoaderFigures.merged([f for f, _ in reversed(figures)])
    waits = [w for f, samples in figures for w in (f.wait_s or [])[: len(samples)]]
    stepped = sum(t for f, samples in figures if f.wait_s for t in samples[: len(f.wait_s)])
    alone = [f.alone_samples_per_s for f, _ in figures if f.alone_samples_per_s]
    share = sum(waits) / stepped if waits and stepped > 0 else None
    return LoaderRecord(
        one.setting, one.workers, one.threads, one.cores, bool(one.oversubscribed), one.dataset, one.samples,
        alone_samples_per_s=statistics.median(alone) if alone else None, wait_share=share,
        wait_median_s=statistics.median(waits) if waits else None, verdict=input_bound(share), h2d=one.h2d,
        batches=one.batches,
    )  # fmt: skip


def disagreeing(groups: list[list[float]], median_s: float) -> list[str]:
    """The processes the cell's median counts (`stats.counted`), where their medians are PROCESSES_APART or more
    apart: no step time of the model's lies in the figure between them. The advice is for what ran: a cell of 4
    processes was told to take 3, one of `--repeats 3` whose third was left out for its 2 steps too."""
    ran, medians = [g for g in groups if g], sorted(statistics.median(g) for g in counted(groups))
    if len(medians) < 2 or medians[0] <= 0 or medians[-1] / medians[0] < PROCESSES_APART:
        return []
    left, more = len(ran) - len(medians), [] if len(medians) >= 3 or len(ran) >= 3 else ["--repeats 3 or more"]
    more += [f"a --max-time long enough for {FEW_SAMPLES} timed steps in each process ({left} of the {len(ran)} left "
             "out for fewer)"] if left and len(medians) < 3 else []  # fmt: skip
    more = f", with {' and '.join(more)}" if more else ""
    return [f"processes disagree: their medians {units.seconds(medians[0])} to {units.seconds(medians[-1])}, "
            f"{medians[-1] / medians[0]:.1f}x apart, and the cell's {units.seconds(median_s)} their median: rerun on a "
            f"quiet machine{more}"]  # fmt: skip


def cold_warnings(measured: list[ProcessMeasurement]) -> list[str]:
    """A process that ran no warm-up step (`--max-warmup 0`) times its cold first step with the rest: said where that
    step took `COLD_RATIO` times its process's median or more (tiny-resnet-56: 25.8 ms against about 5)."""
    unwarmed = [(m.samples[0], statistics.median(m.samples)) for m in measured
                if m.detail.warmup_steps == 0 and len(m.samples) > 1]  # fmt: skip
    cold = [first / median for first, median in unwarmed if median > 0]
    if not cold or max(cold) < COLD_RATIO:
        return []
    return [f"no warm-up step ran (--max-warmup 0), and the first timed step took {max(cold):.1f}x the median: a cold "
            "step is among the timed ones"]  # fmt: skip


def loader_warnings(loader: LoaderRecord, batch: int | None) -> list[str]:
    """Loader workers and compute threads share the cores: say so when there are more of both than cores. Workers
    that start again every few steps: say so when the dataset holds few batches and they do not persist."""
    said, workers = [], units.plural(loader.workers, "worker")
    if loader.oversubscribed:
        both = f"{units.plural(loader.workers, 'loader worker')} + {units.plural(loader.threads, 'compute thread')}"
        said.append(f"{both} exceed the {loader.cores} cores: they take turns, and the step waits for both")
    if epoch := restarts_every(loader.samples, batch, loader.setting, loader.batches):
        said.append(f"short epochs: the dataset's {loader.samples} samples make {epoch} batch{'es' * (epoch != 1)} "
                    f"of {batch}, so the {workers} start{'s' * (loader.workers == 1)} again every {epoch} "
                    f"step{'s' * (epoch != 1)} (persistent_workers off), which a full dataset does once an epoch: the "
                    "wait counts their start; +persist keeps them, a larger dataset spreads it")  # fmt: skip
    return said


def shares_memory(kind: str | None) -> bool:
    """Whether a memory figure of this kind holds for the cell at any thread count: a step's tensors do, the
    process's resident set does not (TensorFlow's and MXNet's: their thread pools and runtimes are in it, and a
    cpu:2 cell had been given its cpu:1 sibling's, byte for byte)."""
    return kind != "process_rss"


def share(figures: CellFigures, siblings: list[CellRecord]) -> None:
    """Fill what a cell did not measure itself, its FLOPs, the memory of a step and its loss check, from a sibling
    that did (the same cell but its thread count), and say which one: every figure stays traceable to its process."""
    if figures.peak_mem_bytes is None:
        donor = next((s for s in siblings if s.peak_mem_bytes is not None and shares_memory(s.peak_mem_kind)), None)
        if donor is not None:
            figures.peak_mem_bytes, figures.peak_mem_kind = donor.peak_mem_bytes, donor.peak_mem_kind
            own = figures.memory_figures  # this process's own figures (its high-water mark over the timed steps)
            figures.memory_figures = {**donor.memory_figures, **{k: v for k, v in own.items() if v is not None}}
            figures.shared_from.update(memory=donor.key)
    if figures.flops_per_step is None:
        donor = next((s for s in siblings if s.flops_per_step is not None), None)
        if donor is not None:
            figures.flops_per_step, figures.flops_by_dtype = donor.flops_per_step, donor.flops_by_dtype
            figures.shared_from.update(flops=donor.key)
    if figures.loss_check is None:
        donor = next((s for s in siblings if s.loss_check and s.loss_check.ok is not None), None)
        if donor is not None:
            figures.loss_check = donor.loss_check
            figures.shared_from.update(loss_check=donor.key)


def provenance(details: list[ProcessDetail], framework: str | None) -> Provenance:
    """Which version of the framework measured the cell, from which environment, and the version dlperf pins."""
    version = next((d.framework_version for d in details if d.framework_version), None)
    where = next((d.environment for d in details if d.environment), None)
    pinned = envs.pinned_version(framework) if framework else None
    return Provenance(framework, version, pinned, where)


def _version_note(framework: Provenance) -> list[str]:
    if envs.same_release(framework.version, framework.pinned):
        return []
    where = "dlperf's environment" if framework.environment == "dlperf" else framework.environment
    return [f"{framework.name} {framework.version} (from {where}) measured this cell, not the pinned "
            f"{framework.pinned}"]  # fmt: skip


def compile_warnings(figures: CompileRecord, median_s: float) -> list[str]:
    """A slow compile (SLOW_COMPILE_S or more) with what the compiler reported that may explain it, and what makes
    a compiled step slower whatever the compile time: graph breaks (the step runs in pieces, eager between them) and
    recompiles after the first step (guards failed: the timed steps compiled again)."""
    breaks, recompiles, reasons = figures.graph_breaks or 0, figures.recompiles or 0, figures.graph_break_reasons
    why = []
    if breaks:
        why.append(f"{breaks} graph break{'s' * (breaks != 1)}" + (f", the first: {reasons[0]}" if reasons else ""))
    if recompiles:
        why.append(f"{recompiles} recompile{'s' * (recompiles != 1)} after the first step")
    seconds = figures.compile_s
    if seconds >= SLOW_COMPILE_S:
        steps = f", {seconds / median_s:,.0f} steps' worth" if median_s > 0 else ""
        return [f"slow compile: {seconds:.0f} s{steps}" + (f" ({'; '.join(why)})" if why else "")]
    return [f"compiled with {'; '.join(why)}"] if why else []


def _first_compile(details: list[ProcessDetail]) -> CompileRecord | None:
    return next((d.compile for d in details if d.compile and d.compile.first_step_s is not None), None)


def _cell_status(measurements: list[ProcessMeasurement]) -> tuple[Status, str | None]:
    statuses = [m.status for m in measurements]
    for bad in (Status.FAILED, Status.TIMEOUT):
        if bad in statuses:
            return bad, next(m.error for m in measurements if m.status is bad)
    if statuses and all(s is Status.UNSUPPORTED for s in statuses):
        return Status.UNSUPPORTED, measurements[0].error
    return (Status.OK, None) if statuses else (Status.PENDING, None)


def _static(details: list[ProcessDetail]) -> CellFigures:
    """Figures that do not depend on timing, from the first process that gave them; the processes' median of those
    their timed steps read (cores busy, page faults, the kernel's share: the first process's alone was one of several),
    and the most other processes took."""

    def of(name: str, pick=lambda values: values[0]):
        values = [v for d in details if (v := getattr(d, name)) is not None]
        return pick(values) if values else None

    memory = of("memory") or {}
    kind, peak = next(
        ((kind, memory[key]) for key, kind in MEMORY_KINDS.items() if memory.get(key) is not None), (None, None)
    )
    middle = statistics.median
    return CellFigures(
        params=of("params"),
        flops_per_step=of("flops_per_step"),
        warmup_steps=of("warmup_steps", lambda values: int(middle(values))),
        peak_mem_bytes=peak,
        peak_mem_kind=kind,
        memory_figures={**memory, "process_hwm_increase_bytes": of("process_hwm_increase_bytes")},
        steal_fraction=of("steal_fraction", max),
        others_cpu_share=of("others_cpu_share", max),
        settings=of("settings"),
        warmup_steady=all(d.warmup_steady is not False for d in details),
        build_s=of("build_s"),
        cpu_utilization=of("cpu_utilization", middle),
        minor_faults_per_step=of("minor_faults_per_step", middle),
        kernel_cpu_share=of("kernel_cpu_share", middle),
        flops_by_dtype=of("flops_by_dtype"),
        compile=of("compile"),
        loss_check=of("loss_check"),
        comm=of("comm"),
    )


def _warnings(details: list[ProcessDetail], threads: int, cores: int, device: str) -> list[str]:
    warnings = [f"stopped after timing: {d.stopped_early}" for d in details if d.stopped_early][:1]
    warnings += list(dict.fromkeys(note for d in details for note in d.notes or []))
    if device == "cpu" and threads > cores:
        warnings.append(f"oversubscribed: {threads} threads on {units.plural(cores, 'core')}")
    pools = sorted({d.pool_threads for d in details if d.pool_threads not in (None, threads)})
    if device == "cpu" and pools:
        warnings.append(f"the model's own code set the framework's threads to {', '.join(map(str, pools))} while it "
                        f"trained (torch.set_num_threads): it ran at that many, not {threads}")  # fmt: skip
    warnings += list(dict.fromkeys(f"the model's own code set the framework's threads to {d.settings['set_by_model']} "
                                   f"as it was built: set back to {threads}" for d in details
                                   if (d.settings or {}).get("set_by_model")))  # fmt: skip
    if any(d.warmup_steady is False for d in details):
        warnings.append("warm-up did not settle within --max-warmup steps or --max-time")
    steal = max((d.steal_fraction or 0.0 for d in details if d.steal_fraction is not None), default=0.0)
    if steal > 0.02:
        warnings.append(f"CPU steal time {100 * steal:.0f}%: another virtual machine took this machine's CPU")
    others = max((d.others_cpu_share or 0.0 for d in details), default=0.0)
    if others > OTHERS_BUSY_SHARE:
        warnings.append(f"other processes used {100 * others:.0f}% of the CPUs while this cell was timed")
    elif unread := next((d.others_unread for d in details if d.others_unread), None):  # not read is not quiet
        warnings.append(f"{LOAD_UNREAD}: {unread}")
    return warnings
