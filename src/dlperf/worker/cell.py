"""The worker: one child process measures one cell (a `CellTask`) and reports typed events.

    python -m dlperf.worker.cell TASK.json EVENTS.jsonl

It imports the standard library, dlperf's standard-library-only modules and exactly one framework (through its
backend), so it runs in an environment that has nothing else installed. The thread variables were set by the parent
before this interpreter started; the framework is imported only after the CPU pinning below. Every event is
flushed as it happens, the timed steps' samples a few times a second (`SampleBatch`): if the parent kills this
process at its timeout, what it measured survives.
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from dlperf import loaders
from dlperf.figures import CommFigures, LoaderFigures, LossCheckFigures
from dlperf.frameworks import backend, build_step
from dlperf.frameworks.common import heap
from dlperf.measure import system, units
from dlperf.measure.gate import Gate
from dlperf.measure.timer import SYNCHRONIZED, TimerConfig, pipelined, sample, timed_step, warm_up
from dlperf.protocol import (
    Affinity,
    Built,
    CellTask,
    Checking,
    Comm,
    Compiled,
    CompileEnd,
    Compiling,
    Done,
    Flops,
    Gated,
    Loader,
    LossCheck,
    Memory,
    Reporter,
    Sample,
    Sampled,
    Sources,
    Warmup,
    Warned,
)
from dlperf.vocab import LOSS_CHECK_BROKE, OUT_OF_MEMORY
from dlperf.worker import feed, sources
from dlperf.worker.child import OutOfMemory, describe, exit_now, out_of_memory, own_temp_folder, serve
from dlperf.workloads import Workload


def measure(task: CellTask, emit: Reporter, gate: Gate | None = None) -> None:
    """build -> (compile) -> warm up -> timed steps -> FLOPs, memory and the loss check (untimed).

    The timed loop sees exactly the history a plain training loop has: the FLOP-counting and memory-tracking steps
    come after it, because they leave the allocator (and its mmap threshold) in another state than training alone."""
    cell = task.cell
    kept = heap.applied(cell.mode)  # the allocator's mode: before the framework's import starts its threads
    fw = backend(cell.framework)  # the framework is imported here, thread settings already in place
    settings, start, workload, train, noted = configured_and_built(fw, task, emit)
    noted.update(kept)
    timing = {"timing": timing_of(train)}
    if task.gate:  # compiled beside the group's other cells: its compile time is not a lone one
        timing["compiled_at_once"] = task.gate_group
    emit(Built(train.params, time.perf_counter() - start, {**settings, **train.settings(), **noted, **timing},
               fw.version()))  # fmt: skip
    fed = open_feed(task, fw, workload, train, emit) if task.data is not None else None

    if train.compiles:  # the first step compiles (or captures a CUDA graph): timed apart, never a sample
        emit(Compiling())
        emit(Compiled(timed_step(train.step, train.sync), train.compile_stats()))
    held = fit_verdict(train, cell.mode) if task.memory_limit is not None else None  # dlperf fit: held after it
    if gate is not None and task.gate:
        gate.timing()
        emit(Gated())
    last = LastLoss()
    run = step_timer(train, fed, last)
    since = Since.now()  # a longer window than the timed steps' to read other processes' load over, where needed
    warm = warm_up(run, task.timer)
    emit(Warmup(warm.steps, warm.steady, warm.times))
    if fed is not None:
        fed.restart()  # one wait per timed step, the warm-up's left out
    sampled = timed_samples(run, task.timer, emit, since=since)
    sampled = replace(sampled, loss=last.value(), pool_threads=pool_threads(fw))
    if fed is not None:
        emit(Loader(fed.figures()))
        fed.close()
    emit(sampled)
    if train.compiles:
        emit(CompileEnd(train.compile_stats()))  # frames compiled since the first step are recompiles
    train.sync()  # the steps launched beyond the last one read (pipelined) finish before anything else runs
    if held is not None:
        held.check(sampled.n)
    if gate is not None:
        gate.work()  # the untimed extras may run beside the group's other work
    if task.stop is not None and task.stop.applies(sampled.median_s):
        stop_early(task, sampled.median_s, emit)
        return
    if task.count_flops:
        emit(count_flops(train))
    if task.measure_memory or held is not None:  # a fit try's data peak, with the step's figures kept elsewhere too
        emit(measure_memory(train, held, task.measure_memory))
    if task.count_flops or task.measure_memory:  # what they were counted from, for `runner/kept.py`
        emit(Sources(sources.imported(own_temp_folder())))  # its own folder's are generated
    if task.loss_check:
        check_loss(task, sampled.median_s, fw, workload, emit)
    if cell.nproc:  # last: measuring where the step's time goes may leave the replicas' weights apart
        emit(Comm(CommFigures.of({**train.communication(), "strategy": cell.parallel})))
    emit(Done())


def configured_and_built(fw, task: CellTask, emit: Reporter):
    """The backend's thread settings, when the build began, the workload, the cell's step and the settings noted
    beside it; an `affinity` event where the backend held the cell's threads to some CPUs as it set its threads (jax)
    or as it built the step (tensorflow): what the cell runs on."""
    cpus = os.sched_getaffinity(0)
    settings = fw.configure_threads(task.cell.threads)
    if os.sched_getaffinity(0) != cpus:
        emit(affinity())
    start, cpus = time.perf_counter(), os.sched_getaffinity(0)
    workload = Workload.from_json(task.workload)
    train, noted = build_cell(fw, task, workload)
    if os.sched_getaffinity(0) != cpus:
        emit(affinity())
    if task.cell.device == "cpu" and (now := pool_threads(fw)) not in (None, task.cell.threads):
        settings = {**fw.configure_threads(task.cell.threads), "set_by_model": now}  # the user's file's own call
    return settings, start, workload, train, noted


def pool_threads(fw) -> int | None:
    """The threads the framework's CPU pool has now, where its backend says (PyTorch's); None elsewhere."""
    said = getattr(fw, "pool_threads", None)
    return said() if callable(said) else None


def build_cell(fw, task: CellTask, workload: Workload):
    """The cell's step and the settings noted beside it. A cell with replicas here (`nproc`, not under torchrun) is
    a strategy of one process, TensorFlow's MirroredStrategy: the backend's `build_parallel` builds it, and a backend
    without one makes the cell unsupported."""
    cell = task.cell
    if not cell.nproc:
        return build_step(fw, cell.framework, workload, cell.device, cell.mode, nvtx=task.nvtx)
    build_parallel = getattr(fw, "build_parallel", None)
    if build_parallel is None:
        raise NotImplementedError(f"--parallel {cell.parallel}: the {cell.framework} backend runs no replicas")
    noted = {"nvtx": "not emitted: a multi-replica cell has no NVTX ranges yet"} if task.nvtx else {}
    return build_parallel(workload, cell), noted


class LastLoss:
    """What the latest step returned, its loss, kept as the framework returned it: reading its value would wait for
    the device, so it is read once, after the timed steps (`value`)."""

    def __init__(self) -> None:
        self.loss: Any = None

    def around(self, step: Callable[[], Any]) -> Callable[[], Any]:
        def kept() -> Any:
            self.loss = step()
            return self.loss

        return kept

    def value(self) -> float | str | None:
        """The loss as a number, or "nan", "inf", "-inf" (JSON has no such numbers); None without one."""
        try:
            value = float(self.loss)
        except (TypeError, ValueError, RuntimeError):  # no loss returned, or none a float() reads
            return None
        return value if math.isfinite(value) else str(value)


def timing_of(train) -> str:
    """How `step_timer` times this step, in words: pipelined (and by which clock) or synchronized every step."""
    clock = train.device_clock()
    return clock.HOW if clock is not None else SYNCHRONIZED


def step_timer(train, fed: feed.Feed | None = None, last: LastLoss | None = None) -> Callable[[], float]:
    """One step's time per call, as a plain training loop sees it: pipelined on a device with its own clock (CUDA),
    the device synchronized on both sides of each step elsewhere. With a loader (`fed`), each step first waits
    for its batch, and each call's wait is kept; with `last`, each step's loss is kept (not read)."""
    step = train.step if fed is None else fed.step
    step = last.around(step) if last is not None else step
    clock = train.device_clock()
    run = pipelined(step, clock) if clock is not None else lambda: timed_step(step, train.sync)
    return run if fed is None else fed.timed(run)


def open_feed(task: CellTask, fw, workload: Workload, train, emit: Reporter) -> feed.Feed:
    """A loader cell's loader (the backend's), timed alone first; on a GPU, one batch's copy to it timed too."""
    cell = task.cell
    setting = loaders.setting(cell.loader)
    loader = fw.loader(workload, task.data, setting, cell.device, train)
    # on a device the step's compute runs there, and the host's share is the one thread that launches it: the
    # cell's thread count (a CPU's compute pool) is no claim on the cores the workers use
    emit(Loader(feed.describe(loader, setting, cell.threads if cell.device == "cpu" else 1)))
    figures, batch = feed.alone(loader, task.timer)
    emit(Loader(figures))
    if cell.device.startswith("cuda"):
        emit(Loader(LoaderFigures(h2d=fw.h2d(batch, cell.device))))
    return feed.Feed(loader, train)


