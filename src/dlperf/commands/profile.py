"""`dlperf profile WORKLOAD`: measure the given cells, then profile each in one untimed process, and say where its
step time goes, what bounds it (`report/profile.py`) and which modes to try. A run like `dlperf run --profile`: same
store, same run table."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from dlperf.commands.common import add_format, db_path, given, real, warn_if_measured, whole, whole_list
from dlperf.commands.run import (  # print_profiles: `dlperf run --resume` prints it too
    add_data_flags,
    add_nvtx_flag,
    add_timer_flags,
    add_trace_cap_flag,
    print_profiles,
    printed,
    say_interrupted,
    see_it,
    stored_cells,
    timer,
)
from dlperf.defaults import MAX_PROFILE_STEPS
from dlperf.vocab import ExitCode

if TYPE_CHECKING:
    from dlperf.measure.timer import TimerConfig

# the allowance beyond --max-time, per cell, besides its processes' start-up (stated in --help and README):
ALLOWANCE_STEPS = 6  # the step under way as each third runs out (3), a second profiled one (1), FLOPs, memory (2)
PROCESS_END_S = 1.0  # a process's end: the trace written (a small model's), the interpreter's exit, the parent's
HELP = "measure and profile a workload's cells: where the step time goes, what bounds it, what to try"
DESCRIPTION = (
    f"{HELP}. --max-time bounds each cell's steps: a third for the warm-up, a third for the timed steps and a third "
    "for the profiled steps, fewer than --steps when the timed median says they would not fit (at least one). "
    "Beyond it, the allowance: per cell, its two processes' start-up (the interpreter, the framework's import, the "
    f"model's build), at most {ALLOWANCE_STEPS} steps more (the one under way as each third runs out, a warm-up and "
    "a profiled step when even one does not fit, the FLOP count's and the memory's) and about "
    f"{PROCESS_END_S:g} s a process to end it and write its trace; before the first cell, the planning probe."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workload", help="a built-in name, or path/file.py:factory, or module:factory (at another "
                   "batch: NAME@bN)")  # fmt: skip
    p.add_argument("--framework", "--frameworks", dest="framework", default="torch",
                   help="comma list, as for run --frameworks (default: torch)")  # fmt: skip
    p.add_argument("--device", help="cpu, cuda, cuda:N or mps (default: cpu and every visible GPU)")
    p.add_argument("--threads", type=whole_list("--threads"), help="CPU thread counts, e.g. 1,2 (default: 1, 2, ...)")
    p.add_argument("--modes", default="fp32", help="comma list of modes, as `dlperf run --modes` (default: fp32)")
    add_data_flags(p)  # a loader cell's profile puts its wait for each batch under `data`
    p.add_argument("--steps", type=whole("--steps", 1, most=MAX_PROFILE_STEPS), default=5,
                   help=f"profiled steps after warm-up, 1 to {MAX_PROFILE_STEPS} (default: 5)")  # fmt: skip
    p.add_argument("--trace-dir", type=given("--trace-dir", "a directory"),
                   help="where the gzip Chrome traces go (default: beside the database, <db>.traces)")  # fmt: skip
    add_trace_cap_flag(p)
    p.add_argument("--timeout", type=real("--timeout"), default=600.0, help="seconds per process (default: 600)")
    add_timer_flags(p, min_steps=10, min_time=0.5, max_time=10.0, max_warmup=30)
    max_time = next(a for a in p._actions if a.dest == "max_time")
    max_time.help = "seconds of each cell's steps at most: warm-up, timed and profiled, a third each (default: 10)"
    add_nvtx_flag(p)
    add_format(p, "text", "json", help="text, or json: per cell its step, each category's seconds and share, the "
               "verdict, the modes to try, the trace (default: text)")  # fmt: skip


def run(args) -> int:
    from dlperf.store.location import said_as

    with said_as("--db"):  # the store's lines name --db, as the command line's, in the Python API it calls too
        return _run(args)


def _run(args) -> int:
    from dlperf import api
    from dlperf.errors import RunInterrupted
    from dlperf.spec import check_profilable, parse_frameworks, parse_one_workload
    from dlperf.store.location import resume_command

    parse_one_workload(args.workload)  # a misspelt WORKLOAD is named as what it is, not as --workloads
    check_profilable(parse_frameworks(args.framework), lambda name: f"--framework {name}")  # not run's --profile
    db = db_path(args)
    warn_if_measured(db)
    try:
        outcome = api.run(
            args.workload, db=db, argv=["dlperf", *sys.argv[1:]], frameworks=args.framework, devices=args.device,
            threads=args.threads, modes=args.modes, data=args.data, loaders=args.loaders, timeout=args.timeout,
            loss_check=False, timer=thirds(timer(args)),
            profile=True, profile_steps=args.steps, trace_dir=args.trace_dir, nvtx=args.nvtx,
            max_trace_mib=args.max_trace_mib,
        )  # fmt: skip
    except RunInterrupted as stopped:
        stored = stored_cells(db, stopped.run_id, profiled=True, unstored=stopped.unstored)
        say_interrupted(stored, f"Continue with: {resume_command(db)} "
                        "(it measures and profiles the cells left, then prints every cell's profile)")  # fmt: skip
        return ExitCode.INTERRUPTED
    finished = (f"run {outcome.run_id} is complete and stored", see_it(db, outcome.run_id, "--explain"))
    failed: list[int] = []

    def show() -> None:
        failed.append(ExitCode.CELLS_FAILED if print_profiles(db, outcome.run_id, args.format) else ExitCode.OK)

    code = printed(show, outcome.exit_code, finished=finished)
    return code if code == ExitCode.INTERRUPTED else max([code, *failed])


def thirds(timer: TimerConfig) -> TimerConfig:
    """The timer of a profiled cell's processes: its warm-up and its timed steps each stop at a third of --max-time
    (the timer's rule: each at the first step past it), and the profile child's steps are fitted to the last third
    (`runner/profile.steps_that_fit`)."""
    third = timer.max_time / 3
    return replace(timer, max_time=third, min_time=min(timer.min_time, third))
