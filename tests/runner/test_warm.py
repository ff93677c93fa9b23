"""Warm parents (issue 34): which cells fork and why the others start cold; a forked child equal to a cold one in
its thread settings, affinity and environment; its crash, hang or kill failing only its own cell; nothing outliving
dlperf."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import ClassVar

import pytest

from conftest import FAST, FAULTY_MODELS, ROOT, alive, dlperf, gone, make_cell, require
from dlperf.answers import EnvRequest, MemoryRequest, OpsRequest, ThreadsRequest, WorkloadRequest
from dlperf.errors import RunInterrupted
from dlperf.measure.system import oom_kills
from dlperf.measure.timer import TimerConfig
from dlperf.protocol import (
    LAUNCH_VAR,
    PARENT_VAR,
    Affinity,
    Built,
    CellTask,
    CommTask,
    PeakTask,
    ProbeTask,
    ProfileTask,
    Sampled,
    first,
)
from dlperf.runner import launch as launching
from dlperf.runner import warm
from dlperf.runner.tasks import Task, processes
from dlperf.workloads import BUILTIN


@pytest.fixture(autouse=True)
def warm_allowed(monkeypatch):
    """These tests fork: a suite run with DLPERF_NO_WARM=1 (to time it cold) must not turn them off."""
    monkeypatch.delenv("DLPERF_NO_WARM", raising=False)


GPU_COLD = "DLPERF_WARM_GPU=0 is set: GPU cells start cold"


def task(**fields) -> CellTask:
    cell = make_cell(**{k: v for k, v in fields.items() if k in ("workload", "framework", "device", "threads", "mode")})
    rest = {k: v for k, v in fields.items() if k in ("memory_limit", "pin_cpus")}
    return CellTask(cell, 0, {}, TimerConfig(), **rest)


@pytest.mark.parametrize(
    "fields, env, why",
    [
        ({}, {}, None),
        ({"threads": 2, "mode": "bf16+channels_last"}, {}, None),
        ({"framework": "jax"}, {}, "the jax backend starts every cell cold"),
        ({"framework": "tensorflow"}, {}, "the tensorflow backend starts every cell cold"),
        ({"device": "cuda:0"}, {}, None),  # forked from a parent that never initialized CUDA
        ({"device": "cuda:0"}, {"DLPERF_WARM_GPU": "0"}, GPU_COLD),
        (
            {"device": "mps"},
            {},
            "a warm parent needs Linux's fork and PR_SET_PDEATHSIG"
            if not sys.platform.startswith("linux")
            else "a mps cell starts cold: only CPU and CUDA cells fork",
        ),
        ({"mode": "bf16+compile"}, {}, None),  # it compiles with its own empty caches all the same
        ({"memory_limit": 1 << 30}, {}, "--max-memory is set before the framework is imported"),
        ({}, {"DLPERF_NO_WARM": "1"}, "DLPERF_NO_WARM is set"),
    ],
)
def test_which_cells_fork_and_why_the_others_start_cold(monkeypatch, fields, env, why):
    monkeypatch.delenv("DLPERF_NO_WARM", raising=False)
    monkeypatch.delenv("DLPERF_WARM_GPU", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert warm.why_cold(task(**fields)) == why


def test_a_run_starts_a_warm_parent_before_the_second_process_that_may_fork(monkeypatch):
    """`warm.prepare` counts a run's processes that may fork as they are asked for (a sweep all at once, a search
    candidate by candidate; a process asked again is counted once) and starts a parent once a framework has two: one
    alone would gain nothing."""
    began = []
    monkeypatch.setattr(warm, "start", lambda python, framework: began.append(framework))
    one, other = make_cell("tiny-fcn-r"), make_cell("tiny-alexnet-r", threads=2)
    mps, replicas = make_cell("tiny-fcn-r", device="mps"), make_cell("tiny-fcn-r", nproc=2)
    asked = {}
    warm.prepare({1: one, 2: mps, 3: replicas}, None, asked)  # the MPS cell and the replicas start cold
    assert began == [] and asked == {1: "torch"}
    warm.prepare({1: one}, None, asked)  # the same process asked again (the run's start, then its sweep)
    assert began == []
    warm.prepare({4: other}, None, asked)  # the run's second: a parent, before it starts
    assert began == ["torch"]
    began.clear()
    warm.prepare({1: one, 2: make_cell("tiny-fcn-r", device="cuda:0")}, None, {})  # a CUDA cell forks too
    assert began == ["torch"]
    began.clear()
    warm.prepare(processes([Task(one, 0), Task(one, 1)]), None, {})  # two repeats of one cell
    assert began == ["torch"]
    began.clear()
    warm.prepare(processes([Task(one, 0)], profile=True), None, {})  # a cell and its profile
    assert began == ["torch"]
    began.clear()
    warm.prepare({1: one, 2: other}, 1 << 30, {})  # --max-memory: cold
    assert began == []


def test_dlperf_run_starts_its_warm_parent_before_predicting(monkeypatch, tmp_path):
    """A run's warm parent imports while the run predicts its GPU cells (a probe child counting their operators: on
    the H200, 10-18 s that the parent's 9 s of imports then followed), not after."""
    from dlperf import api

    require("torch")
    started = []
    monkeypatch.setattr(warm, "start", lambda python, framework: started.append(framework))
    seen = []

    def predictions(cells, workloads, env):
        seen.append(list(started))
        raise KeyboardInterrupt  # nothing is measured: what matters is what had started by now

    monkeypatch.setattr(api.gpu_predictions, "predictions", predictions)
    with pytest.raises(RunInterrupted):  # the stored run is marked interrupted (tests/test_api.py)
        api.run(["tiny-fcn-r", "tiny-alexnet-r"], db=str(tmp_path / "t.db"), threads=[1], devices=["cpu"])
    assert seen == [["torch"]]


