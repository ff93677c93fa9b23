"""The store's typed records: what every write takes and every view reads. Standard library only.

A cell's figures live in typed columns and, for what later measurements added, one JSON column (`extra_json`); a
`CellFigures` gives both one typed shape, one field per stored figure (`stored` says where it goes), with sub-records
for what only some cells have: the compiler's work (`CompileRecord`), the memory figures (`MemoryRecord`), the "does it
still train?" check (`LossCheckRecord`), a multi-process cell's communication (`CommRecord`) and a loader cell's input
pipeline (`LoaderRecord`). A `CellRecord` is a cell's identity and its `CellFigures`. Records are built from rows as
stored, old files included: a key a record does not know is ignored, one it expects and does not find is None. What
one process measured is `store/process.py`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import Field, asdict, dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from enum import Enum
from types import MappingProxyType
from typing import Any, ClassVar, Self

from dlperf.figures import CommFigures, LossCheckFigures
from dlperf.protocol import Cell, Profiled, column_name
from dlperf.vocab import Status


def _known(cls: type, d: dict[str, Any] | None) -> dict[str, Any]:
    return {f.name: d[f.name] for f in fields(cls) if d and f.name in d}


@dataclass(frozen=True)
class Stored:
    """How a field of a stored record is stored: in the `cells` column of its name (`column`), else under `key` (its
    name) in the row's JSON, read back by `of` (as is without one), left out of the JSON when it has no value
    (`optional`)."""

    key: str | None = None
    of: Callable[[Any], Any] | None = None
    column: bool = False
    optional: bool = False


def stored(key: str | None = None, *, of: Callable[[Any], Any] | None = None, column: bool = False,
           optional: bool = False) -> Mapping[str, Stored]:  # fmt: skip
    """A field's metadata saying how it is stored (`Stored`); a field without it is under its name, as is."""
    return MappingProxyType({"stored": Stored(key, of, column, optional)})


COLUMN = stored(column=True)
OPTIONAL = stored(optional=True)


def json_of(value: Any) -> Any:
    """A value as JSON holds it: a record by its `to_json` (else its fields), a closed vocabulary by its value."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if is_dataclass(value):
        return {k: json_of(v) for k, v in asdict(value).items()}
    return value.value if isinstance(value, Enum) else value


class StoredFigures:
    """Figures stored one field each, a column or a key of a row's JSON (`stored`): the fields of the class that
    derives from this one (`CellFigures`, `store.process.ProcessDetail`), not those a subclass of it adds."""

    STORED: ClassVar[type]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if StoredFigures in cls.__bases__:
            cls.STORED = cls

    @classmethod
    def from_stored(cls, row: Mapping[str, Any], extra: Mapping[str, Any]) -> Self:
        """The figures of a row (its columns) and its JSON (`extra`); one not there is left to its default."""
        found = {}
        for f in fields(cls.STORED):
            how = _how(f)
            value = row.get(f.name) if how.column else extra.get(how.key or f.name)
            if value is not None:
                found[f.name] = how.of(value) if how.of else value
        return cls(**found)

    def to_json(self) -> dict[str, Any]:
        """The figures that are not columns, as the JSON object that holds them."""
        found = {}
        for f in fields(self.STORED):
            value, how = getattr(self, f.name), _how(f)
            if not how.column and not (how.optional and value in (None, {}, [])):
                found[how.key or f.name] = json_of(value)
        return found


def _how(f: Field) -> Stored:
    return f.metadata.get("stored") or Stored()


@dataclass(frozen=True)
class CompileRecord:
    """A compiled cell's first step, timed apart, and what the compiler did (its backend's `compile_stats()`)."""

    first_step_s: float | None = None
    compile_s: float | None = None  # the first step beyond a steady step: what compiling (or capturing) cost
    graphs: int | None = None
    graph_breaks: int | None = None
    graph_break_reasons: list[str] = field(default_factory=list)
    frames_compiled: int | None = None
    cache_hits: int | None = None  # compiled code reused from a warm cache; each cell gets its own, empty one
    recompiles: int | None = None  # frames compiled after the first step
    graph_breaks_after_first_step: int | None = None
    jit_compile: bool | None = None  # TensorFlow: XLA compiled the step (else a plain tf.function graph)
    finished: bool = True  # False: stopped while compiling

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> CompileRecord | None:
        return cls(**_known(cls, d)) if d else None


@dataclass(frozen=True)
class MemoryRecord:
    """The cell's peak memory and the figure it came from, with every figure the worker reported."""

    peak_bytes: int | None  # of `kind`: the first of protocol.MEMORY_KINDS the worker reported
    kind: str | None  # cuda_allocator | live_tensors | xla_buffers | process_rss
    figures: dict[str, int | None] = field(default_factory=dict)

    @property
    def process_hwm_increase_bytes(self) -> int | None:
        """How much the process's resident-set high-water mark grew over the timed steps."""
        return self.figures.get("process_hwm_increase_bytes")