def count_flops(train) -> Flops:
    """The step's FLOPs from the framework's counter. An optional analysis never fails a cell: a counter that
    raises (an XLA without cost analysis, a graph it cannot read) gives no figure, with a note saying why."""
    try:
        return Flops.of(train.count_flops())
    except Exception as exc:
        return Flops(None, note=f"no FLOP count: the counter failed ({describe(exc)})")


def measure_memory(train, held: Held | None = None, counted: bool = True) -> Memory:
    """Peak memory of extra, untimed steps; like the FLOP count, optional: a failure is a note, not a failed cell.
    A fit try's (`held`) adds the most its data segment held under the limit (`Held.data_peak`), which fit's guess
    of the boundary reads; alone where the step's figures are not `counted` (kept from an earlier run's)."""
    verdict = {} if held is None or held.data_peak is None else {"data_peak_bytes": held.data_peak}
    if not counted:
        return Memory(verdict)
    try:
        return Memory({**train.memory_of_step(), **verdict})
    except Exception as exc:
        return Memory(verdict, note=f"no memory figure: measuring it failed ({describe(exc)})")


def stop_early(task: CellTask, median_s: float, emit: Reporter) -> None:
    """The task's stop rule applies: the extra, untimed steps (FLOPs, memory, the loss check) are skipped."""
    stop = task.stop
    ratio = median_s / stop.reference_s
    if task.loss_check:
        emit(LossCheck(None, f"not checked: {ratio:.1f}x slower than {units.seconds(stop.reference_s)}"))
    emit(Done(stopped_early=f"{ratio:.1f}x slower than {stop.reference}"))


