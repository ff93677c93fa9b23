"""The node's side of `dlperf run --ray` (`fleet.py`): a Ray actor pinned to a node runs `NodeSweep`, which starts
`python -P -m dlperf run ...` there into a store file of the node's own and reads its run's rows back for the driver.

Also what a node is given to resume (`continuation`): a run of a lost node goes on elsewhere as a run of the node
that measures it, never in the lost node's run; and what a run has left (`unfinished`), which the driver says of a
lost node. Ray is not imported here: the driver makes `NodeSweep` an actor.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

from dlperf import envinfo
from dlperf.errors import UsageError
from dlperf.loaders import DATA_DATASET, DATA_SYNTHETIC
from dlperf.runner import lifeline
from dlperf.runner.distributed import python_module
from dlperf.store import RunRows, Store, new_token, now
from dlperf.store.records import Origin
from dlperf.store.state import CONTINUES, RAY_DRIVER  # a lost node's run's link; the origin of a run a node resumes

STOP_GRACE_S = 30.0  # a node's sweep stopped (SIGTERM: what finished is kept) before it is killed
# Ray hides a node's GPUs from an actor that asked for none; the node's sweep must see its own GPUs.
NODE_ENV = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}
# a cell's columns as planned (`Store._insert_cells`): what a cell pending again keeps of its row
PLANNED = ("key", "position", "workload", "framework", "device", "threads", "mode", "batch", "workload_json", "nproc",
           "scaling", "loader", "parallel", "microbatches")  # fmt: skip


LOCAL_FLAGS = ("--ray", "--nodes", "--db", "--resume")  # the driver's own: a node's sweep gets its own --db


def node_argv(argv: list[str]) -> list[str]:
    """The user's `dlperf` arguments without the driver's own flags (`LOCAL_FLAGS`), a relative path in them the
    driver's folder's (`driver_paths`): what each node runs."""
    kept, skip = [], False
    for token in argv:
        if skip:
            skip = False
            continue
        name, eq, _ = token.partition("=")
        flag = next((f for f in LOCAL_FLAGS if len(name) > 2 and f.startswith(name)), None)
        if flag is None:
            kept.append(token)
            continue
        skip = flag != "--resume" and not eq
    return driver_paths(kept)


def chosen_by(argv: list[str]) -> str:
    """The --nodes the command was given ("" for none, or all)."""
    for i, token in enumerate(argv):
        name, eq, value = token.partition("=")
        if name == "--nodes":
            given = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            return "" if given == "all" else given
    return ""


PATH_FLAGS = ("--workloads", "--data")  # flags whose values may name a file or folder: a model file, a data folder


def driver_paths(argv: list[str], here: str | None = None) -> list[str]:
    """`argv` with a relative model file (`--workloads mine.py:make`) and `--data DIR` made absolute from the folder
    the command was typed in (`here`): a node's sweep runs in its Ray worker's folder, where `mine.py` was the file of
    the folder `ray start` ran in, another model measured under the name with no word said. Each node reads that
    path: the file must be there on every node (a shared file system, or the same clone)."""
    here = here or os.getcwd()
    out, flag = [], None
    for token in argv:
        name, eq, value = token.partition("=")
        if flag is not None:
            out.append(_absolute(flag, token, here))
            flag = None
        elif name in PATH_FLAGS and eq:
            out.append(f"{name}={_absolute(name, value, here)}")
        else:
            out.append(token)
            flag = token if token in PATH_FLAGS else None
    return out


def _absolute(flag: str, value: str, here: str) -> str:
    if flag == "--data":  # its keywords are no folder (`./dataset` is)
        return value if value in (DATA_SYNTHETIC, DATA_DATASET) else _joined(here, value)
    return ",".join(_absolute_source(item.strip(), here) for item in value.split(","))


def _absolute_source(item: str, here: str) -> str:
    """A workload of a file (`path/mine.py:make`) with its path absolute; a built-in or a module's as it is."""
    target, colon, attr = item.rpartition(":")
    if colon and (target.endswith(".py") or "/" in target):
        return f"{_joined(here, target)}:{attr}"
    return item


