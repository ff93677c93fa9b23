"""`dlperf run`: measure a sweep (spec -> plan -> a child per cell -> store) and print its Table-7 view."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from dlperf.commands.common import StoreOnce, db_path, given, real, warn_if_measured, whole, whole_list
from dlperf.commands.output import settle
from dlperf.commands.predict import GPU_SPECS_HELP
from dlperf.defaults import MAX_COMPILE_AT_ONCE, MAX_TRACE_CAP_MIB, TRACE_CAP_MIB
from dlperf.errors import UsageError
from dlperf.modes import help_text
from dlperf.vocab import ExitCode

HELP = "measure a sweep and print the table"
Said = tuple[str, str]  # an interrupted command's last line (`say_interrupted`): what is stored, what to do next


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_sweep_flags(p)
    add_process_flags(p)
    add_timer_flags(p, min_steps=10, min_time=1.0, max_time=60.0, max_warmup=30)
    add_parallel_flags(p)
    p.add_argument("--profile", action="store_true", help="after each cell's timed processes, profile it in one "
                   "untimed process: where the step goes and what bounds it (dlperf table --explain)")  # fmt: skip
    p.add_argument("--trace-dir", type=given("--trace-dir", "a directory"),
                   help="with --profile: where the gzip Chrome traces go (default: <db>.traces)")  # fmt: skip
    add_trace_cap_flag(p)
    add_nvtx_flag(p)
    add_data_flags(p)
    p.add_argument("--resume", action="store_true", help="continue the latest unfinished run, as it was planned: its "
                   "command's own flags may be given again (with --ray: every unfinished run of a Ray sweep, each on a "
                   "live node of the kind that measured it)")  # fmt: skip
    add_fleet_flags(p)
    p.add_argument("--dry-run", action="store_true", help="print the planned cells and a time estimate (from earlier "
                   "runs here, or one untimed step per workload and mode)")  # fmt: skip


def add_sweep_flags(p: argparse.ArgumentParser) -> None:
    """What the sweep measures: its cells' workloads, frameworks, devices, thread counts and modes."""
    p.add_argument(
        "--workloads",
        help="comma list of built-in names, or path/file.py:factory, or module:factory, each at a batch of its own "
        "with @bN (resnet-50@b64) (default: the seven networks of Shi et al. 2016)",
    )
    p.add_argument("--frameworks", default="torch", help="comma list (default: torch)")
    p.add_argument("--devices", help="comma list of cpu, cuda, cuda:N, mps (default: cpu and every visible GPU)")
    p.add_argument(
        "--threads",
        type=whole_list("--threads"),
        help="CPU thread counts, e.g. 1,2,8 (default: 1, 2, 4, ... up to the cores)",
    )
    p.add_argument(
        "--modes",
        default="fp32",
        help=f"comma list of modes, each components joined by '+', e.g. fp32,bf16+channels_last,bf16+compile "
        f"(default: fp32). Components: {help_text()}",
    )


