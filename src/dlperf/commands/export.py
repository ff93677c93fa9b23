"""`dlperf export`: one record per cell with every figure, and with --samples every raw step time."""

from __future__ import annotations

import argparse
from functools import partial

from dlperf.commands.common import choice, db_path, open_store, warn, warn_unreadable
from dlperf.commands.output import write_file, write_stdout, wrote
from dlperf.commands.report import runs
from dlperf.errors import UsageError
from dlperf.vocab import EXPORT_FORMATS, ExitCode

HELP = "one record per cell"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=runs, help="run id, a comma list of ids, or all (default: the latest run, the "
                   "one measured last); each record is one run's cell and says its run_id")  # fmt: skip
    p.add_argument("--format", type=choice("--format", EXPORT_FORMATS), help="jsonl or csv (default: what -o's "
                   "suffix names, .csv or .jsonl; else jsonl)")  # fmt: skip
    p.add_argument("--samples", action="store_true", help="include every raw sample")
    p.add_argument("-o", "--output", help="write to this file, whole or not at all (default, or -: standard output)")


def run(args) -> int:
    """A cell whose stored row no longer decodes is left out with a warning naming it, and the exit code is 1: the
    other cells' records are still right."""
    from dlperf.commands.report import writable
    from dlperf.errors import UnreadableRow
    from dlperf.report import export
    from dlperf.store.state import run_state

    if args.output == "-":  # the usual name of standard output, not a file named '-' written in this folder
        args.output = None
    out = writable(args.output, db=db_path(args)) if args.output is not None else None
    fmt = output_format(args.format, args.output)
    store = open_store(args)
    faults: list[UnreadableRow] = []
    try:
        chosen = export.chosen_runs(store, args.run)
        records = [r for run in chosen for r in export.run_records(store, run, args.samples, faults.append)]
        unfinished = [s.summary() for s in map(partial(run_state, store), chosen) if s.unfinished]
    finally:
        store.close()
    for said in unfinished:  # its records are what it measured so far (`run_state` in each record)
        warn(f"{said}: its records are what it measured so far")
    text = export.render(records, fmt)
    if out:
        write_file(out, text)
        from dlperf.measure.units import plural

        wrote(out, f"wrote {out} ({plural(len(records), 'record')}, {fmt})")
    else:
        write_stdout(text, "export")
    return warn_unreadable(faults, "the export") or ExitCode.OK


SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def output_format(given: str | None, output: str | None) -> str:
    """--format, else what -o's suffix names, else jsonl; a suffix that names the other format, or one that names
    neither without --format (`x.json` would not load as one JSON document, `x.parquet` is not Parquet), is one
    line."""
    from pathlib import Path

    suffix = Path(output).suffix.lower() if output else ""
    named = SUFFIXES.get(suffix)
    if given and named and given != named:
        raise UsageError(f"-o {output}: a {suffix} file, but --format {given}; give one that agrees")
    if suffix in DATABASE_SUFFIXES or (suffix and not named and not given):
        # a database's name is no place for a text file, --format or not: `--db` would find text where a store was
        anyway = "" if suffix in DATABASE_SUFFIXES else ", or give --format to write it anyway"
        raise UsageError(f"-o {output}: dlperf export writes CSV (.csv) or JSON Lines (.jsonl, one JSON object a "
                         f"line), not {suffix}; name one of those{anyway}")  # fmt: skip
    return given or named or EXPORT_FORMATS[0]
