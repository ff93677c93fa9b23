"""The store: one SQLite file, the one truth every view reads. No SQL runs outside this package.

One writer (the parent process), one transaction per finished measurement. Typed columns for what every cell has,
and a JSON column (`extra_json`) for what later measurements add. `meta.schema_version` plus `MIGRATIONS` upgrade
older files in place, when a command first writes to one: a command that only reads (`table`, `report`, `export`,
`list`) reads an old file as it is, and never writes to it. A run keeps its environment and its plan beside its
cells, so a number is never separated from the machine that produced it; so does each measured peak (`dlperf peak`)
and each collective bandwidth (`dlperf comm`); a profiled cell keeps where its time went (`profiles`). A running
run is leased to the one process measuring it (`store/lease.py`). Reads return the typed records of
`store/records.py`, decoded by `decode.py`; `copies.py` reads and writes whole rows, and `merge.py` copies runs
between files with them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from dlperf.errors import StoreFault, UnreadableRow, UsageError, left_out
from dlperf.store import lease, spill
from dlperf.store.copies import Copies
from dlperf.store.copies import RunRows as RunRows  # where the fleet and merge import them from
from dlperf.store.copies import run_origin as run_origin
from dlperf.store.decode import decoded, run_record, text_factory
from dlperf.store.location import (
    EMPTIED,
    StoreGone,
    check_path,
    gone,
    identity,
    named,
    newer_schema,
    not_sqlite,
    read_only_wal,
    run_said,
    size_of,
    unopened,
)
from dlperf.store.location import default_db as default_db  # where commands import it from
from dlperf.store.machine import MachineFigures
from dlperf.store.process import MeasurementRecord, ProcessMeasurement, storable
from dlperf.store.records import (
    CellFigures,
    CellRecord,
    PlannedCell,
    Prediction,
    PredictionRecord,
    ProfileOutcome,
    ProfileRecord,
    RunRecord,
    measured_order,
)
from dlperf.store.schema import LEASES, MIGRATIONS, PREDICTIONS, PROFILES, RUN_TOKENS, SCHEMA_VERSION, SESSIONS
from dlperf.vocab import Status, ran_out_of_memory


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_token() -> str:
    """A run's token (`runs.token`): random, so no two runs have the same one, whenever and wherever begun."""
    return uuid.uuid4().hex