def add_process_flags(p: argparse.ArgumentParser) -> None:
    """How each cell's processes run: how many, for how long, pinned or not, and what else they check."""
    p.add_argument(
        "--repeats", type=whole("--repeats", 1), default=1, help="fresh processes per cell, interleaved (default: 1)"
    )
    p.add_argument("--timeout", type=real("--timeout"), default=600.0, help="seconds per cell process (default: 600)")
    p.add_argument(
        "--compile-timeout",
        type=real("--compile-timeout"),
        help="seconds a compiled cell may spend compiling (its first step) before it is stopped as a timeout "
        "(default: only --timeout)",
    )
    p.add_argument(
        "--compile-at-once",
        type=whole("--compile-at-once", 1, most=MAX_COMPILE_AT_ONCE),
        default=1,
        metavar="N",
        help="up to N compiled cells on one device (the next ones in the run's order; eager cells between them run "
        "after) compile side by side, each timed alone: no timed step "
        "runs beside another cell's import, build, compilation or checks; their compile times are then not lone "
        "ones, and each process's --timeout is N times as long, for its waits; on a GPU the kernels a compiler "
        "times at their first call (Inductor's launch settings) may be timed beside another cell's compilation "
        "(default: 1: one cell at a time)",
    )
    p.add_argument("--pin", action="store_true", help="pin each cell to as many cores as it has threads")
    p.add_argument(
        "--no-loss-check",
        action="store_true",
        help="skip the short check that each mode other than fp32 still trains like fp32 (untimed; on by default)",
    )
    p.add_argument("--no-predict", action="store_true", help="skip predicting each GPU cell's step for its GPU "
                   "before the run (one probe child; dlperf table shows measured against predicted)")  # fmt: skip
    p.add_argument("--campaign", metavar="NAME", help="name this run as one of a campaign: runs of several "
                   "machines that dlperf table --campaign NAME and dlperf report set side by side")  # fmt: skip
    p.add_argument("--gpu-specs", metavar="FILE.csv", type=given("--gpu-specs", "a CSV file"),
                   help=f"{GPU_SPECS_HELP}: a GPU cell on a GPU the built-in table lacks is predicted from its "
                   "row")  # fmt: skip


def add_parallel_flags(p: argparse.ArgumentParser) -> None:
    """Multi-process cells, a group of their own: the process counts, the strategies, and the nodes."""
    ddp = p.add_argument_group("multi-process cells (torchrun; TensorFlow's MirroredStrategy: replicas)")
    ddp.add_argument(
        "--nproc",
        type=whole_list("--nproc"),
        help="processes per node, e.g. 1,2: each cell becomes a job of that many processes (gloo on the CPU, NCCL "
        "with one GPU per process), DDP unless --parallel says otherwise; --threads is then per process (default: "
        "the cores shared evenly)",
    )
    ddp.add_argument(
        "--parallel",
        help="with --nproc, the strategies, e.g. ddp,fsdp,pipeline,tp: ddp (DistributedDataParallel), fsdp (FSDP2), "
        "pipeline (both gpipe and 1f1b schedules of torch.distributed.pipelining), tp (tensor parallel linear "
        "layers), mirrored (TensorFlow's MirroredStrategy), multiworker (its MultiWorkerMirroredStrategy, a process "
        "per worker); dlperf list --parallel says which run here (default: "
        "each framework's data parallelism)",
    )
    ddp.add_argument(
        "--microbatches",
        type=whole_list("--microbatches"),
        help="a pipeline's micro-batches per step, e.g. 4,8: one cell each (default: 4)",
    )
    ddp.add_argument(
        "--scaling",
        default="strong",
        help="strong: the total batch fixed and split over the processes (the paper's multi-GPU protocol: FCN-R "
        "4096, AlexNet-R 1024, ResNet-56 128); weak: each process trains the workload's batch (default: strong)",
    )
    ddp.add_argument("--nnodes", type=whole("--nnodes", 1), default=1, help="machines in each DDP job (default: 1)")
    ddp.add_argument(
        "--node-rank", type=whole("--node-rank"), default=0, help="this machine's rank among --nnodes (default: 0)"
    )
    ddp.add_argument("--rdzv-endpoint", help="host:port of the c10d rendezvous, the same on every node")


def add_fleet_flags(p: argparse.ArgumentParser) -> None:
    fleet = p.add_argument_group("a sweep over a Ray cluster's nodes (pip install 'dlperf[ray]')")
    fleet.add_argument(
        "--ray",
        metavar="ADDRESS",
        type=given("--ray", "auto, HOST:PORT, ray://HOST:PORT or local"),
        help="run the sweep on each chosen node of a Ray cluster, as "
        "dlperf run there would, each node's cells stored here as a run of its own: auto (the cluster "
        "this machine belongs to), HOST:PORT or ray://HOST:PORT, or local (one started for this run)",
    )
    fleet.add_argument(
        "--nodes",
        type=given("--nodes", "all or KEY=VALUE"),
        help="with --ray: all (every alive node, the default), or KEY=VALUE: the nodes "
        "with that label (ray start --labels), or with at least VALUE of that custom resource",
    )


