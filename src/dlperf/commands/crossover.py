"""`dlperf crossover`: from which batch a GPU is predicted faster than this CPU: the CPU measured and stored as a
run, batch by batch at its best thread count, each GPU predicted beside it (or measured, where the store holds a CUDA
cell of the workload at that batch); `--paper`: the predictor's GTX 1080 against the paper's own figures."""

from __future__ import annotations

import argparse
import sys

from dlperf.commands.common import (
    batch,
    batch_list,
    choice,
    db_path,
    given,
    given_flags,
    real,
    warn_if_measured,
    whole,
)
from dlperf.commands.output import replacing
from dlperf.commands.predict import GPU_SPECS_HELP
from dlperf.commands.run import Said, add_timer_flags, again, print_answer, printed, see_it, stored_cells, timer
from dlperf.errors import UsageError
from dlperf.vocab import ExitCode

HELP = "from which batch a GPU is predicted faster: this CPU measured against GPUs predicted (or measured)"
DESCRIPTION = (
    "Measures the workload on this CPU at each batch (powers of two up to the workload's batch or 256, whichever is "
    "larger), at the fastest thread count (found at your batch first, unless --threads names it), stored as a run. "
    "Each GPU's step at each batch is predicted from its published figures (dlperf predict), including the batch's "
    "copy over the host link, and stored beside the CPU cell; a CUDA cell of the same workload and batch in the store "
    "(a GPU machine's run merged in) is used instead. Prints the steps, the batch from which each GPU is predicted "
    "faster (with what bounds it and the predictor's uncertainty) and the "
    "speed-up at your batch. --paper: the paper's seven networks predicted on its GTX 1080, beside its own figures."
)
MODES = ("fp32", "bf16", "fp16")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workload", nargs="?", help="a built-in workload (dlperf list) or a user's file.py:factory")
    from dlperf.defaults import BRACKET, BRACKET_HELP, CROSSOVER_TIMING

    p.add_argument(
        "--gpu",
        default=",".join(BRACKET),
        help=f"comma list of GPUs of the table (dlperf predict --list-gpus; {BRACKET_HELP})",
    )
    p.add_argument("--gpu-specs", metavar="FILE.csv", help=GPU_SPECS_HELP)
    p.add_argument(
        "--batches",
        type=batch_list("--batches"),
        help="the batches, e.g. 1,8,64 (default: powers of two up to the workload's batch or 256)",
    )
    p.add_argument(
        "--max-batch", type=batch("--max-batch"), help="measure no batch above this (the workload's own batch included)"
    )
    p.add_argument(
        "--batch", type=batch("--batch"), help="your batch: the speed-up is given there (default: the workload's)"
    )
    p.add_argument(
        "--threads",
        type=whole("--threads", 1),
        help="CPU threads (default: the fastest of 1, 2, 4, ... up to the cores at your batch)",
    )
    p.add_argument("--mode", default="fp32", type=choice("--mode", MODES), help="fp32, bf16 or fp16 (default: fp32)")
    p.add_argument("--repeats", type=whole("--repeats", 1), default=1, help="processes per cell (default: 1)")
    p.add_argument("--timeout", type=real("--timeout"), default=600.0, help="seconds per cell process (default: 600)")
    add_timer_flags(p, **CROSSOVER_TIMING)
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        type=given("--plot", "a file to draw into (png, svg or pdf)"),  # `--plot "$OUT"`, $OUT unset: not left out
        help="also draw step time against batch into this file (png, svg, pdf)",
    )
    p.add_argument(
        "--paper",
        action="store_true",
        help="the paper's seven networks predicted on a GTX 1080, beside the paper's own figures",
    )


