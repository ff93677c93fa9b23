"""The report's runs of one machine (report/load.py) told apart as `table --runs` tells them (`fleet.group`): a Ray
node's run is another machine's than a local run of its host, and two nodes of one host in one sweep are two machines;
two `--ray local` sweeps of one host, a new node id each, are one."""

from __future__ import annotations

import json

import pytest

from dlperf.errors import UsageError
from dlperf.report import fleet, load
from dlperf.store import Store, now
from dlperf.store.records import Origin
from report.runs import MACHINE, processes, write_run

A, B = "a" * 56, "b" * 56


def node_run(store: Store, scratch, workload: str, node: str, campaign: str = "ray-20261207-130000") -> None:
    """A run node `node` of this host measured in the sweep `campaign`, merged in as `dlperf merge` keeps it (its
    origin ray:NODE)."""
    local = Store.open(scratch / f"{node[0]}{campaign}.db", create=True)
    rows = local.check_run(write_run(local, {workload: processes(1, 2, 0.1)}))
    local.close()
    run = {**rows.run, "spec_json": json.dumps({**json.loads(rows.run["spec_json"]), "campaign": campaign})}
    with store.transaction():
        store.insert_copy(run, rows.cells, rows.measurements, Origin(f"ray:{node}", 1, now()))


def test_a_ray_nodes_run_and_a_local_run_of_its_host_are_not_one_picture(tmp_path):
    """`report --run 1,3` mixed them in one table ('tiny-fcn-r from run 3, tiny-resnet-56 from run 1'), and `--run
    all` of a campaign of two nodes of one host headed its section with one node's label."""
    db = tmp_path / "r.db"
    store = Store.open(db, create=True)
    node_run(store, tmp_path, "resnet-56", A)  # run 1
    node_run(store, tmp_path, "alexnet-r", B)  # run 2: the same host, another node
    write_run(store, {"fcn-r": processes(3, 2, 0.1)}, fingerprint=MACHINE)  # run 3: a local run of that host
    store.close()
    assert len(fleet.read(str(db), runs=[1, 2, 3]).machines) == 3  # what table --runs and list --runs count
    with pytest.raises(UsageError, match=r"runs 1, 3 were measured on different machines or software \(run 1 -> 3: "
                                         r"Ray node aaaaaaaa -> none \(not a Ray sweep's run\)\)"):  # fmt: skip
        load.load(str(db), [1, 3])
    with pytest.raises(UsageError, match=r"\(run 1 -> 2: Ray node aaaaaaaa -> bbbbbbbb of one sweep\)"):
        load.load(str(db), "all")
    assert [c.workload for c in load.load(str(db), [1]).cells] == ["resnet-56"]  # one node's run alone, as before


def test_two_ray_local_sweeps_of_one_host_are_one_machine(tmp_path):
    """`report --run 1,2` of two `--ray local` sweeps on one host was refused: 'different machines or software (run 1
    -> 2: Ray node 0187e54b -> 7835f639)', though `--ray local` starts a node, under a new id, every sweep."""
    db = tmp_path / "r.db"
    store = Store.open(db, create=True)
    node_run(store, tmp_path, "resnet-56", A, "ray-20261207-130000")  # run 1
    node_run(store, tmp_path, "alexnet-r", B, "ray-20261207-131500")  # run 2: the next sweep, this host's new node
    store.close()
    [machine] = fleet.read(str(db), runs=[1, 2]).machines  # table --runs: one machine, both its nodes named
    assert machine.runs == (1, 2) and machine.host.endswith("(Ray nodes aaaaaaaa, bbbbbbbb)")
    assert sorted(c.workload for c in load.load(str(db), [1, 2]).cells) == ["alexnet-r", "resnet-56"]