def add_timer_flags(p: argparse.ArgumentParser, *, min_steps: int, min_time: float, max_time: float,
                    max_warmup: int) -> None:  # fmt: skip
    """The one timer's sampling rule (`measure/timer.py`), with this command's defaults."""
    p.add_argument(
        "--min-steps", type=whole("--min-steps"), default=min_steps, help=f"timed steps at least (default: {min_steps})"
    )
    p.add_argument("--min-time", type=real("--min-time", above=False), default=min_time, action=Typed,
                   help=f"seconds of timed steps at least (default: {min_time:g})")  # fmt: skip
    p.add_argument("--max-time", type=real("--max-time"), default=max_time, action=Typed,  # 0: not one timed step
                   help=f"seconds of timed steps at most, and separately of warm-up (default: "
                   f"{max_time:g})")  # fmt: skip
    p.add_argument(
        "--max-warmup",
        type=whole("--max-warmup"),
        default=max_warmup,
        help=f"warm-up steps at most (default: {max_warmup})",
    )


def add_data_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default="synthetic", help="synthetic: one random batch made once on the device, the "
                   "paper's setting (default); DIR: each workload reads its real dataset there (MNIST, CIFAR-10, PTB, "
                   "an ImageNet folder; `dlperf data synth DIR` writes them) through a loader, and every cell is also "
                   "measured on synthetic data; dataset: each user workload's own Dataset")  # fmt: skip
    p.add_argument("--loaders", help="with --data: the loader settings measured, e.g. w0,w2,w2+pin+pf4+persist "
                   "(workers, pinned memory, prefetched batches per worker, persistent workers; default: w0 up to "
                   "the cores, and each +pin on a GPU)")  # fmt: skip


def add_trace_cap_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-trace-mib", type=real("--max-trace-mib", most=MAX_TRACE_CAP_MIB), default=TRACE_CAP_MIB,
                   help="a profile's trace larger than this, gzipped, is not kept (its figures are, with a note "
                   f"saying so) (default: {TRACE_CAP_MIB:g})")  # fmt: skip


def add_nvtx_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nvtx", action="store_true", help="NVTX ranges around each step's forward, loss, backward and "
                   "optimizer, for an Nsight Systems capture (nsys profile dlperf ...); a few host calls per step, "
                   "recorded with the cell; needs a CUDA build of PyTorch")  # fmt: skip