@pytest.mark.slow  # its cost is the two runs' imports of torch (a cold cell's, a warm parent's), not their steps
@pytest.mark.timeout(600)  # two end-to-end runs, each importing torch twice or more: minutes on a loaded 2-core machine
def test_one_cell_starts_cold_and_two_fork_both(tmp_path):
    """A one-cell run starts no warm parent (its cell says why); a two-cell run forks both cells. Nothing here is
    timed: under load (four test suites at once on 2 cores) the runs take minutes, past the suite's 300 s per test,
    and a cell that did start cold says why in the failure."""
    require("torch")
    one = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", "--no-loss-check", *FAST, db=tmp_path / "1.db")
    assert one.returncode == 0, one.stderr
    [cell] = measurements(tmp_path / "1.db").values()
    assert (cell["started"], cell["cold_because"]) == ("cold", warm.FIRST)
    two = dlperf("run", "--workloads", "tiny-fcn-r,tiny-alexnet-r", "--threads", "1", "--no-loss-check", *FAST,
                 db=tmp_path / "2.db")  # fmt: skip
    assert two.returncode == 0, two.stderr
    found = {w: (m["started"], m.get("cold_because")) for w, m in measurements(tmp_path / "2.db").items()}
    assert found == {"tiny-fcn-r": ("warm", None), "tiny-alexnet-r": ("warm", None)}, two.stderr


def test_only_cells_their_profiles_and_the_predictors_probes_fork(monkeypatch):
    """The predictor's questions (on the CPU, nothing timed) fork; the others (the devices, a thread count's use, a
    process's start) start cold, as do every framework's whose backend does not fork."""
    monkeypatch.delenv("DLPERF_NO_WARM", raising=False)
    cold = "only cells, their profiles and the predictor's probes are forked"
    assert warm.why_cold(ProbeTask("torch", EnvRequest())) == cold
    assert warm.why_cold(ProbeTask("torch", ThreadsRequest(2, 1.0))) == cold
    assert warm.why_cold(ProfileTask(make_cell("tiny-fcn-r"), {})) is None
    for request in (WorkloadRequest("model.py:make"), OpsRequest([]), MemoryRequest([])):
        assert warm.why_cold(ProbeTask("torch", request)) is None
    assert warm.why_cold(ProbeTask("jax", OpsRequest([]))) == "the jax backend starts every cell cold"
    monkeypatch.setenv("DLPERF_NO_WARM", "1")
    assert warm.why_cold(ProbeTask("torch", OpsRequest([]))) == "DLPERF_NO_WARM is set"


def test_a_task_with_neither_cell_nor_probe_starts_cold_as_before(monkeypatch, tmp_path):
    """A peak or a comm job has no cell: the launcher asks no warm parent for it (a first cut read its cell's
    framework before asking whether it may fork at all, and every `dlperf comm` failed: 'CommTask' object has no
    attribute 'cell')."""
    monkeypatch.setattr(launching, "child_command", lambda *a, **k: ["/bin/sh", "-c", "exit 0"])
    for task in (CommTask("gloo", 1, [1024], 1, 0, 10.0), PeakTask("torch", "cpu", 1, ["fp32"], [64], 1024, 0.1)):
        assert launching.launch(task, sys.executable, 1, 60).child.returncode == 0


