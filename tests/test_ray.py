"""`dlperf run --ray` (fleet.py): the node selection and bad input (fast), and sweeps over a local Ray cluster
of two nodes (slow): each node's cells a run of its own, a node lost mid-sweep, --resume, no Ray process left."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from conftest import ROOT, dlperf, gone, one_line_error, require
from dlperf import fleet, fleet_connect
from dlperf.errors import UsageError

NODES = [
    {"NodeID": "a" * 56, "Alive": True, "NodeManagerHostname": "box1", "Labels": {"gpu_type": "H100"},
     "Resources": {"CPU": 8.0, "fast": 1.0}},
    {"NodeID": "b" * 56, "Alive": True, "NodeManagerHostname": "box2", "Labels": {"gpu_type": "A100"},
     "Resources": {"CPU": 4.0}},
    {"NodeID": "c" * 56, "Alive": False, "NodeManagerHostname": "box3", "Labels": {"gpu_type": "H100"},
     "Resources": {"CPU": 4.0}},
]  # fmt: skip
SWEEP = ["--workloads", "tiny-fcn-r,tiny-alexnet-r", "--threads", "1", "--no-loss-check", "--no-predict",
         "--max-warmup", "1", "--min-steps", "2", "--min-time", "0", "--max-time", "0.5"]  # fmt: skip
assert SWEEP[-4::2] == ["--min-time", "--max-time"]  # SWEEP[2:-4]: its flags but the timer's, for a longer one


def test_nodes_are_chosen_by_label_or_resource_among_the_alive_ones():
    hosts = lambda wanted: [n.host for n in fleet.select(NODES, fleet.parse_nodes(wanted))]  # noqa: E731
    assert hosts("all") == ["box1", "box2"]  # box3 is dead
    assert hosts("gpu_type=H100") == ["box1"]
    assert hosts("fast=1") == ["box1"] and hosts("CPU=4") == ["box1", "box2"]
    with pytest.raises(UsageError, match=r"^--nodes gpu_type=V100: no alive node .*gpu_type=A100, gpu_type=H100"):
        fleet.select(NODES, ("gpu_type", "V100"))
    with pytest.raises(UsageError, match=r"^--nodes 'gpu_type': give all, or KEY=VALUE"):
        fleet.parse_nodes("gpu_type")


@pytest.mark.parametrize("text", ["CPU=lots", "GPU=one", "CPU=0", "CPU=-2", "memory=nan", "CPU=inf", "CPU=\uff14"])
def test_a_ray_resource_that_is_no_number_is_refused_before_any_cluster(text):
    """`--nodes CPU=lots` started a cluster, then said 'no alive node has that much CPU'."""
    key = text.partition("=")[0]
    with pytest.raises(UsageError, match=rf"^--nodes '{text}': {key} is a Ray resource, the least .* above zero"):
        fleet.parse_nodes(text)
    assert fleet.parse_nodes("CPU=2.5") == ("CPU", "2.5") and fleet.parse_nodes("gpu_type=lots") == ("gpu_type", "lots")


def test_a_custom_resource_given_as_a_word_asks_for_a_number():
    with pytest.raises(UsageError, match=r"^--nodes fast=yes: fast is a resource of the nodes, .* a number above zero"):
        fleet.select(NODES, fleet.parse_nodes("fast=yes"))


def test_the_command_refuses_a_ray_resource_that_is_no_number_in_one_line():
    one_line_error(dlperf("run", "--ray", "local", "--nodes", "CPU=lots", "--workloads", "tiny-fcn-r"),
                   "--nodes 'CPU=lots'", "a number above zero")  # fmt: skip


def test_a_node_runs_the_users_flags_without_the_drivers_own():
    argv = ["run", "--ray", "auto", "--workloads", "fcn-r", "--nodes=all", "--db", "x.db", "--threads", "1"]
    assert fleet.node_argv(argv) == ["run", "--workloads", "fcn-r", "--threads", "1"]
    assert fleet.node_argv(["run", "--resume", "--ray=ray://h:1", "--repeats", "2"]) == ["run", "--repeats", "2"]


def test_a_relative_model_file_or_data_folder_is_the_drivers_not_the_folder_a_node_was_started_in():
    """From /tmp/qa-ray/sub, `--workloads mymodel.py:make` measured /tmp/qa-ray/mymodel.py, the file of the folder
    `ray start` ran in, under the name, on every node, with no word said; `--data ddata` was 'no such directory'."""
    from dlperf.fleet_node import driver_paths

    argv = ["run", "--workloads", "mine.py:make,tiny-fcn-r,pkg.mod:make,../x/y.py:f", "--data", "d", "--threads", "1"]
    assert driver_paths(argv, "/home/u/w") == [
        "run", "--workloads", "/home/u/w/mine.py:make,tiny-fcn-r,pkg.mod:make,/home/u/x/y.py:f", "--data",
        "/home/u/w/d", "--threads", "1"]  # fmt: skip
    assert driver_paths(["run", "--workloads=sub/m.py:make", "--data=dataset", "--data", "./dataset"], "/h") == [
        "run", "--workloads=/h/sub/m.py:make", "--data=dataset", "--data", "/h/dataset"]  # fmt: skip
    assert driver_paths(["run", "--workloads", "/abs/m.py:make", "--data", "synthetic"], "/h") == [
        "run", "--workloads", "/abs/m.py:make", "--data", "synthetic"]  # fmt: skip


def test_auto_with_a_stale_ray_address_in_the_shell_is_one_line_at_once(tmp_path):
    """`RAY_ADDRESS=127.0.0.1:1 dlperf run --ray auto` ran 3 min 24 s, printing Ray's GCS timeouts every 40 s, and
    Ctrl-C took 25 s: `ray.init("auto")` takes RAY_ADDRESS, which dlperf did not check as it checks a HOST:PORT."""
    require("ray")
    proc = dlperf("run", "--ray", "auto", "--workloads", "tiny-fcn-r", db=tmp_path / "r.db", timeout=60,
                  env={"RAY_ADDRESS": "127.0.0.1:1"})  # fmt: skip
    one_line_error(proc, "--ray auto: this shell's RAY_ADDRESS=127.0.0.1:1, which Ray takes for auto: unreachable",
                   "(unset RAY_ADDRESS for the cluster this machine is in)")  # fmt: skip
    assert not (tmp_path / "r.db").exists()


def test_the_same_kind_of_machine_ignores_only_its_name_and_memory_rounding():
    a = {"cpu_model": "X", "cores": {"cores": 8}, "hostname": "box1", "memory_gib": 31, "gpus": []}
    assert fleet.same_kind(a, {**a, "hostname": "box2", "memory_gib": 32})
    assert not fleet.same_kind(a, {**a, "cores": {"cores": 4}})


def lost_run(run_id: int, node: str, campaign: str = "c"):
    return SimpleNamespace(id=run_id, origin=SimpleNamespace(db=f"ray:{node * 56}"), spec={"campaign": campaign},
                           fingerprint={"cpu_model": "X", "hostname": node})  # fmt: skip


def test_resumed_runs_get_a_node_each_their_own_first():
    """Two runs of a sweep Ctrl-C stopped, both nodes alive: each resumes on the node that measured it. Both used to
    resume on the first node of their kind at once, timing each other, one node's column measured by the other."""
    infos = fleet.select(NODES, None)  # box1 (a...), box2 (b...): one kind
    kinds = {n.node_id: {"cpu_model": "X", "hostname": n.host} for n in infos}
    placed = fleet.place([lost_run(1, "b"), lost_run(2, "a")], infos, kinds, {"c": {"a" * 56, "b" * 56}})
    assert [(run.id, info.host) for run, info in placed] == [(1, "box2"), (2, "box1")]
    one_free = fleet.place([lost_run(1, "a"), lost_run(2, "b")], infos[:1], kinds, {})
    assert [(run.id, info and info.host) for run, info in one_free] == [(1, "box1"), (2, None)]  # 2 waits


