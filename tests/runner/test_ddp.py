"""Data-parallel cells: DDP through torchrun with gloo on the CPU, 2 processes; faults; two nodes over loopback."""

import json
import socket
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from conftest import FAST, ROOT, alive, dlperf, gone, make_cell
from dlperf.errors import UsageError
from dlperf.figures import CommFigures
from dlperf.measure.stats import bus_bandwidth
from dlperf.parallel import Rendezvous
from dlperf.protocol import (
    Built,
    Cell,
    Checking,
    Comm,
    Done,
    Error,
    Event,
    LossCheck,
    Ranks,
    Sample,
    Start,
    Unsupported,
)
from dlperf.runner.collect import ddp_measurement
from dlperf.runner.distributed import torchrun_command
from dlperf.runner.launch import KILL_GRACE_S, ChildResult
from dlperf.store import Store

# ----------------------------------------------------------------------------------------------------------------------
# Pure parts


def test_a_ddp_cell_has_its_own_key_and_column():
    plain = Cell("fcn-r", "torch", "cpu", 2, "fp32")
    ddp = Cell("fcn-r", "torch", "cpu", 1, "fp32", nproc=2, scaling="strong")
    assert plain.key == "fcn-r|torch|cpu|2|fp32" and plain.column == "cpu:2"  # unchanged by the new fields
    assert ddp.key == "fcn-r|torch|cpu|1|fp32|ddp:2:strong" and ddp.column == "ddp:2x1"
    assert Cell("fcn-r", "torch", "cuda", 4, "fp32", nproc=2, scaling="weak").column == "ddp:2xcuda"


def test_the_protocol_sets_the_total_batch():
    from dlperf.plan import ddp_workload
    from dlperf.workloads import BUILTIN

    fcn_r = BUILTIN["fcn-r"]
    strong = ddp_workload(fcn_r, Cell("fcn-r", "torch", "cpu", 1, "fp32", nproc=2, scaling="strong"))
    weak = ddp_workload(fcn_r, Cell("fcn-r", "torch", "cpu", 1, "fp32", nproc=2, scaling="weak"))
    assert strong.batch == 4096  # the paper's multi-GPU protocol for FCN-R, whatever N is
    assert weak.batch == 2 * 1024  # each process the single-device batch
    lstm = ddp_workload(BUILTIN["lstm"], Cell("lstm", "torch", "cpu", 1, "fp32", nproc=2, scaling="strong"))
    assert lstm.batch == 128  # no protocol batch: its own


def test_torchrun_command_never_restarts_and_meets_where_told():
    single = torchrun_command("py", 2, Rendezvous(), "job", "dlperf.worker.ddp", ["t.json", "r"], "/tmp/x/torchrun")
    assert single[:4] == ["py", "-P", "-m", "torch.distributed.run"] and "--standalone" in single
    assert "--log-dir=/tmp/x/torchrun" in single  # not a /tmp/torchelastic_* folder torchrun never removes
    assert "--nproc-per-node=2" in single and "--max-restarts=0" in single
    assert single[-8:] == ["--no-python", "py", "-u", "-P", "-m", "dlperf.worker.ddp", "t.json", "r"]
    multi = torchrun_command("py", 1, Rendezvous(2, 1, "10.0.0.1:29400", 30), "job", "m", [], "logs")
    for flag in ("--nnodes=2", "--node-rank=1", "--rdzv-backend=c10d", "--rdzv-endpoint=10.0.0.1:29400",
                 "--rdzv-id=job", "--rdzv-conf=join_timeout=30"):  # fmt: skip
        assert flag in multi
    assert "--standalone" not in multi


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"nnodes": 2}, "--rdzv-endpoint"),
        ({"nnodes": 2, "node_rank": 2, "endpoint": "h:1"}, "--node-rank 2"),
        ({"nnodes": 1, "endpoint": "nohost"}, "expected host:port"),
        ({"nnodes": 0}, "--nnodes"),
    ],
)
def test_rendezvous_is_validated(kwargs, message):
    with pytest.raises(UsageError, match=message):
        Rendezvous(**kwargs)