@dataclass(frozen=True)
class LossCheckRecord:
    """Does the mode still train like fp32? (the torch backend's loss check; other backends' own)"""

    ok: bool | None  # None: not checked, or the check could not run; `reason` says which
    reason: str | None = None
    seconds: float | None = None
    figures: dict[str, Any] = field(default_factory=dict)  # the curves, the first update's cosine, ... as measured

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> LossCheckRecord | None:
        if not d:
            return None
        rest = {k: v for k, v in d.items() if k not in ("ok", "reason", "seconds")}
        return cls(d.get("ok"), d.get("reason"), d.get("seconds"), rest)

    @classmethod
    def reported(cls, ok: bool | None, reason: str | None, figures: LossCheckFigures) -> LossCheckRecord:
        """A `protocol.LossCheck` event's verdict and figures."""
        measured = {k: v for k, v in figures.to_json().items() if v is not None}
        return cls(ok, reason, measured.pop("seconds", None), measured)

    def to_json(self) -> dict[str, Any]:
        """As stored: the verdict, its reason and seconds, and the measured figures beside them."""
        return {"ok": self.ok, "reason": self.reason, "seconds": self.seconds, **self.figures}


CommRecord = CommFigures  # a multi-process cell's communication, as its processes reported it (`protocol.Comm`)


def comm_of(d: dict[str, Any] | None) -> CommRecord | None:
    """Stored communication figures, those of a file written before the strategies beyond DDP included (`step_s`
    was `ddp_step_s` then)."""
    if d and "ddp_step_s" in d and "step_s" not in d:
        d = {**d, "step_s": d.get("ddp_step_s")}
    return CommRecord.of(d)


@dataclass(frozen=True)
class LoaderRecord:
    """A cell's input pipeline (`--data DIR`), summarized over its processes (`collect.loader_summary`).

    `wait_share` pools every timed step: the seconds waited for data over the seconds of the steps; `verdict` is
    `loaders.input_bound` of it. `alone_samples_per_s` is the median over processes of the loader iterated alone.
    `h2d` is one batch's host->device copy on a GPU (see `figures.LoaderFigures`)."""

    setting: str
    workers: int | None = None
    threads: int | None = None
    cores: int | None = None
    oversubscribed: bool = False
    dataset: str | None = None
    samples: int | None = None  # in the dataset
    alone_samples_per_s: float | None = None
    wait_share: float | None = None
    wait_median_s: float | None = None
    verdict: str | None = None  # "high" | "moderate" | None (not input-bound)
    h2d: dict[str, Any] | None = None
    batches: int | None = None  # an epoch's, as the loader counts them

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> LoaderRecord | None:
        return cls(**_known(cls, d)) if d else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Provenance:
    """Which version of the framework measured a cell, from which environment, and the version dlperf pins."""

    name: str | None = None
    version: str | None = None
    pinned: str | None = None  # when the cell was measured
    environment: str | None = None  # "dlperf" (dlperf's own environment) or the framework's own environment's path

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> Provenance | None:
        return cls(**_known(cls, d)) if d else None


SQLValue = str | int | float | None  # what a column holds


def _dimensions(d: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in d.items()}


