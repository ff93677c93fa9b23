"""What the commands write: an output file whole or not at all (`-o`: `replacing`, `write_file`), standard output
that says when it was cut short (`write_stdout`), and the line saying what was written (`wrote`)."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dlperf.errors import OutputFailed, UsageError

if TYPE_CHECKING:
    from pathlib import Path


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary file beside `path` to write, renamed over `path` when the block ends: an output file is whole or
    absent, never cut short. A write that fails (a full disk, `ulimit -f`) removes the temporary file and is one
    line naming the file. A device or a FIFO (/dev/null, a pipe), a file this process has open (/dev/stdout, a shell's
    redirect), or a link to one, is written in place: renamed over, it would be replaced by a regular file (as root,
    /dev/null itself) and the redirect would get nothing. A link to a file keeps its link: the file it names is
    replaced."""
    import tempfile  # here: `dlperf --help` and a bad flag's error load neither (random, shutil, bz2, lzma, urllib)
    from pathlib import Path

    out = Path(path)
    if not_a_regular_file(out) or an_open_file(out):
        try:
            yield out
        except BrokenPipeError:
            raise  # the reader went away (`-o /dev/stdout | head`): not a fault
        except OSError as exc:  # what went before is written: cut short, as a write to standard output that fails
            said = f"-o {str(path)!r}: could not write it ({exc.strerror or exc}): it is cut short"
            raise OutputFailed(exc.errno, said) from None
        return
    if out.is_symlink():
        out = Path(os.path.realpath(out))
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=f".tmp{out.suffix}", dir=out.parent)
    except OSError as exc:
        raise _unwritten(path, exc) from None
    try:
        os.fchmod(fd, 0o666 & ~umask())  # mkstemp's 0600 would be the file's mode: a new file's, as other tools write
    finally:
        os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, out)
    except OSError as exc:
        raise _unwritten(path, exc) from None
    finally:
        tmp.unlink(missing_ok=True)


def not_a_regular_file(path: Path) -> bool:
    """Whether `path` is there (through any link) as something other than a file or a folder: a device, a FIFO."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def an_open_file(path: Path) -> bool:
    """Whether `path` is, or links through, a file a process holds open (/dev/stdout, /dev/fd/N, /proc/self/fd/N): a
    shell's `> out.csv` is the file behind /dev/stdout, written through as it stands."""
    seen = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        if seen.startswith(("/proc/", "/dev/fd/", "/dev/stdout", "/dev/stderr")):
            return os.path.exists(seen)  # /proc/x.html, /dev/stdout.html: no open file, a path refused as any is
        try:
            seen = os.path.join(os.path.dirname(seen), os.readlink(seen))
        except OSError:  # no link (any more): a path of its own
            return False
    return False


def wrote(out: str | Path, text: str) -> None:
    """The line saying what `-o` wrote: on standard error where `out` is standard output's own file (`-o /dev/stdout`),
    which the line would follow or overwrite, else on standard output."""
    try:
        same = os.path.samestat(os.stat(out), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError):  # stdout closed, or not a file (pytest's capture)
        same = False
    print(text, file=sys.stderr if same else sys.stdout)


def umask() -> int:
    """This process's umask: read from /proc where the kernel says it, else set and put back at once."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


NO_ROOM = frozenset(n for n in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EFBIG) if n is not None)


def _unwritten(path: str | Path, exc: OSError) -> UsageError | OutputFailed:
    """An -o file that could not be written, nothing of it left: a write that ran out of room (a full disk, a quota,
    `ulimit -f`) is the output's failure, exit 74 as at /dev/full or a full disk under standard output (it was 2, bad
    input, where no input was wrong); a file that cannot be made (a folder missing, no permission) is bad input, 2."""
    said = f"-o {str(path)!r}: could not write it ({exc.strerror or exc}); nothing was written"
    return OutputFailed(exc.errno, said) if exc.errno in NO_ROOM else UsageError(said)


def write_file(path: str | Path, text: str) -> None:
    """`text` into `path`, whole or not at all (`replacing`), in UTF-8: a byte of a name that is not (a path typed
    as `lat\xe9n.db`, kept as Python keeps it, a lone surrogate) is written as its escape, `\udce9`, not a traceback
    at every report of the store."""
    with replacing(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            write_all(fd, text.encode("utf-8", "backslashreplace"))
            if not not_a_regular_file(tmp):  # a device or a FIFO has nothing to sync (EINVAL)
                os.fsync(fd)
        finally:
            os.close(fd)


def write_stdout(text: str, what: str) -> None:
    """`text` on standard output; a write that fails (a full disk, `ulimit -f` on a redirected file) is one line
    saying the output was cut short (exit code 74), where a silent exit 0 would leave a truncated file that looks
    whole."""
    try:
        sys.stdout.flush()
        errors = sys.stdout.errors if sys.stdout.errors not in (None, "strict") else "backslashreplace"  # `write_file`
        write_all(sys.stdout.fileno(), text.encode(sys.stdout.encoding or "utf-8", errors))
    except BrokenPipeError:
        raise  # the reader went away (`| head`): not a fault
    except OSError as exc:
        said = f"could not write the {what} to standard output ({exc.strerror or exc}): it is cut short"
        raise OutputFailed(exc.errno, said) from None


def write_all(fd: int, data: bytes) -> None:
    """Every byte, or OSError. Python's buffered files report a short write at the file-size limit as a success
    (write returns the bytes it managed, which TextIOWrapper ignores): the file ends cut short and nothing is said.
    os.write says how much went; the write after a short one raises (EFBIG, ENOSPC)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_SETTLED: list[int] = []  # the exit code a command decided before its output, this process's latest


def settle(code: int) -> int:
    """The exit code `code`, decided before the output that says it is written: a reader that goes away meanwhile
    (`| head -1`) cuts the output short, not the outcome (a regression's 1 was 0 once the pipe closed)."""
    _SETTLED[:] = [int(code)]
    return code


def settled() -> int:
    """The exit code the command settled on (`settle`), else 0: what a closed pipe leaves it."""
    return _SETTLED[0] if _SETTLED else 0
