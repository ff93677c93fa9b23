"""What a person sees of Ray during `dlperf run --ray` (`fleet.py`): Ray's own messages in a log beside the store
(`RayLog`), and a driver Ray ended said in dlperf's words (`watched`).

Ray ends the driver's process itself (from C++, no Python exception, no message on the terminal) when the node it is
attached to loses its raylet or object store: the sweep's driver therefore runs in a child of dlperf, which says what
happened and leaves its runs interrupted. Ray is not imported here.
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from dlperf.measure.system import oom_kills, prctl
from dlperf.measure.units import agreeing, named
from dlperf.runner.lifeline import INTERRUPTS, PR_SET_PDEATHSIG
from dlperf.store import Store
from dlperf.store.location import ray_resume_command
from dlperf.store.state import RAY_ORIGIN, run_states

RAY_LOGGERS = ("ray", "ray.util.client.logsclient")  # the loggers whose records Ray does not pass up


class _ToLog(logging.Handler):
    """A Ray logger's warnings and errors, tracebacks included, as lines of a `RayLog`."""

    def __init__(self, log: RayLog) -> None:
        super().__init__(logging.WARNING)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # a message whose arguments do not format: its template
            text = str(record.msg)
        self.log.write(f"Ray ({record.name})", text.splitlines())


class RayLog:
    """Ray's own messages during a sweep, in a file beside the store (DB.ray.log) instead of on the terminal: the
    cluster's errors Ray's driver prints whatever `log_to_driver` says (a raylet's end with the last 20 lines of its
    log, published by the node's agent to every driver; a node marked dead), and Ray's own text for a lost node."""

    def __init__(self, db: str) -> None:
        self.path, self.lines, self.lock = f"{db}.ray.log", 0, threading.Lock()

    def write(self, what: str, lines: list[str]) -> None:
        with self.lock:
            try:
                with open(self.path, "a", encoding="utf-8") as f:
                    if not self.lines:
                        f.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(['dlperf', *sys.argv[1:]])}\n")
                    f.write(f"{time.strftime('%H:%M:%S')} {what}:\n" + "".join(f"    {x}\n" for x in lines))
            except OSError:
                return  # a log that cannot be written: Ray's messages are dropped, not printed
            self.lines += 1 + len(lines)

    def divert(self, ray) -> Callable[[], None]:
        """Ray's messages pointed at this log until the returned function undoes it: the cluster's errors, which
        Ray's driver prints from a thread of its own (`_divert_printer`), and Ray's Python logging (`_divert_logging`),
        where Ray Client's own errors (its connection lost: "Unrecoverable error in data channel") and the warnings of
        its server's driver on the head, streamed to the client, are written."""
        undo = [self._divert_printer(), self._divert_logging()]
        return lambda: [step() for step in reversed(undo)]

    def _divert_printer(self) -> Callable[[], None]:
        """Ray's driver prints the cluster's errors through `print_to_stdstream`, which it looks up as it prints. A
        Ray without it (another version) is left as it is."""
        worker = sys.modules.get("ray._private.worker")
        printer = getattr(worker, "print_to_stdstream", None)
        if printer is None:
            return lambda: None

        def to_log(data: dict, ignore_prefix: bool = False) -> None:
            if data.get("lines"):
                self.write(f"Ray ({data.get('pid') or 'driver'})", [str(x) for x in data["lines"]])

        worker.print_to_stdstream = to_log
        return lambda: setattr(worker, "print_to_stdstream", printer)

    def _divert_logging(self) -> Callable[[], None]:
        """The handlers of Ray's loggers (`RAY_LOGGERS`: its root logger, and Ray Client's log stream, which does not
        pass its records up) replaced by one writing here, warnings and errors only (the stream relays the head's
        INFO too)."""
        handler = _ToLog(self)
        before = {}
        for name in RAY_LOGGERS:
            logger = logging.getLogger(name)
            before[name] = logger.handlers[:]
            logger.handlers[:] = [handler]

        def undo() -> None:
            for name, handlers in before.items():
                logging.getLogger(name).handlers[:] = handlers

        return undo

    def say(self) -> None:
        if self.lines:
            print(f"dlperf: Ray's own messages of this sweep are in {self.path}", file=sys.stderr)


