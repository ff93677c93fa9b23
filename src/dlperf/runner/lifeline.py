"""Nothing a cell started outlives dlperf, or the cell: children die with their parent, orphans come back to dlperf.

The parent's side; the child's is `worker/lifeline.py`:

- a child is killed by the kernel when its parent ends (PR_SET_PDEATHSIG), even by SIGKILL, when nothing of dlperf
  runs to stop it. The launcher arms it in the child between fork and exec (`before_exec`; the setting survives exec),
  so from its first instruction: armed by the child itself, first thing in `serve`, it came after the interpreter's
  start and the worker's imports, and a dlperf killed meanwhile left the child running that long (80-140 ms on an idle
  machine, about 1 s on a busy 2-core one; issue 30). The child arms again in `die_with_parent()`, which checks the
  parent named in DLPERF_PARENT_PID (`child_vars`), and so do the processes the launcher does not start: torchrun's
  agent is started through `python -m dlperf.worker.lifeline`, and its workers arm in `serve` and die with it. The
  signal fires when the *thread* that started the child ends: `launch` blocks its thread for the child's whole life,
  so that thread always outlives the child.
- the parent, while a child runs (`reaping`), is a child subreaper (PR_SET_CHILD_SUBREAPER): what the child started in
  another session (`setsid`, a double-forked daemon) comes back to dlperf instead of init when its own parent ends,
  and is stopped when the child ends. Such orphans are known by DLPERF_LAUNCH in their environment, set for each
  launch: processes of dlperf's host program (the Python API) are never touched, save a zombie child the host made
  in another thread while a launch ran (a zombie's environment is gone), which is reaped with the launch's.
- each child's temporary directory is named after the dlperf process that made it (`tmp_prefix`), so a later run
  removes those left by a dlperf that was killed (`remove_stale_dirs`).
- SIGTERM and SIGHUP are Ctrl-C (`sigterm_as_interrupt`): the child's tree stopped, the run left resumable. Ctrl-Z
  stops the children too, which are in sessions of their own, and continues them with dlperf (`suspend`).

Both prctl calls are Linux's; elsewhere they do nothing, and a killed dlperf's children or a cell's daemons live on.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from dlperf.errors import UsageError
from dlperf.measure.system import descendants, prctl
from dlperf.protocol import LAUNCH_VAR, PARENT_VAR

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 1, 36, 37
STALE_DIR = re.compile(r"dlperf-(\d+)-")


def _is_subreaper() -> bool:
    flag = ctypes.c_int(0)
    return prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) and flag.value != 0


def before_exec() -> Callable[[], None] | None:
    """What a child runs between fork and exec (`subprocess.Popen(preexec_fn=...)`): be killed when this process's
    launching thread ends (PR_SET_PDEATHSIG, SIGKILL), and end at once if it already has. Everything is looked up here,
    before the fork: the child only calls prctl and getppid (no import, no dlopen, no lock another thread may have held
    at the fork). None where prctl is not Linux's."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        call = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent, sig = os.getpid(), int(signal.SIGKILL)

    def arm() -> None:
        call(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between the fork and the call: nobody would kill this child
            os._exit(1)

    return arm


def child_vars(tmpdir_name: str) -> dict[str, str]:
    """What the launcher adds to a child's environment: its parent, and the launch its descendants belong to."""
    return {PARENT_VAR: str(os.getpid()), LAUNCH_VAR: f"{os.getpid()}:{tmpdir_name}"}


def not_nested() -> None:
    """Refuse to start a child from one of dlperf's own children (its PARENT_VAR set): a model file that starts a
    measurement at its top level (`dlperf.run(...)` without `if __name__ == "__main__":`) starts it again in every
    child that imports the file, each probe importing it in a child of its own, without end."""
    if os.environ.get(PARENT_VAR):
        raise UsageError("a dlperf measurement was started inside one of dlperf's own processes, which import your "
                         "model's file: code at its top level that starts one (dlperf.run) runs again in each of "
                         'them; put it under `if __name__ == "__main__":`')  # fmt: skip


def tmp_prefix(kind: str) -> str:
    return f"dlperf-{os.getpid()}-{kind}-"


class ForkedFrom(Protocol):
    """The warm parent a child was forked from (`runner/warm.py`): its DLPERF_LAUNCH and its process id."""

    launch: str
    pid: int | None


_depth, _lock, _was_subreaper = 0, threading.Lock(), False


@contextmanager
def reaping(tmpdir_name: str, grace_s: float, forked_from: ForkedFrom | None = None) -> Iterator[None]:
    """While a child runs, be its orphans' subreaper; when it ends, stop those orphans (SIGTERM, SIGKILL after
    `grace_s`) and reap them. Launches in several threads share one subreaper setting, dropped after the last.

    A child forked from a warm parent (`forked_from`) set the launch's DLPERF_LAUNCH after the fork, so what it forks
    in turn, without an exec, still shows the warm parent's environment in /proc: those orphans are known by the warm
    parent's own DLPERF_LAUNCH (the parent itself, this process's child too, is never one)."""
    global _depth, _was_subreaper
    known = {pid for pid, _ in children()}
    with _lock:
        _depth += 1
        if _depth == 1:
            _was_subreaper = _is_subreaper()  # a host that is one already stays one
            prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        yield
    finally:
        try:
            launches = [child_vars(tmpdir_name)[LAUNCH_VAR]]
            if forked_from is not None:
                launches.append(forked_from.launch)
                known |= {forked_from.pid} if forked_from.pid is not None else set()
            stop_orphans(launches, grace_s, known)
        finally:
            with _lock:
                _depth -= 1
                if _depth == 0 and not _was_subreaper:
                    prctl(PR_SET_CHILD_SUBREAPER, 0)


def orphans(launches: Sequence[str], known: set[int] = frozenset(), proc_root: str = "/proc") -> list[int]:
    """This process's children that a launch started (one of `launches` its DLPERF_LAUNCH) and that came back to it.
    A zombie's environment is gone: a zombie child not in `known` (the children before the launch) came back during
    it, typically a process the child killed as it ended."""
    markers = [f"\0{LAUNCH_VAR}={launch}\0".encode() for launch in launches]
    found = []
    for pid, state in children(proc_root):
        try:
            if pid in known:
                continue
            if state == b"Z" or any(m in b"\0" + _read(f"{proc_root}/{pid}/environ") for m in markers):
                found.append(pid)
        except OSError:
            continue
    return found


def children(proc_root: str = "/proc") -> list[tuple[int, bytes]]:
    """This process's children and their states, from the parent links in /proc (Linux; [] elsewhere)."""
    me, found = os.getpid(), []
    for entry in os.listdir(proc_root) if os.path.isdir(proc_root) else []:
        try:
            state, ppid = _read(f"{proc_root}/{entry}/stat").rsplit(b")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        if entry.isdigit() and int(ppid) == me:
            found.append((int(entry), state))
    return found


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def stop_orphans(launches: Sequence[str], grace_s: float, known: set[int] = frozenset()) -> None:
    """SIGTERM the launch's orphans, SIGKILL what is left after `grace_s`, reap them all. A stopped orphan's own
    children come back in turn, hence the rounds."""
    for _ in range(5):
        pids = orphans(launches, known)
        if not pids:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            pids = _reap(pids, wait)


def _reap(pids: list[int], wait_s: float) -> list[int]:
    """Reap those of `pids` that end within `wait_s`; the ones still running."""
    deadline = time.monotonic() + wait_s
    while pids:
        for pid in list(pids):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                pids.remove(pid)
        if not pids or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return pids


_swept = False


def remove_stale_dirs_once() -> None:
    """`remove_stale_dirs`, at the first child this process launches: every command that starts children sweeps what
    a killed one left (a SIGKILLed `dlperf comm`'s folder stayed until a `dlperf run`), once, not at every cell."""
    global _swept
    if not _swept:
        _swept = True
        remove_stale_dirs()


def remove_stale_dirs(root: str | None = None) -> list[str]:
    """Remove the children's temporary directories whose dlperf process has ended (killed, so it could not clean
    up); returns their paths."""
    root = root or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(root) if os.path.isdir(root) else []
    except OSError:  # a temporary folder one may write but not list (mode 1733): a cleanup fails no command
        return removed
    for name in names:
        path, match = os.path.join(root, name), STALE_DIR.match(name)
        if match and os.path.isdir(path) and not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return _state(pid) != b"Z"  # a zombie has ended; unreadable (None): it lives


INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, a job scheduler or `kill`, the terminal closed
_interrupted: int | None = None  # the signal being handled as an interrupt, until the outermost handling ends
_handling = 0  # `sigterm_as_interrupt` blocks entered and not left (the CLI's, a sweep's within it)
_paused = [0, 0.0]  # suspensions (Ctrl-Z) so far, and their seconds
# a stop that returns sooner did not happen: a process group no shell continues (orphaned) ignores SIGTSTP; a real one
# waits for another process's SIGCONT
NO_PAUSE_S = 0.01


@contextmanager
def sigterm_as_interrupt(to_the_end: bool = False) -> Iterator[None]:
    """SIGTERM (a job scheduler, `kill`) and SIGHUP (the terminal closed) are handled like Ctrl-C, so the run is left
    resumable either way, and the running child's tree is stopped as for Ctrl-C. The first of them raises
    KeyboardInterrupt; one more while it is handled (a second Ctrl-C a moment later) is dropped, so the children's
    end, the run's state and the command's last line are not cut short. Ctrl-Z stops the children with this process
    (`suspend`). A signal the process was started ignoring (nohup's SIGHUP, a background job's SIGINT) stays ignored.
    `to_the_end`: the process ends after it (the CLI's), so once interrupted it drops more to its exit, whose cleanup
    (the warm parents closed) goes on. Only the main thread can set a handler: elsewhere, nothing."""
    global _handling, _interrupted
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (*INTERRUPTS, signal.SIGTSTP)}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, suspend if sig == signal.SIGTSTP else _interrupt)
    _handling += 1
    try:
        yield
    finally:
        _handling -= 1
        if to_the_end and _interrupted is not None:
            for sig in INTERRUPTS:  # ignored, not ours: the interpreter's end sets its own handlers back to the
                if previous[sig] is not signal.SIG_IGN:  # default first, and one more then killed dlperf (exit -2)
                    signal.signal(sig, signal.SIG_IGN)
        else:
            for sig, handler in previous.items():
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
            if _handling == 0:
                _interrupted = None