def test_a_probe_forks_from_a_parent_it_starts_only_within_probes_share(monkeypatch):
    """Outside a predictor's command a probe forks only from a parent the run started; within `probes_share` the
    first one starts it."""
    monkeypatch.setattr(warm, "_parents", {})
    began = []
    monkeypatch.setattr(warm, "start", lambda python, framework: began.append(framework) or "parent")
    assert warm.parent("python", "torch", probe=True) is None
    with warm.probes_share():
        assert warm.parent("python", "torch") is None  # a cell: only a parent the run started
        assert warm.parent("python", "torch", probe=True) == "parent"
    assert warm.parent("python", "torch", probe=True) is None and began == ["torch"]


def test_a_parent_a_probe_started_is_closed_as_the_outermost_probes_share_ends(monkeypatch):
    """Called as a library (`cli.main(["predict", ...])`, `advise.advise`), a command's parent holding PyTorch (300
    MB) lived until the caller's interpreter ended. The outermost `probes_share` closes what a probe started within
    it; a parent there before stays, as does one a run asked for (`prepare`: the caller's next run forks from it)."""
    monkeypatch.setattr(warm, "WarmParent", FakeParent)
    monkeypatch.setattr(warm, "_parents", {})
    monkeypatch.setattr(warm.envs, "interpreter_for", lambda framework: "/py")
    there = warm.start("/other", "torch")  # a run's, before the command
    with warm.probes_share():
        with warm.probes_share():  # nested: advise measures through crossover's
            probed = warm.parent("/py", "torch", probe=True)
        assert not probed.closed and warm.parent("/py", "torch", probe=True) is probed
        other = warm.parent("/py2", "torch", probe=True)
    assert probed.closed and other.closed and not there.closed
    assert warm._parents == {("/other", "torch"): there}
    with warm.probes_share():  # crossover: its cells asked for the probes' parent
        probed = warm.parent("/py", "torch", probe=True)
        warm.prepare({1: make_cell("tiny-fcn-r"), 2: make_cell("tiny-fcn-r", threads=2)}, None, {})
    assert not probed.closed and warm.parent("/py", "torch") is probed
    with warm.probes_share():
        pass
    assert not probed.closed and not there.closed


def test_a_launch_stopped_while_its_warm_parent_imports_starts_no_child(tmp_path):
    """A count's other children are stopped (`limit`) when one fails or the command is interrupted, from threads an
    interrupt never reaches: one waiting for the warm parent's imports waited them out (up to 120 s) and then forked
    a child only to kill it. It ends at once, stopped, and nothing is started."""
    parent = object.__new__(warm.WarmParent)
    parent.ready, parent.ended, spawned = threading.Event(), None, []

    def spawn(*args):
        spawned.append(args)
        raise warm.WarmFailed("not this one")

    parent.spawn = spawn
    later = threading.Timer(5.0, parent.ready.set)  # imports done only later: the old wait forked then
    later.start()
    try:
        child = launching.run_child([sys.executable, "-P", "-m", "dlperf_no_such_worker"], {}, 60, tmp_path,
                                    limit=lambda: "stopped: the command ended", parent=parent)  # fmt: skip
    finally:
        later.cancel()
    assert (child.timed_out, child.stop_reason, spawned) == (True, "stopped: the command ended", [])


def test_a_parent_is_started_in_the_environment_less_what_each_cell_sets_and_dlperfs_own():
    base = {"PATH": "/bin", "ONEDNN_MAX_CPU_ISA": "AVX2", "DLPERF_DB": "a.db", "PYTEST_CURRENT_TEST": "x"}
    cell_vars = {"OMP_NUM_THREADS": "2", PARENT_VAR: "1", LAUNCH_VAR: "1:d", "TORCHINDUCTOR_CACHE_DIR": "/t"}
    key = warm.env_key({**base, **cell_vars})
    assert key == (("ONEDNN_MAX_CPU_ISA", "AVX2"), ("PATH", "/bin"))  # a variable that changes kernels is kept
    assert warm.env_key({**base, "DLPERF_DB": "b.db"}) == key  # another store: the same parent
    assert warm.env_key({**base, "ONEDNN_MAX_CPU_ISA": "AVX512"}) != key  # another kernel choice: another parent


class FakeParent:
    started: ClassVar[list] = []

    def __init__(self, python, framework, key):
        self.python, self.framework, self.key, self.closed, self.died = python, framework, key, False, False
        FakeParent.started.append(self)

    def close(self):
        self.closed = True


