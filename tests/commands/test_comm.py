"""`dlperf comm`: all-reduce time and bus bandwidth over message sizes, through torchrun and torch.distributed."""

import json
import math
import os
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import ROOT, alive, dlperf, one_line_error
from dlperf import flagtext
from dlperf.answers import CommAnswer
from dlperf.cli import build_parser
from dlperf.commands import comm
from dlperf.errors import UsageError
from dlperf.measure.stats import bus_bandwidth
from dlperf.measure.system import descendants
from dlperf.parallel import Rendezvous
from dlperf.protocol import Answer, AnswerPart, Error, Joined
from dlperf.runner import comm as job
from dlperf.runner.distributed import rendezvous_id, torchrun_command
from dlperf.runner.launch import KILL_GRACE_S, ChildInterrupted, ChildResult, Launched
from dlperf.store import MIGRATIONS, SCHEMA_VERSION, Store
from dlperf.store.machine import MeasuredComm

K, M = 2**10, 2**20
QUICK = ["--threads", "1", "--iters", "3", "--warmup", "1"]


def opts_of(*flags: str) -> comm.CommOptions:
    """The options `dlperf comm FLAGS` would run with."""
    return comm.options(build_parser().parse_args(["comm", *flags]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------------------------------------------------
# Pure: sizes, bandwidths, the torchrun command, the rendezvous


def test_a_size_range_grows_by_the_factor_up_to_the_last_size():
    assert comm.parse_sizes("4K:64M", 4) == (4 * K, 16 * K, 64 * K, 256 * K, M, 4 * M, 16 * M, 64 * M)
    assert comm.parse_sizes("4K:1M", 16) == (4 * K, 64 * K, M)
    assert comm.parse_sizes("4K:100K", 4) == (4 * K, 16 * K, 64 * K)  # never past the last
    assert comm.parse_sizes("1K:1K", 2) == (K,)


def test_sizes_take_units_and_comma_lists():
    assert [comm.parse_size(t) for t in ("4096", "4K", "4k", "64M", "1G", "8", "4KiB", "2MB")] == [
        4096, 4096, 4096, 64 * M, 2**30, 8, 4096, 2_000_000,
    ]  # fmt: skip  # KB, MB: powers of 1000, as --max-memory's (they were 1024 here alone)
    assert comm.parse_sizes("1M,4K,4096", 4) == (4 * K, M)


def test_size_text_is_what_parse_size_reads_back():
    sizes = [4, 1000, 4096, 6 * K, 64 * M, 3 * 2**30, 2**40, 4 * K + 4]
    assert [flagtext.size_text(n) for n in sizes] == ["4", "1000", "4K", "6K", "64M", "3G", "1024G", "4100"]
    assert [comm.parse_size(flagtext.size_text(n)) for n in sizes] == sizes


@pytest.mark.parametrize(
    ("text", "factor", "fragment"),
    [
        ("3", 4, "--sizes '3': a size must be a positive multiple of 4 bytes"),
        ("0", 4, "a size above 0 bytes"),
        ("4X", 4, "--sizes '4X': expected a size such as"),
        ("-4K", 4, "expected a size"),
        ("64M:4K", 4, "the first size must not exceed the last"),
        ("4K:", 4, "--sizes ''"),
        ("4K,,1M", 4, "expected MIN:MAX or a comma list"),
        ("4K:1M", 1, "--factor 1: must be at least 2"),
    ],
)
def test_bad_sizes_name_the_flag(text, factor, fragment):
    with pytest.raises(UsageError, match=r"^--") as err:
        comm.parse_sizes(text, factor)
    assert fragment in str(err.value)


@pytest.mark.parametrize(("world", "share"), [(1, 0.0), (2, 1.0), (8, 2 * 7 / 8)])
def test_bus_bandwidth_is_the_algorithm_bandwidth_times_2_n_minus_1_over_n(world, share):
    algbw, busbw = bus_bandwidth(64 * M, 0.01, world)
    assert algbw == pytest.approx(64 * M / 0.01)
    assert busbw == pytest.approx(algbw * share)
    assert all(math.isnan(x) for x in bus_bandwidth(64 * M, 0.0, world))


def test_torchrun_command_standalone_and_multi_node():
    one = torchrun_command("py", 2, Rendezvous(), "job", "dlperf.worker.comm", ["t.json", "r.json"], "logs")
    assert one[:4] == ["py", "-P", "-m", "torch.distributed.run"]
    assert {"--nproc-per-node=2", "--max-restarts=0", "--standalone"} <= set(one)
    assert one[-5:] == ["-P", "-m", "dlperf.worker.comm", "t.json", "r.json"]
    assert not [a for a in one if a.startswith("--rdzv")]
    rdzv = Rendezvous(2, 1, "10.0.0.1:29400", join_timeout_s=20)
    two = torchrun_command("py", 4, rdzv, "job", "m", [], "logs")
    assert "--standalone" not in two and "--max-restarts=0" in two and "--nproc-per-node=4" in two
    assert {"--nnodes=2", "--node-rank=1", "--rdzv-backend=c10d", "--rdzv-endpoint=10.0.0.1:29400", "--rdzv-id=job",
            "--rdzv-conf=join_timeout=20"} <= set(two)  # fmt: skip


def test_every_node_names_the_same_rendezvous_id_whatever_its_threads():
    ids = set()
    for node_rank, threads in ((0, 1), (1, 2)):
        opts = opts_of("--nnodes", "2", "--node-rank", str(node_rank), "--rdzv-endpoint", "h:1")
        ids.add(job.job_id(opts.job, job.task_of(opts.job, threads)))
    other = opts_of("--nnodes", "2", "--rdzv-endpoint", "h:1", "--iters", "6")
    assert len(ids) == 1 and ids.pop() != job.job_id(other.job, job.task_of(other.job, 1))
    assert rendezvous_id("a", 1) == rendezvous_id("a", 1) != rendezvous_id("a", 2)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"nnodes": 0}, "--nnodes must be at least 1"),
        ({"nnodes": 2, "node_rank": 2, "endpoint": "h:1"}, "--node-rank 2: must be between 0 and --nnodes - 1 (1)"),
        ({"nnodes": 2}, "--nnodes above 1 needs --rdzv-endpoint host:port"),
        ({"nnodes": 2, "endpoint": "nohost"}, "--rdzv-endpoint 'nohost': expected host:port"),
        ({"nnodes": 2, "endpoint": "h:70000"}, "expected host:port"),
    ],
)
def test_rendezvous_validation_names_the_flag(kwargs, fragment):
    with pytest.raises(UsageError) as err:
        Rendezvous(**kwargs)
    assert fragment in str(err.value)


