"""What the views say of a run's state (`store/state.py`, read by `dlperf list --runs`, `table` and `run --resume
--dry-run`): a user killed dlperf (SIGKILL, SIGHUP) and every view still called its run "running"; an interrupt in a
cell's second process (`--repeats 2`) or in its profile left nothing pending, so the table said nothing was left,
and the dry run said "0 of its 2 cell processes are left (nothing was measured)" of a run --resume would profile."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from commands.test_table_unfinished import planned_run as table_run
from conftest import dlperf
from dlperf.store import Store
from dlperf.store.records import ProfileOutcome
from dlperf.vocab import Status
from report.runs import cell

NAMES = ("fcn-r", "alexnet-r", "resnet-56")


def planned_run(store: Store, measure: int, status: str | None, repeats: int = 1, profile: bool = False) -> int:
    """A run of three cells, the first `measure` measured in their first process of `repeats`; `status` set (None:
    left running, leased to this process)."""
    return table_run(store, measure, status, spec={"repeats": repeats, "profile": profile})


def killed_while_measuring(db) -> None:
    """A run made by a process that then dies without a word (as SIGKILL leaves it): its status still "running", its
    lease the dead process's."""
    pid = os.fork()
    if pid == 0:  # the child: no cleanup, no lease released
        try:
            planned_run(Store.open(db, create=True), 1, None)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def flat(text: str) -> str:
    return " ".join(text.split())


def test_a_run_whose_process_died_is_stopped_not_running_in_the_list_and_the_table(tmp_path):
    db = tmp_path / "t.db"
    killed_while_measuring(db)
    [row] = json.loads(dlperf("list", "--runs", "--format", "json", db=db).stdout)
    assert (row["status"], row["state_label"], row["measured_by"]) == ("stopped", "stopped (its process is gone)", None)
    listed = flat(dlperf("list", "--runs", db=db, env={"COLUMNS": "200"}).stdout)
    assert "stopped (its process is gone)" in listed and "running" not in listed
    said = flat(dlperf("table", db=db).stdout)
    assert (
        f"run 1 is unfinished (stopped: its process is gone): 1 of 3 processes done; 2 left, in 2 cells; "
        f"`dlperf run --resume --db {db}` measures them" in said
    )


def test_a_live_process_s_run_is_running_and_names_it(tmp_path):
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    try:
        planned_run(store, 1, None)
        [row] = json.loads(dlperf("list", "--runs", "--format", "json", db=db).stdout)
        holder = store.measured_by(1).describe()
        assert (row["status"], row["state_label"], row["measured_by"]) == ("running", f"running ({holder})", holder)
    finally:
        store.close()


def test_a_cell_short_of_its_repeats_is_left_to_measure(tmp_path):
    """Interrupted in the second process of every cell: none pending, yet three processes left."""
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 3, "interrupted", repeats=2)
    store.close()
    said = flat(dlperf("table", db=db).stdout)
    assert f"run 1 is unfinished (interrupted): 3 of 6 processes done; 3 left, in 3 cells; `dlperf run --resume " \
        f"--db {db}`" in said  # fmt: skip
    [row] = json.loads(dlperf("list", "--runs", "--format", "json", db=db).stdout)
    assert row["left"] == "3 left, in 3 cells"


def test_the_table_and_the_list_say_what_is_left_in_the_same_words(tmp_path):
    """The table's note said "3 processes of 3 measured cells left" where `list --runs` said "3 of 12 processes done;
    9 left, in 3 cells" of the same run: one wording (`Left.text`), the table's and the list's."""
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 3, "interrupted", repeats=4)
    store.close()
    words = "3 of 12 processes done; 9 left, in 3 cells"
    assert f"run 1 is unfinished (interrupted): {words};" in flat(dlperf("table", db=db).stdout)
    assert f"interrupted: {words}" in flat(dlperf("list", "--runs", db=db, env={"COLUMNS": "250"}).stdout)
    [row] = json.loads(dlperf("list", "--runs", "--format", "json", db=db).stdout)
    assert (row["progress"], row["left"], row["processes"]) == (words, "9 left, in 3 cells", {"done": 3, "planned": 12})


def test_a_profile_cut_off_is_left_to_take_and_explain_says_resume_takes_it(tmp_path):
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    run_id = planned_run(store, 3, None, profile=True)
    store.record_profile(run_id, cell(NAMES[0]).cell.key, ProfileOutcome(status=Status.FAILED, error="no profiler"))
    store.set_run_status(run_id, "interrupted")
    store.close()
    said = flat(dlperf("table", "--explain", db=db).stdout)
    assert "run 1 is unfinished (interrupted): 3 of 3 processes done; 2 profiles left;" in said
    assert "dlperf profile WORKLOAD" not in said and "this unfinished run profiles its cells when it goes on" in said


