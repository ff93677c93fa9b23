"""TensorFlow's MultiWorkerMirroredStrategy (`--parallel multiworker`): one worker process per replica, each started
with its TF_CONFIG by dlperf's spawner (`worker/spawn.py`), here on loopback.

The flag's checks, the launch command and the spawner need no TensorFlow; the step's numerics run two workers in
TensorFlow's own environment, the cell end to end through `dlperf run`; both skip, with the reason, where TensorFlow
is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import FAST, ROOT, dlperf, framework_python, one_line_error, run_in
from dlperf.measure.timer import TimerConfig
from dlperf.parallel import Rendezvous
from dlperf.protocol import Cell, MultiWorkerTask
from dlperf.runner.collect import torchrun_exits
from dlperf.runner.launch import child_command, child_env
from dlperf.spec import make_spec
from dlperf.store import Store
from dlperf.worker import spawn
from dlperf.workloads.shi2016 import BUILTIN

TF = "tensorflow"
CELL = Cell("tiny-fcn-r", TF, "cpu", 1, "fp32", nproc=2, scaling="strong", parallel="multiworker")

# ----------------------------------------------------------------------------------------------------------------------
# Without TensorFlow


@pytest.mark.parametrize(
    "flags,said",
    [
        (("--frameworks", "torch", "--nproc", "2"), "--parallel multiworker: tf.distribute.MultiWorker"),
        (("--frameworks", TF, "--nproc", "1"), "--parallel multiworker --nproc 1: one worker has none to all-reduce"),
        (("--frameworks", TF, "--nproc", "2", "--nnodes", "2"), "--nnodes above 1 needs --rdzv-endpoint"),
        (
            ("--frameworks", TF, "--nproc", "2", "--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"),
            "--node-rank 2",
        ),
        (("--frameworks", TF, "--nproc", "2", "--rdzv-endpoint", "nohost"), "--rdzv-endpoint 'nohost'"),
        (("--frameworks", TF, "--nproc", "2", "--microbatches", "4"), "--microbatches: micro-batches are a pipeline's"),
        (("--frameworks", TF, "--nproc", "2", "--profile"), "--profile: data-parallel cells (--nproc)"),
    ],
)
def test_bad_multiworker_input_is_one_line(flags, said):
    done = dlperf("run", "--parallel", "multiworker", "--dry-run", *flags)
    one_line_error(done, said)


def test_one_worker_is_a_baseline_beside_more():
    """--nproc 1,2: the one-worker cell is what efficiency is measured against; one worker on each of two nodes is
    a job of two."""
    assert make_spec("tiny-fcn-r", frameworks=TF, nprocs="1,2", parallel="multiworker").nprocs == (1, 2)
    two_nodes = make_spec("tiny-fcn-r", frameworks=TF, nprocs="1", parallel="multiworker", nnodes=2, node_rank=1,
                          rdzv_endpoint="10.0.0.1:29400")  # fmt: skip
    assert two_nodes.nnodes == 2


def test_a_multiworker_task_is_started_by_the_spawner_not_torchrun():
    """TensorFlow's environment has no torch: its workers are started by dlperf's spawner, in that environment, with
    the rendezvous of every node passed on."""
    task = MultiWorkerTask(cell=CELL, repeat=0, workload=BUILTIN["tiny-fcn-r"].to_json(), timer=TimerConfig())
    alone = child_command("/tf/python", task, "t.json", "e.jsonl", 2, Rendezvous(), "job")
    assert alone == ["/tf/python", "-P", "-m", "dlperf.worker.spawn", "--nproc-per-node=2", "--monitor-interval=0.2",
                     "-m", "dlperf.worker.multiworker", "t.json", "e.jsonl"]  # fmt: skip
    rdzv = Rendezvous(2, 1, "10.0.0.1:29400", join_timeout_s=30)
    two = child_command("/tf/python", task, "t.json", "e.jsonl", 2, rdzv, "job")
    assert "torch.distributed.run" not in two and two[:4] == ["/tf/python", "-P", "-m", "dlperf.worker.spawn"]
    assert {"--nnodes=2", "--node-rank=1", "--rdzv-endpoint=10.0.0.1:29400", "--rdzv-id=job", "--join-timeout=30"} <= {
        *two
    }


def test_nodes_meet_at_the_endpoint_and_agree_on_the_cluster():
    """Three nodes on loopback: each gets every worker's host:port, node by node, in the same order."""
    port = spawn.free_ports(1)[0]
    endpoint, got = f"127.0.0.1:{port}", {}
    ports = {n: spawn.free_ports(2) for n in range(3)}

    def node(n: int) -> None:
        got[n] = spawn.cluster(ports[n], 3, n, endpoint, "job-1", timeout_s=20)

    threads = [threading.Thread(target=node, args=(n,)) for n in (2, 1, 0)]  # node 0 last: the others retry
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    expected = [f"127.0.0.1:{p}" for n in range(3) for p in ports[n]]
    assert got == {0: expected, 1: expected, 2: expected}