def test_a_lost_nodes_run_prefers_a_node_outside_its_campaign():
    """Node d lost: its run goes to the new node c, not to a (a column of its own in the same comparison)."""
    infos = fleet.select([NODES[0], {**NODES[2], "Alive": True}], None)
    kinds = {n.node_id: {"cpu_model": "X"} for n in infos}
    [(_, info)] = fleet.place([lost_run(7, "d")], infos, kinds, {"c": {"a" * 56, "d" * 56}})
    assert info.host == "box3"
    with pytest.raises(UsageError, match="no live node is of the kind that measured run 7"):
        fleet.place([lost_run(7, "d")], infos, {n.node_id: {"cpu_model": "Y"} for n in infos}, {})


def test_a_ray_nodes_run_merged_into_another_store_is_still_that_nodes():
    """`dlperf merge int2.db --db mi.db`, then `--resume --ray --db mi.db` said 'no unfinished run of a Ray sweep
    (runs 1, 2, not a Ray sweep's: dlperf run --resume ...)', and plain --resume sent back to --resume --ray."""
    merged = SimpleNamespace(db="/tmp/int2.db", origin=SimpleNamespace(db="ray:" + "a" * 56, origin=None))
    run = SimpleNamespace(id=4, origin=merged, spec={"campaign": "c"}, fingerprint={"cpu_model": "X"})
    assert fleet.node_of(run) == "a" * 56
    assert fleet.node_of(SimpleNamespace(origin=SimpleNamespace(db="/tmp/other.db", origin=None))) is None
    infos = fleet.select(NODES, None)
    [(_, info)] = fleet.place([run], infos, {n.node_id: {"cpu_model": "X"} for n in infos}, {})
    assert info.node_id == "a" * 56  # resumed on its own node, as in the sweep's own store


