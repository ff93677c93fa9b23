"""`dlperf advise WORKLOAD`: should I rent a GPU, and which one? This CPU measured briefly, the GPUs predicted, one
screen (`advise.py` does the work, `report/advise.py` says it)."""

from __future__ import annotations

import argparse
import sys

from dlperf.commands.common import add_format, batch, db_path, duration, real, warn_if_measured, whole

HELP = "should I rent a GPU, and which one? this CPU measured briefly, time, memory and cost predicted on GPUs"
DESCRIPTION = (
    "Measures this machine briefly: the fastest thread count at your batch (--batch), then the fastest mode by a short "
    "optimize within what --budget leaves; stores both runs (dlperf table and report see them). Predicts each GPU's "
    "time, peak memory and cost for the work (dlperf predict --memory, --cost). Prints on one screen this CPU's time "
    "at its best settings (measured), the fastest and the cheapest GPU (and within --deadline), the GPUs the step "
    "does not fit, and whether a GPU pays at your batch (predicted), with the predictor's uncertainty."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from dlperf.commands.predict import GPU_SPECS_HELP, PRICES_HELP
    from dlperf.commands.run import add_data_flags
    from dlperf.defaults import BUDGET_S, LEAST_BUDGET_S, PRICED_HELP

    p.add_argument("workload", help="a built-in workload (dlperf list) or a user's file.py:factory")
    p.add_argument("--batch", type=batch("--batch"),
                   help="your batch: measured, searched and predicted at it (default: the workload's)")  # fmt: skip
    p.add_argument("--gpu", help=f"comma list of GPUs of the table (dlperf predict --list-gpus; "
                   f"{PRICED_HELP})")  # fmt: skip
    p.add_argument("--budget", type=duration("--budget", 1.0, most_s=24 * 3600.0), default=BUDGET_S,
                   help=f"seconds for the whole command, or a duration with its unit: 90s, 5m (default: {BUDGET_S:g}, "
                   f"at least {LEAST_BUDGET_S:g}: the first thread count's steps may be timed so long); "
                   "a process running at its end is stopped (about 10 s more), the first thread count measured whole; "
                   "a bare number is seconds here but minutes in optimize --budget: give the unit")  # fmt: skip
    p.add_argument("--deadline", metavar="DURATION", help="also the cheapest GPU finishing within it, e.g. 2h, 90m")
    p.add_argument(
        "--samples",
        type=whole("--samples", 1, grouped=True),
        help="the work in samples (default: an epoch; 1,000,000 on synthetic data, which has none)",
    )
    p.add_argument(
        "--epochs",
        type=real("--epochs", most=1e9),
        help="the work in epochs of the data set (default 1; synthetic data has none: give --samples)",
    )
    p.add_argument("--prices", metavar="FILE.csv", help=PRICES_HELP)
    p.add_argument("--gpu-specs", metavar="FILE.csv", help=GPU_SPECS_HELP)
    p.add_argument("--timeout", type=real("--timeout"), default=600.0, help="seconds per process (default: 600)")
    add_data_flags(p)  # with real data the loader is searched too, and the answer says how many processes feed a GPU
    add_format(p, "text", "json")


def run(args) -> int:
    from dlperf import advise
    from dlperf.commands.common import print_rich
    from dlperf.commands.output import write_stdout
    from dlperf.commands.run import again, printed, stored_cells
    from dlperf.measure.units import named
    from dlperf.predict import gpus, prices
    from dlperf.report import advise as view
    from dlperf.vocab import ExitCode

    gpus.use_specs(args.gpu_specs)  # the files first: a wrong one is one line, nothing run or stored
    prices.use_prices(args.prices)
    opts = advise.Options(args.workload, args.gpu, args.budget, args.deadline, args.samples, args.epochs,
                          args.timeout, args.data, args.loaders, args.batch, flags=True)  # fmt: skip
    warn_if_measured(db_path(args))
    answer = advise.advise(opts, db_path(args), ["dlperf", *sys.argv[1:]])

    def show() -> None:
        if args.format == "json":
            import json

            write_stdout(json.dumps(view.to_json(answer), indent=1) + "\n", "the advice")
            return
        stored = f"stored as {named('run', answer.runs)} (dlperf table, dlperf report)"
        stored = stored if answer.runs else "nothing measured here, nothing stored"
        priced = [n for n in [view.price_note(answer.costs)] if n]
        print_rich(None, lines=view.lines(answer), notes=[*priced, *answer.notes, stored])

    kept = f"what it measured is stored as {named('run', answer.runs)}" if answer.runs else "nothing is stored"
    if answer.exit_code == ExitCode.INTERRUPTED and answer.runs:  # a run may hold its plan alone: counted
        kept = "; ".join(stored_cells(db_path(args), r) for r in answer.runs)
    stopped = (kept, f"For the whole advice, run it again (it starts over): {again()}")
    finished = (f"the advice is complete; {kept}", f"To see it again, run it again (it measures again): {again()}")
    return printed(show, answer.exit_code, finished=finished, interrupted=stopped)