def test_a_node_of_another_job_is_turned_away():
    port = spawn.free_ports(1)[0]
    endpoint, got = f"127.0.0.1:{port}", {}
    server = threading.Thread(target=lambda: got.setdefault(0, _quiet(spawn.cluster, [1], 2, 0, endpoint, "a", 1.5)))
    server.start()
    with pytest.raises(spawn.JoinFailed, match="node 0 runs job a, not b of node 1"):
        spawn.cluster([2], 2, 1, endpoint, "b", timeout_s=1.5)
    server.join(10)
    assert isinstance(got[0], spawn.JoinFailed) and "1 of 2 nodes did not join" in str(got[0])


def _quiet(f, *args):
    try:
        return f(*args)
    except spawn.JoinFailed as exc:
        return exc


WORKER = """
import json, os, sys, time
rank = int(os.environ["RANK"])
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump({k: os.environ[k] for k in ("TF_CONFIG", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")}, f)
if rank == int(sys.argv[2]):
    sys.exit(3)
time.sleep(60)
"""


def run_spawner(tmp_path, failing: int, nproc: int = 2):
    (tmp_path / "fake_worker.py").write_text(WORKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(tmp_path)])}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dlperf.worker.spawn", f"--nproc-per-node={nproc}", "-m",
                           "fake_worker", str(tmp_path), str(failing)], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    return done, time.monotonic() - start


def test_the_spawner_writes_each_workers_tf_config_and_a_failure_ends_the_job(tmp_path):
    """Each worker is told the whole cluster and its own index; when one fails the other is stopped at once (not
    after its 60 s), and each exit code is written as torchrun writes it, so the parent names the failed rank."""
    done, took = run_spawner(tmp_path, failing=1)
    assert done.returncode == 1 and took < 20, (done.stderr, took)
    assert torchrun_exits(done.stderr) == {0: -15, 1: 3}
    configs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    clusters = [json.loads(c["TF_CONFIG"]) for c in configs]
    assert clusters[0]["cluster"] == clusters[1]["cluster"] and len(clusters[0]["cluster"]["worker"]) == 2
    assert [c["task"] for c in clusters] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert [(c["RANK"], c["LOCAL_RANK"], c["WORLD_SIZE"]) for c in configs] == [("0", "0", "2"), ("1", "1", "2")]


# ----------------------------------------------------------------------------------------------------------------------
# In TensorFlow's environment

STEP = """
import dataclasses, json, os, sys
from dlperf.frameworks.tensorflow import multiworker as mw
from dlperf.protocol import Cell
from dlperf.workloads.shi2016 import BUILTIN
mw.configure_threads(1)
group = mw.init("cpu", 60)
w = dataclasses.replace(BUILTIN["tiny-fcn-r"], batch=8)
cell = Cell("tiny-fcn-r", "tensorflow", "cpu", 1, "fp32", nproc=2, scaling="strong", parallel="multiworker")
train = mw.build(w, cell, group)
loss = float(train.step())
out = {"loss": loss, "weights": [v.numpy().ravel().tolist() for v in train.variables], "settings": train.settings(),
       "gathered": mw.gather([float(group.rank)], group), "slowest": mw.reduce([float(group.rank), 1.0], group)}
with open(os.path.join(sys.argv[1], f"rank{group.rank}.json"), "w") as f:
    json.dump(out, f)
"""

ONE = """
import dataclasses, json
from dlperf.frameworks.tensorflow import backend as tb
from dlperf.workloads.shi2016 import BUILTIN
w = dataclasses.replace(BUILTIN["tiny-fcn-r"], batch=8)
one = tb.build(w, "cpu", "fp32")
loss = float(one.step())
print(json.dumps({"loss": loss, "weights": [v.numpy().ravel().tolist() for v in one.model.trainable_variables]}))
"""


