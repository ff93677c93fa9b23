"""Measurements the store could not take: kept beside the database until `dlperf run --resume` stores them.

When SQLite refuses a finished process's measurement (a full disk, a file grown past `ulimit -f`, a file made
read-only), what the process measured is appended to `<db>.unsaved.jsonl`, one JSON line per process: {"run_id", "key",
"repeat", "measurement", "session", "run"}, "run" telling its run from another of the same id in a store deleted and
made again at the path, even one begun in the same second (`mark`). A line is small beside the database's pages, so it
is often still written when the database cannot grow. Where nothing can be written beside the database (its directory
made read-only), the line goes to a file named after the database's full path in DATA_DIR/unsaved/, else in the
temporary directory (`places`). `--resume` stores the run's lines from each place, each under the session of its run
that measured it (`measurements.session`), and removes them; a line of another run of that id stays where it is
(`aside`).

Where the database itself is gone from its path while a command writes to it (deleted, replaced, its directory
deleted), what the open file held is copied (`rescue`) beside its path as NAME-rescued.db, else into DATA_DIR/unsaved/,
else into the temporary directory, and a measurement it refuses is kept for the copy, which `--resume --db COPY` takes
up. A --resume looks in the system's temporary directories too (`searched`); a line kept in a $TMPDIR of its own names
it in its resume command (`elsewhere`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dlperf.envs import data_dir
from dlperf.store.process import ProcessMeasurement

SUFFIX = ".unsaved.jsonl"
NAME_MAX = 255  # bytes of a file name: a name kept away from the database is cut to it (`_named_after`)
TEMPORARY = "dlperf-unsaved-"  # the start of a kept file's name in the temporary directory
RESCUED = "dlperf-"  # the start of a rescued copy's name there


@dataclass(frozen=True)
class Kept:
    """One process's measurement, kept beside the database."""

    run_id: int
    key: str  # the cell's
    repeat: int
    measurement: ProcessMeasurement
    session: int | None = None  # the session of its run that measured it; None in a line kept before it was recorded
    run: dict[str, str] | None = None  # its run's `mark`; None in a line kept before it was recorded


def mark(started_at: str, spec_json: str, fingerprint_json: str, token: str | None = None) -> dict[str, str]:
    """What tells a run from another given the same id by a store deleted and made again at the same path: when it
    started, a digest of its spec and its machine's fingerprint as the runs table holds them, and its token (`runs.
    token`: two runs of one spec on one machine begun in the same second differ by it alone); a run begun before runs
    had tokens has none."""
    digest = hashlib.sha256(f"{spec_json}\0{fingerprint_json}".encode()).hexdigest()[:16]
    found = {"started_at": started_at, "digest": digest}
    return found if token is None else {**found, "token": token}