def test_bus_bandwidth_as_nccl_tests_reports_it():
    assert bus_bandwidth(1e9, 1.0, 2) == (1e9, 1e9)
    assert bus_bandwidth(1e9, 1.0, 8) == (1e9, 1e9 * 14 / 8)
    assert bus_bandwidth(1e9, 0.5, 1)[1] == 0.0


def test_spec_checks_ddp_flags():
    from dlperf.api import make_spec

    with pytest.raises(UsageError, match="--frameworks torch"):
        make_spec("tiny-fcn-r", frameworks="jax", nprocs="2")
    with pytest.raises(UsageError, match="add --nproc"):
        make_spec("tiny-fcn-r", nnodes=2, rdzv_endpoint="h:1")
    with pytest.raises(UsageError, match="--scaling"):
        make_spec("tiny-fcn-r", nprocs="2", scaling="linear")
    with pytest.raises(UsageError, match="--nproc"):
        make_spec("tiny-fcn-r", nprocs="0")


def _events(rank: int, samples: list[float], done: bool = True, error: str | None = None) -> list[Event]:
    events = [Start(pid=100 + rank, python="py", rank=rank, host="h"), Built(10, 0.0, {})]
    events += [Sample(t) for t in samples]
    if error:
        events.append(Error(error, rank=rank))
    if done:
        events += [Comm(CommFigures(gradient_bytes=40, bound="compute")), Done()]
    return events


def child(returncode=0, timed_out=False, stderr=""):
    return ChildResult(returncode, timed_out, 1.0, stderr)


def test_the_cell_is_the_slowest_process_and_keeps_every_process():
    m = ddp_measurement({0: _events(0, [1.0, 1.1, 1.0]), 1: _events(1, [1.2, 1.3, 1.2])}, child(), 60)
    assert m.status == "ok" and m.samples == [1.2, 1.3, 1.2]
    assert m.detail.slowest_rank == 1 and m.detail.ranks == [[1.0, 1.1, 1.0], [1.2, 1.3, 1.2]]
    assert m.detail.comm == CommFigures(gradient_bytes=40, bound="compute")


def test_every_node_of_a_job_stores_its_slowest_rank_whichever_node_ran_it():
    """Two nodes of one process each: node 0 stored rank 0's 2.15 ms, node 1 its own rank 1's 1.85 ms, though both
    held every rank's steps (the Ranks event). Each stores the job's slowest rank now."""
    everyone = [[2.15, 2.16, 2.15], [1.85, 1.86, 1.85]]
    for rank in (0, 1):
        events = _events(rank, everyone[rank])
        events.insert(-1, Ranks(everyone))
        m = ddp_measurement({rank: events}, child(), 60)
        assert m.samples == everyone[0] and m.detail.slowest_rank == 0 and m.detail.ranks == everyone


def test_the_loss_check_rank_0_ran_is_the_cells_whichever_process_was_slowest():
    """Rank 0 trains the mode against fp32 after the timed steps (`worker/ddp.py`); the cell stands on its slowest
    process's steps. A DDP bf16 cell had no check, and `table --best` said "no check ran: --no-loss-check"."""
    zero = _events(0, [1.0, 1.1, 1.0])
    zero[-1:-1] = [Checking(), LossCheck(True)]  # before its Done
    m = ddp_measurement({0: zero, 1: _events(1, [1.2, 1.3, 1.2])}, child(), 60)
    assert m.detail.slowest_rank == 1 and m.detail.loss_check.ok is True
    assert ddp_measurement({0: _events(0, [1.0]), 1: _events(1, [1.2])}, child(), 60).detail.loss_check is None


