"""`dlperf run` interrupted, and run again. Before its first cell: a new run's planning stores nothing, and said only
a bare "dlperf: interrupted"; a --resume's planning leaves the run as it was, and said nothing of how to go on with it.
After: the same command run again measures every cell anew, and says that --resume would not."""

from dlperf import api
from dlperf.cli import main
from dlperf.protocol import Cell
from dlperf.runner.session import Session
from dlperf.spec import RunSpec
from dlperf.store import Store
from dlperf.vocab import ExitCode


def interrupted(*args, **kwargs):
    raise KeyboardInterrupt


def last_line(capsys) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_an_interrupt_while_a_new_run_is_planned_says_nothing_is_stored(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(api, "make_plan", interrupted)
    db = tmp_path / "d.db"
    code = main(["run", "--workloads", "tiny-fcn-r", "--threads", "1", "--db", str(db)])
    assert code == ExitCode.INTERRUPTED
    assert last_line(capsys) == (
        "dlperf: interrupted; nothing is stored: no cell was measured yet. Run the same command to start again"
    )


def test_an_interrupt_while_resume_plans_names_the_resume_command(monkeypatch, capsys, tmp_path):
    db = tmp_path / "d.db"
    store = Store.open(db, create=True)
    spec = RunSpec(("tiny-fcn-r",), threads=(1,))
    session = Session.create(store, spec, {"cores": {"cores": 2}}, 2, ["dlperf", "run"])
    session.interrupted()
    store.close()
    monkeypatch.setattr(api, "_resumable", interrupted)  # as the machine's environment is read again
    assert main(["run", "--resume", "--db", str(db)]) == ExitCode.INTERRUPTED
    assert (
        last_line(capsys)
        == f"dlperf: interrupted; nothing more was measured. Continue with: dlperf run --resume --db {db}"
    )
    store = Store.open(db, create=False)
    try:
        assert store.run(session.run_id).status == "interrupted"  # as it was: resumable
    finally:
        store.close()


def test_the_same_sweep_run_again_over_an_unfinished_one_says_resume_would_measure_only_what_it_left(tmp_path):
    """Run again as typed after Ctrl-C (or a crash), the sweep started a run of its own and measured every cell again,
    saying nothing of the run --resume would have finished. Its --dry-run too: after a kill -9 halfway, '6 cell
    processes, estimated 25 s', where --resume had 3 left."""
    db = tmp_path / "d.db"
    env, spec = {"cores": {"cores": 2}, "hostname": "here"}, RunSpec(("tiny-fcn-r",), threads=(1,))
    store = Store.open(db, create=True)
    run_id = Session.create(store, spec, env, 2, ["dlperf", "run"], [Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32")],
                            {Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32").key: {"batch": 8}}).run_id  # fmt: skip
    assert api.left_alike(str(db), store, spec, env) == []  # its own process measures it: another line says so
    store.close()  # its process is gone
    store = Store.open(db, create=False)
    try:
        [said] = api.left_alike(str(db), store, spec, env)
        assert said == (
            f"run {run_id} is unfinished (stopped: its process is gone): 0 of 1 process done; 1 left, in 1 cell; it is "
            f"this same sweep: `dlperf run --resume --db {db}` measures only what it left, while this command starts "
            "a new run and measures every cell again"
        )
        assert api.left_alike(str(db), None, spec, env) == [said]  # a dry run's: the estimate is of every cell
        assert api.left_alike(str(tmp_path / "none.db"), None, spec, env) == []
        assert api.left_alike(str(db), store, RunSpec(("tiny-fcn-r",), threads=(2,)), env) == []  # another sweep
        assert api.left_alike(str(db), store, spec, {**env, "hostname": "there"}) == [said]  # a container restarted
        other = {**env, "cores": {"cores": 64}}
        assert api.left_alike(str(db), store, spec, other) == []  # --resume refuses it there
        store.set_run_status(run_id, "complete")
        assert api.left_alike(str(db), store, spec, env) == []
    finally:
        store.close()


def test_a_python_caller_is_told_the_call_that_resumes_not_the_command():
    """`dlperf.run` warned a Python caller to run `dlperf run --resume --db ...`, where RunInterrupted says
    `dlperf.resume(db=...)`: every line naming the resume names it as the caller would make it."""
    from dlperf.store.location import resume_command, said_as

    assert resume_command("r.db") == "dlperf run --resume --db r.db"
    with said_as("db"):
        assert resume_command("r.db") == "dlperf.resume(db='r.db')"
    with said_as("--db"), said_as("db"):  # `dlperf run` calling `api.run`: the outermost caller's words
        assert resume_command("r.db") == "dlperf run --resume --db r.db"


def test_the_interrupt_line_says_how_many_cells_measured_failed(tmp_path):
    """After a SIGTERM: "8 of 14 cells measured are stored in run 2", one of the 8 failed: counted as measured,
    unsaid."""
    from dlperf.commands.run import stored_cells
    from dlperf.store.process import ProcessMeasurement
    from dlperf.store.records import CellFigures, PlannedCell
    from dlperf.vocab import Status

    db = str(tmp_path / "d.db")
    store = Store.open(db, create=True)
    cells = [Cell("tiny-fcn-r", "torch", "cpu", t, "fp32") for t in (1, 2, 3)]
    run_id = store.create_run({}, {}, {}, ["dlperf", "run"], [PlannedCell(c, {"batch": 8}) for c in cells])
    store.record(run_id, cells[0].key, 0, ProcessMeasurement(status=Status.OK, samples=[0.1] * 3),
                 CellFigures(status=Status.OK, median_s=0.1))  # fmt: skip
    store.record(run_id, cells[1].key, 0, ProcessMeasurement(status=Status.FAILED, error="killed"),
                 CellFigures(status=Status.FAILED, error="killed"))  # fmt: skip
    store.close()
    assert stored_cells(db, run_id) == "2 of 3 cells measured, 1 of them failed, are stored in run 1"


def test_an_interrupt_on_a_full_disk_still_says_interrupted_and_the_resume_command(monkeypatch, capsys, tmp_path):
    """SIGTERM while the disk was full: the store refused the run's "interrupted" status, and its StoreFault, raised
    in the sweep's `except KeyboardInterrupt`, replaced the interrupt: exit 2 with only "could not store run 1's
    status", no interrupted line and no resume command. It now exits 130 with the line, saying the status was not
    stored; the run reads as stopped, and --resume takes it up."""
    from conftest import require
    from dlperf.errors import StoreFault
    from dlperf.runner import sweep

    require("torch")
    db = tmp_path / "d.db"
    monkeypatch.setattr(sweep, "run_task", interrupted)
    status = Store.set_run_status

    def full(store, run_id, value):
        if value == "interrupted":
            raise StoreFault(f"--db {str(db)!r}: could not store run {run_id}'s status (database or disk is full)")
        return status(store, run_id, value)

    monkeypatch.setattr(Store, "set_run_status", full)
    argv = ["run", "--workloads", "tiny-fcn-r", "--threads", "1", "--no-predict", "--no-loss-check", "--db", str(db)]
    assert main(argv) == ExitCode.INTERRUPTED
    assert last_line(capsys) == (
        f"dlperf: interrupted; no cell was measured yet: run 1 holds its plan of 1 cell; its status could not be "
        f"stored (--db {str(db)!r}: could not store run 1's status (database or disk is full)): it reads as stopped, "
        f"which --resume takes up as well. Continue with: dlperf run --resume --db {db}"
    )
    monkeypatch.setattr(Store, "set_run_status", status)
    store = Store.open(db, create=False)
    try:
        assert store.run(1).status == "running"  # stopped once its process is gone: what --resume takes up
    finally:
        store.close()
