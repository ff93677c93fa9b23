"""What `dlperf table`'s other views say: the csv kept only the medians (no n, no `?`, no notes), though it is the
same view for scripts; `--best` showed medians of one step unmarked and "1.00x" without an interval; `--runs 1,2`
of one machine was titled "the machines side by side"."""

from __future__ import annotations

import csv
import io

from conftest import dlperf
from dlperf.protocol import Cell
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell
from dlperf.vocab import Status
from report.runs import MACHINE, OTHER_MACHINE, processes, write_run


def planned(mode: str, threads: int = 1) -> PlannedCell:
    return PlannedCell(Cell("fcn-r", "torch", "cpu", threads, mode), {"batch": 64})


def few_steps_run(db) -> None:
    """fp32 at 1 and 2 threads over 200 steps; bf16 at 1 thread over 2 steps (a slow step: --max-time reached)."""
    plan = [planned("fp32"), planned("fp32", 2), planned("bf16")]
    steps = {plan[0].cell.key: [0.10] * 200, plan[1].cell.key: [0.06] * 200, plan[2].cell.key: [0.05, 0.05]}
    store = Store.open(db, create=True)
    try:
        run_id = store.create_run({}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], plan)
        for key, samples in steps.items():
            few = ["few samples: a median of 2 timed steps"] if len(samples) < 5 else []  # as collect.py warns
            figures = CellFigures(status=Status.OK, median_s=samples[0], n=len(samples), warnings=few)
            store.record(run_id, key, 0, ProcessMeasurement(status=Status.OK, samples=samples), figures)
        store.set_run_status(run_id, "complete")
    finally:
        store.close()


def test_the_csv_keeps_its_columns_and_adds_each_cell_s_n_marks_legend_and_notes(tmp_path):
    db = tmp_path / "t.db"
    few_steps_run(db)
    rows = list(csv.reader(io.StringIO(dlperf("table", "--format", "csv", db=db).stdout)))
    head = ["workload", "framework", "mode", "batch", "cpu:1", "cpu:2"]
    assert rows[0] == [*head, "cpu:1 n", "cpu:1 marks", "cpu:2 n", "cpu:2 marks"]
    by_mode = {r[2]: r for r in rows[1:3]}
    assert by_mode["fp32"][4:] == ["0.1", "0.06", "200", "", "200", "*"]  # the medians as before, then n and marks
    assert by_mode["bf16"][4:] == ["0.05", "", "2", "?", "", ""]
    assert ["legend", "? = fewer than 6 samples"] in rows
    notes = [r[1] for r in rows if r[0] == "note"]
    assert notes == ["fcn-r torch bf16 cpu:1: few samples: a median of 2 timed steps"]


def test_best_marks_a_median_of_few_steps_and_gives_its_speedup_no_interval(tmp_path):
    db = tmp_path / "t.db"
    few_steps_run(db)
    said = dlperf("table", "--best", "--format", "md", db=db).stdout
    lines = said.splitlines()
    assert "| fcn-r | torch | cpu:1 | 0.100 s | bf16 | 50.0 ms? | 2.00x? [no interval: a median of under 6 steps] |" \
        in lines  # fmt: skip
    assert "| fcn-r | torch | cpu:2 | 60.0 ms | fp32 | 60.0 ms | -: fp32 alone was measured |" in lines
    assert "? = fewer than 6 samples" in lines
    assert "1.00x" not in said


def test_runs_of_one_machine_are_not_called_machines(tmp_path):
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    try:
        write_run(store, {"fcn-r": processes(1, 2, 0.1)}, {**MACHINE, "frameworks": {"torch": "2.13.0"}})
        write_run(store, {"fcn-r": processes(2, 2, 0.1)}, {**MACHINE, "frameworks": {"torch": "2.14.1"}})
        write_run(store, {"fcn-r": processes(3, 2, 0.1)}, OTHER_MACHINE)
    finally:
        store.close()
    env = {"COLUMNS": "200"}
    one = dlperf("table", "--runs", "1,2", db=db, env=env).stdout
    assert "runs 1, 2: one machine, its runs side by side" in one and "the machines" not in one
    assert "runs 1, 3: the machines side by side" in dlperf("table", "--runs", "1,3", db=db, env=env).stdout