class Typed(StoreOnce):
    """Store the value, once (`StoreOnce`: `--max-time 2 --max-time 5` is refused), and note that the user typed the
    flag (`args.typed`): a message about two flags that do not fit together blames the one typed, not the other's
    default."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        super().__call__(parser, namespace, values, option_string)
        namespace.typed = {*getattr(namespace, "typed", ()), self.dest}


def timer(args):
    """The TimerConfig of the timer flags; a bad combination is a UsageError naming the flag the user typed."""
    from dlperf.measure.timer import TimerConfig

    if args.min_time > args.max_time:
        typed = getattr(args, "typed", set())
        if "max_time" in typed and "min_time" not in typed:
            raise UsageError(f"--max-time {args.max_time:g} is below --min-time {args.min_time:g} (its default): "
                             "give a lower --min-time too, or a longer --max-time")  # fmt: skip
        default = "" if "max_time" in typed else " (its default)"
        raise UsageError(f"--min-time {args.min_time:g} is above --max-time {args.max_time:g}{default}")
    try:
        return TimerConfig(
            min_steps=args.min_steps, min_time=args.min_time, max_time=args.max_time, max_warmup=args.max_warmup
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def use_gpu_specs(args) -> None:
    """A user's GPU rows for the run's predictions; a wrong file is one line, before anything runs."""
    if not args.gpu_specs:
        return
    from dlperf.predict import gpus

    if args.resume:  # the run's predictions were stored when it began
        raise UsageError("--gpu-specs: a resumed run keeps the predictions it stored when it began")
    gpus.use_specs(args.gpu_specs)


def run(args) -> int:
    from dlperf.store.location import said_as

    with said_as("--db"):  # the store's lines name --db, as the command line's, in the Python API it calls too
        return _run(args)


def _run(args) -> int:
    from dlperf.commands.resume_flags import check_resume_flags
    from dlperf.errors import RunInterrupted
    from dlperf.store.location import resume_command

    db = db_path(args)
    use_gpu_specs(args)
    check_resume_flags(args, db, add_arguments)
    if args.trace_dir is not None and not args.profile:
        raise UsageError("--trace-dir: the traces are --profile's; add --profile")
    if args.max_trace_mib != TRACE_CAP_MIB and not args.profile:  # its default given is the same run: not refused
        raise UsageError(f"--max-trace-mib {args.max_trace_mib:g}: the traces are --profile's; add --profile")
    if args.ray or args.nodes:
        from dlperf.commands.run_fleet import run_fleet

        return run_fleet(args, db)
    if not args.dry_run:
        warn_if_measured(db, resuming=args.resume)
    try:
        outcome = measure(args, db)
    except RunInterrupted as stopped:  # the run stored: what it keeps, and how to go on
        say_interrupted(
            stored_cells(db, stopped.run_id, unstored=stopped.unstored), f"Continue with: {resume_command(db)}"
        )
        return ExitCode.INTERRUPTED
    except KeyboardInterrupt:  # planning (a new run's, before it is stored; --resume's, before its first process)
        if args.dry_run:
            raise
        if args.resume:
            say_interrupted("nothing more was measured", f"Continue with: {resume_command(db)}")
        else:
            say_interrupted("nothing is stored: no cell was measured yet", "Run the same command to start again")
        return ExitCode.INTERRUPTED
    if args.dry_run:
        from dlperf.commands.dry_run import print_estimate

        settle(outcome.exit_code)  # 1 where a pilot step failed (the model does not train), whatever reads the output
        print_estimate(outcome, db)
        return outcome.exit_code
    return show_finished(db, outcome.run_id, args.resume, outcome.exit_code)


def measure(args, db: str):
    """The sweep the flags ask for, or the run --resume continues: its `api.Outcome`."""
    from dlperf import api

    if args.resume:
        return api.resume(db, dry_run=args.dry_run)
    return api.run(
        args.workloads,
        db=db,
        dry_run=args.dry_run,
        argv=["dlperf", *sys.argv[1:]],
        frameworks=args.frameworks,
        devices=args.devices,
        threads=args.threads,
        modes=args.modes,
        repeats=args.repeats,
        timeout=args.timeout,
        compile_timeout=args.compile_timeout,
        compile_at_once=args.compile_at_once,
        pin=args.pin,
        loss_check=not args.no_loss_check,
        timer=timer(args),
        nprocs=args.nproc,
        scaling=args.scaling,
        parallel=args.parallel,
        microbatches=args.microbatches,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        profile=args.profile,
        trace_dir=args.trace_dir,
        max_trace_mib=args.max_trace_mib,
        nvtx=args.nvtx,
        data=args.data,
        loaders=args.loaders,
        predict=not args.no_predict,
        campaign=args.campaign,
    )


def show_finished(db: str, run_id: int, resumed: bool, code: int) -> int:
    """A finished run's table (a resumed run's as its command shows it), and the run's exit code `code`; an
    interrupt while it prints says the run is whole."""
    from dlperf.commands.table import print_table

    def show() -> None:
        if resumed:
            show_resumed(db, run_id)  # in the format its command asked for: JSON has no line after it
        else:
            print_table(db, run_id, "text")
            print(where_stored(db, run_id))

    return printed(show, code, finished=(f"run {run_id} is complete and stored", see_it(db, run_id)))


def printed(show: Callable[[], None], code: int, *, finished: Said | Callable[[], Said],
            interrupted: Said | None = None) -> int:  # fmt: skip
    """Print what a command found with `show`; its exit code, `code` where the printing was not cut short. An
    interrupted command (`code` 130) ends with `interrupted`: what it stored, and what to do next; a Ctrl-C while it
    prints (its final table) says the same, or `finished` where the command had finished (only the printing was
    cut short; a callable: asked then, what the printing had got to): never a bare "interrupted" after a run was
    stored."""
    said = interrupted if code == ExitCode.INTERRUPTED else None
    settle(code)  # a reader gone while it prints (`| head -1`) cuts the output short, not the exit code
    try:
        show()
    except KeyboardInterrupt:
        said, code = said or (finished() if callable(finished) else finished), ExitCode.INTERRUPTED
    if said is not None:
        say_interrupted(*said)
    return code


def where_stored(db: str, run_id: int) -> str:
    """The run's last line: where its cells are, and the commands that show them again (a sweep of minutes ended with
    its table and no word of the store it went to); then, where this machine measured its cells before, the command
    that compares the two runs."""
    import shlex

    from dlperf.report.compare_side import compare_hint
    from dlperf.store.location import db_words, program

    report = f"{program()} {shlex.join(['report', '--run', str(run_id), *db_words(db), '-o', f'run{run_id}.html'])}"
    again = see_it(db, run_id).removeprefix("See it with: ")
    stored = f"stored as run {run_id} in {db}: {again} shows it again, {report} draws it"
    return "\n".join([stored, *compare_hint(db, run_id)])


def see_it(db: str, run_id: int, *flags: str) -> str:
    """What shows a stored run again: its table."""
    import shlex

    from dlperf.store.location import db_words, program

    return f"See it with: {program()} {shlex.join(['table', '--run', str(run_id), *flags, *db_words(db)])}"


def stored_cells(db: str, run_id: int, profiled: bool = False, unstored: str | None = None) -> str:
    """What an interrupted run kept, counted from its store: '2 of 4 cells measured are stored in run 3' (`profiled`:
    '..., 1 of them profiled, ...'), or that none was, the run holding its plan for --resume; `unstored`: why its
    status could not be stored (`RunInterrupted.unstored`), said after it."""
    from dlperf.errors import unstored_note

    return _stored_cells(db, run_id, profiled) + unstored_note(unstored)


def _stored_cells(db: str, run_id: int, profiled: bool) -> str:
    from dlperf.measure.units import agreeing, plural
    from dlperf.store import Store
    from dlperf.store.state import run_state
    from dlperf.vocab import Status

    try:
        store = Store.open(db, create=False)
    except UsageError:  # gone or unreadable since: the count is not to be had, the line still is
        return f"what had finished is stored in run {run_id}"
    try:
        cells, profiles = store.cells(run_id, unreadable=lambda exc: None), store.profiles(run_id)
        left = run_state(store, store.run(run_id)).left
    finally:
        store.close()
    done = sum(c.status != Status.PENDING for c in cells)
    if not done:
        return f"no cell was measured yet: run {run_id} holds its plan of {plural(len(cells), 'cell')}"
    failed = sum(c.status.is_failure for c in cells)  # "8 of 14 cells measured" counted a failed one as measured
    parts = [f"{len(profiles)} of them profiled"] * profiled + [f"{failed} of them failed"] * bool(failed)
    them = f", {', '.join(parts)}," if parts else ""
    if left.repeats > 1:  # a cell is measured once its first process is: "2 of 2 cells measured" read as whole
        return (f"{left.text()} ({done} of {plural(len(cells), 'cell')} measured at least once{them.rstrip(',')}), "
                f"stored in run {run_id}")  # fmt: skip
    return f"{done} of {plural(len(cells), 'cell')} measured{them} {agreeing(done, 'is', 'are')} stored in run {run_id}"


def say_interrupted(stored: str, then: str) -> None:
    """An interrupted command's last line (it exits 130): what is stored, and what to do next."""
    from dlperf.report.format import terminal

    print(terminal(f"dlperf: interrupted; {stored}. {then}"), file=sys.stderr)


