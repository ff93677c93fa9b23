"""`dlperf peak`: what this machine can really do, measured and stored, and how close a training step gets to it.

A step's time alone does not say whether it is good: 0.5 s can be 80% of what the hardware does or 5%. `dlperf peak`
measures, per device and per thread count, the matrix-multiply throughput of each dtype and the memory bandwidth,
and keeps them in the store with the machine's fingerprint. A cell's utilization is then

    utilization = (sum over dtypes d of FLOPs_d / peak_d) / median step time

the share of the step the model's arithmetic would take if every FLOP ran at the measured matmul peak of its dtype,
for the same device and thread count (a 1-thread cell is held against the 1-thread peak). Measured, not taken from a
datasheet: on one CPU bf16 is several times faster than fp32, on another fp16 runs at a few GFLOP/s.

Parent side: this module never imports a framework. One child process per (device, thread count) runs
`dlperf.runner.peak_worker`, with the thread variables fixed before the framework loads, as a sweep's cells are.
Module-level imports stay light (the standard library, errors, vocab): every `dlperf` command builds this parser.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.errors import UsageError
from dlperf.vocab import DeviceKind, ExitCode, Status

if TYPE_CHECKING:
    from dlperf.runner.launch import ChildResult
    from dlperf.store import Store

FRAMEWORK = "torch"  # the framework `dlperf peak` measures with
DTYPES = ("fp32", "bf16", "fp16")
DEFAULT_SIZES = (1024, 2048, 4096)
DEFAULT_BANDWIDTH_MIB = 256  # three arrays of this size: far above any last-level cache, so DRAM is what is timed
DEFAULT_MAX_TIME = 1.0  # seconds of warm-up and of sampling per figure, at most
DEFAULT_TIMEOUT = 600.0  # seconds per child process
OTHERS_BUSY_SHARE = 0.10  # of the machine's CPU capacity: above it, the peaks were measured on a busy machine
MACHINE_KEYS = ("cpu_model", "cores", "memory_gib", "hostname", "gpus")  # the machine part of envinfo.fingerprint

Progress = Callable[[int, int, str, int, dict | None], None]


# ----------------------------------------------------------------------------------------------------------------------
# Measuring: one child per (device, thread count)


def worker_command(python: str, task_file: str, result_file: str) -> list[str]:
    return [python, "-m", "dlperf.runner.peak_worker", task_file, result_file]


def jobs(devices: list[str], threads_list: list[int]) -> list[tuple[str, int]]:
    """(device, threads) to measure: the CPU at every thread count; an accelerator once, with the most host threads
    (they do not change what the accelerator can do; `peak_lookup` ignores them there)."""
    out = []
    for device in devices:
        counts = threads_list if _is_cpu(device) else [max(threads_list)]
        out += [(device, n) for n in counts]
    return out


def _is_cpu(device: str) -> bool:
    return device.split(":")[0] == DeviceKind.CPU


def measure(
    framework: str,
    devices: list[str],
    threads_list: list[int],
    dtypes: list[str],
    sizes: list[int],
    bandwidth_bytes: int,
    max_time: float,
    timeout: float,
    progress: Progress | None = None,
) -> list[dict]:
    """One row per (device, threads): {"framework", "device", "threads", "status", "error", "duration_s", "result"}.

    A child that fails or times out gives a row with that status and the reason, never an exception; an interrupt
    (Ctrl-C) stops the running child's process tree and propagates. `progress(done, total, device, threads, row)` is
    called before each child (row None) and after it (with its row)."""
    request = {"dtypes": dtypes, "sizes": sizes, "bandwidth_bytes": bandwidth_bytes, "max_time": max_time}
    todo = jobs(devices, threads_list)
    rows = []
    for i, (device, threads) in enumerate(todo):
        if progress:
            progress(i, len(todo), device, threads, None)
        rows.append(measure_one(framework, device, threads, request, timeout))
        if progress:
            progress(i + 1, len(todo), device, threads, rows[-1])
    return rows


def measure_one(framework: str, device: str, threads: int, request: dict, timeout: float) -> dict:
    """One child, in a temporary directory of its own that holds its task, its result and its logs."""
    from dlperf.errors import MissingDependency
    from dlperf.runner.launch import child_env, run_child
    from dlperf.runner.sweep import interpreter_for

    try:
        python = interpreter_for(framework)
    except MissingDependency as exc:  # no child to start: the row says why
        row = {"framework": framework, "device": device, "threads": threads, "duration_s": 0.0}
        return {**row, "status": Status.FAILED.value, "error": str(exc), "result": None}
    task = {"framework": framework, "device": device, "threads": threads, **request}
    with tempfile.TemporaryDirectory(prefix="dlperf-peak-") as tmp:
        tmpdir = Path(tmp)
        (tmpdir / "task.json").write_text(json.dumps(task))
        cmd = worker_command(python, str(tmpdir / "task.json"), str(tmpdir / "result.json"))
        child = run_child(cmd, child_env(os.environ, threads, python), timeout, tmpdir)
        answer = _read_answer(tmpdir / "result.json")
    return row_of(framework, device, threads, child, answer, timeout)


def _read_answer(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def row_of(framework: str, device: str, threads: int, child: ChildResult, answer: dict | None, timeout: float) -> dict:
    """The row of one child: its result, or why there is none."""
    row = {"framework": framework, "device": device, "threads": threads, "duration_s": child.duration_s}
    if answer is not None and answer.get("status") == Status.OK and not child.timed_out:
        return {**row, "status": Status.OK.value, "error": None, "result": answer["result"]}
    if child.timed_out:
        status, error = Status.TIMEOUT, f"exceeded --timeout {timeout:g} s"
    elif answer is not None and answer.get("error"):
        status, error = Status.FAILED, answer["error"]
    else:
        last = (child.stderr_tail.strip().splitlines() or [""])[-1]
        why = child.crashed_reason or "worker ended without a result"
        status, error = Status.FAILED, f"{why}{': ' + last if last else ''}"
    return {**row, "status": status.value, "error": error, "result": None}


def peak_records(row: dict) -> list[dict[str, Any]]:
    """A measured row as store records: one per dtype (kind matmul, FLOP/s) and one for bandwidth (bytes/s).

    A dtype the device cannot do, or whose every size was too slow to time, is kept with value None and the reason."""
    result = row["result"]
    common = {
        "framework": row["framework"],
        "framework_version": result.get("framework_version"),
        "device": row["device"],
        "threads": row["threads"],
    }
    context = {k: result.get(k) for k in ("settings", "others_cpu_share", "duration_s")}
    records = [
        {**common, "kind": "matmul", "dtype": dtype, "value": entry.get("peak_flops_per_s"), "detail": entry}
        for dtype, entry in result["matmul"].items()
    ]
    bandwidth = result["bandwidth"]
    records.append(
        {**common, "kind": "bandwidth", "dtype": None, "value": bandwidth["peak_bytes_per_s"], "detail": bandwidth}
    )
    for record in records:
        record["detail"] = {**record["detail"], **context}
    return records


# ----------------------------------------------------------------------------------------------------------------------
# Using the peaks


def utilization(flops_by_dtype: dict[str, int] | None, median_s: float | None, peaks: dict) -> float | None:
    """The share of the step the model's arithmetic would take at the measured peaks.

    sum over dtypes of flops_d / peaks[d] (seconds at peak), divided by `median_s`. Under autocast a step's FLOPs are
    split by dtype ({"bf16": 8e9, "fp32": 1e8}), each held against its own peak. None when the FLOPs, the time or a
    needed peak is missing: a guess would look like a measurement."""
    if not flops_by_dtype or median_s is None or median_s <= 0:
        return None
    ideal_s = 0.0
    for dtype, flops in flops_by_dtype.items():
        if flops is None:
            return None
        if flops == 0:
            continue  # no work in this dtype: its peak is not needed
        peak = peaks.get(dtype)
        if not peak or peak <= 0:
            return None
        ideal_s += flops / peak
    return ideal_s / median_s


def same_machine(stored: dict, fingerprint: dict, framework: str, version: str | None) -> bool:
    """Whether a peak measured with fingerprint `stored` applies to a run with `fingerprint`: the same machine and,
    when the peak recorded one, the same framework version (its kernels are what reaches the peak)."""
    if any(stored.get(k) != fingerprint.get(k) for k in MACHINE_KEYS):
        return False
    return version is None or (fingerprint.get("frameworks") or {}).get(framework) == version


def peak_lookup(store: Store, fingerprint: dict, device: str, threads: int) -> dict[str, float]:
    """dtype -> FLOP/s: the latest measured matmul peak of each dtype for this machine, device and thread count.

    Thread counts must match on the CPU only; an accelerator's peak does not depend on the host threads. {} if none."""
    rows = store.peaks(device=device, threads=threads if _is_cpu(device) else None, kind="matmul", measured=True)
    found: dict[str, float] = {}
    for row in rows:  # newest first
        if row["dtype"] not in found and same_machine(
            row["fingerprint"], fingerprint, row["framework"], row["framework_version"]
        ):
            found[row["dtype"]] = row["value"]
    return found