def _joined(here: str, path: str) -> str:
    return os.path.normpath(os.path.join(here, os.path.expanduser(path)))


NODE_DIR = "dlperf-ray-node-"  # a node's sweep's folder in the node's temporary directory, locked while in use


class NodeSweep:
    """One node's sweep: `dlperf run` into a store file of the node's own, its run's rows read back when they change.
    Its folder is locked while the actor lives; one left by an actor that was killed, or whose node's sweep died, is
    removed by the next actor on the node (`remove_stale`)."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix=NODE_DIR)
        locking = os.path.join(self.dir, "lock.new")  # a name remove_stale never opens: locked before it is "lock"
        self.lock = os.open(locking, os.O_WRONLY | os.O_CREAT, 0o600)  # held for its life
        fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(locking, os.path.join(self.dir, "lock"))
        remove_stale(os.path.dirname(self.dir))
        self.db = os.path.join(self.dir, "node.db")
        self.proc: subprocess.Popen | None = None
        self.sent: str | None = None
        self.read = 0  # bytes of the sweep's stderr read by `_said`

    def environment(self, frameworks: list[str]) -> dict:
        """This node's environment, as `dlperf run` would capture it."""
        from dlperf.plan import framework_info

        return envinfo.capture(framework_info(frameworks))

    def kind(self, frameworks: list[str]) -> dict:
        """This node's fingerprint, as `dlperf run --resume` would capture it, and the dlperf it runs (`DLPERF`), which
        `--resume --ray` compares with a run's (`other_dlperf`)."""
        env = self.environment(frameworks)
        return {**envinfo.fingerprint(env), **{key: env[key] for key in DLPERF if key in env}}

    def start(self, argv: list[str], rows: RunRows | None = None) -> None:
        """`dlperf ARGV` here; `rows`: a run of the driver's store resumed here (this node's own, or what a lost
        node's run left: `continuation`)."""
        if rows is not None:
            self._take_over(rows)
            argv = ["run", "--resume"]
        env = node_environ()
        with open(os.path.join(self.dir, "out"), "wb") as out, open(os.path.join(self.dir, "err"), "wb") as err:
            self.proc = subprocess.Popen([*python_module(sys.executable, "dlperf"), *argv, "--db", self.db], stdout=out,
                                         stderr=err, env=env, preexec_fn=lifeline.before_exec())  # fmt: skip

    def _take_over(self, rows: RunRows) -> None:
        """The run written here, so `--resume` takes it up, with this node's environment and fingerprint (a node of
        the same kind, `same_kind`, passes the resume's check) and its finished processes kept."""
        spec = json.loads(rows.run["spec_json"])
        env = self.environment(spec.get("frameworks") or ["torch"])
        mine = {**json.loads(rows.run["env_json"]), **env}  # what the session added (made_by, sources) kept
        run = {**rows.run, "status": "interrupted", "env_json": json.dumps(mine),
               "fingerprint_json": json.dumps(envinfo.fingerprint(env))}  # fmt: skip
        store = Store.open(self.db, create=True)
        try:
            with store.transaction():
                store.insert_copy(run, rows.cells, rows.measurements, Origin(RAY_DRIVER, rows.run["id"], now()),
                                  rows.profiles, rows.predictions)  # fmt: skip
        finally:
            store.close()

    def poll(self) -> dict:
        """{"rows": the run's rows if they changed since the last poll, else None; "exit": the sweep's exit code once
        it ended; "error": its last line on stderr}."""
        code = self.proc.poll() if self.proc else None
        rows = self._rows()
        if rows is not None:
            signature = repr((rows.run.get("status"), rows.cells, rows.measurements, rows.profiles))
            rows, self.sent = (rows, signature) if signature != self.sent else (None, self.sent)
        return {"rows": rows, "exit": code, "error": self._last_error() if code else None, "said": self._said()}

    def _said(self) -> list[str]:
        """The warnings the sweep printed since the last poll (its progress lines stay here)."""
        with open(os.path.join(self.dir, "err"), "rb") as f:
            f.seek(self.read)
            text = f.read()
        complete = text[: text.rfind(b"\n") + 1]
        self.read += len(complete)
        lines = complete.decode(errors="replace").splitlines()
        return [x.removeprefix("dlperf: warning: ") for x in lines if x.startswith("dlperf: warning: ")]

    def _rows(self) -> RunRows | None:
        if not os.path.exists(self.db):
            return None
        try:
            store = Store.open(self.db, create=False)
        except UsageError:
            return None  # not created yet
        try:
            runs = store.rows("runs")
            return store.check_run(runs[-1]["id"]) if runs else None
        except UsageError:
            return None  # mid-write: the next poll reads it
        finally:
            store.close()

    def _last_error(self) -> str:
        with open(os.path.join(self.dir, "err"), "rb") as f:
            lines = [x for x in f.read().decode(errors="replace").splitlines() if x.strip()]
        return lines[-1] if lines else ""

    def stop(self) -> None:
        """Interrupt the sweep as Ctrl-C would (what finished is kept), then kill it if it lingers."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        os.close(self.lock)


def remove_stale(root: str) -> list[str]:
    """The folders of node sweeps under `root` that no actor uses removed; returns their paths. A folder of this
    dlperf's whose lock no one holds (its actor is gone: the kernel released it); one without its lock file yet (an
    actor starting) or held (in use) is left. A folder an older dlperf left, which has no lock, is removed only where
    `left_by_older` says."""
    removed = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if name.startswith(NODE_DIR) and _removed_unlocked(path):
            removed.append(path)
        elif OLDER_DIR.fullmatch(name) and left_by_older(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _removed_unlocked(path: str) -> bool:
    """The folder removed if its lock file is there and no one holds it, while this process holds it."""
    try:
        with open(os.path.join(path, "lock"), "rb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(path, ignore_errors=True)
            return True
    except OSError:  # no lock file (starting, or not a node's), another user's, or held: in use
        return False


# A node's sweep's folder as dlperf named it before its folders were locked (tempfile.mkdtemp(prefix="dlperf-ray-")),
# and the files its actor and sweep wrote in it. `run --ray`'s driver names its own folder alike: it holds other files
# (raylet.pid, a local cluster's Ray session) or none.
OLDER_DIR = re.compile(r"dlperf-ray-[a-z0-9_]{8}")
OLDER_FILES = frozenset({"node.db", "node.db-journal", "node.db-wal", "node.db-shm", "out", "err"})
OLDER_IDLE_S = 24 * 3600.0  # unchanged for a day: no sweep writes in it, no driver has its last rows still to read


def left_by_older(path: str, idle_s: float = OLDER_IDLE_S) -> bool:
    """An older dlperf's node folder that no one uses: this user's, with a node sweep's files only (none: a
    driver's, or an actor's that never started), nothing in it changed for `idle_s`, and no process holding a file
    in it open, working in it or naming it in its command line. A running sweep holds its out and err files for its
    life and names its store file; an older actor alive after its sweep ended holds nothing there, but its driver read
    the sweep's last rows within a second of its end, and the actor's own close ignores a folder already gone."""
    try:
        info, names = os.lstat(path), set(os.listdir(path))
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or not names or not names <= OLDER_FILES:
            return False
        changed = max([info.st_mtime] + [os.lstat(os.path.join(path, name)).st_mtime for name in names])
    except OSError:  # gone meanwhile, or not readable: not ours to remove
        return False
    return time.time() - changed > idle_s and not in_use(path)


def in_use(path: str) -> bool:
    """A process this user can see holds a file under `path` open, works in it, or names it in its command line."""
    inside, mark = path.rstrip("/") + "/", path.rstrip("/").encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read()
            if mark + b"/" in argv or mark + b"\0" in argv:  # `--db DIR/node.db`, `--db=DIR/node.db`, DIR
                return True
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # ended meanwhile, or another user's
            continue
        for link in [f"/proc/{pid}/cwd", *(f"/proc/{pid}/fd/{fd}" for fd in fds)]:
            try:
                target = os.readlink(link)
            except OSError:  # closed meanwhile (listing the folder opened one)
                continue
            if target == inside[:-1] or target.startswith(inside):
                return True
    return False


def node_environ() -> dict[str, str]:
    """The environment of the node's sweep: the actor's, less what Ray set in it. Ray sets OMP_NUM_THREADS=1 in an
    actor that did not find it set (a thread variable dlperf would see as the user's); the raylet's own environment,
    the node's as `ray start` had it, says whether it was."""
    env = {k: v for k, v in os.environ.items() if k not in NODE_ENV}
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as f:
            raylet = {line.partition(b"=")[0].decode(errors="replace") for line in f.read().split(b"\0")}
    except OSError:
        return env
    if "OMP_NUM_THREADS" not in raylet:
        env.pop("OMP_NUM_THREADS", None)
    return env


DLPERF = ("dlperf_version", "dlperf_code")  # a node's dlperf, beside its fingerprint in its `kind`


def other_dlperf(run_env: dict, kind: dict) -> list[str]:
    """How the dlperf a node runs (its `kind`) differs from the one that measured a run, in words, as `--resume`
    says it (`envinfo.dlperf_diff`); [] where it is the same. A node whose dlperf does not say its timing code (one
    older than this) differs from a run that recorded one: the local `--resume` always has its own to compare."""
    was = run_env.get("dlperf_code")
    if isinstance(was, dict) and not isinstance(kind.get("dlperf_code"), dict):
        return [f"dlperf's timing code {str(was.get('digest'))[:12]} -> one the node's older dlperf does not say"]
    return envinfo.dlperf_diff(run_env, kind)


def continuation(rows: RunRows) -> RunRows:
    """What a lost node's run left, as another node measures it: a run of its own (the same spec and campaign, a
    token of its own), its cells those the lost node did not finish, each pending again (a cell's processes all come
    from one machine, so a cell the lost node began is measured whole), none of the lost node's processes, and linked
    to the lost run by `CONTINUES`. The node that takes it up writes its own environment and fingerprint into it
    (`_take_over`)."""
    spec, env = json.loads(rows.run["spec_json"]), json.loads(rows.run["env_json"])
    repeats = int(spec.get("repeats") or 1)
    done: dict[str, int] = {}
    for m in rows.measurements:
        done[m["cell_key"]] = done.get(m["cell_key"], 0) + 1
    left = [c for c in rows.cells if c["status"] == "pending" or done.get(c["key"], 0) < repeats]
    keys = {c["key"] for c in left}
    env_json = json.dumps({**env, CONTINUES: rows.run["id"]})
    run = {**rows.run, "started_at": now(), "finished_at": None, "env_json": env_json, "token": new_token()}
    cells = [{**{k: c[k] for k in PLANNED if k in c}, "status": "pending"} for c in left]
    return RunRows(run, cells, [], [], [p for p in rows.predictions if p.get("cell_key") in keys])


def unfinished(store: Store, run_id: int) -> list[str]:
    """Each of a run's cells with processes left to measure, and how many of its own it has: "tiny-fcn-r torch cpu:1
    fp32 (1 of 4 processes)", "tiny-alexnet-r torch cpu:1 fp32 (not begun)"."""
    from dlperf.report.format import terminal

    repeats = int(store.run(run_id).spec.get("repeats") or 1)
    done = store.done_repeats(run_id)
    found = []
    for c in store.cells(run_id):
        have = sum((c.key, r) in done for r in range(repeats))
        if have < repeats:
            found.append(f"{terminal(c.cell.label)} ({f'{have} of {repeats} processes' if have else 'not begun'})")
    return found