def again() -> str:
    """This command line, to run it again as typed (a search cannot be resumed: it starts over)."""
    from dlperf.commands.common import as_typed

    return as_typed(["dlperf", *sys.argv[1:]])


def show_resumed(db: str, run_id: int) -> None:
    """A resumed run, finished, shown as the command that began it shows it: a `dlperf crossover` run its crossover, a
    `dlperf profile` run its profiles; any other its table (`dlperf fit` and `optimize` choose each cell from the
    ones before: their runs cannot be resumed as searches)."""
    from dlperf.commands.table import print_table
    from dlperf.crossover import cell_notes
    from dlperf.report.crossover import read
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        argv, crossovers = store.run(run_id).argv, read(store, [run_id])
        notes = cell_notes(store, run_id) if crossovers else []  # the steps it rests on, as the crossover says them
    finally:
        store.close()
    command, fmt = stored_command(argv)
    if command == "profile":
        print_profiles(db, run_id, fmt)  # in the form it asked for: a script reading `--format json` gets JSON
    elif crossovers:
        print_answer(crossovers[0], notes, run_id)
    else:
        print_table(db, run_id, "text")
        print(where_stored(db, run_id))


def stored_command(argv: list[str]) -> tuple[str | None, str]:
    """A stored command line's subcommand and the --format it asked for ('text' where it gave none), read by the
    parser that read it (`commands.build_parser`): the store put first (`dlperf --db X profile ...`) or
    `--format=json` included. A Python caller's own command line (api.run stores its sys.argv), or one this
    dlperf's parser no longer takes, reads as no command."""
    from dlperf.commands import build_parser

    if argv[:1] != ["dlperf"]:  # the commands store theirs as `dlperf ...` (`python -m dlperf` too)
        return None, "text"
    try:
        known, _ = build_parser().parse_known_args(argv[1:])
    except UsageError:
        return None, "text"
    return known.command, getattr(known, "format", None) or "text"


