"""Where a store is: the default path ($DLPERF_DB, else ./dlperf.db), what stops it opening, said in one line before
SQLite's vaguer "unable to open" or "disk I/O error", and the command that finds it again to resume a run there."""

from __future__ import annotations

import errno
import functools
import operator
import os
import re
import shlex
import sqlite3
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import ParamSpec, TypeVar

from dlperf.errors import StoreFault, UsageError, why_unwritable
from dlperf.store.schema import SCHEMA_VERSION

P = ParamSpec("P")
R = TypeVar("R")


def default_db() -> str:
    """Where a command reads and writes when no --db is given: $DLPERF_DB, else ./dlperf.db. A $DLPERF_DB set but empty
    is refused, as an empty --db is: `DLPERF_DB=$OUT dlperf run` with $OUT unset means no store, not ./dlperf.db."""
    found = os.environ.get("DLPERF_DB")
    if found == "":
        raise UsageError("$DLPERF_DB is set but empty: set it to a database file, or unset it for ./dlperf.db")
    return found or "dlperf.db"


def working_directory() -> None:
    """A working directory deleted since the shell entered it is refused in one line before anything runs: every
    relative path (./dlperf.db, -o report.html) was a FileNotFoundError traceback, and with an absolute --db each
    cell's process, started in it, failed to load PyTorch ("Cannot load libtorch_cpu.so")."""
    try:
        os.getcwd()
    except FileNotFoundError:
        raise UsageError("the working directory no longer exists (deleted since this shell entered it): cd to a "
                         "folder that exists and run it again") from None  # fmt: skip
    except PermissionError:
        raise UsageError("the working directory cannot be read (a folder above it lost its permissions): cd to "
                         "another folder and run it again") from None  # fmt: skip


def given_db(db: str | os.PathLike[str] | None) -> str:
    """The store an API call names: `db` (a path object as its `os.fspath`), or `default_db()` where it names none
    (None); an empty one is refused as an empty --db is (a `db=os.environ.get("OUT", "")` left empty means no store,
    not ./dlperf.db). A working directory that is gone is refused first (`working_directory`)."""
    working_directory()
    if db is None:
        return default_db()
    path = os.fspath(db) if isinstance(db, str | os.PathLike) else None  # a path object's str() need not be its path
    if not isinstance(path, str):  # db=123 ran a sweep into a file named 123, db=['x.db'] "['x.db']"
        raise UsageError(f"db={db!r}: expected a path (a str or pathlib.Path), or None for the default store")
    if path == "":
        raise UsageError("db='': an empty path names no database; give a file, or None for the default store")
    return path


_SAID_AS: ContextVar[str | None] = ContextVar("dlperf_db_said_as", default=None)  # `said_as`'s; None: "--db"


@contextmanager
def said_as(flag: str) -> Iterator[None]:
    """Inside, a line about a store names its path as the caller gave it: "--db" (a command's flag, as outside) or
    "db" (a Python caller's argument: `db='PATH'`). The outermost caller's: a command calling the Python API (`dlperf
    run` calls `api.run`) keeps its flag."""
    token = _SAID_AS.set(_SAID_AS.get() or flag)
    try:
        yield
    finally:
        _SAID_AS.reset(token)


def run_said(run_id: int) -> str:
    """A run as its caller named it: "--run 9" under a command, "run=9" under the Python API (`said_as("db")`)."""
    return f"run={run_id}" if _SAID_AS.get() == "db" else f"--run {run_id}"