@contextmanager
def interrupts_dropped() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP ignored for the block (the main thread's; elsewhere, nothing): for what runs as the
    process ends, once its command is over (the warm parents closed at exit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
    for sig in INTERRUPTS:
        signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def _interrupt(signum: int, frame) -> None:
    global _interrupted, _deferred
    if _interrupted is not None:  # the first is being handled: its cleanup goes on
        return
    if _holding:  # a finished measurement is being stored: the interrupt comes once it is
        _deferred = _deferred or signum
        return
    _interrupted = signum
    raise KeyboardInterrupt


_holding, _deferred = 0, None  # `held` blocks entered and not left; the interrupt that came meanwhile


@contextmanager
def held() -> Iterator[None]:
    """An interrupt (Ctrl-C, SIGTERM, SIGHUP) that comes while a finished process's measurement is stored takes effect
    once it is stored (a few milliseconds): raised inside the store's transaction, it rolled the transaction back, and
    a process that had finished, perhaps after minutes, was measured again by --resume. Where storing fails (a
    StoreFault), the fault ends the sweep and says where the measurement is kept: the interrupt is handled with it, so
    one more (a second Ctrl-C) does not cut its cleanup short, as for any interrupt."""
    global _holding, _interrupted
    _holding += 1
    try:
        yield
    except BaseException:
        if (signum := _let_go()) is not None and _handling:
            _interrupted = _interrupted or signum
        raise
    if (signum := _let_go()) is not None:
        _interrupt(signum, None)


_settled: list[bool] = []  # per `settling` block entered and not left: whether its work is over (`settle`)


@contextmanager
def settling() -> Iterator[None]:
    """A block whose end is kept from interrupts once its work is over (`settle`): an interrupt (Ctrl-C, SIGTERM,
    SIGHUP) that comes after is dropped at the block's end, not raised, so the cleanup (a sweep's actors closed, its
    leases given back, Ray shut down: seconds with `--ray local`) is not cut short and the work's result stands: cut
    short, the sweep that had ended was said "interrupted before any node's plan arrived: nothing is stored". Before
    `settle`, interrupts are raised as ever."""
    _settled.append(False)
    try:
        yield
    finally:
        if _settled.pop():
            _let_go()  # what came meanwhile: dropped


def settle() -> None:
    """The work of the innermost `settling` block is over: interrupts wait for the block's end (see there), and are
    dropped then. Outside such a block, or again, nothing."""
    global _holding
    if _settled and not _settled[-1]:
        _settled[-1] = True
        _holding += 1


def _let_go() -> int | None:
    """Leave a `held` block: the interrupt it postponed, once the outermost is left."""
    global _holding, _deferred
    _holding -= 1
    signum, _deferred = (_deferred, None) if _holding == 0 else (None, _deferred)
    return signum


def suspend(signum: int = signal.SIGTSTP, frame=None, stop_self: Callable[[], None] | None = None) -> None:
    """Ctrl-Z (SIGTSTP): every child is stopped (SIGSTOP: each runs in a session of its own, which the terminal's
    SIGTSTP does not reach, and would go on being timed), then this process stops as it would have (SIGTSTP at its
    default action: a shell sees a stopped job); when it is continued (`fg`, `bg`, SIGCONT), so are they. A process
    that was stopped already is left as it was. The pause is counted (`paused`): a cell timed across it is measured
    again, and a child's --timeout does not count it. `stop_self`: in place of stopping this process (a test's)."""
    stopped, began = stop_children(), time.monotonic()
    try:
        (stop_self or _stop_self)()
    finally:
        took = time.monotonic() - began  # the stop alone: continuing the children took over 10 ms on a loaded machine
        for pid in reversed(stopped):  # children first: a parent continued finds its children running
            _signal(pid, signal.SIGCONT)
        if took >= NO_PAUSE_S:
            _paused[0] += 1
            _paused[1] += took


def paused() -> tuple[int, float]:
    """The suspensions of this process so far (Ctrl-Z, `suspend`), and their seconds in all."""
    return _paused[0], _paused[1]


def stop_children() -> list[int]:
    """SIGSTOP every running descendant, parents before their children, again while one forked meanwhile shows; the
    ones stopped."""
    stopped: list[int] = []
    for _ in range(5):
        new = [p for p in descendants(os.getpid()) if p not in stopped and _state(p) not in (b"T", b"t", b"Z", b"X")]
        for pid in new:
            if _signal(pid, signal.SIGSTOP):
                stopped.append(pid)
        if not new:
            break
    return stopped


def _stop_self() -> None:
    previous = signal.signal(signal.SIGTSTP, signal.SIG_DFL)
    try:  # delivered before kill returns; a process group without a shell to continue it (orphaned) ignores it
        os.kill(os.getpid(), signal.SIGTSTP)
    finally:
        signal.signal(signal.SIGTSTP, previous)


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _state(pid: int) -> bytes | None:
    try:
        return _read(f"/proc/{pid}/stat").rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