def run(args) -> int:
    from dlperf import crossover
    from dlperf.commands.common import print_rich
    from dlperf.predict import gpus

    gpus.use_specs(args.gpu_specs)  # before anything runs: a wrong file is one line, no run stored
    if args.paper:
        if args.workload:
            raise UsageError("--paper predicts the paper's seven networks: give no WORKLOAD")
        if given := given_flags(args, add_arguments, frozenset({"paper", "gpu_specs"})):
            raise UsageError(f"--paper predicts the paper's networks on its GTX 1080 and measures nothing: "
                             f"{', '.join(given)} would be ignored; give them without --paper")  # fmt: skip
        return paper()
    if not args.workload:
        raise UsageError("dlperf crossover WORKLOAD [--gpu NAME,...] (or --paper)")
    if args.plot is not None:
        _plot_format(args.plot)
    opts = crossover.Options(
        args.workload,
        gpus=tuple(args.gpu.split(",")),
        batches=args.batches,
        max_batch=args.max_batch,
        batch=args.batch,
        threads=args.threads,
        mode=args.mode,
        repeats=args.repeats,
        timeout=args.timeout,
        timer=timer(args),
        flags=True,  # errors and notes name the flags
    )
    db = db_path(args)
    warn_if_measured(db)
    result = crossover.crossover(opts, db, argv=["dlperf", *sys.argv[1:]])
    drawing = []  # the picture being drawn: a Ctrl-C then leaves the file as it was

    def show() -> None:
        if result.answer is None:
            print_rich(None, lines=result.notes)
        else:
            print_answer(result.answer, result.notes, result.run_id)
        if args.plot and result.answer is not None:
            drawing.append(args.plot)
            plot(result.answer, args.plot, db, result.run_id)
            print(f"wrote {args.plot}")

    stopped = interrupted_crossover(result, db) if result.exit_code == ExitCode.INTERRUPTED else None
    return printed(
        show, result.exit_code, finished=lambda: finished_crossover(result, db, drawing), interrupted=stopped
    )


def finished_crossover(result, db: str, drawing: list[str]) -> Said:
    """A Ctrl-C while a finished crossover was printed or drawn: what is stored, and what shows or draws it again."""
    import shlex

    from dlperf.store.location import db_words

    run_id = result.run_id
    if result.answer is None:  # no crossover to show: what its failed cells left
        return f"what was measured is stored in run {run_id}", see_it(db, run_id)
    report = shlex.join(["dlperf", "report", "--run", str(run_id), "-o", "report.html", *db_words(db)])
    if not drawing:
        return f"the crossover is complete and stored in run {run_id}", f"{see_it(db, run_id)}; {report} draws it"
    return (f"the crossover is complete and stored in run {run_id}; its picture was not drawn ({drawing[0]} left as "
            f"it was)", f"Draw it with: {report} (or --plot again, which measures it again)")  # fmt: skip


def plot(answer, path: str, db: str, run_id: int) -> None:
    """The answer's chart, headed by the run and the machine the CPU was measured on (`dlperf plot`'s heading)."""
    from dlperf.commands.plot import where
    from dlperf.report import figures
    from dlperf.report.crossover import chart
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        heading = where([store.run(run_id)])
    finally:
        store.close()
    with replacing(path) as tmp:  # whole or absent, as `dlperf plot`'s: Ctrl-C while it is drawn leaves no part of one
        figures.save([chart(answer)], tmp, where=heading)


def interrupted_crossover(result, db: str) -> Said:
    """What to do after an interrupt: resume the run when every batch's cell is in it, else run the command again."""
    from dlperf.store.location import resume_command

    if result.resumable:
        return (f"the batches measured are stored in run {result.run_id}",
                f"Continue with: {resume_command(db)} (it measures the batches left and prints the whole "
                "crossover)")  # fmt: skip
    return (stored_cells(db, result.run_id),  # not "the thread search's cells are stored" where none was measured
            f"For the crossover, run it again (it starts over): {again()} (dlperf run --resume would not go on with "
            "the thread search)")  # fmt: skip


def _plot_format(path: str) -> None:
    from pathlib import Path

    from dlperf.report.figures import FORMATS

    if Path(path).suffix.lstrip(".").lower() not in FORMATS:
        raise UsageError(f"--plot {path!r}: expected a file ending in .{', .'.join(FORMATS)}")
    from dlperf.commands.report import writable

    writable(path, "--plot")  # before anything is measured


def paper() -> int:
    from rich.table import Table

    from dlperf import crossover
    from dlperf.commands.common import print_rich
    from dlperf.report.crossover import PAPER_NOTE, paper_table
    from dlperf.report.paper import CITATION

    head, rows = paper_table(crossover.paper())
    table = Table(title="The paper's networks on a GTX 1080: predicted (fp32, no copy) against the paper's figures")
    for name in head:
        table.add_column(name, justify="left" if name in ("network", "bound") else "right")
    for row in rows:
        table.add_row(*row)
    print_rich(table, notes=[PAPER_NOTE, f"paper: {CITATION}; paper/predicted: its best tool over the prediction"])
    return 0
