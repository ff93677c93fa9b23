"""Warm parents (issue 34): a cell's child forked from a process that has imported its framework already.

A cold child pays for its interpreter, the framework's import and what the first step imports (`torch._dynamo`,
through `torch.optim`): 1.5-6 s per cell on a 2-core machine, for a second of steps. A warm parent
(`worker/zygote.py`) pays for them once, per interpreter, framework and environment, and forks each cell's child
from that state. The child is still a process of its own, from a parent that holds one thread and no pool, has
touched no device and run no operator: it sets its thread counts and affinity after the fork as a cold child does,
and is given exactly the environment a cold child would be (`launch.child_env`); only the interpreter's start and the
imports are shared. Which cells fork, and why the others start cold (`why_cold`):

- cells and their profiles (`CellTask`, `ProfileTask`), and the predictor's probes (`FORKED_PROBES`: a user's model
  described, a step's operators counted, its memory traced; on the CPU, nothing timed), which within a command that
  asks the predictor (`probes_share`: predict, advise, crossover) start the parent themselves, so the command imports
  the framework once; the other probes, peaks and multi-process jobs start cold;
- of a backend whose row says it forks (`capabilities.forks`: PyTorch; JAX, TensorFlow and MXNet start threads at
  import, which a fork does not copy);
- on the CPU or a CUDA device (not MPS), a CUDA cell forked only from a parent whose CUDA driver was never
  initialized (before each such fork the zygote reads its own memory map for libcuda, and where a framework's import
  mapped it, as PyTorch 2.11+cu130's does, asks the driver, which answers without initializing; it says why not), so
  CUDA is initialized in the child as in a fresh process: never in a process that forks. Measured on an H200 (issue
  27, at 10ba3bb): every GPU cell of the check forked, 0.45 s to import and build against 9.06 s cold, and a forked
  cell timed as a cold one (the LSTM 5.94 against 6.13 ms, alexnet-r 3.556 against 3.566). `DLPERF_WARM_GPU=0`
  starts GPU cells cold;
- compiled cells too: each compiles with empty caches of its own (the compiler's cache folders are set for the child,
  as for a cold one, and the parent never compiled), only its imports saved (on 2 cores, 2.9 s of a cold compiled
  cell's start became 0.9 s, its compile time as before: 10.5 against 10.8 s for tiny-fcn-r);
- not under `--max-memory`: the limit is set before the framework is imported;
- when two or more of a run's processes can use it: a parent costs what one cold start costs, so a run starts one
  before the second such process (`prepare`, from `sweep.execute`: a sweep before its first cell, a search before
  its second candidate; a run on real data while the probe child opens its data, `api.start_warm_parents`); a
  run's only such process starts cold;
- a parent is kept per interpreter and framework, started with this process's environment less what each cell sets
  itself (thread counts, compiler caches, the lifeline's variables) and dlperf's own variables (`DLPERF_*`, read by
  the parent only); when the environment changes otherwise (a variable that changes kernels, another PYTHONPATH), the
  parent is replaced by one started in the new environment; one that died after serving is replaced (twice at
  most), and one that refused stays refused: its cells start cold, saying why.

`DLPERF_NO_WARM=1` starts every cell cold. Each measurement records which way its process started (`started`, and
`cold_because`). A warm parent dies with dlperf (PR_SET_PDEATHSIG, armed before its exec, tied to a thread of its
own that lives as long as it), and its children die with it; closing it (at exit, or when replaced) ends it and any
child still running; one a predictor's probe started, as its command ends (`probes_share`) unless a run asked for it.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from dlperf import envs
from dlperf.answers import MemoryRequest, OpsRequest, WorkloadRequest
from dlperf.frameworks.common import capabilities, heap
from dlperf.measure.system import THREAD_COUNT_VARS
from dlperf.protocol import LAUNCH_VAR, PARENT_VAR, ZYGOTE, Cell, CellTask, ProbeTask, ProfileTask, Task
from dlperf.runner import lifeline
from dlperf.runner.distributed import python_module
from dlperf.runner.environ import cache_env, child_env

OFF_VAR = "DLPERF_NO_WARM"
GPU_VAR = "DLPERF_WARM_GPU"  # "0": CUDA cells start cold (they fork by default since measured on a GPU, issue 27)
FIRST = "no warm parent for this run yet: its only process so far that may fork starts cold (a parent costs as much)"
READY_S = 120.0  # the longest a launch waits for a starting parent's imports
ANSWER_S = 60.0  # the longest a fork's answer may take
CLOSE_S = 10.0  # the longest a ready parent may take to end its children and exit once closed
CELL_VARS = frozenset({*THREAD_COUNT_VARS, PARENT_VAR, LAUNCH_VAR, "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
                       "CUDA_CACHE_PATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"})  # fmt: skip
OWN_PREFIXES = ("DLPERF_", "PYTEST_")  # read by dlperf's parent (or the test runner), never at a framework's import
# the predictor's questions (a user's model described, a step's operators counted, its memory traced): on the CPU, on
# fake tensors or a model built once, nothing timed; a probe child that answers one imports what a cell's does
FORKED_PROBES = (WorkloadRequest, OpsRequest, MemoryRequest)


class WarmFailed(Exception):
    """A warm parent could not start this child: it starts cold, with this reason recorded."""


class Stopped(Exception):
    """A launch was stopped, with this reason, while its warm parent imported: no child was started."""


def why_cold(task: Task) -> str | None:
    """Why `task`'s child must start cold; None when it may be forked from a warm parent."""
    if isinstance(task, ProbeTask):
        if not isinstance(task.request, FORKED_PROBES):
            return "only cells, their profiles and the predictor's probes are forked"
        return why_framework_cold(task.framework)
    if not isinstance(task, CellTask | ProfileTask):
        return "only cells, their profiles and the predictor's probes are forked"
    return why_cell_cold(task.cell, getattr(task, "memory_limit", None))