def db_said_as(flag: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A function whose store is named as `flag` in its lines (`said_as`): "db" for a Python API function
    (`dlperf.run`), "--db" for a command's."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def called(*args: P.args, **kwargs: P.kwargs) -> R:
            with said_as(flag):
                return function(*args, **kwargs)

        return called

    return wrap


# a command a line names, to be typed as it is: `dlperf list --frameworks`, or a whole one in backticks with its values
# (`dlperf run --modes fp32,bf16 --repeats 3` lost the dashes of its --repeats)
COMMAND = re.compile(r"`dlperf [^`]*`|dlperf [a-z]+(?: --?[a-z][\w-]*)+")


def as_arguments(line: str, flags: dict[str, str], given: object) -> str:
    """A line as a Python caller gave the values: `--batch '0'` as `batch=0`, `--data DIR` as `data=DIR`, a flag
    alone as its argument's name; a command it names, to type in a shell, as it is (`dlperf list --frameworks`).
    `flags`: each argument's flag (a dotted name: `timer.min_time`), `given` what holds the caller's values (its
    Options)."""
    commands = COMMAND.findall(line)
    line = COMMAND.sub("\0", line)
    for name, flag in flags.items():
        value = operator.attrgetter(name)(given)
        line = line.replace(f"{flag} {str(value)!r}", f"{name}={value!r}")
        line = re.sub(rf"{flag}(?![\w-])(?: ([A-Z]+)\b)?", lambda m, n=name: f"{n}={m[1]}" if m[1] else n, line)
    for command in commands:
        line = line.replace("\0", command, 1)
    return line


def as_called(line: str, flags: dict[str, str], given: object) -> str:
    """`line` as the outermost caller gave the values: unchanged under a command (`said_as("--db")`: `dlperf run`
    calling `api.run`), else as a Python caller's arguments (`as_arguments`)."""
    return as_arguments(line, flags, given) if _SAID_AS.get() == "db" else line


@contextmanager
def said_to(opts, flags: dict[str, str]) -> Iterator[Callable[[str], str]]:
    """Inside, what a search says names what its caller gave as it gave it: the command's flags where `opts.flags`
    (the command sets it), else a Python caller's arguments (`as_arguments`), its store too (`said_as`). A one-line
    error raised inside is said so; yields the same wording for the lines returned (notes)."""
    say = (lambda line: line) if opts.flags else (lambda line: as_arguments(line, flags, opts))
    with said_as("--db" if opts.flags else "db"):
        try:
            yield say
        except UsageError as exc:
            if not opts.flags:
                exc.args = (say(str(exc)),)  # its type kept: a BadValue is still the ValueError it was
            raise


def named(path: str | Path) -> str:
    """The store as the user named it, for the start of a line about it: --db 'PATH' (db='PATH' to a Python caller,
    `said_as`; -o 'PATH' where merge was given it so), or $DLPERF_DB 'PATH' where that is what named it."""
    if os.environ.get("DLPERF_DB") == str(path):
        return f"$DLPERF_DB {str(path)!r}"
    flag = _SAID_AS.get()
    return f"db={str(path)!r}" if flag == "db" else f"{'-o' if flag == '-o' else '--db'} {str(path)!r}"


def check_path(path: str, *, create: bool, made_by: str = "dlperf run") -> None:
    """What opening `path` would meet, said in one line before anything opens it (or, for `dlperf run`, plans): a
    directory on the way this user may not enter, no file to read (`made_by`: the command that would have stored what
    was asked for), a file that cannot be read or written."""
    if why := unreachable(path) or name_too_long(path, create):
        raise UsageError(f"{named(path)}: {why}")
    if why := not_a_database_file(path, missing=None):
        raise UsageError(f"{named(path)}: {why}")
    if not create and not Path(path).exists():
        raise UsageError(f"{named(path)}: no such database (run `{made_by}` first)")
    _check_readable(path)
    if why := newer_schema(path):
        raise UsageError(f"{named(path)}: {why}")
    if create:
        _check_writable(path)


def unreachable(path: str | Path) -> str | None:
    """Why this user cannot reach `path`: the first directory on the way they may not enter (where Python 3.11's
    Path.exists() raises PermissionError and SQLite says "unable to open"), or a name too long to look up; None when
    nothing on the way stops them, whether or not the path exists."""
    try:
        os.stat(path)
    except PermissionError:
        full = Path(path).absolute()
        blocked = next((d for d in reversed(full.parents) if not os.access(d, os.X_OK)), full.parent)
        return f"this user may not enter directory {str(blocked)!r} (permission denied)"
    except OSError as exc:  # not there, or not a directory on the way: the caller says so
        if exc.errno == errno.ENAMETOOLONG:  # where Path.is_dir() and SQLite would raise it again
            return f"a name longer than this system allows ({exc.strerror})"
        if exc.errno == errno.ELOOP:  # Path.exists() says False: "no such database", SQLite's "unable to open"
            return (f"its symbolic links go round in a loop ({exc.strerror}), never reaching a file: point the link "
                    "at the database file")  # fmt: skip
    n = max(len(os.fsencode(os.path.abspath(path))), len(os.fsencode(os.path.realpath(path))))  # through links too
    if n > SQLITE_LONGEST_PATH:  # SQLite said "unable to open", and dlperf "not a dlperf database or corrupt"
        return f"its full path is {n} bytes long, more than SQLite opens ({SQLITE_LONGEST_PATH}): give a shorter one"
    return None


SQLITE_LONGEST_PATH = 504  # bytes of a database's full path SQLite opens here: its journal's, 8 longer, within 512
NAME_MAX = 255  # bytes of one file name, where the file system does not say (`name_max`): Linux's and macOS's
JOURNAL = "-journal"  # the longest name SQLite gives a file beside the database (-wal and -shm are shorter)


def name_too_long(path: str | Path, create: bool) -> str | None:
    """Why the store's file name is too long for the files kept beside it, whose names add to it: SQLite's journal
    (NAME-journal), which every write and a reader's rollback need (a traceback, ENAMETOOLONG), and, where the
    command may write (`create`), the measurements the store refuses (NAME.unsaved.jsonl: "the measurement ... is
    lost: it could not be kept either (File name too long)"); None where they fit. Said before anything runs."""
    from dlperf.store.spill import SUFFIX

    longest = max((JOURNAL, SUFFIX) if create else (JOURNAL,), key=len)
    n, limit = len(os.fsencode(Path(path).name)), name_max(Path(path).absolute().parent)
    if n + len(longest) <= limit:
        return None
    which = "SQLite's journal beside it" if longest == JOURNAL else "the file that keeps what the store refuses"
    return (f"its file name is {n} bytes long: {which}, NAME{longest}, would be {n + len(longest)}, past the {limit} "
            f"bytes this file system allows a name; give a name of at most {limit - len(longest)} bytes")  # fmt: skip


def name_max(folder: Path) -> int:
    """The longest file name, in bytes, the file system of `folder` takes (NAME_MAX where it cannot say)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # not there, or no pathconf (Windows)
        return NAME_MAX


NOT_FILES = {stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
             stat.S_IFSOCK: "a socket"}  # fmt: skip


def not_a_database_file(path: str | Path, missing: str | None = "no such database file") -> str | None:
    """Why `path` is not a file to open as a database: a directory, something else that is no file (a FIFO, on which
    SQLite's open would wait for a writer, past SIGTERM; a device such as /dev/null, which takes no schema), a link
    to nothing whose directory is not there, or (`missing`) nothing there; None otherwise."""
    p = Path(path)
    if p.is_dir():
        return "is a directory, not a database file"
    try:
        kind = NOT_FILES.get(stat.S_IFMT(os.stat(p).st_mode))
    except OSError:
        kind = None
    if kind:
        return f"is {kind}, not a database file"
    if p.is_symlink() and not p.exists() and not (target := Path(os.path.realpath(p))).parent.is_dir():
        return f"is a link to {str(target)!r}, whose directory does not exist"
    return missing if missing and not p.is_file() else None


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def not_sqlite(path: str | Path) -> str | None:
    """Why a file SQLite opened as an empty database is none: it holds bytes, but not SQLite's header (a /proc file
    such as /proc/self/status, whose size reads 0); None for an empty file or an SQLite one, or one not readable."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:
        return None
    return "not a dlperf database (not an SQLite file)" if head and head != SQLITE_HEADER else None


def newer_schema(path: str, version: int | None = None) -> str | None:
    """Why this dlperf may not use the store at `path`: a newer dlperf's schema (`version`, else read from the file,
    read-only and without waiting on a lock); None for any other file, which opening it judges."""
    if version is None:
        try:
            conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True, timeout=0)
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            finally:
                conn.close()
        except (sqlite3.Error, ValueError):  # not there, no meta table, damaged, locked: opening it says what
            return None
        version = int(row[0]) if row and str(row[0]).isdigit() else 0
    if version <= SCHEMA_VERSION:
        return None
    return f"schema version {version} is newer than this dlperf ({SCHEMA_VERSION}): upgrade dlperf to use it"


