"""The store's typed results: what every view reads. Standard library only.

A cell's figures live in typed columns and, for what later measurements added, one JSON column (`extra_json`); the
records here give both one typed shape, with sub-records for what only some cells have: the compiler's work
(`CompileRecord`), the memory figures (`MemoryRecord`), the "does it still train?" check (`LossCheckRecord`) and a
data-parallel cell's communication (`CommRecord`). They are built from rows as stored, old files included: a key a
record does not know is ignored, one it expects and does not find is None.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from dlperf.protocol import Cell, Profiled, column_name
from dlperf.vocab import Status


def _known(cls: type, d: dict[str, Any] | None) -> dict[str, Any]:
    return {f.name: d[f.name] for f in fields(cls) if d and f.name in d}


@dataclass(frozen=True)
class CompileRecord:
    """A compiled cell's first step, timed apart, and what the compiler did."""

    first_step_s: float | None = None
    compile_s: float | None = None  # the first step beyond a steady step: what compiling (or capturing) cost
    graphs: int | None = None
    graph_breaks: int | None = None
    graph_break_reasons: list[str] = field(default_factory=list)
    frames_compiled: int | None = None
    cache_hits: int | None = None  # compiled code reused from a warm cache; each cell gets its own, empty one
    recompiles: int | None = None  # frames compiled after the first step
    graph_breaks_after_first_step: int | None = None
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

    def to_json(self) -> dict[str, Any]:
        """As stored: the verdict, its reason and seconds, and the measured figures beside them."""
        return {"ok": self.ok, "reason": self.reason, "seconds": self.seconds, **self.figures}


@dataclass(frozen=True)
class CommRecord:
    """Where a multi-process step's time goes, and what each rank holds (frameworks/torch/ddp.py `communication`;
    every strategy's step reports the same figures, and those only it has: a pipeline's bubble)."""

    gradient_bytes: int | None = None  # all-reduced per step
    buckets: int | None = None
    allreduce_s: float | None = None  # the step's buckets all-reduced alone
    algbw_bytes_s: float | None = None
    busbw_bytes_s: float | None = None
    local_step_s: float | None = None  # the step under no_sync: computing without all-reducing
    step_s: float | None = None  # the strategy's step (DDP, FSDP, tp, a pipeline, MirroredStrategy), communicating
    exposed_comm_s: float | None = None  # the step minus the local step: communication compute did not hide
    comm_share: float | None = None  # exposed / step
    bound: str | None = None  # "communication" (half the step or more exposed) or "compute"
    backend: str | None = None
    world: int | None = None
    strategy: str | None = None  # the cell's `--parallel`
    state_bytes_rank: list[int] | None = None  # per rank: parameters, gradients and optimizer state held between steps
    param_bytes_rank: list[int] | None = None  # per rank: the parameters alone (FSDP: its shard)
    peak_bytes_rank: list[int] | None = None  # per rank: the peak during a step (CUDA allocator; else live tensors)
    bubble: float | None = None  # a pipeline: the share of the step the busiest stage idles, measured
    bubble_theory: float | None = None  # (N-1) / (M+N-1)
    stage_s: list[float] | None = None  # a pipeline: each stage's forward and backward of every micro-batch, alone
    split: list[str] | None = None  # a pipeline: the module each stage after the first starts at
    split_by: str | None = None  # a pipeline: "measured" (per-module times) or "flops"

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> CommRecord | None:
        if d and "ddp_step_s" in d and "step_s" not in d:  # stored before the strategies beyond DDP: its name then
            d = {**d, "step_s": d["ddp_step_s"]}
        return cls(**_known(cls, d)) if d else None


