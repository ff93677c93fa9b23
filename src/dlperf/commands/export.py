"""`dlperf export`: one record per cell with every figure, and with --samples every raw step time."""

from __future__ import annotations

import argparse

from dlperf.commands.common import choice, db_path, open_store, warn_unreadable, write_file, write_stdout
from dlperf.commands.report import runs
from dlperf.errors import UsageError
from dlperf.vocab import EXPORT_FORMATS, ExitCode

HELP = "one record per cell"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=runs, help="run id, a comma list of ids, or all (default: the latest run); each "
                   "record is one run's cell and says its run_id")  # fmt: skip
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

    if args.output == "-":  # the usual name of standard output, not a file named '-' written in this folder
        args.output = None
    out = writable(args.output, db=db_path(args)) if args.output is not None else None
    fmt = output_format(args.format, args.output)
    store = open_store(args)
    faults: list[UnreadableRow] = []
    try:
        records = [r for chosen in chosen_runs(store, args.run) for r in run_records(store, chosen, args, faults)]
    finally:
        store.close()
    text = export.render(records, fmt)
    if out:
        write_file(out, text)
        from dlperf.measure.units import plural

        print(f"wrote {out} ({plural(len(records), 'record')}, {fmt})")
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


def chosen_runs(store, chosen: list[int] | str | None) -> list:
    """`--run`: the latest run, every run (`all`), or the runs listed, in order of their ids."""
    if chosen is None:
        return [store.run()]
    if chosen == "all":
        return store.runs() or [store.run()]  # no runs: store.run() says so
    return [store.run(i) for i in sorted(set(chosen))]


def run_records(store, run, args, faults: list) -> list[dict]:
    """The run's records, each from the run's own cells, peaks, predictions, input pipeline groups and profiles."""
    from dlperf.errors import UnreadableRow
    from dlperf.report import data, export, predicted
    from dlperf.report.cell_profile import run_profiles
    from dlperf.report.utilization import attach_utilization

    cells = store.cells(run.id, unreadable=faults.append)
    attach_utilization(store, run.fingerprint, cells)
    predictions = predicted.read(store, run.id, faults.append)
    records, groups = [], data.by_cell(data.build(cells))
    said = run_profiles(store, run, cells)[0] if store.profiles(run.id) else []  # a run not profiled: no look-ups
    profiles = {s.cell.key: s.to_json() for s in said if s.profile is not None}
    for c in cells:
        try:
            samples = store.samples(run.id, c.key) if args.samples else None
            own, every = predicted.own(c, predictions), predictions.get(c.key, [])
            records.append(export.record(c, samples, groups.get(c.key), own, every, run, profiles.get(c.key)))
        except UnreadableRow as fault:
            faults.append(fault)
    return records