def read_only_wal(path: str) -> str | None:
    """A store in WAL mode (`PRAGMA journal_mode=WAL`, set by another program) that SQLite cannot read as it is, as it
    may not make its -shm file beside it (a read-only directory or file system): the URI that reads it unchanging
    (`immutable`), where no -wal file beside it holds changes not yet in it; None for any other file. A UsageError
    where a -wal file holds changes, which only a writable place can read."""
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return None
    if not header.startswith(SQLITE_HEADER) or header[18:20] != b"\x02\x02":  # the read and write versions: 2 is WAL
        return None
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        raise UsageError(f"{named(path)}: in WAL mode, with changes in {str(wal)!r} that SQLite reads only where "
                         "it may write beside them: open it once where it is writable, or copy it with its -wal file "
                         "there")  # fmt: skip
    return f"{Path(path).absolute().as_uri()}?immutable=1"


def unopened(path: str, exc: sqlite3.DatabaseError) -> str:
    """Why SQLite could not open or read the store at `path`, after `check_path` found nothing wrong: a rollback
    journal left by a program that stopped mid-write (a hot journal), which SQLite must play back into the file before
    anything reads it, where the file or its folder may not be written (SQLite's "attempt to write a readonly
    database", which was said as "not a dlperf database or corrupt"); else the file is no database, or is damaged."""
    journal = Path(f"{path}-journal")
    if size_of(journal) > 0 and (why := unwritable_for_rollback(path)):
        return (f"holds an unfinished transaction, in {str(journal)!r} (a program stopped while it wrote), that "
                f"SQLite must roll back before the file can be read, and {why}: once it may be written, the next "
                "command rolls it back; or copy the file and its -journal together to a writable folder and open the "
                "copy")  # fmt: skip
    return f"not a dlperf database or corrupt ({exc})"


