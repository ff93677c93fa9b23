"""The warm parent (issue 34): a process that imports a framework once and forks each cell's child from that state
(and each of the predictor's probe children: `runner/warm.py`'s `FORKED_PROBES`).

    python -P -m dlperf.worker.zygote FRAMEWORK     (started by `runner/warm.py`, never by hand)

It imports the framework's backend and what its first step would import (`preload`), touches no device and runs no
operator, so it holds one thread and no thread pool, and says so on its control pipe (`ready`), or why it cannot
serve (`refused`: another thread exists, and a fork would copy a process whose other threads may hold locks). Then it
reads requests, one JSON line each on standard input, and answers on standard output:

    {"id": N, "module": "dlperf.worker.cell", "args": [TASK, EVENTS], "env": {...}, "cwd": DIR,
     "stdout": PATH, "stderr": PATH}   ->  {"id": N, "pid": PID}  or  {"id": N, "error": "..."}
    a child that ended                 ->  {"exit": PID, "code": C}   (C negative: killed by signal -C, as Popen's)

Each child is a fresh process of its own from its first instruction after the fork: its own session (so the
launcher stops its whole tree with one killpg), killed with this process (PR_SET_PDEATHSIG), its standard streams
the cell's log files, the cell's working directory, and exactly the environment a cold child would have been given
(set before anything reads it); then it runs the worker module's `main` as `python -P -m` would (sys.path as this
process's, started so: no working directory first, `workloads/user.py` puts it last) and ends with
`exit_now`. It sets its own thread counts and affinity as a cold child does (`worker/cell.py`), after the fork.
The fork answers only once the child has its session, so the launcher can never signal a group that does not exist
yet. End of input (dlperf closed the pipe, or died) kills every child still running, and this process ends.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable

from dlperf.frameworks import backend
from dlperf.measure.system import prctl
from dlperf.worker.child import exit_now
from dlperf.worker.lifeline import die_with_parent

PR_SET_PDEATHSIG, PR_SET_NAME = 1, 15
WORKERS = ("dlperf.worker.cell", "dlperf.worker.profile", "dlperf.worker.probe")  # what a child may run, imported once


def threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


class Zygote:
    def __init__(self, control_in: int, control_out: int) -> None:
        self.control_in, self.control_out = control_in, control_out
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.children: set[int] = set()
        self.buffer = b""
        self.after_fork: Callable[[], None] = lambda: None

    def say(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.control_out, data) :]

    def serve(self) -> None:
        """Fork for each request until the control pipe closes; report each child's end as it is reaped."""
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        try:
            while True:
                try:
                    ready, _, _ = select.select([self.control_in, self.wake_r], [], [])
                except InterruptedError:
                    continue
                if self.wake_r in ready:
                    os.read(self.wake_r, 4096)
                    self.reap()
                if self.control_in in ready and not self.read_requests():
                    return
        finally:
            self.stop_children()

    def read_requests(self) -> bool:
        chunk = os.read(self.control_in, 1 << 16)
        if not chunk:
            return False
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if line.strip():
                self.fork(json.loads(line))
        return True

    def fork(self, request: dict) -> None:
        """One child for `request`; answered with its pid once it has its own session, or with why not. A child that
        will use a GPU (`gpu`) is forked only while no CUDA call has initialized the driver in this process."""
        if request.get("gpu") and (why := cuda_in_use()) is not None:
            self.say({"id": request["id"], "error": f"the warm parent {why}"})
            return
        ready_r, ready_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(ready_r)
            os.close(ready_w)
            self.say({"id": request["id"], "error": f"fork failed: {exc}"})
            return
        if pid == 0:
            os.close(ready_r)
            self.become_child(request, ready_w)  # never returns
        os.close(ready_w)
        said = b""
        while chunk := os.read(ready_r, 4096):  # the child closes its end once set up (or writes why it could not)
            said += chunk
        os.close(ready_r)
        self.children.add(pid)
        if said:
            self.say({"id": request["id"], "pid": pid, "error": said.decode(errors="replace")})
        else:
            self.say({"id": request["id"], "pid": pid})

    def become_child(self, request: dict, ready_w: int) -> None:
        """The forked child: set up as a cold child would be, tell the zygote, run the worker, end."""
        zygote = os.getppid()
        try:
            os.setsid()
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            name(request["module"].rsplit(".", 1)[-1])
            if os.getppid() != zygote:
                os._exit(1)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (self.control_in, self.control_out, self.wake_r, self.wake_w):
                os.close(fd)
            redirect(request)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            reseed()
            self.after_fork()  # the backend's own (`after_fork`): pools its import sized for the parent
            os.close(ready_w)
        except BaseException as exc:
            os.write(ready_w, f"{type(exc).__name__}: {exc}".encode())
            os._exit(1)
        code = 1
        try:
            module = importlib.import_module(request["module"])
            sys.argv = [module.__file__ or request["module"], *request["args"]]
            code = module.main(sys.argv)
        except SystemExit as exc:  # a user's file ending its process (`raise SystemExit(3)`): as a cold child ends
            code = exit_code(exc)
        except BaseException:
            traceback.print_exc()
        exit_now(code if isinstance(code, int) else 1)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            self.say({"exit": pid, "code": os.waitstatus_to_exitcode(status)})

    def stop_children(self) -> None:
        """dlperf is gone or done: no child outlives this process."""
        for pid in list(self.children):
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        deadline = time.monotonic() + 10
        while self.children and time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            self.children.discard(pid)