@dataclass(kw_only=True)
class CellFigures(StoredFigures):
    """A cell's figures over its measured processes (`collect.cell_figures`): what `Store.record` writes and a
    `CellRecord` reads back. Each field is one stored figure: a column of `cells` (a new one needs a migration), or
    a key of its `extra_json`, written and read back by `stored`."""

    status: Status = field(default=Status.PENDING, metadata=stored(column=True, of=Status))
    error: str | None = field(default=None, metadata=COLUMN)
    median_s: float | None = field(default=None, metadata=COLUMN)  # the median of the per-process medians
    iqr_s: float | None = field(default=None, metadata=COLUMN)
    mean_s: float | None = field(default=None, metadata=COLUMN)
    stdev_s: float | None = field(default=None, metadata=COLUMN)
    ci_low_s: float | None = field(default=None, metadata=COLUMN)  # 95% confidence interval of the median
    ci_high_s: float | None = field(default=None, metadata=COLUMN)
    n: int | None = field(default=None, metadata=COLUMN)  # timed steps, every process's
    samples_s: float | None = field(default=None, metadata=COLUMN)  # samples per second at the median
    # 95% interval of the mean step (`stats.mean_ci`): what a long run pays, a loader cell's waits for data included
    mean_ci_low_s: float | None = field(default=None, metadata=OPTIONAL)
    mean_ci_high_s: float | None = field(default=None, metadata=OPTIONAL)
    warmup_steps: int | None = field(default=None, metadata=COLUMN)
    params: int | None = field(default=None, metadata=COLUMN)
    flops_per_step: int | None = field(default=None, metadata=COLUMN)
    # the peak memory of a step, of `peak_mem_kind`: the first of protocol.MEMORY_KINDS the worker reported
    peak_mem_bytes: int | None = field(default=None, metadata=COLUMN)
    peak_mem_kind: str | None = field(default=None, metadata=COLUMN)  # cuda_allocator | live_tensors | ...
    memory_figures: dict[str, int | None] = field(default_factory=dict, metadata=stored("memory"))  # all reported
    flops_by_dtype: dict[str, int] | None = None
    compile: CompileRecord | None = field(default=None, metadata=stored(of=CompileRecord.of))
    loss_check: LossCheckRecord | None = field(default=None, metadata=stored(of=LossCheckRecord.of))
    # whether every process's last timed step had a finite loss; None: not known (a file from before, a DDP cell)
    loss_finite: bool | None = field(default=None, metadata=OPTIONAL)
    comm: CommRecord | None = field(default=None, metadata=stored(of=comm_of))
    # a cell with a loader: its input pipeline's figures
    data: LoaderRecord | None = field(default=None, metadata=stored("loader", of=LoaderRecord.of, optional=True))
    settings: dict[str, Any] | None = None  # effective thread and kernel settings
    warnings: list[str] = field(default_factory=list)
    steal_fraction: float | None = None
    others_cpu_share: float | None = None  # of the machine's CPUs, used by other processes while timed
    cpu_utilization: float | None = None  # cores the step kept busy
    minor_faults_per_step: float | None = None
    kernel_cpu_share: float | None = field(default=None, metadata=OPTIONAL)  # of its CPU time, in the kernel
    build_s: float | None = None
    warmup_steady: bool = field(default=True, metadata=stored(of=lambda v: v is not False))
    per_process_medians: list[float] = field(default_factory=list, metadata=OPTIONAL)
    # what later measurements add to the cell's identity
    dimensions: dict[str, str] = field(default_factory=dict, metadata=stored(of=_dimensions, optional=True))
    shared_from: dict[str, str] = field(default_factory=dict, metadata=OPTIONAL)  # figure -> the sibling that has it
    provenance: Provenance | None = field(default=None, metadata=stored("framework", of=Provenance.of))

    @property
    def memory(self) -> MemoryRecord | None:
        if not self.memory_figures and self.peak_mem_bytes is None:
            return None
        return MemoryRecord(self.peak_mem_bytes, self.peak_mem_kind, self.memory_figures)

    @property
    def framework_version(self) -> str | None:
        """The version that measured the cell."""
        return self.provenance.version if self.provenance else None

    @property
    def framework_pinned(self) -> str | None:
        """The version dlperf pins, when the cell was measured."""
        return self.provenance.pinned if self.provenance else None

    @property
    def environment(self) -> str | None:
        """ "dlperf" (dlperf's own environment) or the framework's own environment's path."""
        return self.provenance.environment if self.provenance else None

    def columns(self) -> dict[str, SQLValue]:
        """The figures stored in `cells` columns, by column (the rest are `to_json`'s, in `extra_json`)."""
        return {f.name: json_of(getattr(self, f.name)) for f in fields(CellFigures) if _how(f).column}


# the columns of a cell's identity read as they are (`CellRecord.from_row`)
IDENTITY = ("run_id", "key", "position", "workload", "framework", "device", "threads", "mode", "batch", "updated_at")