def watched(driver: Callable[[], Any], db: str, address: str, campaign: str | None = None,
            raylet: str | None = None) -> Any:  # fmt: skip
    """`driver()` in a child process, its result (or exception) returned (raised) here; a child that ended before it
    answered is said in one line, with what ended it as far as it is known (`_cause`: the file `raylet` holds the pid
    of the raylet the driver attached to, `note_raylet`), the runs it left measuring marked interrupted, and ends as
    exit code 1 with them and the sweep's other unfinished runs (those of its `campaign`)."""
    ooms = oom_kills()
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)  # until each side handles them as it should
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:  # no process to be had: dlperf's interrupts as they were, its pipe closed
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.close(read)
        os.close(write)
        raise
    if pid == 0:  # the driver
        os.close(read)
        _interrupted_when_orphaned(parent)
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # a background job's: the parent passes interrupts on
            terminate = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGINT, terminate if callable(terminate) else signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        _answer(driver, write)
    os.close(write)
    with _forwarding(pid):
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        answer = _read_all(read)
        _, status = os.waitpid(pid, 0)
    if answer:
        kind, value = pickle.loads(answer)
        if kind == "raise":
            raise value
        return value
    cause = _cause(os.waitstatus_to_exitcode(status), time.strftime("%H:%M:%S"), ooms, raylet)
    return 1, _ended(db, address, cause, campaign)


def _interrupted_when_orphaned(parent: int) -> None:
    """The driver's side: dlperf killed (SIGKILL too, where nothing can pass an interrupt on) reaches the driver as
    Ctrl-C's SIGINT (PR_SET_PDEATHSIG), which stops the sweep's nodes and leaves its runs interrupted, where it would
    have gone on measuring with no one to read it; delivered at once where dlperf ended before this was armed."""
    if prctl(PR_SET_PDEATHSIG, signal.SIGINT) and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGINT)  # pending while blocked: taken once the driver's handlers are in place


def note_raylet(ray, path: str) -> None:
    """The driver's side: the pid of the raylet it is attached to (this machine's node), written to `path`, which the
    parent reads if the driver ends without an answer; nothing over Ray Client, where no raylet is this machine's."""
    try:
        socket = ray._private.worker.global_worker.node.raylet_socket_name
    except Exception:  # Ray Client, or another Ray: not known
        return
    flag = f"--raylet_socket_name={socket}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found = flag in f.read().split(b"\0")
        except OSError:
            continue
        if found:
            with open(path, "w") as f:
                f.write(pid)
            return


def _cause(code: int, at: str, ooms: int | None, raylet: str | None) -> tuple[str, str]:
    """What ended the driver (its exit code, or -signal) `at` a time, as far as it is known, and when `--resume --ray`
    goes on:
    killed, by the kernel's out-of-memory killer where its counter moved; Ray's own exit, where the raylet it was
    attached to has ended (Ray ends a driver whose node lost its raylet or object store)."""
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        now = oom_kills()
        if -code == signal.SIGKILL and ooms is not None and now is not None and now > ooms:
            return f"the kernel's out-of-memory killer ended this sweep's driver ({name}) at {at}", "goes on"
        moved = "; the kernel's out-of-memory count did not move" if ooms is not None and now == ooms else ""
        return f"this sweep's driver was killed by {name} at {at}{moved}", "goes on"
    pid = _read_pid(raylet)
    if pid is None:
        return f"this sweep's driver ended (exit {code}) at {at} without an answer", "goes on"
    if _running(pid):
        return (f"this sweep's driver ended (exit {code}) at {at} without an answer; the raylet it was attached to "
                f"(pid {pid}) still runs", "goes on")  # fmt: skip
    return (f"Ray ended this sweep's driver (exit {code}) at {at}: the raylet of the Ray node this machine is "
            f"attached to (pid {pid}) has ended", "goes on once this machine is a node again (ray start), or from "
            "outside over ray://")  # fmt: skip