def test_the_dry_run_counts_the_profiles_left_and_says_it_measured_nothing(tmp_path, capsys):
    from dlperf.commands.dry_run import resume_left

    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 3, "interrupted", profile=True)
    store.close()
    outcome = SimpleNamespace(run_id=1, tasks=[], plan=SimpleNamespace(tasks=[1, 2, 3]))
    assert resume_left(outcome, str(db)) == (
        "run 1: 0 of its 3 cell processes are left to measure, and 3 cells to profile (a dry run: it measured nothing)"
    )


def test_a_complete_run_says_nothing_left(tmp_path):
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 1, "complete", repeats=2, profile=True)
    store.close()
    said = dlperf("table", db=db).stdout
    assert "unfinished" not in said and "left" not in said
    [row] = json.loads(dlperf("list", "--runs", "--format", "json", db=db).stdout)
    assert (row["status"], row["left"], row["sessions"]) == ("complete", None, 1)


def test_an_unfinished_runs_cells_short_of_their_repeats_are_named(tmp_path, capsys):
    """Ctrl-C at 6 of 12 processes left a cell measured in 1 of its 3, shown `3.29 ms? n=283` like any other: the
    note counted the processes left, not which cells' figures are not final."""
    from dlperf.cli import main
    from dlperf.store import Store
    from dlperf.store.process import ProcessMeasurement
    from dlperf.vocab import Status
    from report.runs import cell, measured

    db = tmp_path / "p.db"
    store = Store.open(db, create=True)
    plan = [cell("fcn-r", threads=1), cell("fcn-r", threads=2)]
    run_id = store.create_run({"spec": 1, "repeats": 3}, {}, {}, ["dlperf", "run"], plan)
    steps = [0.1] * 20
    for c, repeats in zip(plan, (1, 3), strict=True):
        for repeat in range(repeats):
            m = ProcessMeasurement(status=Status.OK, samples=steps, duration_s=1.0)
            store.record(run_id, c.cell.key, repeat, m, measured([steps] * (repeat + 1)))
    store.close()
    assert main(["table", "--db", str(db)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    said = "measured so far in fewer processes than --repeats 3, so their figures are not final: fcn-r torch cpu:1 " \
           "(1 of 3)"  # fmt: skip
    assert said in out, out
    assert "cpu:2 (" not in out
    # the same in the other views of the run: table --best, the export, the report (QA: the table's alone said it)
    for fmt in ("text", "md"):
        assert main(["table", "--best", "--db", str(db), "--format", fmt]) == 0
        assert said in " ".join(capsys.readouterr().out.split())
    assert main(["export", "--db", str(db), "-o", str(tmp_path / "e.jsonl")]) == 0
    records = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert [(r["threads"], r["processes"], r["processes_planned"]) for r in records] == [(1, 1, 3), (2, 3, 3)]
    assert main(["report", "--db", str(db), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "fcn-r torch cpu:1</th><td>partial</td><td>measured so far in 1 of its 3 processes (--repeats 3)" in page
    assert page.count("</th><td>partial</td>") == 1  # the row named by its cell


def test_resume_of_a_complete_run_with_a_failed_cell_says_what_measures_it_again(tmp_path, capsys):
    """A cell whose worker was killed (by hand, by the out-of-memory killer) is failed, and `--resume` said only
    "every run ... is complete; nothing to resume"."""
    from dlperf.cli import main
    from dlperf.store import Store
    from dlperf.store.process import ProcessMeasurement
    from dlperf.store.records import CellFigures
    from dlperf.vocab import Status
    from report.runs import cell

    db = tmp_path / "k.db"
    store = Store.open(db, create=True)
    killed = cell("fcn-r", threads=2)
    run_id = store.create_run({"spec": 1}, {}, {}, ["dlperf", "run"], [killed])
    m = ProcessMeasurement(status=Status.FAILED, error="worker killed by SIGKILL", samples=[], duration_s=1.0)
    store.record(run_id, killed.cell.key, 0, m, CellFigures(status=Status.FAILED, error="worker killed by SIGKILL"))
    store.set_run_status(run_id, "complete")
    store.close()
    assert main(["run", "--resume", "--db", str(db)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"dlperf: error: --resume: every run in {db} is complete; nothing to resume (run 1's fcn-r torch cpu:2 failed "
        "or timed out, which --resume does not measure again: a new `dlperf run` of it measures it again; `dlperf "
        "table` says why)"
    )
