"""Measurements the store could not take: kept beside the database until `dlperf run --resume` stores them.

When SQLite refuses a finished process's measurement (a full disk, a file grown past `ulimit -f`, a file made
read-only), what the process measured is appended to `<db>.unsaved.jsonl`, one JSON line per process:
{"run_id", "key", "repeat", "measurement", "session"}. A line is small beside the database's pages, so it is often
still written when the database cannot grow. `--resume` stores the run's lines, each under the session of its run that
measured it (`measurements.session`), and removes them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.store.process import ProcessMeasurement

SUFFIX = ".unsaved.jsonl"


@dataclass(frozen=True)
class Kept:
    """One process's measurement, kept beside the database."""

    run_id: int
    key: str  # the cell's
    repeat: int
    measurement: ProcessMeasurement
    session: int | None = None  # the session of its run that measured it; None in a line kept before it was recorded


def path_for(db: str | Path) -> Path:
    return Path(f"{db}{SUFFIX}")


def keep(db: str | Path, run_id: int, key: str, repeat: int, measurement: ProcessMeasurement,
         session: int | None = None) -> Path:  # fmt: skip
    """Append one measurement, measured by `session` of its run, on disk before this returns (raises OSError when it
    cannot be)."""
    path = path_for(db)
    line = json.dumps({"run_id": run_id, "key": key, "repeat": repeat, "measurement": measurement.to_json(),
                       "session": session})  # fmt: skip
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n" + line + "\n")  # the leading newline ends a line a failed earlier write cut short
        f.flush()
        os.fsync(f.fileno())
    return path


def kept(db: str | Path, run_id: int) -> list[Kept]:
    """The run's kept measurements, in the order they were kept; a line cut short is not one of them."""
    return [Kept(run_id, e.get("key"), e.get("repeat"), ProcessMeasurement.of(e.get("measurement")), e.get("session"))
            for e in _entries(path_for(db)) if e.get("run_id") == run_id]  # fmt: skip


def runs_kept(db: str | Path) -> dict[int, int]:
    """run id -> how many of its measurements are kept here."""
    counts: dict[int, int] = {}
    for entry in _entries(path_for(db)):
        run_id = entry.get("run_id")
        counts[run_id] = counts.get(run_id, 0) + 1
    return counts


def forget(db: str | Path, run_id: int) -> None:
    """Drop the run's lines (they are stored now); the file goes when no other run's line is left."""
    path = path_for(db)
    others = [entry for entry in _entries(path) if entry.get("run_id") != run_id]
    if not others:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(entry) + "\n" for entry in others), encoding="utf-8")
    tmp.replace(path)


def _entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # blank, or cut short by the fault that made the store refuse
        if isinstance(entry, dict) and {"run_id", "key", "repeat", "measurement"} <= entry.keys():
            entries.append(entry)
    return entries