def test_a_failure_names_its_rank():
    failed = ddp_measurement({0: _events(0, [1.0], done=False), 1: _events(1, [], done=False, error="boom")},
                             child(returncode=1), 60)  # fmt: skip
    assert failed.status == "failed" and failed.error == "rank 1: boom"
    died = ddp_measurement({0: _events(0, [1.0]), 1: _events(1, [1.0], done=False)}, child(returncode=1), 60)
    assert died.status == "failed" and died.error.startswith("rank 1: worker exited with code 1")


def test_no_process_started_means_the_rendezvous_did_not_complete():
    m = ddp_measurement({}, child(returncode=None, timed_out=True), 20)
    assert m.status == "timeout" and "rendezvous did not complete within --timeout 20 s" in m.error
    m = ddp_measurement({}, child(returncode=1, stderr="RendezvousTimeoutError: nobody came"), 20)
    assert m.status == "failed" and "RendezvousTimeoutError: nobody came" in m.error


# ----------------------------------------------------------------------------------------------------------------------
# End to end: gloo, 2 processes on this machine


@pytest.mark.slow
def test_strong_scaling_cells_end_to_end(tmp_path, torch):
    db, tmp = tmp_path / "d.db", tmp_path / "tmp"
    tmp.mkdir()
    done = dlperf("run", "--workloads", "tiny-fcn-r,tiny-resnet-56", "--nproc", "1,2", "--threads", "1", *FAST,
                  db=db, timeout=600, env={"TMPDIR": str(tmp)})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list(tmp.iterdir())  # torchrun's logs (a torchelastic_* folder a job) went with the launcher's folder
    assert "ddp:1x1" in done.stdout and "ddp:2x1" in done.stdout and "strong scaling" in done.stdout
    store = Store.open(db, create=False)
    cells = {c.key: c for c in store.cells(1)}
    two = cells["tiny-fcn-r|torch|cpu|1|fp32|ddp:2:strong"]
    assert two.status == "ok" and two.nproc == 2 and two.scaling == "strong"
    [m] = store.measurements(1, two.key)
    detail = m.detail
    assert len(detail.ranks) == 2 and all(len(r) == len(detail.ranks[0]) for r in detail.ranks)
    assert m.samples == detail.ranks[detail.slowest_rank]
    assert detail.settings["world_size"] == 2 and detail.settings["per_process_batch"] == two.batch // 2
    assert detail.settings["timing"].endswith("; the step of the slowest process")
    comm = two.comm
    assert comm.gradient_bytes == 4 * two.params and comm.world == 2 and comm.backend == "gloo"
    assert comm.allreduce_s > 0 and comm.busbw_bytes_s == pytest.approx(comm.algbw_bytes_s)
    assert comm.local_step_s > 0 and comm.bound in ("compute", "communication")
    assert comm.param_bytes_rank == [4 * two.params] * 2 and comm.state_bytes_rank[0] >= 2 * 4 * two.params
    assert comm.peak_bytes_rank[0] >= comm.state_bytes_rank[0] + comm.gradient_bytes  # DDP's buckets: a gradient copy
    one = cells["tiny-fcn-r|torch|cpu|1|fp32|ddp:1:strong"]
    assert one.comm.busbw_bytes_s == 0.0  # one process: nothing crosses a link
    table = json.loads(dlperf("table", "--format", "json", db=db).stdout)
    assert table["columns"] == ["ddp:1x1", "ddp:2x1"]
    assert any("ddp:2x1 (strong scaling)" in n and "efficiency" in n for n in table["notes"])
    store.close()
    page = tmp_path / "r.html"
    assert dlperf("report", "-o", str(page), db=db).returncode == 0
    text = page.read_text()
    assert '<table class="ddp">' in text and "bound</td>" in text and 'data-chart="ddp-tiny-fcn-r"' in text


