"""The seam between the parent and its child processes: what each child receives and what it reports.

Standard library only: every child imports this, in dlperf's environment or in a framework's own. The parent writes
a task as JSON to a file and starts the child through the one launcher (`runner/launch.py`); the child reports typed
events as JSON lines, each flushed as it happens, so a child killed at its timeout keeps what it reported; the parent
reads them back as the same types. Five kinds of child, one task type each:

    CellTask   worker/cell.py        one cell: build, warm up, time, then FLOPs, memory and the loss check
    ProfileTask worker/profile.py  one cell, untimed: K steady steps under the framework's profiler
    DDPTask    worker/ddp.py    one process of a data-parallel cell (torchrun starts every process)
    PeakTask   worker/peak.py   matmul and bandwidth peaks of one device at one thread count
    CommTask   worker/comm.py   one process of an all-reduce bandwidth job (torchrun)
    ProbeTask  worker/probe.py  a question that needs a framework (devices, versions, a user's factory)

A new kind of child is a worker module and a task type here; the launcher does the rest.

A cell is one measurement: (workload, framework, device, threads, mode), for a data-parallel cell the number of
processes and the scaling protocol, and for a cell that reads real data (`--data DIR`) its loader setting. Its key is
stable across runs, so a sweep can be resumed and two runs compared cell by cell.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, dataclass_transform

from dlperf.figures import CommFigures, Figures, LoaderFigures, LossCheckFigures
from dlperf.measure.timer import TimerConfig

if TYPE_CHECKING:  # a probe's child alone reads its request: every other child never creates the answers' 32 classes
    from dlperf.answers import ProbeRequest

# what the launcher sets in a child's environment (`runner/lifeline.child_vars`), read by the child's side
PARENT_VAR = "DLPERF_PARENT_PID"  # the pid a child expects as its parent (`worker/lifeline.die_with_parent`)
LAUNCH_VAR = "DLPERF_LAUNCH"  # inherited by everything a launch starts: what marks an orphan as the launch's
LIFELINE = "dlperf.worker.lifeline"  # `python -m` it before torchrun's agent, which then dies with dlperf too
ZYGOTE = "dlperf.worker.zygote"  # the warm parent that forks cells' children (`runner/warm.py`)

# ----------------------------------------------------------------------------------------------------------------------
# Cells


@dataclass(frozen=True)
class Cell:
    workload: str
    framework: str
    device: str  # "cpu", "cuda:0", "mps"
    threads: int  # CPU threads of the process (for GPU cells: the host threads); of each process under DDP
    mode: str
    nproc: int = 0  # processes (or replicas) in all, every node's; 0: one plain process, no torch.distributed
    scaling: str = ""  # "strong" (the total batch fixed and split) or "weak" (each process's batch fixed)
    loader: str = ""  # "": one synthetic batch on the device (the paper's setting); else a `loaders` setting, `w2+pin`
    parallel: str = ""  # with nproc: the strategy (`vocab.Parallel`: ddp, fsdp, gpipe, 1f1b, tp, mirrored)
    microbatches: int = 0  # a pipeline's micro-batches per step; 0 for every other cell

    def __post_init__(self) -> None:
        if self.nproc and not self.parallel:  # a cell stored before strategies: data parallel
            object.__setattr__(self, "parallel", "ddp")

    @property
    def key(self) -> str:
        base = f"{self.workload}|{self.framework}|{self.device}|{self.threads}|{self.mode}"
        if self.nproc:
            micro = f":m{self.microbatches}" if self.microbatches else ""
            base = f"{base}|{self.parallel}:{self.nproc}:{self.scaling}{micro}"
        return f"{base}|data:{self.loader}" if self.loader else base

    @property
    def column(self) -> str:
        """Where the cell goes in the Table-7 view: `cpu:4`, `cuda:0`, `mps`, `ddp:2x1` (2 processes x 1 thread),
        `fsdp:2x1`, `gpipe.m4:2x1` (a pipeline of 2 stages, 4 micro-batches)."""
        return column_name(self.device, self.threads, self.nproc, self.parallel, self.microbatches)

    @property
    def label(self) -> str:
        label = f"{self.workload} {self.framework} {self.column} {self.mode}"
        return f"{label} data:{self.loader}" if self.loader else label

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Cell:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


def column_name(device: str, threads: int, nproc: int = 0, parallel: str = "ddp", microbatches: int = 0) -> str:
    if nproc:
        strategy = f"{parallel or 'ddp'}.m{microbatches}" if microbatches else parallel or "ddp"
        return f"{strategy}:{nproc}x{threads}" if device == "cpu" else f"{strategy}:{nproc}x{device}"
    return f"cpu:{threads}" if device == "cpu" else device


# ----------------------------------------------------------------------------------------------------------------------
# Tasks: what a child receives

T = TypeVar("T", bound=type)


@dataclass(frozen=True)
class StopRule:
    """Stop a cell after its timed steps, skipping the untimed extras (FLOPs, memory, the loss check), when its
    median is above `factor` x `reference_s`: a cell that slow is not worth them. `reference` names what
    `reference_s` is, for the record ("the mode it would replace")."""

    reference_s: float
    factor: float
    reference: str

    def applies(self, median_s: float | None) -> bool:
        return median_s is not None and median_s > self.factor * self.reference_s


class _Task:
    """JSON of a task: its kind, then its fields; a flat task's fields are JSON already."""

    KIND: ClassVar[str]  # its name in the task file
    WORKER: ClassVar[str]  # the module the child runs
    DISTRIBUTED: ClassVar[bool]  # started through torchrun, one process per rank
    SPAWNED: ClassVar[bool] = False  # distributed, started by dlperf's spawner instead (`worker/spawn.py`)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.KIND, **asdict(self)}  # type: ignore[call-overload]

    @classmethod
    def from_json(cls, d: dict[str, Any]):
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})  # type: ignore[arg-type]


