"""The store a measuring command writes: an empty `--db ''` (or `$DLPERF_DB`) is refused, where it silently meant
./dlperf.db; a sweep started while another run of the store is being measured on this host says so first; an
interrupted `fit` says truly what `--resume` does with its run."""

from __future__ import annotations

import pytest

from conftest import dlperf, one_line_error
from dlperf.store import Store
from report.runs import MACHINE, cell


@pytest.mark.parametrize(
    "args",
    [("run", "--workloads", "tiny-fcn-r", "--dry-run", "--db", ""), ("merge", "--db", "", "base.db"),
     ("--db", "", "table"), ("list", "--runs", "--db", "")],
)  # fmt: skip
def test_an_empty_db_is_refused_and_writes_no_default_store(tmp_path, args):
    (tmp_path / "base.db").touch()
    said = dlperf(*args, cwd=tmp_path)
    one_line_error(said, "--db ''", "an empty path names no database")
    assert not (tmp_path / "dlperf.db").exists()


def test_an_empty_dlperf_db_is_refused_too(tmp_path):
    said = dlperf("run", "--workloads", "tiny-fcn-r", "--dry-run", cwd=tmp_path, env={"DLPERF_DB": ""})
    one_line_error(said, "$DLPERF_DB is set but empty")
    assert not (tmp_path / "dlperf.db").exists()


def test_a_sweep_started_beside_a_run_being_measured_warns_in_one_line_and_goes_on(tmp_path):
    """This test's process measures run 1 (it holds the lease); a second `dlperf run` on the store warns first, then
    goes on: here to refuse its own bad workload, after the warning."""
    db = tmp_path / "b.db"
    store = Store.open(db, create=True)
    try:
        store.create_run({}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], [cell()])
        said = dlperf("run", "--workloads", "no-such-net", db=db)
        pid = store.measured_by(1).pid
    finally:
        store.close()
    first, *rest = said.stderr.strip().splitlines()
    assert first == (
        f"dlperf: warning: run 1 of {db} is being measured by pid {pid}: the two runs share the CPU, and their "
        "timings disturb each other"
    )
    assert rest and "unknown workload 'no-such-net'" in rest[-1]
    quiet = dlperf("run", "--workloads", "no-such-net", db=db)  # the run ended: nothing to say
    assert "warning" not in quiet.stderr


def test_a_run_begun_beside_a_sweep_while_it_was_planned_is_said_once_it_is_planned(tmp_path):
    """Two `dlperf run` started together on one store: each looked for a run being measured before planning, when
    neither had stored its run yet, so neither said the other timed its load. What began while it planned is said
    after (`api.began_beside`); what was there before, the check before planning says."""
    from dlperf import api
    from dlperf.store import now

    db = tmp_path / "b.db"
    store = Store.open(db, create=True)
    try:
        began = now()
        store.create_run({}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], [cell()])  # leased to this process
        pid = store.measured_by(1).pid
        assert api.began_beside(str(db), store, began) == [
            f"run 1 of {db} began beside this one while it was planned (pid {pid} on {store.measured_by(1).host}): "
            "the two runs share the CPU, and their timings disturb each other"
        ]
        assert api.began_beside(str(db), store, "9999-01-01T00:00:00+00:00") == []  # there before: said already
        assert api.began_beside(str(db), None, began) == []  # a dry run stores nothing
    finally:
        store.close()


def test_a_run_measured_when_this_one_started_is_not_said_to_have_begun_beside_it_in_the_same_second(tmp_path):
    """A lease's start is kept to the second: a run leased in the second this `dlperf run` started was said twice,
    "is being measured by" before planning and "began beside this one while it was planned" after (helper 109)."""
    from dlperf import api

    db = tmp_path / "b.db"
    store = Store.open(db, create=True)
    try:
        store.create_run({}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], [cell()])  # leased to this process
        began = store.measured_by(1).since  # this run starts in the very second the other was leased
        before = api.measured_ids(str(db))
        assert before == {1}
        assert api.began_beside(str(db), store, began, before) == []
        assert len(api.began_beside(str(db), store, began)) == 1  # what the same second said without `before`
        assert api.measured_ids(str(tmp_path / "none.db")) == frozenset()  # no store yet: nothing measured
    finally:
        store.close()


