"""`dlperf report`: one self-contained HTML file of one or more runs (`report/html.py` lays it out)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from dlperf.commands.common import db_path, warn_unreadable
from dlperf.commands.output import write_file, wrote
from dlperf.commands.table import add_campaign, read_fleet
from dlperf.errors import UsageError
from dlperf.vocab import ExitCode

if TYPE_CHECKING:
    from pathlib import Path

RUN_HELP = (
    "run id, a comma list of ids, or all (default: the latest run, the one measured last); each workload's cells "
    "come from the latest of them that measured it, so that what is compared was measured together"
)


SUFFIXES = (".html", ".htm")
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


SQLITE_SIDES = ("-journal", "-wal", "-shm")  # the files SQLite keeps beside a database while it writes


def writable(path: str, flag: str = "-o", db: str | None = None) -> Path:
    """An output file whose directory exists, and no database: checked before anything is read (or measured).
    `db`: the store the command reads, refused under any name (a symlink, a hard link, another path to it)."""
    from pathlib import Path

    from dlperf.store.location import unreachable

    if not path:
        raise UsageError(f"{flag} '' is empty: name the file to write")
    out = Path(path)
    if why := unreachable(out):
        raise UsageError(f"{flag} {path!r}: {why}")
    if out.is_dir():
        raise UsageError(f"{flag} {path!r} is a directory")
    if not out.parent.exists():
        raise UsageError(f"{flag} {path!r}: directory {str(out.parent)!r} does not exist")
    if what := a_database(out, db):
        raise UsageError(f"{flag} {path!r} is {what}: writing there would destroy it; name another file")
    return out


def a_database(out: Path, db: str | None) -> str | None:
    """What `out` is if writing it would destroy measurements: the store `db` itself or a file SQLite keeps beside
    it, or any SQLite database (its first 16 bytes); None otherwise. A FIFO or device is never opened to look."""
    from pathlib import Path  # neither at import: `dlperf --help` builds this parser

    from dlperf.store.location import SQLITE_HEADER

    if db and _same_file(out, Path(db)):
        return f"the store this command reads (--db {db!r})"
    if db and any(_same_file(out, Path(db + side)) for side in SQLITE_SIDES):
        return f"a file SQLite keeps for the store this command reads (--db {db!r})"
    try:
        if out.is_file():
            with out.open("rb") as f:
                return "a SQLite database" if f.read(len(SQLITE_HEADER)) == SQLITE_HEADER else None
    except OSError:  # unreadable: not known to be a database; writing it says what stops it
        pass
    return None


def _same_file(a: Path, b: Path) -> bool:
    """One file by inode (symlinks followed, hard links alike) where both exist, else by resolved path."""
    try:
        return a.samefile(b)
    except OSError:
        pass
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python 3.11)
        return False


def html_file(out: Path) -> Path:
    """`out` when its suffix names HTML: a report written into `r.pdf` opened as no PDF."""
    from dlperf.report.figures import FORMATS

    suffix = out.suffix.lower()
    if suffix in SUFFIXES:
        return out
    plotted = f" (dlperf plot writes a chart as {suffix[1:].upper()})" if suffix[1:] in FORMATS else ""
    raise UsageError(f"-o {str(out)!r}: dlperf report writes HTML; name a .html or .htm file{plotted}")


def run(args) -> int:
    """One machine's runs as before; with --campaign or --runs, the campaign's machines side by side first, then its
    latest run's report (unless --run names others of one machine). A report of runs that name a campaign shows it."""
    from dlperf.measure.units import named, plural
    from dlperf.report import fleet, html, load
    from dlperf.vocab import Status

    out = html_file(writable(args.output, db=db_path(args)))
    campaign = read_fleet(args)
    chosen = args.run if args.run is not None or campaign is None else [campaign.latest_run]
    data = load.load(db_path(args), chosen)
    if campaign is None and (its := load.campaign_of(data.runs)):
        campaign = fleet.read(db_path(args), its)
    text = html.render(data, out, campaign)
    write_file(out, text)  # a report is written whole or not at all
    machines = f", {plural(len(campaign.machines), 'machine')} of {campaign.name}" if campaign else ""
    runs = named("run", (r.id for r in data.runs))
    pending = sum(c.status is Status.PENDING for c in data.cells)
    waiting = (
        (" (none measured yet)" if pending == len(data.cells) else f", {pending} not measured yet") if pending else ""
    )
    wrote(
        out, f"wrote {out} ({len(text) / 1024:.0f} KiB, {plural(len(data.cells), 'cell')} of {runs}{machines}{waiting})"
    )
    faults = [*data.unreadable, *(campaign.unreadable if campaign else [])]
    return warn_unreadable(faults, "the report") or ExitCode.OK
