"""`--pin` pins a cell's process to the least busy CPUs of its mask, as a held cell's threads are held
(`system.hold_threads`): with a loop on CPU 0 (`taskset -c 0`), a 1-thread cell was pinned to CPU 0 beside it."""

from types import SimpleNamespace

from dlperf.measure import system
from dlperf.protocol import Cell
from dlperf.runner.sweep import child_task
from dlperf.runner.tasks import Task


def context(cell: Cell):
    spec = SimpleNamespace(loss_check=False, timer=None, nvtx=False, data=None, pin=True, max_memory=None)
    store = SimpleNamespace(cells=lambda run_id: [], path="/tmp/a.db")
    return SimpleNamespace(store=store, run_id=1, spec=spec, workloads={cell.key: {"name": "tiny-fcn-r"}})


def test_a_pinned_cell_takes_the_least_busy_cpus_not_the_lowest_numbered(monkeypatch):
    """A fake reading of the CPUs' busy ticks, CPU 0 busy throughout the look: the cell goes to CPU 1; CPU 1 busy,
    to CPU 0. Each child task reads the CPUs afresh."""
    monkeypatch.setenv("DLPERF_NO_COUNT_CACHE", "1")  # no kept figures looked up: the task alone
    monkeypatch.setattr(system, "affinity_cpus", lambda: [0, 1])
    monkeypatch.setattr(system, "HOLD_LOOK_S", 0.0)
    readings = iter([{0: 100, 1: 100}, {0: 105, 1: 100}, {0: 200, 1: 200}, {0: 200, 1: 205}])
    monkeypatch.setattr(system, "cpu_busy_ticks", lambda root="/": next(readings))
    monkeypatch.setattr("dlperf.runner.sweep.affinity_cpus", system.affinity_cpus)
    cell = Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32")
    assert child_task(Task(cell, 0), context(cell)).pin_cpus == [1]
    assert child_task(Task(cell, 0), context(cell)).pin_cpus == [0]