@pytest.mark.slow
def test_a_ddp_cell_in_bf16_is_checked_against_fp32_on_one_process(tmp_path, torch):
    db = tmp_path / "d.db"
    done = dlperf("run", "--workloads", "tiny-fcn-r", "--modes", "bf16", "--nproc", "2", "--threads", "1",
                  "--no-predict", *FAST, db=db, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(db, create=False)
    [cell] = store.cells(1)
    store.close()
    assert cell.status == "ok" and cell.nproc == 2
    assert cell.loss_check.ok is True and cell.loss_check.figures["mode_losses"], cell.loss_check
    best = dlperf("table", "--best", db=db)
    assert "not checked" not in best.stdout and "no check ran" not in best.stdout, best.stdout


@pytest.mark.slow
def test_weak_scaling_gives_each_process_the_batch(tmp_path, torch):
    db = tmp_path / "d.db"
    done = dlperf("run", "--workloads", "tiny-fcn-r", "--nproc", "2", "--threads", "1", "--scaling", "weak", *FAST,
                  db=db, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(db, create=False)
    [cell] = store.cells(1)
    assert cell.key.endswith("|ddp:2:weak") and cell.batch == 2 * 16
    assert store.measurements(1, cell.key)[0].detail.settings["per_process_batch"] == 16
    store.close()


KILLER = """
import os, signal, threading, time
if os.environ.get("RANK") and os.environ.get("DLPERF_TEST_KILL_AFTER"):  # every rank, and torchrun's agent above it
    with open(os.path.join(os.path.dirname(__file__), "pids"), "a") as f:
        f.write(f"{os.getpid()} {os.getppid()}\\n")
if os.environ.get("RANK") == "1" and os.environ.get("DLPERF_TEST_KILL_AFTER"):
    def _die():
        time.sleep(float(os.environ["DLPERF_TEST_KILL_AFTER"]))
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=_die, daemon=True).start()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workloads", "parallel", "columns"),
    [
        ("tiny-fcn-r,tiny-lstm", "ddp", ["ddp:2x1", "ddp:2x1"]),  # the second cell is still measured
        ("tiny-fcn-r", "fsdp,tp,pipeline", ["fsdp:2x1", "tp:2x1", "gpipe.m4:2x1", "1f1b.m4:2x1"]),  # every one
    ],
)
def test_a_rank_that_dies_fails_the_cell_and_the_sweep_goes_on(tmp_path, torch, workloads, parallel, columns):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILLER)  # rank 1 of every job kills itself mid-run
    db, timeout = tmp_path / "d.db", 120
    done = dlperf("run", "--workloads", workloads, "--nproc", "2", "--threads", "1", "--parallel", parallel,
                  "--min-steps", "3", "--min-time", "30", "--max-time", "60", "--timeout", str(timeout), db=db,
                  timeout=500, env={"PYTHONPATH": str(hook), "DLPERF_TEST_KILL_AFTER": "8"})  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    store = Store.open(db, create=False)
    cells, lives = store.cells(1), store.durations([1])
    store.close()
    # each job ended by its rank's death, not by --timeout: the launcher's own clock of each job's life
    assert [len(lives[c.key]) for c in cells] == [1] * len(columns), lives
    assert all(life < timeout for c in cells for life in lives[c.key]), lives
    assert [c.column for c in cells] == columns and [c.status for c in cells] == ["failed"] * len(columns)
    assert all(c.error.startswith("rank 1:") and "SIGKILL" in c.error for c in cells), [c.error for c in cells]
    pids = {int(p) for p in (hook / "pids").read_text().split()}  # each job's 2 ranks and its agent
    assert len(pids) == 3 * len(columns) and gone(list(pids)), pids


RANK_1_OUT_OF_MEMORY = """
import os, torch, dlperf


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 2)

    def forward(self, x):
        if os.environ.get("RANK") == "1":  # the job's rank 1 only, the first time it runs
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return self.fc2(torch.relu(self.fc1(x)))


def make():
    batch = lambda n, device: (torch.randn(n, 8, device=device), torch.randint(2, (n,), device=device))
    return dlperf.user_workload("rank1-oom", Net(), batch, torch.nn.functional.cross_entropy, batch_size=8)
"""


@pytest.mark.slow
def test_one_rank_out_of_memory_in_its_first_step_ends_the_job_as_it_raises(tmp_path, torch):
    """A user's forward running out of memory on rank 1 alone, the first time it runs. Under FSDP, rank 1 waited to
    agree with rank 0 in an all-reduce while rank 0 waited in the sharded forward's all-gather: the job hung until
    --timeout (40 s here; 78 s after the failure with --timeout 90), stored `timeout` with rank 0's "exceeded
    --timeout". Under DDP it ended, stored with rank 0's "Connection reset by peer". Each cell now ends as rank 1
    raises, failed with its out of memory, and no process of either job is left."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILLER)  # each job's ranks and agent noted; no kill within the test
    (tmp_path / "mine.py").write_text(RANK_1_OUT_OF_MEMORY)
    db, timeout = tmp_path / "d.db", 40
    done = dlperf("run", "--workloads", f"{tmp_path / 'mine.py'}:make", "--nproc", "2", "--threads", "1",
                  "--parallel", "ddp,fsdp", *FAST, "--timeout", str(timeout), db=db, timeout=300,
                  env={"PYTHONPATH": str(hook), "DLPERF_TEST_KILL_AFTER": "3600"})  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    store = Store.open(db, create=False)
    cells, lives = store.cells(1), store.durations([1])
    store.close()
    said = (
        "out of memory on rank 1 at batch 8, 4 a process: OutOfMemoryError: CUDA out of memory. Tried to allocate "
        "2.00 GiB"
    )
    assert sorted((c.column, c.status) for c in cells) == [("ddp:2x1", "failed"), ("fsdp:2x1", "failed")], cells
    assert all(c.error.startswith(said) for c in cells), [c.error for c in cells]
    assert all(life < timeout for c in cells for life in lives[c.key]), lives
    pids = {int(p) for p in (hook / "pids").read_text().split()}
    assert len(pids) == 3 * len(cells) and gone(list(pids)), pids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_rendezvous_that_never_completes_times_out_and_leaves_nothing(tmp_path, torch):
    from dlperf.measure.system import descendants

    db, timeout = tmp_path / "d.db", 20
    cmd = [sys.executable, "-m", "dlperf", "run", "--workloads", "tiny-fcn-r", "--nproc", "1", "--nnodes", "2",
           "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--timeout", str(timeout), *FAST,
           "--db", str(db)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[int] = set()
    while proc.poll() is None:
        seen.update(descendants(proc.pid))
        time.sleep(0.5)
    assert proc.returncode == 1, proc.stderr.read()[-3000:]
    store = Store.open(db, create=False)
    [cell], [[lived]] = store.cells(1), store.durations([1]).values()
    store.close()
    assert cell.status in ("failed", "timeout") and "rendezvous" in cell.error.lower()
    # the job's life, by the launcher's clock: the --timeout, then at most the grace between its SIGTERM and SIGKILL,
    # with 2 s for the launcher's 0.25 s polls on a loaded machine
    assert timeout <= lived < timeout + KILL_GRACE_S + 2, lived
    assert seen and not any(alive(p) for p in seen)


def _env(**extra) -> dict:
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **extra}
    return env


@pytest.mark.slow
def test_two_nodes_on_one_machine_over_loopback(tmp_path, torch):
    endpoint = f"127.0.0.1:{free_port()}"
    procs = []
    for node in (0, 1):
        cmd = [sys.executable, "-m", "dlperf", "run", "--workloads", "tiny-fcn-r", "--nproc", "1", "--threads", "1",
               "--nnodes", "2", "--node-rank", str(node), "--rdzv-endpoint", endpoint, "--timeout", "120", *FAST,
               "--db", str(tmp_path / f"node{node}.db")]  # fmt: skip
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=_env(GLOO_SOCKET_IFNAME="lo"), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    for node in (0, 1):
        store = Store.open(tmp_path / f"node{node}.db", create=False)
        [cell] = store.cells(1)
        [m] = store.measurements(1, cell.key)
        store.close()
        detail = m.detail
        assert cell.status == "ok" and cell.nproc == 2 and cell.key.endswith("|ddp:2:strong")
        assert detail.settings["world_size"] == 2 and len(detail.ranks) == 2  # both nodes' steps, on each node


# ----------------------------------------------------------------------------------------------------------------------
# DataParallel: one process, every GPU


def test_dataparallel_is_unsupported_on_a_cpu_saying_why(torch):
    from dlperf.frameworks.torch import backend as torch_backend
    from dlperf.workloads import BUILTIN

    with pytest.raises(NotImplementedError, match="applies to CUDA GPUs only"):
        torch_backend.build(BUILTIN["tiny-fcn-r"], "cpu", "dataparallel")


@pytest.mark.gpu(2)
def test_dataparallel_steps_on_every_gpu(torch):
    from dlperf.frameworks.torch import backend as torch_backend
    from dlperf.workloads import BUILTIN

    step = torch_backend.build(BUILTIN["tiny-fcn-r"], "cuda:0", "dataparallel")
    assert isinstance(step.forward, torch.nn.DataParallel) and step.mode_settings["data_parallel_gpus"] >= 2
    step.step()
    step.sync()


def test_a_crash_after_every_process_reported_keeps_the_measurement():
    m = ddp_measurement({0: _events(0, [1.0]), 1: _events(1, [1.1])}, child(returncode=1), 60)
    assert m.status == "ok" and m.detail.exit_after_result == "worker exited with code 1"


TORCHRUN_SUMMARY = """
Failures:
[1]:
  time      : 2026-11-22_16:04:25
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 14957)
  error_file: <N/A>
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_16:04:25
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 14956)  (SIGKILL)
"""


def test_the_process_that_was_killed_is_named_not_the_one_that_lost_its_peer():
    from dlperf.runner.collect import torchrun_exits

    exits = torchrun_exits(TORCHRUN_SUMMARY)
    assert exits == {0: 1, 1: -9}
    lost = _events(0, [1.0], done=False, error="RuntimeError: Connection reset by peer")
    m = ddp_measurement({0: lost, 1: _events(1, [1.0], done=False)}, child(returncode=1), 60, exits)
    assert m.status == "failed" and m.error.startswith("rank 1: worker killed by SIGKILL")
    without = ddp_measurement({0: lost, 1: _events(1, [1.0], done=False)}, child(returncode=1), 60)
    assert without.error == "rank 0: RuntimeError: Connection reset by peer"  # all there is to go by


def _raised(rank: int, error: str, at: float) -> list[Event]:
    events = _events(rank, [1.0], done=False, error=error)
    return [replace(e, at=at) if isinstance(e, Error) else e for e in events]


def test_the_rank_that_raised_first_is_named_not_the_one_that_lost_its_peer():
    """Rank 1 ran out of memory and left; rank 0's collective then failed, and the cell was stored with rank 0's
    error, the consequence ("rank 0: RuntimeError: [.../pair.cc:553] Connection closed by peer"), in every strategy.
    The error raised first is the job's, whichever rank raised it."""
    oom, lost = "out of memory: OutOfMemoryError: CUDA out of memory.", "RuntimeError: Connection closed by peer"
    m = ddp_measurement({0: _raised(0, lost, 101.0), 1: _raised(1, oom, 100.0)}, child(returncode=1), 60)
    assert m.status == "failed" and m.error == "out of memory on rank 1: OutOfMemoryError: CUDA out of memory."
    m = ddp_measurement({0: _raised(0, "boom", 100.0), 1: _raised(1, lost, 100.5)}, child(returncode=1), 60)
    assert m.error == "rank 0: boom"


@pytest.mark.parametrize(
    ("raised", "stored"),
    [
        ("out of memory (MemoryError)", "out of memory on rank 1 (MemoryError)"),  # the worker's, for a MemoryError
        ("out of memory at batch 8: MemoryError: no room", "out of memory on rank 1 at batch 8: MemoryError: no room"),
    ],
)
def test_a_rank_out_of_memory_is_read_as_out_of_memory_as_a_one_process_cell_is(raised, stored):
    """Rank 1's MemoryError (a user's model under `--nproc 2 --parallel ddp,fsdp,tp`) was stored as "rank 1: out of
    memory (MemoryError)": every view (the table, html, fit, `list --runs`' count, the run's progress line) read the
    cell as `failed`, where a one-process cell out of memory reads as out of memory, since they read the reason's
    start. The kind comes first now, the rank after it."""
    from dlperf.progress import outcome
    from dlperf.report.fit import out_of_memory

    lost = "RuntimeError: Connection closed by peer"
    m = ddp_measurement({0: _raised(0, lost, 101.0), 1: _raised(1, raised, 100.0)}, child(returncode=1), 60)
    assert m.status == "failed" and m.error == stored
    assert out_of_memory(make_cell(nproc=2, parallel="fsdp", status="failed", error=m.error))
    assert outcome(m, None) == stored  # the run's line says it as a one-process cell's: no "failed: " before it
    assert not out_of_memory(make_cell(nproc=2, parallel="fsdp", status="failed", error=f"rank 1: {lost}"))


def test_a_rank_out_of_memory_keeps_its_own_words_as_a_one_process_cell_does():
    """A user's model raising MemoryError("rank 1 asked for too much") on rank 1 under `--nproc 2 --parallel ddp`
    was stored "out of memory on rank 1 (MemoryError)", the user's words dropped, where a one-process cell keeps them
    ("out of memory at batch 8: MemoryError: ..."): the parallel worker left the error to `child.serve`, which says a
    bare MemoryError so. Each rank now says it as the one-process worker does, its batch and its words."""
    from types import SimpleNamespace

    from dlperf.measure.timer import TimerConfig
    from dlperf.protocol import DDPTask
    from dlperf.worker import ddp
    from dlperf.worker.child import OutOfMemory
    from dlperf.workloads import BUILTIN

    def build(workload, cell, group):
        raise MemoryError("rank 1 asked for too much")

    engine = SimpleNamespace(configure_threads=lambda threads: {}, init=lambda device, timeout: None, build=build)
    workload = BUILTIN["tiny-fcn-r"].to_json()
    task = DDPTask(Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32", nproc=2, parallel="ddp"), 0, workload, TimerConfig())
    with pytest.raises(OutOfMemory) as raised:  # serve reports an OutOfMemory's own words
        ddp.run_process(task, [].append, lambda: engine)
    said = f"out of memory at batch {workload['batch']}: MemoryError: rank 1 asked for too much"
    assert str(raised.value) == said
    lost = "RuntimeError: Connection closed by peer"
    m = ddp_measurement({0: _raised(0, lost, 101.0), 1: _raised(1, said, 100.0)}, child(returncode=1), 60)
    assert m.error == f"out of memory on rank 1 at batch {workload['batch']}: MemoryError: rank 1 asked for too much"


@pytest.mark.parametrize(
    ("oom_kills", "said"),
    [
        (0, "(sent by a process: the kernel's out-of-memory killer counted no kill while it ran)"),
        (2, "(out of memory: the kernel's out-of-memory killer killed a process while it ran)"),
        (None, "(killed: out of memory?)"),  # no counter to read: it may be
    ],
)
def test_a_killed_rank_is_out_of_memory_only_where_the_kernels_oom_killer_counted_a_kill(oom_kills, said):
    """A rank SIGKILLed by another process was said "out of memory?" though the counter, read, had not risen: the
    rule of a one-process cell (`launch.signal_reason`) holds for a rank too."""
    from dlperf.runner.launch import Launched
    from dlperf.runner.sweep import ddp_outcome

    lost = _events(0, [1.0], done=False, error="RuntimeError: Connection reset by peer")
    agent = ChildResult(1, False, 1.0, "", oom_kills=oom_kills)  # torchrun's agent exits 1 when a rank dies
    m = ddp_outcome(Launched(agent, {0: lost, 1: _events(1, [1.0], done=False)}, TORCHRUN_SUMMARY), 60)
    assert m.status == "failed" and m.error == f"rank 1: worker killed by SIGKILL {said}"


def test_a_failed_jobs_out_of_memory_count_is_read_though_its_agent_was_not_killed(tmp_path, monkeypatch):
    """torchrun's agent exits 1 where a rank was killed: the count is read for it, not only for a SIGKILLed child."""
    from dlperf.measure import system
    from dlperf.runner.launch import run_child

    reads = iter([5, 5])  # before the child, after it
    monkeypatch.setattr(system, "oom_kills", lambda: next(reads))
    done = run_child([sys.executable, "-c", "raise SystemExit(1)"], {}, 60, tmp_path)
    assert done.returncode == 1 and done.oom_kills == 0


@pytest.mark.slow
@pytest.mark.gpu(2)
def test_nccl_cells_one_gpu_per_process(tmp_path, torch):
    db = tmp_path / "d.db"
    done = dlperf("run", "--workloads", "tiny-resnet-56", "--devices", "cuda", "--nproc", "2", *FAST, db=db,
                  timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(db, create=False)
    [cell] = store.cells(1)
    store.close()
    assert cell.status == "ok" and cell.comm.backend == "nccl"
    assert cell.settings["device"].startswith("cuda")


def test_unsupported_on_rank_0_is_unsupported_not_a_failure():
    events = {r: [Start(pid=r, python="py", rank=r), Unsupported("checkpoint under DDP")] for r in (0, 1)}
    m = ddp_measurement(events, child(), 60)
    assert m.status == "unsupported" and m.error == "rank 0: checkpoint under DDP"


@pytest.mark.slow
def test_a_user_workload_is_planned_under_every_strategy(tmp_path, torch):
    """A user workload is asked for by its source and stored by its name: the multi-process plan finds it."""
    source = f"{ROOT / 'examples' / 'my_model.py'}:make"
    done = dlperf("run", "--workloads", source, "--nproc", "2", "--parallel", "ddp,gpipe", "--dry-run",
                  db=tmp_path / "d.db", timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "small-convnet torch ddp:2x1 fp32" in done.stdout and "small-convnet torch gpipe.m4:2x1 fp32" in done.stdout


def test_a_rank_imports_its_framework_after_the_allocators_mode_is_set(monkeypatch):
    """The allocator's mode is the process's, set before the framework's import as a one-process cell sets it
    (`heap.applied`): a TensorFlow worker imported TensorFlow first (its engine was built before `ddp.measure` ran),
    and its threads' arenas were made before malloc_keep's one arena. The engine is now imported by `measure`."""
    from dlperf.measure.timer import TimerConfig
    from dlperf.protocol import MultiWorkerTask
    from dlperf.worker import ddp, multiworker
    from dlperf.workloads import BUILTIN

    order = []
    monkeypatch.setattr(ddp.heap, "applied", lambda mode: order.append(("allocator", mode)) or {})

    def engine():
        order.append(("import", "tensorflow"))
        raise ImportError("no tensorflow here")

    cell = Cell("tiny-fcn-r", "tensorflow", "cpu", 1, "malloc_keep", nproc=2, parallel="ddp")
    task = MultiWorkerTask(cell, 0, BUILTIN["tiny-fcn-r"].to_json(), TimerConfig())
    with pytest.raises(ImportError):
        ddp.measure(task, [].append, engine)
    assert order == [("allocator", "malloc_keep"), ("import", "tensorflow")]

    handed = []
    monkeypatch.setattr(ddp, "run_process", lambda task, emit, engine: handed.append(engine))
    multiworker.run_process(task, [].append)  # hands over how to import TensorFlow; does not import it
    assert handed == [multiworker.tensorflow_engine] and "dlperf.frameworks.tensorflow.multiworker" not in sys.modules
