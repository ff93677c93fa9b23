"""`dlperf merge a.db b.db --db all.db`: copy every run of other database files into one (`store/merge.py`)."""

from __future__ import annotations

import argparse
import sys

from dlperf.commands.common import db_path, given
from dlperf.errors import UsageError
from dlperf.vocab import ExitCode

HELP = (
    "copy every run of other database files into --db; one it already holds is skipped, or brought up to date if it "
    "has moved on"
)
DESCRIPTION = (
    "Copy every run (cells, measurements, raw samples), measured peak and all-reduce figure of each SOURCE into the "
    "--db database, created if missing, under new run ids; each copied run records where it came from. All or "
    "nothing: every source is read and checked whole first, and a damaged one stops the merge before anything is "
    "written."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sources", nargs="+", metavar="SOURCE", type=given("merge", "a database file"),
                   help="database files to copy from")  # fmt: skip
    p.add_argument("-o", "--output", metavar="DB", type=given("-o", "a database file"),
                   help="the database to copy into, as --db names it (give one of the two)")  # fmt: skip


def run(args) -> int:
    from dlperf.report.format import terminal
    from dlperf.store.location import said_as
    from dlperf.store.merge import merge

    def warn(line: str) -> None:
        print(f"dlperf: warning: {terminal(line)}", file=sys.stderr, flush=True)

    into, lines, warnings = target(args), [], []
    with said_as("-o" if args.output is not None else "--db"):  # the target named by the flag that named it
        try:
            merge(args.sources, into, report=lines.append, warn=warnings.append)
        except KeyboardInterrupt:  # all or nothing: what the target held it holds, and nothing of the sources
            print(f"dlperf: interrupted: nothing was copied, {terminal(into)} holds what it held before (a file the "
                  "merge created is removed)", file=sys.stderr)  # fmt: skip
            return ExitCode.INTERRUPTED
    for line in lines:  # once all is written: an interrupt now is no "nothing was copied"
        print(line, flush=True)
    for line in warnings:
        warn(line)
    return ExitCode.OK


def target(args) -> str:
    """-o, the name a user reaches for first, or --db as every command that writes a store takes it; not both."""
    if args.output is None:
        return db_path(args)
    if args.db is not None:
        raise UsageError(f"-o {args.output!r} and --db {args.db!r} both name the database to copy into: give one")
    return args.output
