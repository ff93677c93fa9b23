"""`dlperf list --runs`: the runs a store holds, so a user finds the ids that --run, compare and report take (after
a merge above all) without remembering them."""

from __future__ import annotations

import json

from conftest import dlperf
from dlperf.cli import main
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.vocab import Status
from report.runs import MACHINE, cell, measured


def two_runs(db) -> None:
    store = Store.open(db, create=True)
    try:
        made = [(["dlperf", "run", "--threads", "1"], 2, "complete"),
                (["dlperf", "--db", str(db), "optimize", "m.py:make"], 1, "interrupted")]  # fmt: skip
        for argv, measure, status in made:
            plan = [cell(name) for name in ("fcn-r", "alexnet-r", "resnet-56")[: measure + 1]]
            run_id = store.create_run({"spec": 1}, {"cores": {"cores": 2}}, MACHINE, argv, plan)
            for c in plan[:measure]:
                m = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=1.0)
                store.record(run_id, c.cell.key, 0, m, measured([[0.01] * 5]))
            store.set_run_status(run_id, status)
    finally:
        store.close()


def test_each_run_is_listed_with_its_status_cells_and_command(tmp_path):
    db = tmp_path / "t.db"
    two_runs(db)
    said = dlperf("list", "--runs", "--format", "json", db=db)
    assert said.returncode == 0, said.stderr
    first, second = json.loads(said.stdout)
    assert (first["run"], first["status"], first["cells"], first["command"]) == (
        1, "complete", {"ok": 2, "pending": 1}, "dlperf run --threads 1")  # fmt: skip
    assert (second["run"], second["status"], second["cells"]) == (2, "interrupted", {"ok": 1, "pending": 1})
    assert second["command"] == f"dlperf --db {db} optimize m.py:make" and second["merged_from"] is None
    text = " ".join(dlperf("list", "--runs", db=db, env={"COLUMNS": "200"}).stdout.split())  # xdist sets 80
    assert "2 runs in" in text and "1 ok, 1 pending" in text and "interrupted" in text


def test_an_empty_or_missing_store_is_said_in_one_line(tmp_path, capsys):
    assert main(["list", "--runs", "--db", str(tmp_path / "none.db")]) == 2
    assert "no such database" in capsys.readouterr().err
    Store.open(tmp_path / "e.db", create=True).close()
    assert main(["list", "--runs", "--format", "json", "--db", str(tmp_path / "e.db")]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_cell_with_some_of_its_processes_is_partly_measured_not_ok(tmp_path, capsys, monkeypatch):
    """An interrupted run of --repeats 5 whose cell has 1 of its 5 processes was counted '2 ok' beside one measured in
    all five: the cells column tells them apart, as the status column says what is left of them; a complete run's
    cells are as stored (a search leaves cells short by design)."""
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    try:
        for status in ("interrupted", "complete"):
            plan = [cell(name) for name in ("fcn-r", "alexnet-r", "resnet-56")]
            run_id = store.create_run({"repeats": 5}, {"cores": {"cores": 2}}, MACHINE, ["dlperf", "run"], plan)
            for c, processes in zip(plan[:2], (5, 1), strict=True):
                for repeat in range(processes):
                    m = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=1.0)
                    store.record(run_id, c.cell.key, repeat, m, measured([[0.01] * 5] * (repeat + 1)))
            store.set_run_status(run_id, status)
    finally:
        store.close()
    assert main(["list", "--runs", "--format", "json", "--db", str(db)]) == 0
    interrupted, complete = json.loads(capsys.readouterr().out)
    assert (interrupted["cells"], interrupted["partial"]) == ({"ok": 2, "pending": 1}, 1)
    assert interrupted["progress"] == "6 of 15 processes done; 9 left, in 2 cells"
    assert (complete["cells"], complete["partial"]) == ({"ok": 2, "pending": 1}, 0)
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["list", "--runs", "--db", str(db)]) == 0
    first, second = [line for line in capsys.readouterr().out.splitlines() if "dlperf run" in line]
    assert "1 ok, 1 partly measured, 1 pending" in first and "2 ok, 1 pending" in second
