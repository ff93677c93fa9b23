"""A run an older dlperf recorded lacks the fingerprint's newer keys (the CPU's identity and extensions, Python): it is
still of the machine that measured it wherever a view or a plan asks (`envinfo.alike`), not only for `--resume`. Its
report beside a new run, the estimate's earlier durations, the fleet's machines and the stored peaks all held
fingerprints equal key for key, and took one machine's old and new runs for two machines."""

from __future__ import annotations

import pytest

from dlperf.envinfo import alike
from dlperf.errors import UsageError
from dlperf.measure.timer import TimerConfig
from dlperf.plan.estimate import known_durations
from dlperf.report import fleet, load
from dlperf.report.utilization import same_machine
from dlperf.store import Store
from dlperf.store.records import RunRecord
from report.runs import MACHINE, processes, write_run

NEW = {**MACHINE, "cpu_id": {"vendor": "AuthenticAMD", "family": 25, "model": 17, "stepping": 1},
       "cpu_isa": ["avx2", "avx512f"], "python": "3.11"}  # fmt: skip
OTHER_CPU = {**NEW, "cpu_id": {**NEW["cpu_id"], "family": 26}}


def test_fingerprints_are_alike_on_the_keys_both_have():
    assert alike(MACHINE, NEW) and alike(NEW, MACHINE)
    assert not alike(NEW, OTHER_CPU)  # a Zen 5 guest is not the Zen 4 one, whatever its model string
    assert not alike(MACHINE, {**MACHINE, "hostname": "beta"})
    assert alike(MACHINE, {**MACHINE, "hostname": "beta"}, ignore=("hostname",))


def test_an_old_and_a_new_run_of_one_machine_report_together_and_feed_the_estimate(tmp_path):
    db = tmp_path / "r.db"
    store = Store.open(db, create=True)
    write_run(store, {"fcn-r": processes(1, 2, 0.1)}, fingerprint=MACHINE)
    write_run(store, {"alexnet-r": processes(2, 2, 0.1)}, fingerprint=NEW)
    write_run(store, {"resnet-56": processes(3, 2, 0.1)}, fingerprint=OTHER_CPU)
    store.close()
    assert {c.workload for c in load.load(str(db), [1, 2]).cells} == {"fcn-r", "alexnet-r"}
    # the old run's processes and the new one's, not the other CPU's
    assert len(known_durations(str(db), NEW, TimerConfig())) == 2
    for runs in ([2, 3], [1, 2, 3]):  # the old run is alike both, yet the new two are not
        with pytest.raises(UsageError, match="measured on different machines"):
            load.load(str(db), runs)


def _run(run_id: int, fingerprint: dict) -> RunRecord:
    return RunRecord(run_id, "2026-12-01T00:00:00", None, "complete", ["dlperf", "run"], {}, {}, fingerprint)


def test_the_fleet_groups_one_machines_old_and_new_runs_and_peaks_apply_across_them():
    machines = fleet.group([_run(1, MACHINE), _run(2, NEW), _run(3, OTHER_CPU)])
    assert [m.runs for m in machines] == [(1, 2), (3,)]
    assert same_machine(MACHINE, NEW, "torch", None)  # a peak measured before the CPU's identity was kept
    assert not same_machine(NEW, OTHER_CPU, "torch", None)


def test_runs_of_other_frameworks_on_one_machine_are_one_machines():
    """A fingerprint records the frameworks its run used: a torch run and a jax run of one machine were 'measured on
    different machines' to `dlperf report --run 1,2`, and two machines of one label to `--runs 1,2`. Only a framework
    both used, at two versions, tells them apart."""
    torch_run = {**NEW, "frameworks": {"torch": "2.13.0"}}
    jax_run = {**NEW, "frameworks": {"jax": "0.10.2"}}
    both = {**NEW, "frameworks": {"torch": "2.13.0", "jax": "0.10.2"}}
    assert alike(torch_run, jax_run) and alike(both, jax_run) and alike(torch_run, both)
    assert not alike(torch_run, {**NEW, "frameworks": {"torch": "2.14.0", "jax": "0.10.2"}})
    assert [m.runs for m in fleet.group([_run(1, torch_run), _run(2, jax_run)])] == [(1, 2)]


def test_one_hosts_machines_are_told_apart_by_their_cores_where_those_differ():
    """`taskset -c 0 dlperf run` beside a plain run: the columns were "vm · Xeon (run 1)" and "vm · Xeon (run 3)",
    which named no difference; a version apart, they still are by run."""
    older = {**NEW, "frameworks": {"torch": "2.13.0"}}
    newer, one_core = {**older, "frameworks": {"torch": "2.14.0"}}, {**older, "cores": {"cores": 1}}
    machines = fleet.group([_run(1, older), _run(2, newer), _run(3, one_core)])
    labels = [m.label for m in machines]
    cores = NEW["cores"]["cores"]
    assert labels == ["alpha · Xeon Test (run 1)", "alpha · Xeon Test (run 2)", "alpha · Xeon Test, 1 core"]
    assert fleet.group([_run(1, older), _run(3, one_core)])[0].label == f"alpha · Xeon Test, {cores} cores"