def test_threads_share_the_cores_and_oversubscription_is_a_warning():
    warnings = []
    assert comm.threads_per_process(None, 2, 8, warnings) == 4 and warnings == []
    assert comm.threads_per_process(None, 4, 2, warnings) == 1
    assert "--nproc 4 x --threads 1 = 4 threads exceed the 2 usable cores" in warnings.pop()
    assert comm.threads_per_process(3, 1, 2, warnings) == 3 and "exceed the 2 usable cores" in warnings.pop()


def test_a_failure_says_why_in_one_line():
    opts = opts_of("--nnodes", "2", "--rdzv-endpoint", "h:1", "--timeout", "9")
    stderr = "Traceback...\nRendezvousTimeoutError\n=========\n"
    crashed, hung = ChildResult(1, False, 1.0, stderr), ChildResult(None, True, 9.0, "")
    assert job.failure_reason(opts.job, crashed, [Joined(), Answer({})]) is None
    cause, lost = Error("E: x", rank=1), Error("connection reset by peer", rank=0)  # the cause happened first
    assert job.failure_reason(opts.job, crashed, [Joined(), lost, cause]) == "rank 1: E: x"
    never = job.failure_reason(opts.job, hung, [])
    assert "the 2 nodes never met at --rdzv-endpoint h:1 within --timeout 9 s" in never
    assert "(RendezvousTimeoutError)" in job.failure_reason(opts.job, crashed, [])
    assert job.failure_reason(opts.job, hung, [Joined()]) == "exceeded --timeout 9 s"
    assert job.failure_reason(opts.job, crashed, [Joined()]) == "worker exited with code 1: RendezvousTimeoutError"