def check_loss(task: CellTask, median_s: float | None, fw, workload: Workload, emit: Reporter) -> None:
    """The loss check, unless the task asks for it only below a step time this cell did not beat."""
    bar = task.check_if_faster_than_s
    if bar is not None and median_s is None:
        emit(LossCheck(None, "not checked: no timed step"))
        return
    if bar is not None and median_s >= bar:
        emit(
            LossCheck(None, f"not checked: {units.seconds(median_s)} per step is not faster than {units.seconds(bar)}")
        )
        return
    emit(Checking())
    with warnings.catch_warnings():  # its own small batches warn again, of other sizes: said already (`model_warnings`)
        warnings.simplefilter("ignore")
        emit(still_trains(fw, workload, task.cell.device, task.cell.mode))


def still_trains(fw, workload: Workload, device: str, mode: str) -> LossCheck:
    """The mode's short training against fp32 from the same start (untimed). A check that cannot run is reported
    with its reason and decides nothing; the timing stands either way."""
    start = time.perf_counter()
    try:
        figures = fw.loss_check(workload, device, mode)
    except Exception as exc:
        seconds = time.perf_counter() - start
        return LossCheck(None, f"{LOSS_CHECK_BROKE}: {describe(exc)}", LossCheckFigures(seconds=seconds))
    return LossCheck(figures.get("ok"), figures.get("reason"), LossCheckFigures.of(figures) or LossCheckFigures())


@dataclass(frozen=True)
class Since:
    """The machine's CPU counters, this process family's CPU time and the clock at one moment (the warm-up's start):
    where the timed steps alone are too short to read other processes' load over, it is read from here (`load`)."""

    machine: dict[str, float]
    family_s: float
    at: float

    @classmethod
    def now(cls) -> Since:
        return cls(system.cpu_times(), system.family_cpu_s(), time.perf_counter())


def load(timed: Since, end: Since, since: Since | None = None) -> tuple[float | None, str | None]:
    """Other processes' share of the CPUs from `timed` (the timed steps' start) to `end`; where that window is too
    short for the counters' ticks (`system.share_window_s`), from `since` (the warm-up's start) instead; where even
    that is, no share and why: a cell timed for 0.25 s on 2 CPUs had no share, read as quiet while a loop took a
    CPU, and won the thread-count star. None and None where the counters cannot be read at all."""
    need = system.share_window_s()
    start = timed if since is None or end.at - timed.at >= need else since
    share = system.others_cpu_share(start.machine, end.machine, end.family_s - start.family_s, end.at - start.at)
    if share is not None or not start.machine or not end.machine:
        return share, None
    steps = "timed steps" if start is timed else "warm-up and timed steps"
    return None, (f"its {steps} took {end.at - start.at:.2f} s, under the {need:.2f} s the CPUs' busy counters "
                  f"need here: a --min-time of {math.ceil(round(need * 10, 6)) / 10:g} s or more reads it")  # fmt: skip


