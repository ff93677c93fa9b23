"""Launch one child process per cell.

Pure functions build the command and the environment (unit-tested); `run_child` executes them. The child starts in
its own session: Ctrl-C in the terminal reaches only the parent, which then stops the child's whole process tree
itself, and a timeout kills the tree too, grandchildren included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dlperf.measure.system import thread_env

KILL_GRACE_S = 3.0  # between SIGTERM and SIGKILL


def worker_command(python: str, task_file: str, result_file: str) -> list[str]:
    return [python, "-m", "dlperf.runner.worker", task_file, result_file]


def child_env(base: Mapping[str, str], threads: int, python: str = sys.executable) -> dict[str, str]:
    """The child's environment: thread variables fixed before any framework is imported."""
    env = dict(base)
    env.update(thread_env(threads))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if python != sys.executable:  # another environment: make this dlperf importable there, nothing more
        from dlperf.envs import worker_path

        env["PYTHONPATH"] = worker_path()  # never this environment's own paths: they hold another numpy
    return env


def cache_env(tmpdir: Path) -> dict[str, str]:
    """Compiler caches inside the cell's own temporary directory: every cell compiles cold, so an earlier cell
    (or an earlier run) cannot make compiling look cheap, and nothing is left behind."""
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(tmpdir / "inductor"),
        "TRITON_CACHE_DIR": str(tmpdir / "triton"),
        "CUDA_CACHE_PATH": str(tmpdir / "cuda"),
    }


@dataclass
class ChildResult:
    returncode: int | None  # None when killed by us (timeout or interrupt)
    timed_out: bool
    duration_s: float
    stderr_tail: str
    stop_reason: str | None = None  # why it was stopped early, when a `limit` stopped it

    @property
    def crashed_reason(self) -> str | None:
        """Why a child died abnormally, in words; None for a clean exit."""
        if self.timed_out or self.returncode in (0, None):
            return None
        if self.returncode < 0:
            return signal_reason(-self.returncode)
        return f"worker exited with code {self.returncode}"


def signal_reason(signum: int) -> str:
    name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else f"signal {signum}"
    hints = {
        signal.SIGKILL: " (killed: out of memory?)",
        signal.SIGSEGV: " (segmentation fault)",
        signal.SIGABRT: " (aborted)",
        signal.SIGBUS: " (bus error)",
    }
    return f"worker killed by {name}{hints.get(signum, '')}"


def descendants(pid: int, proc_root: str = "/proc") -> list[int]:
    """Every live descendant of `pid`, from the parent links in /proc (Linux; [] elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc_root}/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the name in parentheses may hold spaces
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


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
) -> ChildResult:
    """Run `cmd` in its own session with a timeout. `poll` is called a few times a second (progress display);
    so is `limit`, which returns a reason to stop the child early (e.g. a compile timeout) or None.

    An exception raised meanwhile (KeyboardInterrupt, or the SIGTERM handler's) kills the tree and propagates."""
    stdout = open(log_dir / "stdout.log", "wb")  # noqa: SIM115 - closed below, the child holds it meanwhile
    stderr = open(log_dir / "stderr.log", "wb")  # noqa: SIM115
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, env=dict(env), stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        timed_out, reason = _wait(proc, start, timeout, poll, limit)
    except BaseException:
        kill_tree(proc)
        raise
    finally:
        stdout.close()
        stderr.close()
    return ChildResult(
        None if timed_out else proc.returncode,
        timed_out,
        time.monotonic() - start,
        tail(log_dir / "stderr.log"),
        reason,
    )


def _wait(proc: subprocess.Popen, start: float, timeout: float, poll, limit) -> tuple[bool, str | None]:
    while True:
        try:
            proc.wait(timeout=0.25)
            return False, None
        except subprocess.TimeoutExpired:
            pass
        poll()
        reason = limit()
        if reason is not None or time.monotonic() - start > timeout:
            kill_tree(proc)
            return True, reason


def tail(path: Path, lines: int = 15, max_chars: int = 3000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])[-max_chars:]


def read_events(path: Path) -> list[dict]:
    """The worker's JSON lines. A line cut short by a kill is dropped; everything before it is kept."""
    events = []
    try:
        raw = path.read_text(errors="replace")
    except OSError:
        return events
    for line in raw.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events