def elsewhere(lost, address: str, head) -> list[str]:
    """Where Ray's own account of a lost node (`fleet.NodeInfo`) is kept, on machines other than this one, each said
    as a path there: the node's raylet log, on the node; over Ray Client (`ray://`) the sweep's driver is a server of
    this client's on the head (`head`), and what Ray told it of the node (the raylet's end, with its log's last lines)
    stays in that server's log on the head, where it never reaches this machine."""
    found = []
    if lost.raylet_log:
        found.append(f"its raylet's log, on that node: {lost.raylet_log}")
    if address.startswith("ray://") and head is not None and (path := head.log_file("ray_client_server_*.out")):
        found.append(f"what Ray told this sweep's driver of it (a raylet's end, with its log's last lines) stays on "
                     f"the head node, {head.where()}: {path} (the file of this client's server)")  # fmt: skip
    return found


def ended_raylet(path: str | None) -> int | None:
    """The pid of the raylet the driver attached to (`note_raylet` wrote it to `path`) where it has ended; None while
    it runs, or where it is not known (Ray Client)."""
    pid = _read_pid(path)
    return pid if pid is not None and not _running(pid) else None


def cut_off(store: Store, nodes: list, address: str, exc: ConnectionError, log: RayLog | None) -> int:
    """Ray Client's connection to the cluster lost (its server on the head ended, or the network to the head went
    down; Ray tries it again for 30 s first): every node's (`fleet.Node`) sweep ends with it (its actor belonged to
    that server), its run left interrupted, said in one line; Ray's own words go to `log`. Exit code 1."""
    at = time.strftime("%H:%M:%S")
    if log is not None:
        log.write(f"the connection to {address}, lost at {at}: Ray said", str(exc).splitlines())
    for node in nodes:
        if node.run_id is not None and store.run(node.run_id).status == "running":
            store.set_run_status(node.run_id, "interrupted")
    runs = [n.run_id for n in nodes if n.run_id is not None and store.run(n.run_id).status != "complete"]
    kept = f"{named('run', runs)} {agreeing(len(runs), 'keeps', 'keep')} what the nodes sent" if runs else (
        "nothing unfinished is stored")  # fmt: skip
    print(f"dlperf: the connection to the cluster at {address} was lost at {at} (Ray Client's server on the head "
          f"ended, or the network to it went down): the nodes' sweeps ended with it; {kept}. "
          f"`{ray_resume_command(address, store.path)}` goes on once the cluster answers", file=sys.stderr)  # fmt: skip
    return 1


def say_own_node_ended(store: Store, lost: list, address: str, pid: int) -> None:
    """The raylet of this machine's node (`pid`) ended while the driver lived on (Ray does not always end the driver
    itself, `watched`), the `lost` nodes (`fleet.Node`) with it: Ray takes the driver for dead with its node and ends
    every actor it owns, so the nodes' sweeps stopped, a node that is alive among them; one line, not a node said gone
    down that is not."""
    runs = [n.run_id for n in lost if n.run_id is not None]
    kept = "nothing of them is stored"
    if runs:
        kept = f"{named('run', runs)} {agreeing(len(runs), 'keeps what it', 'keep what they')} stored"
    nodes, resume = ", ".join(n.info.where() for n in lost), ray_resume_command(address, store.path)
    print(f"dlperf: the raylet of the Ray node this machine is attached to (pid {pid}) has ended, and Ray stopped "
          f"this sweep's actors with it, on {nodes}, alive or not; {kept}. `{resume}` goes on once this machine is a "
          "node again (ray start), or from outside over ray://", file=sys.stderr)  # fmt: skip


