"""The Ray node of the driver's own machine lost mid-sweep (fleet.py), without a cluster. Ray does not always end the
driver then (fleet_watch.watched says it where it does): on a local 2-node cluster whose head raylet was killed,
the driver lived on, lost the head's actor at once and, 9 s later, when Ray marked the head dead, the other node's
actor ("The actor is dead because its owner has died ... Owner's node has crashed"); that node, alive, was said
'lost ... (the node, or its network, went down)'. The same on a real cluster: by hand (tests/test_ray.py's cluster
cannot kill its head's raylet and go on)."""

from __future__ import annotations

import os
import subprocess
from types import SimpleNamespace

from dlperf import fleet
from test_fleet_lost import lost_sweep
from test_ray import PollingRay, Remote

A, B = "a" * 56, "b" * 56


class Lost:
    """An actor Ray ended: its poll raises Ray's error."""

    close = Remote(None)

    def __init__(self, raw: str):
        self.poll = SimpleNamespace(remote=lambda: (_ for _ in ()).throw(RuntimeError(raw)))


def both_lost(tmp_path, raylet_pid: int, capsys) -> tuple[int, list[str]]:
    """Node A (this machine's, run 1) and node B (another machine, alive, before its first rows) both lost; the
    exit code and what was said."""
    store = lost_sweep(tmp_path / "driver.db")
    raylet = tmp_path / "raylet.pid"
    raylet.write_text(str(raylet_pid))
    here, there = fleet.NodeInfo(A, "alpha", {}, {}, "10.0.0.1"), fleet.NodeInfo(B, "beta", {}, {}, "10.0.0.2")
    nodes = [fleet.Node(here, Lost("unavailable"), ["dlperf"], 1), fleet.Node(there, Lost("its owner has died"), [])]
    try:
        code = fleet.follow(PollingRay, store, nodes, "auto", fleet.RayLog(str(tmp_path / "driver.db")),
                            raylet=str(raylet))  # fmt: skip
        assert store.run(1).status == "interrupted"
    finally:
        store.close()
    return code, capsys.readouterr().err.splitlines()


def test_nodes_lost_with_this_machines_raylet_are_said_as_its_end(tmp_path, capsys):
    gone = subprocess.Popen(["true"])
    gone.wait()
    code, [line] = both_lost(tmp_path, gone.pid, capsys)
    assert code == 1 and "went down" not in line, line
    db = tmp_path / "driver.db"
    assert line == (f"dlperf: the raylet of the Ray node this machine is attached to (pid {gone.pid}) has ended, and "
                    "Ray stopped this sweep's actors with it, on node aaaaaaaa (host alpha, address 10.0.0.1), node "
                    "bbbbbbbb (host beta, address 10.0.0.2), alive or not; run 1 keeps what it stored. `dlperf run "
                    f"--resume --ray auto --db {db}` goes on once this machine is a node again (ray start), or from "
                    "outside over ray://")  # fmt: skip
    assert "its owner has died" in (tmp_path / "driver.db.ray.log").read_text()  # Ray's words, as for a lost node


def test_nodes_lost_while_this_machines_raylet_runs_are_each_a_lost_node(tmp_path, capsys):
    code, lines = both_lost(tmp_path, os.getpid(), capsys)  # a raylet still running
    assert code == 1 and len(lines) == 2, lines
    assert lines[0].startswith("dlperf: node aaaaaaaa (host alpha, address 10.0.0.1) was lost at ")
    assert lines[1].startswith("dlperf: node bbbbbbbb (host beta, address 10.0.0.2) was lost at ")
    assert all("(its node, network or process went down)" in line for line in lines)
