"""Copy the runs of other store files into one (`dlperf merge`), so runs measured on several machines sit side by side.

    dlperf merge laptop.db server.db --db all.db

Every run of each source (its runs row, all cells, all measurements with their raw samples, its profiles and
predictions) is copied under a new id and records where it came from (`runs.origin_json`). A run already in the target
(same start, command, plan and machine, and copied before from the same source run, or holding processes the source
run holds too) is skipped, so merging twice adds nothing; unless the source's run has moved on since its copy was made
(resumed: more cells, processes or profiles, another status), when the copy is brought up to date, but for a copy
resumed in the target apart from its source, which keeps its own measurements (said in a warning). A source behind
its copy (a file taken while the run measured, merged after the finished one) changes nothing, and the copy is said to
be further along. An unfinished run (interrupted, stopped, or measured by a live process as it is read) is copied with
a warning saying so. A Ray node's run that went on with a lost node's run names the lost run's copy (`relink`). The
sources' measured peaks and all-reduce figures are copied too, each once. All or nothing: every source is read whole
and each row decoded before the target is opened (a damaged source is a one-line error naming it, and the run and
cell), and the copy is one transaction.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlperf.errors import StoreFault, UsageError
from dlperf.measure.units import plural
from dlperf.store import RunRows, Store, lease, now, run_origin
from dlperf.store.location import db_flag, identity, named, not_a_database_file, path_word, unreachable
from dlperf.store.records import Origin, RunRecord
from dlperf.store.state import CONTINUES, RAY_ORIGIN, run_state


@dataclass(frozen=True)
class Copied:
    source: str  # as the user named it
    source_run: int
    target_run: int
    cells: int
    skipped: bool  # already present as `target_run`
    updated: str | None = None  # already present, and brought up to date: what the source's run had since
    warning: str | None = None  # copied unfinished, or left as it is here: said so, beside the line
    apart: str | None = None  # already present, and each resumed apart from the other: what each measured alone
    ahead: str | None = None  # already present, and further along than the source's run: what the copy has beyond it

    def line(self) -> str:
        present = f"{self.source} run {self.source_run} already present as run {self.target_run}"
        if self.apart:
            return f"{present}: kept as it is here ({self.apart})"
        if self.updated:
            return f"{present}: brought up to date ({self.updated})"
        if self.ahead:
            return f"{present}: skipped: the copy here is further along ({self.ahead})"
        if self.skipped:
            return f"{present}: skipped"
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
    unfinished: dict[int, str] = field(default_factory=dict)  # run id -> what is unfinished about it, in a sentence
    went_on: dict[int, int] = field(default_factory=dict)  # a lost Ray node's run -> the run that measured what it left
    stopped: frozenset[int] = frozenset()  # its runs unfinished with their process gone (`state.run_state`)
    comm: list[dict[str, Any]] = field(default_factory=list)  # `dlperf comm`'s all-reduce figures (were dropped)


def merge(sources: list[str], target: str, report: Callable[[str], None] = lambda line: None,
          warn: Callable[[str], None] = lambda line: None) -> list[Copied]:  # fmt: skip
    """Copy every run of each source not yet in `target` (or bring up to date its copy there), then the peaks it
    lacks, in one transaction; one entry per run, and a line for `report` for each once all is written, and one for
    `warn` for each run copied unfinished. Every source is read and checked before the target is opened: a bad one
    stops the merge before anything is written."""
    read = [read_source(source, target) for source in sources]
    new = not os.path.lexists(os.path.realpath(target))  # no file, nor one a link named as the target leads to
    dst = Store.open(target, create=True)
    try:
        lines: list[str] = []
        with dst.transaction(full_said=True):
            done = [copied for source in read for copied in _merge_one(source, dst, lines)]
    except BaseException as exc:  # an interrupt, a full disk: a store the merge created holds nothing, and is not left
        if not new:
            dst.close()  # its leases released, as after a merge that succeeds
            raise
        if _remove_made(dst) and isinstance(exc, StoreFault) and _full(exc):
            raise StoreFault(
                f"{named(target)}: could not store what it copied ({exc.__context__}): the file the "
                "merge created is removed; free room on its disk and run the command again"
            ) from None
        raise
    dst.close()
    for line in lines:
        report(line)
    for copied in done:
        if copied.warning:
            warn(copied.warning)
    return done


def _remove_made(dst: Store) -> bool:
    """Close the store a merge created and remove it, with its journal, where it holds no run once its copy is undone
    and is still the file this process made (another process may have made one at its path meanwhile, and stored a
    run there: kept); whether it was removed."""
    try:
        runs = dst.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.Error:
        runs = None
    dst.close()
    real = os.path.realpath(dst.path)  # a link named as the target stays; the file it names made here does not
    if runs != 0 or identity(real) != dst.held:
        return False
    for leftover in (real, f"{real}-journal"):
        Path(leftover).unlink(missing_ok=True)
    return True


def _full(exc: BaseException) -> bool:
    cause = exc.__context__
    return isinstance(cause, sqlite3.Error) and getattr(cause, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


def _merge_one(source: Source, dst: Store, lines: list[str]) -> list[Copied]:
    done = []
    for rows in source.runs:
        done.append(copy_run(rows, dst, source))
        lines.append(done[-1].line())
    relink(source, dst, {c.source_run: c.target_run for c in done})
    peaks, comm = dst.insert_missing_peaks(source.peaks), dst.insert_missing("comm", source.comm)
    if peaks:
        lines.append(f"{source.name}: {plural(peaks, 'measured peak')} copied")
    if comm:
        lines.append(f"{source.name}: {plural(comm, 'all-reduce figure')} copied")
    if not source.runs and not peaks and not comm:  # the wrong file named, one dlperf only created, or merged before
        held = [plural(len(rows), what) for rows, what in ((source.peaks, "measured peak"),
                                                            (source.comm, "all-reduce figure")) if rows]  # fmt: skip
        lines.append(f"{source.name}: nothing to copy (it holds no run; its {' and '.join(held)} are here already)"
                     if held else f"{source.name}: nothing to copy (it holds no run and no peak)")  # fmt: skip
    return done


def relink(source: Source, dst: Store, ids: dict[int, int]) -> None:
    """A Ray node's run that went on with a lost node's run names it by its id (`CONTINUES`): in the target that id
    is the lost run's copy's (`ids`: source run -> target run), or none where the source did not hold it."""
    for rows in source.runs:
        env = json.loads(rows.run.get("env_json") or "{}")
        if CONTINUES not in env:
            continue
        lost = ids.get(env.pop(CONTINUES)) if isinstance(env[CONTINUES], int) else None
        linked = json.dumps(env if lost is None else {**env, CONTINUES: lost})
        dst.conn.execute("UPDATE runs SET env_json = ? WHERE id = ?", (linked, ids[rows.run.get("id")]))


def read_source(source: str, target: str) -> Source:
    """Every run and peak of the source, each row decoded (`Store.check_run`) and the file's structure checked; a
    missing, corrupt or foreign file, or the target itself, is a UsageError naming it, before anything is written."""
    src = _open_source(source, target)
    try:
        try:
            runs = [src.check_run(run.get("id")) for run in src.rows("runs")]
            peaks, comm = src.rows("peaks"), src.rows("comm")
            src.check_file()
            states = [run_state(src, record) for record in src.runs()]
            unfinished = {s.run.id: s.summary() for s in states if s.unfinished}
            went_on = {lost: r.id for r in src.runs() if isinstance(lost := r.env.get(CONTINUES), int) and lost < r.id}
            stopped = frozenset(s.run.id for s in states if s.state == "stopped")
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"unreadable ({exc})") from exc
    except UsageError as exc:
        raise UsageError(f"merge {source!r}: {exc}") from exc
    finally:
        src.close()
    return Source(source, str(Path(source).resolve()), runs, peaks, unfinished, went_on, stopped, comm)


def _open_source(source: str, target: str) -> Store:
    """The source, opened to read."""
    path = Path(source)
    if why := unreachable(source) or not_a_database_file(source):
        raise UsageError(f"merge {source!r}: {why}")
    if os.path.exists(target) and os.path.samefile(path, target):  # an unreachable target is said when it opens
        raise UsageError(f"merge {source!r}: it is the target database itself ({named(target)})")
    try:
        return Store.open(path, create=False)
    except UsageError as exc:
        raise UsageError(f"merge {source!r}: {str(exc).removeprefix(f'{named(path)}: ')}") from exc


def copy_run(rows: RunRows, dst: Store, source: Source) -> Copied:
    run, run_id = rows.run, rows.run.get("id")
    # a run merged before keeps the trail back to where it was measured
    origin = Origin(source.path, run_id, now(), run_origin(run), run_id in source.stopped)
    present = dst.find_copy(run, rows.measurements, origin)
    warning = None
    if (why := source.unfinished.get(run_id)) and (later := source.went_on.get(run_id)):  # it will never finish
        warning = (f"{source.name}: {why}; copied as it is: its Ray node was lost, and run {later} of the file "
                   "measured what it left")  # fmt: skip
    elif why:
        warning = (f"{source.name}: {why}; copied as it is: merging this file again once the run is finished brings "
                   "its copy up to date")  # fmt: skip
    if present is not None:
        held = {_process(m) for m in dst.rows("measurements", present)}  # the copy's processes, read once
        news = news_since_copy(dst, present, rows, held)
        if news and (apart := resumed_apart(held, rows)):
            said = (f"{source.name} run {run_id} and its copy here, run {present}, were each resumed apart ({apart}): "
                    f"the copy keeps its own measurements; the source's run was not copied over them (it stays in "
                    f"{source.name})")  # fmt: skip
            return Copied(source.name, run_id, present, 0, skipped=True, warning=said, apart=apart)
        was = dst.run(present).status
        if news:
            dst.refresh_copy(present, rows, run_id in source.stopped)
        elif ahead := further_along(was, rows, held):  # a stale file: its copy here is never taken back
            return Copied(source.name, run_id, present, 0, skipped=True, ahead=ahead)
        elif was == "running" and dst.mark_stopped(present, stopped := run_id in source.stopped):
            news = "running -> stopped (its process is gone)" if stopped else "stopped -> running (measured again)"
        return Copied(source.name, run_id, present, 0, skipped=True, updated=news, warning=news and warning)
    new_id = dst.insert_copy(run, rows.cells, rows.measurements, origin, rows.profiles, rows.predictions)
    return Copied(source.name, run_id, new_id, len(rows.cells), skipped=False, warning=warning)


def news_since_copy(dst: Store, copy_id: int, rows: RunRows, held: set[tuple]) -> str | None:
    """What the source's run has that its copy here (holding the processes `held`) lacks, in words ("3 more processes,
    1 more profile, interrupted -> complete"); None when the copy is up to date (or ahead: a source is never taken
    back). Its status alone is news where it finished there or the copy was taken while it ran: a stale file (a `cp`
    made while the run measured, "running") beside a copy interrupted since read "interrupted -> running", then
    "running -> interrupted" from the newer file, flipping the copy on every merge."""
    processes = sum(_process(m) not in held for m in rows.measurements)
    profiled = {p.get("cell_key") for p in dst.rows("profiles", copy_id)}
    profiles = sum(p.get("cell_key") not in profiled for p in rows.profiles)
    planned = {c.get("key") for c in dst.rows("cells", copy_id)}
    cells = sum(c.get("key") not in planned for c in rows.cells)
    was, became = dst.run(copy_id).status, rows.run.get("status")
    counted = ((cells, "more cell", "s"), (processes, "more process", "es"), (profiles, "more profile", "s"))
    parts = [plural(n, word, suffix) for n, word, suffix in counted if n]
    if was != became and was != "complete" and (parts or became == "complete" or was == "running"):
        parts.append(f"{was} -> {became}")
    return ", ".join(parts) or None


def further_along(status: str, rows: RunRows, held: set[tuple]) -> str | None:
    """What a copy (its status, its processes `held`) holding every process of the source's run has beyond it, in
    words ("complete, 3 more processes"): a stale file (one copied while the run measured) merged after a newer one
    had brought the copy further. None where it has nothing more. Nothing of it is changed: a merge never takes a copy
    back, nor says its state flipped (a stale file of a complete run read "brought up to date (running -> stopped)",
    then the newer file "stopped -> running", on every merge)."""
    more = len(held - {_process(m) for m in rows.measurements})
    parts = [status] if status != rows.run.get("status") and status == "complete" else []
    return ", ".join([*parts, *([plural(more, "more process", "es")] if more else [])]) or None


def resumed_apart(held: set[tuple], rows: RunRows) -> str | None:
    """What the copy and the source's run each measured that the other lacks, in words ("1 process measured here
    only, 1 there only"), where the copy holds processes the source's run does not: the copy was resumed here, apart
    from the source, and bringing it up to date would replace its own measurements (a cell's process is one row per
    repeat) and leave its cells' figures the source's. None when the copy (its processes `held`) holds nothing of its
    own."""
    theirs = {_process(m) for m in rows.measurements}
    here, there = len(held - theirs), len(theirs - held)
    if not here:
        return None
    return f"{plural(here, 'process', 'es')} measured here only, {there} there only"


def at_source(run: RunRecord, held: set[tuple] = frozenset()) -> tuple[str, lease.Holder | None] | None:
    """Where the run a copy `run` came from (`dlperf merge`) goes on without it: (its file, the live process measuring
    it there now), or (its file, None) where it is complete there and the copy (its processes `held`,
    `processes_of`) holds none of its own: a copy resumed here apart from it is finished here (a merge keeps it as it
    is, so "merge it again" would refuse it for good). Found by its id and start in the file it was copied from, or
    for a copy of a copy in the file that one was. None where neither holds (its process gone, unfinished), its file
    is gone or unreadable, or `run` is no copy (a Ray node's run goes on over the cluster)."""
    origin = run.origin
    while origin is not None and not str(origin.db).startswith(RAY_ORIGIN):
        status, holder, theirs = _source_state(origin.db, origin.run_id, run.started_at)
        if holder is not None or (status == "complete" and not held - theirs):
            return origin.db, holder
        origin = origin.origin
    return None


def source_refusal(store: Store, run: RunRecord, db: str) -> str | None:
    """Why a copy `run` of `db` is not resumed here, where its source goes on without it (`at_source`): a live
    process measuring it there (the two would measure the same cells at once, each timing the other's load), or
    complete there; merging that file again once it is finished brings the copy up to date. None where it may be:
    `dlperf run --resume` and `--resume --ray` (a Ray node's run merged in, its sweep's file resumed too) alike. One
    way only: a copy names its source, but the source names none of its copies (a merge only reads it), so the
    source's own resume, started while a copy of it is resumed, is not refused (docs/guides/parallel.md says so)."""
    if run.origin is None or (found := at_source(run, processes_of(store, run.id))) is None:
        return None
    source, holder = found
    there = "where it is complete: merging it again"
    if holder is not None:
        there = (f"where {holder.describe()} is measuring it still: resumed here, the two would time each other's "
                 "load; merging it again once the run is finished")  # fmt: skip
    return (f"run {run.id} of {db} was copied from {source}, {there} brings the copy up to date "
            f"(`dlperf merge {path_word(source)} {db_flag(db)}`)")  # fmt: skip


def processes_of(store: Store, run_id: int) -> set[tuple]:
    """The run's processes as a merge tells them apart (cell, repeat, steps): what `at_source` compares."""
    return {_process(m) for m in store.rows("measurements", run_id)}


def _source_state(db: str, run_id: int, started_at: str) -> tuple[str | None, lease.Holder | None, set[tuple]]:
    """(its status, the live process measuring it, its processes where it is complete) of run `run_id` of the file
    `db`, where that run began at `started_at`; (None, None, set()) where the file or the run is not there, or cannot
    be read."""
    nothing: tuple[None, None, set[tuple]] = None, None, set()
    if not os.path.isfile(db):
        return nothing
    try:
        src = Store.open(db, create=False)
    except UsageError:
        return nothing
    try:
        run = src.run(run_id)
        if run.started_at != started_at:
            return nothing
        # the process measuring it there, or, where that file is itself a `cp` of one being measured, the process
        # measuring the file it was copied from: either one measures these cells now
        holder = src.measured_by(run_id) or src.measured_by(run_id, copied=True)
        return run.status, holder, processes_of(src, run_id) if run.status == "complete" else set()
    except (UsageError, sqlite3.Error):  # no such run there now, or a file busy or damaged
        return nothing
    finally:
        src.close()


def _process(measurement: dict[str, Any]) -> tuple:
    return tuple(measurement.get(k) for k in ("cell_key", "repeat", "samples_json"))