def attach_utilization(store: Store, fingerprint: dict, cells: list[dict]) -> bool:
    """Set `cell["utilization"]` on every cell, against the peaks measured on the run's machine; whether any peak
    was found (the views then say how to measure them when none was)."""
    found = False
    cache: dict[tuple[str, int], dict[str, float]] = {}
    for cell in cells:
        where = (cell["device"], cell["threads"])
        if where not in cache:
            cache[where] = peak_lookup(store, fingerprint, *where)
        found |= bool(cache[where])
        flops = (cell.get("extra") or {}).get("flops_by_dtype")
        ok = cell["status"] == Status.OK
        cell["utilization"] = utilization(flops, cell.get("median_s"), cache[where]) if ok else None
    return found


# ----------------------------------------------------------------------------------------------------------------------
# The command line


@dataclass(frozen=True)
class PeakOptions:
    devices: tuple[str, ...]
    threads: tuple[int, ...] | None  # None: 1, 2, 4, ... up to the cores
    dtypes: tuple[str, ...]
    sizes: tuple[int, ...]
    bandwidth_bytes: int
    max_time: float
    timeout: float
    format: str


def add_parser(subparsers, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "peak", parents=[common], help="measure this machine's matmul peak per dtype and its memory bandwidth"
    )
    p.add_argument("--devices", default="cpu", help="comma list of cpu, cuda, cuda:N, mps (default: cpu)")
    p.add_argument("--threads", help="CPU thread counts, e.g. 1,2,8 (default: 1, 2, 4, ... up to the cores)")
    p.add_argument("--dtypes", default=",".join(DTYPES), help=f"matmul dtypes (default: {','.join(DTYPES)})")
    p.add_argument(
        "--sizes",
        default=",".join(map(str, DEFAULT_SIZES)),
        help=f"square matrix sizes n; the peak is the best (default: {','.join(map(str, DEFAULT_SIZES))})",
    )
    p.add_argument(
        "--bandwidth-mib",
        type=int,
        default=DEFAULT_BANDWIDTH_MIB,
        help=f"size of each of the three bandwidth arrays, well above the last-level cache "
        f"(default: {DEFAULT_BANDWIDTH_MIB})",
    )
    p.add_argument(
        "--max-time",
        type=float,
        default=DEFAULT_MAX_TIME,
        help="seconds of warm-up and of sampling per figure at most; a size whose single product would take over "
        f"4 times that is skipped (default: {DEFAULT_MAX_TIME:g})",
    )
    p.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help=f"seconds per process (default: {DEFAULT_TIMEOUT:g})"
    )
    p.add_argument("--format", default="text", help="text or json")
    return p