@pytest.mark.parametrize(
    "args",
    [("optimize", "tiny-fcn-r", "--device", "cuda:3"), ("crossover", "no-such-net"), ("advise", "no-such-net"),
     ("fit", "no-such-net"), ("profile", "tiny-fcn-r", "--modes", "no-such-mode")],
)  # fmt: skip
def test_every_measuring_command_warns_of_a_run_being_measured_beside_it(tmp_path, args):
    db = tmp_path / "b.db"
    store = Store.open(db, create=True)
    try:
        store.create_run({}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], [cell()])
        said = dlperf(*args, db=db)
    finally:
        store.close()
    first, *rest = said.stderr.strip().splitlines()
    assert first.startswith(f"dlperf: warning: run 1 of {db} is being measured by pid "), said.stderr
    assert said.returncode == 2 and rest  # then its own refusal


def test_an_interrupted_fit_says_resume_would_not_go_on_with_it(tmp_path, monkeypatch, capsys):
    from dlperf import fit
    from dlperf.cli import main
    from dlperf.vocab import ExitCode

    stopped = fit.Result(run_id=1, answers={}, exit_code=ExitCode.INTERRUPTED, limit="2 GiB")
    monkeypatch.setattr(fit, "fit", lambda *a, **k: stopped)
    assert main(["fit", "tiny-fcn-r", "--db", str(tmp_path / "f.db")]) == ExitCode.INTERRUPTED
    err = " ".join(capsys.readouterr().err.split())
    assert "run it again (it starts over)" in err and "(dlperf run --resume would not go on with the search)" in err
    assert "only measure" not in err


def test_the_api_refuses_an_empty_db_as_the_command_line_does(tmp_path, monkeypatch):
    import dlperf
    from dlperf.errors import UsageError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"^db='': an empty path names no database"):
        dlperf.run(["tiny-fcn-r"], db="", dry_run=True)
    with pytest.raises(UsageError, match=r"^db='': an empty path names no database"):
        dlperf.resume(db="")
    assert not (tmp_path / "dlperf.db").exists()


@pytest.mark.parametrize("where", ["nope/x.db", "link.db"])
def test_a_dry_run_refuses_a_store_the_run_could_not_open_with_the_runs_line(tmp_path, where):
    """`dlperf run --dry-run --db nope/x.db` (a missing folder, or a link into one) planned and estimated, and said
    nothing of the store the run it stands for refuses; it refuses it, with the run's line, before planning."""
    (tmp_path / "link.db").symlink_to(tmp_path / "gone" / "x.db")
    said = {dry: dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", *dry, "--db", where, cwd=tmp_path)
            for dry in ((), ("--dry-run",))}  # fmt: skip
    real, dry = said[()], said[("--dry-run",)]
    assert dry.returncode == real.returncode == 2 and dry.stderr == real.stderr, (dry.stderr, real.stderr)
    one_line_error(dry, f"--db {where!r}", "does not exist")
    assert "estimat" not in dry.stdout + dry.stderr


def test_a_python_caller_reads_its_store_named_as_its_db_argument(tmp_path, monkeypatch):
    """dlperf.run(..., db=...) and dlperf.resume(db=...) said `--db 'PATH'`, a flag the caller never typed; the
    line names `db='PATH'`, and $DLPERF_DB where that is what named it. The command line's lines keep --db
    (`test_a_dry_run_refuses_...`, and `dlperf profile`'s below)."""
    import dlperf
    from dlperf.errors import UsageError
    from dlperf.store.location import named, said_as

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DLPERF_DB", raising=False)
    with pytest.raises(UsageError, match=r"^db='nope/x.db': directory 'nope' does not exist$"):
        dlperf.run(["tiny-fcn-r"], db="nope/x.db", dry_run=True)
    with pytest.raises(UsageError, match=r"^db='none.db': no such database \(run `dlperf run` first\)$"):
        dlperf.resume(db="none.db")
    monkeypatch.setenv("DLPERF_DB", "none.db")
    with pytest.raises(UsageError, match=r"^\$DLPERF_DB 'none.db': no such database"):
        dlperf.resume()
    assert named("x.db") == "--db 'x.db'"  # outside a Python API call: a command's
    with said_as("--db"), said_as("db"):  # a command calling the API: the outermost caller's
        assert named("x.db") == "--db 'x.db'"


def test_dlperf_profile_names_its_store_as_its_flag(tmp_path):
    said = dlperf("profile", "tiny-fcn-r", "--db", "nope/x.db", cwd=tmp_path)
    one_line_error(said, "--db 'nope/x.db': directory 'nope' does not exist")
