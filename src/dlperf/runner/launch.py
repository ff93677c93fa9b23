"""The one launcher: every child process (a cell, a DDP job, a peak, a comm job, a probe) starts here.

`launch(task, ...)` writes the task (`dlperf.protocol`) into a temporary directory of the child's own, starts the
task's worker module (through torchrun for a distributed task), waits with a timeout, and returns the child's outcome
with its typed events by rank; the directory, with the child's compiler caches and logs, is gone afterwards. Pure
functions build the command and the environment (unit-tested); `run_child` executes them. The child starts in its
own session: Ctrl-C in the terminal reaches only the parent, which then stops the child's whole process tree itself,
and a timeout kills the tree too, grandchildren included; an interrupt is raised with the events the child had
reported by then (`ChildInterrupted`). A child dies with dlperf, and nothing it started outlives it
(`runner/lifeline.py`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from dlperf.frameworks.common import heap
from dlperf.measure import system
from dlperf.measure.system import descendants
from dlperf.parallel import Rendezvous
from dlperf.protocol import LIFELINE, CellTask, Event, ProbeTask, Task, decode, read_events, write_task
from dlperf.runner import lifeline, room, warm
from dlperf.runner.distributed import python_module, spawn_command, torchrun_command
from dlperf.runner.environ import cache_env, child_env
from dlperf.runner.room import NoRoom, no_room
from dlperf.vocab import OUT_OF_MEMORY_SAID

KILL_GRACE_S = 3.0  # between SIGTERM and SIGKILL
UNCOUNTED = " (killed: out of memory?)"  # a SIGKILL where no out-of-memory counter could be read
EVENTS = "events.jsonl"


def child_command(python: str, task: Task, task_file: str, events: str, nproc: int = 1,
                  rdzv: Rendezvous | None = None, job_id: str = "") -> list[str]:  # fmt: skip
    """`python -P -m <the task's worker> TASK EVENTS` (`distributed.python_module`), or for a distributed task the
    torchrun command that starts `nproc` of them on this node."""
    if task.SPAWNED:  # the spawner arms its own lifeline, first thing
        return spawn_command(python, nproc, rdzv or Rendezvous(), job_id, task.WORKER, [task_file, events])
    if task.DISTRIBUTED:  # torchrun's agent, too, dies with dlperf: started through the lifeline module
        logs = os.path.join(os.path.dirname(task_file), "torchrun")  # in the launcher's folder, removed with it
        torchrun = torchrun_command(python, nproc, rdzv or Rendezvous(), job_id, task.WORKER, [task_file, events], logs)
        return [*python_module(python, LIFELINE), *torchrun[3:]]  # python -P -m: torch.distributed.run ...
    return [*python_module(python, task.WORKER), task_file, events]


@dataclass
class ChildResult:
    returncode: int | None  # None when killed by us (timeout or interrupt)
    timed_out: bool
    duration_s: float
    stderr_tail: str
    stop_reason: str | None = None  # why it was stopped early, when a `limit` stopped it
    started_at: float | None = None  # wall clock just before the child was started: its events' `at` count from here
    started: str = "cold"  # "warm": forked from a warm parent (`runner/warm.py`); "cold": a fresh interpreter
    cold_because: str | None = None  # why a cell's child started cold
    oom_kills: int | None = None  # the kernel's out-of-memory kills while it ran (`system.oom_kills`); None: unknown
    orphaned: bool = False  # killed with the warm parent it was forked from, which died while it ran
    no_room: NoRoom | None = None  # a failed child's files could not be written: its folder full, or `ulimit -f`

    @property
    def crashed_reason(self) -> str | None:
        """Why a child died abnormally, in words; None for a clean exit."""
        if self.timed_out or self.returncode in (0, None):
            return None
        if self.returncode < 0:
            return signal_reason(-self.returncode, self.oom_kills, self.stderr_tail)
        return f"worker exited with code {self.returncode}" + (f" ({self.no_room.why})" if self.no_room else "")


def signal_reason(signum: int, oom_kills: int | None = None, stderr: str = "") -> str:
    """Why a child died of `signum`, in words. A SIGKILL is out of memory only where the kernel's out-of-memory killer
    counted a kill while the child ran (`oom_kills`); with no count to read, it may be. A SIGABRT is out of memory
    where what the child wrote last (`stderr`) says an allocation failed: C++'s std::bad_alloc uncaught, an
    allocator that aborts rather than raise (CUDA's, some CPU ones under pressure); else a crash."""
    name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else f"signal {signum}"
    hints = {
        signal.SIGKILL: _killed(oom_kills),
        signal.SIGSEGV: " (segmentation fault)",
        signal.SIGABRT: ABORTED_OUT_OF_MEMORY if allocation_failed(stderr) else " (aborted)",
        signal.SIGBUS: " (bus error)",
    }
    return f"worker killed by {name}{hints.get(signum, '')}"


ABORTED_OUT_OF_MEMORY = " (out of memory: an allocation failed and the process aborted)"
# what a process that aborted writes where an allocation failed: the words the frameworks raise it with, C++'s
# std::bad_alloc (glibc's "terminate called after throwing an instance of 'std::bad_alloc'"), strerror(ENOMEM)
ALLOCATION_FAILED = (*OUT_OF_MEMORY_SAID, "bad_alloc", "cannot allocate memory")


def allocation_failed(stderr: str) -> bool:
    lowered = stderr.lower()
    return any(said in lowered for said in ALLOCATION_FAILED)


def _killed(oom_kills: int | None) -> str:
    if oom_kills is None:
        return UNCOUNTED
    if oom_kills > 0:
        return " (out of memory: the kernel's out-of-memory killer killed a process while it ran)"
    return " (sent by a process: the kernel's out-of-memory killer counted no kill while it ran)"


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGTERM the child's process group, then SIGKILL whatever is left after a grace period.

    Descendants that left the group (a compiler pool started in its own session) are killed by pid too."""
    strays = [p for p in descendants(proc.pid) if _pgid(p) != proc.pid]
    for pid in strays:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:  # the leader is gone; make sure the rest of its group is too
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def run_child(
    cmd: list[str],
    env: Mapping[str, str],
    timeout: float,
    log_dir: Path,
    poll: Callable[[], None] = lambda: None,
    limit: Callable[[], str | None] = lambda: None,
    parent: warm.WarmParent | None = None,
    gpu: bool = False,
    logs: str = "the log files of a child process",
) -> ChildResult:
    """Run `cmd` in its own session with a timeout. `poll` is called a few times a second (progress display);
    so is `limit`, which returns a reason to stop the child early (e.g. a compile timeout) or None. With a warm
    `parent`, the child (`python -P -m MODULE ARGS`) is forked from it; where it cannot fork, the child starts cold,
    saying why, its `logs` created here (`start_cold`).

    An exception raised meanwhile (KeyboardInterrupt, or the SIGTERM handler's) kills the tree and propagates."""
    started_at, start, oom_before = time.time(), time.monotonic(), system.oom_kills()
    proc, (cold_because, stopped) = None, _served(parent, limit) if parent is not None else (None, None)
    if stopped is not None:  # `limit` stopped it while the warm parent imported: no child was started
        return ChildResult(None, True, time.monotonic() - start, "", stopped, started_at)
    try:
        # an interrupt while the child starts is held until it has, then raised and the child killed: a cold fork runs
        # the at-fork handlers (logging's), where one raised is printed and lost ("Exception ignored in"), every later
        # one then dropped as a second; one raised while the warm parent's answer was awaited left the forked child
        # running, its pid never known here
        with lifeline.held():
            if cold_because is None and parent is not None:
                try:
                    module = cmd.index("-m") + 1  # python -P -m MODULE ARGS
                    proc = parent.spawn(cmd[module], cmd[module + 1 :], env, log_dir, gpu)
                except warm.WarmFailed as exc:
                    cold_because = str(exc)
            if proc is None:
                proc = start_cold(cmd, env, log_dir, logs)
        timed_out, reason = _wait(proc, start, timeout, poll, limit, lifeline.paused()[1])
    except BaseException:
        if proc is not None:
            kill_tree(proc)
        raise
    # any failure: a job's agent (torchrun) exits 1 where one of its ranks was killed (`collect.ddp_measurement` says
    # that rank's death with the count)
    oom_after = system.oom_kills() if proc.returncode != 0 else None
    forked = parent is not None and cold_because is None
    orphaned = forked and parent.died and proc.returncode == -signal.SIGKILL  # as `WarmParent.exit_code` says it
    return ChildResult(
        None if timed_out else proc.returncode,
        timed_out,
        time.monotonic() - start,
        tail(log_dir / "stderr.log"),
        reason,
        started_at,
        "cold" if cold_because is not None or parent is None else "warm",
        cold_because,
        None if oom_before is None or oom_after is None else oom_after - oom_before,
        orphaned,
    )


def _served(parent: warm.WarmParent, limit: Callable[[], str | None]) -> tuple[str | None, str | None]:
    """Why a child cannot fork from `parent` (None: it can), once its imports are awaited, an interrupt meanwhile
    taken at once; and why `limit` stopped the launch while they were (None: it did not)."""
    try:
        return parent.serving(stop=limit), None
    except warm.Stopped as exc:
        return None, str(exc)


def _wait(proc: subprocess.Popen, start: float, timeout: float, poll, limit, paused_s: float = 0.0
          ) -> tuple[bool, str | None]:  # fmt: skip
    """Until the child ends, or `limit` or the timeout stops it; time dlperf spent suspended (Ctrl-Z, from `paused_s`
    on) is not the child's."""
    while True:
        try:
            proc.wait(timeout=0.25)
            return False, None
        except subprocess.TimeoutExpired:
            pass
        poll()
        reason = limit()
        if reason is not None or time.monotonic() - start - (lifeline.paused()[1] - paused_s) > timeout:
            kill_tree(proc)
            return True, reason


def tail(path: Path, lines: int = 15, max_chars: int = 3000) -> str:
    return "\n".join(full(path).strip().splitlines()[-lines:])[-max_chars:]


class Follower:
    """The events a child has written so far, read as it writes them: a line still being written is read next time."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def new(self) -> list[Event]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return []
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        return [e for e in map(decode, complete.decode(errors="replace").splitlines()) if e is not None]


Watch = Callable[[list[Event]], str | None]  # the newest events -> a reason to stop the child now, or None


@dataclass
class Launched:
    child: ChildResult
    events: dict[int, list[Event]]  # by rank; a one-process child's are rank 0's
    stderr: str  # all of it: torchrun's failure summary names each rank's exit code

    @property
    def main(self) -> list[Event]:
        return self.events.get(0, [])

    @property
    def every_rank(self) -> list[Event]:
        """This node's events of all its ranks, rank by rank: where a job's failure is looked for (the rank that
        failed first need not be rank 0)."""
        return rank_by_rank(self.events)


class ChildInterrupted(KeyboardInterrupt):
    """An interrupt (Ctrl-C, SIGTERM, SIGHUP) while a child ran: its tree is stopped, and `events` (by rank) are what
    it had reported by then, for a caller that keeps what it finished (`dlperf comm`'s sizes). A KeyboardInterrupt:
    a caller that keeps nothing of it handles it as before."""

    def __init__(self, events: dict[int, list[Event]]) -> None:
        super().__init__()
        self.events = events

    @property
    def every_rank(self) -> list[Event]:
        return rank_by_rank(self.events)

    def __reduce__(self):  # pickled or copied as made, as errors.RunInterrupted
        return type(self), (self.events,)


def rank_by_rank(events: dict[int, list[Event]]) -> list[Event]:
    return [e for rank in sorted(events) for e in events[rank]]


def launch(
    task: Task,
    python: str,
    threads: int,
    timeout: float,
    *,
    nproc: int = 1,
    rdzv: Rendezvous | None = None,
    job_id: str = "",
    poll: Callable[[], None] = lambda: None,
    watch: Watch | None = None,
) -> Launched:
    """Run `task` in a child (or, distributed, in `nproc` processes on this node) with the thread variables of
    `threads`, for at most `timeout` seconds. `watch` sees a one-process child's events as they arrive and may stop
    it with a reason. Never raises for the child's failure; an interrupt stops the child's tree and propagates, as
    `ChildInterrupted` with the events the child had reported; the child's folder, task or log that dlperf could not
    write for want of room is `room.Unwritten`."""
    lifeline.not_nested()
    lifeline.remove_stale_dirs_once()
    of = f"of a {task.KIND} process"  # $TMPDIR full: said in one line (`room.Unwritten`), not a traceback
    with room.writing(f"make the folder {of}", Path(tempfile.gettempdir())):
        made = tempfile.TemporaryDirectory(prefix=lifeline.tmp_prefix(task.KIND))
    with made as tmp:
        tmpdir = Path(tmp)
        with room.writing(f"write the task {of}", tmpdir.parent):
            write_task(task, tmpdir / "task.json")
        events = tmpdir / EVENTS
        cmd = child_command(python, task, str(tmpdir / "task.json"), str(events), nproc, rdzv, job_id)
        env = {**child_env(os.environ, threads, python), **cache_env(tmpdir), **lifeline.child_vars(tmpdir.name)}
        follower = Follower(events)
        limit = (lambda: watch(follower.new())) if watch else (lambda: None)
        cold, probe = warm.why_cold(task), isinstance(task, ProbeTask)  # a probe that forks is the predictor's: CPU
        if (cell := getattr(task, "cell", None)) is not None:  # a mode's malloc, preloaded (`common/heap.py`)
            env.update(heap.preload_env(cell.mode, os.environ))
        parent = warm.parent(python, task.framework if probe else task.cell.framework, probe) if cold is None else None
        cold = warm.FIRST if cold is None and parent is None else cold
        # a GPU cell is forked only from a parent that never initialized CUDA
        gpu = parent is not None and not probe and task.cell.device != "cpu"
        try:
            with lifeline.reaping(tmpdir.name, KILL_GRACE_S, parent):  # what the child left running stops as it ends
                child = run_child(cmd, env, timeout, tmpdir, poll, limit, parent, gpu, f"the log files {of}")
        except KeyboardInterrupt:  # its tree stopped: what it had reported goes with the interrupt
            raise ChildInterrupted(events_by_rank(tmpdir, task.DISTRIBUTED)) from None
        if parent is None and isinstance(task, CellTask):
            child = replace(child, cold_because=cold)
        if child.returncode not in (0, None):  # its files may be what failed (`room.no_room`), looked at before removed
            child = replace(child, no_room=no_room(tmpdir, full(tmpdir / "stderr.log")))
        return Launched(child, events_by_rank(tmpdir, task.DISTRIBUTED), full(tmpdir / "stderr.log"))


def start_cold(cmd: list[str], env: Mapping[str, str], log_dir: Path,
               logs: str = "the log files of a child process") -> subprocess.Popen:  # fmt: skip
    """`cmd` started in its own session, its output into `log_dir`, killed with this process (`lifeline`). Its log
    files (`logs`) refused for want of room is `room.Unwritten`; the child's own writes, its wait and what dlperf
    prints meanwhile are not: their ENOSPC was said as a full $TMPDIR, a full disk under stderr included."""
    with ExitStack() as files:
        with room.writing(f"create {logs}", log_dir.parent):
            stdout, stderr = (files.enter_context(open(log_dir / name, "wb")) for name in ("stdout.log", "stderr.log"))
        return subprocess.Popen(cmd, env=dict(env), stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=lifeline.before_exec())  # fmt: skip


def unsuspended(
    start: Callable[[], Launched],
    again: bool = True,
    *,
    discard: Callable[[Launched], None] = lambda _: None,
    did: str = "measured",
) -> tuple[Launched, list[str]]:
    """The process `start` launches, and the notes on it. One suspended while it ran (Ctrl-Z: dlperf stopped it with
    itself, `lifeline.suspend`) timed the pause into whatever it was doing, so it is launched again, and said so
    (`did` again), what it left given to `discard`; where it cannot be alone (`again` False: a job of several nodes,
    whose other nodes ran on), it is kept, noted. One killed with the warm parent it was forked from (`orphaned`: the
    parent died, not the cell) is launched again once, from a parent started anew or cold."""
    retimed, paused_s, orphans = 0, 0.0, []
    while True:
        count, seconds = lifeline.paused()
        launched = start()
        if launched.child.orphaned and not orphans:
            orphans.append(f"{did} again: its first process was killed with the warm parent it was forked from, which "
                           "died while it ran")  # fmt: skip
            discard(launched)
            continue
        if lifeline.paused()[0] == count:
            break
        paused_s += lifeline.paused()[1] - seconds
        if not again:
            return launched, [
                *orphans,
                f"suspended (Ctrl-Z) for {paused_s:.1f} s while it ran: its times include the pause",
            ]
        discard(launched)
        retimed += 1
    if not retimed:
        return launched, orphans
    if retimed == 1:
        said = f"1 process suspended (Ctrl-Z) for {paused_s:.1f} s while it ran was left out"
    else:
        said = f"{retimed} processes suspended (Ctrl-Z) while they ran, {paused_s:.1f} s in all, were left out"
    return launched, [*orphans, f"{did} again: {said}"]


def events_by_rank(tmpdir: Path, distributed: bool) -> dict[int, list[Event]]:
    if not distributed:
        return {0: read_events(tmpdir / EVENTS)}
    files = tmpdir.glob(f"{EVENTS}.rank*")
    return {int(re.sub(r"\D", "", p.name.removeprefix(EVENTS))): read_events(p) for p in files}


def full(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
