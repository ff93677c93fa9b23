"""Runs built with the Store API from synthetic processes, for the tests of `dlperf compare` and `dlperf merge`.

Each process has its own level (the machine's state when it ran) and its steps vary around it; nothing here is
presented as a measurement of anything."""

from __future__ import annotations

import random
from dataclasses import replace

from conftest import make_cell
from dlperf.measure.stats import median_of_medians
from dlperf.protocol import Cell
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell
from dlperf.vocab import Status

MACHINE = {"cpu_model": "Xeon Test", "cores": {"cores": 8}, "hostname": "alpha"}
OTHER_MACHINE = {"cpu_model": "EPYC Test", "cores": {"cores": 64}, "hostname": "beta"}


def processes(seed: int, count: int, step_s: float, steps: int = 200, between: float = 0.02, within: float = 0.02):
    """`count` processes of one cell: each has its own level (sd `between`: the machine's state when it ran), and
    its steps vary around it (sd `within`)."""
    rng = random.Random(seed)
    return at_levels(seed, [step_s * rng.gauss(1.0, between) for _ in range(count)], steps, within)


def at_levels(seed: int, levels: list[float], steps: int = 200, within: float = 0.02) -> list[list[float]]:
    """One process per level, its steps varying around it."""
    rng = random.Random(seed + 1000)
    return [[level * rng.gauss(1.0, within) for _ in range(steps)] for level in levels]


def cell(workload: str = "fcn-r", threads: int = 1, batch: int = 64) -> PlannedCell:
    return PlannedCell(Cell(workload, "torch", "cpu", threads, "fp32"), {"batch": batch})


def measured(procs: list[list[float]], status: str = "ok") -> CellFigures:
    """The figures `Store.record` stores for a planned cell once `procs` are measured: the median of the medians of
    the processes `stats.counted` keeps, as `collect.cell_figures` takes it."""
    return CellFigures(status=Status(status), median_s=median_of_medians(procs) if any(procs) else None)


def record(c: PlannedCell, procs: list[list[float]], status: str = "ok"):
    """The cell `Store.cells` then gives back."""
    figures = measured(procs, status)
    return make_cell(c.cell.workload, threads=c.cell.threads, key=c.cell.key, batch=c.workload["batch"],
                     workload_spec=c.workload, status=status, median_s=figures.median_s)  # fmt: skip


def write_run(store: Store, cells: dict[str, list[list[float]]], fingerprint=MACHINE, batch: int = 64) -> int:
    """A complete run whose cells (workload name -> processes) were measured with these step times."""
    plan = [cell(name, batch=batch) for name in cells]
    env = {"cpu": {"model": fingerprint["cpu_model"]}, "cores": fingerprint["cores"]}
    run_id = store.create_run({"spec": 1}, env, fingerprint, ["dlperf", "run"], plan)
    for c, procs in zip(plan, cells.values(), strict=True):
        for repeat, samples in enumerate(procs):
            figures = replace(measured(procs[: repeat + 1]), n=sum(map(len, procs)))
            m = ProcessMeasurement(status=Status.OK if samples else Status.FAILED, samples=samples, duration_s=1.0)
            store.record(run_id, c.cell.key, repeat, m, figures)
    store.set_run_status(run_id, "complete")
    return run_id


def make_db(path, *runs, fingerprint=MACHINE) -> None:
    store = Store.open(path, create=True)
    for cells in runs:
        write_run(store, cells, fingerprint)
    store.close()


BASE = {"fcn-r": processes(20, 3, 0.100), "alexnet-r": processes(21, 3, 0.050)}
SLOWER = {"fcn-r": processes(22, 3, 0.130), "alexnet-r": processes(23, 3, 0.050)}