def test_one_parent_per_interpreter_and_framework_replaced_when_the_environment_changes(
    monkeypatch,
):
    monkeypatch.setattr(warm, "WarmParent", FakeParent)
    monkeypatch.setattr(warm, "_parents", {})
    FakeParent.started = []
    assert warm.parent("/py", "torch") is None and FakeParent.started == []  # none started: the cell starts cold
    first_one = warm.start("/py", "torch")  # as a run of two such processes starts it
    assert warm.parent("/py", "torch") is first_one and warm.start("/py", "torch") is first_one
    monkeypatch.setenv("DLPERF_DB", "elsewhere.db")  # dlperf's own: the same parent
    assert warm.parent("/py", "torch") is first_one
    monkeypatch.setenv("ONEDNN_VERBOSE", "1")  # read by the framework: a new parent in the new environment
    second = warm.parent("/py", "torch")
    assert second is not first_one and first_one.closed and not second.closed
    assert ("ONEDNN_VERBOSE", "1") in second.key


def test_a_parent_that_died_is_replaced_twice_and_one_that_refused_stays(monkeypatch):
    monkeypatch.setattr(warm, "WarmParent", FakeParent)
    monkeypatch.setattr(warm, "_parents", {})
    monkeypatch.setattr(warm, "_restarts", Counter())
    first_one = warm.start("/py", "torch")
    first_one.ended = "the warm parent refused: a thread exists"  # refused: it would refuse again
    assert warm.parent("/py", "torch") is first_one
    first_one.died = True  # killed after serving: replaced, twice
    second = warm.parent("/py", "torch")
    assert second is not first_one and first_one.closed
    second.died = True
    third = warm.parent("/py", "torch")
    assert third is not second and second.closed
    third.died = True
    assert warm.parent("/py", "torch") is third and not third.closed  # the third death stays: its cells start cold
    assert warm.parent("/py", "jax") is None  # another framework's count is its own, and none was started


def test_a_real_parent_killed_after_serving_is_marked_died_and_replaced(monkeypatch):
    """The zygote killed as the out-of-memory killer would: `died`, and the next launch's parent is a new one."""
    require("torch")
    monkeypatch.setattr(warm, "_parents", {})
    monkeypatch.setattr(warm, "_restarts", Counter())
    python = sys.executable
    first_one = warm.start(python, "torch")
    try:
        assert first_one.serving() is None
        os.kill(first_one.pid, signal.SIGKILL)
        first_one.thread.join(30)
        assert first_one.died and "exit -9" in first_one.ended
        second = warm.parent(python, "torch")
        assert second is not first_one and second.serving() is None and second.pid != first_one.pid
    finally:
        warm.close_all()


def cell_task(threads: int, pin: list[int] | None) -> CellTask:
    workload = BUILTIN["tiny-fcn-r"].to_json()
    timer = TimerConfig(min_steps=3, min_time=0.0, max_time=0.3, max_warmup=3)
    return CellTask(make_cell("tiny-fcn-r", threads=threads), 0, workload, timer, pin_cpus=pin,
                    count_flops=False, measure_memory=False)  # fmt: skip


def test_a_forked_cells_thread_settings_and_affinity_equal_a_cold_ones(monkeypatch):
    """The same cell cold and forked: the recorded thread and kernel settings, the CPUs and inherited thread
    variables are the same, and the forked one keeps both cores busy as the cold one does (the thread pools it sized
    after the fork exist)."""
    require("torch")
    threads = min(2, len(os.sched_getaffinity(0)))
    pin = sorted(os.sched_getaffinity(0))[:threads]
    seen = {}
    for way in ("cold", "warm"):
        if way == "cold":
            monkeypatch.setenv("DLPERF_NO_WARM", "1")
        else:
            monkeypatch.delenv("DLPERF_NO_WARM", raising=False)
        if way == "warm":
            warm.start(sys.executable, "torch")  # as a run of two cells or more starts it (`warm.prepare`)
        launched = launching.launch(cell_task(threads, pin), sys.executable, threads, 120)
        assert launched.child.started == way, launched.child
        built, pinned = first(launched.main, Built), first(launched.main, Affinity)
        assert built is not None and first(launched.main, Sampled) is not None, launched.stderr
        seen[way] = (built.settings, pinned.cpus, pinned.thread_env)
    assert seen["warm"] == seen["cold"]
    assert seen["warm"][0]["torch_threads"] == threads and seen["warm"][0]["omp_max_threads"] == threads