def timed_samples(
    run, cfg: TimerConfig, emit: Reporter, clock=time.perf_counter, own: Callable[[float], float] = lambda t: t,
    since: Since | None = None,
) -> Sampled:  # fmt: skip
    """The timed steps, each sample emitted as it is taken; returns what the machine did meanwhile (other processes'
    load read from `since` where the timed steps are too short for it: `load`).

    `clock` and `own` are for a DDP process: `run` returns the step's slowest time over the processes and `clock`
    sums those, so the stopping rule decides alike everywhere; `own(t)` is the process's own time of that step,
    which is what it emits."""
    # the high-water mark reset to the resident set, then that set read: read before, one freed page between the two
    # made the increase negative (-131072 bytes), which a high-water mark cannot be
    hwm_reset, rss_before = system.reset_rss_hwm(), system.rss_bytes()
    before = Since.now()  # with a loader's worker processes, whose CPU is no other process's
    own_before, faults_before = os.times(), _minor_faults()
    cpu_before, started = time.process_time(), time.perf_counter()
    batch = SampleBatch(emit)
    try:
        samples = sample(run, cfg, on_sample=lambda t: batch.add(own(t)), clock=clock)
    finally:
        batch.flush()  # a step that raised keeps the samples before it
    own_after, cpu_after, ended = os.times(), time.process_time(), time.perf_counter()
    after = Since.now()  # its scan of /proc for the family's CPU time falls outside the own CPU's wall time below
    wall = ended - started
    ticked, kernel_cpu = _cpu_s(own_after) - _cpu_s(own_before), own_after.system - own_before.system
    faults = _minor_faults() - faults_before
    others, unread = load(before, after, since)
    return Sampled(
        n=len(samples),
        median_s=statistics.median(samples) if samples else None,
        steal_fraction=system.steal_fraction(before.machine, after.machine),
        others_cpu_share=others,
        others_unread=unread,
        cpu_utilization=(cpu_after - cpu_before) / wall if wall > 0 else None,
        minor_faults_per_step=faults / len(samples) if samples else None,
        # all of it read 1.0000000000000036
        kernel_cpu_share=min(1.0, kernel_cpu / ticked) if ticked >= _ticks_s(KERNEL_TICKS) else None,
        process_hwm_increase_bytes=max(0, system.rss_hwm_bytes() - rss_before) if hwm_reset else None,
    )


class SampleBatch:
    """The timed steps' samples, written a few times a second rather than one line per step: between two steps the
    worker only appends a float. Measured on tiny-fcn-r (0.21 ms steps, 1 thread, Zen 4), encoding and writing a line
    between two steps made the next one about 10 µs (5%) slower, and a plain loop does neither. A process killed while
    it samples (a timeout, a deadline, a crash) loses at most the last `every_s` of its samples."""

    EVERY_S = 0.25

    def __init__(self, emit: Reporter, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.emit, self.every_s, self.clock = emit, every_s, clock
        self.pending: list[float] = []
        self.written = clock()

    def add(self, t: float) -> None:
        self.pending.append(t)
        if self.clock() - self.written >= self.every_s:
            self.flush()

    def flush(self) -> None:
        events = [Sample(t) for t in self.pending]
        if isinstance(self.emit, Reporter):
            self.emit.many(events)  # one write
        else:
            for event in events:  # a test's list
                self.emit(event)
        self.pending = []
        self.written = self.clock()


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


# The kernel's share of the own CPU time needs the user and system split that only os.times gives, counted in the
# kernel's ticks (10 ms at 100 Hz): over a few ticks it read 100% (one tick in the kernel, none in user space); it is
# given over KERNEL_TICKS or more. The CPU time of cpu_utilization is read to the nanosecond (time.process_time): in
# ticks, a window of 2 ms that held one tick read 5.18 cores busy on a 2-core machine.
KERNEL_TICKS = 10


def _ticks_s(ticks: int) -> float:
    return ticks / os.sysconf("SC_CLK_TCK")


def _cpu_s(t: os.times_result) -> float:
    """The process's own CPU time (every thread's, its children's apart), user and system."""
    return t.user + t.system


def pin(cpus: list[int] | None) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)


