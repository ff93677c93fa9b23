"""The figures a store holds of machines rather than of runs, as `dlperf list --peaks` and `dlperf list --comm` show
them: what `dlperf peak` and `dlperf comm` measured, each with the machine that measured it and when.

`dlperf peak` and `dlperf comm` print their figures once, as they measure them; the store keeps them (the views hold a
run's steps against the peaks), and these lists read them back without measuring again. The text lists the latest
figure of each kind per machine and framework version (a later `dlperf peak` supersedes an earlier one, as the views
take the latest copy figures and the best quiet peak); `--format json` lists every stored row."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from dlperf.measure.units import rounded, significant
from dlperf.report.fleet import machine_label
from dlperf.report.format import nbytes
from dlperf.report.utilization import busy_load
from dlperf.store.machine import COPY_KINDS
from dlperf.store.records import CommResult, PeakRecord

KINDS = ("matmul", "bandwidth", "dispatch", *COPY_KINDS)  # the order a machine's figures are listed in
DTYPES = ("fp32", "tf32", "bf16", "fp16")  # the matmul dtypes, in `dlperf peak`'s order


@dataclass(frozen=True)
class PeakLine:
    """One stored peak in words: what was measured, its value in its unit, and what to know about it."""

    id: int
    machine: str  # "host · CPU, 2 cores"
    framework: str  # "torch 2.13.0": whose kernels reached the figure
    measured_at: str
    device: str
    threads: int
    figure: str  # "matmul bf16", "memory bandwidth", "dispatch", "h2d pinned 64 MiB"
    value: str  # "0.206" ("-" when not measured)
    unit: str  # "TFLOP/s", "GB/s", "µs per op"
    note: str  # why there is no value, or what disturbed it; "" when neither


def peak_line(row: PeakRecord) -> PeakLine:
    detail = row.detail
    what, unit, scale = {
        "matmul": (f"matmul {row.dtype}", "TFLOP/s", 1e-12),
        "bandwidth": ("memory bandwidth", "GB/s", 1e-9),
        "dispatch": ("dispatch, one tiny operator", "µs per op", 1e6),
    }.get(row.kind, (_copy(row), "GB/s", 1e-9))
    missing = row.value is None
    note = (detail.get("unsupported") or _skipped(detail) or "not measured") if missing else _busy(detail)
    value = "-" if row.value is None else value_text(row.value * scale)
    return PeakLine(
        id=row.id, machine=machine_label(row.fingerprint, cores=True),
        framework=f"{row.framework} {row.framework_version or '?'}", measured_at=row.measured_at,
        device=row.device, threads=row.threads, figure=what, value=value, unit=unit, note=note,
    )  # fmt: skip


def _busy(detail: dict) -> str:
    """ "busy: others 11%, steal 3%" where the machine was busy as `report/utilization.disturbance` judges it (such
    a peak reads low); "" on a quiet one."""
    others, steal = busy_load(detail)
    found = [f"others {100 * others:.0f}%"] if others is not None else []
    found += [f"steal {100 * steal:.0f}%"] if steal is not None else []
    return f"busy: {', '.join(found)}" if found else ""


def peak_json(row: PeakRecord) -> dict:
    """A stored peak for `--format json`: its columns (value in FLOP/s, bytes/s or seconds per operator), the machine
    and the words of the text list."""
    line = peak_line(row)
    return {
        "id": row.id, "measured_at": row.measured_at, "machine": line.machine, "framework": row.framework,
        "framework_version": row.framework_version, "device": row.device, "threads": row.threads, "kind": row.kind,
        "dtype": row.dtype, "bytes": row.detail.get("bytes"), "pinned": row.detail.get("pinned"), "value": row.value,
        "figure": line.figure, "note": line.note,
    }  # fmt: skip


def _copy(row: PeakRecord) -> str:
    return " ".join([row.kind, *(["pinned"] if row.detail.get("pinned") else []), nbytes(row.detail.get("bytes"))])


def _skipped(detail: dict) -> str | None:
    """A matmul whose every size was skipped: the first size's reason."""
    reasons = [s["skipped"] for s in detail.get("sizes") or [] if isinstance(s, dict) and s.get("skipped")]
    return f"every size skipped: {reasons[0]}" if reasons else None


