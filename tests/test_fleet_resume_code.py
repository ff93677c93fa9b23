"""`dlperf run --resume --ray` where the dlperf a node runs is not the one that measured the run (fleet.py,
fleet_node.py), without a cluster: refused as the local `--resume` refuses another version or other timing code."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dlperf import envinfo, fleet, fleet_node
from dlperf.errors import UsageError
from dlperf.store import Store, now
from dlperf.store.records import Origin
from test_fleet_lost import ALPHA, PLAN, A, measure
from test_ray import NODES, PollingRay

SAID = "dlperf's timing code 4f1c9a2e0b7d (commit 11eef592) -> 9d03b5e1c2aa (commit 29e29346)"
CODE = {"digest": "4f1c9a2e0b7d" + "0" * 52, "commit": "11eef592" + "0" * 32}
OTHER = {"digest": "9d03b5e1c2aa" + "0" * 52, "commit": "29e29346" + "0" * 32}


def interrupted_sweep(db) -> Store:
    """The driver's store of a Ray sweep Ctrl-C stopped: node A's run 1, measured by dlperf 0.1.0 of timing code
    `CODE`, one process of its first cell done."""
    local = Store.open(db.with_name("a.db"), create=True)
    env = {"cpu": {"model": "Xeon Test"}, "cores": {"cores": 8}, "hostname": "alpha", "dlperf_version": "0.1.0",
           "dlperf_code": CODE}  # fmt: skip
    run_id = local.create_run({"repeats": 2, "campaign": "c"}, env, ALPHA, ["dlperf", "run", "--ray", "x"], PLAN)
    measure(local, run_id, PLAN[0], 0)
    local.set_run_status(run_id, "interrupted")
    rows = local.check_run(run_id)
    local.close()
    store = Store.open(db, create=True)
    with store.transaction():
        store.insert_copy(rows.run, rows.cells, rows.measurements, Origin(f"ray:{A}", 1, now()))
    return store


@pytest.mark.parametrize(
    ("node", "dlperf", "said"),
    [
        (0, {"dlperf_version": "0.1.0", "dlperf_code": OTHER},  # its own node, dlperf updated there since
         SAID),
        (1, {"dlperf_version": "0.2.0", "dlperf_code": OTHER},  # another node, to measure what it left
         f"dlperf 0.1.0 -> 0.2.0; {SAID}"),
        (0, {"dlperf_version": "0.1.0"},  # a node's dlperf older than its kind's code
         "dlperf's timing code 4f1c9a2e0b7d -> one the node's older dlperf does not say"),
    ],
    ids=["its own node", "another node", "an older dlperf"],
)  # fmt: skip
def test_a_node_running_other_dlperf_code_does_not_take_a_run_up(tmp_path, monkeypatch, node, dlperf, said):
    """Its node's dlperf updated (a git pull) after Ctrl-C, `--resume --ray` measured what the run left with the new
    timing code where the local `--resume` refuses it, and wrote the node's code over the run's: the run said it was
    timed by one code throughout. Now refused in one line, nothing taken over nor started."""
    store = interrupted_sweep(tmp_path / "d.db")
    started = []
    monkeypatch.setattr(fleet, "start_node", lambda ray, info, argv, rows=None, run_id=None, continues=None: (
        started.append(run_id) or fleet.Node(info, None, ["dlperf"], run_id)))  # fmt: skip
    monkeypatch.setattr(fleet, "_kinds", lambda ray, chosen, frameworks: {n.node_id: {**ALPHA, **dlperf}
                                                                          for n in chosen})  # fmt: skip
    [info] = fleet.select([NODES[node]], None)
    try:
        with pytest.raises(UsageError) as refused:
            fleet.resume_nodes(PollingRay, store, [info], ["run", "--resume"])
        assert str(refused.value) == (f"--resume --ray: run 1 was measured by another dlperf than {info.describe()} "
                                      f"runs ({said}); start a new run instead")  # fmt: skip
        assert started == [] and store.measured_by(1) is None and store.run(1).status == "interrupted"
    finally:
        store.close()


def test_a_node_running_the_runs_dlperf_code_takes_it_up(tmp_path, monkeypatch):
    store = interrupted_sweep(tmp_path / "d.db")
    started = []
    monkeypatch.setattr(fleet, "start_node", lambda ray, info, argv, rows=None, run_id=None, continues=None: (
        started.append(run_id) or fleet.Node(info, None, ["dlperf"], run_id)))  # fmt: skip
    same = {**ALPHA, "dlperf_version": "0.1.0", "dlperf_code": CODE}
    monkeypatch.setattr(fleet, "_kinds", lambda ray, chosen, frameworks: {n.node_id: same for n in chosen})
    try:
        fleet.resume_nodes(PollingRay, store, fleet.select([NODES[0]], None), ["run", "--resume"])
        assert started == [1] and store.run(1).status == "running"
    finally:
        store.close()


def test_a_nodes_kind_says_the_dlperf_it_runs():
    """What the driver compares: the node's own version and timing code beside its fingerprint."""
    env = {"cpu": {"model": "Xeon Test"}, "hostname": "alpha", "dlperf_version": "0.1.0", "dlperf_code": CODE}
    kind = fleet_node.NodeSweep.kind(SimpleNamespace(environment=lambda frameworks: env), ["torch"])
    assert kind == {**envinfo.fingerprint(env), "dlperf_version": "0.1.0", "dlperf_code": CODE}
    assert fleet.same_kind(kind, envinfo.fingerprint(env))  # still of the same kind of machine
