"""Measurements the store could not take: kept beside the database until `dlperf run --resume` stores them.

When SQLite refuses a finished process's measurement (a full disk, a file grown past `ulimit -f`, a file made
read-only), what the process measured is appended to `<db>.unsaved.jsonl`, one JSON line per process:
{"run_id", "key", "repeat", "measurement", "session"}. A line is small beside the database's pages, so it is often
still written when the database cannot grow. Where nothing can be written beside the database (its directory made
read-only), the line goes to a file named after the database's full path in DATA_DIR/unsaved/, else in the temporary
directory (`places`). `--resume` stores the run's lines from each place, each under the session of its run that
measured it (`measurements.session`), and removes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.envs import data_dir
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


def places(db: str | Path) -> list[Path]:
    """Where a measurement the store refused is kept, in the order tried: beside the database, then (its directory
    refusing a new file) a file named after the database's full path in DATA_DIR/unsaved/, then in the temporary
    directory."""
    full = Path(db).absolute()
    name = f"{full.name}-{hashlib.sha256(str(full).encode()).hexdigest()[:12]}{SUFFIX}"
    return [path_for(db), data_dir() / "unsaved" / name, Path(tempfile.gettempdir()) / f"dlperf-unsaved-{name}"]


def keep(db: str | Path, run_id: int, key: str, repeat: int, measurement: ProcessMeasurement,
         session: int | None = None) -> Path:  # fmt: skip
    """Append one measurement, measured by `session` of its run, to the first of `places` that takes it, on disk
    before this returns; the file it is in. Raises OSError (the first place's) when none can take it."""
    line = json.dumps({"run_id": run_id, "key": key, "repeat": repeat, "measurement": measurement.to_json(),
                       "session": session})  # fmt: skip
    first: OSError | None = None
    for k, path in enumerate(places(db)):
        try:
            _append(path, line, fallback=k > 0)
            return path
        except OSError as exc:
            first = first or exc
    raise first


def _append(path: Path, line: str, fallback: bool) -> None:
    """`fallback`: a file in a folder of dlperf's own, made where missing, this user's alone, never through a link
    (one is in the shared temporary directory)."""
    flags, mode = os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666
    if fallback:
        path.parent.mkdir(parents=True, exist_ok=True)
        flags, mode = flags | os.O_NOFOLLOW, 0o600
    with open(os.open(path, flags, mode), "a", encoding="utf-8") as f:
        f.write("\n" + line + "\n")  # the leading newline ends a line a failed earlier write cut short
        f.flush()
        os.fsync(f.fileno())


def kept(db: str | Path, run_id: int) -> list[Kept]:
    """The run's kept measurements, in the order they were kept (place by place); a line cut short is not one."""
    return [Kept(run_id, e.get("key"), e.get("repeat"), ProcessMeasurement.of(e.get("measurement")), e.get("session"))
            for path in places(db) for e in _entries(path) if e.get("run_id") == run_id]  # fmt: skip


def runs_kept(db: str | Path) -> dict[int, int]:
    """run id -> how many of its measurements are kept for this database, wherever they are."""
    counts: dict[int, int] = {}
    for entry in (e for path in places(db) for e in _entries(path)):
        run_id = entry.get("run_id")
        counts[run_id] = counts.get(run_id, 0) + 1
    return counts


def holding(db: str | Path, run_id: int | None = None) -> list[Path]:
    """The files that keep measurements for this database (of `run_id`, where given)."""
    return [p for p in places(db) if any(run_id in (None, e.get("run_id")) for e in _entries(p))]


def forget(db: str | Path, run_id: int) -> None:
    """Drop the run's lines (they are stored now) from every place; a file goes when no other run's line is left."""
    for path in places(db):
        entries = _entries(path)
        others = [entry for entry in entries if entry.get("run_id") != run_id]
        if len(others) == len(entries):
            continue
        if not others:
            path.unlink(missing_ok=True)
            continue
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text("".join(json.dumps(entry) + "\n" for entry in others), encoding="utf-8")
        tmp.replace(path)


def _entries(path: Path) -> list[dict[str, Any]]:
    try:  # a place this user cannot read (another's file of the same name in the shared temporary directory), or a
        text = path.read_text(encoding="utf-8", errors="replace")  # file damaged, keeps nothing for this store
    except OSError:
        return []
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # blank, or cut short by the fault that made the store refuse
        if isinstance(entry, dict) and {"run_id", "key", "repeat", "measurement"} <= entry.keys():
            entries.append(entry)
    return entries
