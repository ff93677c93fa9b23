"""`dlperf run --resume --ray` of a store a Ray sweep's run was merged into (fleet.py, store/merge.py), without a
cluster: refused while the sweep's own file is resumed still, as the local `--resume` refuses such a copy."""

from __future__ import annotations

import os

import pytest

from dlperf import fleet
from dlperf.errors import UsageError
from dlperf.store import Store, merge
from test_fleet_lost import ALPHA, lost_sweep
from test_ray import NODES, PollingRay


def test_a_merged_ray_run_is_not_resumed_while_its_sweeps_file_is(tmp_path, monkeypatch):
    """After `dlperf merge f3.db --db m.db` of an interrupted sweep, `--resume --ray --db f3.db` and `--resume --ray
    --db m.db` both resumed run 1 on the same node at once, each timing the other's load."""
    f3, m = tmp_path / "f3.db", tmp_path / "m.db"
    lost_sweep(f3).close()
    merge.merge([str(f3)], str(m))
    started = []
    monkeypatch.setattr(fleet, "start_node", lambda ray, info, argv, rows=None, run_id=None, continues=None: (
        started.append(run_id) or fleet.Node(info, None, ["dlperf"], run_id)))  # fmt: skip
    monkeypatch.setattr(fleet, "_kinds", lambda ray, chosen, frameworks: {n.node_id: ALPHA for n in chosen})
    infos = fleet.select(NODES, None)
    driver = Store.open(f3, create=False)  # `--resume --ray --db f3.db`: its driver leases the run it resumes
    copy = Store.open(m, create=False)
    try:
        driver.acquire(1)
        holder = driver.measured_by(1)
        with pytest.raises(UsageError) as refused:
            fleet.resume_nodes(PollingRay, copy, infos, ["run", "--resume"])
        assert str(refused.value) == (
            f"--resume --ray: run 1 of {m} was copied from {f3}, where {holder.describe()} is measuring it still: "
            "resumed here, the two would time each other's load; merging it again once the run is finished brings "
            f"the copy up to date (`dlperf merge {f3} --db {m}`)"
        )
        assert started == [] and copy.measured_by(1) is None  # nothing taken over, nothing started
        driver.set_run_status(1, "interrupted")  # its driver ended
        fleet.resume_nodes(PollingRay, copy, infos, ["run", "--resume"])  # no process measures it there: it goes on
        assert started == [1]
    finally:
        driver.close()
        copy.close()


def test_a_resumed_run_stays_leased_to_its_driver_while_its_node_takes_it_up(tmp_path):
    """The node's file holds the run interrupted until its own `dlperf run --resume` takes it up, and the driver
    wrote that status back on the first poll: the run was 'interrupted', leased to no one, for the rest of the
    resume, so a second `--resume --ray` of that file, or of a store it was merged into, resumed it at once too."""
    store = lost_sweep(tmp_path / "f3.db")
    try:
        seeded = store.check_run(1)  # the node's first rows: its copy of the run, interrupted as it was given
        assert seeded.run["status"] == "interrupted"
        store.acquire(1)
        store.set_run_status(1, "running")  # as `resume_nodes` takes it
        [info] = fleet.select([NODES[0]], None)
        node = fleet.Node(info, None, ["dlperf"], 1)
        fleet.sync(store, node, seeded)
        holder = store.measured_by(1)
        assert store.run(1).status == "running" and holder is not None and holder.pid == os.getpid()
    finally:
        store.close()