def unwritable_for_rollback(path: str) -> str | None:
    """What stops SQLite rolling a journal back into the file at `path` (writing the file, then removing the journal
    from its folder), in words; None where nothing does."""
    try:
        os.close(os.open(path, os.O_WRONLY))  # not truncated: only asked; EPERM where the file is immutable
    except OSError as exc:
        return f"the file cannot be written ({exc.strerror})"
    folder = Path(path).absolute().parent
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its directory {str(folder)!r} is not writable ({why_unwritable(folder)})"
    return None


def _check_readable(path: str) -> None:
    """What SQLite would report as a vague "unable to open" or "disk I/O error", said plainly before it runs."""
    p = Path(path)
    if p.is_file() and not os.access(p, os.R_OK):
        raise UsageError(f"{named(path)}: cannot read it (permission denied)")
    for side in (Path(f"{path}-journal"), Path(f"{path}-wal")):
        if side.is_dir():
            raise UsageError(f"{named(path)}: {str(side)!r} is a directory, where SQLite keeps the database's "
                             "journal: move it away")  # fmt: skip


def _check_writable(path: str) -> None:
    """The file and its directory: SQLite writes its journal beside the file, so an existing file in a read-only
    directory cannot take a write either."""
    p = Path(path)
    target = p if p.exists() else p.parent
    if not target.exists():
        raise UsageError(f"{named(path)}: directory {str(target)!r} does not exist")
    if not os.access(target, os.W_OK):
        raise UsageError(f"{named(path)}: not writable ({why_unwritable(target)})")
    folder = p.absolute().parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{named(path)}: its directory {str(folder)!r} is not writable ({why_unwritable(folder)}), "
                         "and SQLite writes its journal there")  # fmt: skip


class StoreGone(StoreFault):
    """A write refused because the store file a command opened is no longer at its path (deleted, moved, replaced,
    its directory deleted: SQLite's "attempt to write a readonly database"); `now_at`: where what it held is now (the
    file's new name, or a copy made of it), None where it could not be copied."""

    def __init__(self, message: str, now_at: Path | None) -> None:
        super().__init__(message)
        self.now_at = now_at

    def __reduce__(self):  # pickled or copied as made (its args are the message alone)
        return type(self), (str(self), self.now_at)


