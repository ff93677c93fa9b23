"""Copies between store files (`dlperf merge`, `dlperf run --ray`'s nodes streamed into the driver's store): a run's
raw rows read and checked, found again in another file, inserted under a new id with its origin, or brought up to
date. A part of `Store` (`store/__init__.py`), which holds the connection, the schema version and the one writing
transaction; `merge.py` decides what to copy."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any

from dlperf.errors import UsageError
from dlperf.store.decode import whole
from dlperf.store.process import MeasurementRecord
from dlperf.store.records import CellRecord, Origin, PredictionRecord, ProfileRecord, RunRecord
from dlperf.store.schema import PREDICTIONS, PROFILES, RUN_TOKENS


@dataclass(frozen=True)
class RunRows:
    """A run's raw rows (`Store.rows`), every one of them read and decoded: what a copy to another file takes."""

    run: dict[str, Any]
    cells: list[dict[str, Any]]
    measurements: list[dict[str, Any]]
    profiles: list[dict[str, Any]] = field(default_factory=list)
    predictions: list[dict[str, Any]] = field(default_factory=list)


class Copies:
    """The copying part of `Store`: reads and writes of whole rows, with the columns both files have."""

    def rows(self, table: str, run_id: int | None = None) -> list[dict[str, Any]]:
        """Raw rows of `table` ("runs", "cells", "measurements", "peaks", "comm") as dicts, JSON undecoded: what a copy
        to another file needs. `run_id`: only that run's rows. A table an old file lacks reads as empty."""
        too_old = {"peaks": 2, "comm": 4, "profiles": PROFILES, "predictions": PREDICTIONS}
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
            RunRecord.from_row(whole(run))
            cells, measurements = self.rows("cells", run_id), self.rows("measurements", run_id)
            for row in cells:
                part = f"run {run_id}, cell {row.get('key')}"
                CellRecord.from_row(whole(row))
            for row in measurements:
                part = f"run {run_id}, cell {row.get('cell_key')}, process {row.get('repeat')}"
                m = MeasurementRecord.from_row(whole(row))
                if not isinstance(m.samples, list) or not all(isinstance(x, int | float) for x in m.samples):
                    raise ValueError("its samples are not a list of numbers")
            profiles = self.rows("profiles", run_id)
            for row in profiles:
                part = f"run {run_id}, cell {row.get('cell_key')}, profile"
                ProfileRecord.from_row(whole(row))
            predictions = self.rows("predictions", run_id)
            for row in predictions:
                part = f"run {run_id}, cell {row.get('cell_key')}, prediction for {row.get('gpu')}"
                PredictionRecord.from_row(whole(row))
        except (sqlite3.DatabaseError, ValueError, TypeError, KeyError) as exc:
            raise UsageError(f"{part}: unreadable ({exc})") from exc
        return RunRows(run, cells, measurements, profiles, predictions)

    def find_copy(self, run: dict[str, Any], measurements: list[dict[str, Any]], origin: Origin) -> int | None:
        """The id of a run here that is `run`, or None: one with the same start, command, plan and machine, and the
        same token where both have one (`runs.token`: different tokens are different runs), that was copied from the
        same source run (`origin`) or whose raw samples are the run's, or some of them (copied before the run was
        resumed). The start is only to the second: two runs started in one second with one command (parallel jobs)
        are still two runs; and a file made afresh at a path merged before (a CI job's) holds new runs under the same
        ids."""
        token = ", token" if self.version >= RUN_TOKENS else ", NULL"
        same = self.conn.execute(
            f"SELECT id, origin_json{token} FROM runs"
            " WHERE started_at = ? AND argv IS ? AND spec_json = ? AND fingerprint_json = ?",
            tuple(run.get(k) for k in ("started_at", "argv", "spec_json", "fingerprint_json")),
        )
        for found, origin_json, held_token in same.fetchall():
            if held_token and run.get("token"):  # both runs begun with tokens: these say it
                if held_token == run.get("token"):
                    return found
                continue
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

    def refresh_copy(self, run_id: int, rows: RunRows, stopped: bool = False) -> None:
        """A run copied in before brought up to date with its source's run as it is now (`dlperf merge` of a run
        resumed since), inside the caller's `transaction`: its status and end, whether its process is gone there
        (`Origin.stopped`), its rows replaced, none removed."""
        status, finished = rows.run.get("status"), rows.run.get("finished_at")
        self.conn.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (status, finished, run_id))
        self.mark_stopped(run_id, stopped)
        self._replace_rows(run_id, rows)

    def mark_stopped(self, run_id: int, stopped: bool) -> bool:
        """A copy's `Origin.stopped` set as its source's run is now, inside the caller's `transaction`: a run copied
        while measured, then killed with nothing new stored, is stopped on the next merge. Whether it changed."""
        held = self.conn.execute("SELECT origin_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        origin = Origin.of(json.loads(held[0])) if held and held[0] else None
        if origin is None or origin.stopped == stopped:
            return False
        changed = replace(origin, stopped=stopped).to_json()
        self.conn.execute("UPDATE runs SET origin_json = ? WHERE id = ?", (json.dumps(changed), run_id))
        return True

    def _replace_rows(self, run_id: int, rows: RunRows) -> None:
        for table, found in (("cells", rows.cells), ("measurements", rows.measurements),
                             ("profiles", rows.profiles), ("predictions", rows.predictions)):  # fmt: skip
            for row in found:
                self._insert(table, {**row, "run_id": run_id}, replace=True)

    def insert_missing_peaks(self, peaks: list[dict[str, Any]]) -> int:
        """Peaks read from another file (`rows`) that this one lacks (every column but the id equal), inside the
        caller's `transaction`; returns how many were added."""
        return self.insert_missing("peaks", peaks)

    def insert_missing(self, table: str, found: list[dict[str, Any]]) -> int:
        """Rows of a table of machine figures (peaks, comm) read from another file that this one lacks (every column
        but the id equal), inside the caller's `transaction`; returns how many were added."""
        added = 0
        for row in found:
            fields = {k: v for k, v in row.items() if k != "id" and k in self._columns(table)}
            match = " AND ".join(f"{k} IS ?" for k in fields)
            if self.conn.execute(f"SELECT 1 FROM {table} WHERE {match}", tuple(fields.values())).fetchone():
                continue
            self._insert(table, fields)
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