def value_text(value: float) -> str:
    """Three significant figures below 1000, trailing zeros kept (0.0206 TFLOP/s, 9.60 GB/s); whole numbers above
    (4,204 GB/s; 999.96 too, which three figures round up to 1000)."""
    return f"{value:,.0f}" if rounded(value, 3) >= 1000 else significant(value, 3)


def latest_peaks(rows: list[PeakRecord]) -> tuple[list[PeakRecord], int]:
    """Of rows newest first, the latest of each figure per machine and framework version, in the listing's order
    (machine, device, threads, kind, dtype, pinned, size), and how many earlier ones they supersede. A figure not
    measured (skipped, unsupported) supersedes none that was: the views use the measured one (`utilization._best`),
    and a later `dlperf peak` that skipped the fp16 matmul listed it as '-' over the figure measured before."""
    latest: dict[tuple, PeakRecord] = {}
    for row in rows:
        detail = row.detail
        what = (row.kind, row.dtype or "", bool(detail.get("pinned")), detail.get("bytes") or 0)
        key = (machine_label(row.fingerprint, cores=True), row.framework, row.framework_version or "", row.device,
               row.threads, what)  # fmt: skip
        if key not in latest or (latest[key].value is None and row.value is not None):
            latest[key] = row

    def order(key: tuple) -> tuple:
        kind, dtype, pinned, size = key[-1]
        ranks = [KINDS.index(kind) if kind in KINDS else len(KINDS), DTYPES.index(dtype) if dtype in DTYPES else 9]
        return (*key[:-1], *ranks, kind, dtype, pinned, size)

    return [latest[k] for k in sorted(latest, key=order)], len(rows) - len(latest)


@dataclass(frozen=True)
class CommJob:
    """One `dlperf comm` job's sizes in a line: where it ran, how it was set up, and its bus bandwidth."""

    machine: str
    measured_at: str
    backend: str
    device: str
    world: int
    nnodes: int
    threads: int
    sizes: int
    smallest: int  # bytes per rank
    largest: int
    time_largest_s: float | None  # one all-reduce of the largest size
    busbw_largest: float | None  # bytes/s
    busbw_mean: float | None  # over the sizes, as `dlperf comm` averages them
    wrong: int  # elements summed wrong, all sizes
    per_size: list[dict]  # each size's stored id, bytes, time_s, algbw, busbw (bytes/s) and wrong, smallest first

    def to_json(self) -> dict:
        return asdict(self)


SIZE_FIELDS = ("id", "bytes", "time_s", "algbw", "busbw", "wrong")  # a size's figures in a job's JSON


def comm_jobs(rows: list[CommResult]) -> list[CommJob]:
    """Stored sizes, newest first, as the jobs that measured them (one job's sizes are stored together, with one
    time and machine), newest first."""
    jobs: dict[tuple, list[CommResult]] = {}
    for row in rows:
        key = (row.measured_at, machine_label(row.fingerprint, cores=True), row.backend, row.device, row.world,
               row.nnodes, row.threads)  # fmt: skip
        jobs.setdefault(key, []).append(row)
    return [_job(key, sorted(sizes, key=lambda s: s.bytes)) for key, sizes in jobs.items()]


def _job(key: tuple, sizes: list[CommResult]) -> CommJob:
    measured_at, machine, backend, device, world, nnodes, threads = key
    busbw = [s.busbw for s in sizes if s.busbw is not None]
    return CommJob(
        machine=machine, measured_at=measured_at, backend=backend, device=device, world=world, nnodes=nnodes,
        threads=threads, sizes=len(sizes), smallest=sizes[0].bytes, largest=sizes[-1].bytes,
        time_largest_s=sizes[-1].time_s, busbw_largest=sizes[-1].busbw,
        busbw_mean=sum(busbw) / len(busbw) if busbw else None, wrong=sum(s.wrong or 0 for s in sizes),
        per_size=[{key: getattr(s, key) for key in SIZE_FIELDS} for s in sizes],
    )  # fmt: skip
