"""`dlperf compare A B`: is run B faster or slower than run A, cell by cell, and can we tell? (`report/compare.py`)"""

from __future__ import annotations

import argparse
import json
import os
import sys

from dlperf.commands.common import add_format, db_path, given, real
from dlperf.commands.output import settle
from dlperf.errors import UsageError
from dlperf.vocab import ExitCode

EXIT_REGRESSION = 1  # what a CI job gates on


HELP = "is run B faster or slower than run A, cell by cell (exit 1 on a regression)"
DESCRIPTION = (
    "Compare two runs cell by cell: the ratio B/A of the per-process medians' geometric means with a 95% interval, "
    "and a verdict from Welch's t-test on the per-process medians, Holm-adjusted. Exit code 1 if a cell is "
    "significantly slower with B/A above 1 + --threshold, or a cell A measured failed, timed out or (on the same "
    "hardware) unsupported in B; exit code 2 if no cell was measured in both runs (nothing to compare), none could "
    "be tested (each side needs two processes of a cell, --repeats 2; 3 or more to tell small changes), or B is "
    "unfinished and lacks cells of A (or processes of them)."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    for name in ("A", "B"):
        p.add_argument(name, type=given(name, "a run id, a database file or path.db:ID"),
                       help="a run id of --db, a database file (its latest run, the one measured last), or "
                            "path.db:ID")  # fmt: skip
    p.add_argument(
        "--threshold",
        type=real("--threshold", above=False, most=1e6),
        default=0.05,
        help="a significantly slower cell is a regression when B/A exceeds 1 + this (default: 0.05)",
    )
    p.add_argument(
        "--alpha", type=real("--alpha", most=1.0), default=0.05, help="significance level after Holm (default: 0.05)"
    )
    add_format(p, "text", "md", "json")


def run(args) -> int:
    from dlperf.report.compare import compare, render_markdown, render_rich, to_json
    from dlperf.report.compare_side import load, machine_warning
    from dlperf.report.format import terminal

    db = db_path(args)
    a, b = load(args.A, "A", db), load(args.B, "B", db)
    if a.run_id == b.run_id and os.path.samefile(a.db, b.db):
        raise UsageError(f"A {args.A!r} and B {args.B!r} are both run {a.run_id} of {a.db}: a run compared with "
                         "itself tells nothing; name two runs (dlperf list --runs shows them)")  # fmt: skip
    result = compare(a.cells, b.cells, a.samples, b.samples, alpha=args.alpha, threshold=args.threshold,
                     data=(a.data, b.data))  # fmt: skip
    result.b_unfinished, result.other_hardware = b.unfinished, machine_warning(a, b) is not None
    if b.unfinished:
        result.b_goes_on = goes_on(b)
    if not result.cells and not result.failed():
        raise UsageError(nothing_compared(result, a, b))
    result.data += [f"{side.name}: {side.unfinished}; its cells are what it measured so far" for side in (a, b)
                    if side.unfinished]  # fmt: skip
    if warning := machine_warning(a, b):  # on stderr: a CI log shows it, a script's JSON on stdout stays whole
        print(f"dlperf: warning: {terminal(warning)}", file=sys.stderr, flush=True)
    outcome = result.outcome()  # no cell tested, or an unfinished B: no verdict, never a pass
    code = EXIT_REGRESSION if outcome == "regression" else ExitCode.OK if outcome == "no regression" else None
    code = settle(ExitCode.BAD_INPUT if code is None else code)  # before the output: `| head -1` cuts it, not this
    if args.format == "json":
        print(json.dumps(to_json(result, a, b), indent=2))
    elif args.format == "md":
        print(terminal(render_markdown(result, a, b), newlines=True))
    else:
        print_wide(render_rich(result, a, b))
    return code


def nothing_compared(result, a, b) -> str:
    """Two runs without a cell measured on both sides: for a script that is an error, never "no regression"."""
    from dlperf.report.compare import not_compared

    listed = not_compared(result.unmatched) or "both runs are empty"
    where = (lambda side: f"run {side.run_id}") if a.db == b.db else (lambda side: f"run {side.run_id} of {side.db}")
    said = f"A ({where(a)}) and B ({where(b)}) share no cell measured on both sides: nothing compared ({listed})"
    if result.awaited():  # an interrupted B: not a verdict, and what to do
        return f"{said}; B's {b.unfinished}: {result.b_goes_on}, then compare again"
    return said


def goes_on(side) -> str:
    """What finishes a side's unfinished run, as `dlperf table` says it (`table.unfinished_note`): its store's
    resume command where --resume takes it (`dlperf run --resume --db part.db` measures them; a bare `dlperf run
    --resume` opened ./dlperf.db, or resumed another run of $DLPERF_DB), a merge where it is a copy, waiting where
    its process still measures it."""
    from dlperf.commands.table import unfinished_note
    from dlperf.store import Store
    from dlperf.store.state import run_state

    store = Store.open(side.db, create=False)
    try:
        state = run_state(store, store.run(side.run_id))
        [note] = unfinished_note(store, state, side.db) or [""]
    finally:
        store.close()
    how = note.removeprefix(state.summary()).removeprefix("; ")
    return how or "it is being measured: let it finish"


def print_wide(renderable) -> None:
    """On a terminal, as wide as it is; in a file or a CI log, wide enough that the ten columns need not fold."""
    from dlperf.commands.common import LOG_WIDTH, console

    console(at_least=LOG_WIDTH).print(renderable)
