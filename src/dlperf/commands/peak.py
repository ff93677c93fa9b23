"""`dlperf peak`: what this machine can really do, measured and stored, so a training step can be read as a share
of it (`report/utilization.py`).

A step's time alone does not say whether it is good: 0.5 s can be 80% of what the hardware does or 5%. This measures,
per device and per thread count, the matrix-multiply throughput of each dtype, the memory bandwidth, the time to
dispatch one tiny operator (a step's floor when it issues many) and copies from 4 KiB up (host memcpy; on a GPU host
to device and back, pageable and pinned: what feeding it data costs), and keeps them in the store with the machine's
fingerprint. One child process per (device, thread count) (`runner/peak.py`).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dlperf.commands.common import add_format, command_with, db_path, picked, real, whole, whole_list
from dlperf.vocab import DeviceKind, ExitCode, Status

if TYPE_CHECKING:
    from dlperf.answers import CopyFigure
    from dlperf.runner.peak import PeakRow
    from dlperf.store.machine import MeasuredPeak

FRAMEWORK = "torch"  # the framework `dlperf peak` measures with
DTYPES = ("fp32", "tf32", "bf16", "fp16")
DEFAULT_DTYPES = ("fp32", "bf16", "fp16")  # and tf32 where a device is a CUDA GPU (`default_dtypes`)
DEFAULT_SIZES = (1024, 2048, 4096)
DEFAULT_BANDWIDTH_MIB = 256  # three arrays of this size: far above any last-level cache, so DRAM is what is timed
COPY_SMALLEST = 4 * 2**10  # the copy sweep's first size: 4 KiB, then 4 times that, ...
DEFAULT_COPIES_MIB = 256  # ... up to this: from caches to DRAM on the host, from latency- to bandwidth-bound on a bus
DEFAULT_MAX_TIME = 1.0  # seconds of warm-up and of sampling per figure, at most
DEFAULT_TIMEOUT = 600.0  # seconds per child process


@dataclass(frozen=True)
class PeakOptions:
    devices: tuple[str, ...]
    threads: tuple[int, ...] | None  # None: 1, 2, 4, ... up to the cores
    dtypes: tuple[str, ...]
    sizes: tuple[int, ...]
    bandwidth_bytes: int
    copy_sizes: tuple[int, ...]  # bytes of each copy; () with --copies-mib 0
    max_time: float
    timeout: float
    format: str


HELP = (
    "measure this machine's matmul peak per dtype, its memory bandwidth, its cost per dispatched operator and its "
    "copy bandwidths (host memcpy; host<->device on a GPU)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from dlperf.defaults import INT64_MAX

    p.add_argument("--devices", default="cpu", help="comma list of cpu, cuda, cuda:N, mps (default: cpu)")
    p.add_argument(
        "--threads",
        type=whole_list("--threads"),
        help="CPU thread counts, e.g. 1,2,8 (default: 1, 2, 4, ... up to the cores)",
    )
    p.add_argument(
        "--dtypes",
        help=f"matmul dtypes of {', '.join(DTYPES)} (tf32: fp32 products on a CUDA GPU's "
        f"TensorFloat-32 tensor cores; default: {','.join(DEFAULT_DTYPES)}, and tf32 on a CUDA device)",
    )
    p.add_argument(
        "--sizes",
        type=whole_list("--sizes"),
        default=",".join(map(str, DEFAULT_SIZES)),
        help=f"square matrix sizes n; the peak is the best (default: {','.join(map(str, DEFAULT_SIZES))})",
    )
    p.add_argument(
        "--bandwidth-mib",
        type=whole("--bandwidth-mib", 1, most=INT64_MAX >> 20),
        default=DEFAULT_BANDWIDTH_MIB,
        help=f"size of each of the three bandwidth arrays, well above the last-level cache "
        f"(default: {DEFAULT_BANDWIDTH_MIB})",
    )
    p.add_argument(
        "--copies-mib",
        type=whole("--copies-mib", 0, most=INT64_MAX >> 20),
        default=DEFAULT_COPIES_MIB,
        help="the largest copy of the copy sweep, from 4 KiB in steps of 4; 0: no copies "
        f"(default: {DEFAULT_COPIES_MIB})",
    )
    p.add_argument(
        "--max-time",
        type=real("--max-time"),
        default=DEFAULT_MAX_TIME,
        help="seconds of warm-up and of sampling per figure at most; a size whose single product would take over "
        f"4 times that is skipped (default: {DEFAULT_MAX_TIME:g})",
    )
    p.add_argument(
        "--timeout",
        type=real("--timeout"),
        default=DEFAULT_TIMEOUT,
        help=f"seconds per process (default: {DEFAULT_TIMEOUT:g})",
    )
    add_format(p, "text", "json")


def parse_dtypes(text: str) -> tuple[str, ...]:
    return picked(text, "--dtypes", DTYPES, "dtype")


def default_dtypes(devices: tuple[str, ...]) -> tuple[str, ...]:
    """DEFAULT_DTYPES, with tf32 where any device is a CUDA GPU (a `tf32` cell's utilization is held against it)."""
    return DEFAULT_DTYPES + (("tf32",) if any(d.split(":")[0] == DeviceKind.CUDA for d in devices) else ())


def options(args) -> PeakOptions:
    """Every flag checked before anything runs; bad input is a UsageError naming the flag."""
    from dlperf.runner.peak import copy_sizes
    from dlperf.spec import parse_devices

    fits(args)
    devices = parse_devices(args.devices)
    return PeakOptions(
        devices=devices,
        threads=args.threads,
        dtypes=default_dtypes(devices) if args.dtypes is None else parse_dtypes(args.dtypes),
        sizes=tuple(sorted(args.sizes)),
        bandwidth_bytes=args.bandwidth_mib * 2**20,
        copy_sizes=tuple(copy_sizes(COPY_SMALLEST, args.copies_mib * 2**20)) if args.copies_mib else (),
        max_time=args.max_time,
        timeout=args.timeout,
        format=args.format,
    )


def fits(args) -> None:
    """What this machine could never run, refused before anything runs: more threads than `system.MAX_THREADS_PER_CORE`
    per usable core; matrices (three of the largest size, fp32: on the CPU), bandwidth arrays (three, on the CPU) or a
    copy's two buffers (on the host, whatever the device) beyond the machine's memory."""
    from dlperf.errors import UsageError
    from dlperf.measure import system

    cores, memory = system.usable_cores()["cores"], system.memory_total_bytes()
    if why := system.too_many_threads(args.threads, cores):
        raise UsageError(why)
    n = max(args.sizes)
    wanted = [(f"--copies-mib {args.copies_mib}: a copy's two buffers take", 2 * args.copies_mib * 2**20)]
    if "cpu" in args.devices.lower():
        mib = args.bandwidth_mib
        wanted += [(f"--sizes {n}: three {n}x{n} fp32 matrices take", 3 * 4 * n * n),
                   (f"--bandwidth-mib {mib}: three arrays take", 3 * mib * 2**20)]  # fmt: skip
    for what, size in wanted:
        if memory and size > memory:
            raise UsageError(f"{what} {size / 1e9:.2g} GB, more than this machine's {memory / 1e9:.3g} GB of memory")


def run(args) -> int:
    """Measure, store each (device, threads) as soon as it is in, print. Exit 1 if a child failed or timed out."""
    from dlperf import envinfo
    from dlperf.plan.devices import framework_info, resolve_devices, thread_counts
    from dlperf.runner import lifeline
    from dlperf.runner.peak import measure, peak_records
    from dlperf.runner.sweep import sigterm_as_interrupt
    from dlperf.store import Store

    opts = options(args)
    info = framework_info([FRAMEWORK])
    env = envinfo.capture(info)
    devices = resolve_devices(opts.devices, info)
    warnings: list[str] = []
    threads = thread_counts(opts.threads, env["cores"]["cores"], warnings)
    for warning in warnings:
        print(f"dlperf: warning: {warning}", file=sys.stderr, flush=True)
    db = db_path(args)
    store = Store.open(db, create=True)
    stored: list[tuple[int, MeasuredPeak]] = []  # (id, record) of every peak stored
    measured: list[PeakRow] = []  # the rows they came from

    def on_progress(done: int, total: int, device: str, n: int, row: PeakRow | None) -> None:
        _report_progress(done, total, device, n, row)
        if row is not None and row.status == Status.OK and (why := busy_while(row)):
            print(f"dlperf: warning: {busy_warning(_where(device, n), why)}", file=sys.stderr, flush=True)
        if row is not None and row.status == Status.OK:
            with lifeline.held():  # Ctrl-C meanwhile comes once they are stored: raised inside, it rolled them back
                records = peak_records(row)
                ids = store.record_peaks(envinfo.fingerprint(env), env, records)
                stored.extend(zip(ids, records, strict=True))
                measured.append(row)

    try:
        with sigterm_as_interrupt():
            rows = measure(
                FRAMEWORK,
                devices,
                threads,
                list(opts.dtypes),
                list(opts.sizes),
                opts.bandwidth_bytes,
                opts.max_time,
                opts.timeout,
                on_progress,
                list(opts.copy_sizes),
            )
    except KeyboardInterrupt:
        return _interrupted(measured, db, devices, threads)
    finally:
        store.close()
    failed = [r for r in rows if r.status != Status.OK]
    if opts.format == "json":
        peaks = [{"id": i, **record.to_json()} for i, record in stored]
        print(json.dumps({"db": db, "peaks": peaks, "failed": [r.failure() for r in failed]}, indent=2))
    else:
        _print_text(measured, failed, len(stored), opts, db, gpus=bool(env.get("gpus")))
    return ExitCode.CELLS_FAILED if failed else ExitCode.OK


def _interrupted(measured: list[PeakRow], db: str, devices: list[str], threads: list[int]) -> int:
    """Ctrl-C: the processes whose peaks were stored, or that none was (a bare 'interrupted' said nothing), and the
    command that measures the rest (`rest_command`)."""
    from dlperf.commands.run import again, say_interrupted

    if not measured:
        say_interrupted("nothing is stored: no peak was measured yet", f"To measure, run it again: {again()}")
        return ExitCode.INTERRUPTED
    kept = ", ".join(_where(r.device, r.threads) for r in measured)
    rest = rest_command({_where(r.device, r.threads) for r in measured}, devices, threads)
    say_interrupted(f"the peaks of {kept} are stored in {db}",
                    f"To measure the rest: {rest}" if rest else "Every device was measured")  # fmt: skip
    return ExitCode.INTERRUPTED


def rest_command(done: set[str], devices: list[str], threads: list[int]) -> str | None:
    """This command line measuring only what is not `done` (`_where`'s names): the CPU at the thread counts left, the
    GPUs left; None where nothing is."""
    cpu = any(d.split(":")[0] == "cpu" for d in devices)
    counts = [n for n in threads if cpu and f"cpu:{n}" not in done]
    left = [d for d in devices if (counts if d.split(":")[0] == "cpu" else d not in done)]
    if not left:
        return None
    return command_with({"--devices": ",".join(left), "--threads": ",".join(map(str, counts)) if counts else None})


def _where(device: str, threads: int) -> str:
    return f"cpu:{threads}" if device.split(":")[0] == "cpu" else device


def _report_progress(done: int, total: int, device: str, threads: int, row: PeakRow | None) -> None:
    if row is None:
        line = f"[{done + 1}/{total}] peaks of {_where(device, threads)} ..."
    else:
        outcome = "done" if row.status == Status.OK else f"{row.status}: {row.error}"
        line = f"[{done}/{total}] peaks of {_where(device, threads)}: {outcome} ({row.duration_s:.0f} s)"
    print(line, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------------------------------
# Text output: from the measured rows' answers (what was stored, figure by figure)


def _print_text(measured: list[PeakRow], failed: list[PeakRow], stored: int, opts: PeakOptions, db: str, gpus: bool):
    from dlperf.commands.common import console as wide
    from dlperf.measure.units import plural

    console = wide()
    if measured:
        console.print(matmul_table(measured))
        console.print(bandwidth_table(measured, opts.bandwidth_bytes))
        console.print(dispatch_table(measured))
        if any(r.answer.copies for r in measured):
            console.print(copy_table(measured))
    for note in [*notes(measured, failed), *copy_notes(measured, opts, gpus)]:
        console.print(f"  note: {note}", highlight=False, markup=False)
    console.print(f"{plural(stored, 'peak')} stored in {db} (`dlperf list --peaks` shows them again)", highlight=False,
                  markup=False)  # fmt: skip


def matmul_table(measured: list[PeakRow]):
    from rich.table import Table

    versions = ", ".join(dict.fromkeys(f"{r.framework} {r.answer.framework_version}" for r in measured))
    table = Table(title=f"Matrix-multiply peaks ({versions})")
    for name in ("device", "threads", "dtype", "TFLOP/s", "best n"):
        table.add_column(name, justify="left" if name in ("device", "dtype") else "right")
    for r in measured:
        for dtype, m in r.answer.matmul.items():
            peak = m.peak_flops_per_s
            figure = _tflops(peak) if peak else ("unsupported" if m.unsupported is not None else "skipped")
            table.add_row(r.device, str(r.threads), dtype, figure, str(m.best_n or "-"))
    return table


def bandwidth_table(measured: list[PeakRow], array_bytes: int):
    from rich.table import Table

    table = Table(title=f"Memory bandwidth (STREAM, fp32 arrays of {array_bytes / 2**20:g} MiB)")
    for name in ("device", "threads", "copy GB/s", "triad GB/s", "peak GB/s"):
        table.add_column(name, justify="left" if name == "device" else "right")
    for r in measured:
        bandwidth = r.answer.bandwidth
        kernels = (bandwidth.kernels.copy, bandwidth.kernels.triad)
        table.add_row(
            r.device, str(r.threads), *(_gbps(k.bytes_per_s) for k in kernels), _gbps(bandwidth.peak_bytes_per_s)
        )
    return table


def dispatch_table(measured: list[PeakRow]):
    from rich.table import Table

    from dlperf.report.format import figure

    title = "Dispatch: one tiny operator (a chain of in-place adds on one element)"
    table = Table(title=title, min_width=len(title))  # three narrow columns folded the title into three lines
    for name in ("device", "threads", "µs per op"):
        table.add_column(name, justify="left" if name == "device" else "right")
    for r in measured:
        if r.answer.dispatch is not None:
            table.add_row(r.device, str(r.threads), figure(1e6 * r.answer.dispatch.timed.median_s))
    return table


def copy_table(measured: list[PeakRow]):
    """Size -> GB/s of each kind of copy measured, one row per (device, threads, size)."""
    from rich.table import Table

    from dlperf.report.format import nbytes

    copies = [(r, c) for r in measured for c in r.answer.copies]
    columns = list(dict.fromkeys(_copy_column(c) for _, c in copies))
    rows: dict[tuple, dict[str, float]] = {}
    for r, c in copies:
        rows.setdefault((r.device, r.threads, c.bytes), {})[_copy_column(c)] = c.bytes_per_s
    table = Table(
        title="Copies (GB/s)", caption="bytes copied per second: memcpy reads and writes each, STREAM counts 2"
    )
    for name in ("device", "threads", "size", *columns):
        table.add_column(name, justify="left" if name == "device" else "right")
    for (device, threads, size), by in rows.items():
        table.add_row(device, str(threads), nbytes(size), *(_gbps(by[c]) if c in by else "-" for c in columns))
    return table


def _copy_column(copy: CopyFigure) -> str:
    if copy.kind == "memcpy":
        return "memcpy"
    return f"{copy.kind} {'pinned' if copy.pinned else 'pageable'}"


def copy_notes(measured: list[PeakRow], opts: PeakOptions, gpus: bool) -> list[str]:
    """Host<->device copies are measured on a GPU only; say so rather than leave the columns silently out."""
    if not opts.copy_sizes or any(c.kind in ("h2d", "d2h") for r in measured for c in r.answer.copies):
        return []
    if not gpus:
        return ["no GPU: host<->device copies not measured"]
    if not any(d.split(":")[0] == "cuda" for d in opts.devices):
        return ["host<->device copies are measured with --devices cuda"]
    return []


def _tflops(value: float) -> str:
    from dlperf.report.format import figure

    return figure(value / 1e12)


def _gbps(value: float) -> str:
    """GB/s to one decimal, and below 1 GB/s to two significant figures: a small copy at 2 busy threads read 0.0."""
    from dlperf.measure.units import significant

    return f"{value / 1e9:.1f}" if value >= 1e9 or value <= 0 else significant(value / 1e9, 2)


def notes(measured: list[PeakRow], failed: list[PeakRow]) -> list[str]:
    """What the tables cannot show: failures, unsupported dtypes, skipped sizes, a busy machine."""
    out = [f"{_where(f.device, f.threads)}: {f.status}: {f.error}" for f in failed]
    busy: dict[str, str] = {}
    for r in measured:
        where = _where(r.device, r.threads)
        for dtype, m in r.answer.matmul.items():
            if m.unsupported is not None:
                out.append(f"{where} {dtype}: unsupported: {m.unsupported}")
            skipped = [s for s in m.sizes if s.skipped is not None]
            if skipped:
                out.append(f"{where} {dtype}: n = {', '.join(str(s.n) for s in skipped)} skipped: {skipped[0].skipped}")
        if why := busy_while(r):
            busy[where] = why
    return out + [busy_warning(where, why) for where, why in busy.items()]


def busy_while(row: PeakRow) -> str | None:
    """What disturbed a measured row (other processes' load, steal), as its stored records will say."""
    from dlperf.report.utilization import disturbance

    answer = row.answer
    return disturbance({"others_cpu_share": answer.others_cpu_share, "steal_fraction": answer.steal_fraction})


def busy_warning(where: str, why: str) -> str:
    return (f"{where}: measured on a busy machine ({why}): its peaks are low; stored as disturbed, the views use an "
            "undisturbed peak of this machine where one exists")  # fmt: skip