def test_a_run_whose_kind_of_machine_is_gone_waits_and_the_others_resume(capsys):
    """One run's kind of machine retired blocked every other run's resume: 'no live node is of the kind that measured
    run 1 (Intel(R) Xeon(R) Processor, {'physical': 2, ...})', a Python dict in the line."""
    infos = fleet.select(NODES, None)
    kinds = {n.node_id: {"cpu_model": "X", "hostname": n.host} for n in infos}
    gone = SimpleNamespace(id=1, origin=SimpleNamespace(db="ray:" + "z" * 56), spec={"campaign": "c"},
                           fingerprint={"cpu_model": "Y", "hostname": "old", "cores": {"cores": 2}})  # fmt: skip
    placed = fleet.place([gone, lost_run(2, "a")], infos, kinds, {})
    assert [(run.id, info and info.host) for run, info in placed] == [(1, None), (2, "box1")]
    argv = ["run", "--resume", "--ray", "auto", "--nodes", "kind=b"]
    fleet.said_waiting([], [gone], fleet.chosen_by(argv), "dlperf run --resume --ray auto --db s.db")
    assert capsys.readouterr().err == (
        "dlperf: run 1 waits: no live node (of the nodes --nodes kind=b picks) is of its kind (run 1: old · Y, 2 "
        "cores); `dlperf run --resume --ray auto --db s.db` takes it up once a node is free\n"
    )
    with pytest.raises(UsageError, match=r"run 1 \(old · Y, 2 cores\): `ray start --address` on such a machine"):
        fleet.place([gone], infos, kinds, {})
    assert fleet.chosen_by(["run", "--nodes=all"]) == "" and fleet.chosen_by(["run", "--nodes=kind=a"]) == "kind=a"


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--ray", "auto", "--nproc", "2"], "--ray: --nproc is not supported"),
        (["--ray", "auto", "--dry-run"], "--ray: --dry-run is not supported"),
        (["--nodes", "all"], "--nodes: give --ray ADDRESS too"),
        (["--ray", "auto", "--nodes", "gpu"], "--nodes 'gpu': give all, or KEY=VALUE"),
    ],
)
def test_flags_a_fleet_does_not_take_are_one_line_before_anything_connects(tmp_path, args, fragment):
    proc = dlperf("run", "--workloads", "tiny-fcn-r", *args, db=tmp_path / "x.db", timeout=60)
    one_line_error(proc, fragment)
    assert not (tmp_path / "x.db").exists()


def test_an_unreachable_cluster_is_one_line(tmp_path):
    require("ray")
    proc = dlperf("run", "--workloads", "tiny-fcn-r", "--ray", "127.0.0.1:9", db=tmp_path / "x.db", timeout=60)
    one_line_error(proc, "--ray 127.0.0.1:9: unreachable")


def test_a_port_that_is_not_a_ray_cluster_is_one_line_not_a_hang(tmp_path):
    """A port that takes the connection but says nothing (not Ray's GCS): Ray's own connect retried it for 12
    minutes, deaf to Ctrl-C and SIGTERM, a warning every 35 s."""
    require("ray")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel takes connections; nothing answers them
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        proc = dlperf("run", "--workloads", "tiny-fcn-r", "--ray", address, db=tmp_path / "x.db", timeout=120)
    one_line_error(proc, f"--ray {address}: not a Ray cluster's address")
    assert not (tmp_path / "x.db").exists()