def parse_dtypes(text: str) -> tuple[str, ...]:
    from dlperf.spec import split_list, suggest

    names = tuple(dict.fromkeys(item.lower() for item in split_list(text, "--dtypes")))
    for name in names:
        if name not in DTYPES:
            raise UsageError(f"--dtypes: unknown dtype {name!r}{suggest(name, DTYPES)} (known: {', '.join(DTYPES)})")
    return names


def parse_sizes(text: str) -> tuple[int, ...]:
    from dlperf.spec import positive_ints

    return tuple(sorted(set(positive_ints(text, "--sizes"))))


def options(args) -> PeakOptions:
    """Every flag checked before anything runs; bad input is a UsageError naming the flag."""
    from dlperf.spec import parse_devices, parse_threads

    if args.format not in ("text", "json"):
        raise UsageError(f"--format {args.format!r}: expected text or json")
    positive = {"--bandwidth-mib": args.bandwidth_mib, "--max-time": args.max_time, "--timeout": args.timeout}
    for flag, value in positive.items():
        if value <= 0:
            raise UsageError(f"{flag} must be positive")
    return PeakOptions(
        devices=parse_devices(args.devices),
        threads=None if args.threads is None else parse_threads(args.threads),
        dtypes=parse_dtypes(args.dtypes),
        sizes=parse_sizes(args.sizes),
        bandwidth_bytes=args.bandwidth_mib * 2**20,
        max_time=args.max_time,
        timeout=args.timeout,
        format=args.format,
    )


