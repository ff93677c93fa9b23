"""Who measures a run: one lease row per running run, so two processes never time the same run's cells at once.

A lease names its holder: pid, host name, and a start token (the boot's id and the process's start time, field 22 of
/proc/<pid>/stat), so a recycled pid is not mistaken for the holder. The holder refreshes a heartbeat every
HEARTBEAT_S. A holder on this host is alive while its pid runs with the same start token (a zombie is dead); a holder
on another host, whose processes cannot be seen from here, is taken to be dead only when its heartbeat is older than
STALE_AFTER_S. Taking a lease is one BEGIN IMMEDIATE transaction, so of two processes racing for a run one wins and
the other sees the winner.

A lease row is copied with its file: a `cp` of a store being measured holds the row of the process measuring the
original. A holder on this host measures the file it holds open (its store's connection, open while it holds the
lease); one that does not hold this file open measures another, the file this one was copied from (`measures`).

A lease row rather than an OS file lock (fcntl) on a sidecar file: fcntl locks are unreliable on network file systems
(NFS, SMB), the very places a store shared between machines lives, while SQLite's own locking already orders writers.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dlperf.errors import UsageError

HEARTBEAT_S = 30.0  # how often a holder refreshes its lease
STALE_AFTER_S = 600.0  # a holder on another host unheard of this long is dead (20 missed heartbeats)


class LeaseHeld(UsageError):
    """Another live process measures the run: nothing was written."""


@dataclass(frozen=True)
class Holder:
    pid: int
    host: str
    token: str | None  # None where /proc is absent: the pid alone is checked
    since: str = ""  # when it took the lease
    seen: str = ""  # its last heartbeat

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"

    def same_process(self, other: Holder) -> bool:
        return (self.pid, self.host, self.token) == (other.pid, other.host, other.token)


def start_token(pid: int) -> str | None:
    """The boot's id and the start time of `pid` in clock ticks since boot: unique to one process of one boot. None
    where /proc is absent, or the process is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the name before ")" may hold spaces
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        return None
    return None if fields[0] == "Z" else f"{boot}:{fields[19]}"


def me() -> Holder:
    return Holder(os.getpid(), socket.gethostname(), start_token(os.getpid()))


def alive(holder: Holder, now: datetime | None = None) -> bool:
    if holder.host != socket.gethostname():
        seen = datetime.fromisoformat(holder.seen)
        return ((now or datetime.now(UTC)) - seen).total_seconds() < STALE_AFTER_S
    if holder.token is not None:
        return start_token(holder.pid) == holder.token
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def measures(holder: Holder, file: tuple[int, int] | None) -> bool:
    """Whether `holder` is alive and measures the file `file` (its device and inode, `location.identity`), not another
    that this one is a copy of: on this host, whether it holds the file open; on another, its heartbeat alone tells
    (device numbers differ between the hosts of a shared file system)."""
    return alive(holder) and (holder.host != socket.gethostname() or holds_open(holder.pid, file))


def holds_open(pid: int, file: tuple[int, int] | None) -> bool:
    """Whether process `pid` of this host holds the file `file` (device, inode) open; True where that cannot be told
    (`file` unknown, no /proc, another user's process)."""
    if file is None:
        return True
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return True
    for fd in fds:
        try:
            found = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if (found.st_dev, found.st_ino) == file:
            return True
    return False