@dataclass(kw_only=True)
class CellRecord(CellFigures):
    """One cell of one run, as stored: its identity, and its figures (`CellFigures`).

    The last four fields are not stored: the views attach them from other store data (peaks, raw samples)."""

    run_id: int
    key: str
    position: int
    workload: str
    framework: str
    device: str
    threads: int
    mode: str
    nproc: int = 0  # DDP processes in all; 0 for a plain cell
    scaling: str = ""  # DDP: strong | weak; "" for a plain cell
    batch: int | None = None
    workload_spec: dict[str, Any] = field(default_factory=dict)  # the Workload as planned (Workload.to_json)
    loader: str = ""  # the cell's loader setting (`--data DIR`); "" on synthetic data
    parallel: str = ""  # with nproc: the strategy (`dlperf.parallel`); "" for a plain cell
    microbatches: int = 0  # a pipeline's micro-batches per step
    updated_at: str | None = None
    # attached by the views, never stored
    utilization: float | None = None  # of the peaks `dlperf peak` measured
    processes: int = 0  # measured processes
    q1_s: float | None = None  # quartiles of the steps, the median of each process's (error bars: report/load.py)
    q3_s: float | None = None

    @property
    def cell(self) -> Cell:
        return Cell(self.workload, self.framework, self.device, self.threads, self.mode, self.nproc, self.scaling,
                    self.loader, self.parallel, self.microbatches)  # fmt: skip

    @property
    def column(self) -> str:
        return column_name(self.device, self.threads, self.nproc, self.parallel, self.microbatches)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CellRecord:
        """A `cells` row as SQLite returns it (JSON columns still text; an old file lacks the newer columns)."""
        figures = CellFigures.from_stored(row, json.loads(row.get("extra_json") or "{}"))
        nproc = row.get("nproc") or 0
        return cls(
            **{name: row.get(name) for name in IDENTITY},
            nproc=nproc,
            scaling=row.get("scaling") or "",
            loader=row.get("loader") or "",
            parallel=row.get("parallel") or ("ddp" if nproc else ""),
            microbatches=row.get("microbatches") or 0,
            workload_spec=json.loads(row.get("workload_json") or "{}"),
            **{f.name: getattr(figures, f.name) for f in fields(CellFigures)},
        )


@dataclass(frozen=True)
class PlannedCell:
    """A cell of a run's plan, as `Store.create_run` and `Store.add_cells` take it: pending until measured."""

    cell: Cell
    workload: dict[str, Any]  # the Workload as planned (Workload.to_json)


@dataclass(frozen=True)
class Origin:
    """Where a run copied in by `dlperf merge` came from (`runs.origin_json`)."""

    db: str  # the source file, its path resolved
    run_id: int  # the run's id there
    merged_at: str | None = None
    origin: Origin | None = None  # where that run had come from, when it was a merged run there too
    # True: the run was unfinished there and its process gone when it was copied (killed: no one measures it);
    # False: finished, interrupted, or measured by a live process
    stopped: bool = False

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> Origin | None:
        if not d:
            return None
        return cls(d.get("db"), d.get("run_id"), d.get("merged_at"), cls.of(d.get("origin")), d.get("stopped") is True)

    def to_json(self) -> dict[str, Any]:
        found = {"db": self.db, "run_id": self.run_id, "merged_at": self.merged_at}
        found |= {"stopped": True} if self.stopped else {}
        return {**found, "origin": self.origin.to_json()} if self.origin else found


@dataclass(frozen=True)
class RunRecord:
    """A run: what was asked (its spec), where it was measured (environment, fingerprint), and its state."""

    id: int
    started_at: str
    finished_at: str | None
    status: str  # running | complete | interrupted
    argv: list[str]
    spec: dict[str, Any]
    env: dict[str, Any]
    fingerprint: dict[str, Any]
    origin: Origin | None = None  # where a run copied in by `dlperf merge` came from; None if measured here

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        plain = {k: row.get(k) for k in ("id", "started_at", "finished_at", "status")}
        decoded = {k: json.loads(row.get(f"{k}_json")) for k in ("spec", "env", "fingerprint")}
        origin = Origin.of(json.loads(row.get("origin_json"))) if row.get("origin_json") else None
        return cls(**plain, argv=json.loads(row.get("argv") or "[]"), **decoded, origin=origin)

    @property
    def order(self) -> tuple[datetime, int]:
        """Where the run stands among its store's runs by when it was measured (`measured_order`)."""
        return measured_order(self.started_at, self.id)


_EARLIEST = datetime.min.replace(tzinfo=UTC)


def measured_order(started_at: Any, run_id: int) -> tuple[datetime, int]:
    """Where a run stands among a store's runs by when it was measured: by its start, and of two started in one
    second (a start is kept to the second), the one stored first first. "The latest run" is the last in this order,
    not the highest id: `dlperf merge` gives the runs it copies new ids in the order it copies them, so a run measured
    a day before another may get the higher id. A resumed run keeps its start. One whose start does not read as a
    time (a damaged row) comes first."""
    try:
        when = datetime.fromisoformat(str(started_at))
    except ValueError:
        when = _EARLIEST
    return (when if when.tzinfo else when.replace(tzinfo=UTC)), run_id


