"""`dlperf comm`: how fast the processes of a job exchange data, as nccl-tests reports it.

Is data-parallel training here compute-bound or communication-bound? A step all-reduces its gradients; this measures
that all-reduce over message sizes with torch.distributed itself, in processes torchrun starts (one node, or several
meeting at a rendezvous endpoint), and reports for each size the time, the algorithm bandwidth (bytes / time) and the
bus bandwidth (what each link carried: 2 (n - 1) / n of it for n ranks), the figure to hold against a link's speed.
Rows are stored with the machine's fingerprint, like `dlperf peak`'s.

Parent side: this module never imports a framework. One torchrun job runs `dlperf.runner.comm_worker` in every
process, the thread variables fixed before torch loads. Module-level imports stay light (the standard library,
errors, vocab, the pure torchrun command builder): every `dlperf` command builds this parser.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.errors import UsageError
from dlperf.runner.distributed import Rendezvous, rendezvous_id, torchrun_command
from dlperf.vocab import ExitCode, Status

if TYPE_CHECKING:
    from dlperf.runner.launch import ChildResult

FRAMEWORK = "torch"  # torch.distributed does every collective
DEFAULT_SIZES = "4K:64M"
DEFAULT_FACTOR = 4
DEFAULT_ITERS = 20
DEFAULT_WARMUP = 5
DEFAULT_TIMEOUT = 300.0  # seconds for the whole job, the rendezvous included
FP32_BYTES = 4
UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
_SIZE = re.compile(r"(\d+)\s*([KMG]?)B?", re.IGNORECASE)


class Backend(StrEnum):
    GLOO = "gloo"  # CPU tensors, TCP between processes
    NCCL = "nccl"  # one CUDA GPU per process


@dataclass(frozen=True)
class CommOptions:
    nproc: int  # processes on this node
    backend: Backend
    threads: int | None  # CPU threads per process; None: the usable cores shared out among the processes
    sizes: tuple[int, ...]  # message bytes per rank, ascending
    iters: int
    warmup: int
    timeout: float
    rdzv: Rendezvous
    format: str


# ----------------------------------------------------------------------------------------------------------------------
# The command line


def add_parser(subparsers, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "comm", parents=[common], help="measure all-reduce time and bus bandwidth between processes (torchrun)"
    )
    p.add_argument("--nproc", type=int, default=2, help="processes on this node (default: 2)")
    p.add_argument("--backend", default="gloo", help="gloo (CPU) or nccl (one CUDA GPU per process; default: gloo)")
    p.add_argument("--threads", type=int, help="CPU threads per process (default: usable cores // --nproc, >= 1)")
    p.add_argument(
        "--sizes",
        default=DEFAULT_SIZES,
        help=f"message bytes per rank: MIN:MAX (times --factor from MIN) or a comma list; units K, M, G "
        f"(powers of 1024) (default: {DEFAULT_SIZES})",
    )
    p.add_argument(
        "--factor", type=int, default=DEFAULT_FACTOR, help=f"step of a MIN:MAX range (default: {DEFAULT_FACTOR})"
    )
    p.add_argument(
        "--iters", type=int, default=DEFAULT_ITERS, help=f"timed all-reduces per size (default: {DEFAULT_ITERS})"
    )
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help=f"untimed ones first (default: {DEFAULT_WARMUP})")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds for the whole job (default: {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument("--nnodes", type=int, default=1, help="machines in the job, each running this command (default: 1)")
    p.add_argument("--node-rank", type=int, default=0, help="this machine's number, 0 .. --nnodes - 1 (default: 0)")
    p.add_argument("--rdzv-endpoint", help="host:port where the nodes meet, the same on every node (--nnodes > 1)")
    p.add_argument("--format", default="text", help="text or json")
    return p


def parse_size(text: str, flag: str = "--sizes") -> int:
    """`4096`, `4K`, `64M`, `1G` (powers of 1024) -> bytes: positive and whole float32 elements."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise UsageError(f"{flag} {text!r}: expected a size such as 4096, 4K, 64M or 1G")
    nbytes = int(match.group(1)) * UNITS[match.group(2).upper()]
    if nbytes <= 0 or nbytes % FP32_BYTES:
        raise UsageError(f"{flag} {text!r}: a size must be a positive multiple of {FP32_BYTES} bytes (float32)")
    return nbytes


def parse_sizes(text: str, factor: int) -> tuple[int, ...]:
    """MIN:MAX -> MIN, MIN * factor, ... up to MAX (nccl-tests' -b -e -f); or a comma list. Ascending, no repeats."""
    if ":" not in text:
        items = [item for item in text.split(",") if item.strip()]
        if not items or len(items) != len(text.split(",")):
            raise UsageError(f"--sizes {text!r}: expected MIN:MAX or a comma list of sizes such as 4K,1M")
        return tuple(sorted({parse_size(item) for item in items}))
    low, _, high = text.partition(":")
    first, last = parse_size(low), parse_size(high)
    if first > last:
        raise UsageError(f"--sizes {text!r}: the first size must not exceed the last")
    if factor < 2:
        raise UsageError(f"--factor {factor}: must be at least 2")
    sizes = [first]
    while sizes[-1] * factor <= last:
        sizes.append(sizes[-1] * factor)
    return tuple(sizes)


