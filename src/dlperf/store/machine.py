"""What was measured of a machine rather than of a run: the peaks of `dlperf peak` and the collective bandwidths of
`dlperf comm`, each row with the fingerprint and environment of the machine that measured it. A part of `Store`
(`store/__init__.py`), which holds the connection, the schema version and the one writing transaction."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from dlperf.measure.units import plural
from dlperf.store.records import CommResult, PeakRecord
from dlperf.store.schema import COMM_COLUMNS, LOADERS, PEAK_COLUMNS

COPY_KINDS = ("memcpy", "h2d", "d2h")  # the peaks that are copies, in the order views show them


@dataclass(frozen=True, kw_only=True)
class MeasuredPeak:
    """One figure of `dlperf peak` to store: the PEAK_COLUMNS and a JSON-ready detail (what `PeakRecord` reads)."""

    framework: str
    framework_version: str | None = None
    device: str
    threads: int
    kind: str  # matmul | bandwidth | dispatch | memcpy | h2d | d2h
    dtype: str | None = None  # for matmul; None for the others
    value: float | None = None  # None when it could not be measured
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class MeasuredComm:
    """One message size of one `dlperf comm` job to store: the COMM_COLUMNS and a JSON-ready detail."""

    backend: str
    device: str
    world: int
    nnodes: int
    threads: int
    op: str = "all_reduce"
    bytes: int
    time_s: float | None
    algbw: float | None
    busbw: float | None
    wrong: int | None
    detail: dict[str, Any] = field(default_factory=dict)


class MachineFigures:
    """`Store`'s peaks and collective figures; uses the store's `conn`, `version` and `_writing`."""

    # --- peaks ----------------------------------------------------------------------------------------------------
    def record_peaks(self, fingerprint: dict, env: dict, peaks: Sequence[MeasuredPeak]) -> list[int]:
        """Peaks measured together, with the machine they were measured on: one transaction; returns their ids."""
        return self._record_measured("peaks", PEAK_COLUMNS, fingerprint, env, peaks)

    def _record_measured(
        self, table: str, columns: tuple[str, ...], fingerprint: dict, env: dict,
        rows: Sequence[MeasuredPeak | MeasuredComm],
    ) -> list[int]:  # fmt: skip
        """Rows of `table` measured together, each with the machine's fingerprint and environment: one transaction."""
        measured_at = datetime.now(UTC).isoformat(timespec="seconds")
        ids = []
        with self._writing(f"the {table}"), self.conn:
            for row in rows:
                cur = self.conn.execute(
                    f"INSERT INTO {table} (measured_at, fingerprint_json, env_json, {', '.join(columns)},"
                    f" detail_json) VALUES (?, ?, ?, {', '.join('?' * len(columns))}, ?)",
                    (
                        measured_at,
                        json.dumps(fingerprint),
                        json.dumps(env),
                        *(getattr(row, c) for c in columns),
                        json.dumps(row.detail),
                    ),
                )
                ids.append(cur.lastrowid)
        return ids

    def peaks(
        self, *, device: str | None = None, threads: int | None = None, kind: str | None = None, measured: bool = False
    ) -> list[PeakRecord]:
        """Stored peaks, newest first, JSON columns decoded (`fingerprint`, `detail`; the environment is left out:
        read it by id). `measured`: only those with a value."""
        if self.version < 2:
            return []
        where = [f"{col} = ?" for col, v in (("device", device), ("threads", threads), ("kind", kind)) if v is not None]
        if measured:
            where.append("value IS NOT NULL")
        args = [v for v in (device, threads, kind) if v is not None]
        return [PeakRecord(**d) for d in self._measured_rows("peaks", PEAK_COLUMNS, where, args)]

    def copies(
        self, device: str, *, threads: int | None = None, machine: Callable[[PeakRecord], bool] | None = None
    ) -> list[PeakRecord]:
        """The copy figures of `device` (kinds memcpy, h2d, d2h; bytes/s), the latest of each (kind, size, pinned,
        threads), by kind, then pinned, then size. `machine` keeps the rows of one machine (the views pass a test of
        the fingerprint). A store older than LOADERS has none."""
        if self.version < LOADERS:
            return []
        latest: dict[tuple, PeakRecord] = {}
        for kind in COPY_KINDS:
            for row in self.peaks(device=device, threads=threads, kind=kind, measured=True):  # newest first
                key = (kind, row.detail.get("bytes"), bool(row.detail.get("pinned")), row.threads)
                if key not in latest and (machine is None or machine(row)):
                    latest[key] = row
        return [latest[k] for k in sorted(latest, key=lambda k: (COPY_KINDS.index(k[0]), k[2], k[3], k[1] or 0))]

    def _measured_rows(self, table: str, columns: tuple[str, ...], where: list[str], args: list) -> list[dict]:
        """Rows of `table` matching `where`, newest first, `fingerprint` and `detail` decoded, no environment."""
        rows = self.conn.execute(
            f"SELECT id, measured_at, fingerprint_json, {', '.join(columns)}, detail_json FROM {table}"
            f"{' WHERE ' + ' AND '.join(where) if where else ''} ORDER BY id DESC",
            args,
        )
        out = []
        for row in rows:
            d = dict(row)
            d["fingerprint"] = json.loads(d.pop("fingerprint_json"))
            d["detail"] = json.loads(d.pop("detail_json"))
            out.append(d)
        return out

    def held_figures(self) -> str | None:
        """What a store without runs holds of machines, and the command that lists it: "14 peaks (`dlperf list
        --peaks`)"; None when it holds none (a "no runs yet" error says the rest)."""
        counts = [(table, self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]) for table, since in
                  (("peaks", 2), ("comm", 4)) if self.version >= since]  # fmt: skip
        said = [f"{plural(n, 'peak')} (`dlperf list --peaks`)" if table == "peaks" else
                f"{plural(n, 'all-reduce size')} (`dlperf list --comm`)" for table, n in counts if n]  # fmt: skip
        return " and ".join(said) or None

    # --- collective bandwidth (`dlperf comm`) -----------------------------------------------------------------------
    def record_comm(self, fingerprint: dict, env: dict, rows: Sequence[MeasuredComm]) -> list[int]:
        """The sizes of one `dlperf comm` job, with the machine that ran it: one transaction; returns their ids."""
        return self._record_measured("comm", COMM_COLUMNS, fingerprint, env, rows)

    def comm_results(
        self, *, backend: str | None = None, world: int | None = None, nbytes: int | None = None
    ) -> list[CommResult]:
        """Stored collective figures, newest first, JSON columns decoded (`fingerprint`, `detail`; the environment
        is left out: read it by id). An old file that cannot be upgraded has none."""
        if self.version < 4:
            return []
        filters = (("backend", backend), ("world", world), ("bytes", nbytes))
        where = [f"{col} = ?" for col, v in filters if v is not None]
        rows = self._measured_rows("comm", COMM_COLUMNS, where, [v for _, v in filters if v is not None])
        return [CommResult(**d) for d in rows]
