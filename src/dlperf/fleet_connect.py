"""Where `dlperf run --ray ADDRESS` reaches its cluster (`fleet.py`): the address checked before Ray is asked (Ray's
own connect retries a wrong port for minutes, deaf to Ctrl-C, or waits out 30 s to say "ray client connection
timeout"), Ray connected, and what Ray says of a failed connect in one line. Ray is imported here and in `fleet.py`
only.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import warnings
from urllib.parse import urlsplit

from dlperf.errors import MissingDependency, UsageError


def import_ray():
    try:
        import ray
    except ImportError:
        raise MissingDependency("--ray: Ray is not installed; pip install 'dlperf[ray]'") from None
    return ray


def connect(address: str, temp_dir: str, attempts: int = 3):
    """Ray, connected to the cluster at `address` (local: one started for this run, its session files in
    `temp_dir`); an address that does not answer is a UsageError, said before anything runs.

    Over Ray Client (`ray://`) the head starts a server of the client's own for each connection; when that server
    fails to come up (a cluster just started, or busy, can take longer than Ray's 30 s), the connect is tried again,
    `attempts` times in all, and then the server's own reason is said."""
    ray = import_ray()
    if address not in ("auto", "local"):
        _check(address)
    elif address == "auto" and (env := os.environ.get("RAY_ADDRESS", "").strip()) not in ("", "auto", "local"):
        try:  # what `ray.init("auto")` connects to: one left from an old cluster waited minutes, deaf to Ctrl-C
            _check(env)
        except UsageError as exc:
            raise UsageError(f"--ray auto: this shell's RAY_ADDRESS={env}, which Ray takes for auto: "
                             f"{str(exc).removeprefix(f'--ray {env}: ')} (unset RAY_ADDRESS for the cluster this "
                             "machine is in)") from None  # fmt: skip
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    for attempt in range(1, attempts + 1):
        try:
            with warnings.catch_warnings():  # Ray Client's own warning of a timeout repeats what the error says
                warnings.simplefilter("ignore")
                if address == "local":
                    ray.init(include_dashboard=False, _temp_dir=temp_dir, **quiet)
                else:
                    ray.init(address=address, **quiet)
            return ray
        except ConnectionAbortedError as exc:  # Ray Client: the head could not start this client's server
            why = server_reason(exc)
            if attempt == attempts:
                raise UsageError(f"--ray {address}: cannot connect after {attempts} tries: the head could not "
                                 f"start this client's server ({why}); {FORK_HINT}") from None  # fmt: skip
            # each failed try waited out Ray's 30 s: said, not minutes of nothing
            print(f"dlperf: --ray {address}: try {attempt} of {attempts} failed, the head could not start this "
                  "client's server; trying again", file=sys.stderr, flush=True)  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UsageError(refused(address, exc)) from None


def _check(address: str) -> None:
    """`HOST:PORT` or `ray://HOST:PORT` answers as what it names, said in one line before Ray is asked."""
    _check_reachable(address)
    if address.startswith("ray://"):
        _check_client(address)
    else:
        _check_gcs(address)


# Ray's head forks each client's server from a process busy with gRPC, whose fork handlers then kill it now and then
# as it starts (ray-project/ray#63202; parallel.md: 9 connects of 100 failed so, none of 100 without the handlers)
FORK_HINT = (
    "start the head as `GRPC_ENABLE_FORK_SUPPORT=false ray start --head ...`, and its client servers start "
    "(ray-project/ray#63202); the server's own log is ray_client_server_*.err in the head's Ray logs "
    "(/tmp/ray/session_latest/logs)"
)
NO_CLUSTER = "Could not find any running Ray instance"  # what `ray.init(address="auto")` says, naming its own flag


def refused(address: str, exc: BaseException) -> str:
    """A failed connect in one line: dlperf's words where what went wrong is known, else Ray's (`server_reason`)."""
    if address == "auto" and NO_CLUSTER in str(exc) and not os.environ.get("RAY_ADDRESS"):
        return ("--ray auto: this machine is in no Ray cluster (`ray start --head` starts one, `ray start --address` "
                "joins one); give a cluster's HOST:PORT or ray://HOST:PORT, or --ray local for one of this run's "
                "own")  # fmt: skip
    hint = ""
    if "ray client connection timeout" in str(exc) and os.environ.get("RAY_AUTH_MODE") != "token":
        hint = f"; a cluster `ray start` began checks a token: {TOKEN_HINT}"
    return f"--ray {address}: cannot connect ({server_reason(exc)}){hint}"


def server_reason(exc: BaseException) -> str:
    """One line for a failed Ray connect: the message's own first line, or, where Ray Client relays the server's
    traceback beneath an empty first line, the traceback's last line (its exception)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[-1]}"
    return lines[0]


# Ray's words for a node's actor that cannot run, in dlperf's: "The actor is not schedulable: The node specified via
# NodeAffinitySchedulingStrategy doesn't exist any more or is infeasible, and soft=False was specified."
ACTOR_GONE = {
    "not schedulable": "Ray places no work on it any more (the node is gone, or going)",
    "died unexpectedly": "its Ray actor died before it answered (the node, or its process, went down)",
}


def actor_reason(exc: BaseException) -> str:
    """One line for a node's actor that failed: dlperf's words for the ends Ray words its own way (`ACTOR_GONE`,
    `creation_reason`), else `server_reason`'s."""
    if created_not(exc):
        return creation_reason(exc)
    why = ANSI.sub("", server_reason(exc))
    return next((said for words, said in ACTOR_GONE.items() if words in why), why)


ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours Ray gives a task's name in its traceback
CREATION = "an error raised in its creation task"  # Ray's words for an actor whose class or __init__ raised


def created_not(exc: BaseException) -> bool:
    """A node's actor that never began: `NodeSweep`'s module failed to import there, or its __init__ raised."""
    return bool(getattr(exc, "actor_init_failed", False)) or CREATION in str(exc)


def creation_reason(exc: BaseException) -> str:
    """An actor that never began (`created_not`), in one line: the exception its creation ended in, the last line of
    Ray's traceback; "dlperf cannot be imported on that node: ImportError: ..." where its module failed to import."""
    lines = [ANSI.sub("", line).strip() for line in str(exc).splitlines()]
    lines = [line for line in lines if line and line.strip("^~ ")]  # no line of carets under a traceback's code
    last = lines[-1] if lines else type(exc).__name__
    if "failed to import on the worker" in str(exc) or last.startswith(("ImportError", "ModuleNotFoundError")):
        return f"dlperf cannot be imported on that node: {last}"
    return f"its Ray actor could not begin there: {last}"


def host_port(address: str) -> tuple[str, int]:
    """The host and port of `HOST:PORT` or `ray://HOST:PORT`, an IPv6 host without the brackets it is written in
    (`[::1]:6379`: the address lookup takes `::1`); anything else, an IPv6 host without brackets among it, is a
    UsageError."""
    where = address.removeprefix("ray://")
    usage = UsageError(f"--ray {address!r}: give auto, local, HOST:PORT or ray://HOST:PORT (an IPv6 host in "
                       "brackets, [::1]:6379)")  # fmt: skip
    try:
        parts = urlsplit(f"//{where}")
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is no number or out of range; a bracket left open
        raise usage from None
    if not host or port is None or parts.netloc != where or "@" in where:
        raise usage
    if where.startswith("[") and not where.rpartition(":")[0].endswith("]"):  # [::1]x:6379
        raise usage
    return host, port


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    try:
        socket.create_connection(host_port(address), timeout=timeout_s).close()
    except OSError as exc:
        raise UsageError(f"--ray {address}: unreachable ({exc.strerror or exc})") from None


GCS_PROBE = "/ray.rpc.NodeInfoGcsService/GetClusterId"  # the first call `ray.init` makes of a cluster's GCS
CLIENT_PROBE = "/ray.rpc.RayletDriver/ClusterInfo"  # Ray Client's first call: a PING its server answers itself
TOKEN_HINT = "set RAY_AUTH_MODE=token here, with the head's ~/.ray/auth_token"


def _check_gcs(address: str) -> None:
    """`HOST:PORT` answers as a Ray cluster's GCS, asked once with a short timeout: Ray's own connect retries a port
    that is not one (a dashboard's, Ray Client's) for minutes, deaf to Ctrl-C, and one refusing a missing token for
    20 s, printing a warning a second, before an error that names neither."""
    import grpc

    code = _answer(address, GCS_PROBE)
    if code == grpc.StatusCode.UNAUTHENTICATED and os.environ.get("RAY_AUTH_MODE") != "token":
        raise UsageError(f"--ray {address}: the cluster checks a token: {TOKEN_HINT}")
    if code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
        raise UsageError(f"--ray {address}: not a Ray cluster's address (the head's `ray start --head --port`, "
                         f"6379 by default; Ray Client's port is ray://HOST:PORT)")  # fmt: skip


def _check_client(address: str) -> None:
    """`ray://HOST:PORT` answers as Ray Client's server, asked as `_check_gcs` asks: Ray Client's connect to another
    port, or to one that wants a token it was not given, waits out its 30 s and says only "ray client connection
    timeout" (a listener that is no gRPC server at all, UNAVAILABLE here, too)."""
    import grpc
    from ray.core.generated.ray_client_pb2 import ClusterInfoRequest, ClusterInfoType

    where = address.removeprefix("ray://")
    if _answer(where, GCS_PROBE) in (grpc.StatusCode.OK, grpc.StatusCode.UNAUTHENTICATED):
        raise UsageError(f"--ray {address}: that port is the cluster's own (its GCS), not Ray Client's: give it "
                         f"without ray:// ({where}) on a machine of the cluster, or Ray Client's port (`ray start "
                         "--head --ray-client-server-port`, often 10001)")  # fmt: skip
    code = _answer(where, CLIENT_PROBE, ClusterInfoRequest(type=ClusterInfoType.PING).SerializeToString())
    if code == grpc.StatusCode.UNAUTHENTICATED and os.environ.get("RAY_AUTH_MODE") != "token":
        raise UsageError(f"--ray {address}: the cluster checks a token: {TOKEN_HINT}")
    if code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
        no_grpc = code == grpc.StatusCode.UNAVAILABLE  # the TCP connection taken (`_check_reachable`), then no HTTP/2
        what = " (what listens there took the connection but speaks no gRPC)" if no_grpc else ""
        raise UsageError(f"--ray {address}: not Ray Client's port{what}; Ray Client's is `ray start --head "
                         "--ray-client-server-port`, often 10001")  # fmt: skip


def _answer(address: str, method: str, request: bytes = b"", timeout_s: float = 5.0):
    """How `HOST:PORT` answers a call of `method` (`GCS_PROBE`, `CLIENT_PROBE`), asked once with a short timeout:
    grpc's status code; None on a TLS cluster (the plain channel would not answer; Ray's own connect says why)."""
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return None
    import grpc

    channel = grpc.insecure_channel(address)
    try:
        channel.unary_unary(method)(request, timeout=timeout_s)
        return grpc.StatusCode.OK
    except grpc.RpcError as exc:
        return exc.code()
    finally:
        channel.close()