def stamp() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def holder_of(conn: sqlite3.Connection, run_id: int) -> Holder | None:
    row = conn.execute("SELECT pid, host, token, since, seen FROM leases WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else Holder(*row)


def holders(conn: sqlite3.Connection) -> dict[int, Holder]:
    """Run id -> the holder of its lease, for every leased run, alive or not."""
    rows = conn.execute("SELECT run_id, pid, host, token, since, seen FROM leases ORDER BY run_id")
    return {run_id: Holder(*rest) for run_id, *rest in rows}


def take(conn: sqlite3.Connection, run_id: int, holder: Holder) -> None:
    """Write `holder`'s lease, inside the caller's transaction."""
    when = stamp()
    conn.execute(
        "INSERT OR REPLACE INTO leases (run_id, pid, host, token, since, seen) VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, holder.pid, holder.host, holder.token, when, when),
    )


def acquire(conn: sqlite3.Connection, run_id: int, holder: Holder, file: tuple[int, int] | None = None
            ) -> Holder | None:  # fmt: skip
    """Take the run's lease for `holder` in one transaction; returns the dead holder it took over from, if any.
    A live holder's lease is refused with LeaseHeld, one line naming it (and where it measures another file than
    `file`, the one it was copied from, saying so)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = free_for(conn, run_id, holder, file)
        take(conn, run_id, holder)
    except BaseException:
        conn.rollback()
        raise
    conn.commit()
    return None if current is None or current.same_process(holder) else current


def free_for(conn: sqlite3.Connection, run_id: int, holder: Holder, file: tuple[int, int] | None = None
             ) -> Holder | None:  # fmt: skip
    """The run's current holder, where `holder` may take its lease; LeaseHeld, as `acquire` refuses it, where another
    live process holds it. Only reads: `Store.acquire` asks before it upgrades an older file, which a refused resume
    leaves as it was."""
    current = holder_of(conn, run_id)
    if current is not None and not current.same_process(holder) and alive(current):
        raise held(run_id, current, copy=not measures(current, file))
    return current


def refuse_upgrade(conn: sqlite3.Connection, file: tuple[int, int] | None, version: int, to: int, where: str) -> None:
    """LeaseHeld where the file `where` names, at the older schema `version` (one with leases), may not be upgraded
    to `to` now: a live process, an older dlperf, measures a run of it in this file (judged as a resume judges a
    holder: `measures`). Upgraded under it, that sweep's next write failed ("table measurements has 10 columns but 9
    values were supplied", exit 2). A dead holder's lease, or the lease a copy (`cp`) holds of a process measuring the
    original, stops nothing."""
    mine = me()
    for run_id, holder in holders(conn).items():
        if not holder.same_process(mine) and measures(holder, file):
            raise LeaseHeld(f"{where}: run {run_id} is being measured by {holder.describe()} since {holder.since} with "
                            f"an older dlperf, which writes this file at schema version {version}: upgraded to version "
                            f"{to} now, that sweep could store no more of its cells; wait for it to end, or stop it, "
                            "and run this command again")  # fmt: skip


def held(run_id: int, current: Holder, copy: bool = False) -> LeaseHeld:
    """The refusal of a run another live process measures: --resume's, and its dry run's (which takes no lease).
    `copy`: it measures the file this one was copied from (`cp`), and would time its cells beside this one's."""
    if copy:
        return LeaseHeld(f"run {run_id} is being measured by {current.describe()} since {current.since} in the file "
                         "this one was copied from, not in this one: resumed here, the two would time each other's "
                         "load; wait for it to end")  # fmt: skip
    return LeaseHeld(f"run {run_id} is being measured by {current.describe()} since {current.since} (last seen "
                     f"{current.seen}); wait for it to end, or stop it and resume")  # fmt: skip


def beat(conn: sqlite3.Connection, run_id: int, holder: Holder) -> bool:
    """Refresh `holder`'s heartbeat, inside the caller's transaction; False if it no longer holds the lease."""
    cur = conn.execute(
        "UPDATE leases SET seen = ? WHERE run_id = ? AND pid = ? AND host = ? AND token IS ?",
        (stamp(), run_id, holder.pid, holder.host, holder.token),
    )
    return cur.rowcount == 1


def release(conn: sqlite3.Connection, run_id: int, holder: Holder) -> None:
    """Drop `holder`'s lease, inside the caller's transaction; another holder's is left alone."""
    conn.execute(
        "DELETE FROM leases WHERE run_id = ? AND pid = ? AND host = ? AND token IS ?",
        (run_id, holder.pid, holder.host, holder.token),
    )


class Heartbeat:
    """A thread that refreshes a lease every HEARTBEAT_S on its own connection, while a cell runs for minutes."""

    def __init__(self, path: str, run_id: int, holder: Holder) -> None:
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, args=(path, run_id, holder), daemon=True)
        self.thread.start()

    def _loop(self, path: str, run_id: int, holder: Holder) -> None:
        uri = f"{Path(path).resolve().as_uri()}?mode=rw"  # never creates a file
        while not self.stopped.wait(HEARTBEAT_S):
            try:
                conn = sqlite3.connect(uri, uri=True, timeout=HEARTBEAT_S)
                try:
                    with conn:
                        if not beat(conn, run_id, holder):
                            return  # taken over: the next write to the run says so
                finally:
                    conn.close()
            except sqlite3.Error:  # busy or gone for a moment: the next beat, or the next measurement, refreshes it
                pass

    def stop(self) -> None:
        self.stopped.set()