def options(args) -> CommOptions:
    """Every flag checked before anything runs; bad input is a UsageError naming the flag."""
    if args.format not in ("text", "json"):
        raise UsageError(f"--format {args.format!r}: expected text or json")
    if args.backend not in tuple(Backend):
        raise UsageError(f"--backend {args.backend!r}: expected {' or '.join(Backend)}")
    for flag, value, least in (("--nproc", args.nproc, 1), ("--iters", args.iters, 1), ("--warmup", args.warmup, 0)):
        if value < least:
            raise UsageError(f"{flag} must be at least {least}")
    if args.threads is not None and args.threads < 1:
        raise UsageError("--threads must be at least 1")
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    return CommOptions(
        nproc=args.nproc,
        backend=Backend(args.backend),
        threads=args.threads,
        sizes=parse_sizes(args.sizes, args.factor),
        iters=args.iters,
        warmup=args.warmup,
        timeout=args.timeout,
        rdzv=Rendezvous(args.nnodes, args.node_rank, args.rdzv_endpoint, join_timeout_s=args.timeout),
        format=args.format,
    )


def threads_per_process(requested: int | None, nproc: int, cores: int, warnings: list[str]) -> int:
    """--threads, or the usable cores shared out among this node's processes; a warning when they oversubscribe."""
    threads = requested or max(1, cores // nproc)
    if nproc * threads > cores:
        warnings.append(
            f"--nproc {nproc} x --threads {threads} = {nproc * threads} threads exceed the {cores} usable cores: "
            "expect oversubscription (collectives can be many times slower); measured anyway"
        )
    return threads


def check_backend(backend: Backend, nproc: int, info: dict) -> None:
    """NCCL needs a GPU per process on this node; the torch probe (a child) says which it sees."""
    if backend != Backend.NCCL:
        return
    gpus = [d["name"] for d in info.get("devices", []) if d["name"].startswith("cuda")]
    if not gpus:
        raise UsageError(
            f"--backend nccl needs CUDA GPUs; torch {info.get('version')} sees none here (use --backend gloo)"
        )
    if nproc > len(gpus):
        raise UsageError(f"--backend nccl uses one GPU per process: --nproc {nproc}, but torch sees {len(gpus)}")


def cmd_comm(args) -> int:
    """Measure in one torchrun job, store every size, print. Exit 1 if the job failed, timed out or summed wrong."""
    from dlperf import api, envinfo
    from dlperf.runner.sweep import interpreter_for, sigterm_as_interrupt
    from dlperf.store import Store

    opts = options(args)
    python = interpreter_for(FRAMEWORK)
    info = api.framework_info([FRAMEWORK])
    check_backend(opts.backend, opts.nproc, info[FRAMEWORK])
    env = envinfo.capture(info)
    warnings: list[str] = []
    threads = threads_per_process(opts.threads, opts.nproc, env["cores"]["cores"], warnings)
    for warning in warnings:
        print(f"dlperf: warning: {warning}", file=sys.stderr, flush=True)
    db = args.db or api.default_db()
    Store.open(db, create=True).close()  # a bad --db is found before the job, not after it
    with sigterm_as_interrupt():
        child, answer, joined = run_job(opts, python, threads)
    failure = failure_reason(opts, child, answer, joined)
    if failure:
        print(f"dlperf: error: comm job failed: {failure}", file=sys.stderr)
        return ExitCode.CELLS_FAILED
    result = answer["result"]
    rows = comm_records(result, opts)
    store = Store.open(db, create=True)
    try:
        ids = store.record_comm(envinfo.fingerprint(env), env, rows)
    finally:
        store.close()
    render(result, ids, db, opts.format)
    return ExitCode.CELLS_FAILED if any(s["wrong"] for s in result["sizes"]) else ExitCode.OK


# ----------------------------------------------------------------------------------------------------------------------
# The job


def task_of(opts: CommOptions, threads: int) -> dict[str, Any]:
    return {
        "backend": opts.backend.value,
        "threads": threads,
        "sizes": list(opts.sizes),
        "iters": opts.iters,
        "warmup": opts.warmup,
        "timeout": opts.timeout,
    }


def job_command(opts: CommOptions, python: str, task: dict, task_file: str, result_file: str) -> list[str]:
    """The torchrun command; its rendezvous id is the same on every node that runs the same `dlperf comm`."""
    same = {k: task[k] for k in ("backend", "sizes", "iters", "warmup")}  # not threads: each node's own cores
    job_id = rendezvous_id("comm", opts.rdzv.nnodes, json.dumps(same, sort_keys=True))
    return torchrun_command(
        python, opts.nproc, opts.rdzv, job_id, "dlperf.runner.comm_worker", [task_file, result_file]
    )


def run_job(opts: CommOptions, python: str, threads: int) -> tuple[ChildResult, dict | None, bool]:
    """(torchrun's outcome, this node's result file or None, whether the processes ever met), in a temporary
    directory that holds the task, the result and torchrun's logs."""
    from dlperf.peak import _read_answer as read_answer  # the same result-file contract as the peak worker's
    from dlperf.runner.comm_worker import joined_marker
    from dlperf.runner.launch import child_env, run_child

    task = task_of(opts, threads)
    with tempfile.TemporaryDirectory(prefix="dlperf-comm-") as tmp:
        tmpdir = Path(tmp)
        task_file, result_file = tmpdir / "task.json", tmpdir / "result.json"
        task_file.write_text(json.dumps(task))
        cmd = job_command(opts, python, task, str(task_file), str(result_file))
        child = run_child(cmd, child_env(os.environ, threads, python), opts.timeout, tmpdir)
        return child, read_answer(result_file), joined_marker(str(result_file)).exists()


def failure_reason(opts: CommOptions, child: ChildResult, answer: dict | None, joined: bool) -> str | None:
    """Why the job gave no figures, in one line; None when it did."""
    if answer is not None and answer.get("status") == Status.OK and not child.timed_out:
        return None
    if answer is not None and answer.get("error"):
        return f"rank {answer.get('rank', '?')}: {answer['error']}"
    if not joined and opts.rdzv.nnodes > 1:
        why = f"within --timeout {opts.timeout:g} s" if child.timed_out else f"({last_line(child.stderr_tail)})"
        return (
            f"the {opts.rdzv.nnodes} nodes never met at --rdzv-endpoint {opts.rdzv.endpoint} {why}: run the same "
            f"command on every node, with --node-rank 0 to {opts.rdzv.nnodes - 1}"
        )
    if child.timed_out:
        return f"timed out: the job exceeded --timeout {opts.timeout:g} s"
    why = child.crashed_reason or "torchrun ended without a result"
    last = last_line(child.stderr_tail)
    return f"{why}{': ' + last if last else ''}"


def last_line(text: str) -> str:
    """The last line of torchrun's stderr that says something (it closes its reports with rules of '=')."""
    lines = [line.strip() for line in text.splitlines() if line.strip().strip("=*-")]
    return lines[-1][:300] if lines else ""


def comm_records(result: dict, opts: CommOptions) -> list[dict[str, Any]]:
    """The job's result as store rows, one per size; the rest of the result goes in each row's detail."""
    job = {k: v for k, v in result.items() if k != "sizes"}
    where = {"node_rank": opts.rdzv.node_rank, "rdzv_endpoint": opts.rdzv.endpoint}
    rows = []
    for size in result["sizes"]:
        figures = {k: size[k] for k in ("bytes", "time_s", "algbw", "busbw", "wrong")}
        detail = {**job, **where, **{k: v for k, v in size.items() if k not in figures}}
        rows.append({**{k: result[k] for k in ("backend", "device", "world", "nnodes", "threads", "op")},
                     **figures, "detail": detail})  # fmt: skip
    return rows


# ----------------------------------------------------------------------------------------------------------------------
# Output


def header(result: dict) -> list[str]:
    procs = "process" if result["nproc"] == 1 else "processes"
    nodes = "node" if result["nnodes"] == 1 else "nodes"
    return [
        f"all_reduce of float32 over {result['backend']} on {result['device']} (torch {result['torch_version']})",
        f"world size {result['world']} = {result['nnodes']} {nodes} x {result['nproc']} {procs}, "
        f"{result['threads']} CPU thread(s) per process",
        f"time: the slowest rank's median of {result['iters']} all-reduces, after {result['warmup']} untimed",
    ]


def render(result: dict, ids: list[int], db: str, fmt: str) -> None:
    if fmt == "json":
        sizes = [{"id": i, **s} for i, s in zip(ids, result["sizes"], strict=True)]
        print(json.dumps({"db": db, **result, "sizes": sizes}, indent=2))
        return
    from rich.console import Console

    console = Console()
    sizes = result["sizes"]
    mean = sum(s["busbw"] for s in sizes) / len(sizes)
    after = [f"average bus bandwidth: {mean / 1e9:.3g} GB/s"]
    after += [f"note: {s['bytes']} bytes: {s['wrong']} elements summed wrong" for s in sizes if s["wrong"]]
    after.append(f"{len(ids)} sizes stored in {db}")
    for line in header(result):
        console.print(line, highlight=False, markup=False)
    console.print(table(sizes))
    for line in after:
        console.print(line, highlight=False, markup=False)


def table(sizes: list[dict]):
    from rich.table import Table

    out = Table()
    for name in ("size (B)", "count (elements)", "type", "time (µs)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"):
        out.add_column(name, justify="left" if name == "type" else "right")
    for s in sizes:
        out.add_row(
            str(s["bytes"]), str(s["count"]), "float", f"{s['time_s'] * 1e6:.1f}",
            f"{s['algbw'] / 1e9:.3f}", f"{s['busbw'] / 1e9:.3f}", str(s["wrong"]),
        )  # fmt: skip
    return out