TASKS: dict[str, type] = {}


@dataclass_transform(frozen_default=True)
def task(kind: str, worker: str, *, distributed: bool = False) -> Callable[[T], T]:
    """Declare a task: a frozen dataclass, the kind of child it starts, known to `read_task`."""

    def register(cls: T) -> T:
        cls.KIND, cls.WORKER, cls.DISTRIBUTED = kind, worker, distributed
        TASKS[kind] = dataclass(frozen=True)(cls)
        return TASKS[kind]

    return register


@task("cell", "dlperf.worker.cell")
class CellTask(_Task):
    """One process of one cell."""

    cell: Cell
    repeat: int
    workload: dict[str, Any]  # Workload.to_json(): the worker rebuilds the Workload
    timer: TimerConfig
    pin_cpus: list[int] | None = None  # --pin: this process's CPUs
    count_flops: bool = True  # False: the run has the count already (FLOPs depend on neither threads nor repeat)
    measure_memory: bool = True  # False: the run has them already (a step's tensors do not depend on the threads)
    loss_check: bool = False  # train the mode against fp32 after timing (the parent picks one process per cell)
    check_if_faster_than_s: float | None = None  # ... and only when the median is below this (else: "not checked")
    stop: StopRule | None = None
    nvtx: bool = False  # --nvtx: NVTX ranges around the step's phases (host calls per step; not part of the key)
    data: str | None = None  # a cell with a loader: the dataset's directory, or "dataset" (a user workload's own)
    memory_limit: int | None = None  # `dlperf fit --max-memory`: the process's data limit in bytes, set before import
    gate: str | None = None  # `run --compile-at-once`: the lock file of the cells compiling at once (`measure/gate.py`)
    gate_group: int = 1  # how many cells share that lock: compiled side by side, each timed alone

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CellTask:
        d = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        d["cell"] = Cell.from_json(d["cell"])
        d["timer"] = TimerConfig(**d["timer"])
        d["stop"] = StopRule(**d["stop"]) if d.get("stop") else None
        return cls(**d)


@task("profile", "dlperf.worker.profile")
class ProfileTask(_Task):
    """One untimed process of a cell that has been timed: warm up, then `steps` steady steps under the framework's
    profiler (`dlperf profile`, `run --profile`). Never runs inside a timed process."""

    cell: Cell
    workload: dict[str, Any]  # Workload.to_json()
    steps: int = 5  # profiled steps after warm-up; the figures are per step (their mean)
    warmup: int = 5  # untimed steps before the profiler starts (more when the mode compiles: the first step)
    trace_dir: str | None = None  # where the gzip Chrome trace goes (None: no trace kept)
    max_trace_bytes: int = 50 * 2**20  # the trace's cap, compressed (--max-trace-mib): beyond it, no trace, a note why
    nvtx: bool = False  # --nvtx: NVTX ranges around the step's phases, as in the cell's timed processes
    data: str | None = None  # as CellTask.data

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProfileTask:
        d = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        d["cell"] = Cell.from_json(d["cell"])
        return cls(**d)


