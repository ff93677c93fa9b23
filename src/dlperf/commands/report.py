"""`dlperf report`: one self-contained HTML file of one or more runs (`report/html.py` lays it out)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dlperf.commands.common import db_path, warn_unreadable, write_file
from dlperf.commands.table import add_campaign, read_fleet
from dlperf.errors import UsageError
from dlperf.vocab import ExitCode

RUN_HELP = (
    "run id, a comma list of ids, or all (default: the latest run); each workload's cells come from the latest of "
    "them that measured it, so that what is compared was measured together"
)


HELP = "a self-contained HTML report of a run (charts, paper comparison, warnings)"


def runs(text: str) -> list[int] | str:
    """`--run`'s argparse `type`: a run id, a comma list of ids, or all."""
    from dlperf.report.load import parse_runs

    return parse_runs(text)


runs.number = "whole list"  # tests/test_cli.py tries every bad number on it


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=runs, help=RUN_HELP)
    add_campaign(p)
    p.add_argument("-o", "--output", default="dlperf-report.html", help="HTML file (default: dlperf-report.html)")


def writable(path: str, flag: str = "-o") -> Path:
    """An output file whose directory exists: checked before anything is read (or measured)."""
    from dlperf.store.location import unreachable

    out = Path(path)
    if why := unreachable(out):
        raise UsageError(f"{flag} {path!r}: {why}")
    if out.is_dir():
        raise UsageError(f"{flag} {path!r} is a directory")
    if not out.parent.exists():
        raise UsageError(f"{flag} {path!r}: directory {str(out.parent)!r} does not exist")
    return out


def run_ids(data) -> str:
    return ", ".join(str(r.id) for r in data.runs)


def run(args) -> int:
    """One machine's runs as before; with --campaign or --runs, the campaign's machines side by side first, then its
    latest run's report (unless --run names others of one machine). A report of runs that name a campaign shows it."""
    from dlperf.measure.units import plural
    from dlperf.report import fleet, html, load

    out = writable(args.output)
    campaign = read_fleet(args)
    chosen = args.run if args.run is not None or campaign is None else [campaign.latest_run]
    data = load.load(db_path(args), chosen)
    if campaign is None and (named := load.campaign_of(data.runs)):
        campaign = fleet.read(db_path(args), named)
    text = html.render(data, out, campaign)
    write_file(out, text)  # a report is written whole or not at all
    machines = f", {plural(len(campaign.machines), 'machine')} of {campaign.name}" if campaign else ""
    runs = f"run{'s' * (len(data.runs) > 1)} {run_ids(data)}"
    print(f"wrote {out} ({len(text) / 1024:.0f} KiB, {plural(len(data.cells), 'cell')} of {runs}{machines})")
    faults = [*data.unreadable, *(campaign.unreadable if campaign else [])]
    return warn_unreadable(faults, "the report") or ExitCode.OK