def _read_pid(path: str | None) -> int | None:
    try:
        with open(path or "", encoding="utf-8") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _answer(driver: Callable[[], Any], write: int) -> None:
    """The child's side: the driver's result, or its exception, pickled to the parent; then gone without running
    the parent's exit handlers."""
    code = 0
    try:
        result = ("return", driver())
    except BaseException as exc:
        result = ("raise", exc)
    try:
        data = pickle.dumps(result)
        pickle.loads(data)  # an exception whose constructor takes other arguments would not load in the parent
    except Exception:  # its text, then
        data = pickle.dumps(("raise", RuntimeError(str(result[1]))))
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(write, data)  # a pipe takes it whole or blocks until the parent reads
    except OSError:
        code = 1
    os._exit(code)


READ_TURN_S = 0.2  # the longest an interrupt that came just before a read waits to be passed on to the driver


def _read_all(fd: int) -> bytes:
    """The driver's answer, read to its end in turns of at most READ_TURN_S: a signal's Python handler (`_forwarding`,
    which passes it on to the driver) runs between bytecodes, so one that came after the last check and before a
    blocking read waited for that read to return, and the driver, never told, never answered: dlperf hung (the fleet
    watch test, 1 in about 60 under load). Each turn of the loop runs what is pending."""
    chunks = []
    while True:
        if not select.select([fd], [], [], READ_TURN_S)[0]:
            continue
        if not (chunk := os.read(fd, 65536)):
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


class _forwarding:
    """While the driver runs, each interrupt dlperf is sent (Ctrl-C, SIGTERM, SIGHUP; to its own pid, as a script or
    a job scheduler sends it, or to its process group) is passed on to the driver as Ctrl-C's SIGINT, which it takes
    as an interrupt wherever it is (Ray's driver takes SIGTERM as sys.exit). A Ctrl-C from the terminal reaches the
    driver twice, and it drops the second (`lifeline.sigterm_as_interrupt`, the CLI's, is in force there too). A
    signal dlperf was started ignoring (nohup's SIGHUP) stays ignored."""

    def __init__(self, pid: int) -> None:
        self.pid, self.before = pid, {}

    def __enter__(self):
        for sig in INTERRUPTS:
            self.before[sig] = signal.getsignal(sig)
            if self.before[sig] is not signal.SIG_IGN:
                signal.signal(sig, self._pass_on)
        return self

    def _pass_on(self, signum: int, frame) -> None:
        try:
            os.kill(self.pid, signal.SIGINT)
        except ProcessLookupError:  # it has ended: its answer, or its end, is read next
            pass

    def __exit__(self, *exc) -> None:
        for sig, handler in self.before.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python


def _ended(db: str, address: str, cause: tuple[str, str], campaign: str | None) -> list[int]:
    """The driver gone without an answer (`cause`: what ended it, and when the resume goes on): its runs (a Ray
    node's, left running by a process now gone) interrupted, and said with the sweep's others left unfinished."""
    store = Store.open(db, create=False) if os.path.exists(db) else None
    left = []
    try:
        for state in run_states(store).values() if store else []:
            run = state.run
            if not (run.origin and str(run.origin.db).startswith(RAY_ORIGIN)) or not state.unfinished:
                continue
            if state.state == "stopped":
                store.acquire(run.id)
                store.set_run_status(run.id, "interrupted")
            if state.state == "stopped" or (campaign is not None and run.spec.get("campaign") == campaign):
                left.append(run.id)
    finally:
        if store:
            store.close()
    kept = "nothing of it is stored"
    if left:
        kept = f"{named('run', left)} {agreeing(len(left), 'keeps what it', 'keep what they')} stored"
    log = f" (Ray's own messages: {db}.ray.log)" if os.path.exists(f"{db}.ray.log") else ""
    what, goes_on = cause
    print(f"dlperf: {what}{log}; {kept}. `{ray_resume_command(address, db)}` "
          f"{goes_on}", file=sys.stderr)  # fmt: skip
    return left