@task("ddp", "dlperf.worker.ddp", distributed=True)
class DDPTask(CellTask):
    """One process of a data-parallel cell; torchrun starts one per rank, each with this same task."""

    group_timeout_s: float = 600.0  # how long a collective may wait for a peer
    rank_cpus: dict[str, list[int]] | None = None  # --pin: local rank -> its CPUs


@task("multiworker", "dlperf.worker.multiworker", distributed=True)
class MultiWorkerTask(DDPTask):
    """One worker of a MultiWorkerMirroredStrategy cell: dlperf's spawner starts one per worker, each with its
    TF_CONFIG and this same task (torchrun needs torch, which TensorFlow's environment lacks)."""

    SPAWNED: ClassVar[bool] = True


@task("peak", "dlperf.worker.peak")
class PeakTask(_Task):
    """The peaks of one device at one thread count."""

    framework: str
    device: str
    threads: int
    dtypes: list[str]
    sizes: list[int]  # square matrix sizes n; the peak is the best
    bandwidth_bytes: int  # each of the three bandwidth arrays
    max_time: float  # seconds of warm-up and of sampling per figure, at most
    copy_sizes: list[int] = field(default_factory=list)  # bytes of each copy (memcpy; h2d, d2h on a GPU); []: none


@task("comm", "dlperf.worker.comm", distributed=True)
class CommTask(_Task):
    """Every process of an all-reduce bandwidth job."""

    backend: str  # gloo | nccl
    threads: int
    sizes: list[int]  # message bytes per rank
    iters: int
    warmup: int
    timeout: float  # seconds a collective may wait for a peer


@task("probe", "dlperf.worker.probe")
class ProbeTask(_Task):
    """A question that needs a framework: one of `answers.REQUESTS`, its kind on the wire as `"what"`."""

    framework: str
    request: ProbeRequest

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.KIND, "framework": self.framework, "request": self.request.to_json()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProbeTask:
        from dlperf.answers import read_request

        return cls(d["framework"], read_request(d["request"]))


Task = CellTask | DDPTask | PeakTask | CommTask | ProbeTask | ProfileTask


def write_task(task: Task, path: str | Path) -> None:
    Path(path).write_text(json.dumps(task.to_json()))


def read_task(path: str | Path) -> Task:
    d = json.loads(Path(path).read_text())
    return TASKS[d["kind"]].from_json(d)


# ----------------------------------------------------------------------------------------------------------------------
# Events: what a child reports


@dataclass(frozen=True)
class Event:
    NAME: ClassVar[str] = ""
    FIGURES: ClassVar[type[Figures] | None] = None  # the type of its `figures`, for one that carries them
    # wall-clock time the child reported it: where a cell's time goes (collect.phases); left out of equality
    at: float = field(default_factory=time.time, kw_only=True, compare=False)

    def to_line(self) -> str:
        return json.dumps({"event": self.NAME, **asdict(self)})


EVENTS: dict[str, type[Event]] = {}


@dataclass_transform(frozen_default=True)
def event(name: str) -> Callable[[T], T]:
    """Declare an event: a frozen dataclass, named `name` on the wire, known to `decode`."""

    def register(cls: T) -> T:
        cls.NAME = name
        EVENTS[name] = dataclass(frozen=True)(cls)
        return EVENTS[name]

    return register


@event("start")
class Start(Event):
    pid: int
    python: str  # the interpreter: dlperf's, or the framework's own environment's
    rank: int | None = None  # distributed children
    world: int | None = None
    local_rank: int | None = None
    host: str | None = None


@event("affinity")
class Affinity(Event):
    cpus: list[int]
    thread_env: dict[str, str]  # inherited variables that change threading or kernels


@event("built")
class Built(Event):
    params: int
    build_s: float
    settings: dict[str, Any]
    version: str | None = None  # of the framework that built the step


@event("compiling")
class Compiling(Event):
    """The first step, which compiles or traces, starts now (a compile timeout counts from here)."""


@event("compiled")
class Compiled(Event):
    first_step_s: float
    stats: dict[str, Any] = field(default_factory=dict)  # the backend's compile_stats() after the first step


@event("gated")
class Gated(Event):
    """The cell holds its group's device alone from now to its last timed step (`measure/gate.py`); its wait for
    that since `compiled` is its `gate_s` phase."""


@event("warmup")
class Warmup(Event):
    steps: int
    steady: bool
    times: list[float]