ENV_DUMP = """
import json, os, sys

import numpy  # noqa: F401 - loaded, as the warm parent has it: its BLAS pool's threads are a cold child's too

def main(argv):
    with open(argv[1], "w") as f:
        json.dump({"env": dict(os.environ), "cwd": os.getcwd(), "argv": argv[1:], "sid": os.getsid(0) == os.getpid(),
                   "threads": len(os.listdir("/proc/self/task"))}, f)
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv))
"""


def test_a_forked_child_has_exactly_the_environment_a_cold_child_is_given(tmp_path, monkeypatch):
    """A module run forked and cold with the same environment, working directory and arguments sees the same: the
    environment whole (but the pid of its parent, its own by design), its own session, as many threads as a cold one
    (numpy loaded in both)."""
    require("torch")
    (tmp_path / "envdump.py").write_text(ENV_DUMP)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"), str(tmp_path)]))
    monkeypatch.chdir(tmp_path)
    env = {**launching.child_env(os.environ, 2), "MY_SETTING": "on"}
    parent = warm.WarmParent(sys.executable, "torch", warm.env_key(os.environ))
    try:
        (tmp_path / "w").mkdir()
        forked = parent.spawn("envdump", [str(tmp_path / "warm.json")], env, tmp_path / "w")
        assert forked.wait(60) == 0, (tmp_path / "w" / "stderr.log").read_text()
        cold = subprocess.run([sys.executable, "-m", "envdump", str(tmp_path / "cold.json")],
                              env={**env, PARENT_VAR: "0"}, start_new_session=True, timeout=60)  # fmt: skip
        assert cold.returncode == 0
    finally:
        parent.close()
    forked, cold = (json.loads((tmp_path / f"{w}.json").read_text()) for w in ("warm", "cold"))
    assert forked["env"].pop(PARENT_VAR) == str(parent.pid) and cold["env"].pop(PARENT_VAR) == "0"
    assert forked["env"] == cold["env"] and forked["env"]["OMP_NUM_THREADS"] == "2"
    assert forked["cwd"] == cold["cwd"] == str(tmp_path)
    assert forked["argv"] == [str(tmp_path / "warm.json")] and cold["argv"] == [str(tmp_path / "cold.json")]
    assert forked["sid"] and cold["sid"] and forked["threads"] == cold["threads"]  # none of the parent's copied
    assert not alive(parent.proc.pid)


BLAS_DUMP = """
import json, sys

def main(argv):
    import numpy  # noqa: F401 - loaded, as a cell's step may use it
    from threadpoolctl import threadpool_info

    with open(argv[1], "w") as f:
        json.dump(sorted(p["num_threads"] for p in threadpool_info() if p["internal_api"] == "openblas"), f)
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv))
"""


def test_a_forked_childs_numpy_blas_pool_is_sized_as_a_cold_ones(tmp_path, monkeypatch):
    """The warm parent loaded numpy's OpenBLAS with one thread; a forked child's pool follows the cell's thread
    variables, as a fresh interpreter's does."""
    require("torch")
    (tmp_path / "blasdump.py").write_text(BLAS_DUMP)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"), str(tmp_path)]))
    threads = min(2, len(os.sched_getaffinity(0)))
    env = launching.child_env(os.environ, threads)
    parent = warm.WarmParent(sys.executable, "torch", warm.env_key(os.environ))
    try:
        (tmp_path / "w").mkdir()
        forked = parent.spawn("blasdump", [str(tmp_path / "warm.json")], env, tmp_path / "w")
        assert forked.wait(60) == 0, (tmp_path / "w" / "stderr.log").read_text()
    finally:
        parent.close()
    cold = subprocess.run([sys.executable, "-m", "blasdump", str(tmp_path / "cold.json")], env=env, timeout=60)
    assert cold.returncode == 0
    forked_pool, cold_pool = (json.loads((tmp_path / f"{w}.json").read_text()) for w in ("warm", "cold"))
    assert cold_pool and forked_pool == cold_pool == [threads] * len(cold_pool)


def measurements(db: Path) -> dict[str, dict]:
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT c.workload, c.status, c.error, m.detail_json FROM cells c JOIN measurements m "
                        "ON c.run_id = m.run_id AND c.key = m.cell_key").fetchall()  # fmt: skip
    conn.close()
    return {w: {"status": s, "error": e, **json.loads(d)} for w, s, e, d in rows}