def belongs(entry: Kept, run: dict[str, str]) -> bool:
    """Whether a kept line is the measurement of the run marked `run`: the same mark, so a line without a token is
    only a run's without one (begun by an earlier dlperf). A line kept before lines were marked is only where its
    process started after the run did: one that started earlier, or cannot say when, is another's; and never a run
    with a token's (its dlperf marks every line it keeps)."""
    if entry.run is not None:
        return entry.run == run
    if "token" in run:
        return False
    started = entry.measurement.detail.started_at
    try:
        return isinstance(started, int | float) and started >= datetime.fromisoformat(run["started_at"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return False


def path_for(db: str | Path) -> Path:
    return Path(f"{db}{SUFFIX}")


def places(db: str | Path) -> list[Path]:
    """Where a measurement the store refused is kept, in the order tried: beside the database, then (its directory
    refusing a new file) a file named after the database's full path in DATA_DIR/unsaved/, then in the temporary
    directory."""
    temporary = Path(tempfile.gettempdir()) / _named_after(db, SUFFIX, TEMPORARY)
    return [path_for(db), data_dir() / "unsaved" / _named_after(db, SUFFIX), temporary]


SYSTEM_TEMPORARY = ("/tmp", "/var/tmp", "/usr/tmp")  # the temporary directories Python takes where $TMPDIR names none


def searched(db: str | Path) -> list[Path]:
    """Every place a measurement of this database may be kept: `places`, and its name in the system's temporary
    directories too, where $TMPDIR names another now: a line kept in /tmp was not found by a --resume under a job's
    own $TMPDIR (SLURM's, PBS's), and the run measured again. (One kept in a $TMPDIR of its own is found under that
    $TMPDIR, which its line names: `elsewhere`.)"""
    name = _named_after(db, SUFFIX, TEMPORARY)
    return list(dict.fromkeys([*places(db), *(Path(d) / name for d in SYSTEM_TEMPORARY if os.path.isdir(d))]))


def elsewhere(kept: Path) -> str | None:
    """The temporary directory a measurement was kept in (`keep`'s answer) where a --resume does not look unless
    $TMPDIR names it again (`searched`); None for any other place."""
    folder = kept.parent
    if not kept.name.startswith(TEMPORARY) or any(folder == Path(d) for d in SYSTEM_TEMPORARY):
        return None
    return str(folder)


def _named_after(db: str | Path, suffix: str, prefix: str = "", spare: int = 0) -> str:
    """A file name for a file kept away from the database, unique to the database's full path (its digest): the
    database's name, cut where the whole would pass NAME_MAX (`spare`: bytes the caller adds after it); a database
    name of 241 bytes, which the store allows (`location.name_too_long`), made one of 268, and the measurement was
    lost ("it could not be kept either (File name too long)")."""
    full = Path(db).absolute()
    digest = hashlib.sha256(os.fsencode(full)).hexdigest()[:12]
    room = NAME_MAX - len(prefix) - len(suffix) - len(digest) - 1 - spare
    name = os.fsdecode(os.fsencode(full.name)[:room])  # bytes, not characters; a name not UTF-8 too
    return f"{prefix}{name}-{digest}{suffix}"


def rescue(conn: sqlite3.Connection, db: str | Path) -> Path:
    """Copy what the open store `conn` holds, its file gone from the path `db`, into a new file beside that path
    (NAME-rescued.db, numbered past those there), else in DATA_DIR/unsaved/, else in the temporary directory, as
    `keep` tries them (a store whose folder was deleted, DATA_DIR read-only, was lost though /tmp was writable); the
    copy. Raises OSError or sqlite3.Error (the first place's) when none takes it; nothing is left of a copy cut
    short."""
    p = Path(db)
    first: Exception | None = None
    spare = len("-99") + len(p.suffix or ".db") + len(SUFFIX)  # its number, and a measurement kept beside it
    away = (data_dir() / "unsaved", _named_after(db, "-rescued", spare=spare))
    temporary = (Path(tempfile.gettempdir()), _named_after(db, "-rescued", RESCUED, spare))
    for folder, stem in ((p.parent, f"{p.stem}-rescued"), away, temporary):
        try:
            if folder == away[0]:  # dlperf's own; the database's folder, deleted, is not made again
                folder.mkdir(parents=True, exist_ok=True)
            target = _new_file(folder, stem, p.suffix or ".db", 0o644 if folder != temporary[0] else 0o600)
        except OSError as exc:
            first = first or exc
            continue
        try:
            copy = sqlite3.connect(target)
            try:
                conn.backup(copy)
            finally:
                copy.close()
            return target
        except (OSError, sqlite3.Error) as exc:
            target.unlink(missing_ok=True)
            first = first or exc
    raise first


def _new_file(folder: Path, stem: str, suffix: str, mode: int = 0o644) -> Path:
    """A file made in `folder`, empty, that no one had: STEM.SUFFIX, else STEM-2.SUFFIX, and so on."""
    n = 1
    while True:
        path = folder / f"{stem}{'' if n == 1 else f'-{n}'}{suffix}"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
            return path
        except FileExistsError:
            n += 1


def keep(db: str | Path, run_id: int, key: str, repeat: int, measurement: ProcessMeasurement,
         session: int | None = None, run: dict[str, str] | None = None) -> Path:  # fmt: skip
    """Append one measurement, measured by `session` of the run marked `run`, to the first of `places` that takes
    it, on disk before this returns; the file it is in. Raises OSError (the first place's) when none can take it."""
    line = json.dumps({"run_id": run_id, "key": key, "repeat": repeat, "measurement": measurement.to_json(),
                       "session": session, "run": run})  # fmt: skip
    first: OSError | None = None
    for k, path in enumerate(places(db)):
        made = not os.path.lexists(path)
        try:
            _append(path, line, fallback=k > 0)
            return path
        except OSError as exc:
            first = first or exc
            if made:  # a file made here that could not take the line (a full disk): not left behind, empty or cut
                with contextlib.suppress(OSError):  # never made (no folder), or not to be removed either
                    path.unlink()
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


def kept(db: str | Path, run_id: int, run: dict[str, str] | None = None) -> list[Kept]:
    """The measurements kept under the run's id (those that `belong` to the run marked `run`, where given), in the
    order they were kept (place by place); a line cut short is not one."""
    found = [_kept(e) for path in searched(db) for e in _entries(path) if e.get("run_id") == run_id]
    return [k for k in found if run is None or belongs(k, run)]


def aside(db: str | Path, run_id: int, run: dict[str, str]) -> dict[Path, list[Kept]]:
    """The lines kept under the run's id that are not the run marked `run`'s, by the file they are in."""
    found = {path: [k for e in _entries(path) if e.get("run_id") == run_id and not belongs(k := _kept(e), run)]
             for path in searched(db)}  # fmt: skip
    return {path: lines for path, lines in found.items() if lines}


def _kept(e: dict[str, Any]) -> Kept:
    run = e.get("run") if isinstance(e.get("run"), dict) else None
    measurement = ProcessMeasurement.of(e.get("measurement"))
    return Kept(e.get("run_id"), e.get("key"), e.get("repeat"), measurement, e.get("session"), run)


def runs_kept(db: str | Path) -> dict[int, int]:
    """run id -> how many of its measurements are kept for this database, wherever they are."""
    counts: dict[int, int] = {}
    for entry in (e for path in searched(db) for e in _entries(path)):
        run_id = entry.get("run_id")
        counts[run_id] = counts.get(run_id, 0) + 1
    return counts


def of_no_run(db: str | Path, mark_of: Callable[[int], dict[str, str] | None]) -> int:
    """How many kept lines are of no run of the store: its run of their id has no `mark_of` (none there), or is
    another (`belongs`)."""
    return sum(1 for path in searched(db) for e in _entries(path)
               if (run := mark_of(e.get("run_id"))) is None or not belongs(_kept(e), run))  # fmt: skip


def holding(db: str | Path, run_id: int | None = None, run: dict[str, str] | None = None) -> list[Path]:
    """The files that keep measurements for this database (of `run_id`, where given; of the run marked `run`
    among those, where given too)."""
    return [p for p in searched(db) if any(run_id in (None, e.get("run_id")) and (run is None or belongs(_kept(e), run))
                                         for e in _entries(p))]  # fmt: skip


def forget(db: str | Path, run_id: int, run: dict[str, str] | None = None) -> None:
    """Drop the run's lines (they are stored now) from every place, only those of the run marked `run` where given;
    a file goes when no other line is left."""
    for path in searched(db):
        entries = _entries(path)
        others = [e for e in entries if e.get("run_id") != run_id or (run is not None and not belongs(_kept(e), run))]
        if len(others) == len(entries):
            continue
        if not others:
            path.unlink(missing_ok=True)
            continue
        fd, tmp = tempfile.mkstemp(prefix=".dlperf-", suffix=".tmp", dir=path.parent)  # not longer than its name
        with open(fd, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(entry) + "\n" for entry in others))
        os.chmod(tmp, path.stat().st_mode & 0o777)  # as it was: mkstemp's is 0600
        os.replace(tmp, path)


def _own(path: Path) -> bool:
    """Whether a kept file may be this user's: any outside a shared folder (sticky, as /tmp and /var/tmp are); there,
    only one this user owns (another could put lines there for the --resume of this user's store to store)."""
    shared = os.stat(path.parent).st_mode & stat.S_ISVTX
    return not shared or os.stat(path).st_uid == os.geteuid()


def _entries(path: Path) -> list[dict[str, Any]]:
    try:  # a place this user cannot read (another's file of the same name in the shared temporary directory), or a
        if not _own(path):  # file damaged, keeps nothing for this store; nor does another user's in a shared folder
            return []
        text = path.read_text(encoding="utf-8", errors="replace")
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