def test_a_failure_of_a_rank_other_than_0_is_found():
    """Found on an H200: with 2 processes on 1 GPU, rank 1 refused and rank 0 waited; read from rank 0's events
    alone, the reason was torchrun's "worker exited with code 1". The job's reason reads every rank's."""
    from dlperf.runner.launch import Launched

    opts = opts_of("--timeout", "9")
    crashed = ChildResult(1, False, 1.0, "Traceback...\nChildFailedError\n")
    refused = Error("RuntimeError: --backend nccl: process 1 of this node has no GPU of its own", rank=1)
    launched = Launched(crashed, {1: [refused], 0: []}, "")
    assert launched.every_rank == [refused]
    assert job.failure_reason(opts.job, crashed, launched.main).startswith("worker exited with code 1")
    assert job.failure_reason(opts.job, crashed, launched.every_rank) == f"rank 1: {refused.error}"


# ----------------------------------------------------------------------------------------------------------------------
# The store: schema version 4


def comm_row(nbytes, backend="gloo", world=2):
    job = {"backend": backend, "device": "cpu", "world": world, "nnodes": 1, "threads": 1}
    figures = {"bytes": nbytes, "time_s": 1e-3, "algbw": nbytes / 1e-3, "busbw": nbytes / 1e-3, "wrong": 0}
    return MeasuredComm(**job, **figures, detail={"iters": 5})