@pytest.mark.slow
def test_a_forked_cells_crash_hang_or_kill_fails_only_that_cell(tmp_path):
    require("torch")
    models, hang_file, db = tmp_path / "faults.py", tmp_path / "hang", tmp_path / "d.db"
    models.write_text(FAULTY_MODELS)
    hang_file.write_text("")
    names = ",".join(f"{models}:{n}" for n in ("segv", "killed", "hang", "good"))
    proc = dlperf("run", "--workloads", names, "--threads", "1", "--timeout", "8", "--no-loss-check", *FAST, db=db,
                  env={"HANG_FILE": str(hang_file)})  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    by_name = measurements(db)
    assert {n: m["started"] for n, m in by_name.items()} == dict.fromkeys(("segv", "killed", "hang", "good"), "warm")
    assert by_name["segv"]["status"] == "failed" and "SIGSEGV" in by_name["segv"]["error"]
    killed = by_name["killed"]["error"]
    assert by_name["killed"]["status"] == "failed" and killed.startswith("worker killed by SIGKILL ("), killed
    assert ("out of memory?" in killed) == (oom_kills() is None), killed  # with a counter to read, it is known
    assert by_name["hang"]["status"] == "timeout" and "--timeout 8" in by_name["hang"]["error"]
    assert by_name["good"]["status"] == "ok"  # after three failures, the warm parent still serves
    assert gone([int(hang_file.read_text())], within_s=5)


def test_killing_dlperf_kills_its_warm_parent_and_every_forked_child(tmp_path):
    require("torch")
    models, hang_file = tmp_path / "faults.py", tmp_path / "hang"
    models.write_text(FAULTY_MODELS)
    hang_file.write_text("")
    env = {**os.environ, "HANG_FILE": str(hang_file), "PYTHONPATH": str(ROOT / "src")}
    env.pop("DLPERF_NO_WARM", None)
    two = f"{models}:good,{models}:hang"  # two cells: a warm parent serves them
    parent = subprocess.Popen([sys.executable, "-m", "dlperf", "run", "--db", str(tmp_path / "d.db"), "--workloads",
                               two, "--threads", "1", *FAST], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not hang_file.read_text() and time.monotonic() < deadline:
            assert parent.poll() is None, parent.stderr.read()
            time.sleep(0.1)
        worker = int(hang_file.read_text())
        zygote = parent_of(worker)
        assert "dlperf.worker.zygote" in Path(f"/proc/{zygote}/cmdline").read_text().replace("\0", " ")
        assert parent_of(zygote) == parent.pid
        comm = {p: Path(f"/proc/{p}/comm").read_text().strip() for p in (zygote, worker)}
        assert comm == {zygote: "dlperf-warm", worker: "dlperf-cell"}  # what `ps` and `top` show
        parent.send_signal(signal.SIGKILL)  # dlperf stops nothing itself: the kernel's PR_SET_PDEATHSIG does
        parent.wait(30)
        assert gone([zygote, worker], within_s=10)
    finally:
        parent.kill()
        parent.wait(30)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_with_dlperf_warm_gpu_0_a_gpu_cell_is_not_forked(monkeypatch, tmp_path):
    """A CUDA cell goes to a cold child even with a warm parent at hand: the parent is not asked."""

    def refuse(*args, **kwargs):
        raise AssertionError("a GPU cell asked for a warm parent")

    monkeypatch.setattr(warm, "parent", refuse)
    monkeypatch.delenv("DLPERF_NO_WARM", raising=False)
    monkeypatch.setenv("DLPERF_WARM_GPU", "0")
    launched = launching.launch(CellTask(make_cell("tiny-fcn-r", device="cuda:0"), 0, {}, TimerConfig()),
                                sys.executable, 1, 60)  # fmt: skip
    assert launched.child.started == "cold" and launched.child.cold_because == GPU_COLD


def test_a_gpu_cell_forks_only_from_a_parent_that_never_loaded_the_cuda_driver(monkeypatch, tmp_path):
    """By default a CUDA cell is forked, asking the parent for a GPU child: a real warm parent here (no CUDA on this
    machine: the cell's child fails, forked), then one that loaded the driver, whose refusal makes the cell start
    cold with its reason."""
    require("torch")
    monkeypatch.delenv("DLPERF_WARM_GPU", raising=False)
    monkeypatch.setattr(warm, "_parents", {})
    cell_task = CellTask(make_cell("tiny-fcn-r", device="cuda:0"), 0, BUILTIN["tiny-fcn-r"].to_json(), TimerConfig())
    try:
        warm.start(sys.executable, "torch")
        launched = launching.launch(cell_task, sys.executable, 1, 60)
        assert launched.child.started == "warm" and launched.child.cold_because is None
    finally:
        warm.close_all()
    asked = []

    class LoadedTheDriver:
        launch, pid = "its-own", None

        def serving(self, stop=None):
            return None

        def spawn(self, module, args, env, log_dir, gpu=False):
            asked.append(gpu)
            raise warm.WarmFailed("the warm parent could not fork: the warm parent has initialized the CUDA driver "
                                  "(libcuda.so.1: cuCtxGetCurrent answered 0)")  # fmt: skip

    monkeypatch.setattr(warm, "parent", lambda python, framework, probe=False: LoadedTheDriver())
    launched = launching.launch(cell_task, sys.executable, 1, 60)
    assert asked == [True] and launched.child.started == "cold"
    assert launched.child.cold_because.endswith("has initialized the CUDA driver (libcuda.so.1: cuCtxGetCurrent "
                                                "answered 0)")  # fmt: skip


def test_the_zygote_finds_the_cuda_driver_in_its_memory_map_and_refuses_a_gpu_child_then(tmp_path, monkeypatch):
    from dlperf.worker import zygote

    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libz.so.1.2.13\n"
                    "7f02-7f03 rw-p 00000000 00:00 0 \n7f04-7f05 r--p 00000000 00:00 0 [vdso]\n")  # fmt: skip
    assert zygote.cuda_driver(str(maps)) is None and zygote.cuda_in_use(str(maps)) is None
    with open(maps, "a") as f:
        f.write("7f06-7f07 r-xp 00000000 08:01 456 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n")
    assert zygote.cuda_driver(str(maps)) == "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"
    with pytest.raises(OSError):
        zygote.cuda_driver(str(tmp_path / "none"))
    missing = tmp_path / "none"
    assert zygote.cuda_in_use(str(missing)) == (f"could not read whether it loaded the CUDA driver ({missing}: "
                                                "No such file or directory)")  # fmt: skip
    assert zygote.cuda_driver() is None and zygote.cuda_in_use() is None  # PyTorch's CPU build maps no driver
    control_r, control_w = os.pipe()
    z = zygote.Zygote(os.open(os.devnull, os.O_RDONLY), control_w)
    monkeypatch.setattr(zygote, "cuda_in_use", lambda: "has initialized the CUDA driver (libcuda.so.1: ...)")
    z.fork({"id": 7, "gpu": True, "module": "dlperf.worker.cell", "args": []})  # refused before any fork
    assert json.loads(os.read(control_r, 4096)) == {"id": 7, "error": "the warm parent has initialized the CUDA "
                                                                      "driver (libcuda.so.1: ...)"}  # fmt: skip
    assert z.children == set()