@pytest.mark.slow
def test_two_workers_step_as_one_device_on_the_whole_batch(tmp_path):
    """Two workers on loopback, each on its half of a batch of 8, against one device on all of it, from the same
    weights: the same loss and the same weights after a step, within fp32 rounding."""
    python = framework_python(TF)
    (tmp_path / "mw_step.py").write_text(STEP)
    env = child_env(os.environ, 1, python)
    env["PYTHONPATH"] = os.pathsep.join([env.get("PYTHONPATH") or str(ROOT / "src"), str(tmp_path)])
    done = subprocess.run([python, "-m", "dlperf.worker.spawn", "--nproc-per-node=2", "-m", "mw_step", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    two = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    one = run_in(TF, ONE)
    flat = [np.concatenate([np.asarray(w) for w in got["weights"]]) for got in (*two, one)]
    for worker in (0, 1):
        assert two[worker]["loss"] == pytest.approx(one["loss"], rel=1e-5)
        assert np.linalg.norm(flat[worker] - flat[2]) / np.linalg.norm(flat[2]) < 1e-5
    assert np.array_equal(flat[0], flat[1])  # the workers agree exactly
    assert two[0]["gathered"] == [[0.0], [1.0]] and two[1]["slowest"] == [1.0, 1.0]
    settings = two[1]["settings"]
    assert settings["workers"] == 2 and settings["worker"] == 1 and settings["per_replica_batch"] == 4
    assert settings["collective"] == "RING" and settings["cross_device_ops"] == "CollectiveAllReduce (RING)"


# ----------------------------------------------------------------------------------------------------------------------
# End to end


@pytest.mark.slow
def test_a_multiworker_cell_is_stored_ok(tmp_path):
    framework_python(TF)
    db = tmp_path / "m.db"
    done = dlperf("run", "--frameworks", TF, "--workloads", "tiny-fcn-r", "--threads", "1", "--parallel",
                  "multiworker", "--nproc", "2", "--modes", "fp32,bf16", "--no-predict", *FAST, db=db,
                  timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(db, create=False)
    cell, bf16 = store.cells(1)
    [m] = store.measurements(1, cell.key)
    store.close()
    # the first worker trains bf16 against fp32 on its own, after the timed steps, as a one-process cell does
    assert bf16.mode == "bf16" and bf16.status == "ok" and bf16.loss_check.ok is True, bf16.loss_check
    assert cell.loss_check is None  # fp32: the reference
    assert cell.status == "ok" and cell.column == "multiworker:2x1" and cell.median_s > 0
    assert cell.key == "tiny-fcn-r|tensorflow|cpu|1|fp32|multiworker:2:strong"
    assert len(m.detail.ranks) == 2 and m.detail.slowest_rank in (0, 1)
    assert len(m.detail.ranks[0]) == len(m.detail.ranks[1])  # every worker took the same steps
    assert cell.median_s == pytest.approx(max(np.median(r) for r in m.detail.ranks), rel=1e-6)
    total = BUILTIN["tiny-fcn-r"].ddp_batch or BUILTIN["tiny-fcn-r"].batch
    assert m.detail.settings["workers"] == 2 and m.detail.settings["per_replica_batch"] == total // 2
    comm = cell.comm
    assert comm.world == 2 and comm.strategy == "multiworker"
    assert comm.backend == "multiworker: CollectiveAllReduce (RING)"
    assert comm.local_step_s > 0 and comm.exposed_comm_s >= 0 and 0 <= comm.comm_share < 1
    assert comm.gradient_bytes == 4 * cell.params and comm.param_bytes_rank == [4 * cell.params] * 2
    assert len(comm.peak_bytes_rank) == 2 and min(comm.peak_bytes_rank) > 0  # each worker's own memory


@pytest.mark.slow
def test_two_nodes_meet_at_the_rendezvous_endpoint(tmp_path):
    """Two `dlperf run`s, node 0 and node 1 of one job on loopback, one worker each: both store the job's ok cell."""
    framework_python(TF)
    endpoint = f"127.0.0.1:{spawn.free_ports(1)[0]}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    nodes = [subprocess.Popen([sys.executable, "-m", "dlperf", "run", "--frameworks", TF, "--workloads", "tiny-fcn-r",
                               "--threads", "1", "--parallel", "multiworker", "--nproc", "1", "--nnodes", "2",
                               "--node-rank", str(r), "--rdzv-endpoint", endpoint, "--no-predict", *FAST, "--db",
                               str(tmp_path / f"n{r}.db")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in (0, 1)]  # fmt: skip
    for node in nodes:
        _, err = node.communicate(timeout=300)
        assert node.returncode == 0, err[-3000:]
    for r in (0, 1):
        store = Store.open(tmp_path / f"n{r}.db", create=False)
        [cell] = store.cells(1)
        store.close()
        assert cell.status == "ok" and cell.column == "multiworker:2x1" and cell.comm.world == 2


LINGERING = """
import os, sys, time
from dlperf.worker.lifeline import die_with_parent
die_with_parent()
with open(os.path.join(sys.argv[1], f"pid{os.environ['RANK']}"), "w") as f:
    f.write(str(os.getpid()))
time.sleep(60)
"""


def test_the_workers_die_with_the_spawner(tmp_path):
    """The spawner killed (as when dlperf is, by SIGKILL): its workers die with it, none is left."""
    (tmp_path / "lingering.py").write_text(LINGERING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(tmp_path)]),
           "DLPERF_PARENT_PID": str(os.getpid())}  # fmt: skip
    spawner = subprocess.Popen([sys.executable, "-m", "dlperf.worker.spawn", "--nproc-per-node=2", "-m", "lingering",
                                str(tmp_path)], env=env)  # fmt: skip
    pids = [tmp_path / f"pid{r}" for r in (0, 1)]
    deadline = time.monotonic() + 30
    while not all(p.exists() and p.read_text() for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = [int(p.read_text()) for p in pids]
    spawner.kill()
    spawner.wait()
    deadline = time.monotonic() + 5
    while any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in workers)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