def why_framework_cold(framework: str) -> str | None:
    """Why no process of `framework` forks here; None when its processes may."""
    if os.environ.get(OFF_VAR):
        return f"{OFF_VAR} is set"
    if not sys.platform.startswith("linux"):
        return "a warm parent needs Linux's fork and PR_SET_PDEATHSIG"
    if not capabilities.of(framework).forks:
        return f"the {framework} backend starts every cell cold"
    return None


def why_cell_cold(cell: Cell, memory_limit: int | None = None) -> str | None:
    """Why a cell's processes (its measurements and profile) must start cold; None when they may fork."""
    if (why := why_framework_cold(cell.framework)) is not None:
        return why
    if cell.device != "cpu" and not cell.device.startswith("cuda"):
        return f"a {cell.device.split(':')[0]} cell starts cold: only CPU and CUDA cells fork"
    if cell.device.startswith("cuda") and os.environ.get(GPU_VAR) == "0":
        return f"{GPU_VAR}=0 is set: GPU cells start cold"
    if memory_limit is not None:
        return "--max-memory is set before the framework is imported"
    if cell.nproc:
        return "replicas start cold"
    if (component := heap.preloaded(cell.mode)) is not None:
        return f"{component.value} is preloaded (LD_PRELOAD) as the interpreter starts"
    return None


