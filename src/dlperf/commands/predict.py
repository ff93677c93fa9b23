"""`dlperf predict`: a workload's training step predicted on GPUs this machine does not have, from the GPUs'
published figures and the step's operators counted here (`predict/`); `--validate CSV` sets the predictions
against published measurements."""

from __future__ import annotations

import argparse

from dlperf.commands.common import add_format, batch, given, picked, real, whole
from dlperf.errors import UsageError
from dlperf.predict import MAX_BATCH

HELP = "predict a workload's training step on GPUs you do not have (--validate: against published measurements)"
DESCRIPTION = (
    "Counts the step's operators on fake tensors (PyTorch, no memory for activations), bounds each by a roofline of "
    "the GPU's published peak and memory bandwidth with fitted efficiencies, adds a cost per kernel launched and the "
    "batch's copy over the GPU's host link. Prints the predicted step, samples/s, what bounds it (compute, memory or "
    "launch) and the uncertainty from the validation on published measurements. --validate CSV reads rows of "
    "published single-GPU training figures (columns gpu, model, precision, batch_per_gpu, metric, value, unit, as "
    "src/dlperf/data/gpu_dev.csv: the 225 dlperf ships, each with its source, which --validate with no CSV reads) and "
    "prints each prediction against its figure, with the errors by GPU generation, model family and mode; rows a "
    "scope column marks out of scope (out: REASON, from their metadata) are reported apart, their error beside. "
    "--cost adds what the work costs on each GPU (an epoch of the workload's data set, or --samples) at the on-demand "
    "prices of src/dlperf/data/gpu_prices.csv (or --prices FILE.csv), this CPU's measured time and energy for the "
    "same work where the store holds a step of the workload at the batch, and the fastest, the cheapest and the "
    "cheapest within --deadline."
)
MODES = ("fp32", "tf32", "bf16", "fp16")
TAKES_DB = False
GPU_SPECS_HELP = (
    "your own GPUs, in the columns of src/dlperf/data/gpu_specs.csv, merged over the built-in rows (a row of a "
    "built-in GPU's name replaces it)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from dlperf.defaults import BRACKET, FIT_MAX_BATCH, NAMED_HELP

    p.add_argument("workload", nargs="?", help="a built-in workload (dlperf list) or a user's file.py:factory")
    p.add_argument("--gpu", help=f"comma list of GPUs of the table (--list-gpus), e.g. {','.join(BRACKET)}; "
                   f"{NAMED_HELP}")  # fmt: skip
    p.add_argument("--modes", type=given("--modes", "a comma list of modes, e.g. fp32,bf16"),
                   help="comma list of fp32, tf32, bf16, fp16 (default: all)")  # fmt: skip
    p.add_argument("--batch", type=batch("--batch", most=MAX_BATCH),
                   help=f"the mini-batch (default: the workload's), 1 to {MAX_BATCH:,}: counted on fake tensors, not "
                   f"measured here, so past the {FIT_MAX_BATCH:,} of advise, crossover and fit")  # fmt: skip
    p.add_argument(
        "--validate", metavar="CSV", nargs="?", const=True, type=given("--validate", "a CSV file"),
        help="predict every row of a CSV of published measurements (no CSV: the 225 dlperf ships); with --gpu or "
        "--modes, the rows on those GPUs, in those modes",
    )  # fmt: skip
    p.add_argument("--list-gpus", action="store_true",
                   help="list the GPUs of the table with their figures and $/GPU-hour (--prices: yours)")  # fmt: skip
    p.add_argument("--gpu-specs", metavar="FILE.csv", help=GPU_SPECS_HELP)
    p.add_argument("--timeout", type=whole("--timeout", 1), default=1800, help="seconds the operator count may take")
    p.add_argument(
        "--no-cache", action="store_true",
        help="describe your model and count every step again, neither reading nor writing what is kept in "
        "DATA_DIR/cache/opcounts",
    )  # fmt: skip
    p.add_argument(
        "--memory", action="store_true",
        help="the step's peak GPU memory (parameters, gradients, optimizer state, activations, the allocator's "
        "overhead), whether it fits each GPU and the largest batch that does, per mode (--modes: also checkpoint, "
        f"bf16+checkpoint; default {DEFAULT_MEMORY_MODES})",
    )  # fmt: skip
    add_cost_arguments(p)


DEFAULT_MEMORY_MODES = "fp32,bf16,checkpoint,bf16+checkpoint"


def add_cost_arguments(p: argparse.ArgumentParser) -> None:
    from dlperf.defaults import CPU_WATTS, KWH_PRICE

    c = p.add_argument_group("cost (--cost)")
    c.add_argument("--cost", action="store_true", help="the time and cost of the work on each GPU, and on this CPU")
    c.add_argument("--samples", type=whole("--samples", 1, grouped=True),
                   help="the work in samples (default: an epoch)")  # fmt: skip
    c.add_argument("--epochs", type=real("--epochs", most=1e9), help="the work in epochs of the data set (default 1)")
    c.add_argument("--deadline", metavar="DURATION", help="rank the cheapest GPU finishing within it, e.g. 2h, 90m")
    c.add_argument(
        "--cpu-watts", type=real("--cpu-watts", most=1e6),
        help=f"this machine's power while training, for the CPU's energy cost (default {CPU_WATTS:g} W, an "
        "assumption: a wall-socket meter gives yours)",
    )  # fmt: skip
    c.add_argument(
        "--kwh-price", type=real("--kwh-price", above=False, most=1e6),
        help=f"US dollars per kWh, 0 for free power (default {KWH_PRICE:g}, an assumption)",
    )  # fmt: skip
    c.add_argument("--prices", metavar="FILE.csv", help=PRICES_HELP)
    add_format(c, "text", "json", help="text or json (with --cost or --memory)")
    c.add_argument("--db", help="the store holding this CPU's measured steps, read with --cost only (default: "
                   "$DLPERF_DB or ./dlperf.db)")  # fmt: skip


PRICES_HELP = (
    "your own $/GPU-hour (a negotiated rate, your hardware's amortized cost) in the columns of "
    "src/dlperf/data/gpu_prices.csv, merged over the built-in rows (default: $DLPERF_PRICES)"
)


def parse_modes(text: str) -> tuple[str, ...]:
    return picked(text, "--modes", MODES, "mode")


def run(args) -> int:
    from dlperf.predict import cache, gpus

    if args.no_cache:  # the variable every command's count reads (`predict/cache.py`)
        import os

        os.environ[cache.BYPASS] = "1"

    check_listing(args)
    check_validating(args)
    gpus.use_specs(args.gpu_specs)  # a wrong file is one line before anything runs
    deadline = check_cost_flags(args)
    if args.list_gpus:
        from dlperf.commands.common import print_rich
        from dlperf.predict import prices
        from dlperf.report.cost import listed_notes

        prices.use_prices(args.prices)  # the prices --cost would use: --prices, else $DLPERF_PRICES
        listed = [prices.price(g) for g in gpus.table()]
        # in a pipe, 160 columns (commands.common.console): the names are typed, so the table is whole
        print_rich(gpu_table(gpus.table(), listed), notes=listed_notes(listed))
        return 0
    from dlperf.runner import warm

    with warm.probes_share():  # the command's probe children fork from one warm parent: PyTorch imported once
        if args.validate:
            return validate(args)
        if not args.workload:
            raise UsageError("dlperf predict WORKLOAD --gpu NAME[,NAME...] (or --validate CSV, or --list-gpus)")
        from dlperf.predict import memory
        from dlperf.spec import parse_workload

        parse_workload(args.workload, None)  # a misspelt name, then a mode, are said before a missing --gpu
        modes = memory.parse_modes(args.modes or DEFAULT_MEMORY_MODES) if args.memory else parse_modes(
            args.modes or ",".join(MODES))  # fmt: skip
        if not args.gpu:
            raise UsageError("--gpu: name the GPUs to predict for, e.g. --gpu H100-SXM5-80GB,T4 (--list-gpus lists "
                             "them)")  # fmt: skip
        chosen = gpus.parse_gpus(args.gpu)
        if args.memory:
            return show_memory(args, chosen, modes)
        return predict(args, chosen, modes, deadline)


def check_listing(args) -> None:
    """--list-gpus lists the table and predicts nothing: a workload or GPUs named beside it are refused, not dropped."""
    if not args.list_gpus:
        return
    beside = (("WORKLOAD", args.workload), ("--gpu", args.gpu), ("--validate", args.validate),
              ("--memory", args.memory), ("--cost", args.cost))  # fmt: skip
    if extra := next((flag for flag, value in beside if value), None):
        raise UsageError(f"--list-gpus lists the GPUs of the table and predicts nothing: give no {extra}")


def check_validating(args) -> None:
    """--validate predicts the CSV's rows, each at its own batch (--gpu and --modes pick the rows on those GPUs, in
    those modes): a workload, --batch, --memory or --cost beside it are refused, not dropped."""
    if not args.validate:
        return
    beside = (("WORKLOAD", args.workload), ("--batch", args.batch), ("--memory", args.memory), ("--cost", args.cost))
    if extra := next((flag for flag, value in beside if value), None):
        raise UsageError(f"--validate CSV predicts the CSV's rows, each at its own batch (--gpu and --modes pick "
                         f"rows): give no {extra}")  # fmt: skip


def check_cost_flags(args) -> float | None:
    """The cost flags checked before anything runs; the deadline in seconds."""
    from dlperf.predict import cost, prices

    given = [f for f, v in (("--samples", args.samples), ("--epochs", args.epochs), ("--deadline", args.deadline),
                            ("--cpu-watts", args.cpu_watts), ("--kwh-price", args.kwh_price),
                            ("--prices", None if args.list_gpus else args.prices),  # the listing's column
                            ("--format", None if args.format == "text" else 1))
             if v is not None]  # fmt: skip
    if args.memory and args.cost:
        raise UsageError("--memory and --cost: give one (--cost leaves out the GPUs the step does not fit)")
    if args.memory and given and given[0] != "--format":
        raise UsageError(f"{given[0]} is a figure of the cost: --memory takes none")
    if given and not args.cost and not args.memory:
        if given[0] == "--format":
            raise UsageError("--format is for --cost and --memory only (their figures as JSON): add one of them")
        raise UsageError(f"{given[0]} is a figure of the cost: add --cost")
    if args.db is not None and not args.cost:  # --memory and the plain prediction read no store
        fix = "give no --db" if args.validate or args.memory else "add --cost, or give no --db"
        raise UsageError(f"--db is used only by --cost, which reads this CPU's measured steps from it: {fix}")
    if not args.cost:
        return None
    check_cost_store(args)
    if args.samples is not None and args.epochs is not None:
        raise UsageError("--samples and --epochs: give one (the work is N samples, or E epochs of the data set)")
    prices.use_prices(args.prices)  # --prices, else $DLPERF_PRICES: a wrong file is one line
    return None if args.deadline is None else cost.parse_deadline(args.deadline)


def check_cost_store(args) -> None:
    """The store --cost reads, checked before anything is counted: one this user cannot reach, or that is no database
    file (a directory), is refused, as a --db named but not there is; the default store may be missing (no step)."""
    from dlperf.commands.common import db_path
    from dlperf.store.location import named, not_a_database_file, unreachable

    where = db_path(args)
    missing = "no such database file (leave --db out to predict without this CPU's steps)" if args.db else None
    if why := unreachable(where) or not_a_database_file(where, missing=missing):
        raise UsageError(f"{named(where)}: {why}")


def predict(args, chosen, modes, deadline=None) -> int:
    from dlperf.commands.common import print_rich
    from dlperf.predict import count, roofline

    workload = resolved(args)
    work = None
    if args.cost:
        from dlperf.predict import cost

        work = cost.work(workload, args.samples, args.epochs)  # synthetic data and no --samples: one line, first
    found = count.counted([(workload, m) for m in modes], float(args.timeout), "--timeout")
    predictions = [roofline.predict(c, g) for g in chosen for c in found]
    notes = [*prediction_notes(workload, chosen, modes, predictions), count_note(found)]
    if work is not None:
        return show_cost(args, workload, predictions, work, deadline, notes)
    peaks = predicted_peaks(args, workload, modes, quiet=True)
    print_rich(prediction_table(workload, predictions), notes=[*memory_notes(workload, chosen, peaks), *notes])
    return 0


def memory_notes(workload, chosen, peaks) -> list[str]:
    """For plain `predict`: the GPUs the step at its batch does not fit, by mode, with the memory it needs, or why
    memory was not checked (`peaks`: the predicted allocator peak per mode, or the reason none was traced)."""
    from dlperf.predict import memory

    if isinstance(peaks, str):
        return [f"memory: not checked ({peaks}); dlperf predict --memory says what fits"]
    out = []
    for mode, need in peaks.items():
        short = [g for g in chosen if need > memory.usable(g)]
        if short:
            needs = memory.apart(need, max(memory.usable(g) for g in short))[0]  # told apart from the closest GPU's
            names = ", ".join(f"{g.name} ({memory.apart(need, memory.usable(g))[1]} GiB)" for g in short)
            out.append(f"does not fit: at batch {workload.batch} the {mode} step needs {needs} GiB "
                       f"(predicted peak), more than {names} has for it: its times above are for a step that cannot "
                       "run there; dlperf predict --memory gives the largest batch that fits")  # fmt: skip
    return out


def resolved(args):
    """The workload named, at --batch; a misspelt or incomplete name is one line before any child starts."""
    from dlperf.predict import count, workload
    from dlperf.spec import parse_workload

    named = parse_workload(args.workload, None)
    return count.at(workload.resolve(named, float(args.timeout)), args.batch)


def show_memory(args, chosen, modes) -> int:
    """`--memory`: the step's peak and its parts per mode, whether it fits each GPU, the largest batch that does."""
    from dlperf.commands.common import print_rich
    from dlperf.commands.output import write_stdout
    from dlperf.predict import count, memory
    from dlperf.report import memory as view

    workload = resolved(args)
    found = dict(zip(modes, memory.lines([(workload, m) for m in modes], float(args.timeout), "--timeout"),
                     strict=True))  # fmt: skip
    traced = {m: line for m, line in found.items() if not isinstance(line, str)}
    if not traced:  # as without --memory: a step that cannot be traced is one line, exit 2
        mode, why = next(iter(found.items()))
        raise count.refused(workload, mode, why, "its step cannot be traced", "the tracer's")
    most = memory.largest(workload, traced, chosen, float(args.timeout), "--timeout")
    verdicts = {m: [memory.verdict(g, line, most[m][g.name]) for g in chosen] for m, line in traced.items()}
    if args.format == "json":
        import json

        write_stdout(json.dumps(view.to_json(workload, found, verdicts), indent=1) + "\n", "the memory figures")
        return 0
    print_rich(view.parts_table(workload, found))
    print_rich(view.gpu_table(workload, verdicts), lines=view.lines(found, verdicts), notes=view.notes(found))
    return 0


def show_cost(args, workload, predictions, work, deadline, notes) -> int:
    """`--cost`: the work on each GPU predicted, this CPU's measured time for it, the ranking."""
    from dlperf import envinfo
    from dlperf.commands.common import print_rich
    from dlperf.commands.output import write_stdout
    from dlperf.defaults import CPU_WATTS, KWH_PRICE
    from dlperf.optimize_results import quoted
    from dlperf.predict import cost, memory
    from dlperf.report import cost as view

    samples, what, steps = work  # in the steps a loader trains them in, as advise counts them (`cost.epoch`)
    cells, timed, where, runs = stored_cells(args, workload.name)  # timed: a run's CPU cells' steps per process
    cells, others = cost.same_model(cells, workload)  # another model of the name: neither its step nor its peak
    predicted = predicted_peaks(args, workload, {p.mode for p in predictions})
    peaks = cost.measured_peaks(cells, workload.batch, predicted)
    x = cost.costs(workload, predictions, samples, what, peaks, deadline, predicted, steps)
    x.largest = memory.largest_left_out(workload, x.left_out, float(args.timeout))
    order, elsewhere = cost.this_cpu(runs, envinfo.capture() if runs else {})  # this machine's runs, latest first
    unread: list[str] = []  # the quoted run's step times that no longer decode: its fp32 eager step quoted
    cell = cost.measured_cpu(cells, workload.batch, cost.readable(timed, unread), quoted, order)  # as advise quotes
    doubts = [*unread, *view.cpu_doubts(cell)]
    others += cost.elsewhere_notes(cells, workload.batch, elsewhere)
    watts = CPU_WATTS if args.cpu_watts is None else args.cpu_watts  # given with --cost only (`check_cost_flags`)
    price = KWH_PRICE if args.kwh_price is None else args.kwh_price
    x.cpu = cost.cpu_cost(cell, samples, watts, price, steps=steps) if cell else None
    how = None if cell else view.how_to_measure(workload, where, no_room_here(workload, predicted),
                                                cost.without_fp32(cells, workload.batch, order))  # fmt: skip
    if args.format == "json":  # the uncertainty and the notes as the text prints them, as advise's JSON has them
        import json

        from dlperf.predict.roofline import uncertainty

        write_stdout(json.dumps({**cost.to_json(x), "cpu_how": how, "cpu_doubts": doubts,
                                 "not_used": others, "uncertainty": uncertainty(),
                                 "notes": [*view.notes(x), *notes]}, indent=1) + "\n", "the costs")  # fmt: skip
        return 0
    # every GPU left out: no empty table, the lines say why
    notes = [*doubts, *others, *view.notes(x), *notes]
    print_rich(view.table(x) if x.rows else "", lines=view.lines(x, how), notes=notes)
    return 0


def no_room_here(workload, predicted: dict[str, int]) -> str:
    """Why this CPU cannot measure the step (`memory.no_room_here`: its predicted peak against the memory available
    now, the check `advise` and `crossover` make before they measure), "" where it can: the CPU measures fp32 unless
    told, so fp32's peak, else the largest predicted."""
    from dlperf.predict import memory

    mode = "fp32" if "fp32" in predicted else max(predicted, key=predicted.get, default="fp32")
    return memory.no_room_here(workload, predicted.get(mode), mode)


def predicted_peaks(args, workload, modes, quiet: bool = False) -> dict[str, int] | str:
    """The predicted allocator peak per mode (`predict/memory.py`), for the GPUs no measured peak checks; `quiet`
    (plain predict, where memory is a note): a trace that fails is its reason, not the command's error."""
    from dlperf.predict import memory

    try:
        return memory.peaks(workload, modes, float(args.timeout), "--timeout")
    except UsageError as e:
        if not quiet:
            raise
        return str(e)


def stored_cells(args, workload: str) -> tuple:
    """Every cell of `workload` (or its crossover variants) in the store, of every run; what reads a run's cells' per-
    process step times (by cell key: what `cost.measured_cpu` tells modes apart by, read for the run it reaches
    alone: one damaged row of any other run stopped --cost); and the runs. No cells when there is no store."""
    from contextlib import closing
    from pathlib import Path

    from dlperf.commands.common import db_path, open_store
    from dlperf.report.crossover import base_name

    def timed(run: int, cells) -> dict[str, list[list[float]]]:
        with closing(open_store(args)) as store:
            return {c.key: store.samples(run, c.key) for c in cells}

    where = db_path(args)
    if not Path(where).is_file():
        return [], timed, where, []
    with closing(open_store(args)) as store:
        runs = store.runs()
        found = [c for r in runs for c in store.cells(r.id, unreadable=lambda fault: None)
                 if base_name(c.workload) == workload]  # fmt: skip
    return found, timed, where, runs


# Its columns fit 80 columns with a GPU name of up to 17 characters (all but one of the table's): the kernels a step,
# the same on every GPU, are the count's (`count_note`), the columns' words are `STEP_NOTE`'s.
PREDICTION_HEAD = ("GPU", "mode", "step", "samples/s", "bound", "on GPU", "copy")
STEP_NOTE = (
    "step: on GPU (the step with its inputs already there: what `dlperf run` measures) plus copy (the batch over the "
    "host link, pinned), not overlapped"
)


def prediction_table(workload, predictions):
    from rich.table import Table

    from dlperf.report.cost import rate
    from dlperf.report.format import seconds

    table = Table(title=f"{workload.name} at batch {workload.batch}: one training step predicted")
    for name in PREDICTION_HEAD:
        table.add_column(name, justify="left" if name in ("GPU", "mode", "bound") else "right", no_wrap=name == "GPU")
    for p in predictions:
        table.add_row(
            p.gpu, p.mode, seconds(p.step_s), rate(p.samples_per_s), p.bound, seconds(p.device_s),
            seconds(p.transfer_s),
        )  # fmt: skip
    return table


def prediction_notes(workload, chosen, modes, predictions) -> list[str]:
    """The predictions' uncertainty, the units a GPU lacks, and what every reader of predictions must know
    (`validate.caveats`: where the uncertainty was not measured, fp32 on a GPU with TF32, the launch-bound GPUs)."""
    from dlperf.predict import roofline, validate

    notes = [f"uncertainty: {roofline.uncertainty()}; {roofline.measured_gpu()}"] if roofline.uncertainty() else []
    notes += validate.caveats(workload, chosen, modes, predictions)
    for g in chosen:
        for m in modes:
            dtype = {"tf32": "fp32"}.get(m, m)
            _, unit = g.peak(dtype, tensor=m == "tf32")
            if m != "fp32" and not unit.startswith(m):
                notes.append(f"{g.name} has no {m} unit: its {m} products are predicted at the {unit} rate")
    return [*notes, STEP_NOTE]


def count_note(found) -> str:
    """What every GPU's step above is predicted from, for a hand count to check: the step's FLOPs (by phase, and per
    mode where they differ), the bytes its kernels read and write per mode, the kernels a step (the same on every GPU,
    so not a column of the table), and the parameters (`Count`s)."""
    from dlperf.frameworks.common.ops import PHASES

    def gflop(c, phase=None) -> float:
        return sum(o.flops * o.calls for o in c.ops if phase in (None, o.phase)) / 1e9

    first = found[0]
    phases = ", ".join(f"{p} {gflop(first, p):.4g}" for p in PHASES if gflop(first, p))
    flops = f"{gflop(first):.4g} GFLOP ({phases})"
    if len({round(gflop(c), 3) for c in found}) > 1:
        flops = ", ".join(f"{c.mode} {gflop(c):.4g}" for c in found) + f" GFLOP ({first.mode}: {phases})"
    moved = ", ".join(f"{c.mode} {sum(o.bytes * o.calls for o in c.ops) / 1e9:.3g}" for c in found)
    kernels = [(c.mode, sum(o.calls * o.launches for o in c.ops)) for c in found]  # what runs, the same on every GPU
    launched = ", ".join(f"{m} {k:,}" for m, k in kernels) if len({k for _, k in kernels}) > 1 else f"{kernels[0][1]:,}"
    return (f"counted at batch {first.batch} (the work each GPU above is predicted from): {flops} a step, a "
            f"multiply-add 2 FLOPs; {moved} GB read and written by its kernels ({launched} kernels a step); "
            f"{parameters(first.params)}")  # fmt: skip


def parameters(n: int) -> str:
    """'3,018 parameters' under a million (a small model's read '0.003018 M parameters'), else '14.45 M parameters'."""
    return f"{n:,} parameters" if n < 1_000_000 else f"{n / 1e6:.4g} M parameters"


def gpu_table(table_rows, listed=None):
    """The GPU table's figures, each GPU's $/GPU-hour beside its memory (`listed`: its price or None, in order)."""
    from rich.table import Table

    from dlperf.report.cost import listed_price

    table = Table(title="GPUs dlperf predicts for (dense peaks; memory as sold, and as CUDA reports it where a source "
                  "gave it; src/dlperf/data/gpu_specs.csv has the sources)")  # fmt: skip
    for name in ("GPU", "generation", "fp32", "tf32", "fp16", "bf16", "fp8", "memory", "CUDA GiB", "$/GPU-hour",
                 "GB/s", "host link GB/s"):  # fmt: skip
        table.add_column(
            name, justify="left" if name in ("GPU", "generation") else "right", no_wrap=name == "GPU", overflow="fold"
        )  # a narrow terminal folds a figure, never cuts it
    tf = lambda v: f"{v / 1e12:g}" if v else "-"  # noqa: E731
    for g, price in zip(table_rows, listed or [None] * len(table_rows), strict=True):
        table.add_row(
            g.name, g.generation, tf(g.fp32), tf(g.tf32), tf(g.fp16), tf(g.bf16), tf(g.fp8), f"{g.memory_gib:g} GB",
            f"{g.cuda_gib:g}" if g.cuda_gib else "-", listed_price(price), f"{g.memory_bw / 1e9:g}",
            f"{g.host_link_bw / 1e9:g}",
        )  # fmt: skip
    return table


# ----------------------------------------------------------------------------------------------------------------------
# --validate


def validate(args) -> int:
    from dlperf.predict import count, gpus, roofline
    from dlperf.predict import validate as v
    from dlperf.workloads import BUILTIN

    path = v.shipped() if args.validate is True else args.validate
    chosen = gpus.parse_gpus(args.gpu) if args.gpu else None  # a wrong name or mode is one line, before the file
    modes = parse_modes(args.modes) if args.modes else None
    cases, skipped = v.read(path, known=lambda name: name in BUILTIN)
    notes = rows_picked(args, path, cases, skipped, chosen, modes)
    if notes:
        cases, skipped = v.pick(cases, skipped, chosen, modes)
    results = []
    if cases:
        requests = [(count.at(BUILTIN[c.workload], c.batch, c.seq_len), c.mode) for c in cases]
        for c, n in zip(cases, count.counts(requests, float(args.timeout), "--timeout"), strict=True):
            if isinstance(n, str):
                skipped.append(v.Skipped(c.line, c.model, c.gpu.name, f"its operators cannot be counted ({n})"))
            else:
                results.append(v.Result(c, roofline.predict(n, c.gpu, phases=c.phases, transfer=c.transfer)))
    if not results:  # no error to show: refused, as a --prices or --gpu-specs file of no row is
        from dlperf.measure.units import plural

        said = f"none of its {plural(len(skipped), 'row')} could be predicted: {'; '.join(v.skipped_lines(skipped))}"
        raise UsageError(f"--validate {path}: {said if skipped else 'no rows (the header, then one per measurement)'}")
    from pathlib import Path

    report(results, skipped, notes, shipped=Path(path).resolve() == v.shipped().resolve())
    return 0


def rows_picked(args, path, cases, skipped, chosen, modes) -> list[str]:
    """With --gpu or --modes, the note saying which rows they picked; none picked is one line (exit 2)."""
    from pathlib import Path

    from dlperf.measure.units import plural
    from dlperf.predict import validate as v

    if chosen is None and modes is None:
        return []
    flags = " ".join(f"{f} {t}" for f, t in (("--gpu", args.gpu), ("--modes", args.modes)) if t)
    where = " ".join(([f"on {', '.join(g.name for g in chosen)}"] if chosen else []) +
                     ([f"in {', '.join(modes)}"] if modes else []))  # fmt: skip
    rows = len(cases) + len(skipped)
    kept, left = v.pick(cases, skipped, chosen, modes)
    if not (found := len(kept) + sum(not s.bad for s in left)):  # a row that does not parse is said in any case
        raise UsageError(f"{flags}: none of the {rows} rows of {Path(path).name} is {where}")
    return [f"{flags}: {plural(found, 'row')} {where} of the {rows} of {Path(path).name}, the others left out"]


def report(results, skipped, notes=(), shipped: bool = False) -> None:
    """The rows in scope against their figures, then those out of scope by their metadata (each with its reason and
    its error, whatever it is), the errors of both side by side, and the rows not predicted; which errors are in
    sample (`shipped`: dlperf's own rows, whose rows in scope fitted the efficiencies) and the held-out ones beside
    (`roofline.fitted_on`)."""
    from dlperf.commands.common import print_rich
    from dlperf.measure.units import plural
    from dlperf.predict import validate as v
    from dlperf.predict.roofline import fitted_on

    inside = [r for r in results if r.case.in_scope]
    outside = [r for r in results if not r.case.in_scope]
    sample = " (in sample: these rows fitted the efficiencies)" if shipped else ""
    print_rich(rows_table(inside, title=f"Predicted against published{sample}: seconds per step"))
    if outside:
        print_rich(rows_table(outside, title="Out of scope by their metadata (the scope column): seconds per step"))
    if results:
        print_rich(summary_table(results, in_sample=shipped))
    predicted = f"{plural(len(results), 'row')} predicted"
    if outside:
        predicted += f" ({len(inside)} in scope, {len(outside)} out of scope by its metadata)"
    fit = [fitted_on(shipped)] if results else []
    print_rich("", lines=v.skipped_lines(skipped), notes=[*notes, *fit, f"{predicted}, {len(skipped)} not"])


def rows_table(results, title: str = "Predicted against published: seconds per step"):
    from rich.table import Table

    from dlperf.report.format import seconds

    apart = any(not r.case.in_scope for r in results)
    table = Table(title=title)
    for name in ("line", "GPU", "model", "mode", "batch", "published", "predicted", "error", "bound"):
        table.add_column(name, justify="left" if name in ("GPU", "model", "mode", "bound") else "right")
    if apart:
        table.add_column("why out of scope")
    for r in results:
        c = r.case
        table.add_row(
            str(c.line), c.gpu.name, c.model, c.mode + ("" if c.phases is None else " fwd+bwd"), str(c.batch),
            seconds(c.measured_s), seconds(r.predicted_s), f"{100 * r.error:+.0f}%", r.prediction.bound,
            *([c.scope] if apart else []),
        )  # fmt: skip
    return table


def summary_table(results, in_sample: bool = False):
    """Each group's error over the rows in scope, beside its error over all rows (out of scope included); `in_sample`:
    the rows in scope are those the efficiencies were fitted on, and the title says so."""
    from rich.table import Table

    from dlperf.predict import validate as v

    sample = " in sample (the rows in scope fitted the efficiencies)" if in_sample else ""
    table = Table(title=f"Prediction error{sample}: |predicted / published - 1|, rows in scope and all rows")
    for name in ("by", "group", "in scope", "median", "mean", "median signed", "all rows", "median", "median signed"):
        table.add_column(name, justify="left" if name in ("by", "group") else "right")
    groups = (
        ("all", lambda r: "all rows"),
        ("generation", lambda r: r.case.gpu.generation),
        ("model family", lambda r: r.case.family),
        ("mode", lambda r: r.case.mode),
    )
    for by, key in groups:
        inside = {s.group: s for s in v.summarize([r for r in results if r.case.in_scope], key)}
        for s in v.summarize(results, key):
            i = inside.get(s.group)
            table.add_row(
                by, s.group, *((str(i.rows), f"{i.median_abs_pct:.0f}%", f"{i.mean_abs_pct:.0f}%",
                                f"{i.median_pct:+.0f}%") if i else ("0", "-", "-", "-")),
                str(s.rows), f"{s.median_abs_pct:.0f}%", f"{s.median_pct:+.0f}%",
            )  # fmt: skip
    return table
