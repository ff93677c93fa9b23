"""`dlperf run` interrupted before its first cell: a new run's planning stores nothing, and said only a bare
"dlperf: interrupted"; a --resume's planning leaves the run as it was, and said nothing of how to go on with it."""

from dlperf import api
from dlperf.cli import main
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