def test_a_jobs_answer_is_stored_one_row_per_size_the_rest_of_it_in_the_detail():
    from test_answers import COMM_WIRE

    opts = opts_of("--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "h:1")
    [row] = job.comm_records(CommAnswer.from_json(COMM_WIRE), opts.job)
    size = COMM_WIRE["sizes"][0]
    assert (row.backend, row.device, row.world, row.nnodes, row.threads, row.op) == (
        "gloo",
        "cpu",
        2,
        1,
        1,
        "all_reduce",
    )
    assert (row.bytes, row.time_s, row.algbw, row.busbw, row.wrong) == (4096, 1e-4, 4.1e7, 4.1e7, 0)
    common = {k: v for k, v in COMM_WIRE.items() if k != "sizes"}
    rest = {k: size[k] for k in ("count", "rank_medians_s", "samples_max_s")}
    assert json.dumps(row.detail) == json.dumps({**common, "node_rank": 1, "rdzv_endpoint": "h:1", **rest})


def test_comm_rows_are_stored_with_the_machine_newest_first(tmp_path):
    store = Store.open(tmp_path / "d.db", create=True)
    first = store.record_comm({"hostname": "here"}, {"cores": {}}, [comm_row(4 * K), comm_row(M)])
    second = store.record_comm({"hostname": "here"}, {}, [comm_row(4 * K, world=4)])
    rows = store.comm_results()
    assert [r.id for r in rows] == [*second, *reversed(first)]
    assert rows[0].op == "all_reduce" and rows[0].fingerprint == {"hostname": "here"}
    assert rows[0].detail == {"iters": 5} and rows[0].world == 4
    assert [r.bytes for r in store.comm_results(world=2)] == [M, 4 * K]
    assert [r.id for r in store.comm_results(nbytes=4 * K, world=2)] == first[:1]
    assert store.comm_results(backend="nccl") == []
    store.close()


def test_a_v3_file_is_upgraded_and_gets_the_comm_table(tmp_path):
    import sqlite3

    assert SCHEMA_VERSION >= 4
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for version in (1, 2, 3):
        for statement in MIGRATIONS[version]:
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    conn.commit()
    conn.close()
    store = Store.open(path, create=False)
    assert store.comm_results() == []
    store.record_comm({}, {}, [comm_row(4 * K)])
    (version,) = store.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == str(SCHEMA_VERSION) and "comm" in {
        r[0] for r in store.conn.execute("SELECT name FROM sqlite_master")
    }
    store.close()


# ----------------------------------------------------------------------------------------------------------------------
# End to end: torchrun, gloo, CPU


@pytest.mark.slow
def test_two_processes_measure_every_size_correctly_and_store_it(tmp_path, torch):
    """The gloo all-reduce of every size summed right on both ranks, and stored."""
    db = tmp_path / "tmp.db"
    proc = dlperf("comm", "--nproc", "2", *QUICK, "--sizes", "4K:1M", "--factor", "16", "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["backend"], out["device"], out["world"], out["nnodes"], out["threads"]) == ("gloo", "cpu", 2, 1, 1)
    assert out["settings"]["torch_threads"] == 1 and out["torch_version"] == torch.__version__
    assert [s["bytes"] for s in out["sizes"]] == [4 * K, 64 * K, M]
    for s in out["sizes"]:
        assert s["wrong"] == 0 and s["count"] == s["bytes"] // 4 and s["time_s"] > 0
        assert s["time_s"] == max(s["rank_medians_s"]) and len(s["rank_medians_s"]) == 2
        assert s["algbw"] == pytest.approx(s["bytes"] / s["time_s"]) and s["busbw"] == pytest.approx(s["algbw"])
        assert len(s["samples_max_s"]) == 3
    store = Store.open(db, create=False)
    try:
        rows = store.comm_results()
        env = json.loads(store.conn.execute("SELECT env_json FROM comm LIMIT 1").fetchone()[0])
    finally:
        store.close()
    assert sorted(r.id for r in rows) == sorted(s["id"] for s in out["sizes"])
    assert sorted(r.bytes for r in rows) == [4 * K, 64 * K, M]
    assert all(r.fingerprint["frameworks"]["torch"] == torch.__version__ and r.wrong == 0 for r in rows)
    assert env["frameworks"]["torch"]["version"] == torch.__version__ and rows[0].fingerprint["cores"]


def test_the_wrong_element_check_counts_every_element_summed_wrong(torch, monkeypatch):
    """Rank 0 of 2, its all-reduces faked (frameworks/torch/comm.py): a sum that lost 3 elements is 3 wrong, added to
    the other rank's count; a right sum is 0."""
    from dlperf.frameworks.torch import comm as ranks

    def all_reduce(lost, others_wrong, tensor, op=None):
        if tensor.dtype == torch.float32:  # the message: rank 1 sent 2s
            tensor.add_(2)
            tensor[:lost] = 0
        else:  # the count of wrong elements, summed over the ranks
            tensor.add_(others_wrong)

    for lost, others, wrong in ((0, 0, 0), (3, 0, 3), (3, 5, 8)):
        monkeypatch.setattr(ranks.dist, "all_reduce", partial(all_reduce, lost, others))
        assert ranks.wrong_elements(torch.empty(1024), 0, 2, lambda: None) == wrong, (lost, others)


@pytest.mark.slow
def test_two_nodes_on_one_machine_meet_over_loopback(tmp_path, torch):
    endpoint = f"127.0.0.1:{free_port()}"
    procs = [
        node(tmp_path, rank, endpoint, "--timeout", "120", "--format", fmt) for rank, fmt in ((0, "json"), (1, "text"))
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    result = json.loads(outs[0][0])
    assert (result["world"], result["nnodes"], result["nproc"]) == (2, 2, 1)
    assert all(s["wrong"] == 0 for s in result["sizes"])
    assert "world size 2 = 2 nodes x 1 process" in outs[1][0] and "1 size stored" in outs[1][0]


def node(tmp_path, rank: int, endpoint: str, *flags: str) -> subprocess.Popen:
    """One `dlperf comm` node of a two-node job, its own store."""
    where = ["--nnodes", "2", "--node-rank", str(rank), "--nproc", "1", "--rdzv-endpoint", endpoint]
    db = str(tmp_path / f"node{rank}.db")
    cmd = [sys.executable, "-m", "dlperf", "comm", *where, *QUICK, "--sizes", "64K", "--db", db, *flags]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def is_torchrun(pid: int) -> bool:
    """Whether `pid` is a job's torchrun (`python -m dlperf.worker.lifeline torch.distributed.run ...`), not the probe
    that dlperf asks first."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"torch.distributed.run" in f.read()
    except OSError:
        return False


@pytest.mark.slow
def test_a_rendezvous_that_never_completes_times_out_and_leaves_nothing_behind(tmp_path, torch):
    timeout, poll_s = 20, 0.5
    proc = node(tmp_path, 0, f"127.0.0.1:{free_port()}", "--timeout", str(timeout))
    seen: set[int] = set()
    job_seen = None  # when the job's torchrun was first seen: within a poll of the launcher starting it
    while proc.poll() is None:
        found = descendants(proc.pid)
        if job_seen is None and any(map(is_torchrun, found)):
            job_seen = time.monotonic()
        seen |= set(found)
        time.sleep(poll_s)
    _, stderr = proc.communicate()
    assert proc.returncode == 1, stderr
    assert "the 2 nodes never met at --rdzv-endpoint 127.0.0.1:" in stderr and "--timeout 20 s" in stderr, stderr
    assert job_seen is not None, f"no torchrun among {seen}"
    # ended by --timeout: not before it (less two polls: the one that missed the job's start, and the scan that saw
    # it), nor later than the launcher's grace between its SIGTERM and SIGKILL, with 3 s for the polls and the
    # parent's exit on a loaded machine
    lived = time.monotonic() - job_seen
    assert timeout - 2 * poll_s <= lived < timeout + KILL_GRACE_S + 3, lived
    assert seen and not [pid for pid in seen if alive(pid)]  # torchrun and its agent were there, and are gone
    assert not (tmp_path / "node0.db").exists() or Store.open(tmp_path / "node0.db", create=False).comm_results() == []


# ----------------------------------------------------------------------------------------------------------------------
# Bad input and NCCL


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--nproc", "0"], "--nproc '0': expected a whole number of at least 1"),
        (["--sizes", "3"], "--sizes '3': a size must be a positive multiple of 4"),
        (["--node-rank", "2", "--nnodes", "2"], "--node-rank 2: must be between 0 and --nnodes - 1 (1)"),
        (["--nnodes", "2"], "--nnodes above 1 needs --rdzv-endpoint"),
        (["--format", "xml"], "--format 'xml': expected text or json"),
        (["--backend", "mpi"], "--backend 'mpi': expected gloo or nccl"),
        (["--iters", "0"], "--iters '0': expected a whole number of at least 1"),
        (["--threads", "100000"], "--threads 100000: at most 8 per usable core"),  # warned of, then started the job
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, flags, fragment):
    one_line_error(dlperf("comm", *flags, db=tmp_path / "d.db"), fragment)
    assert not (tmp_path / "d.db").exists()


def test_nccl_without_cuda_is_a_clear_error_from_the_probe_and_from_the_ranks(tmp_path, torch):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present: NCCL is measured instead (test_nccl_on_cuda)")
    one_line_error(dlperf("comm", "--backend", "nccl", "--nproc", "1", db=tmp_path / "d.db"),
                   "--backend nccl needs CUDA GPUs")  # fmt: skip
    opts = opts_of("--backend", "nccl", "--nproc", "1", "--sizes", "4K", "--iters", "1", "--timeout", "60")
    launched = job.run_job(opts.job, sys.executable, 1)  # past the probe: the rank itself refuses
    reason = job.failure_reason(opts.job, launched.child, launched.every_rank)
    assert reason.startswith("rank 0: RuntimeError: --backend nccl needs CUDA GPUs"), reason


@pytest.mark.gpu
def test_nccl_on_cuda(tmp_path, torch):
    proc = dlperf("comm", "--backend", "nccl", "--nproc", "1", *QUICK, "--sizes", "4K:1M", "--format", "json",
                  db=tmp_path / "d.db")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["device"] == "cuda" and all(s["wrong"] == 0 and s["time_s"] > 0 for s in out["sizes"])


# --nproc above the GPUs this node sees: refused by the probe's device list, and by the rank with no GPU of its own


def test_nccl_over_more_processes_than_gpus_is_refused_before_the_job(tmp_path, monkeypatch, capsys):
    """The probe's device list faked to one GPU (tests/test_answers.py's): --nproc 2 is one line, exit 2, nothing
    launched or stored; --nproc 1 fits, and no GPU at all is said apart."""
    from dlperf.answers import EnvAnswer
    from dlperf.cli import main
    from dlperf.plan import devices
    from dlperf.vocab import CommBackend
    from test_answers import ENV_WIRE

    def launch(*args):
        raise AssertionError("the job was launched on more processes than GPUs")

    monkeypatch.setattr(devices, "framework_info", lambda names: {"torch": ENV_WIRE})
    monkeypatch.setattr(job, "run_job", launch)
    code = main(["comm", "--backend", "nccl", "--nproc", "2", "--db", str(tmp_path / "d.db")])
    one_line_error(SimpleNamespace(returncode=code, stderr=capsys.readouterr().err),
                   "--backend nccl uses one GPU per process: --nproc 2, but torch sees 1")  # fmt: skip
    assert not (tmp_path / "d.db").exists()
    one_gpu = EnvAnswer.from_json(ENV_WIRE)
    comm.check_backend(CommBackend.NCCL, 1, one_gpu)
    comm.check_backend(CommBackend.GLOO, 4, one_gpu)  # gloo runs on the CPU, whatever the GPUs
    no_gpu = EnvAnswer.from_json({**ENV_WIRE, "devices": [{"name": "cpu"}]})
    with pytest.raises(UsageError, match=r"^--backend nccl needs CUDA GPUs; torch 2\.13\.0\+cpu sees none"):
        comm.check_backend(CommBackend.NCCL, 1, no_gpu)


def test_a_rank_past_the_gpus_says_how_many_processes_fit(torch, monkeypatch):
    """The rank's own check (frameworks/torch/comm.py), with the GPUs torch sees faked to one."""
    from dlperf.frameworks.torch import comm as ranks

    chosen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert ranks.device_for("nccl") == torch.device("cuda", 0) and chosen == [0]
    monkeypatch.setenv("LOCAL_RANK", "1")
    fit = r"^--backend nccl: process 1 of this node has no GPU of its own \(1 visible\): use --nproc 1 or fewer$"
    with pytest.raises(RuntimeError, match=fit):
        ranks.device_for("nccl")
    assert chosen == [0] and ranks.device_for("gloo") == torch.device("cpu")


@pytest.mark.gpu
def test_nccl_over_more_processes_than_gpus_on_real_gpus(tmp_path, torch):
    """The same two refusals with the GPUs this machine has: the probe's, before anything runs, and past it (the job
    launched anyway) the rank's that has no GPU of its own."""
    gpus = torch.cuda.device_count()
    over = str(gpus + 1)
    one_line_error(dlperf("comm", "--backend", "nccl", "--nproc", over, db=tmp_path / "d.db"),
                   f"--backend nccl uses one GPU per process: --nproc {over}, but torch sees {gpus}")  # fmt: skip
    assert not (tmp_path / "d.db").exists()
    opts = opts_of("--backend", "nccl", "--nproc", over, "--sizes", "4K", "--iters", "1", "--timeout", "120")
    launched = job.run_job(opts.job, sys.executable, 1)
    reason = job.failure_reason(opts.job, launched.child, launched.every_rank)
    assert reason.startswith(f"rank {gpus}: RuntimeError: --backend nccl: process {gpus} of this node has no GPU "
                             f"of its own ({gpus} visible): use --nproc {gpus} or fewer"), reason  # fmt: skip


@pytest.mark.parametrize("text", ["٣K", "４M", "1_024", "9999999999999999999G"])
def test_a_size_is_ascii_digits_within_sqlites_integer(text):
    """The regex's \\d took any Unicode digit ('٣K' was 3 KiB), and no bound stopped a size SQLite cannot store."""
    with pytest.raises(UsageError, match="--sizes"):
        comm.parse_size(text)


def test_an_interrupt_before_any_size_says_nothing_is_stored_and_how_to_measure(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the job ran said only 'dlperf: interrupted', where exit 130 is documented as "what had finished is
    kept". Before its first size is measured, nothing is (`commands.run.say_interrupted`'s line)."""
    from dlperf.cli import main

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(job, "run_job", interrupted)
    monkeypatch.setattr(sys, "argv", ["dlperf", "comm", "--nproc", "2", "--threads", "1"])
    assert main(["comm", "--nproc", "2", "--threads", "1", "--db", str(tmp_path / "d.db")]) == 130
    assert capsys.readouterr().err == (
        "dlperf: interrupted; nothing is stored: no size was measured yet. To measure, run it again: dlperf comm "
        "--nproc 2 --threads 1\n"
    )


def test_an_interrupt_while_the_jobs_figures_are_stored_comes_once_they_are(tmp_path, monkeypatch, capsys):
    """Ctrl-C while a finished job's figures were written was raised inside the store's transaction, which rolled
    them back: the job measured for nothing. It comes once they are stored."""
    import signal

    from test_peak import handlers_put_back

    from dlperf.cli import main
    from dlperf.store.machine import MachineFigures
    from test_answers import COMM_WIRE

    real = MachineFigures.record_comm

    def interrupted(self, *args):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as they are written
        return real(self, *args)

    monkeypatch.setattr(job, "run_job", lambda *args: SimpleNamespace(every_rank={}, child=None))
    monkeypatch.setattr(job, "failure_reason", lambda *args: None)
    monkeypatch.setattr(job, "result_of", lambda events: CommAnswer.from_json(COMM_WIRE))
    monkeypatch.setattr(MachineFigures, "record_comm", interrupted)
    db = tmp_path / "d.db"
    with handlers_put_back():
        assert main(["comm", "--nproc", "2", "--threads", "1", "--db", str(db)]) == 130
    assert f"dlperf: interrupted; the job's figures (1 size) are stored in {db}" in capsys.readouterr().err  # not bare
    store = Store.open(db, create=False)
    try:
        assert len(store.comm_results()) == 1  # COMM_WIRE's one size
    finally:
        store.close()


# ----------------------------------------------------------------------------------------------------------------------
# A job that does not end: the sizes it measured are kept


def part(nbytes: int, wrong: int = 0) -> AnswerPart:
    """One size of a job's answer, as the job's first process reports it once that size is measured."""
    from test_answers import COMM_WIRE

    size = {**COMM_WIRE["sizes"][0], "bytes": nbytes, "count": nbytes // 4, "wrong": wrong}
    return AnswerPart({**COMM_WIRE, "sizes": [size]})


def stored_sizes(db) -> list[int]:
    store = Store.open(db, create=False)
    try:
        return sorted(r.bytes for r in store.comm_results())
    finally:
        store.close()


def test_an_interrupt_keeps_the_sizes_the_job_had_measured_and_names_the_command_for_the_rest(
    tmp_path, monkeypatch, capsys
):
    """The job gave every size as it ended: Ctrl-C after 2 of 4 sizes stored nothing. The launcher hands back the
    parts the job had reported; they are stored, and the command measures the other sizes alone."""
    from dlperf.cli import main

    def interrupted(*args):
        raise ChildInterrupted({0: [Joined(), part(4 * K), part(16 * K)], 1: []})

    monkeypatch.setattr(job, "run_job", interrupted)
    argv = ["comm", "--nproc", "2", "--threads", "1", "--sizes=4K:256K", "--factor", "4"]
    monkeypatch.setattr(sys, "argv", ["dlperf", *argv])
    db = tmp_path / "d.db"
    assert main([*argv, "--db", str(db)]) == 130
    assert capsys.readouterr().err == (
        f"dlperf: interrupted; 2 sizes measured (4K, 16K) are stored in {db}. To measure the rest: dlperf comm "
        "--nproc 2 --threads 1 --sizes 64K,256K\n"
    )
    assert stored_sizes(db) == [4 * K, 16 * K]


@pytest.mark.parametrize(
    ("parts", "kept", "stored"),
    [
        ([part(4 * K), part(16 * K, wrong=3)], "; 1 size measured (4K) is stored in {db}; not 16K, which summed wrong",
         [4 * K]),
        ([part(4 * K, wrong=1)], "; nothing is stored: 4K summed wrong", []),
        ([], "", []),
    ],
)  # fmt: skip
def test_a_failed_job_keeps_the_sizes_measured_before_it_but_none_that_summed_wrong(
    tmp_path, monkeypatch, capsys, parts, kept, stored
):
    """Rank 1 died after the job's first sizes: they were measured whole and are stored (the failure is said, exit 1);
    a size that summed wrong is not, and a job that measured none says its failure alone, as before."""
    from dlperf.cli import main

    lost = Error("RuntimeError: Connection closed by peer", rank=1)
    events = {0: [Joined(), *parts], 1: [lost]}
    monkeypatch.setattr(job, "run_job", lambda *args: Launched(ChildResult(1, False, 1.0, ""), events, ""))
    db = tmp_path / "d.db"
    assert main(["comm", "--nproc", "2", "--threads", "1", "--sizes", "4K:64K", "--db", str(db)]) == 1
    said = f"dlperf: error: comm job failed: rank 1: {lost.error}{kept.format(db=db)}\n"
    assert capsys.readouterr().err == said
    assert stored_sizes(db) == stored


def test_a_failed_job_asked_for_json_says_so_in_json(tmp_path, monkeypatch, capsys):
    """`--format json` of a job that failed printed nothing on stdout (a script reading it got no document): the error,
    the exit code and the sizes stored, as a JSON document, beside the line on stderr."""
    from dlperf.cli import main

    lost = Error("RuntimeError: Connection closed by peer", rank=1)
    events = {0: [Joined(), part(4 * K)], 1: [lost]}
    monkeypatch.setattr(job, "run_job", lambda *args: Launched(ChildResult(1, False, 1.0, ""), events, ""))
    db = tmp_path / "d.db"
    argv = ["comm", "--nproc", "2", "--threads", "1", "--sizes", "4K:64K", "--db", str(db), "--format", "json"]
    assert main(argv) == 1
    out = capsys.readouterr()
    assert "comm job failed" in out.err
    assert json.loads(out.out) == {"error": f"comm job failed: rank 1: {lost.error}", "exit_code": 1, "db": str(db),
                                   "stored_bytes": [4 * K]}  # fmt: skip


def measured_a_size(tmp: Path) -> bool:
    """Whether a comm job's first process (its events under the launcher's folder in `tmp`) reported a size."""
    return any('"event": "answer_part"' in p.read_text() for p in tmp.glob("*comm*/events.jsonl.rank*"))


@pytest.mark.slow  # 6-9 s, a real two-process job; what is kept, from the events, is make test's (the tests above)
def test_a_job_stopped_midway_keeps_the_sizes_it_measured(tmp_path, torch):
    """SIGTERM (handled as Ctrl-C) once the job reported its first size, of 20 sizes of 500 all-reduces: the job
    stored nothing, every size measured lost with it. The sizes measured are stored, in order from the first, and the
    line names them and the command that measures the rest."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    db = tmp_path / "d.db"
    flags = ["--nproc", "2", "--threads", "1", "--sizes", "4:2M", "--factor", "2", "--iters", "500", "--warmup", "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(tmp)}
    cmd = [sys.executable, "-m", "dlperf", "comm", *flags, "--db", str(db)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not measured_a_size(tmp):
            assert proc.poll() is None and time.monotonic() < deadline, "the job reported no size before it ended"
            time.sleep(0.05)
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    sizes = stored_sizes(db)
    assert sizes == [4 * 2**i for i in range(len(sizes))] and 1 <= len(sizes) < 20, sizes
    count = "1 size measured (4) is" if len(sizes) == 1 else f"{len(sizes)} sizes measured ({comm.names(sizes)}) are"
    rest = ",".join(flagtext.size_text(4 * 2**i) for i in range(len(sizes), 20))
    assert err.splitlines()[-1] == (
        f"dlperf: interrupted; {count} stored in {db}. To measure the rest: dlperf comm --nproc 2 --threads 1 --iters "
        f"500 --warmup 0 --db {db} --sizes {rest}"
    )


@pytest.mark.parametrize("world", [1, 2])
def test_one_process_says_why_its_bus_bandwidth_is_zero(world, capsys):
    """`comm --nproc 1` printed 'average bus bandwidth: 0 GB/s' and nothing of why."""
    from dataclasses import replace

    from dlperf.commands.comm import render
    from test_answers import COMM_WIRE

    answer = CommAnswer.from_json(COMM_WIRE)
    render(replace(answer, world=world, nproc=world), [1], "x.db", "table")
    said = "note: one process: an all-reduce moves nothing between processes, so its bus bandwidth is 0"
    assert (said in " ".join(capsys.readouterr().out.split())) == (world == 1)
