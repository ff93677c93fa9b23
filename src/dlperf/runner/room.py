"""Why a child that failed could not write its files: its temporary folder (in $TMPDIR, where `launch` puts its task,
its events and its log) is full, or the file-size limit (`ulimit -f`) cut one of them short. A worker whose events
could not be written exits 1, its log often empty too: every cell was "failed: worker exited with code 1", nothing
said of why, and the sweep went on failing each the same way. `no_room` names the cause; the sweep stops at it
(`sweep.room_checked`), the cell left to `dlperf run --resume`, as a store that refuses a write stops it.

The folder can also fill up before the child starts, while dlperf itself writes there (the child's folder, its task,
its log files: `launch`): that write is refused the same way (`writing`, `Unwritten`), where it was a traceback.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import UsageError

PROBE_BYTES = 64 * 1024  # written into the child's folder once it failed: a full file system refuses it
FULL = frozenset(n for n in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if n is not None)
TOO_LARGE = "[Errno 27]"  # EFBIG as Python says it ("OSError: [Errno 27] File too large"): a limit's, in any locale


@dataclass(frozen=True)
class NoRoom:
    """What stopped a child's writes (`why`), and what lets the next one write (`fix`)."""

    why: str
    fix: str


def no_room(folder: Path, stderr: str = "") -> NoRoom | None:
    """Why the failed child of `folder` (its temporary folder, still there) could not write its files: the file-size
    limit, which one of them reached (or the error it wrote, `stderr`, says), or a file system with no room left in
    it; None where neither is the case."""
    return size_limit(folder, stderr) or full(folder)


def size_limit(folder: Path, stderr: str = "") -> NoRoom | None:
    """The file-size limit this process and its children run under, where a file of the child's reached it or the
    child said EFBIG; None without a limit, or where nothing met it."""
    if (soft := file_size_limit()) is None:
        return None
    try:
        cut = [p.name for p in sorted(folder.iterdir()) if p.is_file() and p.stat().st_size >= soft]
    except OSError:
        cut = []
    if not cut and TOO_LARGE not in stderr:
        return None
    return over_limit(soft, f"cut its {cut[0]} short" if cut else "stopped one of its writes")


def file_size_limit() -> int | None:
    """`ulimit -f` in bytes (the soft limit, what a write meets); None where there is none."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def over_limit(soft: int, what: str) -> NoRoom:
    return NoRoom(f"the file-size limit, ulimit -f {soft // 1024} ({soft:,} bytes), {what}: File too large",
                  "raise the limit (ulimit -f unlimited)")  # fmt: skip


def full(folder: Path) -> NoRoom | None:
    """The file system of `folder` where it has no room left (a write of PROBE_BYTES refused); None where it takes
    one."""
    probe = folder / ".room"
    try:
        write_probe(probe)
    except OSError as exc:
        if exc.errno not in FULL:
            return None
        return filled(folder.parent, exc, "where the worker writes its events and log")
    finally:
        probe.unlink(missing_ok=True)
    return None


def filled(where: Path, exc: OSError, what: str) -> NoRoom:
    """The temporary folder `where` said to be full: what is written there (`what`), in the error's own words."""
    why = f"the temporary folder {str(where)!r}{named_by(where)}, {what}, is full: {exc.strerror}"
    return NoRoom(why, "free space there, or set TMPDIR to a folder with room")


class Unwritten(UsageError):
    """dlperf's own write in the temporary folder (`what` it did: "make the folder of a cell process", "write its
    task", "create its log files") refused for want of room (`said`). One line, as a worker that could not write is:
    a sweep stops at its cell (`sweep.room_for`), the cell left to --resume."""

    def __init__(self, what: str, said: NoRoom) -> None:
        super().__init__(f"dlperf could not {what} ({said.why}): {said.fix}")
        self.what, self.said = what, said

    def __reduce__(self):  # pickled or copied as made, as errors.RunInterrupted
        return type(self), (self.what, self.said)


@contextmanager
def writing(what: str, where: Path) -> Iterator[None]:
    """A write of dlperf's own into the temporary folder `where` (`what` it does: "write the task of a cell process"),
    refused for want of room (the folder full, a quota, the file-size limit): `Unwritten`, which says so in one line;
    any other error as it is."""
    try:
        yield
    except OSError as exc:
        if exc.errno in FULL:
            said = filled(where, exc, "where each process's task, events and log are written")
        elif exc.errno == errno.EFBIG and (soft := file_size_limit()) is not None:
            said = over_limit(soft, "stopped it")
        else:
            raise
        raise Unwritten(what, said) from None


def write_probe(path: Path) -> None:
    """PROBE_BYTES into a new file at `path`, every one, or OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(bytes(PROBE_BYTES))
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def named_by(where: Path) -> str:
    """' ($TMPDIR)' where that names the folder, else ''."""
    given = os.environ.get("TMPDIR")
    try:
        return " ($TMPDIR)" if given and os.path.samefile(given, where) else ""
    except OSError:
        return ""
