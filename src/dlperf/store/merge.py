"""Copy the runs of other store files into one (`dlperf merge`), so runs measured on several machines sit side by side.

    dlperf merge laptop.db server.db --db all.db

Every run of each source (its runs row, all cells, all measurements with their raw samples) is copied under a new
id, one transaction per run, and records where it came from (`runs.origin_json`). A run already in the target (same
start, command, plan and machine, or copied before from the same source run) is skipped, so merging twice adds
nothing. The sources' measured peaks are copied too, each once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import UsageError
from dlperf.store import Store, now, run_origin


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


def merge(sources: list[str], target: str, report: Callable[[str], None] = lambda line: None) -> list[Copied]:
    """Copy every run of each source not yet in `target`, then the peaks it lacks; one entry per run, and a line
    for `report` as each is done. Every source is opened before the target is: a bad one stops the merge before
    anything is written."""
    opened: list[Store] = []
    try:
        for source in sources:
            opened.append(_open_source(source, target))
        dst = Store.open(target, create=True)
        try:
            return [
                copied
                for src, source in zip(opened, sources, strict=True)
                for copied in _merge_one(src, dst, source, report)
            ]
        finally:
            dst.close()
    finally:
        for src in opened:
            src.close()


def _merge_one(src: Store, dst: Store, source: str, report: Callable[[str], None]) -> list[Copied]:
    done = []
    for run in src.rows("runs"):
        done.append(copy_run(src, dst, run, source))
        report(done[-1].line())
    if added := dst.insert_missing_peaks(src.rows("peaks")):
        report(f"{source}: {added} measured peak{'s' * (added != 1)} copied")
    return done


def _open_source(source: str, target: str) -> Store:
    """The source, opened to read; a missing, corrupt or foreign file, or the target itself, is a UsageError naming
    it, before anything is written."""
    path = Path(source)
    if not path.is_file():
        raise UsageError(f"merge {source!r}: no such database file")
    if Path(target).exists() and os.path.samefile(path, target):
        raise UsageError(f"merge {source!r}: it is the target database itself (--db {target!r})")
    try:
        return Store.open(path, create=False)
    except UsageError as exc:
        raise UsageError(f"merge {source!r}: {str(exc).removeprefix(f'--db {str(path)!r}: ')}") from exc


def copy_run(src: Store, dst: Store, run: dict, source: str) -> Copied:
    origin = {"db": str(Path(src.path).resolve()), "run_id": run["id"], "merged_at": now()}
    if run_origin(run):  # a run merged before: keep the trail back to where it was measured
        origin["origin"] = run_origin(run)
    measurements = src.rows("measurements", run["id"])
    present = dst.find_copy(run, measurements, origin)
    if present is not None:
        return Copied(source, run["id"], present, 0, skipped=True)
    cells = src.rows("cells", run["id"])
    new_id = dst.insert_copy(run, cells, measurements, origin)
    return Copied(source, run["id"], new_id, len(cells), skipped=False)
