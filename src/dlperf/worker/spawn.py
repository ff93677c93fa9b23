"""dlperf's spawner: the worker processes of one MultiWorkerMirroredStrategy job on this node, each with its
TF_CONFIG (`--parallel multiworker`). Standard library only.

    python -m dlperf.worker.spawn --nproc-per-node=N [--nnodes=K --node-rank=R --rdzv-endpoint=HOST:PORT
        --rdzv-id=JOB --join-timeout=S] -m MODULE TASK.json EVENTS.jsonl

Why not torchrun, as DDP has: it runs in the framework's environment, and TensorFlow's has no torch; and TF_CONFIG
names every worker's host and port, where torchrun gives a worker only rank 0's address. TensorFlow does the rest
(its gRPC servers, the coordination service, the collective); the spawner only starts the processes, as torchrun's
agent does, and watches them the same way:

- the ports: N free ports of this node, picked by binding port 0 (TensorFlow's own tests pick them so); one node
  alone names them on 127.0.0.1;
- several nodes meet at the rendezvous endpoint: node 0's spawner listens on its port, each other node's sends its
  ports and job id, and node 0 answers every node with the whole cluster (node 0's workers at the endpoint's host,
  another node's at the address node 0 saw it connect from), node by node;
- each worker gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE as torchrun sets them, and TF_CONFIG; it dies with
  the spawner (`worker/lifeline.py`), which dies with dlperf;
- a worker that fails ends the job: the others are stopped (SIGTERM, then SIGKILL), and each failed or stopped
  worker's exit code is written to stderr as torchrun writes it ("rank : R (local_rank: L)", "exitcode : C"), which
  the parent reads the same way (`runner/collect.torchrun_exits`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

from dlperf.worker.lifeline import die_with_parent

STOP_GRACE_S = 3.0  # between SIGTERM and SIGKILL of the workers left when one failed
RETRY_S = 0.2  # how often a node tries node 0's endpoint until it listens


class JoinFailed(Exception):
    """The nodes did not meet: said in one line on stderr, exit code 1."""


def free_ports(n: int) -> list[int]:
    """`n` distinct ports nothing listens on now (all bound at once, so none repeats), released for the workers."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _line(conn: socket.socket) -> dict | list:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise JoinFailed("a node closed the rendezvous before it answered")
        data += chunk
    return json.loads(data)


def cluster(ports: list[int], nnodes: int = 1, node_rank: int = 0, endpoint: str | None = None, job: str = "",
            timeout_s: float = 600.0) -> list[str]:  # fmt: skip
    """Every worker's `host:port`, node by node, this node's workers on `ports`."""
    if endpoint is None:
        return [f"127.0.0.1:{p}" for p in ports]
    host, _, port = endpoint.rpartition(":")
    deadline = time.monotonic() + timeout_s
    if node_rank == 0:
        return _serve(host, int(port), ports, nnodes, job, deadline)
    while True:
        try:
            conn = socket.create_connection((host, int(port)), timeout=max(0.1, deadline - time.monotonic()))
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                raise JoinFailed(f"node 0 did not answer at {endpoint} within {timeout_s:g} s ({exc})") from None
            time.sleep(RETRY_S)
    with conn:
        conn.settimeout(max(0.1, deadline - time.monotonic()))
        conn.sendall(json.dumps({"job": job, "node": node_rank, "ports": ports}).encode() + b"\n")
        answer = _line(conn)
    if isinstance(answer, dict):
        raise JoinFailed(answer["error"])
    return answer


def _serve(host: str, port: int, ports: list[int], nnodes: int, job: str, deadline: float) -> list[str]:
    nodes, peers = {0: [f"{host}:{p}" for p in ports]}, []
    with socket.create_server(("", port)) as server:
        try:
            while len(nodes) < nnodes:
                server.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    conn, (address, *_) = server.accept()
                except TimeoutError:
                    raise JoinFailed(f"{nnodes - len(nodes)} of {nnodes} nodes did not join at port {port}") from None
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                asked = _line(conn)
                if asked.get("job") != job or asked.get("node") in nodes:  # another cell's, or a node twice
                    conn.sendall(json.dumps({"error": f"node 0 runs job {job}, not {asked.get('job')} of node "
                                                      f"{asked.get('node')}"}).encode() + b"\n")  # fmt: skip
                    conn.close()
                    continue
                nodes[asked["node"]] = [f"{address}:{p}" for p in asked["ports"]]
                peers.append(conn)
            everyone = [worker for n in sorted(nodes) for worker in nodes[n]]
            for conn in peers:
                conn.sendall(json.dumps(everyone).encode() + b"\n")
        finally:
            for conn in peers:
                conn.close()
    return everyone


def worker_env(base: dict[str, str], workers: list[str], rank: int, local_rank: int, per_node: int) -> dict[str, str]:
    config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}}
    return {**base, "TF_CONFIG": json.dumps(config), "RANK": str(rank), "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(len(workers)), "LOCAL_WORLD_SIZE": str(per_node)}  # fmt: skip


def watch(procs: dict[int, subprocess.Popen], interval: float) -> int:
    """Wait for every worker; the first that fails stops the rest. Each bad exit code is written as torchrun does."""
    while None in (codes := [p.poll() for p in procs.values()]):  # every worker polled, each time
        if any(code not in (None, 0) for code in codes):
            _stop([p for p in procs.values() if p.poll() is None])
            break
        time.sleep(interval)
    bad = {rank: p for rank, p in procs.items() if p.returncode != 0}
    first = min(procs)
    for rank, p in sorted(bad.items()):
        print(f"  rank      : {rank} (local_rank: {rank - first})\n  exitcode  : {p.returncode} (pid: {p.pid})",
              file=sys.stderr)  # fmt: skip
    return 1 if bad else 0


def _stop(procs: list[subprocess.Popen]) -> None:
    for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10.0)):
        for p in procs:
            if p.poll() is None:
                p.send_signal(sig)
        end = time.monotonic() + grace
        while any(p.poll() is None for p in procs) and time.monotonic() < end:
            time.sleep(0.05)


def main(argv: list[str]) -> int:
    die_with_parent()
    parser = argparse.ArgumentParser(prog="dlperf.worker.spawn")
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--monitor-interval", type=float, default=0.2)
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--rdzv-endpoint")
    parser.add_argument("--rdzv-id", default="")
    parser.add_argument("--join-timeout", type=float, default=600.0)
    parser.add_argument("-m", dest="module", required=True)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    a = parser.parse_args(argv[1:])
    n = a.nproc_per_node
    ports = free_ports(n)
    try:
        workers = cluster(ports, a.nnodes, a.node_rank, a.rdzv_endpoint, a.rdzv_id, a.join_timeout)
    except (JoinFailed, OSError, ValueError) as exc:
        print(f"dlperf.worker.spawn: the nodes did not meet: {exc}", file=sys.stderr)
        return 1
    first = a.node_rank * n
    procs = {}
    for local in range(n):
        env = worker_env(dict(os.environ), workers, first + local, local, n)
        procs[first + local] = subprocess.Popen([sys.executable, "-P", "-m", a.module, *a.args], env=env,
                                                stdin=subprocess.DEVNULL)  # fmt: skip
    return watch(procs, a.monitor_interval)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
