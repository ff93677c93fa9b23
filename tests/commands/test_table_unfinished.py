"""`dlperf table` of a run whose cells are not all measured says so, and how it goes on: a user once read the
`pending` cells of an interrupted run as a finished table (exit 0, no word of it)."""

from __future__ import annotations

import json

import pytest

from conftest import dlperf
from dlperf import api
from dlperf.envinfo import capture, fingerprint
from dlperf.errors import UsageError
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.vocab import Status
from report.runs import OTHER_MACHINE, cell, measured


def planned_run(
    store: Store, measure: int, status: str | None, argv: tuple[str, ...] = ("dlperf", "run"), spec=None, **env
) -> int:
    """A run of three cells of this machine (`--resume` takes only its own), the first `measure` of them measured in
    their first process; `status` set (None: left as created); `spec`: its stored spec (`repeats`, `profile`); `env`:
    more of its environment (`made_by`)."""
    plan = [cell(name) for name in ("fcn-r", "alexnet-r", "resnet-56")]
    run_id = store.create_run(spec or {"spec": 1}, {"cpu": {"model": "Xeon Test"}, "cores": {"cores": 8}, **env},
                              fingerprint(capture()), list(argv), plan)  # fmt: skip
    for c in plan[:measure]:
        m = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=1.0)
        store.record(run_id, c.cell.key, 0, m, measured([[0.01] * 5]))
    if status:
        store.set_run_status(run_id, status)
    return run_id


def test_an_interrupted_run_says_how_many_cells_are_left_and_how_to_resume(tmp_path):
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 1, "interrupted")
    store.close()  # its lease released: no one measures it now
    said = dlperf("table", db=db)
    assert said.returncode == 0, said.stderr
    flat = " ".join(said.stdout.split())
    left = "1 of 3 processes done; 2 left, in 2 cells"
    assert f"run 1 is unfinished (interrupted): {left}; `dlperf run --resume --db {db}`" in flat


def test_a_run_whose_model_file_changed_is_not_offered_the_resume_that_refuses_it(tmp_path):
    """`dlperf table` named `dlperf run --resume`, which then refused: the model file was edited since the run."""
    model = tmp_path / "mine.py"
    model.write_text("def make():\n    pass\n")
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 1, "interrupted", sources={f"{model}:make": "0" * 64})  # another file's digest: edited since
    store.close()
    flat = " ".join(dlperf("table", db=db).stdout.split())
    assert f"2 left, in 2 cells; its model: {model} changed since it began, so `--resume` would train another " in flat
    assert "--resume --db" not in flat


def test_an_older_unfinished_run_does_not_offer_the_resume_that_takes_a_later_one(tmp_path):
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 1, "interrupted")
    planned_run(store, 2, "interrupted")
    store.close()
    flat = " ".join(dlperf("table", "--run", "1", "--format", "md", db=db).stdout.split())
    assert (
        "run 1 is unfinished (interrupted): 1 of 3 processes done; 2 left, in 2 cells; --resume takes the latest "
        "unfinished run of this machine, 2" in flat
    )


def test_another_machines_unfinished_run_is_resumed_there_not_here(tmp_path):
    """A store `dlperf merge` gave another machine's interrupted run, later than this machine's own: `--resume` was
    refused ('run 2 was measured on a different machine'), with no way to go on with run 1, and run 1's table named
    'run 2' while run 2's named the `--resume` that failed. `--resume` now takes this machine's latest unfinished
    run; another machine's says where it goes on."""
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 1, "interrupted")
    theirs = planned_run(store, 1, "interrupted")
    store.conn.execute("UPDATE runs SET fingerprint_json = ? WHERE id = ?",
                       (json.dumps({**fingerprint(capture()), **OTHER_MACHINE}), theirs))  # fmt: skip
    store.conn.commit()
    assert api.latest_resumable(store, capture()).id == 1 and api.latest_resumable(store).id == theirs
    store.close()
    flat = " ".join(dlperf("table", "--run", str(theirs), db=db, env={"COLUMNS": "250"}).stdout.split())
    assert (f"run {theirs} is unfinished (interrupted): 1 of 3 processes done; 2 left, in 2 cells; it was measured on "
            "another machine, beta · EPYC Test (CPU model EPYC Test -> ") in flat  # fmt: skip
    assert "`dlperf run --resume` on that machine, with this store, measures what it left" in flat
    store = Store.open(db, create=False)
    store.set_run_status(1, "complete")
    store.close()
    with pytest.raises(UsageError) as refused:  # only theirs is left
        api.resume(str(db), dry_run=True)
    assert str(refused.value).startswith(f"resume: {db} holds no unfinished run of this machine: run {theirs} was "
                                         "measured on another machine, beta · EPYC Test (")  # fmt: skip