def identity(path: str | Path) -> tuple[int, int] | None:
    """The file at `path` as the file system knows it (device, inode); None where there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


EMPTIED = "the file was emptied"


def gone(path: str | Path, held: tuple[int, int] | None, had_content: bool = True) -> tuple[str, Path | None] | None:
    """What became of the store file a command opened at `path` (`held`: its `identity` then), where the path no
    longer names it, or names it emptied: what happened, in words, and the file's new name where it was moved (as this
    process's open file is named in /proc/self/fd); None while the path still names it (or nothing was held).
    `had_content`: the file held something when opened; a new one still empty was never emptied (a full disk's first
    write was said to be "the file was emptied while this command ran ... the runs it held went with it")."""
    if held is None:
        return None
    if identity(path) == held:  # still its file: gone only where its content went (truncated to nothing)
        try:
            return (EMPTIED, None) if had_content and os.path.getsize(path) == 0 else None
        except OSError:  # gone just now: the next write says so
            return None
    if (moved := open_name(held)) is not None:
        if not Path(path).is_absolute() and moved.is_relative_to(Path.cwd()):
            moved = moved.relative_to(Path.cwd())  # named as the user named it
        return f"the file was moved to {str(moved)!r}", moved
    folder = Path(path).absolute().parent
    if not folder.is_dir():
        return f"its directory {str(folder)!r} was deleted", None
    if os.path.lexists(path):
        return "the file was replaced by another one", None
    return "the file was deleted", None


def size_of(path: str | Path) -> int:
    """The file's size in bytes; 0 where it cannot be looked at."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def open_name(held: tuple[int, int]) -> Path | None:
    """The name the file `held` has now, read from the link of this process's descriptor open on it; None where it
    has none (deleted) or this system does not say (no /proc)."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for fd in fds:
        link = f"/proc/self/fd/{fd}"
        try:
            if identity(link) != held:
                continue
            name = os.readlink(link)
        except OSError:
            continue
        if not name.endswith(" (deleted)") and identity(name) == held:
            return Path(name)
    return None


def program() -> str:
    """How to call this dlperf again from a shell: `dlperf` where that is what PATH finds, else the script as it was
    called (`make run` calls `.venv/bin/dlperf` with the environment not activated: "Continue with: dlperf run
    --resume" was "command not found"), a link to it as it was called (`./dl`); `python -m dlperf` says `dlperf`
    where PATH finds one, else `PYTHON -m dlperf`; a program calling `main` says `dlperf`."""
    import shutil
    import sys

    script = sys.argv[0] if sys.argv else ""
    found = shutil.which("dlperf")
    if script.endswith(os.path.join("dlperf", "__main__.py")):  # `python -m dlperf`: the same where PATH lacks one
        return "dlperf" if found else f"{shlex.quote(sys.executable)} -m dlperf"
    if os.path.basename(os.path.realpath(script)) != "dlperf" or os.sep not in script:  # a link to it: `./dl`
        return "dlperf"
    try:
        if found and os.path.samefile(found, script):
            return "dlperf"
    except OSError:  # the script gone since: the name as typed
        return "dlperf"
    return shlex.quote(script)


def db_words(db: str | Path) -> list[str]:
    """--db and its value as words of a command line dlperf takes back: `--db x.db`, or `--db=-x.db` where the value
    starts with '-' (`--db -x.db` is --db with no value, the path read as a flag). Every command dlperf prints that
    names a store by --db (the resume, table, report and compare commands) names it so."""
    db = str(db)
    return [f"--db={db}"] if db.startswith("-") else ["--db", db]


def db_flag(db: str | Path) -> str:
    """`db_words`, quoted for a shell: `--db x.db`, `--db=-x.db`, `'--db=-a b.db'`."""
    return shlex.join(db_words(db))


def path_word(path: str | Path) -> str:
    """A file as one word of a command line, quoted for a shell, that no program reads as an option: `./-x.db` where
    it starts with '-' (a positional argument of `dlperf merge`, sqlite3's file)."""
    path = str(path)
    return shlex.quote(f"./{path}" if path.startswith("-") else path)


def resume_command(db: str, tmpdir: str | None = None) -> str:
    """The command that resumes the latest unfinished run of `db`, quoted for a shell, naming the database as the user
    did: `--db`, or `$DLPERF_DB` where that is what named it. Followed literally, it opens this database, never the
    default one in another directory or one a changed $DLPERF_DB names. To a Python caller (`said_as`) the call that
    does it: `dlperf.resume(db='r.db')`. `tmpdir`: the $TMPDIR it must run under, where a measurement it stores was
    kept (`spill.elsewhere`)."""
    if _SAID_AS.get() == "db":
        return f"dlperf.resume(db={db!r})" + (f" with TMPDIR={tmpdir!r} in its environment" if tmpdir else "")
    under = f"TMPDIR={shlex.quote(tmpdir)} " if tmpdir else ""
    if os.environ.get("DLPERF_DB") == db:
        return f"{under}DLPERF_DB={shlex.quote(db)} {program()} run --resume"
    return f"{under}{program()} run --resume {db_flag(db)}"


def ray_resume_command(address: str, db: str | Path) -> str:
    """The command that goes on with a `--ray` sweep's unfinished runs over the cluster at `address`, quoted for a
    shell: every line that names it (the interrupt's, a lost node's, a driver Ray ended, the table's note)."""
    return shlex.join(["dlperf", "run", "--resume", "--ray", address, *db_words(db)])


def unreadable(exc: BaseException, db: str | None) -> str | None:
    """SQLite's own error under a command that had opened the store `db` (None: a store the command named otherwise)
    said in one line: a page damaged, the file cut short or replaced while the command ran, a lock held past the
    timeout. None for any other error."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    where, file = (named(db), path_word(db)) if db else ("a store", "FILE")
    if "locked" in str(exc):  # SQLITE_BUSY: another program's transaction held it past the timeout; nothing damaged
        return (f"{where}: another program held it locked past the timeout ({exc}), a dlperf writing it or a sqlite3 "
                "shell left in a transaction; nothing is damaged: run the command again once that is done")  # fmt: skip
    return (f"{where}: SQLite could not read it ({exc}): damaged, or changed by another program while this command "
            f"ran; `sqlite3 {file} 'PRAGMA integrity_check'` says what is damaged")  # fmt: skip
