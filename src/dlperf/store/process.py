"""One process's measurement, typed: what `runner/collect.py` makes of a child's events, what `Store.record` writes
into `measurements` and what the store reads back. Standard library only.

The detail (`measurements.detail_json`) keeps the keys it always had, one per field of `ProcessDetail`, so a file
written before reads the same; a key a field does not know is left out, one it lacks is the field's default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dlperf.figures import CommFigures, LoaderFigures
from dlperf.store.records import OPTIONAL, CompileRecord, LossCheckRecord, StoredFigures, comm_of, stored
from dlperf.vocab import Status

# `collect.phases`' untimed extras: what a sibling group's first process runs besides its steps (`sweep.child_task`)
UNTIMED_EXTRAS = ("flops_s", "memory_s", "loss_check_s")


def untimed_extras(phases: dict[str, float | None] | None) -> dict[str, float]:
    """The untimed extras a process ran, by phase, in seconds: none where it ran none or its phases are not stored."""
    return {name: phases[name] for name in UNTIMED_EXTRAS if phases and phases.get(name)}


@dataclass(kw_only=True)
class ProcessDetail(StoredFigures):
    """What one process's worker reported besides its samples (`collect.measurement`)."""

    params: int | None = None
    build_s: float | None = None
    settings: dict[str, Any] | None = None  # effective thread and kernel settings
    flops_per_step: int | None = None
    flops_by_dtype: dict[str, int] | None = None
    # a compiled cell: its first step, and the compiler's work
    compile: CompileRecord | None = field(default=None, metadata=stored(of=CompileRecord.of))
    loss_check: LossCheckRecord | None = field(default=None, metadata=stored(of=LossCheckRecord.of))
    stopped_early: str | None = None  # why the untimed extras were skipped (a `protocol.StopRule` applied)
    memory: dict[str, int | None] = field(default_factory=dict)  # protocol.MEMORY_KINDS' and the backend's others
    warmup_steps: int | None = None
    warmup_steady: bool | None = None
    warmup_times: list[float] | None = None
    python: str | None = None  # the interpreter: dlperf's, or the framework's own
    framework_version: str | None = None
    environment: str | None = None  # "dlperf" or the framework's own environment's directory
    affinity: list[int] | None = None  # the CPUs the process could run on
    thread_env: dict[str, str] | None = None  # inherited variables that change threading or kernels
    comm: CommFigures | None = field(default=None, metadata=stored(of=comm_of))  # multi-process cells
    loader: LoaderFigures | None = field(default=None, metadata=stored(of=LoaderFigures.of))  # cells with a loader
    notes: list[str] = field(default_factory=list)  # optional analyses that failed, and why
    # the user's own source files the process imported, its figures counted: path -> [size, mtime_ns, sha256]
    sources: dict[str, list] | None = field(default=None, metadata=OPTIONAL)  # (`worker/sources.py`, `runner/kept.py`)
    # what the machine did while the cell was timed (`protocol.Sampled`)
    steal_fraction: float | None = None
    others_cpu_share: float | None = None
    others_unread: str | None = field(default=None, metadata=OPTIONAL)  # why the share is None: too short to read
    cpu_utilization: float | None = None
    minor_faults_per_step: float | None = None
    kernel_cpu_share: float | None = field(default=None, metadata=OPTIONAL)
    process_hwm_increase_bytes: int | None = None
    pool_threads: int | None = field(default=None, metadata=OPTIONAL)  # the CPU pool's threads at the steps' end
    # the last timed step's loss; "nan", "inf" or "-inf" when not finite (`protocol.Sampled`)
    loss: float | str | None = field(default=None, metadata=OPTIONAL)
    timeline: list[list] | None = None  # [event, seconds since the child was started], samples left out
    # the wall clock (seconds since the epoch) as the child was started: its timeline's origin, so the timelines of
    # processes that ran at once (`run --compile-at-once`) can be set side by side
    started_at: float | None = field(default=None, metadata=OPTIONAL)
    phases: dict[str, float | None] | None = None  # the process's wall-clock time by phase (`collect.phases`)
    started: str | None = field(default=None, metadata=OPTIONAL)  # "warm" (forked: `runner/warm.py`) or "cold"
    cold_because: str | None = field(default=None, metadata=OPTIONAL)  # why a cell's process started cold
    # a process that did not measure in full
    traceback: str | None = field(default=None, metadata=OPTIONAL)
    stderr_tail: str | None = field(default=None, metadata=OPTIONAL)
    # the process of a multi-process job that stands for it (`collect.ddp_measurement`)
    ranks: list[list[float]] | None = field(default=None, metadata=OPTIONAL)  # every process's steps, by rank
    slowest_rank: int | None = field(default=None, metadata=OPTIONAL)
    hosts: list[str] | None = field(default=None, metadata=OPTIONAL)
    exit_after_result: str | None = field(default=None, metadata=OPTIONAL)  # how the job ended after the results

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> ProcessDetail:
        return cls.from_stored({}, d if isinstance(d, dict) else {})


def storable(text: Any) -> Any:
    """`text` as SQLite can store it: a file name that is not UTF-8 (a class folder copied from a Latin-1 archive)
    reaches a reason as lone surrogates, which stopped the store with a traceback and left the run unfinishable;
    they are written as escapes ("lat\\udce9n"). Anything but a str as it is."""
    if not isinstance(text, str):
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


@dataclass(kw_only=True)
class ProcessMeasurement:
    """One process's outcome: its status and reason, every raw sample, and what its worker reported."""

    status: Status
    error: str | None = None
    samples: list[float] = field(default_factory=list)  # every timed step, seconds, in order
    detail: ProcessDetail = field(default_factory=ProcessDetail)
    duration_s: float | None = None  # the process's wall-clock life, start-up included

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def __post_init__(self) -> None:
        self.error = storable(self.error)

    def to_json(self) -> dict[str, Any]:
        """As `store/spill.py` keeps it."""
        return {"status": self.status.value, "error": self.error, "samples": self.samples,
                "detail": self.detail.to_json(), "duration_s": self.duration_s}  # fmt: skip

    @classmethod
    def of(cls, d: dict[str, Any]) -> ProcessMeasurement:
        return cls(status=Status(d.get("status")), error=d.get("error"), samples=list(d.get("samples") or []),
                   detail=ProcessDetail.of(d.get("detail")), duration_s=d.get("duration_s"))  # fmt: skip


@dataclass(kw_only=True)
class MeasurementRecord(ProcessMeasurement):
    """One process of one cell, as stored."""

    repeat: int
    finished_at: str

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> MeasurementRecord:
        return cls(
            repeat=row.get("repeat"), status=Status(row.get("status")), error=row.get("error"),
            finished_at=row.get("finished_at"), duration_s=row.get("duration_s"),
            samples=json.loads(row.get("samples_json")), detail=ProcessDetail.of(json.loads(row.get("detail_json"))),
        )  # fmt: skip
