"""The dry run charges a warm parent's start once per run: a run's first process forked from a warm parent waits for
the parent's imports (`runner/warm.py`), and that process's life, or the first forked pilot's, is no guide to the
other forked processes' (measured here: tiny-fcn-r and tiny-resnet-56 at 1 and 2 threads, 3 processes each, after a
run of one process each: estimated 31 s, where the run took 19.2 s; from pilots, 59 s for 20.1 s). Fakes only:
stated phases in a store of the test's own, the pilots stood in for."""

from types import SimpleNamespace

import pytest

from dlperf.measure.timer import TimerConfig
from dlperf.plan import estimate as est
from dlperf.protocol import Cell
from dlperf.runner.tasks import schedule
from dlperf.store import Store
from dlperf.store.process import ProcessDetail, ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell
from dlperf.vocab import Status

CELLS = [Cell(w, "torch", "cpu", t, "fp32") for w in ("tiny-fcn-r", "tiny-resnet-56") for t in (1, 2)]
WORKLOADS = {c.key: {"name": c.workload, "batch": 4} for c in CELLS}
TIMER = SimpleNamespace(min_steps=1, min_time=0.0, max_time=0.001, max_warmup=1, warmup_window=1)
FINGERPRINT = {"hostname": "a", "cpu_model": "x", "cores": 2}
PARENT_S = 5.0  # the warm parent's imports, which the run's first forked process waited for
FORK_S = 0.1  # a forked process's own start
LIVES = [6.0, 1.0, 0.8, 2.0]  # the earlier run's processes, in CELLS' order: the first waited for the parent


@pytest.fixture
def forks(tmp_path, monkeypatch):
    """Every cell may fork (as on Linux with PyTorch), an empty figures cache of the test's own."""
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(est.warm, "why_cell_cold", lambda cell, limit=None: None)
    monkeypatch.setattr(est.warm, "prepare", lambda *a: None)


def estimated(tasks, known):
    return est.estimate(tasks, WORKLOADS, known, timer=TIMER, timeout=600, loss_check=False, cores=2,
                        python_for=lambda fw: "python")  # fmt: skip


def earlier_run(path) -> str:
    """A run of one process a cell, each forked, in CELLS' order: the first waited for the warm parent."""
    store = Store.open(path, create=True)
    plan = [PlannedCell(c, WORKLOADS[c.key]) for c in CELLS]
    run_id = store.create_run({"spec": 1}, {"cores": 2}, FINGERPRINT, ["dlperf", "run"], plan)
    for i, (cell, life) in enumerate(zip(CELLS, LIVES, strict=True)):
        startup = FORK_S + (PARENT_S if i == 0 else 0.0)
        detail = ProcessDetail(phases={"startup_s": startup, "framework_s": 0.0}, started="warm", started_at=100.0 + i)
        m = ProcessMeasurement(status=Status.OK, samples=[0.01], duration_s=life, detail=detail)
        store.record(run_id, cell.key, 0, m, CellFigures(status=Status.OK))
    store.close()
    return str(path)


def test_the_first_forked_process_s_wait_is_told_from_its_own_start():
    rows = [(1, "warm", {"startup_s": 5.1, "framework_s": 0.0}), (1, "warm", {"startup_s": 0.1, "framework_s": 0.0}),
            (1, "cold", {"startup_s": 0.5, "framework_s": 1.5}), (2, "warm", {"startup_s": 3.1, "framework_s": 0.0}),
            (2, "warm", {})]  # fmt: skip
    told = est.told_apart(rows)
    assert [(pytest.approx(own), pytest.approx(waited)) for own, waited in told[:4]] == [
        (0.1, 5.0),
        (0.1, 0.0),
        (2.0, 0.0),
        (0.1, 3.0),
    ]
    assert told[4] == (None, 0.0)  # no phases stored: nothing to tell


def test_earlier_processes_charge_the_warm_parents_start_once_a_run(tmp_path, forks):
    """Three processes a cell after a run of one each: the cell whose one process waited for the parent was charged
    that wait in each of its three (old: 29.4 s here)."""
    known = est.known_durations(earlier_run(tmp_path / "r.db"), FINGERPRINT, TimerConfig())
    got = estimated(schedule(CELLS, 3), known)
    each = sum(LIVES) - PARENT_S  # every process forked, at its own start
    assert got.seconds == pytest.approx(3 * each + PARENT_S)
    assert estimated(schedule(CELLS, 1), known).seconds == pytest.approx(sum(LIVES))  # the same run: as it took


def test_a_cell_that_will_start_cold_is_charged_a_cold_start_and_no_parent(tmp_path, forks, monkeypatch):
    """A run of one process forks nothing (a parent costs what a cold start does): its process starts cold."""
    known = est.known_durations(earlier_run(tmp_path / "r.db"), FINGERPRINT, TimerConfig())
    cold = est.Earlier(3.5, {}, 2.0, 0.0, "cold")  # an earlier cold process elsewhere: 2 s to start
    got = estimated(schedule(CELLS[1:2], 1), {**known, "other|torch|cpu|1|fp32": [cold]})
    assert got.seconds == pytest.approx(LIVES[1] - FORK_S + 2.0)


def pilots(waited: float) -> list[est.Pilot]:
    """The dry run's two pilots, in order, each forked: the first waited `waited` for the warm parent."""
    first = {"startup_s": FORK_S + waited, "framework_s": 0.0}
    return [
        est.Pilot(0.01, 0.2 + waited, 2, 0.3 + waited, None, FORK_S + waited, 0.0, "warm", first),
        est.Pilot(0.01, 0.2, 2, 0.3, None, FORK_S, 0.0, "warm", {"startup_s": FORK_S, "framework_s": 0.0}),
    ]


def test_pilots_charge_the_warm_parents_start_once(forks, monkeypatch):
    """The first pilot forked waits for the parent as the run's first process will; its fixed part was every process
    of its workload's (old: tiny-fcn-r's 4 processes here were each charged the wait)."""
    seconds = {}
    for waited in (0.0, PARENT_S):
        made = iter(pilots(waited))
        monkeypatch.setattr(est, "run_pilot", lambda *a, made=made: next(made))
        seconds[waited] = estimated(schedule(CELLS, 2), {}).seconds
    assert seconds[PARENT_S] - seconds[0.0] == pytest.approx(PARENT_S)
