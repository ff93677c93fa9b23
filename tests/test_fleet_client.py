"""`dlperf run --ray ray://HOST:PORT` (Ray Client) without a cluster: the connection lost mid-sweep, Ray's logging
kept off the terminal, the GCS's port given as Ray Client's; and what a hostile pass found: too little of a resource
for `--nodes`. On a real cluster: tests/test_ray.py (slow)."""

from __future__ import annotations

import logging
import socket
import threading
from types import SimpleNamespace

import pytest

from conftest import require
from dlperf import fleet, fleet_connect
from dlperf.errors import UsageError
from test_fleet_lost import A, lost_sweep
from test_ray import FakeRay, PollingRay, grpc_answering  # noqa: F401 (a fixture)

CUT = ConnectionError(
    "Request can't be sent because the Ray client has already been disconnected due to an error. Last exception: "
    "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.NOT_FOUND\n\tdetails = "
    '"Attempted to reconnect a session that has already been cleaned up"\n>'
)


class Unreachable:
    """An actor over a Ray Client whose connection is gone: every call raises, closing included."""

    poll = close = SimpleNamespace(remote=lambda: (_ for _ in ()).throw(CUT))


class ClientRay(PollingRay):
    @staticmethod
    def kill(actor):
        raise ValueError("ray.kill() only supported for actors")  # what Ray says once its client mode is gone


def test_a_lost_client_connection_is_one_line_the_runs_interrupted(tmp_path, capsys):
    """Ray Client's server on the head ended mid-sweep: the driver ended on a traceback (ConnectionError from the
    poll, then ValueError from ray.kill), run left 'running'; now one line, the run interrupted, Ray's words in the
    log, no actor closed (they ended with the connection)."""
    store = lost_sweep(tmp_path / "driver.db")
    store.set_run_status(1, "running")
    info = fleet.NodeInfo(A, "alpha", {}, {}, "10.0.0.7")
    log = fleet.RayLog(str(tmp_path / "driver.db"))
    address = "ray://head:10001"
    assert fleet.follow(ClientRay, store, [fleet.Node(info, Unreachable(), ["dlperf"], 1)], address, log) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"dlperf: the connection to the cluster at {address} was lost at ")
    assert line.endswith(
        f"the nodes' sweeps ended with it; run 1 keeps what the nodes sent. `dlperf run --resume --ray {address} "
        f"--db {tmp_path / 'driver.db'}` goes on once the cluster answers"
    )
    assert store.run(1).status == "interrupted"
    assert "Attempted to reconnect a session" in (tmp_path / "driver.db.ray.log").read_text()
    store.close()


def test_rays_logging_goes_to_the_log_and_comes_back_after(tmp_path, capsys):
    """Ray Client logs its lost connection as an error of Ray's logger ("Unrecoverable error in data channel", with
    its traceback) and relays the head's warnings through a logger that passes nothing up: both reached the
    terminal."""
    ray = require("ray")
    before = {name: logging.getLogger(name).handlers[:] for name in ("ray", "ray.util.client.logsclient")}
    log = fleet.RayLog(str(tmp_path / "x.db"))
    undo = log.divert(ray)
    try:
        raise OSError("socket closed")
    except OSError:
        logging.getLogger("ray.util.client.dataclient").exception("Unrecoverable error in data channel.")
    logging.getLogger("ray.util.client.logsclient").warning("the head's driver: a warning")
    logging.getLogger("ray.util.client.logsclient").info("the head's driver: chatter")
    undo()
    assert {name: logging.getLogger(name).handlers for name in before} == before
    assert capsys.readouterr().err == ""
    text = (tmp_path / "x.db.ray.log").read_text()
    assert "Unrecoverable error in data channel." in text and "OSError: socket closed" in text
    assert "a warning" in text and "chatter" not in text


def test_the_clusters_own_port_given_as_ray_clients_is_said_at_once(monkeypatch, grpc_answering):  # noqa: F811
    """`ray://HOST:6379` (the GCS's port): Ray Client waited out its 30 s, then said "ray client connection timeout"
    and suggested a token; now one line before any connect. Ray Client's own port (UNIMPLEMENTED) is let through."""

    address, code = grpc_answering  # a GCS that wants a token
    fake = FakeRay()
    monkeypatch.setattr(fleet_connect, "import_ray", lambda: fake)
    with pytest.raises(UsageError) as caught:
        fleet.connect(f"ray://{address}", "/unused")
    assert str(caught.value).startswith(f"--ray ray://{address}: that port is the cluster's own (its GCS), not Ray "
                                        f"Client's: give it without ray:// ({address})")  # fmt: skip
    assert fake.calls == 0
    code[0] = {fleet_connect.CLIENT_PROBE: b""}  # Ray Client's proxy: it answers its PING, not the GCS's call
    assert fleet.connect(f"ray://{address}", "/unused") is fake and fake.calls == 1


