"""`run --profile --dry-run` counts each cell's profile process: after its timed ones, one more process builds the
step, warms it up and profiles a few steps (`runner/profile.py`). Seen: `dlperf run --workloads tiny-fcn-r
--threads 1 --profile --dry-run` said "1 cell process, estimated 9 s" and charged that process a cold start, where
the run started two processes, both forked from a warm parent. Fakes only: a pilot stood in for, profiles stored in
a store of the test's own."""

from types import SimpleNamespace

import pytest

from dlperf.plan import estimate as est
from dlperf.protocol import Cell
from dlperf.runner.profile import PROFILE_WARMUP
from dlperf.runner.tasks import schedule
from dlperf.store import Store
from dlperf.store.records import PlannedCell, ProfileOutcome
from dlperf.vocab import Status

CELL = Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32")
WORKLOADS = {CELL.key: {"name": CELL.workload, "batch": 4}}
TIMER = SimpleNamespace(min_steps=1, min_time=0.0, max_time=1.0, max_warmup=1, warmup_window=1)
FINGERPRINT = {"hostname": "a", "cpu_model": "x", "cores": 2}
COLD_S, FORK_S, PARENT_S = 3.0, 0.1, 2.5  # a cold start, a forked one, the warm parent's own start
STEP_S, BUILD_S = 0.01, 0.5


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """Every cell may fork; prepare records what it was told; each pilot is a cold process of known parts."""
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    told = []
    monkeypatch.setattr(est.warm, "why_cell_cold", lambda cell, limit=None: None)
    monkeypatch.setattr(est.warm, "prepare", lambda processes, limit, asked: told.append(dict(processes)))
    phases = {"startup_s": COLD_S, "framework_s": 0.0}  # its start, as `told_pilots` reads it
    pilot = est.Pilot(STEP_S, COLD_S + BUILD_S, 1, COLD_S + BUILD_S + 2 * STEP_S, started="cold", phases=phases)
    monkeypatch.setattr(est, "run_pilot", lambda *a: pilot)
    earlier = [est.Earlier(1.0, {}, FORK_S, 0.0, "warm"), est.Earlier(1.0, {}, FORK_S, PARENT_S, "warm")]
    monkeypatch.setattr(est, "starts_here", lambda known, pilots: {"torch": est.Starts.of(earlier)})
    return told


def estimated(profiles=(), profiled=None):
    return est.estimate(schedule([CELL], 1), WORKLOADS, {}, timer=TIMER, timeout=600, loss_check=False, cores=2,
                        python_for=lambda fw: "python", profiles=profiles, profiled=profiled)  # fmt: skip


def test_a_profiled_cell_is_charged_its_profile_process_forked_as_the_run_forks_it(machine):
    alone, profiled = estimated(), estimated([CELL])
    assert alone.profiles == 0 and profiled.profiles == 1
    assert ("profile", CELL.key) in machine[-1]  # the warm parent is asked for both processes
    # alone: one process, cold; profiled: two, forked, the first waiting for the parent
    timed = alone.seconds - (COLD_S + BUILD_S)
    assert profiled.seconds == pytest.approx(
        (FORK_S + BUILD_S + timed) + PARENT_S + (FORK_S + BUILD_S + (PROFILE_WARMUP + 5) * STEP_S)
    )


def test_the_profile_steps_are_fitted_to_max_time_at_the_pilots_step(machine):
    """A step of 0.3 s at --max-time 1: 2 profiled steps after 1 warm-up fit, not 5 after PROFILE_WARMUP."""
    pilot = est.Pilot(0.3, BUILD_S, 1, BUILD_S + 0.6)
    assert est.profile_process_s(CELL, pilot, TIMER, 5, 600) == pytest.approx(BUILD_S + 3 * 0.3)


def test_earlier_profiles_here_are_taken_as_they_were(machine):
    earlier = estimated([CELL], {CELL.key: [4.0, 6.0, 5.0]})
    alone = estimated()
    assert earlier.profiles_known == 1
    assert earlier.at_most_s - earlier.seconds == pytest.approx(alone.at_most_s - alone.seconds + 1.0)


def test_known_profiles_reads_the_ok_profiles_of_runs_on_this_machine(tmp_path):
    path = str(tmp_path / "r.db")
    store = Store.open(path, create=True)
    other = Cell("tiny-lstm", "torch", "cpu", 1, "fp32")
    for fingerprint in (FINGERPRINT, {**FINGERPRINT, "cpu_model": "y"}):
        plan = [PlannedCell(c, {"name": c.workload, "batch": 4}) for c in (CELL, other)]
        run_id = store.create_run({"spec": 1}, {"cores": 2}, fingerprint, ["dlperf", "run"], plan)
        for cell, status, life in ((CELL, Status.OK, 4.5), (other, Status.FAILED, 9.0)):
            store.record_profile(run_id, cell.key, ProfileOutcome(status, duration_s=life))
    store.close()
    assert est.known_profiles(path, FINGERPRINT) == {CELL.key: [4.5]}  # not the failed one, nor the other machine's
    assert est.known_profiles(str(tmp_path / "none.db"), FINGERPRINT) == {}


def test_the_dry_run_counts_the_profile_processes(capsys):
    from dlperf.commands.dry_run import print_estimate
    from dlperf.spec import RunSpec

    plan = SimpleNamespace(spec=RunSpec(("tiny-fcn-r",), profile=True), tasks=schedule([CELL], 1), cells=[CELL])
    print_estimate(
        SimpleNamespace(plan=plan, run_id=None, tasks=plan.tasks, estimate=est.Estimate(6.0, 9.0, 1, 2.0, 0, {}, 1, 1))
    )
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith("1 cell process and 1 profile process, estimated 6 s")
    assert said.endswith("1 profile from earlier profiles here, the others from 1 pilot step that took 2 s")


def test_for_plan_profiles_each_cell_once_after_its_last_repeat_and_the_profiles_cut_off_first(tmp_path, monkeypatch):
    from dlperf.spec import RunSpec

    asked = {}
    monkeypatch.setattr(est, "estimate", lambda tasks, workloads, known, **kw: asked.update(kw))
    cut, other = Cell("tiny-lstm", "torch", "cpu", 1, "fp32"), Cell("tiny-fcn-r", "torch", "cpu", 2, "fp32")
    tasks = schedule([CELL, other], 3)
    spec = RunSpec(("tiny-fcn-r",), profile=True, repeats=3, profile_steps=2)
    plan = SimpleNamespace(spec=spec, tasks=tasks, workloads=WORKLOADS, env={}, cores=2)
    est.for_plan(plan, str(tmp_path / "none.db"), tasks=tasks[2:], to_profile=[cut])
    assert asked["profiles"] == [cut, CELL, other] and asked["profile_steps"] == 2
    est.for_plan(SimpleNamespace(**{**vars(plan), "spec": RunSpec(("tiny-fcn-r",), repeats=3)}), str(tmp_path / "n.db"))
    assert asked["profiles"] == []