def test_a_mapped_cuda_driver_that_was_never_initialized_does_not_stop_a_gpu_fork(tmp_path):
    """PyTorch 2.11+cu130 maps libcuda at import (the H200 check: 0 of 7 GPU cells forked, each cold for ~9 s); only
    a driver that a CUDA call initialized stops a fork. The driver is asked with cuCtxGetCurrent, which answers
    CUDA_ERROR_NOT_INITIALIZED (3) before cuInit; any other answer, or a library that cannot be asked, refuses."""
    from dlperf.worker import zygote

    maps = tmp_path / "maps"
    maps.write_text("7f06-7f07 r-xp 00000000 08:01 456 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n")
    opened = []

    class Driver:
        def __init__(self, code):
            self.code = code

        def cuCtxGetCurrent(self, context):  # the driver's own name
            return self.code

    def driver(code):
        return lambda path: opened.append(path) or Driver(code)

    assert zygote.cuda_in_use(str(maps), driver(3)) is None
    assert opened == ["/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"]
    assert zygote.cuda_in_use(str(maps), driver(0)) == ("has initialized the CUDA driver (libcuda.so.580.159.04: "
                                                        "cuCtxGetCurrent answered 0)")  # fmt: skip
    assert zygote.cuda_in_use(str(maps), lambda path: object()).startswith(
        "has loaded the CUDA driver (libcuda.so.580.159.04) and could not ask it"
    )

    def not_loaded(path):
        raise OSError(f"{path}: cannot open shared object file")

    assert "could not ask it whether it was initialized" in zygote.cuda_in_use(str(maps), not_loaded)
    with pytest.raises(OSError):  # the real opener loads nothing that is not mapped already
        zygote._already_loaded(str(tmp_path / "libcuda.so.1"))


