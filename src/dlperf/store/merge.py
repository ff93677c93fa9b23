"""Copy the runs of other store files into one (`dlperf merge`), so runs measured on several machines sit side by side.

    dlperf merge laptop.db server.db --db all.db

Every run of each source (its runs row, all cells, all measurements with their raw samples, its profiles and
predictions) is copied under a new id and records where it came from (`runs.origin_json`). A run already in the target
(same start, command, plan and machine, or copied before from the same source run) is skipped, so merging twice adds
nothing. The sources' measured peaks are copied too, each once. All or nothing: every source is read whole and each row
decoded before the target is opened (a damaged source is a one-line error naming it, and the run and cell), and the
copy is one transaction.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import UsageError
from dlperf.store import RunRows, Store, now, run_origin
from dlperf.store.location import not_a_database_file, unreachable
from dlperf.store.records import Origin


@dataclass(frozen=True)
class Copied:
    source: str  # as the user named it
    source_run: int
    target_run: int
    cells: int
    skipped: bool  # already present as `target_run`

    def line(self) -> str:
        if self.skipped:
            return f"{self.source} run {self.source_run} already present as run {self.target_run}: skipped"
        return (
            f"{self.source} run {self.source_run} -> run {self.target_run} ({self.cells} cell{'s' * (self.cells != 1)})"
        )


@dataclass(frozen=True)
class Source:
    """A source file read whole and checked: what the copy writes."""

    name: str  # as the user named it
    path: str  # resolved: where the copied runs came from
    runs: list[RunRows]
    peaks: list[dict[str, Any]]


def merge(sources: list[str], target: str, report: Callable[[str], None] = lambda line: None) -> list[Copied]:
    """Copy every run of each source not yet in `target`, then the peaks it lacks, in one transaction; one entry per
    run, and a line for `report` for each once all is written. Every source is read and checked before the target
    is opened: a bad one stops the merge before anything is written."""
    read = [read_source(source, target) for source in sources]
    dst = Store.open(target, create=True)
    try:
        lines: list[str] = []
        with dst.transaction():
            done = [copied for source in read for copied in _merge_one(source, dst, lines)]
    finally:
        dst.close()
    for line in lines:
        report(line)
    return done


def _merge_one(source: Source, dst: Store, lines: list[str]) -> list[Copied]:
    done = []
    for rows in source.runs:
        done.append(copy_run(rows, dst, source))
        lines.append(done[-1].line())
    if added := dst.insert_missing_peaks(source.peaks):
        lines.append(f"{source.name}: {added} measured peak{'s' * (added != 1)} copied")
    return done


def read_source(source: str, target: str) -> Source:
    """Every run and peak of the source, each row decoded (`Store.check_run`) and the file's structure checked; a
    missing, corrupt or foreign file, or the target itself, is a UsageError naming it, before anything is written."""
    src = _open_source(source, target)
    try:
        try:
            runs = [src.check_run(run.get("id")) for run in src.rows("runs")]
            peaks = src.rows("peaks")
            src.check_file()
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"unreadable ({exc})") from exc
    except UsageError as exc:
        raise UsageError(f"merge {source!r}: {exc}") from exc
    finally:
        src.close()
    return Source(source, str(Path(source).resolve()), runs, peaks)


def _open_source(source: str, target: str) -> Store:
    """The source, opened to read."""
    path = Path(source)
    if why := unreachable(source) or not_a_database_file(source):
        raise UsageError(f"merge {source!r}: {why}")
    if os.path.exists(target) and os.path.samefile(path, target):  # an unreachable target is said when it opens
        raise UsageError(f"merge {source!r}: it is the target database itself (--db {target!r})")
    try:
        return Store.open(path, create=False)
    except UsageError as exc:
        raise UsageError(f"merge {source!r}: {str(exc).removeprefix(f'--db {str(path)!r}: ')}") from exc


def copy_run(rows: RunRows, dst: Store, source: Source) -> Copied:
    run, run_id = rows.run, rows.run.get("id")
    # a run merged before keeps the trail back to where it was measured
    origin = Origin(source.path, run_id, now(), run_origin(run))
    present = dst.find_copy(run, rows.measurements, origin)
    if present is not None:
        return Copied(source.name, run_id, present, 0, skipped=True)
    new_id = dst.insert_copy(run, rows.cells, rows.measurements, origin, rows.profiles, rows.predictions)
    return Copied(source.name, run_id, new_id, len(rows.cells), skipped=False)
