"""Estimates that know what is kept (runner/kept.py): a cell whose FLOPs and memory step an earlier run kept has a
first process that skips both, so the --dry-run estimate, the progress ETA and advise's line before its first
process leave them out; earlier processes' lives lose the extras they ran (their stored phases) and gain those the
new process will run. Fakes only: stated phases, a DATA_DIR of the test's own, no process run."""

import time
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from dlperf import crossover, envs
from dlperf.measure.timer import TimerConfig
from dlperf.plan import estimate as est
from dlperf.protocol import Cell
from dlperf.runner import kept, probe_cache
from dlperf.runner.tasks import schedule
from dlperf.store import Store
from dlperf.store.process import ProcessDetail, ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell
from dlperf.vocab import Status
from dlperf.workloads import BUILTIN

CELL = Cell("resnet-50", "torch", "cpu", 2, "fp32")
WORKLOAD = {"name": "resnet-50", "batch": 64}
COUNTED = ProcessDetail(
    flops_per_step=8e11, memory={"live_tensor_peak_bytes": 2000}, sources={}, started_at=time.time()
)  # no file of the user's
# resnet-50 b64 on 2 cores (3100dc1): a first process of 99.5 s, 27.5 s of it the FLOP count, 30.5 s the memory step
FIRST = est.Earlier(99.5, {"flops": 27.5, "memory": 30.5})
TIMER = SimpleNamespace(min_steps=1, min_time=0.0, max_time=0.001, max_warmup=1, warmup_window=1)


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A DATA_DIR of the test's own (an empty figures cache), the cache on, torch at a fixed version."""
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(kept.BYPASS, raising=False)
    monkeypatch.setattr(probe_cache, "framework_version", lambda framework, python: "2.13.0")
    monkeypatch.setattr(envs, "interpreter_for", lambda framework: "python")


def estimated(tasks, known, workloads=None):
    return est.estimate(tasks, workloads or {CELL.key: WORKLOAD}, known, timer=TIMER, timeout=600, loss_check=False,
                        cores=2, python_for=lambda fw: "python")  # fmt: skip


def test_has_says_which_figures_a_cells_first_process_takes_kept(here):
    assert kept.has(CELL, WORKLOAD) == ()
    kept.keep(kept.key(CELL, WORKLOAD), COUNTED, "run 1 of /tmp/a.db")
    assert kept.has(CELL, WORKLOAD) == ("flops", "memory")
    assert kept.has(Cell("resnet-50", "torch", "cpu", 1, "fp32"), WORKLOAD) == ("flops", "memory")  # any threads
    assert kept.has(CELL, {**WORKLOAD, "batch": 32}) == ()


def test_a_kept_cells_first_process_is_estimated_without_the_flop_count_and_memory_step(here):
    """A repeat of resnet-50 b64 was estimated at its first process's 99.5 s, 58 s of which is now skipped."""
    tasks = schedule([CELL], 1)
    assert estimated(tasks, {CELL.key: [FIRST]}).seconds == pytest.approx(99.5)  # nothing kept: counted again
    kept.keep(kept.key(CELL, WORKLOAD), COUNTED, "run 1 of /tmp/a.db")
    got = estimated(tasks, {CELL.key: [FIRST]})
    assert (got.seconds, got.at_most_s) == (pytest.approx(41.5), pytest.approx(41.5))


def test_earlier_lives_lose_the_extras_they_ran_and_gain_those_the_new_process_runs():
    # three earlier processes: the first counted the FLOPs and the memory step, the others did not
    earlier = [FIRST, est.Earlier(41.0), est.Earlier(42.0)]
    assert est.from_earlier(earlier, ["flops", "memory"]) == (pytest.approx(99.5), pytest.approx(100.0))
    assert est.from_earlier(earlier, []) == (pytest.approx(41.5), pytest.approx(42.0))
    # a process that will count what none of them counted (kept then): no figure for it, none made up
    assert est.from_earlier([est.Earlier(41.5)], ["flops"]) == (41.5, 41.5)


def test_the_pilot_model_charges_no_extras_a_kept_cell_skips(here, monkeypatch):
    monkeypatch.setattr(est.warm, "prepare", lambda *a: None)
    monkeypatch.setattr(est, "run_pilot", lambda *a: est.Pilot(step_s=2.0, fixed_s=5.0, threads=2, duration_s=9.0))
    before = estimated(schedule([CELL], 1), {}).seconds
    kept.keep(kept.key(CELL, WORKLOAD), COUNTED, "run 1 of /tmp/a.db")
    after = estimated(schedule([CELL], 1), {}).seconds
    assert before - after == pytest.approx((est.EXTRA_STEPS["flops"] + est.EXTRA_STEPS["memory"]) * 2.0)