@pytest.mark.parametrize("auth_mode", [None, "token"])
def test_ray_clients_port_that_wants_a_token_says_so_at_once(monkeypatch, grpc_answering, auth_mode):  # noqa: F811
    """Ray Client's server refusing a missing token: its connect waited out 30 s, then "ray client connection
    timeout"; with RAY_AUTH_MODE=token set, Ray sends the token and the probe lets it through."""
    import grpc

    address, code = grpc_answering
    code[0] = {fleet_connect.CLIENT_PROBE: grpc.StatusCode.UNAUTHENTICATED}
    fake = FakeRay()
    monkeypatch.setattr(fleet_connect, "import_ray", lambda: fake)
    if auth_mode:
        monkeypatch.setenv("RAY_AUTH_MODE", auth_mode)
        assert fleet.connect(f"ray://{address}", "/unused") is fake
        return
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(UsageError, match=rf"^--ray ray://{address}: the cluster checks a token: set RAY_AUTH_MODE"):
        fleet.connect(f"ray://{address}", "/unused")
    code[0] = {}  # a gRPC service that is not Ray Client's
    with pytest.raises(UsageError, match=rf"^--ray ray://{address}: not Ray Client's port"):
        fleet.connect(f"ray://{address}", "/unused")
    assert fake.calls == 0


@pytest.mark.parametrize("reply", [b"", b"HTTP/1.1 400 Bad Request\r\n\r\n"], ids=["closes", "http1"])
def test_a_listener_that_is_no_grpc_server_is_said_at_once(monkeypatch, reply):
    """`ray://HOST:PORT` at a port that takes the connection and then closes it, or answers as a web server: the
    probes' calls end UNAVAILABLE at once, and Ray Client's connect was let through to wait out its 30 s for "ray
    client connection timeout" and a token hint. Now one line naming the address; Ray's connect is never called."""
    require("ray")
    fake = FakeRay()
    monkeypatch.setattr(fleet_connect, "import_ray", lambda: fake)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        threading.Thread(target=_answer_and_close, args=(listener, reply), daemon=True).start()
        address = f"ray://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(UsageError) as caught:
            fleet.connect(address, "/unused")
    assert str(caught.value) == (f"--ray {address}: not Ray Client's port (what listens there took the connection but "
                                 "speaks no gRPC); Ray Client's is `ray start --head --ray-client-server-port`, often "
                                 "10001")  # fmt: skip
    assert fake.calls == 0


def _answer_and_close(listener: socket.socket, reply: bytes) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:  # the test closed the listener
            return
        with conn:
            if reply:
                conn.recv(4096)
                conn.sendall(reply)


def test_too_little_of_a_resource_says_how_much_the_nodes_have():
    """`--nodes CPU=4` on nodes of 2 CPUs said "no alive node has that label or resource (labels: none)"."""
    from test_ray import NODES

    with pytest.raises(UsageError) as caught:
        fleet.select(NODES, ("CPU", "16"))
    assert str(caught.value) == "--nodes CPU=16: no alive node has that much CPU (the most a node has: 8)"


def test_resume_over_ray_of_a_run_measured_without_ray_names_the_plain_resume(tmp_path):
    """`--resume --ray` of a store whose unfinished run is not a Ray sweep's said only that it has none."""
    from dlperf.store import Store

    store = Store.open(tmp_path / "x.db", create=True)
    run_id = store.create_run({"repeats": 1}, {}, {}, ["dlperf", "run"], [])
    store.set_run_status(run_id, "interrupted")
    with pytest.raises(UsageError) as caught:
        fleet.resume_nodes(None, store, [], [])
    store.close()
    assert str(caught.value) == (f"--resume --ray: {tmp_path / 'x.db'} has no unfinished run of a Ray sweep (run 1, "
                                 f"not a Ray sweep's: `dlperf run --resume --db {tmp_path / 'x.db'}`)")  # fmt: skip


def test_ray_auto_on_a_machine_in_no_cluster_says_what_to_do_in_dlperfs_words(monkeypatch):
    """Ray's own text named a flag dlperf does not have: "... by setting `--address` flag or `RAY_ADDRESS` ..."."""
    said = "Could not find any running Ray instance. Please specify the one to connect to by setting `--address` flag"
    monkeypatch.setattr(fleet_connect, "import_ray", lambda: FakeRay(ConnectionError(said)))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(UsageError) as caught:
        fleet.connect("auto", "/unused")
    assert str(caught.value).startswith("--ray auto: this machine is in no Ray cluster (`ray start --head` starts one")
    assert "--address` flag" not in str(caught.value) and str(caught.value).endswith("or --ray local for one of this "
                                                                                     "run's own")  # fmt: skip


def test_a_client_connection_lost_before_the_sweep_began_is_one_line(tmp_path):
    """Lost while the nodes were asked for (or their kinds, or their actors started): a ConnectionError traceback."""

    class Gone:
        shut = False

        def nodes(self):
            raise CUT

        def shutdown(self):
            self.shut = True

    ray, args = Gone(), SimpleNamespace(resume=False, ray="ray://head:10001")
    with pytest.raises(UsageError) as caught:
        fleet._run(ray, args, ["run"], str(tmp_path / "x.db"), None, fleet.RayLog(str(tmp_path / "x.db")))
    assert str(caught.value).startswith("--ray ray://head:10001: the connection to the cluster was lost before the "
                                        "sweep began (Request can't be sent")  # fmt: skip
    assert ray.shut and not (tmp_path / "x.db").exists()