@dataclass(frozen=True)
class LoaderRecord:
    """A cell's input pipeline (`--data DIR`), summarized over its processes (`collect.loader_summary`).

    `wait_share` pools every timed step: the seconds waited for data over the seconds of the steps; `verdict` is
    `loaders.input_bound` of it. `alone_samples_per_s` is the median over processes of the loader iterated alone.
    `h2d` is one batch's host->device copy on a GPU (see `protocol.Loader`)."""

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

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> LoaderRecord | None:
        return cls(**_known(cls, d)) if d else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CellRecord:
    """One cell of one run, as stored: its identity, status, timing figures and sub-records.

    The last four fields are not stored: the views attach them from other store data (peaks, raw samples)."""

    run_id: int
    key: str
    position: int
    workload: str
    framework: str
    device: str
    threads: int
    mode: str
    nproc: int  # DDP processes in all; 0 for a plain cell
    scaling: str  # DDP: strong | weak; "" for a plain cell
    batch: int | None
    workload_spec: dict[str, Any]  # the Workload as planned (Workload.to_json)
    status: Status
    error: str | None = None
    loader: str = ""  # the cell's loader setting (`--data DIR`); "" on synthetic data
    parallel: str = ""  # with nproc: the strategy (`dlperf.parallel`); "" for a plain cell
    microbatches: int = 0  # a pipeline's micro-batches per step
    median_s: float | None = None  # the median of the per-process medians
    iqr_s: float | None = None
    mean_s: float | None = None
    stdev_s: float | None = None
    ci_low_s: float | None = None  # 95% confidence interval of the median
    ci_high_s: float | None = None
    n: int | None = None  # timed steps, every process's
    samples_s: float | None = None  # samples per second at the median
    warmup_steps: int | None = None
    params: int | None = None
    flops_per_step: int | None = None
    flops_by_dtype: dict[str, int] | None = None
    memory: MemoryRecord | None = None
    compile: CompileRecord | None = None
    loss_check: LossCheckRecord | None = None
    comm: CommRecord | None = None
    data: LoaderRecord | None = None  # a cell with a loader: its input pipeline's figures
    settings: dict[str, Any] | None = None  # effective thread and kernel settings
    warnings: list[str] = field(default_factory=list)
    steal_fraction: float | None = None
    others_cpu_share: float | None = None  # of the machine's CPUs, used by other processes while timed
    cpu_utilization: float | None = None  # cores the step kept busy
    minor_faults_per_step: float | None = None
    build_s: float | None = None
    warmup_steady: bool = True
    per_process_medians: list[float] = field(default_factory=list)
    dimensions: dict[str, str] = field(default_factory=dict)  # what later measurements add to the cell's identity
    shared_from: dict[str, str] = field(default_factory=dict)  # figure -> the sibling cell that computed it
    framework_version: str | None = None  # the version that measured the cell
    framework_pinned: str | None = None  # the version dlperf pins, when the cell was measured
    environment: str | None = None  # "dlperf" (dlperf's own environment) or the framework's own environment's path
    updated_at: str | None = None
    # attached by the views, never stored
    utilization: float | None = None  # of the peaks `dlperf peak` measured
    processes: int = 0  # measured processes
    q1_s: float | None = None  # quartiles of the pooled steps (error bars)
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

    @property
    def peak_mem_bytes(self) -> int | None:
        return self.memory.peak_bytes if self.memory else None

    @property
    def peak_mem_kind(self) -> str | None:
        return self.memory.kind if self.memory else None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CellRecord:
        """A `cells` row as SQLite returns it (JSON columns still text; an old file lacks the newer columns)."""
        extra = json.loads(row.get("extra_json") or "{}")
        memory = extra.get("memory") or {}
        names = {f.name for f in fields(cls)}
        plain = {k: v for k, v in row.items() if k in names and k not in ("status", "scaling", "nproc", "loader",
                                                                    "parallel", "microbatches")}  # fmt: skip
        nproc = row.get("nproc") or 0
        return cls(
            **plain,
            nproc=nproc,
            scaling=row.get("scaling") or "",
            loader=row.get("loader") or "",
            parallel=row.get("parallel") or ("ddp" if nproc else ""),
            microbatches=row.get("microbatches") or 0,
            status=Status(row["status"]),
            workload_spec=json.loads(row.get("workload_json") or "{}"),
            flops_by_dtype=extra.get("flops_by_dtype"),
            memory=MemoryRecord(row.get("peak_mem_bytes"), row.get("peak_mem_kind"), memory) if (
                memory or row.get("peak_mem_bytes") is not None) else None,
            compile=CompileRecord.of(extra.get("compile")),
            loss_check=LossCheckRecord.of(extra.get("loss_check")),
            comm=CommRecord.of(extra.get("comm")),
            data=LoaderRecord.of(extra.get("loader")),
            warnings=list(extra.get("warnings") or []),
            per_process_medians=list(extra.get("per_process_medians") or []),
            dimensions={k: str(v) for k, v in (extra.get("dimensions") or {}).items()},
            warmup_steady=extra.get("warmup_steady", True) is not False,
            shared_from=dict(extra.get("shared_from") or {}),
            framework_version=(extra.get("framework") or {}).get("version"),
            framework_pinned=(extra.get("framework") or {}).get("pinned"),
            environment=(extra.get("framework") or {}).get("environment"),
            **{k: extra.get(k) for k in ("settings", "steal_fraction", "others_cpu_share", "cpu_utilization",
                                          "minor_faults_per_step", "build_s")},
        )  # fmt: skip


