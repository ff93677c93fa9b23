"""`dlperf list`: the workloads, or with --frameworks every framework of the paper and today's, measurable here or
why not, or with --parallel every strategy of a multi-process cell (and Horovod), what each rank holds and whether it
is measurable here, or with --runs the runs a store holds (their ids, for --run, compare and report), with --peaks
and --comm the figures of machines it holds (`dlperf peak`'s and `dlperf comm`'s, read back without measuring)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import Any

from dlperf.commands.common import add_format, db_path
from dlperf.vocab import ExitCode

HELP = (
    "the workloads, or with --frameworks the frameworks, with --parallel the strategies of --nproc cells, or "
    "with --runs the runs of --db, with --peaks or --comm the machine figures it holds"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_format(p, "text", "json")
    what = p.add_mutually_exclusive_group()  # one list at a time
    what.add_argument(
        "--all",
        action="store_true",
        help="also the tiny test variants (tiny-*: for the tests and quick examples), left out without it",
    )
    what.add_argument(
        "--frameworks", action="store_true", help="every framework of the paper and today: measurable here or why not"
    )
    what.add_argument(
        "--parallel",
        action="store_true",
        help="every strategy of --parallel (and Horovod): what each rank holds, measurable here or why not",
    )
    what.add_argument(
        "--runs", action="store_true", help="the runs of --db: id, start, status, cells, the command and the machine"
    )
    what.add_argument(
        "--peaks",
        action="store_true",
        help="the peaks `dlperf peak` stored in --db, the latest of each per machine (json: every one)",
    )
    what.add_argument(
        "--comm",
        action="store_true",
        help="the all-reduce jobs `dlperf comm` stored in --db, one line each (json: every size)",
    )


def run(args) -> int:
    from dlperf.measure.units import plural
    from dlperf.workloads import BUILTIN, PUBLISHED

    if args.frameworks:
        return list_frameworks(args.format)
    if args.parallel:
        return list_parallel(args.format)
    if args.runs:
        return list_runs(db_path(args), args.format)
    if args.peaks or args.comm:
        return (list_peaks if args.peaks else list_comm)(db_path(args), args.format)
    published = {w.name for w in PUBLISHED}
    workloads = [w for w in BUILTIN.values() if args.all or not w.hidden]
    if args.format == "json":
        rows = [
            {"name": w.name, "params": w.params, "batch": w.batch, "data": w.data, "input": list(w.input.shape),
             "outputs": w.outputs, "paper": w.paper, "published": w.name in published}
            for w in workloads
        ]  # fmt: skip
        print(json.dumps(rows, indent=2))
        return ExitCode.OK
    from dlperf.commands.common import print_rich

    left_out = [w for w in BUILTIN.values() if w.hidden and not args.all]
    tiny = f"{plural(len(left_out), 'tiny test variant')} (tiny-*, for the tests and quick examples) not shown: "
    ours = _workloads(w for w in workloads if w.name not in published)
    print_rich(ours, lines=["", DATA_LINE, "", PUBLISHED_HEADING])
    tail = ["", f"{tiny}dlperf list --all lists them"] if left_out else []
    print_rich(_workloads(w for w in workloads if w.name in published), lines=tail)
    return ExitCode.OK


PUBLISHED_HEADING = "published networks (for dlperf predict --validate)"
DATA_LINE = (
    "its data: the data set it was published with. A run trains on one random batch of that input's shape, made "
    "once and reused, or reads the real files with --data DIR (dlperf data synth DIR writes them)"
)


def columns(head: list[str], rows: list[list[str]], right: tuple[str, ...] = (), first: int | None = None) -> Any:
    """A list's rows as a table without lines, two spaces between its columns: printed by `print_rich`, it fits the
    terminal (its text wrapped between words, in parts where it must), and in a pipe each row is one line to grep.
    `first`: the first column's width at least (tables printed one under another, their columns aligned)."""
    from rich.table import Table
    from rich.text import Text

    from dlperf.report.format import terminal

    table = Table(box=None, pad_edge=False, header_style="bold", show_header=any(head))
    for i, name in enumerate(head):  # the first, a row's name, never wrapped
        table.add_column(
            name, justify="right" if name in right else "left", no_wrap=i == 0, min_width=first if i == 0 else None
        )
    for row in rows:
        table.add_row(*(Text(terminal(v)) for v in row))
    table.one_row_a_line = True  # read by `print_rich`: in a pipe no column wraps (horovod's reason was 3 lines)
    return table


