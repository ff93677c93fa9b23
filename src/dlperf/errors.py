"""Errors a user can cause. The CLI prints them as one line on stderr and exits 2."""


class UsageError(Exception):
    """Bad input: nothing ran, nothing was written."""

    def _render_traceback_(self) -> list[str]:
        """What IPython (a notebook) shows in place of the traceback: the one line, as the command line says it (a
        notebook showed 60 lines of dlperf's frames above it)."""
        return [f"{type(self).__name__}: {self}"]


class BadValue(UsageError, ValueError):
    """A value a Python caller gave a constructor of dlperf's that it cannot take (`dlperf.TimerConfig(max_time=-1)`):
    a ValueError, as Python's own are, and a UsageError, one line in a notebook (it was ten frames of a dataclass's)."""


class OutputFailed(OSError):
    """Standard output could not be written (a full disk, a closed terminal): the command's output is cut short; or
    an -o file ran out of room (a full disk, `ulimit -f`), nothing of it written. The CLI says so in one line on
    stderr, where it can, and exits 74 (`ExitCode.OUTPUT_FAILED`); what the command stored is stored."""


class MissingDependency(UsageError):
    """An optional dependency is absent; the message says what to install."""


class ProbeFailed(UsageError):
    """A probe child killed by a signal (named in the message: by hand, the kernel's out-of-memory killer) or out of
    memory (`worker/child.oom_words`): nothing the user gave was wrong, so the CLI says it in one line and exits 1
    (`ExitCode.CELLS_FAILED`), not 2; a UsageError still for the callers that go on without the probe's answer."""


class StoreFault(UsageError):
    """The store's file could not be read or written (permissions, a full disk, a damaged row): one line, exit 2."""


LEFT_OUT: dict[str, None] = {}  # the stored runs this process left out, their rows damaged (`left_out`)


def left_out(fault: StoreFault) -> None:
    """A run whose stored row no longer decodes, left out of what a command reads of its store (`Store.runs`): said
    once on stderr, and the command then exits 1 (`cli.dispatch`), the other runs shown; one line of stdlib."""
    import sys

    if str(fault) not in LEFT_OUT:
        LEFT_OUT[str(fault)] = None
        print(f"dlperf: warning: {fault}: left out", file=sys.stderr, flush=True)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP) stopped a stored run: what had finished is kept, no child is left, the run is
    marked interrupted and `dlperf.resume` (`dlperf run --resume`) goes on with it. A KeyboardInterrupt, so a
    caller's loop of `dlperf.run` stops as Python code does at Ctrl-C; `run_id` and `db` name the run. `unstored`:
    the store's line where it refused to mark the run interrupted (a full disk): the run then reads as stopped once
    this process is gone, which `dlperf.resume` takes up all the same.

    Left uncaught, it ends a script with exit status 1, not the shell's 130 for Ctrl-C (nor 143 for SIGTERM, which is
    this same interrupt while cells run, so the run stays resumable): CPython ends a script by SIGINT only where the
    uncaught exception is KeyboardInterrupt itself, not a subclass (`PyErr_Occurred() == PyExc_KeyboardInterrupt`, in
    its main.c and pythonrun.c). dlperf could change that only by changing the caller's process (a signal handler left
    installed, `sys.excepthook`), so a script that wants 130 raises the plain one: `except dlperf.RunInterrupted:
    raise KeyboardInterrupt from None`."""

    def __init__(self, run_id: int, db: str, unstored: str | None = None) -> None:
        then = unstored_note(unstored, "dlperf.resume")
        super().__init__(f"run {run_id} of {db!r} was interrupted: what had finished is stored, and "
                         f"dlperf.resume(db={db!r}) goes on with it{then}")  # fmt: skip
        self.run_id, self.db, self.unstored = run_id, db, unstored

    def __reduce__(self):  # pickled (a process pool's worker) or copied as made: its args are the message alone
        return type(self), (self.run_id, self.db, self.unstored)


def unstored_note(unstored: str | None, resume: str = "--resume") -> str:
    """'', or what an interrupted run's line adds where its status could not be stored (`RunInterrupted.unstored`):
    the run then reads as stopped, which `resume` takes up as it does an interrupted one."""
    if unstored is None:
        return ""
    return f"; its status could not be stored ({unstored}): it reads as stopped, which {resume} takes up as well"


class UnreadableRow(StoreFault):
    """A stored row that no longer decodes (a damaged data page): names its run and cell, so a view can leave the
    cell out and say so, or stop."""

    def __init__(self, run_id: int, key: str, what: str, reason: str) -> None:
        super().__init__(f"run {run_id}, cell {key}: its stored {what} cannot be read ({reason})")
        self.run_id, self.key, self.what, self.reason = run_id, key, what, reason

    def __reduce__(self):  # pickled or copied as made, as RunInterrupted
        return type(self), (self.run_id, self.key, self.what, self.reason)


def where_in_user_code(exc: BaseException) -> str:
    """' (at FILE:LINE, in FUNCTION)': the deepest frame of `exc`'s traceback in the user's own code (not in the
    standard library, an installed package or dlperf), where a failure in the user's model or factory can be looked
    at; '' where there is none (a built-in workload). An error dlperf raised from another (`raise ... from exc`: the
    loss said in dlperf's words) is looked for in its cause too. Standard library only: the worker uses it too."""
    import traceback

    while exc is not None:
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if in_user_code(frame.filename):
                return f" (at {frame.filename}:{frame.lineno}, in {frame.name})"
        exc = exc.__cause__
    return ""


def in_user_code(filename: str) -> bool:
    """Whether a traceback frame's file is the user's own: not '<frozen ...>' nor '<string>', not in the standard
    library, an installed package (this environment's or another's) or dlperf."""
    import os
    import sysconfig

    paths = sysconfig.get_paths()
    libraries = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    libraries.add(os.path.realpath(os.path.dirname(__file__)))  # dlperf's own package
    real = os.path.realpath(filename)
    if filename.startswith("<") or "-packages" + os.sep in real:
        return False
    return not any(real == lib or real.startswith(lib + os.sep) for lib in libraries)


def why_unwritable(path: object) -> str:
    """Why an existing folder or file cannot be written, in a few words: "its file system is read-only" where it is
    mounted so (no permission would help), else "permission denied". Standard library only."""
    import os

    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # AttributeError: a platform without statvfs
        read_only = False
    return "its file system is read-only" if read_only else "permission denied"


def out_of_memory_here(command: str, exc: MemoryError) -> str:
    """A MemoryError in dlperf's own process (planning, reading a huge input: no child's) in one line, as a child's
    is (`worker/child.oom_words`): the command and where in dlperf it ran out, the error's own words (where in the
    user's code), and what to try. Had been Python's traceback. Standard library only."""
    import os
    import traceback

    package = os.path.dirname(os.path.realpath(__file__))
    ours = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename).startswith(package)]
    where = ""
    if ours:
        file = os.path.relpath(os.path.realpath(ours[-1].filename), os.path.dirname(package))
        where = f" (at {file}:{ours[-1].lineno}, in {ours[-1].name})"
    words = (str(exc).strip().splitlines() or [""])[0]
    own = f"MemoryError: {words}" if words else "MemoryError"
    return (f"out of memory in dlperf {command}{where}: {own}{where_in_user_code(exc)}; try closing other programs "
            "to free memory, or asking for less (fewer workloads, a smaller batch or model)")  # fmt: skip