@pytest.fixture
def grpc_answering():
    """A gRPC server on a free port answering every call with the status given (`code[0]`): a Ray GCS that wants a
    token (UNAUTHENTICATED), or a gRPC service that is not a GCS (UNIMPLEMENTED: Ray Client's port). `code[0]` a dict:
    each method's own answer (a status, or bytes: answered), UNIMPLEMENTED for a method it does not name."""
    require("ray")
    import grpc

    code = [grpc.StatusCode.UNAUTHENTICATED]

    def answer(method: str):
        given = code[0].get(method, grpc.StatusCode.UNIMPLEMENTED) if isinstance(code[0], dict) else code[0]
        return lambda request, context: given if isinstance(given, bytes) else context.abort(given, "no")

    class Refuse(grpc.GenericRpcHandler):
        def service(self, details):
            return grpc.unary_unary_rpc_method_handler(answer(details.method))

    server = grpc.server(ThreadPoolExecutor(1), handlers=[Refuse()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", code
    finally:
        server.stop(None)


@pytest.mark.parametrize("auth_mode", [None, "token"])
def test_a_cluster_that_wants_a_token_says_so_at_once(monkeypatch, grpc_answering, auth_mode):
    """Ray's own connect printed 20 s of InvalidAuthToken warnings, then "Failed to connect to Ray cluster at ...",
    naming no token; with RAY_AUTH_MODE=token set, Ray sends it and the probe lets it."""
    address, _ = grpc_answering
    fake = FakeRay()
    monkeypatch.setattr(fleet_connect, "import_ray", lambda: fake)
    if auth_mode:
        monkeypatch.setenv("RAY_AUTH_MODE", auth_mode)
        assert fleet.connect(address, "/unused") is fake and fake.calls == 1
        return
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(UsageError, match=rf"^--ray {address}: the cluster checks a token: set RAY_AUTH_MODE=token"):
        fleet.connect(address, "/unused")
    assert fake.calls == 0


def test_ray_clients_port_without_ray_scheme_is_not_a_cluster(monkeypatch, grpc_answering):
    import grpc

    address, code = grpc_answering
    code[0] = grpc.StatusCode.UNIMPLEMENTED
    fake = FakeRay()
    monkeypatch.setattr(fleet_connect, "import_ray", lambda: fake)
    with pytest.raises(UsageError, match=r"not a Ray cluster's address .*ray://HOST:PORT"):
        fleet.connect(address, "/unused")
    assert fake.calls == 0


# What Ray Client raises when the head cannot start the client's own server: the server's traceback under an empty
# first line (ray/util/client/worker.py, _server_init).
INIT_FAILURE = ConnectionAbortedError(
    'Initialization failure from server:\nTraceback (most recent call last):\n  File "proxier.py", line 781\n'
    "RuntimeError: Proxy failed to Connect to backend! Check `ray_client_server.err`\n"
)


class FakeRay:
    """ray.init failing with the given exceptions, in turn, then connecting."""

    def __init__(self, *failures):
        self.failures, self.calls = list(failures), 0

    def init(self, **kwargs):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)


def answering_client(monkeypatch) -> None:
    """`ray://h:...` as a Ray Client server that took the connection and answered the probe's PING: what follows is
    Ray's own connect (FakeRay)."""
    monkeypatch.setattr(fleet_connect, "_check_reachable", lambda address: None)
    monkeypatch.setattr(fleet_connect, "_check_client", lambda address: None)


def test_a_ray_client_server_that_fails_to_start_is_tried_again(monkeypatch):
    fake = FakeRay(INIT_FAILURE, INIT_FAILURE)
    monkeypatch.setattr(fleet_connect, "import_ray", lambda: fake)
    answering_client(monkeypatch)
    assert fleet.connect("ray://h:10001", "/unused") is fake and fake.calls == 3


def test_a_ray_client_server_that_never_starts_says_the_servers_reason(monkeypatch, capsys):
    fake = FakeRay(*[INIT_FAILURE] * 3)
    monkeypatch.setattr(fleet_connect, "import_ray", lambda: fake)
    answering_client(monkeypatch)
    with pytest.raises(UsageError) as caught:
        fleet.connect("ray://h:10001", "/unused")
    assert str(caught.value) == (
        "--ray ray://h:10001: cannot connect after 3 tries: the head could not start this client's server "
        "(Initialization failure from server: RuntimeError: Proxy failed to Connect to backend! Check "
        "`ray_client_server.err`); start the head as `GRPC_ENABLE_FORK_SUPPORT=false ray start --head ...`, and its "
        "client servers start (ray-project/ray#63202); the server's own log is ray_client_server_*.err in the head's "
        "Ray logs (/tmp/ray/session_latest/logs)")  # fmt: skip
    assert fake.calls == 3 and "token" not in str(caught.value)  # not the token's hint: a token failure times out
    tries = capsys.readouterr().err.splitlines()  # each failed try waits out Ray's 30 s: said, not 2 minutes of nothing
    assert tries == [f"dlperf: --ray ray://h:10001: try {n} of 3 failed, the head could not start this client's "
                     "server; trying again" for n in (1, 2)]  # fmt: skip


@pytest.mark.parametrize("auth_mode, hinted", [(None, True), ("token", False)])
def test_a_client_connect_that_times_out_names_the_token_only_where_none_is_set(monkeypatch, auth_mode, hinted):
    fake = FakeRay(ConnectionError("ray client connection timeout"))
    monkeypatch.setattr(fleet_connect, "import_ray", lambda: fake)
    answering_client(monkeypatch)
    if auth_mode:
        monkeypatch.setenv("RAY_AUTH_MODE", auth_mode)
    else:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(UsageError, match=r"^--ray ray://h:1: cannot connect \(ray client connection timeout\)") as e:
        fleet.connect("ray://h:1", "/unused")
    assert ("RAY_AUTH_MODE=token" in str(e.value)) == hinted and fake.calls == 1


class Remote:
    """An actor method as `follow` calls it: .remote() gives what ray.get returns."""

    def __init__(self, result):
        self.result = result

    def remote(self):
        return self.result


class EndedActor:
    def __init__(self, code: int, error: str = ""):
        answer = {"rows": None, "exit": code, "error": error, "said": []}
        self.poll, self.close = Remote(answer), Remote(None)


class PollingRay:
    """Ray as `follow` uses it, each actor answering at once."""

    class exceptions:
        RayError = GetTimeoutError = RuntimeError

    @staticmethod
    def get(result, timeout=None):
        return result

    @staticmethod
    def kill(actor):
        pass


def test_a_node_whose_sweep_could_not_start_is_named_with_its_reason(capsys):
    """One node without torch among nodes that measured: its sweep's own error is said, naming the node; it used
    to vanish (exit 1, the other nodes' table, not a word of it)."""
    bare = "dlperf: error: checking the frameworks and devices: the torch probe failed: ImportError: No module"
    ended = [(NODES[0], EndedActor(0)), (NODES[1], EndedActor(2, bare))]
    nodes = [fleet.Node(fleet.select([n], None)[0], actor, ["dlperf", "run"]) for n, actor in ended]
    assert fleet.follow(PollingRay, None, nodes, "auto") == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line == (f"dlperf: node bbbbbbbb (box2): its sweep failed (exit 2; nothing of it is stored): "
                    f"{bare.removeprefix('dlperf: error: ')}")  # fmt: skip


def test_flags_every_node_refused_are_said_once_of_the_nodes(capsys):
    """Each node's own words were the driver's: "--devices: 'cuda' is not present on this machine", typed on a GPU
    machine of the cluster."""
    said = "dlperf: error: --devices: 'cuda' is not present on this machine (present: cpu)"
    nodes = [fleet.Node(info, EndedActor(2, said), ["dlperf", "run"]) for info in fleet.select(NODES, None)]
    with pytest.raises(UsageError, match=r"^node aaaaaaaa \(box1\) and every other refused it: --devices: 'cuda' is "
                       r"not present on that node \(present: cpu\)$"):  # fmt: skip
        fleet.follow(PollingRay, None, nodes, "auto")
    assert capsys.readouterr().err == ""


class TaskError(RuntimeError):
    """Ray's RayTaskError as `_kinds` meets it: the node's own exception under `cause`."""

    def __init__(self, cause):
        super().__init__(f"\x1b[36mray::NodeSweep.kind()\x1b[39m (pid=1)\n  File ...\n{cause!r}")
        self.cause = cause


class KindRay(PollingRay):
    """Ray whose actor on each node answers `kind` with what `answers` gives that node (an exception: raised)."""

    def __init__(self, answers: dict):
        self.answers = answers

    def remote(self, **resources):
        return lambda cls: SimpleNamespace(options=self.options)

    def options(self, scheduling_strategy, **kwargs):
        answer = self.answers[scheduling_strategy.node_id]
        return SimpleNamespace(remote=lambda: SimpleNamespace(kind=SimpleNamespace(remote=lambda fw: answer),
                                                              close=Remote(None)))  # fmt: skip

    def get(self, result, timeout=None):
        if isinstance(result, Exception):
            raise result
        return result


def test_resume_passes_over_a_node_that_cannot_say_its_kind(capsys):
    """A node without torch among the live ones: --resume used to end on its Ray traceback (ANSI codes and all, as
    one error line); it is now warned of and passed over, the others taken."""
    require("ray")
    infos = fleet.select(NODES, None)
    bare = UsageError("checking the frameworks and devices: the torch probe failed: ImportError: No module")
    kinds = fleet._kinds(KindRay({"a" * 56: TaskError(bare), "b" * 56: {"cpu_model": "X"}}), infos, ["torch"])
    assert kinds == {"a" * 56: None, "b" * 56: {"cpu_model": "X"}}
    assert capsys.readouterr().err == f"dlperf: warning: node aaaaaaaa (box1) is passed over: {bare}\n"
    [(_, info)] = fleet.place([lost_run(1, "a")], infos, kinds, {})
    assert info.host == "box2"


# --- a local cluster of two nodes ------------------------------------------------------------------------------------
# The slow tests run two at a time (make test-slow): each one's Ray processes carry a token of its own in their
# environment, and its Ray session files go to a folder of its own, so one test's clean-up never touches another's.
TOKEN = "DLPERF_RAY_TEST"


def ray_pids(token: str) -> set[int]:
    """The processes started with `token` in their environment: Ray's (its GCS, raylets, workers) and the nodes'
    sweeps."""
    found, mark = set(), f"{TOKEN}={token}".encode()
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as f:
                if mark in f.read().split(b"\0"):
                    found.add(int(path.split("/")[2]))
        except OSError:
            continue
    return found - {os.getpid()}


@pytest.fixture
def no_ray_left(monkeypatch):
    """A token for this test's processes, and a temporary folder of its own (TMPDIR: Ray's sessions, the nodes'
    sweeps, the one --ray local starts); none of its processes left when it ends. A node the test killed leaves its
    sweep's folder, as a dead machine would: removed here with the rest."""
    token, folder = f"{os.getpid()}-{time.monotonic_ns()}", tempfile.mkdtemp(prefix="rt")  # short: Ray's sockets
    monkeypatch.setenv(TOKEN, token)
    monkeypatch.setenv("TMPDIR", folder)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    yield token, folder
    gone(sorted(ray_pids(token)), 10)  # what Ray's shutdown stopped may still be ending
    left = {pid: _command(pid) for pid in ray_pids(token)}
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)
    assert not left, f"processes left: {left}"


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