def cmd_peak(args) -> int:
    """Measure, store each (device, threads) as soon as it is in, print. Exit 1 if a child failed or timed out."""
    from dlperf import api, envinfo
    from dlperf.runner.sweep import sigterm_as_interrupt
    from dlperf.store import Store

    opts = options(args)
    info = api.framework_info([FRAMEWORK])
    env = envinfo.capture(info)
    devices = api.resolve_devices(opts.devices, info)
    warnings: list[str] = []
    threads = api.thread_counts(opts.threads, env["cores"]["cores"], warnings)
    for warning in warnings:
        print(f"dlperf: warning: {warning}", file=sys.stderr, flush=True)
    db = args.db or api.default_db()
    store = Store.open(db, create=True)
    stored: list[dict] = []

    def on_progress(done: int, total: int, device: str, n: int, row: dict | None) -> None:
        _report_progress(done, total, device, n, row)
        if row is not None and row["status"] == Status.OK:
            records = peak_records(row)
            ids = store.record_peaks(envinfo.fingerprint(env), env, records)
            stored.extend({"id": i, **r} for i, r in zip(ids, records, strict=True))

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
            )
    finally:
        store.close()
    failed = [{k: r[k] for k in ("device", "threads", "status", "error")} for r in rows if r["status"] != Status.OK]
    if opts.format == "json":
        print(json.dumps({"db": db, "peaks": stored, "failed": failed}, indent=2))
    else:
        _print_text(stored, failed, opts, db)
    return ExitCode.CELLS_FAILED if failed else ExitCode.OK


def _where(device: str, threads: int) -> str:
    return f"cpu:{threads}" if _is_cpu(device) else device


def _report_progress(done: int, total: int, device: str, threads: int, row: dict | None) -> None:
    if row is None:
        line = f"[{done + 1}/{total}] peaks of {_where(device, threads)} ..."
    else:
        outcome = "done" if row["status"] == Status.OK else f"{row['status']}: {row['error']}"
        line = f"[{done}/{total}] peaks of {_where(device, threads)}: {outcome} ({row['duration_s']:.0f} s)"
    print(line, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------------------------------
# Text output


def _print_text(stored: list[dict], failed: list[dict], opts: PeakOptions, db: str) -> None:
    from rich.console import Console

    console = Console()
    if stored:
        console.print(matmul_table(stored))
        console.print(bandwidth_table(stored, opts.bandwidth_bytes))
    for note in notes(stored, failed):
        console.print(f"  note: {note}", highlight=False, markup=False)
    console.print(f"{len(stored)} peaks stored in {db}", highlight=False, markup=False)


def matmul_table(stored: list[dict]):
    from rich.table import Table

    versions = ", ".join(dict.fromkeys(f"{r['framework']} {r['framework_version']}" for r in stored))
    table = Table(title=f"Matrix-multiply peaks ({versions})")
    for name in ("device", "threads", "dtype", "TFLOP/s", "best n"):
        table.add_column(name, justify="left" if name in ("device", "dtype") else "right")
    for r in stored:
        if r["kind"] != "matmul":
            continue
        detail = r["detail"]
        figure = _tflops(r["value"]) if r["value"] else ("unsupported" if "unsupported" in detail else "skipped")
        table.add_row(r["device"], str(r["threads"]), r["dtype"], figure, str(detail.get("best_n") or "-"))
    return table


def bandwidth_table(stored: list[dict], array_bytes: int):
    from rich.table import Table

    table = Table(title=f"Memory bandwidth (STREAM, fp32 arrays of {array_bytes / 2**20:g} MiB)")
    for name in ("device", "threads", "copy GB/s", "triad GB/s", "peak GB/s"):
        table.add_column(name, justify="left" if name == "device" else "right")
    for r in stored:
        if r["kind"] != "bandwidth":
            continue
        kernels = r["detail"]["kernels"]
        table.add_row(
            r["device"],
            str(r["threads"]),
            *(_gbps(kernels[k]["bytes_per_s"]) for k in ("copy", "triad")),
            _gbps(r["value"]),
        )
    return table


def _tflops(value: float) -> str:
    return f"{value / 1e12:.3g}"


def _gbps(value: float) -> str:
    return f"{value / 1e9:.1f}"


def notes(stored: list[dict], failed: list[dict]) -> list[str]:
    """What the tables cannot show: failures, unsupported dtypes, skipped sizes, a busy machine."""
    out = [f"{_where(f['device'], f['threads'])}: {f['status']}: {f['error']}" for f in failed]
    busy: dict[str, float] = {}
    for r in stored:
        where, detail = _where(r["device"], r["threads"]), r["detail"]
        if "unsupported" in detail:
            out.append(f"{where} {r['dtype']}: unsupported: {detail['unsupported']}")
        skipped = [s for s in detail.get("sizes", []) if "skipped" in s]
        if skipped:
            sizes = ", ".join(str(s["n"]) for s in skipped)
            out.append(f"{where} {r['dtype']}: n = {sizes} skipped: {skipped[0]['skipped']}")
        if (detail.get("others_cpu_share") or 0.0) > OTHERS_BUSY_SHARE:
            busy[where] = detail["others_cpu_share"]
    out += [
        f"{where}: other processes used {100 * share:.0f}% of the CPUs while it was measured: its peaks are low, "
        "and utilizations held against them high"
        for where, share in busy.items()
    ]
    return out