@event("sample")
class Sample(Event):
    t: float

    def to_line(self) -> str:  # one per timed step: the same line as Event's without asdict's copying
        return json.dumps({"event": self.NAME, "t": self.t, "at": self.at})


@event("sampled")
class Sampled(Event):
    """The timed steps are over; what the machine did meanwhile."""

    n: int
    median_s: float | None
    steal_fraction: float | None = None
    others_cpu_share: float | None = None
    # why `others_cpu_share` is None where the steps were too short to read it (`worker/cell.load`)
    others_unread: str | None = None
    cpu_utilization: float | None = None  # cores kept busy on average: ~threads when it scales
    # the process's minor page faults (all its threads) over the timed steps, a step: faults served without the disk,
    # a page touched first since it was mapped (memory mapped afresh, a grown heap), copied on write, or file-cached
    minor_faults_per_step: float | None = None
    # of the process's CPU time over the timed steps, the share spent in the kernel on its behalf (system time):
    # page faults, mapping and unmapping memory, the scheduler's futexes
    kernel_cpu_share: float | None = None
    process_hwm_increase_bytes: int | None = None
    # the threads the framework's CPU pool had at the timed steps' end, where its backend says (`pool_threads`)
    pool_threads: int | None = None
    # the last timed step's loss, read once the steps were over; "nan", "inf" or "-inf" when not finite (JSON has no
    # such numbers): a step whose loss is not finite was timed, but it did not train
    loss: float | str | None = None


@event("compile_end")
class CompileEnd(Event):
    stats: dict[str, Any] = field(default_factory=dict)  # compile_stats() after the timed steps: recompiles show


@event("flops")
class Flops(Event):
    flops_per_step: int | None
    flops_by_dtype: dict[str, int] | None = None
    detail: dict[str, Any] = field(default_factory=dict)  # what else the counter said (TensorFlow: by op type)
    note: str | None = None  # why there is no figure, when the counter failed

    @classmethod
    def of(cls, counted: dict[str, Any] | None) -> Flops:
        """A backend's `count_flops()` answer, None where it has no counter."""
        rest = {k: v for k, v in (counted or {}).items() if k not in ("flops_per_step", "flops_by_dtype")}
        return cls((counted or {}).get("flops_per_step"), (counted or {}).get("flops_by_dtype"), rest)


@event("memory")
class Memory(Event):
    figures: dict[str, int]  # keys of MEMORY_KINDS and the backend's other figures
    note: str | None = None  # why there is no figure, when the measurement failed


@event("sources")
class Sources(Event):
    """The user's own source files the child imported (`worker/sources.py`), once its figures are counted: path ->
    [size, mtime_ns, sha256]; None where there were too many to say."""

    files: dict[str, list] | None


@event("profiled")
class Profiled(Event):
    """Where a profiled step's time goes. Every time is seconds per step (the mean over the profiled steps).

    `categories`: vocab.Category value -> seconds; they sum to `step_s`, the profiled step's wall time.
    `flops`/`bytes`: Category value -> FLOPs / bytes moved per step, where the profiler or counter gives them
    (achieved rates are these over the category's seconds).
    `top_ops`: the 15 operators with the most self time: {"name", "self_s", "calls" (per step), "shapes" (the input
    shapes of the most frequent call, as a string)}.
    `modules`: top-level modules of the model: {"name", "forward_s", "backward_s"}.
    `ops_per_step`: framework operators dispatched per step; `kernels_per_step`: device kernels launched per step
    (None on a CPU, where no kernel is launched); `leaf_ops_per_step`: of the operators, those that do work
    themselves (no operator below them does, views and allocations left out: a conv2d and the convolution,
    _convolution and mkldnn_convolution it calls are one), what the dispatch floor counts on a CPU.
    `trace`: the path of the gzip Chrome/Perfetto trace, or None; `notes`: what the profile could not give, and why.
    `dispatch_s`: seconds to dispatch one tiny operator, measured in the profiled process after its profile as `dlperf
    peak` measures it: the dispatch floor's cost where `dlperf peak` measured none for the cell's machine and threads
    (None: a backend that does not measure it, or a profile stored before it was)."""

    steps: int
    step_s: float
    categories: dict[str, float]
    flops: dict[str, float] = field(default_factory=dict)
    bytes: dict[str, float] = field(default_factory=dict)
    top_ops: list[dict[str, Any]] = field(default_factory=list)
    modules: list[dict[str, Any]] = field(default_factory=list)
    ops_per_step: int | None = None
    kernels_per_step: int | None = None
    leaf_ops_per_step: int | None = None
    trace: str | None = None
    notes: list[str] = field(default_factory=list)
    dispatch_s: float | None = None