@pytest.fixture
def cluster(no_ray_left, monkeypatch):
    """Two Ray nodes on this machine, labelled kind=head and kind=worker. The head is started as parallel.md says a
    head that takes Ray Client's connections should be: without gRPC's fork handlers, whose race kills a client's
    server as it starts (ray-project/ray#63202; CI's run of 2026-12-06 lost all 3 tries of one connect)."""
    require("ray")
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("GRPC_ENABLE_FORK_SUPPORT", "false")
    _, folder = no_ray_left
    head = {"num_cpus": 1, "labels": {"kind": "head"}, "include_dashboard": False, "temp_dir": f"{folder}/ray",
            "ray_client_server_port": free_port()}  # fmt: skip
    c = Cluster(initialize_head=True, head_node_args=head)  # no dashboard: two tests' clusters would want one port
    c.client_port = head["ray_client_server_port"]
    c.add_node(num_cpus=1, labels={"kind": "worker"})
    c.wait_for_nodes()
    try:
        yield c
    finally:
        c.shutdown()


def client_server_logs(folder: str, tail: int = 30) -> str:
    """The last lines of the head's Ray Client server logs (the proxy's and each client's own server's), to say why
    a connect failed."""
    text = []
    for path in sorted(glob.glob(f"{folder}/ray/session_*/logs/ray_client_server*")):
        with open(path, errors="replace") as f:
            text.append(f"\n--- {os.path.basename(path)}\n" + "".join(f.readlines()[-tail:]))
    return "".join(text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fleet_runs(db):
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        return {r.origin.db.removeprefix("ray:"): (r, store.cells(r.id)) for r in store.runs()}
    finally:
        store.close()


@pytest.mark.slow
def test_each_node_of_a_cluster_measures_its_cells_as_a_run_of_its_own(cluster, tmp_path):
    db = tmp_path / "fleet.db"
    proc = dlperf("run", *SWEEP, "--ray", cluster.address, db=db, timeout=300, env={"COLUMNS": "300"})
    assert proc.returncode == 0, proc.stderr
    runs = fleet_runs(db)
    node_ids = {n.node_id for n in [cluster.head_node, *cluster.worker_nodes]}
    assert set(runs) == node_ids
    [campaign] = {run.spec["campaign"] for run, _ in runs.values()}  # one campaign, named for the sweep
    assert campaign.startswith("ray-")
    assert all(f"(Ray node {node_id[:8]})" in proc.stdout for node_id in node_ids), proc.stdout  # side by side
    ids = sorted(run.id for run, _ in runs.values())
    assert f"campaign {campaign} (runs {ids[0]}, {ids[1]}): the machines side by side" in proc.stdout
    again = dlperf("table", "--campaign", campaign, db=db, env={"COLUMNS": "300"})
    assert again.returncode == 0 and all(f"(Ray node {node_id[:8]})" in again.stdout for node_id in node_ids)
    for run, cells in runs.values():
        assert run.status == "complete" and run.env["cores"] and run.fingerprint["hostname"]
        assert sorted(c.workload for c in cells) == ["tiny-alexnet-r", "tiny-fcn-r"]
        assert all(c.status.value == "ok" and c.threads == 1 for c in cells)
    one = dlperf("run", "--workloads", "tiny-fcn-r", *SWEEP[2:], "--ray", cluster.address, "--nodes", "kind=worker",
                 db=tmp_path / "w.db", timeout=300)  # fmt: skip
    assert one.returncode == 0, one.stderr
    assert set(fleet_runs(tmp_path / "w.db")) == {worker.node_id for worker in cluster.worker_nodes}
    none = dlperf("run", *SWEEP, "--ray", cluster.address, "--nodes", "kind=gpu", db=tmp_path / "n.db", timeout=120)
    one_line_error(none, "--nodes kind=gpu: no alive node has that label or resource (labels: kind=head, kind=worker)")
    assert not (tmp_path / "n.db").exists()


@pytest.mark.slow
def test_ray_client_drives_a_sweep_from_outside_the_cluster(cluster, no_ray_left, tmp_path):
    """`--ray ray://HOST:PORT`: Ray Client, the driver outside the cluster; the chosen node's cells land here."""
    db = tmp_path / "client.db"
    address = f"ray://127.0.0.1:{cluster.client_port}"
    proc = dlperf("run", "--workloads", "tiny-fcn-r", *SWEEP[2:], "--ray", address, "--nodes", "kind=worker", db=db,
                  timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr + client_server_logs(no_ray_left[1])
    [(run, cells)] = fleet_runs(db).values()
    assert run.status == "complete" and [c.status.value for c in cells] == ["ok"]
    [worker] = cluster.worker_nodes
    assert run.origin.db == f"ray:{worker.node_id}"


@pytest.mark.slow
def test_ray_clients_connection_lost_mid_sweep_is_one_line_and_resume_goes_on(cluster, no_ray_left, tmp_path):
    """The head's server of this client (Ray Client's own, one per connection) killed mid-sweep: the driver ended on
    a traceback (ConnectionError, then ValueError from ray.kill), Ray's "ERROR dataclient.py" line on the terminal,
    its run left running; now one line, the run interrupted, and `--resume` over ray:// measures the rest."""
    token, folder = no_ray_left
    db, address = tmp_path / "client.db", f"ray://127.0.0.1:{cluster.client_port}"
    longer = ["--workloads", "tiny-fcn-r,tiny-alexnet-r", *SWEEP[2:-4], "--repeats", "3", "--min-time", "1",
              "--max-time", "1"]  # fmt: skip
    cmd = [sys.executable, "-m", "dlperf", "run", *longer, "--ray", address, "--nodes", "kind=worker", "--db", str(db)]
    env = {**os.environ, "RAY_CLIENT_RECONNECT_GRACE_PERIOD": "3"}  # Ray Client tries a lost connection again 30 s
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    [worker] = cluster.worker_nodes
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None and not measured(db, worker.node_id):
        time.sleep(0.5)
    servers = [pid for pid in ray_pids(token) if "--mode=specific-server" in _command(pid)]
    ended = proc.communicate(timeout=10) if proc.poll() is not None else ("", "")  # what a driver that gave up said
    assert servers, "".join(ended) + client_server_logs(folder)
    for pid in servers:
        os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "ERROR" not in out + err, out + err
    assert f"dlperf: the connection to the cluster at {address} was lost at " in err and "run 1 keeps" in err, err
    assert f"dlperf: Ray's own messages of this sweep are in {db}.ray.log" in err
    [(run, _)] = fleet_runs(db).values()
    assert run.status == "interrupted"
    again = dlperf("run", "--resume", "--ray", address, "--nodes", "kind=worker", db=db, timeout=300)
    assert again.returncode == 0, again.stderr + client_server_logs(folder)
    [(run, cells)] = fleet_runs(db).values()
    assert run.status == "complete" and all(c.status.value == "ok" for c in cells)


@pytest.mark.slow
def test_a_node_lost_mid_sweep_names_its_cells_and_resume_measures_them(cluster, tmp_path):
    """The worker's raylet killed mid-sweep (a crash), the head's sweep going on: the driver says which node was lost
    in its own words, Ray's pages of the raylet's log go to DB.ray.log, not the terminal; resumed on a new node, the
    cells left are that node's run (they used to be credited to the lost node's), the lost run kept as it was."""
    db = tmp_path / "fleet.db"
    [worker] = cluster.worker_nodes
    longer = ["--workloads", "tiny-fcn-r,tiny-alexnet-r,tiny-resnet-56", *SWEEP[2:-4], "--repeats", "3",
              "--min-time", "1", "--max-time", "1"]  # fmt: skip
    cmd = [sys.executable, "-m", "dlperf", "run", *longer, "--ray", cluster.address, "--db", str(db)]
    # 9 processes of a second or more: the node dies mid-sweep
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None and not measured(db, worker.node_id):
        time.sleep(0.5)
    crash(worker)
    out, err = proc.communicate(timeout=240)
    cluster.remove_node(worker, allow_graceful=False)
    assert proc.returncode == 1, err
    assert "state-dump" not in out + err and "(raylet)" not in out + err and "rpc_code" not in err, out + err
    assert f"dlperf: Ray's own messages of this sweep are in {db}.ray.log" in err
    assert f"node {worker.node_id[:8]} (host " in err and "was lost at" in err and "left to measure:" in err
    lost, _ = fleet_runs(db)[worker.node_id]
    assert lost.status == "interrupted"
    left, kept = unfinished(db, lost.id), processes(db, lost.id)
    assert left and all(label in err for label in left), (left, err)
    cluster.add_node(num_cpus=1, labels={"kind": "worker"})
    cluster.wait_for_nodes()
    again = dlperf("run", "--resume", "--ray", cluster.address, "--nodes", "kind=worker", db=db, timeout=300)
    assert again.returncode == 0, again.stderr
    runs = fleet_runs(db)
    [new] = set(runs) - {cluster.head_node.node_id, worker.node_id}
    (run, cells), (lost, _) = runs[new], runs[worker.node_id]
    assert run.status == "complete" and all(c.status.value == "ok" for c in cells), [c.status for c in cells]
    assert run.env["continues"] == lost.id and sorted(c.cell.label for c in cells) == sorted(
        label.rpartition(" (")[0] for label in left)  # fmt: skip
    assert lost.status == "interrupted" and processes(db, lost.id) == kept  # nothing of the new node's in it


def crash(node) -> None:
    """The node's raylet and its sweep's actor killed, as the OOM killer would (an actor outlives its raylet for
    a while: it answers the driver directly); its agent lives on, to publish the raylet's end to every driver."""
    raylet = node.all_processes["raylet"][0].process
    actors = [pid for pid in children(raylet.pid) if _command(pid).startswith("ray::NodeSweep")]
    raylet.kill()
    for pid in actors:
        os.kill(pid, signal.SIGKILL)


def children(pid: int) -> list[int]:
    found = []
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(path) as f:
                if int(f.read().rpartition(")")[2].split()[1]) == pid:
                    found.append(int(path.split("/")[2]))
        except (OSError, ValueError, IndexError):
            continue
    return found


def processes(db, run_id: int) -> set:
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        return store.done_repeats(run_id)
    finally:
        store.close()


def unfinished(db, run_id: int) -> list[str]:
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        return fleet.unfinished(store, run_id)
    finally:
        store.close()


def measured(db, node_id: str) -> bool:
    if not os.path.exists(db):
        return False
    try:
        _, cells = fleet_runs(db).get(node_id, (None, []))
        return any(c.status.value != "pending" for c in cells)
    except Exception:  # the store is being written
        return False


@pytest.mark.slow
def test_a_cluster_dlperf_started_itself_is_gone_when_it_ends(no_ray_left, tmp_path):
    require("ray")
    token, folder = no_ray_left
    proc = dlperf("run", "--workloads", "tiny-fcn-r", *SWEEP[2:], "--ray", "local", db=tmp_path / "x.db", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert gone(sorted(ray_pids(token)), 15), "a Ray process outlived dlperf"
    assert os.listdir(folder) == [], "dlperf left files of its Ray session or its node's sweep"
    [(run, cells)] = fleet_runs(tmp_path / "x.db").values()
    assert run.status == "complete" and [c.status.value for c in cells] == ["ok"]
    assert run.argv[:2] == ["dlperf", "run"] and "--ray" in run.argv  # the command typed, not the node's
    assert "OMP_NUM_THREADS" not in run.env["thread_env"] or "OMP_NUM_THREADS" in os.environ  # not Ray's


def test_an_actor_ray_cannot_place_is_said_in_dlperfs_words():
    """A resume within seconds of a node's raylet ending: "is passed over: The actor is not schedulable: The node
    specified via NodeAffinitySchedulingStrategy doesn't exist any more or is infeasible, and soft=False was
    specified." in Ray's words."""
    from dlperf.fleet_connect import actor_reason

    gone = RuntimeError("The actor is not schedulable: The node specified via NodeAffinitySchedulingStrategy doesn't "
                        "exist any more or is infeasible, and soft=False was specified.")  # fmt: skip
    assert actor_reason(gone) == "Ray places no work on it any more (the node is gone, or going)"
    died = RuntimeError("The actor died unexpectedly before finishing this task.")
    assert actor_reason(died).startswith("its Ray actor died before it answered")
    assert actor_reason(RuntimeError("ImportError: No module")) == "ImportError: No module"
