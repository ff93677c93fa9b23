"""Two `dlperf run --ray` sweeps, or a sweep and a local run, measuring into one store at once (fleet.py), without a
cluster: the sweep says so as a local run does ("the two runs share the CPU")."""

from __future__ import annotations

import os
import socket
from types import SimpleNamespace

from dlperf import fleet
from dlperf.store import Store
from store.test_merge_unfinished import begun, measured_in_a_child
from test_fleet_lost import ALPHA, node_run
from test_ray import NODES, PollingRay, Remote


def sweep_beside(tmp_path, node: dict) -> tuple[int, int]:
    """A sweep on `node` into a store whose run 1 another process of this host measures (a local run, or another
    sweep's driver): the id of the sweep's run and the other process's pid."""
    db = tmp_path / "two.db"
    local = Store.open(tmp_path / "node.db", create=True)
    rows = local.check_run(node_run(local, ALPHA, {0: 1}, "running"))
    local.close()
    with measured_in_a_child(lambda: begun(db)):  # the other sweep's driver (or a local run) leases run 1
        other = Store.open(db, create=False)
        pid = other.measured_by(1).pid
        other.close()
        store = Store.open(db, create=False)
        try:
            [info] = fleet.select([node], None)
            actor = SimpleNamespace(poll=Remote({"rows": rows, "exit": 0, "error": None, "said": []}),
                                    close=Remote(None))  # fmt: skip
            sweep = fleet.Node(info, actor, ["dlperf", "run", "--ray", "auto"])
            assert fleet.follow(PollingRay, store, [sweep], "auto") == 0
        finally:
            store.close()
    assert pid != os.getpid()
    return sweep.run_id, pid


def test_a_sweep_into_a_store_another_process_measures_says_they_share_the_cpu(tmp_path, capsys):
    """`dlperf run --ray auto ... --db two.db &` then the same again: neither said a word, though two local runs
    say 'run 1 of two.db is being measured by pid N: the two runs share the CPU, ...'."""
    here = {**NODES[1], "NodeManagerHostname": socket.gethostname()}  # a single-machine cluster's node: this host
    run_id, pid = sweep_beside(tmp_path, here)
    assert run_id == 2 and capsys.readouterr().err.splitlines() == [
        f"dlperf: node bbbbbbbb ({socket.gethostname()}): run 2",
        f"dlperf: warning: run 1 of {tmp_path / 'two.db'} is being measured by pid {pid}: the two runs share the CPU, "
        "and their timings disturb each other",
    ]


def test_a_sweep_whose_nodes_are_other_machines_does_not_say_they_share_this_ones_cpu(tmp_path, capsys):
    """Over ray:// or a remote head, a local run of the driver's host measured into the store was said to share the
    CPU with the sweep, whose nodes are other machines."""
    run_id, _ = sweep_beside(tmp_path, NODES[1])  # box2
    assert run_id == 2 and capsys.readouterr().err.splitlines() == ["dlperf: node bbbbbbbb (box2): run 2"]