def env_key(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The environment a parent is started with: this process's, less what each cell sets itself and dlperf's own."""
    return tuple(sorted((k, v) for k, v in environ.items() if k not in CELL_VARS and not k.startswith(OWN_PREFIXES)))


class Forked:
    """A forked child, as the launcher handles a `subprocess.Popen`: its pid (and process group), `wait`, `poll`."""

    def __init__(self, parent: WarmParent, pid: int) -> None:
        self.parent, self.pid, self.returncode = parent, pid, None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        code = self.parent.exit_code(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout)
        self.returncode = code
        return code

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None


class WarmParent:
    """One `worker/zygote.py` process and the thread that owns it (started with it, ending when it ends: the
    process's PR_SET_PDEATHSIG fires when that thread ends, so it lives exactly as long as the process)."""

    def __init__(self, python: str, framework: str, key: tuple[tuple[str, str], ...]) -> None:
        self.python, self.framework, self.key = python, framework, key
        self.ready = threading.Event()
        self.ended: str | None = None  # why it cannot serve (refused, or ended)
        self.died = False  # it served, then ended unasked (killed, or crashed): `start` may replace it
        self.closing = False
        self.pid: int | None = None
        self.preload_s: float | None = None
        self.proc: subprocess.Popen | None = None
        self.changed = threading.Condition()
        self.answers: dict[int, dict] = {}
        self.exits: dict[int, int] = {}
        self.next_id = 0
        self.writing = threading.Lock()
        self.thread = threading.Thread(target=self._own, name=f"dlperf-warm-{framework}", daemon=True)
        try:  # its own directory, as a cell's, for what its imports write (the compiler's cache directory)
            self.tmpdir = tempfile.mkdtemp(prefix=lifeline.tmp_prefix("warm"))
        except OSError as exc:  # $TMPDIR full: cells start cold, and their launch says it in one line (`room`)
            self.tmpdir = ""
            self._end(f"the warm parent could not start: {exc}")
            return
        # its own DLPERF_LAUNCH: what a forked child forks without an exec shows this process's environment in /proc
        self.launch = lifeline.child_vars(os.path.basename(self.tmpdir))[LAUNCH_VAR]
        self.thread.start()

    def _own(self) -> None:
        env = {**child_env(dict(self.key), 1, self.python), **cache_env(Path(self.tmpdir)),
               PARENT_VAR: str(os.getpid()), LAUNCH_VAR: self.launch}  # fmt: skip
        try:
            errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed below: what it says as it ends
        except OSError as exc:  # $TMPDIR full, as in `__init__`
            self._end(f"the warm parent could not start: {exc}")
            return
        with errors:
            try:
                self.proc = subprocess.Popen(
                    [*python_module(self.python, ZYGOTE), self.framework], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=errors, env=env, start_new_session=True,
                    preexec_fn=lifeline.before_exec(),
                )  # fmt: skip
            except OSError as exc:
                self._end(f"the warm parent could not start: {exc}")
                return
            if self.closing:  # closed while it started, before `close` could see it
                self.proc.kill()
            for line in self.proc.stdout:
                self._heard(json.loads(line))
            self.proc.wait()
            errors.seek(0)
            said = errors.read().decode(errors="replace").strip().splitlines()
        self._end(f"the warm parent ended (exit {self.proc.returncode}){': ' + said[-1] if said else ''}", died=True)

    def _heard(self, message: dict) -> None:
        with self.changed:
            if "ready" in message:
                self.pid, self.preload_s = message["ready"], message.get("preload_s")
                self.ready.set()
            elif "refused" in message:
                self.ended = f"the warm parent refused: {message['refused']}"
                self.ready.set()
            elif "exit" in message:
                self.exits[message["exit"]] = message["code"]
            elif "id" in message:
                self.answers[message["id"]] = message
            self.changed.notify_all()

    def _end(self, reason: str, died: bool = False) -> None:
        with self.changed:
            self.died = died and self.ended is None and self.pid is not None and not self.closing
            self.ended = self.ended or reason
            self.ready.set()
            self.changed.notify_all()

    def serving(self, timeout: float = READY_S, stop: Callable[[], str | None] = lambda: None) -> str | None:
        """Wait until it is ready; None, or why it cannot serve. `stop`, asked a few times a second meanwhile, ends
        the wait with its reason (`Stopped`): a launch stopped while the parent imports, as a count's other
        children are when one fails, or when the command is interrupted from a thread an interrupt never reaches."""
        end = time.monotonic() + timeout
        while not self.ready.wait(min(0.25, max(0.0, end - time.monotonic()))):
            if time.monotonic() >= end:
                return f"the warm parent was not ready within {timeout:g} s"
            if (reason := stop()) is not None:
                raise Stopped(reason)
        return self.ended

    def spawn(self, module: str, args: list[str], env: Mapping[str, str], log_dir: Path, gpu: bool = False) -> Forked:
        """Fork a child running `python -m module *args` in `env`, its output into log_dir's stdout.log and
        stderr.log; one that will use a GPU (`gpu`) only from a parent that never initialized the CUDA driver. Raises
        WarmFailed when the parent cannot."""
        reason = self.serving()
        if reason is not None:
            raise WarmFailed(reason)
        with self.changed:
            ident, self.next_id = self.next_id, self.next_id + 1
        logs = {"stdout": str(log_dir / "stdout.log"), "stderr": str(log_dir / "stderr.log")}
        request = {"id": ident, "module": module, "args": list(args), "env": {**env, PARENT_VAR: str(self.pid)},
                   "cwd": os.getcwd(), "gpu": gpu, **logs}  # fmt: skip
        try:
            with self.writing:
                self.proc.stdin.write((json.dumps(request) + "\n").encode())
                self.proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise WarmFailed(f"the warm parent is gone: {exc}") from None
        with self.changed:
            waited(self.changed, lambda: ident in self.answers or self.ended is not None, ANSWER_S)
            answer = self.answers.pop(ident, None)
        if answer is None:
            raise WarmFailed(self.ended or f"the warm parent did not answer within {ANSWER_S:g} s")
        if "error" in answer:
            if "pid" in answer:
                self.exit_code(answer["pid"], 10.0)
            raise WarmFailed(f"the warm parent could not fork: {answer['error']}")
        return Forked(self, answer["pid"])

    def exit_code(self, pid: int, timeout: float | None) -> int | None:
        """The child's exit code once it has ended (killed with the parent: SIGKILL's), or None at the timeout."""
        with self.changed:
            self.changed.wait_for(lambda: pid in self.exits or self.ended is not None, timeout)
            if pid in self.exits:
                return self.exits.pop(pid)
            return -9 if self.ended is not None else None

    def close(self) -> None:
        """End it: its input closed, it kills any child still running and exits; killed if it does not within
        CLOSE_S, or at once while it imports (it has no child yet, and reads its input only once ready: Ctrl-C
        within a second of a run's start waited 10 s for its imports on a busy 2-core machine)."""
        self.closing = True
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                proc.stdin.close()
                proc.wait(timeout=CLOSE_S if self.ready.is_set() else 0)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
        if self.thread.ident is not None:  # started: it had a folder
            self.thread.join(timeout=10)
            shutil.rmtree(self.tmpdir, ignore_errors=True)


def waited(changed: threading.Condition, done: Callable[[], bool], timeout: float) -> bool:
    """`changed.wait_for(done, timeout)` (its lock held), but for the time dlperf spent suspended (Ctrl-Z,
    `lifeline.paused`): the warm parent, stopped with dlperf, answers once both go on, and an answer that came after a
    wait given up would leave its forked child to no one."""
    end, paused_s = time.monotonic() + timeout, lifeline.paused()[1]
    while not done():
        left = end + (lifeline.paused()[1] - paused_s) - time.monotonic()
        if left <= 0:
            return False
        changed.wait(min(left, 0.5))
    return True


_parents: dict[tuple[str, str], WarmParent] = {}
_lock = threading.Lock()
RESTARTS = 2  # how many times, in this process, a warm parent that died is replaced for its interpreter and framework
_restarts: Counter = Counter()


_sharing = [0]  # how many `probes_share` are open: while one is, a predictor's probe starts its framework's parent
_runs_asked: set[tuple[str, str]] = set()  # the parents a run asked for (`prepare`) since the outermost one opened


def parent(python: str, framework: str, probe: bool = False) -> WarmParent | None:
    """The warm parent a cell (or a predictor's `probe`) of `framework` in `python` forks from, or None (it starts
    cold): one a run started (`prepare`), or a probe within `probes_share`, replaced by one in this environment if it
    changed since."""
    with _lock:
        if (python, framework) not in _parents and not (probe and _sharing[0]):
            return None
    return start(python, framework)


@contextmanager
def probes_share() -> Iterator[None]:
    """Within it (a command that asks the predictor: predict, advise, crossover), the first of the predictor's probes
    (`FORKED_PROBES`) starts the warm parent of its framework, and that probe, every later one and the command's cells
    fork from it: a command's probes import the framework once (a cold `predict tiny-fcn-r --cost` started two
    children, each importing PyTorch and torch._dynamo: 5.7-6.2 s of CPU on 2 cores, 3.3-3.6 s forked). A command
    whose answers are all kept starts none. A parent costs what one probe child's import costs: the predictor's count
    imports what the parent preloads. As the outermost one ends, a parent started within it is closed unless a run
    asked for it (`prepare`): called as a library (`cli.main([...])`, `advise.advise`), a parent holding PyTorch
    (300 MB) lived on until the caller's interpreter ended; one there before it stays."""
    with _lock:
        _sharing[0] += 1
        before = list(_parents.values()) if _sharing[0] == 1 else None
        if before is not None:
            _runs_asked.clear()
    try:
        yield
    finally:
        with _lock:
            _sharing[0] -= 1
            new = {} if before is None else {k: p for k, p in _parents.items() if all(p is not b for b in before)}
            ended = {key: each for key, each in new.items() if key not in _runs_asked}
            for key in ended:
                del _parents[key]
        for each in ended.values():
            each.close()


def start(python: str, framework: str) -> WarmParent:
    """The warm parent of `framework` in `python` for this environment, started (not waited for) if there is none.
    One whose environment no longer matches is closed and replaced; one that died after serving (killed: by the
    out-of-memory killer, say) is replaced up to RESTARTS times; one that refused, or could not start, stays, saying
    why, and cells start cold."""
    key = env_key(os.environ)
    with _lock:
        found = _parents.get((python, framework))
        restart = found is not None and found.died and _restarts[(python, framework)] < RESTARTS
        if found is not None and (restart or found.key != key):
            _restarts[(python, framework)] += restart
            found.close()
            found = None
        if found is None:
            found = _parents[(python, framework)] = WarmParent(python, framework, key)
        return found


def prepare(processes: Mapping[Hashable, Cell], memory_limit: int | None, asked: dict[Hashable, str]) -> None:
    """Count a run's processes about to start (`processes`: each one's identity -> its cell, `tasks.processes`) that
    may fork into `asked` (identity -> framework: a process counted again is still one), and start a parent for each
    framework with two or more: a parent costs what one cold start costs, so a run's only such process starts cold.
    Called before the processes start, never while one is timed: as the run begins (its imports then overlap what
    the run does before its first process, such as the predictions' operator count) and between cells."""
    asked.update({ident: cell.framework for ident, cell in processes.items()
                  if why_cell_cold(cell, memory_limit) is None})  # fmt: skip
    for framework, count in Counter(asked.values()).items():
        if count >= 2 and (python := envs.interpreter_for(framework)) is not None:
            _runs_asked.add((python, framework))  # a run's: kept as `probes_share` ends, for the caller's next run
            start(python, framework)


def close_all() -> None:
    with _lock:
        found = list(_parents.values())
        _parents.clear()
    for each in found:
        each.close()


def _at_exit() -> None:
    """`close_all` as the process ends, deaf to Ctrl-C: one that came meanwhile (a command's output all written, its
    parents being closed) was raised in the atexit callback, printed as a traceback ('Exception ignored in atexit
    callback') and a second killed the process; the close is bounded (CLOSE_S) and kills what lingers."""
    with lifeline.interrupts_dropped():
        close_all()


atexit.register(_at_exit)