class Store(Copies, MachineFigures):
    """Open with `Store.open(path, create=...)`; read-only commands never create a file."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn, self.path = conn, path
        self.held = identity(path)  # the file opened, told from another put at its path while this process writes
        self.held_bytes = size_of(path)  # 0: a new file, never "emptied" since, until this process wrote to it
        self.vanished: tuple[str, str, Path | None] | None = None  # the file gone: what happened, where its rows are
        self.version = SCHEMA_VERSION  # lower only for an old file read as it is (not written to yet)
        self.upgrade_on_write = False  # an old file, upgraded before this process first writes to it
        self.leases: dict[int, lease.Heartbeat] = {}  # run id -> the heartbeat of the lease this process holds
        self.sessions: dict[int, int] = {}  # run id -> the session of it this process measures (1: its first)
        self.marks: dict[int, dict[str, str]] = {}  # run id -> what tells it from another of its id (`spill.mark`)

    @classmethod
    def open(cls, path: str | Path, *, create: bool, made_by: str = "dlperf run") -> Store:
        path = str(path)
        check_path(path, create=create, made_by=made_by)
        new = create and not os.path.lexists(path)
        try:
            try:
                conn, version = _connected(path)
            except sqlite3.DatabaseError:
                if create or (uri := read_only_wal(path)) is None:
                    raise
                conn, version = _connected(uri)  # read as it is: nothing this command reads can change it
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{named(path)}: {unopened(path, exc)}") from exc
        if why := newer_schema(path, version):
            raise UsageError(f"{named(path)}: {why}")
        store = cls(conn, path)
        if version == 0 and not create:
            raise UsageError(f"{named(path)}: {not_sqlite(path) or 'no dlperf runs in it (schema version 0)'}")
        if version < SCHEMA_VERSION:
            store.version, store.upgrade_on_write = version, True
            if create:
                store.made_or_removed(new)
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

    def made_or_removed(self, new: bool) -> None:
        """Its tables made (or an old file upgraded) as the store is opened to write; a file this process created
        that could not take them (a full disk) is removed, not left empty: the next command read it as "no dlperf
        runs in it (schema version 0)"."""
        try:
            self._ready_to_write()
        except StoreFault:
            if new and size_of(self.path) == 0:
                self.conn.close()
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            raise

    def _ready_to_write(self) -> None:
        """Migrate an older file in place before the first write to it. Until then it is read as it is: the old
        schema, whose tables and columns it lacks read as empty (every read checks `version`), so a command that
        only reads never writes to the user's file, nor fails where it may not (a read-only file system)."""
        if not self.upgrade_on_write:
            return
        self.upgrade_on_write = False  # `_migrate`'s own transaction comes back here
        try:
            self._migrate()
            self.held_bytes = max(self.held_bytes, 1)  # its tables written: emptied from now on if found empty
        except lease.LeaseHeld:  # an older dlperf measures it: left as it is, still to upgrade before a write
            self.upgrade_on_write = True
            raise
        except sqlite3.OperationalError as exc:  # read-only, its directory read-only, or locked beyond the timeout
            doing = (
                f"cannot upgrade it to schema version {SCHEMA_VERSION}" if self.version else "cannot make its tables"
            )
            raise StoreFault(f"{named(self.path)}: {doing} ({exc})") from exc
        self.version = SCHEMA_VERSION

    def _migrate(self) -> None:
        """One transaction, taken before the version is read again: two processes opening an old file at once
        upgrade it once (DDL outside an explicit transaction would commit statement by statement). Refused (LeaseHeld,
        nothing written) while an older dlperf measures a run in it (`lease.refuse_upgrade`), read in that transaction:
        a run it begins meanwhile waits for it."""
        with self.transaction():
            version = _schema_version(self.conn)
            if version >= LEASES:
                lease.refuse_upgrade(self.conn, self.held, version, SCHEMA_VERSION, named(self.path))
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
            if fault := self._gone(what, exc):
                raise fault from None
            raise StoreFault(f"{named(self.path)}: could not store {what} ({exc})") from None

    def _gone(self, what: str, exc: sqlite3.Error) -> StoreGone | None:
        """Where the file this process opened is no longer at its path (SQLite then refuses every write as "attempt
        to write a readonly database"), what happened, said once, and where what it held is now: its new name, or a
        copy of it made from the file still open (`spill.rescue`). None where the path still names the file."""
        if self.vanished is None and (found := gone(self.path, self.held, had_content=self.held_bytes > 0)):
            why, now_at = found
            note = ""
            if why == EMPTIED:  # nothing left in it to copy
                note = "; the runs it held went with what was in it"
            elif now_at is None:
                try:
                    now_at = spill.rescue(self.conn, self.path)
                    note = f"; what it held until then is copied to {str(now_at)!r}"
                except (OSError, sqlite3.Error) as lost:
                    note = f"; what it held could not be copied ({lost}) and is lost with it"
            self.vanished = why, note, now_at
        if self.vanished is None:
            return None
        why, note, now_at = self.vanished
        return StoreGone(f"{named(self.path)}: {why} while this command ran, so SQLite could not store {what} "
                         f"({exc}){note}", now_at)  # fmt: skip

    writing = _writing  # the reads and writes that store one thing, as one (`sweep.store_or_keep`)

    # --- runs -----------------------------------------------------------------------------------------------------
    def create_run(self, spec: dict, env: dict, fingerprint: dict, argv: list[str], cells: list[PlannedCell]) -> int:
        """The run and its whole plan, every cell pending, leased to this process, in one transaction; the run gets a
        token no other run has (`new_token`), in its mark (`spill.mark`)."""
        holder, started, spec_json, fingerprint_json = lease.me(), now(), json.dumps(spec), json.dumps(fingerprint)
        with self._writing("the run"), self.conn:
            token = new_token() if self.version >= RUN_TOKENS else None  # the file upgraded by now, where it can be
            run = {"started_at": started, "status": "running", "argv": json.dumps(argv), "spec_json": spec_json,
                   "env_json": json.dumps(env), "fingerprint_json": fingerprint_json, "token": token}  # fmt: skip
            run_id = self._insert("runs", run)
            self._insert_cells(run_id, cells)
            if self.version >= LEASES:
                lease.take(self.conn, run_id, holder)
        self.sessions[run_id] = 1
        self.marks[run_id] = spill.mark(started, spec_json, fingerprint_json, token)
        if self.version >= LEASES:
            self.leases[run_id] = lease.Heartbeat(self.path, run_id, holder)
        return run_id

    def acquire(self, run_id: int) -> lease.Holder | None:
        """Lease the run to this process (`--resume`); returns the dead holder it took over from, if any. A live
        holder's run raises LeaseHeld, and nothing is written. This process measures the session after the latest that
        measured the run, stored or kept beside the store (`spill`: a store deleted mid-run, rescued before it took
        any process of that session)."""
        holder = lease.me()
        if self.version >= LEASES:  # asked before an older file is upgraded: refused, the run leaves it as it was
            if self.upgrade_on_write:  # an older dlperf measuring it (this run or another) is named as such
                lease.refuse_upgrade(self.conn, self.held, self.version, SCHEMA_VERSION, named(self.path))
            lease.free_for(self.conn, run_id, holder, self.held)
        self._ready_to_write()
        if self.version < LEASES:  # a file kept at an old version (written as an older dlperf did): no leases
            return None
        with self._writing(f"run {run_id}'s lease"):  # a full disk, or a writer holding the file past the timeout
            stale = lease.acquire(self.conn, run_id, holder, self.held)
        self.leases[run_id] = lease.Heartbeat(self.path, run_id, holder)
        mark = self.mark(run_id)  # read while the store reads: a line kept when it refuses says which run it is
        kept = [k.session for k in spill.kept(self.path, run_id, mark) if isinstance(k.session, int)]
        self.sessions[run_id] = max([self._latest_session(run_id), *kept]) + 1
        return stale

    def mark(self, run_id: int) -> dict[str, str]:
        """What tells the run from another given its id in a store made again at this path (`spill.mark`)."""
        if run_id not in self.marks:
            token = ", token" if self.version >= RUN_TOKENS else ""  # an older file read as it is has none
            row = self.conn.execute(f"SELECT started_at, spec_json, fingerprint_json{token} FROM runs WHERE id = ?",
                                    (run_id,))  # fmt: skip
            self.marks[run_id] = spill.mark(*row.fetchone())
        return self.marks[run_id]

    def _latest_session(self, run_id: int) -> int:
        """The latest session that measured a process of the run; 0 before any (or in a file that cannot tell)."""
        if self.version < SESSIONS:
            return 0
        (found,) = self.conn.execute("SELECT MAX(session) FROM measurements WHERE run_id = ?", (run_id,)).fetchone()
        return found or 0

    def measured_by(self, run_id: int, copied: bool = False) -> lease.Holder | None:
        """The live process measuring the run in this file now, if any (a dead holder's lease is no one's). `copied`:
        the live process measuring it in the file this one was copied from (`cp`), whose lease row the copy holds
        (`lease.measures`), instead."""
        holder = lease.holder_of(self.conn, run_id) if self.version >= LEASES else None
        if holder is None or not lease.alive(holder):
            return None
        return holder if lease.measures(holder, self.held) != copied else None

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
        """A run by id, or the latest one: the run measured last (`records.measured_order`), not the highest id."""
        if run_id is None:
            run_id = self._latest_id()
            if run_id is None:
                held = self.held_figures()
                raise UsageError(
                    f"{self.path}: no runs yet (run `dlperf run` first)" + (f"; it holds {held}" if held else "")
                )
        row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise UsageError(f"{run_said(run_id)}: no such run in {self.path}")
        return run_record(row)

    def runs(self) -> list[RunRecord]:
        """Every run; one whose row no longer decodes is left out and named (`errors.left_out`): one damaged row
        stopped every view of every other run. `run(ID)` of it still stops with one line."""
        found = []
        for row in self.conn.execute("SELECT * FROM runs ORDER BY id"):
            try:
                found.append(run_record(row))
            except StoreFault as fault:
                left_out(fault)
        return found

    def cell_counts(self) -> dict[int, dict[str, int]]:
        """Each run's cells by status: {run_id: {"ok": 12, "pending": 2, ...}}."""
        counts: dict[int, dict[str, int]] = {}
        for run_id, status, n in self.conn.execute("SELECT run_id, status, COUNT(*) FROM cells GROUP BY 1, 2"):
            counts.setdefault(run_id, {})[status] = n
        return counts

    def shared_ok_cells(self, run_id: int) -> dict[int, int]:
        """Each other run's cells measured ok whose key this run also measured ok: {run_id: 3}; a run sharing none
        is left out."""
        rows = self.conn.execute(
            "SELECT a.run_id, COUNT(*) FROM cells a JOIN cells b ON a.key = b.key WHERE b.run_id = ? AND a.run_id != ?"
            " AND a.status = ? AND b.status = ? GROUP BY a.run_id", (run_id, run_id, Status.OK, Status.OK))  # fmt: skip
        return dict(rows.fetchall())

    def out_of_memory_counts(self) -> dict[int, int]:
        """Each run's failed cells whose reason says they ran out of memory (`vocab.ran_out_of_memory`): a fit's tries
        that did not fit, a cell the kernel's out-of-memory killer ended. {run_id: 4}; a run with none is left out."""
        counts: dict[int, int] = {}
        for run_id, error in self.conn.execute("SELECT run_id, error FROM cells WHERE status = ?", (Status.FAILED,)):
            if ran_out_of_memory(error):
                counts[run_id] = counts.get(run_id, 0) + 1
        return counts

    def latest_unfinished_run(self) -> RunRecord | None:
        """The unfinished run measured last (`records.measured_order`)."""
        run_id = self._latest_id("WHERE status != 'complete'")
        return None if run_id is None else self.run(run_id)

    def _latest_id(self, where: str = "") -> int | None:
        """The id of the run (of those `where` selects) measured last: by its start, not its id (`dlperf merge` gives
        the runs it copies new ids in the order it copies them); None where there is none."""
        found = self.conn.execute(f"SELECT id, started_at FROM runs {where}").fetchall()
        return max(found, key=lambda row: measured_order(row[1], row[0]))[0] if found else None

    # --- cells and measurements -----------------------------------------------------------------------------------
    def cells(self, run_id: int, unreadable: Callable[[UnreadableRow], None] | None = None) -> list[CellRecord]:
        """The run's cells in plan order: what the views read. A row that no longer decodes raises UnreadableRow,
        or, given `unreadable`, is handed to it and left out."""
        rows = self.conn.execute("SELECT * FROM cells WHERE run_id = ? ORDER BY position", (run_id,))
        cells = []
        for row in rows:
            try:
                cells.append(decoded(CellRecord.from_row, dict(row), run_id, "figures"))
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
        return [decoded(MeasurementRecord.from_row, dict(r), run_id, "samples") for r in rows]

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

    def lives(self, run_ids: list[int]) -> dict[str, list[tuple[float, dict[str, float]]]]:
        """Cell key -> (wall-clock seconds, its time by phase: `collect.phases`, {} where not stored) of each of its
        finished processes in these runs: the estimates take out the untimed extras a new process will not run."""
        found: dict[str, list[tuple[float, dict[str, float]]]] = {}
        for run_id in run_ids:
            rows = self.conn.execute("SELECT cell_key, duration_s, detail_json FROM measurements WHERE run_id = ? "
                                     "AND duration_s IS NOT NULL", (run_id,))  # fmt: skip
            for key, duration, detail in rows:
                found.setdefault(key, []).append((duration, _phases(detail)))
        return found

    def started_lives(self, run_ids: list[int]) -> list[tuple[int, str, float, dict[str, float], str | None]]:
        """Each finished process of these runs that did not fail, a run's in the order they started: (run, cell key,
        wall-clock seconds, its time by phase as `lives` gives it, how it started: "warm" (forked: `runner/warm.py`),
        "cold", or None where not recorded). The estimates tell a process's own start from its wait for the warm
        parent it forked from. A failed process's life is none a cell's measuring takes: a dry run had estimated a
        model that fails from it, started no pilot step, and said nothing of the failure."""
        found = []
        for run_id in run_ids:
            rows = self.conn.execute("SELECT cell_key, duration_s, detail_json FROM measurements WHERE run_id = ? "
                                     "AND duration_s IS NOT NULL AND status != 'failed'", (run_id,))  # fmt: skip
            for key, duration, text in rows:
                detail = _detail(text)
                began, how = detail.get("started_at"), detail.get("started")
                found.append((run_id, began if isinstance(began, int | float) else 0.0, key, duration,
                              _phases_in(detail), how if how in ("warm", "cold") else None))  # fmt: skip
        in_order = sorted(found, key=lambda row: row[:2])
        return [(run, key, duration, phases, how) for run, _, key, duration, phases, how in in_order]

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
            columns = {name: storable(value) for name, value in cell.columns().items()}
            sets = ", ".join(f"{c} = ?" for c in columns)
            self.conn.execute(
                f"UPDATE cells SET {sets}, extra_json = ?, updated_at = ? WHERE run_id = ? AND key = ?",
                (*columns.values(), json.dumps(cell.to_json()), now(), run_id, key),
            )

    def restate(self, run_id: int, key: str, status: Status, error: str) -> None:
        """A measured cell and its processes said again as the search that measured it read them, in one transaction
        while this process holds the run's lease: a `dlperf fit` try that oneDNN refused under the memory limit, where
        a smaller batch of its mode ran, did not fit (`fit.no_kernel_is_memory`), and is stored so."""
        with self._writing(f"cell {key} of run {run_id}"), self.conn:
            self._still_leased(run_id)
            for table, column in (("measurements", "cell_key"), ("cells", "key")):
                self.conn.execute(f"UPDATE {table} SET status = ?, error = ? WHERE run_id = ? AND {column} = ?",
                                  (status.value, storable(error), run_id, key))  # fmt: skip

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
                    run_id, key, now(), profile.status.value, storable(profile.error), profile.duration_s, step,
                    step / median if step and median else None, profiled.trace if profiled else None,
                    json.dumps(profile.to_json()),
                ),
            )  # fmt: skip

    def profiles(self, run_id: int) -> dict[str, ProfileRecord]:
        """Cell key -> the run's profile of that cell; an old file that cannot be upgraded has none."""
        if self.version < PROFILES:
            return {}
        rows = self.conn.execute("SELECT * FROM profiles WHERE run_id = ?", (run_id,))
        found = (decoded(ProfileRecord.from_row, dict(r), run_id, "profile") for r in rows)
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
            record = decoded(PredictionRecord.from_row, dict(r), run_id, "prediction")
            found.setdefault(record.cell_key, []).append(record)
        return found

    def check_file(self) -> None:
        """SQLite's own check of the file's structure (`PRAGMA quick_check`): damage that reading rows may miss."""
        try:
            found = [r[0] for r in self.conn.execute("PRAGMA quick_check")]
        except sqlite3.DatabaseError as exc:
            found = [str(exc)]
        if found != ["ok"]:
            raise UsageError(f"damaged ({found[0]})")

    @contextmanager
    def transaction(self, what: str = "what it copied", *, full_said: bool = False) -> Iterator[None]:
        """One write transaction around several writes (`insert_copy`, `insert_missing_peaks`): all or none. The file
        gone from its path meanwhile is said as a write is (`_gone`), not as a damaged file; with `full_said`, a disk
        too full for it, in one line (a merge's copy said "could not read it ... damaged")."""
        self._ready_to_write()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.conn.rollback()
                raise
            self.conn.commit()
        except sqlite3.Error as exc:
            if fault := self._gone(what, exc):
                raise fault from None
            if full_said and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                raise StoreFault(self._full(what, exc)) from None
            raise

    def _full(self, what: str, exc: sqlite3.Error) -> str:
        """A write the disk had no room for, in one line: nothing of it is kept, once SQLite has undone it from the
        journal it left beside the file (a copy of the file without it is damaged)."""
        journal = f"{self.path}-journal"
        kept = (f"; until dlperf or sqlite3 opens it again, which undoes the unfinished write, {journal} must stay "
                "beside it (a copy without it is damaged)") if os.path.exists(journal) else ""  # fmt: skip
        return (f"{named(self.path)}: could not store {what} ({exc}): nothing of it is kept; free room on its disk "
                f"and run the command again{kept}")  # fmt: skip


def _connected(target: str) -> tuple[sqlite3.Connection, int]:
    """A connection to the file or URI `target`, decoding as `decode.py` does, and its schema version."""
    conn = sqlite3.connect(target, timeout=30, uri=target.startswith("file:"))
    conn.row_factory = sqlite3.Row
    conn.text_factory = text_factory
    return conn, _schema_version(conn)


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


def _detail(detail_json: str | None) -> dict:
    """A stored process's detail as a dict, {} where it does not read (a damaged row)."""
    try:
        detail = json.loads(detail_json or "{}")
    except ValueError:
        return {}
    return detail if isinstance(detail, dict) else {}


def _phases(detail_json: str | None) -> dict[str, float]:
    """A stored process's time by phase, {} where its detail has none or does not read (an older or damaged row)."""
    return _phases_in(_detail(detail_json))


def _phases_in(detail: dict) -> dict[str, float]:
    phases = detail.get("phases")
    return {k: v for k, v in phases.items() if isinstance(v, int | float)} if isinstance(phases, dict) else {}