def print_answer(answer, notes: list[str], run_id: int) -> None:
    """A crossover's table (`dlperf crossover`), its answer and its notes."""
    from rich.table import Table

    from dlperf.commands.common import print_rich
    from dlperf.report.crossover import legend, table_rows

    head, rows = table_rows(answer)
    table = Table(title=f"{answer.workload} ({answer.mode}): one training step, this CPU against GPUs, at each batch")
    for name in head:
        table.add_column(name, justify="left" if name == "GPU" else "right")  # a row per GPU: `crossover.oriented`
    for row in rows:
        table.add_row(*row)
    stored = f"stored as run {run_id}; GPU steps include the batch's copy over the host link"
    print_rich(table, lines=[*legend(answer), *answer.lines()], notes=[*notes, stored])


def print_profiles(db: str, run_id: int, fmt: str = "text") -> bool:
    """Per cell: its timed median, the categories' shares, the verdict with its figure, the modes to try, the
    achieved rates against the measured peaks, the dispatch floor, the profiler's overhead and the trace
    (`report.cell_profile.CellProfile`; `fmt` json: the same figures as one JSON document). Whether a cell's profile
    failed or timed out (`dlperf profile` exits 1 then); one that does not apply (`unsupported`) is no failure, as
    an unsupported cell is none."""
    import json

    from dlperf.report.cell_profile import run_profiles
    from dlperf.report.format import terminal
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        said, busy = run_profiles(store, store.run(run_id))
    finally:
        store.close()
    if fmt == "json":
        print(json.dumps({"run_id": run_id, "cells": [s.to_json() for s in said], "notes": busy}, indent=2))
    else:
        for line in [*(line for s in said for line in s.lines()), *(f"note: {note}" for note in busy)]:
            print(terminal(line))
    return any(s.profile is not None and s.profile.status.is_failure for s in said)
