"""`dlperf comm`: how fast the processes of a job exchange data, as nccl-tests reports it.

Is data-parallel training here compute-bound or communication-bound? A step all-reduces its gradients; this measures
that all-reduce over message sizes with torch.distributed itself, in processes torchrun starts (one node, or several
meeting at a rendezvous endpoint), and reports for each size the time, the algorithm bandwidth (bytes / time) and the
bus bandwidth (what each link carried: 2 (n - 1) / n of it for n ranks), the figure to hold against a link's speed.
Rows are stored with the machine's fingerprint, like `dlperf peak`'s. The job itself: `runner/comm.py`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dlperf.commands.common import add_format, choice, command_with, db_path, real, whole
from dlperf.errors import UsageError
from dlperf.flagtext import size_text
from dlperf.vocab import CommBackend, ExitCode

if TYPE_CHECKING:
    from dlperf.answers import CommAnswer, CommSize, EnvAnswer
    from dlperf.runner.comm import CommJob

FRAMEWORK = "torch"  # torch.distributed does every collective
DEFAULT_SIZES = "4K:64M"
DEFAULT_FACTOR = 4
DEFAULT_ITERS = 20
DEFAULT_WARMUP = 5
DEFAULT_TIMEOUT = 300.0  # seconds for the whole job, the rendezvous included
FP32_BYTES = 4


@dataclass(frozen=True)
class CommOptions:
    job: CommJob
    threads: int | None  # CPU threads per process; None: the usable cores shared out among the processes
    format: str


# ----------------------------------------------------------------------------------------------------------------------
# The command line


HELP = "measure all-reduce time and bus bandwidth between processes (torchrun)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nproc", type=whole("--nproc", 1), default=2, help="processes on this node (default: 2)")
    p.add_argument("--backend", default="gloo", type=choice("--backend", tuple(CommBackend)),
                   help="gloo (CPU) or nccl (one CUDA GPU per process; default: gloo)")  # fmt: skip
    p.add_argument(
        "--threads", type=whole("--threads", 1), help="CPU threads per process (default: usable cores // --nproc, >= 1)"
    )
    p.add_argument(
        "--sizes",
        default=DEFAULT_SIZES,
        help=f"message bytes per rank: MIN:MAX (times --factor from MIN) or a comma list; units K, M, G or KiB, "
        f"MiB, GiB (powers of 1024), KB, MB, GB (of 1000) (default: {DEFAULT_SIZES})",
    )
    p.add_argument(
        "--factor",
        type=whole("--factor", 2),
        default=DEFAULT_FACTOR,
        help=f"step of a MIN:MAX range (default: {DEFAULT_FACTOR})",
    )
    p.add_argument(
        "--iters",
        type=whole("--iters", 1),
        default=DEFAULT_ITERS,
        help=f"timed all-reduces per size (default: {DEFAULT_ITERS})",
    )
    p.add_argument(
        "--warmup",
        type=whole("--warmup"),
        default=DEFAULT_WARMUP,
        help=f"untimed ones first (default: {DEFAULT_WARMUP})",
    )
    p.add_argument(
        "--timeout",
        type=real("--timeout"),
        default=DEFAULT_TIMEOUT,
        help=f"seconds for the whole job (default: {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument(
        "--nnodes",
        type=whole("--nnodes", 1),
        default=1,
        help="machines in the job, each running this command (default: 1)",
    )
    p.add_argument(
        "--node-rank",
        type=whole("--node-rank"),
        default=0,
        help="this machine's number, 0 .. --nnodes - 1 (default: 0)",
    )
    p.add_argument("--rdzv-endpoint", help="host:port where the nodes meet, the same on every node (--nnodes > 1)")
    add_format(p, "text", "json")


def parse_size(text: str, flag: str = "--sizes") -> int:
    """`4096`, `4K`, `64MiB`, `1G` (powers of 1024), `4KB` (of 1000, as everywhere in dlperf: `flagtext.parse_size`) ->
    bytes: positive and whole float32 elements."""
    from dlperf.flagtext import parse_size as size

    nbytes = size(text, flag)
    if nbytes % FP32_BYTES:
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
    from dlperf.measure import system
    from dlperf.parallel import Rendezvous
    from dlperf.runner.comm import CommJob

    if why := system.too_many_threads([args.threads] if args.threads else [], system.usable_cores()["cores"]):
        raise UsageError(why)  # as `dlperf run` and `peak` refuse it, before anything starts
    job = CommJob(
        nproc=args.nproc,
        backend=CommBackend(args.backend),
        sizes=parse_sizes(args.sizes, args.factor),
        iters=args.iters,
        warmup=args.warmup,
        timeout=args.timeout,
        rdzv=Rendezvous(args.nnodes, args.node_rank, args.rdzv_endpoint, join_timeout_s=args.timeout),
    )
    if why := system.too_many_processes([job.nproc]):
        raise UsageError(why)
    check_memory(job, args.sizes)
    return CommOptions(job, args.threads, args.format)


def check_memory(job, sizes_text: str) -> None:
    """gloo's buffers, one of the largest size in each of this node's processes, beyond the machine's memory: refused
    before the job, where each rank would fail to allocate it (NCCL's are in the GPUs' own memory)."""
    from dlperf.measure import system

    memory, largest = system.memory_total_bytes(), max(job.sizes)
    if job.backend == CommBackend.GLOO and memory and job.nproc * largest > memory:
        raise UsageError(f"--sizes {sizes_text}: {job.nproc} processes' buffers of {largest / 1e9:.3g} GB take "
                         f"{job.nproc * largest / 1e9:.3g} GB, more than this machine's {memory / 1e9:.3g} GB of "
                         "memory")  # fmt: skip


def threads_per_process(requested: int | None, nproc: int, cores: int, warnings: list[str]) -> int:
    """--threads, or the usable cores shared out among this node's processes; a warning when they oversubscribe."""
    threads = requested or max(1, cores // nproc)
    if nproc * threads > cores:
        warnings.append(
            f"--nproc {nproc} x --threads {threads} = {nproc * threads} threads exceed the {cores} usable cores: "
            "expect oversubscription (collectives can be many times slower); measured anyway"
        )
    return threads


def check_backend(backend: CommBackend, nproc: int, info: EnvAnswer) -> None:
    """NCCL needs a GPU per process on this node; the torch probe (a child) says which it sees."""
    if backend != CommBackend.NCCL:
        return
    gpus = [name for name in info.device_names if name.startswith("cuda")]
    if not gpus:
        raise UsageError(f"--backend nccl needs CUDA GPUs; torch {info.version} sees none here (use --backend gloo)")
    if nproc > len(gpus):
        raise UsageError(f"--backend nccl uses one GPU per process: --nproc {nproc}, but torch sees {len(gpus)}")


def run(args) -> int:
    """Measure in one torchrun job, store every size, print. Exit 1 if the job failed, timed out or summed wrong. A
    job interrupted or failed stores the sizes it had measured that summed right (`keep_finished`)."""
    from dlperf import envinfo
    from dlperf.answers import EnvAnswer
    from dlperf.commands.common import warn
    from dlperf.measure.units import plural
    from dlperf.plan.devices import framework_info
    from dlperf.runner import lifeline
    from dlperf.runner.comm import failure_reason, result_of, run_job
    from dlperf.runner.launch import ChildInterrupted
    from dlperf.runner.sweep import interpreter_for, sigterm_as_interrupt
    from dlperf.store import Store

    opts = options(args)
    job = opts.job
    python = interpreter_for(FRAMEWORK)
    info = framework_info([FRAMEWORK])
    check_backend(job.backend, job.nproc, EnvAnswer.from_json(info[FRAMEWORK]))
    env = envinfo.capture(info)
    warnings: list[str] = []
    threads = threads_per_process(opts.threads, job.nproc, env["cores"]["cores"], warnings)
    for warning in warnings:
        warn(warning)
    db = db_path(args)
    Store.open(db, create=True).close()  # a bad --db is found before the job, not after it
    try:
        with sigterm_as_interrupt():
            launched = run_job(job, python, threads)
    except KeyboardInterrupt as stopped:  # the job's sizes measured so far came with it from the launcher
        return interrupted(job, env, db, stopped.every_rank if isinstance(stopped, ChildInterrupted) else [])
    events = launched.every_rank
    if failure := failure_reason(job, launched.child, events):
        with lifeline.held():  # an interrupt meanwhile comes once the line says what is stored
            kept, right = keep_finished(job, env, db, events)
            print(f"dlperf: error: comm job failed: {failure}{'; ' + kept if kept else ''}", file=sys.stderr)
            if opts.format == "json":  # its reader got nothing at all (as `cli.document_error` for any error)
                said = {"error": f"comm job failed: {failure}", "exit_code": int(ExitCode.CELLS_FAILED)}
                print(json.dumps({**said, "db": db, "stored_bytes": right}, indent=2))
        return ExitCode.CELLS_FAILED
    answer = result_of(events)
    assert answer is not None, "a job that did not fail answered"
    ids: list[int] = []
    try:
        store_sizes(db, env, answer, job, ids)
    except KeyboardInterrupt:  # it came while they were stored: say that they are, as peak does
        if not ids:
            raise
        kept = plural(len(ids), "size")
        print(f"dlperf: interrupted; the job's figures ({kept}) are stored in {db}", file=sys.stderr)
        return ExitCode.INTERRUPTED
    render(answer, ids, db, opts.format)
    return ExitCode.CELLS_FAILED if any(s.wrong for s in answer.sizes) else ExitCode.OK


def store_sizes(db: str, env: dict, answer: CommAnswer, job: CommJob, ids: list[int]) -> None:
    """The answer's sizes stored in one transaction, their ids appended to `ids`; an interrupt meanwhile comes once
    they are (raised inside, it rolled them back)."""
    from dlperf import envinfo
    from dlperf.runner import lifeline
    from dlperf.runner.comm import comm_records
    from dlperf.store import Store

    store = Store.open(db, create=True)
    try:
        with lifeline.held():
            ids.extend(store.record_comm(envinfo.fingerprint(env), env, comm_records(answer, job)))
    finally:
        store.close()


def keep_finished(job: CommJob, env: dict, db: str, events: list) -> tuple[str, list[int]]:
    """The sizes a job that did not end (interrupted, or failed) had measured, stored: what is stored in words ('' when
    it had measured none), and their bytes. Each was measured whole (every rank timed it, its figures gathered from
    all of them) and stands as a finished job's size does: a later failure (a rank that died at a larger size, the
    job's timeout) is the failure's, not theirs. One that summed wrong is not stored: without the job's end no table
    shows its count, and it may be the first sign of what failed."""
    from dataclasses import replace

    from dlperf.measure.units import plural
    from dlperf.runner.comm import finished

    answer = finished(events)
    if answer is None:
        return "", []
    right = [s.bytes for s in answer.sizes if not s.wrong]
    wrong = names([s.bytes for s in answer.sizes if s.wrong])
    if not right:
        return f"nothing is stored: {wrong} summed wrong", []
    store_sizes(db, env, replace(answer, sizes=[s for s in answer.sizes if not s.wrong]), job, [])
    are = "is" if len(right) == 1 else "are"
    not_wrong = f"; not {wrong}, which summed wrong" if wrong else ""
    return f"{plural(len(right), 'size')} measured ({names(right)}) {are} stored in {db}{not_wrong}", right


def interrupted(job: CommJob, env: dict, db: str, events: list) -> int:
    """Ctrl-C (or SIGTERM, SIGHUP) during the job: the sizes it had measured stored, and the command that measures
    the rest."""
    from dlperf.commands.run import again, say_interrupted

    kept, stored = keep_finished(job, env, db, events)
    rest = [n for n in job.sizes if n not in stored]
    if not stored:  # today's meaning: nothing is kept, and the same command measures
        say_interrupted(kept or "nothing is stored: no size was measured yet", f"To measure, run it again: {again()}")
    else:
        say_interrupted(kept, f"To measure the rest: {rest_command(rest)}" if rest else "Every size was measured")
    return ExitCode.INTERRUPTED


def names(sizes: list[int]) -> str:
    """Sizes as --sizes takes them, 4K rather than 4096: '4K, 16K, 1M'."""
    return ", ".join(map(size_text, sizes))


def rest_command(sizes: list[int]) -> str:
    """This command line measuring only `sizes`: its --sizes (and --factor) replaced by their comma list."""
    return command_with({"--sizes": ",".join(map(size_text, sizes)), "--factor": None})


# ----------------------------------------------------------------------------------------------------------------------
# Output


def header(answer: CommAnswer) -> list[str]:
    procs = "process" if answer.nproc == 1 else "processes"
    nodes = "node" if answer.nnodes == 1 else "nodes"
    return [
        f"all_reduce of float32 over {answer.backend} on {answer.device} (torch {answer.torch_version})",
        f"world size {answer.world} = {answer.nnodes} {nodes} x {answer.nproc} {procs}, "
        f"{answer.threads} CPU thread(s) per process",
        f"time: the slowest rank's median of {answer.iters} all-reduces, after {answer.warmup} untimed",
    ]


def render(answer: CommAnswer, ids: list[int], db: str, fmt: str) -> None:
    if fmt == "json":
        sizes = [{"id": i, **s.to_json()} for i, s in zip(ids, answer.sizes, strict=True)]
        print(json.dumps({"db": db, **answer.to_json(), "sizes": sizes}, indent=2))
        return
    from dlperf.commands.common import console as wide
    from dlperf.measure.units import plural

    console = wide()
    sizes = answer.sizes
    mean = sum(s.busbw for s in sizes) / len(sizes)
    after = [f"average bus bandwidth: {mean / 1e9:.3g} GB/s"]
    if answer.world == 1:  # nccl-tests' own convention: busbw = algbw x 2(n-1)/n
        after.append("note: one process: an all-reduce moves nothing between processes, so its bus bandwidth is 0 "
                     "(algbw x 2(n-1)/n); the time is the call's own cost. --nproc 2 or more measures the "
                     "link")  # fmt: skip
    after += [f"note: {s.bytes} bytes: {s.wrong} elements summed wrong" for s in sizes if s.wrong]
    after.append(f"{plural(len(ids), 'size')} stored in {db} (`dlperf list --comm` shows the job again)")
    for line in header(answer):
        console.print(line, highlight=False, markup=False)
    console.print(table(sizes))
    for line in after:
        console.print(line, highlight=False, markup=False)


def table(sizes: list[CommSize]):
    from rich.table import Table

    out = Table()
    for name in ("size (B)", "count (elements)", "type", "time (µs)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"):
        out.add_column(name, justify="left" if name == "type" else "right")
    for s in sizes:
        out.add_row(
            str(s.bytes), str(s.count), "float", f"{s.time_s * 1e6:.1f}",
            f"{s.algbw / 1e9:.3f}", f"{s.busbw / 1e9:.3f}", str(s.wrong),
        )  # fmt: skip
    return out