def test_a_parent_with_a_second_thread_refuses_to_fork(tmp_path):
    """A framework whose import left a thread running cannot be forked safely: the parent says so and ends."""
    require("torch")
    script = ("import threading, time, sys; threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); "
              "from dlperf.worker import zygote; zygote.main(['zygote', 'torch'])")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **launching.child_env({}, 1)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    said = json.loads(done.stdout.splitlines()[0])
    assert said == {"refused": "2 threads after importing the torch backend: a fork copies only one"}
    assert done.returncode == 1


def test_a_forked_childs_end_is_read_once_and_kept():
    """The launcher may wait again for a child that has ended (stopping its tree after a timeout): the exit code
    the warm parent reported once is kept, as Popen keeps it."""

    class Parent:
        exits: ClassVar[dict] = {5: -11}

        def exit_code(self, pid, timeout):
            return self.exits.pop(pid, None)

    child = warm.Forked(Parent(), 5)
    assert child.wait(0) == -11 and child.wait(0) == -11 and child.poll() == -11


def test_a_wait_on_the_warm_parent_does_not_count_a_suspension(monkeypatch):
    """dlperf and its warm parent stopped together (Ctrl-Z) for longer than the wait for an answer: the answer that
    comes once both go on is taken, not given up (which would leave its forked child to no one)."""
    import threading

    from dlperf.runner import lifeline

    paused = {"s": 0.0}
    monkeypatch.setattr(lifeline, "paused", lambda: (0, paused["s"]))
    answered = threading.Event()
    timer = threading.Timer(0.5, answered.set)
    timer.start()

    def done() -> bool:
        paused["s"] += 1.0  # each look comes after a second stopped
        return answered.is_set()

    changed = threading.Condition()
    with changed:
        assert warm.waited(changed, done, 0.2)
        monkeypatch.setattr(lifeline, "paused", lambda: (0, 0.0))
        assert not warm.waited(changed, lambda: False, 0.2)  # no suspension: the timeout is the timeout
    timer.cancel()


def test_a_parent_closed_while_it_imports_is_killed_at_once_and_one_closed_as_it_starts_too(monkeypatch):
    """A parent reads its input only once its imports are done: closed meanwhile (Ctrl-C within a second of a run's
    start, dlperf's exit closing it), it was waited for 10 s, every such Ctrl-C took 10.5 s to end dlperf on a busy
    2-core machine (4 of 4 tries). It has no child yet: killed at once. One closed before its process was known to
    `close` (the start under way in its thread) is killed as the start returns."""
    importing = [sys.executable, "-c", "import time; time.sleep(120)"]  # a framework's import that takes long
    monkeypatch.setattr(warm, "python_module", lambda python, module: importing)
    parent = warm.WarmParent(sys.executable, "torch", warm.env_key(os.environ))
    try:
        while parent.proc is None:
            time.sleep(0.01)
        began = time.monotonic()
        parent.close()
        assert time.monotonic() - began < 5.0  # 10 s and more, waited for
        assert parent.proc.poll() is not None and not parent.thread.is_alive()
    finally:
        parent.proc.kill()
    started, made = threading.Event(), []

    def popen(*args, **kwargs):  # `close` comes while the start is under way
        while not made:
            time.sleep(0.01)
        threading.Thread(target=made[0].close).start()
        while not made[0].closing:
            time.sleep(0.01)
        started.set()
        return real_popen(*args, **kwargs)

    real_popen = subprocess.Popen
    monkeypatch.setattr(warm.subprocess, "Popen", popen)
    made.append(warm.WarmParent(sys.executable, "torch", warm.env_key(os.environ)))
    assert started.wait(30)
    made[0].thread.join(30)
    assert not made[0].thread.is_alive() and gone([made[0].proc.pid], 5.0)


CTRL_C_AS_THE_PARENTS_CLOSE = """
import os, signal, time
from dlperf.runner import lifeline, warm

class Closing:  # a warm parent whose close, at exit, is under way when Ctrl-C comes (twice)
    def close(self):
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
        print("closed", flush=True)

warm._parents[("python", "torch")] = Closing()
with lifeline.sigterm_as_interrupt(to_the_end=True):
    print("done", flush=True)  # the command's output written, not interrupted
"""


def test_ctrl_c_while_the_warm_parents_close_at_exit_is_dropped():
    """A command done, its warm parents closed at exit (atexit): Ctrl-C then was raised in the atexit callback,
    printed as a traceback ('Exception ignored in atexit callback', seen in a loop of Ctrl-C on dlperf profile), the
    parents left unclosed, and a second one killed dlperf (exit -2)."""
    done = subprocess.run([sys.executable, "-c", CTRL_C_AS_THE_PARENTS_CLOSE], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout.split()) == (0, ["done", "closed"]), done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
