"""Two `dlperf run --ray` sweeps, or a sweep and a local run, measuring into one store at once (fleet.py), without a
cluster: the sweep says so as a local run does ("the two runs share the CPU")."""

from __future__ import annotations

import os
from types import SimpleNamespace

from dlperf import fleet
from dlperf.store import Store
from store.test_merge_unfinished import begun, measured_in_a_child
from test_fleet_lost import ALPHA, node_run
from test_ray import NODES, PollingRay, Remote


def test_a_sweep_into_a_store_another_process_measures_says_they_share_the_cpu(tmp_path, capsys):
    """`dlperf run --ray auto ... --db two.db &` then the same again: neither said a word, though two local runs
    say 'run 1 of two.db is being measured by pid N: the two runs share the CPU, ...'."""
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
            [info] = fleet.select([NODES[1]], None)
            actor = SimpleNamespace(poll=Remote({"rows": rows, "exit": 0, "error": None, "said": []}),
                                    close=Remote(None))  # fmt: skip
            node = fleet.Node(info, actor, ["dlperf", "run", "--ray", "auto"])
            assert fleet.follow(PollingRay, store, [node], "auto") == 0
        finally:
            store.close()
    assert node.run_id == 2 and pid != os.getpid()
    assert capsys.readouterr().err.splitlines() == [
        "dlperf: node bbbbbbbb (box2): run 2",
        f"dlperf: warning: run 1 of {db} is being measured by pid {pid}: the two runs share the CPU, and their "
        "timings disturb each other",
    ]