def test_a_run_still_measured_names_its_process_and_a_complete_run_says_nothing(tmp_path):
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    try:
        planned_run(store, 1, None)  # this process holds its lease, as a running sweep does
        holder = store.measured_by(1)
        flat = " ".join(dlperf("table", db=db).stdout.split())
        assert f"run 1 is being measured by {holder.describe()}: 1 of 3 processes done; 2 left, in 2 cells" in flat
        planned_run(store, 3, "complete")
        complete = dlperf("table", db=db).stdout
        assert "unfinished" not in complete and "being measured" not in complete
    finally:
        store.close()


def test_a_search_s_interrupted_run_says_to_run_the_search_again_as_the_search_did(tmp_path):
    """An interrupted `dlperf optimize` said "run it again (it starts over)", then `dlperf table` offered `dlperf run
    --resume`, which would not go on with the search. The table now says what the search said, with its command
    line as stored (here with --db before the command, which names no command)."""
    db = tmp_path / "t.db"
    argv = ("dlperf", "--db", str(db), "optimize", "mymodel.py:make", "--threads", "1", "--budget", "60s")
    store = Store.open(db, create=True)
    planned_run(store, 1, "interrupted", argv)
    store.close()
    flat = " ".join(dlperf("table", db=db).stdout.split())
    assert (
        "run 1 is unfinished (interrupted): 1 of 3 processes done; 2 left, in 2 cells; it is the run of a "
        "`dlperf optimize` search" in flat
    )
    assert (
        f"run it again (it starts over): `dlperf --db {db} optimize mymodel.py:make --threads 1 --budget 60s`" in flat
    )
    assert "measures them" not in flat


def test_the_command_that_made_a_run_is_the_first_argv_item_naming_one():
    from dlperf.store.state import command_of

    assert command_of(["dlperf", "fit", "m.py:make"]) == "fit"
    assert command_of(["/venv/bin/dlperf", "--db", "fit", "run", "fcn-r"]) == "run"  # a store named fit is no command
    assert command_of(["dlperf", "--db=x.db", "optimize", "fit"]) == "optimize"
    assert command_of([]) is None and command_of(["dlperf"]) is None


def test_a_fit_or_a_crossover_cut_in_its_thread_search_is_a_search_a_crossover_with_its_batches_planned_resumes(
    tmp_path,
):
    from dlperf.api import searched_by

    store = Store.open(tmp_path / "t.db", create=True)
    try:
        fit = store.run(planned_run(store, 1, "interrupted", ("dlperf", "fit", "m.py:make")))
        crossover = store.run(planned_run(store, 1, "interrupted", ("dlperf", "crossover", "m.py:make")))
        plain = store.run(planned_run(store, 1, "interrupted"))
        assert searched_by(store, fit) == "fit" and searched_by(store, crossover) == "crossover"
        assert searched_by(store, plain) is None
        # the API stores the calling script's argv: the run's own made_by is what counts, where it has one
        script = store.run(planned_run(store, 1, "interrupted", ("bench.py", "fit"), made_by="run"))
        api_fit = store.run(planned_run(store, 1, "interrupted", ("dlperf",), made_by="fit"))
        assert searched_by(store, script) is None and searched_by(store, api_fit) == "fit"
    finally:
        store.close()