def test_the_loss_check_stays_where_the_flops_and_memory_are_kept():
    cells = [Cell("fcn-r", "torch", "cpu", t, "bf16") for t in (1, 2)]
    both = lambda cell: ("flops", "memory")  # noqa: E731
    extras = [est.extras_of(t, set_, loss_check=True, kept_of=both) for set_ in [set()] for t in schedule(cells, 1)]
    assert extras == [["loss_check"], []]


def test_the_store_gives_each_earlier_process_its_extras(tmp_path):
    store = Store.open(tmp_path / "r.db", create=True)
    fingerprint = {"hostname": "a", "cpu_model": "x", "cores": 2}
    run_id = store.create_run({"spec": 1}, {"cores": 2}, fingerprint, ["dlperf", "run"], [PlannedCell(CELL, WORKLOAD)])
    phases = [{"flops_s": 27.5, "memory_s": 30.5, "timed_s": 18.0}, {"flops_s": None, "memory_s": None}, None]
    for repeat, stated in enumerate(phases):
        m = ProcessMeasurement(status=Status.OK, samples=[18.0], duration_s=[99.5, 41.0, 42.0][repeat],
                               detail=ProcessDetail(phases=stated))  # fmt: skip
        store.record(run_id, CELL.key, repeat, m, CellFigures(status=Status.OK))
    store.close()
    known = est.known_durations(str(tmp_path / "r.db"), fingerprint, TimerConfig())
    assert known == {CELL.key: [FIRST, est.Earlier(41.0), est.Earlier(42.0)]}


class Stop(Exception):
    """What the stand-in session raises where the first process would start: the test ends there."""


def test_advise_is_told_its_first_process_without_what_is_kept(monkeypatch):
    """advise's line before the first thread count's process said its earlier processes' median (99.5 s for a repeat
    of resnet-50 b64 whose FLOPs and memory step are kept, about 41.5 s long)."""

    def measure(*args, **kwargs):
        raise Stop

    told: list = []
    session = SimpleNamespace(spec=SimpleNamespace(frameworks=["torch"], modes=["fp32"], repeats=1), workloads={},
                              deadline=None, measure=measure)  # fmt: skip
    session.add = lambda cells, workload: session.workloads.update({c.key: workload for c in cells})
    key = crossover.cpu_cell(session.spec, BUILTIN["fcn-r"], 64, 2).key
    opts = crossover.Options("fcn-r", first=told.append, flags=True)
    for have, said in (((), 99.5), (("flops", "memory"), 41.5)):
        monkeypatch.setattr(kept, "has", lambda cell, workload, have=have: have)
        cpu = crossover.CpuSide(session, BUILTIN["fcn-r"], lambda n: None, 1234.5, opts, {key: [FIRST]})
        with pytest.raises(Stop):
            cpu.best_threads([1, 2], 64, [64], None, [])
        assert told.pop() == pytest.approx(said)


def test_an_earlier_run_timed_otherwise_is_no_guide(tmp_path):
    """A store holding `--max-time 1` runs of a cell: `--min-time 20 --max-time 30 --dry-run` said 'estimated 4 s (at
    most 5 s)', its processes' lives, though each will time its steps for 20 s or more. Only runs that timed their
    steps alike are taken."""
    store = Store.open(tmp_path / "r.db", create=True)
    fingerprint = {"hostname": "a", "cpu_model": "x", "cores": 2}
    short = {"timer": {**asdict(TimerConfig()), "max_time": 1.0}}
    run_id = store.create_run(short, {"cores": 2}, fingerprint, ["dlperf", "run"], [PlannedCell(CELL, WORKLOAD)])
    store.record(run_id, CELL.key, 0, ProcessMeasurement(status=Status.OK, samples=[0.01], duration_s=4.0),
                 CellFigures(status=Status.OK))  # fmt: skip
    store.close()
    db = str(tmp_path / "r.db")
    assert est.known_durations(db, fingerprint, TimerConfig(max_time=1.0)) == {CELL.key: [est.Earlier(4.0)]}
    assert est.known_durations(db, fingerprint, TimerConfig(min_time=20.0, max_time=30.0)) == {}
    assert est.known_durations(db, fingerprint, TimerConfig()) == {}  # the default, --max-time 60