def _workloads(workloads) -> Any:
    from dlperf.report.format import count

    rows = [[w.name, str(w.batch), w.data, "x".join(map(str, w.input.shape)), str(w.outputs), count(w.params)]
            for w in workloads]  # fmt: skip
    head = ["workload", "batch", "its data", "input", "outputs", "parameters"]
    return columns(head, rows, right=("batch", "outputs", "parameters"))


def list_frameworks(fmt: str) -> int:
    from dlperf.envs import KNOWN_FRAMEWORKS, framework_status

    rows = [framework_status(name) for name in KNOWN_FRAMEWORKS]
    modes = {r.name: backend_modes(r.name) for r in rows}
    if fmt == "json":
        print(json.dumps([asdict(r) | {"modes": modes[r.name]} for r in rows], indent=2))
        return ExitCode.OK
    from dlperf.commands.common import print_rich
    from dlperf.frameworks.common.capabilities import ALLOCATORS
    from dlperf.modes import ROWS

    listed = [[r.name, "yes" if r.paper else "", "available" if r.available else "no",
               f"{r.version or '?'} ({r.environment} environment)" if r.available else r.reason or ""]
              for r in rows]  # fmt: skip
    allocators = [row.mode.value for row in ROWS if row.mode in ALLOCATORS]  # in the modes table's order
    said = f"the modes each backend runs (--modes; each also the allocator's: {', '.join(allocators)}):"
    print_rich(columns(["framework", "in the paper", "here", "version and environment / why not"], listed),
               lines=["", said])  # fmt: skip
    runs = [[name, ", ".join(m for m in runs if m not in allocators)] for name, runs in modes.items() if runs]
    print_rich(columns(["backend", "modes"], runs))
    return ExitCode.OK


def backend_modes(framework: str) -> list[str] | None:
    """The mode components a framework's backend implements, in the modes table's order; None for a framework
    dlperf has no backend for (one listed with the reason it cannot be measured)."""
    from dlperf.frameworks.common import capabilities
    from dlperf.modes import ROWS
    from dlperf.vocab import Framework

    if framework not in {f.value for f in Framework}:
        return None
    implemented = capabilities.of(framework).modes
    return [row.mode.value for row in ROWS if row.mode in implemented]


# What a strategy of processes (started by torchrun) needs, not asked of torch here: a probe would import it
# (seconds) for a listing.
TORCH_DISTRIBUTED = "needs torch.distributed (gloo on CPUs, NCCL on GPUs), checked when a cell starts"


@dataclass(frozen=True)
class StrategyRow:
    """A strategy of `--parallel`, or a library listed but not measured, as `dlperf list --parallel` shows it."""

    name: str
    frameworks: list[str]
    engine: str  # the framework's own machinery that runs it
    splits: str  # what each rank (or replica) holds
    scalings: list[str]  # the --scaling protocols it takes
    processes: bool  # one process per rank; False: replicas in one process
    pipeline: bool  # takes --microbatches
    measurable: bool  # here, now
    needs: str | None  # what it needs beyond its framework, checked when a cell starts
    reason: str | None  # why it is not measurable