def latest(runs: Iterable[RunRecord]) -> RunRecord | None:
    """The run measured last (`measured_order`); None of none."""
    return max(runs, key=lambda run: run.order, default=None)


def in_measured_order(runs: Iterable[RunRecord]) -> list[RunRecord]:
    """The runs in the order they were measured, the latest last (`measured_order`)."""
    return sorted(runs, key=lambda run: run.order)


@dataclass(frozen=True)
class PeakRecord:
    """One figure `dlperf peak` measured: a dtype's matmul peak (FLOP/s) or the memory bandwidth (bytes/s)."""

    id: int
    measured_at: str
    fingerprint: dict[str, Any]  # the machine it was measured on (envinfo.fingerprint)
    framework: str
    framework_version: str | None
    device: str
    threads: int
    kind: str  # matmul | bandwidth | dispatch | memcpy | h2d | d2h (copies: detail {"bytes", "pinned"})
    dtype: str | None  # fp32 | bf16 | fp16 for matmul; None for bandwidth
    value: float | None  # None when unsupported or nothing could be timed
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CommResult:
    """One message size of one `dlperf comm` job, as nccl-tests reports it."""

    id: int
    measured_at: str
    fingerprint: dict[str, Any]
    backend: str  # gloo | nccl
    device: str  # cpu | cuda
    world: int  # processes in the job, every node's
    nnodes: int
    threads: int  # CPU threads per process
    op: str
    bytes: int  # message size per rank
    time_s: float | None  # the slowest rank's median time of one collective
    algbw: float | None  # bytes / time_s, bytes/s
    busbw: float | None  # algbw times what a link carries per message byte, bytes/s
    wrong: int | None  # elements of the checked result that differ from the expected sum
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProfileOutcome:
    """A cell's profiled process (`runner/profile.py`), as `Store.record_profile` takes it: its status and reason and,
    when it was taken, its `protocol.Profiled` event."""

    status: Status
    error: str | None = None
    duration_s: float | None = None  # the profiled process's wall-clock life
    profiled: Profiled | None = None
    started: str | None = None  # "warm" (forked: `runner/warm.py`) or "cold", as a cell's process records it
    cold_because: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The Profiled event's fields as stored (`profiles.profile_json`), and how the process started."""
        fields = {k: v for k, v in asdict(self.profiled).items() if k != "at"} if self.profiled else {}
        how = {"started": self.started, "cold_because": self.cold_because}
        return fields | {k: v for k, v in how.items() if v is not None}


@dataclass(frozen=True)
class ProfileRecord:
    """Where a cell's step time goes: its one profiled process (`dlperf profile`, `run --profile`) and, when it was
    taken, the process's `protocol.Profiled` event as it reported it. A profile that could not be taken has its
    status and reason, and no figures."""

    run_id: int
    cell_key: str
    profiled_at: str
    status: Status
    error: str | None = None
    duration_s: float | None = None  # the profiled process's wall-clock life
    overhead: float | None = None  # the profiled step / the cell's timed median: what profiling cost; None without one
    figures: Profiled | None = None
    started: str | None = None  # "warm" or "cold"; None in a profile stored before it was recorded
    cold_because: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.figures is not None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ProfileRecord:
        profiled = json.loads(row.get("profile_json") or "{}")
        plain = {k: row.get(k) for k in ("run_id", "cell_key", "profiled_at", "error", "duration_s", "overhead")}
        how = {k: profiled.pop(k, None) for k in ("started", "cold_because")}
        figures = Profiled(**_known(Profiled, profiled)) if profiled else None
        return cls(**plain, status=Status(row.get("status")), figures=figures, **how)


@dataclass(frozen=True)
class Prediction:
    """A cell's step predicted on a GPU of dlperf's table (predict/roofline.py), as `Store.record_predictions` takes
    it: beside a GPU cell's measurement for its own GPU, or beside a CPU cell of `dlperf crossover` for the GPU it is
    set against."""

    cell_key: str
    gpu: str
    mode: str
    batch: int
    step_s: float  # device_s + transfer_s
    device_s: float  # the step with its inputs on the device: what a synthetic-data cell measures
    transfer_s: float  # the batch over the host link
    bound: str  # compute | memory | launch
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class PredictionRecord(Prediction):
    """A stored `Prediction`, of one run."""

    run_id: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PredictionRecord:
        plain = ("run_id", "cell_key", "gpu", "mode", "batch", "step_s", "device_s", "transfer_s", "bound")
        return cls(**{k: row.get(k) for k in plain}, detail=json.loads(row.get("detail_json") or "{}"))
