"""`dlperf fit`: the largest batch that trains without running out of memory on this device, each try measured in
its own child process and stored as a cell of one run; per mode."""

from __future__ import annotations

import argparse
import json
import sys

from dlperf.commands.common import add_format, batch, db_path, given, real, warn_if_measured, whole
from dlperf.commands.run import add_timer_flags, again, printed, see_it, stored_cells, timer
from dlperf.vocab import ExitCode

HELP = "the largest batch that trains without running out of memory on this device, measured"
DESCRIPTION = (
    "Trains the workload at its batch, then at double that until a try runs out of memory, then bisects between the "
    "last batch that fit and the first that did not: the answer N was measured and N+1 ran out of memory. From the "
    "second batch that fits, the tries' peak memory says where the limit would be reached, and the search tries there "
    "rather than doubling step by step; it says before its first try the most tries it makes (those of the doubling "
    "and bisection), and its progress counts down to the most it can still make ([3/≤19]). Each try is "
    "its own child process, so running out of memory fails only that try; it is stored as a cell of one run (named "
    "WORKLOAD@bN: dlperf table, report and export see them), out-of-memory tries as failed with the reason 'out of "
    "memory at batch N'. On the CPU each try's memory is limited (--max-memory, or the memory available when fit "
    "starts) for its first steps, which say whether it fits, and lifted before its steps are timed; a try whose "
    "memory grows past the limit over its timed steps (a cache that fills) does not fit either. On a GPU the limit "
    "is its own memory. Prints, per mode, the largest batch that fits and each batch tried with its peak "
    "memory, median step, timed steps and samples/s, a rate marked ~ when its steps were timed while other "
    "processes used the CPUs or varied widely (the notes under the table)."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from dlperf.defaults import FIT_MAX_BATCH, FIT_TIMING

    p.add_argument("workload", nargs="?", help="a built-in workload (dlperf list) or a user's file.py:factory")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps (default: cpu)")
    p.add_argument("--gpu", metavar="NAME", type=given("--gpu", "a GPU name"),
                   help="refused: fit measures a device this machine has; dlperf predict WORKLOAD --memory --gpu NAME "
                   "predicts the largest batch on a GPU it has not")  # fmt: skip
    p.add_argument("--modes", default="fp32", help="comma list of modes, each searched on its own (default: fp32)")
    p.add_argument(
        "--max-memory",
        metavar="SIZE",
        help="CPU only: each try's memory limit (its data segment, RLIMIT_DATA), e.g. 2GiB, 512M, 500MB (default: "
        "the memory available when fit starts)",
    )
    p.add_argument(
        "--max-batch",
        type=batch("--max-batch"),
        default=FIT_MAX_BATCH,
        help=f"try no batch above this (default: {FIT_MAX_BATCH})",
    )
    p.add_argument("--threads", type=whole("--threads", 1), help="CPU threads of each try (default: the cores)")
    p.add_argument("--timeout", type=real("--timeout"), default=300.0, help="seconds per try (default: 300)")
    add_timer_flags(p, **FIT_TIMING)
    add_format(p, "text", "json")


def run(args) -> int:
    from dlperf import fit
    from dlperf.errors import UsageError
    from dlperf.flagtext import parse_size, split_list

    if not args.workload:
        raise UsageError("dlperf fit WORKLOAD [--device cpu|cuda:N] [--modes M,...] [--max-memory SIZE]")
    if args.gpu is not None:
        import shlex  # `--gpu 'RTX 4090'` quoted, so the command runs as printed

        predict = shlex.join(["dlperf", "predict", args.workload, "--memory", "--gpu", args.gpu])
        raise UsageError(f"--gpu: dlperf fit measures a device this machine has (--device cuda:N); for a GPU it has "
                         f"not: {predict} predicts its largest batch")  # fmt: skip
    opts = fit.Options(
        args.workload,
        device=args.device.lower(),
        modes=tuple(split_list(args.modes, "--modes")),
        max_memory=None if args.max_memory is None else parse_size(args.max_memory, "--max-memory"),
        max_batch=args.max_batch,
        threads=args.threads,
        timeout=args.timeout,
        timer=timer(args),
        flags=True,  # errors and notes name the flags
    )
    db = db_path(args)
    warn_if_measured(db)
    result = fit.fit(opts, db, argv=["dlperf", *sys.argv[1:]])
    shown = (lambda: print(json.dumps(as_json(result), indent=2))) if args.format == "json" else (lambda: show(result))
    kept = stored_cells(db, result.run_id) if result.exit_code == ExitCode.INTERRUPTED else ""  # counted: none, maybe
    stopped = (kept, f"To finish the search, run it again (it starts over): {again()} (dlperf run --resume would "
               "not go on with the search)")  # fmt: skip
    finished = (f"the search is complete and its tries are stored in run {result.run_id}", see_it(db, result.run_id))
    return printed(shown, result.exit_code, finished=finished, interrupted=stopped)


def as_json(result) -> dict:
    return {
        "run_id": result.run_id,
        "limit": result.limit,
        "modes": {m: a.to_json() for m, a in result.answers.items()},
        "notes": result.notes,
    }


DISTURBED_MARK = "~"  # a rate timed while other processes took the CPUs, or of widely varying steps


def show(result) -> None:
    from dlperf.commands.common import print_rich

    for mode, answer in result.answers.items():
        if not answer.tries:  # interrupted before one finished: a table would read as "nothing fits"
            print(headline(answer))
            continue
        table, legends, timing = tries_table(mode, answer.tries)
        print_rich(table, lines=[f"limit: {result.limit}", *legends, headline(answer)], notes=timing)
    print_rich("", notes=result.notes)


def tries_table(mode: str, tries: list):
    """A mode's tries as a table, the legends of the marks it shows, and what dlperf run notes of each rate's
    timing (other processes' load, noise, few steps), one line per kind naming its batches."""
    from rich.table import Table

    from dlperf.measure.stats import FEW_SAMPLES, few
    from dlperf.measure.units import seconds
    from dlperf.report.fit import fits_said
    from dlperf.report.format import figure, nbytes
    from dlperf.report.notes import grouped
    from dlperf.report.table import FEW_MARK

    def marks(t) -> str:  # 0 steps: no rate to mark
        rated = t.samples_per_s is not None
        return (FEW_MARK if rated and few(t.steps or None) else "") + (DISTURBED_MARK if rated and t.disturbed else "")

    table = Table(title=f"{mode}: each batch tried, in order")  # the limit below: a long title folds mid-phrase
    for name in ("batch", "fits", "peak memory", "median step", "n", "samples/s"):
        table.add_column(name, justify="right")
    for t in tries:
        fits = fits_said(t.status == "ok", t.fitted, t.out_of_memory, t.status)
        # three significant figures, as every view's rate: 198,527.2~ claimed seven of a disturbed one
        rate = "-" if t.samples_per_s is None else f"{figure(t.samples_per_s)}{marks(t)}"
        steps = str(t.steps) if t.samples_per_s is not None else "-"
        table.add_row(str(t.batch), fits, nbytes(t.peak_mem_bytes), seconds(t.median_s), steps, rate)
    shown = "".join(marks(t) for t in tries)
    legends = {
        FEW_MARK: f"a rate of fewer than {FEW_SAMPLES} timed steps: a fit test, not a figure to rely on",
        DISTURBED_MARK: "not this batch's own speed, nor a rate to compare batches by (notes below): timed while "
        "other processes used the CPUs, or of widely varying steps",
    }
    said = [f"{mark} = {legend}" for mark, legend in legends.items() if mark in shown]
    return table, said, grouped([(f"batch {t.batch}", w) for t in tries for w in t.timing])


def headline(answer) -> str:
    """The answer in one line: the largest batch, and what the next one did."""
    from dlperf.fit import UNSUPPORTED

    if answer.ended == "nothing fits":
        return f"{answer.mode}: no batch fits: batch 1 runs out of memory"
    if answer.ended == "max-batch":
        return f"{answer.mode}: every batch tried fits, up to --max-batch {answer.largest}"
    if answer.ended == "boundary":
        return (f"{answer.mode}: the largest batch that fits is {answer.largest}; batch {answer.largest + 1} runs "
                "out of memory")  # fmt: skip
    if answer.ended == "interrupted":
        return interrupted(answer)
    if answer.ended.startswith(UNSUPPORTED):
        return f"{answer.mode}: {answer.ended}"
    found = f"the largest batch that fit so far is {answer.largest}" if answer.largest else "no batch fit so far"
    return f"{answer.mode}: the search stopped, {answer.ended}; {found}"


def interrupted(answer) -> str:
    """An interrupted mode's line: how far its search had got, never read as "no batch fits"."""
    if not answer.tries and answer.trying is None:
        return f"{answer.mode}: not searched: interrupted before its first try"
    during = f" during its try of batch {answer.trying}" if answer.trying else ""
    if answer.largest:
        found = f"the largest batch that fit so far is {answer.largest}"
    elif answer.tries:
        found = f"every batch tried so far ran out of memory ({', '.join(str(t.batch) for t in answer.tries)})"
    else:
        found = "no try had finished, so whether any batch fits is not known yet"
    return f"{answer.mode}: the search stopped, interrupted{during}; {found}"