def name(what: str) -> None:
    """The process's name as `ps` and `top` show it (its command line stays the warm parent's): dlperf-cell."""
    prctl(PR_SET_NAME, ctypes.c_char_p(f"dlperf-{what}"[:15].encode()))


def redirect(request: dict) -> None:
    """Standard input from /dev/null, standard output and error into the cell's log files."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(opened, fd)
        os.close(opened)


def reseed() -> None:
    """What a fresh interpreter seeds from the system's entropy, seeded again (Python's `random` reseeds itself at a
    fork): numpy's global generator, when numpy is loaded."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


CUDA_ERROR_NOT_INITIALIZED = 3


def cuda_driver(maps: str = "/proc/self/maps") -> str | None:
    """The path of the CUDA driver library this process has mapped (libcuda.so...), or None; OSError where the map
    cannot be read. Some CUDA builds of a framework map it at import (PyTorch 2.11+cu130 does), before any CUDA
    call."""
    with open(maps) as f:
        for line in f:
            fields = line.split(None, 5)  # address, perms, offset, device, inode, and the path, if any
            path = fields[5].strip() if len(fields) == 6 else ""
            if os.path.basename(path).startswith("libcuda.so"):
                return path
    return None


def cuda_in_use(maps: str = "/proc/self/maps", open_library: Callable[[str], object] | None = None) -> str | None:
    """Why a child forked now could not use CUDA as a fresh process does (the driver has been initialized here), or
    None: the driver is not mapped, or it is and says it was never initialized. The driver is asked with
    cuCtxGetCurrent, which initializes nothing: before cuInit it answers CUDA_ERROR_NOT_INITIALIZED; any other
    answer, or none, counts as initialized."""
    try:
        path = cuda_driver(maps)
    except OSError as exc:
        return f"could not read whether it loaded the CUDA driver ({maps}: {exc.strerror or exc})"
    if path is None:
        return None
    name = os.path.basename(path)
    try:
        library = (open_library or _already_loaded)(path)
        context = ctypes.c_void_p()
        code = library.cuCtxGetCurrent(ctypes.byref(context))
    except (OSError, AttributeError) as exc:
        return f"has loaded the CUDA driver ({name}) and could not ask it whether it was initialized: {exc}"
    if code == CUDA_ERROR_NOT_INITIALIZED:
        return None
    return f"has initialized the CUDA driver ({name}: cuCtxGetCurrent answered {code})"


def _already_loaded(path: str) -> object:
    """The library at `path`, which this process has mapped already: opened without loading anything."""
    return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)


def preload(framework: str) -> Callable[[], None]:
    """The backend, the worker modules, and what the backend's first step imports (`preload` of the backend); what a
    forked child runs first (`after_fork` of the backend, or nothing)."""
    fw = backend(framework)
    for name in WORKERS:
        importlib.import_module(name)
    getattr(fw, "preload", lambda: None)()
    return getattr(fw, "after_fork", lambda: None)


def exit_code(exc: SystemExit) -> int:
    """The exit code the interpreter ends a process with on `exc`: its code, 0 for None, else 1 with the object printed
    on stderr. A forked child ended so as a cold one does: `raise SystemExit(3)` in a factory's file was "worker
    exited with code 1: SystemExit: 3" from a warm child (advise's probe), "code 3" from a cold one (run's)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def main(argv: list[str]) -> None:
    die_with_parent()
    control_in, control_out = os.dup(0), os.dup(1)  # the pipes; 0 and 1 become /dev/null and stderr for the rest
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    name("warm")
    zygote = Zygote(control_in, control_out)
    start = time.perf_counter()
    try:
        zygote.after_fork = preload(argv[1])
    except BaseException as exc:
        zygote.say({"refused": f"importing the {argv[1]} backend failed: {type(exc).__name__}: {exc}"})
        os._exit(1)
    if (n := threads()) > 1:
        zygote.say({"refused": f"{n} threads after importing the {argv[1]} backend: a fork copies only one"})
        os._exit(1)
    zygote.say({"ready": os.getpid(), "preload_s": round(time.perf_counter() - start, 3), "modules": len(sys.modules)})
    zygote.serve()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