def affinity() -> Affinity:
    return Affinity(sorted(os.sched_getaffinity(0)), system.inherited_thread_env(os.environ))


def run_cell(task: CellTask, emit: Reporter) -> None:
    gate = Gate(task.gate)
    gate.work()  # first: beside the group's other cells' work, never beside their timing (the parent waits for this)
    pin(task.pin_cpus)
    emit(affinity())
    limit_memory(task.memory_limit)
    with said_out_of_memory(task), model_warnings(task, emit):
        measure(task, emit, gate)


MODEL_WARNINGS = 5  # the first this many different ones: a model warning anew at each step is not a list without end


@contextmanager
def model_warnings(task: CellTask, emit: Reporter) -> Iterator[None]:
    """A user model's warnings (a `mse_loss` of a target shaped otherwise than the output: "this will likely lead to
    incorrect results due to broadcasting"), as Python's filters let them through, each once: they went into the
    child's log, unread, and a model with such a bug was measured with no word. Emitted as the cell ends, failed or
    not; a built-in workload's are dlperf's own."""
    if task.workload.get("source") is None:
        yield
        return
    said: dict[str, None] = {}

    def keep(message, category, filename, lineno, file=None, line=None) -> None:
        if len(said) < MODEL_WARNINGS:
            where = "" if _ours(filename) else f" ({os.path.basename(filename)}:{lineno})"
            said.setdefault(f"{category.__name__}: {str(message).strip()}{where}", None)

    with warnings.catch_warnings():  # its showwarning is the caller's again after it
        warnings.showwarning = keep
        try:
            yield
        finally:
            if said:
                emit(Warned(list(said)))


def _ours(filename: str) -> bool:
    """A file of dlperf's own or of the framework's: a location the user cannot act on."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.abspath(filename).startswith(here + os.sep) or f"{os.sep}site-packages{os.sep}" in filename


@contextmanager
def said_out_of_memory(task: CellTask, share: int | None = None) -> Iterator[None]:
    """Out of memory raised as the cell's batch and limit say it (`oom_reason`), the error's own words kept: by a
    one-process cell and each process of a parallel one alike (`worker/ddp.py`), whose rank's reason had been the
    bare "out of memory (MemoryError)", the user's "rank 1 asked for too much" dropped. `share`: the processes a
    data-parallel job splits its batch over, said with it ("at batch 16, 8 a process")."""
    try:
        yield
    except Exception as exc:
        if not out_of_memory(exc):
            raise
        batch = task.workload.get("batch")
        said = f"{batch}, {batch // share} a process" if share and isinstance(batch, int) else batch
        raise OutOfMemory(oom_reason(exc, said, task.memory_limit)) from exc


def limit_memory(limit: int | None) -> None:
    """`dlperf fit --max-memory`: the process's data segment (heap and private mappings, what tensors take on the
    CPU) is limited before the framework is imported, so an allocation beyond it fails with an error the step
    raises, rather than the machine swapping or the kernel's OOM killer ending a process."""
    if limit is None:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    fixed_mmap_threshold()


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MMAP_THRESHOLD = 128 * 1024  # glibc's initial threshold, kept fixed under the limit
SPEED_MMAP_THRESHOLD = 32 * 2**20  # the ceiling glibc's dynamic threshold rises to (64-bit), trimming at twice it
FIT_STEPS = 3  # steps under the limit (after a compiled mode's first): the first makes the optimizer's state


