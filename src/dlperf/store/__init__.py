"""The store: one SQLite file, the one truth every view reads. No SQL runs outside this package.

One writer (the parent process), one transaction per finished measurement. Typed columns for what every cell has,
and a JSON column (`extra_json`) for what later measurements add. `meta.schema_version` plus `MIGRATIONS` upgrade
older files in place, when a command first writes to one: a command that only reads (`table`, `report`, `export`,
`list`) reads an old file as it is, and never writes to it. A run keeps its environment and its plan beside its
cells, so a number is never separated from the machine that produced it; so does each measured peak (`dlperf peak`)
and each collective bandwidth (`dlperf comm`); a profiled cell keeps where its time went (`profiles`). A running
run is leased to the one process measuring it (`store/lease.py`). Reads return the typed records of
`store/records.py`; `merge.py` copies runs between files.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dlperf.errors import StoreFault, UnreadableRow, UsageError
from dlperf.store import lease
from dlperf.store.location import check_path, newer_schema
from dlperf.store.location import default_db as default_db  # where commands import it from
from dlperf.store.machine import MachineFigures
from dlperf.store.process import MeasurementRecord, ProcessMeasurement
from dlperf.store.records import (
    CellFigures,
    CellRecord,
    Origin,
    PlannedCell,
    Prediction,
    PredictionRecord,
    ProfileOutcome,
    ProfileRecord,
    RunRecord,
)
from dlperf.store.schema import LEASES, MIGRATIONS, PREDICTIONS, PROFILES, SCHEMA_VERSION, SESSIONS
from dlperf.vocab import Status


@dataclass(frozen=True)
class RunRows:
    """A run's raw rows (`Store.rows`), every one of them read and decoded: what a copy to another file takes."""

    run: dict[str, Any]
    cells: list[dict[str, Any]]
    measurements: list[dict[str, Any]]
    profiles: list[dict[str, Any]] = field(default_factory=list)
    predictions: list[dict[str, Any]] = field(default_factory=list)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Store(MachineFigures):
    """Open with `Store.open(path, create=...)`; read-only commands never create a file."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn, self.path = conn, path
        self.version = SCHEMA_VERSION  # lower only for an old file read as it is (not written to yet)
        self.upgrade_on_write = False  # an old file, upgraded before this process first writes to it
        self.leases: dict[int, lease.Heartbeat] = {}  # run id -> the heartbeat of the lease this process holds
        self.sessions: dict[int, int] = {}  # run id -> the session of it this process measures (1: its first)

    @classmethod
    def open(cls, path: str | Path, *, create: bool) -> Store:
        path = str(path)
        check_path(path, create=create)
        try:
            conn = sqlite3.connect(path, timeout=30)
            conn.row_factory = sqlite3.Row
            conn.text_factory = _text
            version = _schema_version(conn)
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"--db {path!r}: not a dlperf database or corrupt ({exc})") from exc
        if why := newer_schema(path, version):
            raise UsageError(f"--db {path!r}: {why}")
        store = cls(conn, path)
        if version == 0 and not create:
            raise UsageError(f"--db {path!r}: no dlperf runs in it (schema version {version})")
        if version < SCHEMA_VERSION:
            store.version, store.upgrade_on_write = version, True
            if create:
                store._ready_to_write()
        conn.execute("PRAGMA foreign_keys = ON")
        return store

    def close(self) -> None:
        """Release the leases this process holds: however it ends, short of being killed, its runs are free."""
        for run_id in list(self.leases):
            try:
                with self.conn:
                    self._release(run_id)
            except sqlite3.Error:  # left behind, it is a dead process's lease: the next --resume takes it over
                pass
        self.conn.close()

    def _ready_to_write(self) -> None:
        """Migrate an older file in place before the first write to it. Until then it is read as it is: the old
        schema, whose tables and columns it lacks read as empty (every read checks `version`), so a command that
        only reads never writes to the user's file, nor fails where it may not (a read-only file system)."""
        if not self.upgrade_on_write:
            return
        self.upgrade_on_write = False  # `_migrate`'s own transaction comes back here
        try:
            self._migrate()
        except sqlite3.OperationalError as exc:  # read-only, its directory read-only, or locked beyond the timeout
            raise StoreFault(
                f"--db {self.path!r}: cannot upgrade it to schema version {SCHEMA_VERSION} ({exc})"
            ) from exc
        self.version = SCHEMA_VERSION

    def _migrate(self) -> None:
        """One transaction, taken before the version is read again: two processes opening an old file at once
        upgrade it once (DDL outside an explicit transaction would commit statement by statement)."""
        with self.transaction():
            version = _schema_version(self.conn)
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target]:
                    self.conn.execute(statement)
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """A write SQLite refuses (a full disk, a file or directory made read-only, a damaged page) is one line
        naming the file and what was being stored; the transaction is rolled back, so the file holds all of it or
        none of it."""
        self._ready_to_write()
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreFault(f"--db {self.path!r}: could not store {what} ({exc})") from None

    writing = _writing  # the reads and writes that store one thing, as one (`sweep.store_or_keep`)

    # --- runs -----------------------------------------------------------------------------------------------------
    def create_run(self, spec: dict, env: dict, fingerprint: dict, argv: list[str], cells: list[PlannedCell]) -> int:
        """The run and its whole plan, every cell pending, leased to this process, in one transaction."""
        holder = lease.me()
        with self._writing("the run"), self.conn:
            cur = self.conn.execute(
                "INSERT INTO runs (started_at, status, argv, spec_json, env_json, fingerprint_json)"
                " VALUES (?, 'running', ?, ?, ?, ?)",
                (now(), json.dumps(argv), json.dumps(spec), json.dumps(env), json.dumps(fingerprint)),
            )
            self._insert_cells(cur.lastrowid, cells)
            if self.version >= LEASES:
                lease.take(self.conn, cur.lastrowid, holder)
        self.sessions[cur.lastrowid] = 1
        if self.version >= LEASES:
            self.leases[cur.lastrowid] = lease.Heartbeat(self.path, cur.lastrowid, holder)
        return cur.lastrowid

    def acquire(self, run_id: int) -> lease.Holder | None:
        """Lease the run to this process (`--resume`); returns the dead holder it took over from, if any. A live
        holder's run raises LeaseHeld, and nothing is written."""
        self._ready_to_write()
        if self.version < LEASES:  # a file kept at an old version (written as an older dlperf did): no leases
            return None
        holder = lease.me()
        with self._writing(f"run {run_id}'s lease"):  # a full disk, or a writer holding the file past the timeout
            stale = lease.acquire(self.conn, run_id, holder)
        self.leases[run_id] = lease.Heartbeat(self.path, run_id, holder)
        self.sessions[run_id] = self._latest_session(run_id) + 1
        return stale

    def _latest_session(self, run_id: int) -> int:
        """The latest session that measured a process of the run; 0 before any (or in a file that cannot tell)."""
        if self.version < SESSIONS:
            return 0
        (found,) = self.conn.execute("SELECT MAX(session) FROM measurements WHERE run_id = ?", (run_id,)).fetchone()
        return found or 0

    def measured_by(self, run_id: int) -> lease.Holder | None:
        """The live process measuring the run now, if any (a dead holder's lease is no one's)."""
        if self.version < LEASES:
            return None
        holder = lease.holder_of(self.conn, run_id)
        return holder if holder is not None and lease.alive(holder) else None

    def _still_leased(self, run_id: int) -> None:
        """Inside a write to `run_id`: refresh this process's lease, or stop if another process took it over (after
        this one was unheard of for lease.STALE_AFTER_S)."""
        if run_id in self.leases and not lease.beat(self.conn, run_id, lease.me()):
            self.leases[run_id].stop()  # kept: every later write to the run is refused too
            taker = lease.holder_of(self.conn, run_id)
            by = f" by {taker.describe()} at {taker.since}" if taker else ""
            raise lease.LeaseHeld(f"run {run_id} was taken over{by}; this process stopped measuring it")

    def _release(self, run_id: int) -> None:
        if heartbeat := self.leases.pop(run_id, None):
            heartbeat.stop()
            lease.release(self.conn, run_id, lease.me())

    def add_cells(self, run_id: int, cells: list[PlannedCell]) -> None:
        """More pending cells for a run that decides its plan as it goes (`dlperf optimize`)."""
        with self._writing(f"run {run_id}'s cells"), self.conn:
            self._insert_cells(run_id, cells)

    def _insert_cells(self, run_id: int, cells: list[PlannedCell]) -> None:
        (start,) = self.conn.execute("SELECT COUNT(*) FROM cells WHERE run_id = ?", (run_id,)).fetchone()
        for pos, planned in enumerate(cells, start):
            c = planned.cell
            row = {
                **c.to_json(), "run_id": run_id, "key": c.key, "position": pos, "batch": planned.workload.get("batch"),
                "workload_json": json.dumps(planned.workload), "status": Status.PENDING.value,
                "scaling": c.scaling or None, "loader": c.loader or None, "parallel": c.parallel or None,
                "microbatches": c.microbatches or None,
            }  # fmt: skip
            self._insert("cells", row)  # an older file (the tests make some) has no data-parallel columns

    def set_run_status(self, run_id: int, status: str) -> None:
        """A run that ends (complete, interrupted) frees its lease in the same transaction."""
        finished = None if status == "running" else now()
        with self._writing(f"run {run_id}'s status"), self.conn:
            self._still_leased(run_id)
            self.conn.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (status, finished, run_id))
            if status != "running":
                self._release(run_id)

    def run(self, run_id: int | None = None) -> RunRecord:
        """A run by id, or the latest one."""
        if run_id is None:
            row = self.conn.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
            if row is None:
                raise UsageError(f"{self.path}: no runs yet (run `dlperf run` first)")
            return _run_record(row)
        row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise UsageError(f"--run {run_id}: no such run in {self.path}")
        return _run_record(row)

    def runs(self) -> list[RunRecord]:
        return [_run_record(r) for r in self.conn.execute("SELECT * FROM runs ORDER BY id")]

    def cell_counts(self) -> dict[int, dict[str, int]]:
        """Each run's cells by status: {run_id: {"ok": 12, "pending": 2, ...}}."""
        counts: dict[int, dict[str, int]] = {}
        for run_id, status, n in self.conn.execute("SELECT run_id, status, COUNT(*) FROM cells GROUP BY 1, 2"):
            counts.setdefault(run_id, {})[status] = n
        return counts

    def latest_unfinished_run(self) -> RunRecord | None:
        row = self.conn.execute("SELECT * FROM runs WHERE status != 'complete' ORDER BY id DESC LIMIT 1").fetchone()
        return None if row is None else _run_record(row)

    # --- cells and measurements -----------------------------------------------------------------------------------
    def cells(self, run_id: int, unreadable: Callable[[UnreadableRow], None] | None = None) -> list[CellRecord]:
        """The run's cells in plan order: what the views read. A row that no longer decodes raises UnreadableRow,
        or, given `unreadable`, is handed to it and left out."""
        rows = self.conn.execute("SELECT * FROM cells WHERE run_id = ? ORDER BY position", (run_id,))
        cells = []
        for row in rows:
            try:
                cells.append(_decoded(CellRecord.from_row, dict(row), run_id, "figures"))
            except UnreadableRow as exc:
                if unreadable is None:
                    raise
                unreadable(exc)
        return cells

    def samples(self, run_id: int, key: str) -> list[list[float]]:
        """The raw step times of each of a cell's processes, in repeat order."""
        return [m.samples for m in self.measurements(run_id, key)]

    def measurements(self, run_id: int, key: str) -> list[MeasurementRecord]:
        rows = self.conn.execute(
            "SELECT * FROM measurements WHERE run_id = ? AND cell_key = ? ORDER BY repeat", (run_id, key)
        )
        return [_decoded(MeasurementRecord.from_row, dict(r), run_id, "samples") for r in rows]

    def durations(self, run_ids: list[int]) -> dict[str, list[float]]:
        """Cell key -> the wall-clock seconds of each of its finished processes in these runs (for estimates)."""
        found: dict[str, list[float]] = {}
        for run_id in run_ids:
            rows = self.conn.execute(
                "SELECT cell_key, duration_s FROM measurements WHERE run_id = ? AND duration_s IS NOT NULL", (run_id,)
            )
            for key, duration in rows:
                found.setdefault(key, []).append(duration)
        return found

    def done_repeats(self, run_id: int) -> set[tuple[str, int]]:
        rows = self.conn.execute("SELECT cell_key, repeat FROM measurements WHERE run_id = ?", (run_id,))
        return {(key, repeat) for key, repeat in rows}

    def record(self, run_id: int, key: str, repeat: int, measurement: ProcessMeasurement, cell: CellFigures,
               session: int | None = None) -> None:  # fmt: skip
        """One finished process's measurement and the cell's updated figures: one transaction, written only while
        this process holds the run's lease (if it took one). `session`: the session of the run that measured it,
        where not this process's (one kept beside a refusing store, `spill.py`)."""
        m = measurement
        with self._writing(f"cell {key} of run {run_id}"), self.conn:
            self._still_leased(run_id)
            row = {"run_id": run_id, "cell_key": key, "repeat": repeat, "status": m.status.value, "error": m.error,
                   "finished_at": now(), "duration_s": m.duration_s, "samples_json": json.dumps(m.samples),
                   "detail_json": json.dumps(m.detail.to_json()),
                   "session": session or self.sessions.get(run_id) or max(self._latest_session(run_id), 1)}  # fmt: skip
            self._insert("measurements", row, replace=True)  # an older file has no session column
            columns = cell.columns()
            sets = ", ".join(f"{c} = ?" for c in columns)
            self.conn.execute(
                f"UPDATE cells SET {sets}, extra_json = ?, updated_at = ? WHERE run_id = ? AND key = ?",
                (*columns.values(), json.dumps(cell.to_json()), now(), run_id, key),
            )

    # --- profiles (`dlperf profile`, `run --profile`) ---------------------------------------------------------------
    def record_profile(self, run_id: int, key: str, profile: ProfileOutcome) -> None:
        """A cell's profiled process, in one transaction, replacing an earlier profile of the cell in this run. The
        profiler's overhead is the profiled step over the cell's timed median, when the cell has one."""
        profiled = profile.profiled
        with self._writing(f"the profile of cell {key} of run {run_id}"), self.conn:
            self._still_leased(run_id)
            row = self.conn.execute("SELECT median_s FROM cells WHERE run_id = ? AND key = ?", (run_id, key)).fetchone()
            median, step = (row[0] if row else None), (profiled.step_s if profiled else None)
            self.conn.execute(
                "INSERT OR REPLACE INTO profiles VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id, key, now(), profile.status.value, profile.error, profile.duration_s, step,
                    step / median if step and median else None, profiled.trace if profiled else None,
                    json.dumps(profile.to_json()),
                ),
            )  # fmt: skip

    def profiles(self, run_id: int) -> dict[str, ProfileRecord]:
        """Cell key -> the run's profile of that cell; an old file that cannot be upgraded has none."""
        if self.version < PROFILES:
            return {}
        rows = self.conn.execute("SELECT * FROM profiles WHERE run_id = ?", (run_id,))
        found = (_decoded(ProfileRecord.from_row, dict(r), run_id, "profile") for r in rows)
        return {p.cell_key: p for p in found}

    # --- predictions (predict/roofline.py: a GPU cell's own GPU, or `dlperf crossover`'s) ---------------------------
    def record_predictions(self, run_id: int, rows: list[Prediction]) -> None:
        """Predicted steps of the run's cells, one per (cell, GPU), in one transaction, replacing earlier ones."""
        with self._writing(f"the predictions of run {run_id}"), self.conn:
            self._still_leased(run_id)
            for p in rows:
                self.conn.execute(
                    "INSERT OR REPLACE INTO predictions VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        run_id, p.cell_key, p.gpu, now(), p.mode, p.batch, p.step_s, p.device_s, p.transfer_s,
                        p.bound, json.dumps(p.detail or {}),
                    ),
                )  # fmt: skip

    def predictions(self, run_id: int) -> dict[str, list[PredictionRecord]]:
        """Cell key -> the run's predictions for that cell, one per GPU; an older file has none."""
        if self.version < PREDICTIONS:
            return {}
        found: dict[str, list[PredictionRecord]] = {}
        for r in self.conn.execute("SELECT * FROM predictions WHERE run_id = ? ORDER BY rowid", (run_id,)):
            record = _decoded(PredictionRecord.from_row, dict(r), run_id, "prediction")
            found.setdefault(record.cell_key, []).append(record)
        return found

    # --- copies between files (`dlperf merge`) ----------------------------------------------------------------------
    def rows(self, table: str, run_id: int | None = None) -> list[dict[str, Any]]:
        """Raw rows of `table` ("runs", "cells", "measurements", "peaks") as dicts, JSON undecoded: what a copy
        to another file needs. `run_id`: only that run's rows. A table an old file lacks reads as empty."""
        too_old = {"peaks": 2, "profiles": PROFILES, "predictions": PREDICTIONS}
        if self.version < too_old.get(table, 0):
            return []
        by_run = ("cells", "measurements", "profiles", "predictions")
        column = "id" if table == "runs" else "run_id" if table in by_run else None
        where = f" WHERE {column} = ?" if run_id is not None and column else ""
        args = (run_id,) if where else ()
        return [dict(r) for r in self.conn.execute(f"SELECT * FROM {table}{where} ORDER BY rowid", args)]

    def check_run(self, run_id: int) -> RunRows:
        """Every row of a run read and decoded as the views decode it (a damaged page, text that is not JSON, a
        status or sample that is not one), before anything relies on it; returns the raw rows. A row that does not
        read or decode is a UsageError naming the run, and the cell and process where it can."""
        part = f"run {run_id}"
        try:
            [run] = self.rows("runs", run_id)
            RunRecord.from_row(_whole(run))
            cells, measurements = self.rows("cells", run_id), self.rows("measurements", run_id)
            for row in cells:
                part = f"run {run_id}, cell {row.get('key')}"
                CellRecord.from_row(_whole(row))
            for row in measurements:
                part = f"run {run_id}, cell {row.get('cell_key')}, process {row.get('repeat')}"
                m = MeasurementRecord.from_row(_whole(row))
                if not isinstance(m.samples, list) or not all(isinstance(x, int | float) for x in m.samples):
                    raise ValueError("its samples are not a list of numbers")
            profiles = self.rows("profiles", run_id)
            for row in profiles:
                part = f"run {run_id}, cell {row.get('cell_key')}, profile"
                ProfileRecord.from_row(_whole(row))
            predictions = self.rows("predictions", run_id)
            for row in predictions:
                part = f"run {run_id}, cell {row.get('cell_key')}, prediction for {row.get('gpu')}"
                PredictionRecord.from_row(_whole(row))
        except (sqlite3.DatabaseError, ValueError, TypeError, KeyError) as exc:
            raise UsageError(f"{part}: unreadable ({exc})") from exc
        return RunRows(run, cells, measurements, profiles, predictions)

    def check_file(self) -> None:
        """SQLite's own check of the file's structure (`PRAGMA quick_check`): damage that reading rows may miss."""
        try:
            found = [r[0] for r in self.conn.execute("PRAGMA quick_check")]
        except sqlite3.DatabaseError as exc:
            found = [str(exc)]
        if found != ["ok"]:
            raise UsageError(f"damaged ({found[0]})")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction around several writes (`insert_copy`, `insert_missing_peaks`): all or none."""
        self._ready_to_write()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    def find_copy(self, run: dict[str, Any], measurements: list[dict[str, Any]], origin: Origin) -> int | None:
        """The id of a run here that is `run`, or None: one with the same start, command, plan and machine, that
        was copied from the same source run (`origin`) or whose raw samples are the run's, or some of them (copied
        before the run was resumed). The start is only to the second: two runs started in one second with one command
        (parallel jobs) are still two runs; and a file made afresh at a path merged before (a CI job's) holds new runs
        under the same ids."""
        same = self.conn.execute(
            "SELECT id, origin_json FROM runs"
            " WHERE started_at = ? AND argv IS ? AND spec_json = ? AND fingerprint_json = ?",
            tuple(run.get(k) for k in ("started_at", "argv", "spec_json", "fingerprint_json")),
        )
        for found, origin_json in same.fetchall():
            theirs = Origin.of(json.loads(origin_json)) if origin_json else None
            if theirs and (theirs.db, theirs.run_id) == (origin.db, origin.run_id):
                return found
            held, measured = _measured(self.rows("measurements", found)), _measured(measurements)
            if held == measured or (held and set(held) <= set(measured)):
                return found
        return None

    def insert_copy(
        self,
        run: dict[str, Any],
        cells: list[dict[str, Any]],
        measurements: list[dict[str, Any]],
        origin: Origin,
        profiles: list[dict[str, Any]] = (),
        predictions: list[dict[str, Any]] = (),
    ) -> int:
        """A run read from another file (`rows`), with its cells, measurements, profiles and predictions, under a new
        id and with its origin, inside the caller's `transaction`, so an interrupted copy leaves no half run. Returns
        the new id."""
        fields = {k: v for k, v in run.items() if k not in ("id", "origin_json")}
        new_id = self._insert("runs", {**fields, "origin_json": json.dumps(origin.to_json())})
        for row in cells:
            self._insert("cells", {**row, "run_id": new_id})
        for row in measurements:
            self._insert("measurements", {**row, "run_id": new_id})
        for row in profiles:
            self._insert("profiles", {**row, "run_id": new_id})
        for row in predictions:
            self._insert("predictions", {**row, "run_id": new_id})
        return new_id

    def update_copy(self, run_id: int, rows: RunRows) -> None:
        """A run copied in before (`insert_copy`) brought up to date with its source's rows as they are now: its cells,
        measurements, profiles and predictions replaced, in one transaction, while this process holds its lease
        (`dlperf run --ray`: a node's run streamed to the driver as its cells finish)."""
        with self._writing(f"run {run_id}'s cells"), self.conn:
            self._still_leased(run_id)
            self._replace_rows(run_id, rows)

    def refresh_copy(self, run_id: int, rows: RunRows) -> None:
        """A run copied in before brought up to date with its source's run as it is now (`dlperf merge` of a run
        resumed since), inside the caller's `transaction`: its status and end, its rows replaced, none removed."""
        status, finished = rows.run.get("status"), rows.run.get("finished_at")
        self.conn.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (status, finished, run_id))
        self._replace_rows(run_id, rows)

    def _replace_rows(self, run_id: int, rows: RunRows) -> None:
        for table, found in (("cells", rows.cells), ("measurements", rows.measurements),
                             ("profiles", rows.profiles), ("predictions", rows.predictions)):  # fmt: skip
            for row in found:
                self._insert(table, {**row, "run_id": run_id}, replace=True)

    def insert_missing_peaks(self, peaks: list[dict[str, Any]]) -> int:
        """Peaks read from another file (`rows`) that this one lacks (every column but the id equal), inside the
        caller's `transaction`; returns how many were added."""
        added = 0
        for peak in peaks:
            fields = {k: v for k, v in peak.items() if k != "id"}
            match = " AND ".join(f"{k} IS ?" for k in fields)
            if self.conn.execute(f"SELECT 1 FROM peaks WHERE {match}", tuple(fields.values())).fetchone():
                continue
            self._insert("peaks", fields)
            added += 1
        return added

    def _insert(self, table: str, row: dict[str, Any], *, replace: bool = False) -> int:
        """Insert the columns of `row` this file's `table` has (an older source may lack some, and vice versa);
        `replace`: over the row with the same key."""
        columns = [c for c in row if c in self._columns(table)]
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        cur = self.conn.execute(
            f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            tuple(row[c] for c in columns),
        )
        return cur.lastrowid

    def _columns(self, table: str) -> set[str]:
        return {name for _, name, *_ in self.conn.execute(f"PRAGMA table_info({table})")}


def _measured(measurements: list[dict[str, Any]]) -> list[tuple]:
    """What identifies a run's measurements: no two measured processes give the same raw samples."""
    return sorted(tuple(m.get(k) for k in ("cell_key", "repeat", "samples_json")) for m in measurements)


def run_origin(run: sqlite3.Row | dict) -> Origin | None:
    """Where a merged run came from (`dlperf merge`); None for a run measured into its file (or a file too old to
    record it)."""
    raw = dict(run).get("origin_json")
    return Origin.of(json.loads(raw)) if raw else None


class Undecodable:
    """A stored text whose bytes are not UTF-8 (a damaged page), read in its place (`_text`): the row it is in is
    then named and left out like any other damaged row, where SQLite's own decoding stopped the whole read ("Could not
    decode to UTF-8 column ...") and could not say which row."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def __repr__(self) -> str:
        return f"<{len(self.raw)} bytes that are not UTF-8>"


def _text(raw: bytes) -> str | Undecodable:
    """The connection's text factory: UTF-8, as SQLite's default, but a text that is not UTF-8 becomes an Undecodable
    (its row is refused where it is decoded: `_whole`)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return Undecodable(raw)


def _whole(row: dict[str, Any]) -> dict[str, Any]:
    """The row, when every text in it is UTF-8; a ValueError naming the first column that is not."""
    bad = next((column for column, value in row.items() if isinstance(value, Undecodable)), None)
    if bad is not None:
        raise ValueError(f"its column {bad!r} is not UTF-8 text")
    return row


def _decoded(from_row: Callable, row: dict[str, Any], run_id: int, what: str):
    """A record from its row; a row whose text no longer decodes (a damaged page: `PRAGMA integrity_check` can
    still say ok), as JSON or as UTF-8, is an UnreadableRow naming its run and cell."""
    try:
        return from_row(_whole(row))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # JSONDecodeError and a bad status are ValueErrors
        key = row.get("key") or row.get("cell_key")
        raise UnreadableRow(run_id, str(key), what, f"{type(exc).__name__}: {exc}") from None


def _run_record(row: sqlite3.Row) -> RunRecord:
    """A run from its row; one that no longer decodes stops the command with one line naming the run (a run without
    its spec or environment cannot be shown in part)."""
    found = dict(row)
    try:
        return RunRecord.from_row(_whole(found))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise StoreFault(f"run {found.get('id')}: its stored row cannot be read ({why})") from None


def _schema_version(conn: sqlite3.Connection) -> int:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "meta" not in tables:
        if tables:
            raise sqlite3.DatabaseError(f"unexpected tables {sorted(tables)}")
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return 0
    if not re.fullmatch(r"[0-9]{1,9}", str(row[0])):  # a garbled value: no version dlperf wrote, none to migrate from
        raise sqlite3.DatabaseError(f"its schema version {row[0]!r} is not one dlperf writes")
    return int(row[0])