def test_resume_takes_the_latest_unfinished_run_that_is_not_a_search_and_says_when_only_searches_are_left(tmp_path):
    """An interrupted `dlperf optimize` after an interrupted sweep: `dlperf run --resume` took the optimize run (its
    baseline cells), and the sweep the user meant was left unfinished."""
    from dlperf.api import latest_resumable

    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 1, "interrupted")
    planned_run(store, 1, "interrupted", ("dlperf", "optimize", "m.py:make"))
    assert latest_resumable(store).id == 1
    store.close()
    flat = " ".join(dlperf("table", "--run", "1", db=db).stdout.split())
    assert f"`dlperf run --resume --db {db}` measures them" in flat  # run 1 is the one --resume finishes

    only = tmp_path / "s.db"
    store = Store.open(only, create=True)
    planned_run(store, 1, "interrupted", ("dlperf", "fit", "m.py:make"))
    store.close()
    said = dlperf("run", "--resume", db=only)
    assert said.returncode == 2 and said.stderr.strip() == (
        f"dlperf: error: --resume: {only}'s unfinished runs are searches' (the latest, run 1, of dlperf fit), which "
        "--resume cannot go on with: run the search again (it starts over)"
    )


def test_a_dry_run_resume_of_a_run_another_process_measures_is_refused_as_the_resume_is(tmp_path):
    """`run --resume --dry-run` beside the sweep still measuring the run listed every cell as left, timed pilot steps
    beside that sweep's timed ones, and exited 0; the `--resume` itself was then refused."""
    from dlperf.plan import make_plan
    from dlperf.runner.session import Session
    from dlperf.spec import make_spec

    db = tmp_path / "t.db"
    plan = make_plan(make_spec(["tiny-fcn-r"], threads=[1]))
    store = Store.open(db, create=True)
    try:  # this process holds its lease, as a running sweep does
        Session.create(store, plan.spec, plan.env, plan.cores, ["dlperf", "run"], plan.cells, plan.workloads)
        holder = store.measured_by(1)
        said = dlperf("run", "--resume", "--dry-run", db=db)
    finally:
        store.close()
    assert said.returncode == 2 and f"run 1 is being measured by {holder.describe()} since" in said.stderr
    assert "estimating" not in said.stderr and "left to measure" not in said.stdout


def test_views_of_several_runs_say_which_are_unfinished(tmp_path):
    """`table --runs 1,2` set an interrupted run's cells beside a finished one's and named the fastest machine from
    them, without a word that it was unfinished; `compare 1 2` said only to measure with --repeats 3."""
    from dlperf.report import fleet

    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 3, "complete")
    planned_run(store, 1, "interrupted")
    store.close()
    notes = fleet.read(str(db), runs=[1, 2]).notes()
    assert ("run 2 is unfinished (interrupted): 1 of 3 processes done; 2 left, in 2 cells: its machine's cells are "
            "what it measured so far") in notes  # fmt: skip
    said = dlperf("compare", "1", "2", db=db, env={"COLUMNS": "250"})
    flat = " ".join(said.stdout.split())
    assert ("note: B: run 2 is unfinished (interrupted): 1 of 3 processes done; 2 left, in 2 cells; its cells are what "
            "it measured so far") in flat, said.stderr  # fmt: skip
    assert "A: run 1" not in flat


def test_a_measurement_kept_beside_the_store_is_counted_where_the_table_says_what_is_left(tmp_path):
    """After a full disk refused cell 2 (its measurement kept in <db>.unsaved.jsonl), the table said '1 of 3
    processes done; 2 left' and `--resume` 'measures them', without a word of the one kept, which resume stores."""
    from dlperf.store import spill

    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 1, "interrupted")
    store.close()
    spill.keep(str(db), 1, cell("alexnet-r").cell.key, 0, ProcessMeasurement(status=Status.OK, samples=[0.01] * 5))
    flat = " ".join(dlperf("table", db=db, env={"COLUMNS": "250"}).stdout.split())
    assert (f"`dlperf run --resume --db {db}` stores the 1 measurement kept in {db}.unsaved.jsonl when the store "
            "refused it, and measures them") in flat  # fmt: skip


def test_an_export_of_an_unfinished_run_says_so_on_stderr_and_in_each_record(tmp_path):
    """`dlperf export` of a run killed mid-cell gave `status: ok` records and no word that it was unfinished, where
    the table and a merge say so."""
    db = tmp_path / "t.db"
    store = Store.open(db, create=True)
    planned_run(store, 1, "interrupted")
    store.close()
    done = dlperf("export", db=db)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ("dlperf: warning: run 1 is unfinished (interrupted): 1 of 3 processes done; 2 left, "
                                   "in 2 cells: its records are what it measured so far")  # fmt: skip
    assert {r["run_state"] for r in map(json.loads, done.stdout.splitlines())} == {"interrupted"}