def fixed_mmap_threshold() -> None:
    """Large allocations mapped and unmapped each time (glibc's threshold fixed rather than raised by each free), so
    the data segment follows the live tensors. With the dynamic threshold the heap kept freed tensors' pages, and
    whether a batch fit depended on the step's history: measured here, a 360 MiB limit failed at batch 4 where 340
    MiB fit it. Not glibc (musl): nothing to fix."""
    _mallopt((M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def fit_verdict(train, mode: str = "fp32") -> Held:
    """`dlperf fit`'s verdict, before the warm-up: `FIT_STEPS` steps under the limit with the fixed threshold (an
    out-of-memory error here is the batch not fitting), then the limit is lifted and large allocations kept in the
    heap as a long-running process's allocator keeps them, so the warm-up and timed steps give the batch's own
    speed. Timed under the fixed threshold, each step mapped its tensors afresh: tiny-fcn-r at batch 4096, 1,350
    page faults a step and 16.1-17.0 ms against 0-2 and 7.0-13.2 ms (9.1-9.2 ms in a plain process); tiny-resnet-56
    at 256, 21,170 and 88 ms against 10-25 and 20-24 ms (31 ms plain), 1 thread of 2 busy cores. Returns what the
    process holds between steps then, and its limit, which the timed steps' end is checked against (`Held.check`).
    An allocator mode's settings are made again after the lift, which sets glibc's thresholds as a plain process has
    them: a malloc_keep try was timed with them (its verdict is under its kept heap, as it trains)."""
    for _ in range(FIT_STEPS):
        train.step()
    train.sync()
    held = Held(held_bytes(), resource.getrlimit(resource.RLIMIT_DATA)[0], system.data_peak_bytes())
    lift_memory_limit()
    heap.applied(mode)
    return held


class Held:
    """The memory a fit try holds between two steps after its verdict, and the limit the verdict was made under. The
    timed steps run without the limit: a try whose memory grows step by step (a cache that fills, a list of losses
    kept as tensors) fits its verdict's steps and would have run out of memory later. After the timed steps,
    memory held past the limit is the batch not fitting: raised as out of memory, as the verdict's would be.
    `data_peak`: the most the data segment held up to the verdict's end, what the limit counts at the steps' peak
    (`system.data_peak_bytes`; None where not known): the live tensors' peak leaves out the process's own memory,
    which grows with the model built (tiny-fcn-r: 297 MiB of data at batch 1,818, its live tensors 6.6 MiB)."""

    def __init__(self, after_verdict: int | None, limit: int, data_peak: int | None = None) -> None:
        self.after_verdict, self.limit, self.data_peak = after_verdict, limit, data_peak

    def check(self, steps: int) -> None:
        now = held_bytes()
        if now is None or self.after_verdict is None or self.limit == resource.RLIM_INFINITY or now <= self.limit:
            return
        raise GrewPastTheLimit(f"its memory grew past the limit over its {steps} timed steps (run without it): "
                               f"{now / 2**20:,.0f} MiB held between steps at their end, "
                               f"{self.after_verdict / 2**20:,.0f} MiB after the {FIT_STEPS} that fitted")  # fmt: skip


class GrewPastTheLimit(MemoryError):
    """A fit try whose memory grew past its limit once the limit was lifted (`Held.check`): said in its own words."""


def held_bytes() -> int | None:
    """The data segment (what RLIMIT_DATA counts) less the memory glibc's malloc holds free in it: what the process
    holds whatever the allocator's thresholds, so a figure taken after the limit is lifted (freed tensors kept in the
    heap) reads as one taken under it. Two reads of /proc and one of mallinfo2, outside any timed step. None where
    either is not known (not Linux; not glibc 2.33+)."""
    data, free = system.data_bytes(), malloc_free_bytes()
    return None if data is None or free is None else data - free


def malloc_free_bytes() -> int | None:
    """glibc's free bytes in its arenas (mallinfo2's fordblks), which stay in the data segment; None without it."""
    import ctypes

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                         "fsmblks", "uordblks", "fordblks", "keepcost")]  # fmt: skip

    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = Mallinfo2
    return mallinfo2().fordblks


def lift_memory_limit() -> None:
    """The data limit back to its hard one (what the process had before `limit_memory`) and glibc's thresholds at
    where its dynamic ones end up once a large tensor was freed (mallopt cannot turn the dynamic ones back on)."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
    _mallopt((M_MMAP_THRESHOLD, SPEED_MMAP_THRESHOLD), (M_TRIM_THRESHOLD, 2 * SPEED_MMAP_THRESHOLD))


def _mallopt(*settings: tuple[int, int]) -> None:
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    for param, value in settings:
        mallopt(param, value)


def oom_reason(exc: BaseException, batch: int | str | None, limit: int | None) -> str:
    """Out of memory, at which batch and under which limit: what `dlperf fit` reads as a try that did not fit."""
    under = "" if limit is None else f" under --max-memory {limit / 2**20:,.0f} MiB"
    text = (
        "MemoryError"
        if isinstance(exc, MemoryError) and not str(exc)
        else str(exc)
        if isinstance(exc, GrewPastTheLimit)
        else describe(exc).removeprefix("out of memory: ")
    )
    return f"{OUT_OF_MEMORY} at batch {batch}{under}: {text}"


def main(argv: list[str]) -> int:
    return serve(argv, run_cell)


if __name__ == "__main__":
    exit_now(main(sys.argv))  # every event is on disk: skip the interpreter's teardown