@event("loader")
class Loader(Event):
    """What a cell with a loader (`Cell.loader`) measured of its input pipeline; a child may report several."""

    FIGURES: ClassVar[type[Figures]] = LoaderFigures
    figures: LoaderFigures


@event("checking")
class Checking(Event):
    """The loss check starts: a child killed now was measured in full, only its check was cut short."""


@event("loss_check")
class LossCheck(Event):
    FIGURES: ClassVar[type[Figures]] = LossCheckFigures
    ok: bool | None  # None: not checked, or the check could not run; `reason` says which
    reason: str | None = None
    figures: LossCheckFigures = field(default_factory=LossCheckFigures)


@event("comm")
class Comm(Event):
    FIGURES: ClassVar[type[Figures]] = CommFigures
    figures: CommFigures  # a multi-process cell's communication: all-reduce time, bandwidths, exposed communication


@event("ranks")
class Ranks(Event):
    samples: list[list[float]]  # every process's steps, by rank


@event("joined")
class Joined(Event):
    """The processes of a distributed job have met."""


@event("answer")
class Answer(Event):
    """The result of a child that answers once (peak, comm, probe): the JSON of its typed answer (`answers.py`),
    which the parent reads back as that type."""

    result: dict[str, Any]


@event("answer_part")
class AnswerPart(Event):
    """A finished part of the answer of a child that answers once (one message size of `dlperf comm`): its typed
    answer with that part alone, kept where the child is stopped or fails before its `Answer`."""

    result: dict[str, Any]


@event("unsupported")
class Unsupported(Event):
    reason: str


@event("error")
class Error(Event):
    error: str  # one line
    traceback: str | None = None
    rank: int | None = None
    usage: bool = False  # the user's input is wrong (a factory that does not build): a UsageError in the parent


@event("warned")
class Warned(Event):
    """What Python's warnings said while a user's model was built and trained (`worker.cell.model_warnings`), each
    once: a loss broadcasting a target of another shape trained measured and unsaid."""

    messages: list[str]


@event("done")
class Done(Event):
    stopped_early: str | None = None  # why the untimed extras were skipped (a StopRule applied)


# The figure that becomes a cell's peak memory, best first: an allocator's own peak, the bytes of live tensors, XLA's
# buffer plan of a jitted step, and otherwise (compiled CPU steps, which no dispatch mode can trace; frameworks without
# a tensor-level figure) the process's resident-set peak during one step.
MEMORY_KINDS = {
    "cuda_allocator_peak_bytes": "cuda_allocator",
    "live_tensor_peak_bytes": "live_tensors",
    "xla_buffer_peak_bytes": "xla_buffers",  # XLA's plan of the compiled step: arguments + outputs + temporaries
    "process_rss_peak_bytes": "process_rss",
}


def decode(line: str) -> Event | None:
    """One event line as its type; None for a line cut short by a kill, or one this dlperf does not know."""
    try:
        d = json.loads(line)
        cls = EVENTS[d.pop("event")]
        known = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        if cls.FIGURES is not None and "figures" in known:
            known["figures"] = cls.FIGURES.of(known["figures"]) or cls.FIGURES()
        return cls(**known)
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None


def read_events(path: str | Path) -> list[Event]:
    """Every complete event of a file; a missing file has none."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    return [e for e in map(decode, text.splitlines()) if e is not None]


E = TypeVar("E", bound=Event)


def first(events: list[Event], kind: type[E]) -> E | None:
    return next((e for e in events if isinstance(e, kind)), None)


def all_of(events: list[Event], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


def events_file(base: str, rank: int | None) -> str:
    """Where a child writes its events: `base`, or `base.rankR` for each process of a distributed job."""
    return base if rank is None else f"{base}.rank{rank}"


class Reporter:
    """Append-only JSON lines, one flushed write per event."""

    def __init__(self, path: str | Path) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def __call__(self, event: Event) -> None:
        self._file.write(event.to_line() + "\n")
        self._file.flush()

    def many(self, events: list[Event]) -> None:
        """Several events in one write (the timed steps' samples, a few times a second)."""
        if events:
            self._file.write("".join(e.to_line() + "\n" for e in events))
            self._file.flush()


def own_rank() -> int | None:
    """This process's rank in a distributed job (torchrun sets RANK), or None."""
    rank = os.environ.get("RANK")
    return int(rank) if rank is not None else None