def strategy_rows() -> list[StrategyRow]:
    """Each strategy of `--parallel`, then each library dlperf lists but does not measure, with whether it can be
    measured here (its framework found without importing it) and why not."""
    from dlperf.envs import framework_status
    from dlperf.parallel import NOT_MEASURED, STRATEGIES

    rows = []
    for s in STRATEGIES.values():
        status = framework_status(s.framework)
        rows.append(StrategyRow(
            name=str(s.name), frameworks=[s.framework], engine=s.engine, splits=s.splits, scalings=list(s.scalings),
            processes=s.processes, pipeline=s.pipeline, measurable=status.available,
            needs=TORCH_DISTRIBUTED if s.processes and s.launcher == "torchrun" else None,
            reason=None if status.available else f"{s.framework}: {status.reason}",
        ))  # fmt: skip
    for lib in NOT_MEASURED.values():
        status = framework_status(lib.name)
        reason = status.reason if not status.available else "installed, but dlperf has no strategy for it"
        rows.append(StrategyRow(
            name=lib.name, frameworks=list(lib.frameworks), engine=lib.engine, splits=lib.splits, scalings=[],
            processes=True, pipeline=False, measurable=False, needs=None, reason=reason,
        ))  # fmt: skip
    return rows


def list_parallel(fmt: str) -> int:
    rows = strategy_rows()
    if fmt == "json":
        print(json.dumps([asdict(r) for r in rows], indent=2))
        return ExitCode.OK
    from dlperf.commands.common import print_rich

    labels = ["  engine", "  each rank", "  each replica", "  here"]
    for r in rows:  # a table each, under its heading: the values aligned by the first column's width
        scalings = f"; --scaling {', '.join(r.scalings)}" if r.scalings else ""
        micro = "; --microbatches" if r.pipeline else ""
        here = "measurable" + (f"; {r.needs}" if r.needs else "") if r.measurable else f"no: {r.reason}"
        holds = "  each rank" if r.processes else "  each replica"
        said = [["  engine", r.engine], [holds, r.splits], ["  here", here]]
        print_rich(None, lines=[f"{r.name} ({', '.join(r.frameworks)}{scalings}{micro})"])
        print_rich(columns(["", ""], said, first=max(map(len, labels))))
    return ExitCode.OK


def list_runs(db: str, fmt: str) -> int:
    """Every run of the store, oldest first: its id (what --run, compare and report take), when it started, its
    state (`store/state.py`: a run whose process is gone is stopped, not running) and what of it is done and left,
    its cells by status, the command that made it and the machine (`report/run_list.py`); a merged run says where it
    came from."""
    from dlperf.measure.units import plural
    from dlperf.report.run_list import cells_text, continued_by, run_row, status_text
    from dlperf.store import Store
    from dlperf.store.state import run_states

    store = Store.open(db, create=False)
    try:
        states, counts, oom = run_states(store), store.cell_counts(), store.out_of_memory_counts()
        held = None if states else store.held_figures()
    finally:
        store.close()
    later = continued_by([s.run for s in states.values()])
    rows = [run_row(s, counts.get(s.run.id, {}), later.get(s.run.id), oom.get(s.run.id, 0)) for s in states.values()]
    if fmt == "json":
        print(json.dumps(rows, indent=2))
        return ExitCode.OK
    from rich.table import Table
    from rich.text import Text

    from dlperf.commands.common import print_rich
    from dlperf.report.format import terminal

    if not rows:  # an empty table titled "0 runs" said nothing of what to do
        held_said = f"; it holds {held}" if held else ""
        print(f"no runs in {terminal(db)}{held_said}: `dlperf run` measures one")
        return ExitCode.OK
    table = Table(title=f"{plural(len(rows), 'run')} in {terminal(db)}")
    for name in ("run", "started", "status", "cells", "command", "machine"):
        table.add_column(name, justify="right" if name == "run" else "left", overflow="fold")
    for r in rows:
        cells = cells_text(r)
        started = r["started"][:19].replace("T", " ")
        machine = r["machine"] + (f" (merged from {r['merged_from']})" if r["merged_from"] else "")
        table.add_row(*(Text(terminal(str(v))) for v in (r["run"], started, status_text(r), cells, r["command"],
                                                            machine)))  # fmt: skip
    print_rich(table, lines=[f"it holds {held}"] if held else [])
    return ExitCode.OK