@dataclass(frozen=True)
class MeasurementRecord:
    """One process of one cell: its raw steps and what its worker reported."""

    repeat: int
    status: Status
    error: str | None
    finished_at: str
    duration_s: float | None  # the process's wall-clock life, start-up included
    samples: list[float]  # every timed step, seconds, in order
    detail: dict[str, Any]  # warm-up, settings, memory, ... as the worker reported them

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> MeasurementRecord:
        return cls(
            row["repeat"], Status(row["status"]), row["error"], row["finished_at"], row["duration_s"],
            json.loads(row["samples_json"]), json.loads(row["detail_json"]),
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """What `collect.cell_figures` takes: status, error, samples, detail."""
        return {"status": self.status.value, "error": self.error, "samples": self.samples, "detail": self.detail}


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
    origin: dict[str, Any] | None = None  # where a run copied in by `dlperf merge` came from; None if measured here

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        return cls(
            row["id"], row["started_at"], row["finished_at"], row["status"], json.loads(row["argv"] or "[]"),
            json.loads(row["spec_json"]), json.loads(row["env_json"]), json.loads(row["fingerprint_json"]),
            json.loads(row["origin_json"]) if row.get("origin_json") else None,
        )  # fmt: skip


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

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.figures is not None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ProfileRecord:
        profiled = json.loads(row.get("profile_json") or "{}")
        plain = {k: row.get(k) for k in ("run_id", "cell_key", "profiled_at", "error", "duration_s", "overhead")}
        figures = Profiled(**_known(Profiled, profiled)) if profiled else None
        return cls(**plain, status=Status(row["status"]), figures=figures)


@dataclass(frozen=True)
class PredictionRecord:
    """A cell's step predicted on a GPU of dlperf's table (predict/roofline.py), as stored: beside a GPU cell's
    measurement for its own GPU, or beside a CPU cell of `dlperf crossover` for the GPU it is set against."""

    run_id: int
    cell_key: str
    gpu: str
    mode: str
    batch: int
    step_s: float  # device_s + transfer_s
    device_s: float  # the step with its inputs on the device: what a synthetic-data cell measures
    transfer_s: float  # the batch over the host link
    bound: str  # compute | memory | launch
    detail: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PredictionRecord:
        plain = ("run_id", "cell_key", "gpu", "mode", "batch", "step_s", "device_s", "transfer_s", "bound")
        return cls(**{k: row[k] for k in plain}, detail=json.loads(row.get("detail_json") or "{}"))