def list_peaks(db: str, fmt: str) -> int:
    """The peaks of the store (`report/machine_figures.py`): in text the latest of each figure, one table per machine
    and framework version; in JSON every stored row."""
    from dlperf.report.machine_figures import latest_peaks, peak_json, peak_line

    rows = _read(db, lambda store: store.peaks(), "dlperf peak")
    if fmt == "json":
        print(json.dumps([peak_json(r) for r in rows], indent=2))
        return ExitCode.OK
    from rich.table import Table

    from dlperf.commands.common import print_rich
    from dlperf.measure.units import plural
    from dlperf.report.format import terminal

    latest, earlier = latest_peaks(rows)
    lines = [peak_line(r) for r in latest]
    said = [f"{plural(len(rows), 'peak')} in {db}" if rows else f"no peaks in {db}: `dlperf peak` measures them"]
    if earlier:
        said[0] += f"; {plural(earlier, 'earlier figure')} superseded by later ones (--format json lists every one)"
    if any(line.note.startswith("busy") for line in lines):
        said.append(
            "busy: measured while other processes used that share of the CPUs (steal: other virtual "
            "machines), so it reads low; the views hold a step against a quiet peak where one exists"
        )
    groups = list(dict.fromkeys((line.machine, line.framework) for line in lines))
    for i, (machine, framework) in enumerate(groups):
        table = Table(title=terminal(f"Peaks of {machine} ({framework})"))
        for name in ("device", "threads", "figure", "value", "unit", "measured", "note"):
            table.add_column(name, justify="right" if name in ("threads", "value") else "left", overflow="fold")
        for line in (x for x in lines if (x.machine, x.framework) == (machine, framework)):
            table.add_row(line.device, str(line.threads), line.figure, line.value, line.unit,
                          line.measured_at[:16].replace("T", " "), terminal(line.note))  # fmt: skip
        print_rich(table, lines=said if i == len(groups) - 1 else [])
    if not groups:
        print(terminal(said[0]))
    return ExitCode.OK


def list_comm(db: str, fmt: str) -> int:
    """The `dlperf comm` jobs of the store, newest first: one line each in text, every size in JSON."""
    from dlperf.report.machine_figures import comm_jobs

    rows = _read(db, lambda store: store.comm_results(), "dlperf comm")
    if fmt == "json":
        print(json.dumps([job.to_json() for job in comm_jobs(rows)], indent=2))
        return ExitCode.OK
    from rich.table import Table

    from dlperf.commands.common import print_rich
    from dlperf.measure.units import plural, seconds
    from dlperf.report.format import nbytes, terminal
    from dlperf.report.machine_figures import value_text

    jobs = comm_jobs(rows)
    if not jobs:
        print(f"no all-reduce figures in {terminal(db)}: `dlperf comm` measures them")
        return ExitCode.OK
    table = Table(title=terminal(f"{plural(len(jobs), 'all-reduce job')} in {db} (`dlperf comm`), newest first"))
    for name in ("measured", "machine", "job", "sizes", "largest", "busbw GB/s", "#wrong"):
        table.add_column(name, justify="right" if name in ("largest", "busbw GB/s", "#wrong") else "left")
    for job in jobs:
        each = f"{plural(job.world, 'process', 'es')}{f' on {job.nnodes} nodes' if job.nnodes > 1 else ''}"
        busbw = " / ".join("-" if v is None else value_text(v / 1e9) for v in (job.busbw_largest, job.busbw_mean))
        table.add_row(
            job.measured_at[:16].replace("T", " "), terminal(job.machine),
            f"{job.backend} on {job.device}, {each}, {plural(job.threads, 'thread')} each",
            f"{job.sizes}: {nbytes(job.smallest)} to {nbytes(job.largest)}",
            "-" if job.time_largest_s is None else seconds(job.time_largest_s), busbw, str(job.wrong),
        )  # fmt: skip
    lines = ["largest: one all-reduce of the largest size; busbw: the bus bandwidth of the largest size / the mean "
             "over the sizes (`--format json` lists every size)"]  # fmt: skip
    print_rich(table, lines=lines)
    return ExitCode.OK


def _read(db: str, read, made_by: str):
    """What `read` reads of the store `db`, which `made_by` (the command that stores such figures) would have made."""
    from dlperf.store import Store

    store = Store.open(db, create=False, made_by=made_by)
    try:
        return read(store)
    finally:
        store.close()
