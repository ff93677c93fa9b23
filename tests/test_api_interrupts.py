"""The Python API under Ctrl-C and bad arguments, as a user's script meets them. `dlperf.run` returned an Outcome
with exit code 130 when interrupted, so a user's `for m in models: dlperf.run(m, ...)` went on with the next model
after Ctrl-C; it now raises KeyboardInterrupt (`dlperf.RunInterrupted`, naming the run) once what finished is stored,
as `dlperf.resume` does. The children are faked (`sweep.run_task`): each test takes seconds, the planning probe
included."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

import dlperf
from conftest import require, rows
from dlperf import api
from dlperf.errors import StoreFault
from dlperf.runner import sweep
from dlperf.spec import make_spec
from dlperf.store import spill
from dlperf.store.process import ProcessMeasurement
from dlperf.vocab import Status
from test_signals import child_env, in_a_child

OK = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=0.1)
SWEEP = {"threads": "1,2", "devices": "cpu", "predict": False, "loss_check": False}


def interrupted(task, ctx, poll):
    raise KeyboardInterrupt


def test_ctrl_c_stops_a_loop_of_dlperf_run_with_the_run_stored_and_the_hosts_handler_back(tmp_path):
    """A real SIGINT to the script, as Ctrl-C sends it, while the first run's first process runs: the loop stops there
    (it went on to the second workload), the run is stored interrupted and unleased, and Ctrl-C is Python's again."""
    require("torch")
    db = tmp_path / "loop.db"
    proc = in_a_child(f"""
        import signal, time
        import dlperf
        from dlperf.runner import sweep

        def ctrl_c(task, ctx, poll):
            signal.raise_signal(signal.SIGINT)
            time.sleep(3)

        sweep.run_task = ctrl_c
        begun = []
        try:
            for workload in ("tiny-fcn-r", "tiny-alexnet-r"):
                begun.append(workload)
                outcome = dlperf.run(workload, db={str(db)!r}, **{SWEEP!r})
                print("returned", outcome.exit_code)
        except KeyboardInterrupt as exc:
            print(type(exc).__name__, exc.run_id, exc.db == {str(db)!r}, begun)
            print(str(exc))
        print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    """)
    assert proc.stdout.splitlines() == [
        "RunInterrupted 1 True ['tiny-fcn-r']",
        f"run 1 of {str(db)!r} was interrupted: what had finished is stored, and dlperf.resume(db={str(db)!r}) goes "
        "on with it",
        "True",
    ], proc
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT id, status FROM runs").fetchall() == [(1, "interrupted")]
    assert conn.execute("SELECT count(*) FROM leases").fetchone() == (0,)


def test_resume_raises_when_interrupted_and_says_what_it_took_up_to_its_warn(tmp_path, monkeypatch, capsys):
    """`dlperf.resume(warn=...)` still printed two of its warnings (the measurements it took up from beside the
    store, and those it left) to stderr; and interrupted it returned an Outcome with exit code 130."""
    require("torch")
    db = str(tmp_path / "r.db")
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, poll: OK)
    with monkeypatch.context() as refusing:  # the store refuses the first measurement: kept beside it
        refusing.setattr(sweep, "store_result", lambda *a, **k: (_ for _ in ()).throw(StoreFault("disk full")))
        with pytest.raises(StoreFault, match="is kept in"):
            dlperf.run("tiny-fcn-r", db=db, **SWEEP)
    (kept,) = spill.holding(db)
    monkeypatch.setattr(sweep, "run_task", interrupted)
    said = []
    with pytest.raises(dlperf.RunInterrupted) as stopped:
        dlperf.resume(db, warn=said.append)
    assert stopped.value.run_id == 1 and isinstance(stopped.value, KeyboardInterrupt)
    assert said == [f"stored 1 measurement kept in {kept} when the store refused them"]
    assert "kept in" not in capsys.readouterr().err
    assert [(r["id"], r["status"]) for r in rows(db, "SELECT * FROM runs")] == [(1, "interrupted")]

    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, poll: OK)
    outcome = dlperf.resume(db, warn=said.append)
    assert outcome.exit_code == 0 and [s.value for s in outcome.statuses] == ["ok"]  # only cpu:2 was left
    assert [(r["id"], r["status"]) for r in rows(db, "SELECT * FROM runs")] == [(1, "complete")]


def test_a_misspelt_argument_and_a_timer_not_a_timerconfig_are_said_in_the_callers_terms(tmp_path):
    """`thread=[1]` was a TypeError naming `RunSpec.__init__()`, `timer={...}` an AttributeError from inside, and an
    int as the workloads a TypeError ('int' object is not iterable): each before anything ran, now said as Python
    says a misspelt argument, or one line naming the argument."""
    db = str(tmp_path / "a.db")
    with pytest.raises(TypeError, match=r"^run\(\) got an unexpected keyword argument 'thread' \(did you mean "
                                        r"'threads'\?\)$"):  # fmt: skip
        dlperf.run("tiny-fcn-r", thread=[1], db=db)
    with pytest.raises(TypeError, match=r"^run\(\) got an unexpected keyword argument 'max_time': it says how each "
                                        r"cell is timed, timer=dlperf.TimerConfig\(max_time=1\)$"):  # fmt: skip
        dlperf.run("tiny-fcn-r", max_time=1, db=db)  # the flag --max-time; was 'did you mean max_memory?'
    with pytest.raises(dlperf.UsageError, match=r"^timer=\{'max_time': 1\}: expected a dlperf.TimerConfig"):
        dlperf.run("tiny-fcn-r", timer={"max_time": 1}, db=db)
    said = r"^5, of type int, is no workload: pass the module-level function that builds one \(make, not make\(\)\)"
    with pytest.raises(dlperf.UsageError, match=said):
        dlperf.run(5, db=db)


def test_a_model_or_a_factorys_result_is_refused_asking_for_the_factory(tmp_path):
    """A notebook passing its nn.Module, or `make()` for `make`, got the object's whole repr, and a hint of lambdas."""

    class Net:  # any object a factory would return, as a module is: callable, with a long repr
        def __call__(self, x):
            return x

        def __repr__(self):
            return "Net(\n" + "  (layer): Linear()\n" * 200 + ")"

    with pytest.raises(dlperf.UsageError) as caught:
        dlperf.run([Net()], db=str(tmp_path / "a.db"))
    said = str(caught.value)
    assert ", of type Net, is no workload" in said and "make, not make()" in said and len(said) < 300, said
    assert not (tmp_path / "a.db").exists()


@pytest.mark.parametrize("typed_in", ["<stdin>", "<string>", "/tmp/ipykernel_4242/1234567.py"])
def test_a_factory_typed_in_rather_than_in_a_file_is_refused_saying_where_to_put_it(tmp_path, typed_in):
    """From stdin, `python -c` or a notebook's cell (whose file ipykernel does not write): the child processes import
    the factory from its file, and dlperf said only "no such file '/cwd/<stdin>'"."""
    namespace = {"__name__": "__main__"}
    exec(compile("def make():\n    pass\n", typed_in, "exec"), namespace)
    with pytest.raises(dlperf.UsageError) as caught:
        dlperf.run(namespace["make"], db=str(tmp_path / "a.db"))
    assert str(caught.value) == (
        f"make is not defined in a file ({typed_in}): dlperf builds the model in processes of its own, which import "
        "the factory from its file; put it in one (mine.py) and pass 'mine.py:make', or import it from there"
    )
    assert not (tmp_path / "a.db").exists()


def test_a_factory_of_a_notebook_cell_is_refused_though_a_debugger_wrote_its_file(tmp_path):
    """ipykernel names a cell's code /tmp/ipykernel_PID/HASH.py, which its debugger (JupyterLab's, VS Code's) writes:
    a factory typed into such a cell was taken as that file's, each of dlperf's processes to run the cell again."""
    cell = tmp_path / "ipykernel_4242" / "1234567.py"
    cell.parent.mkdir()
    cell.write_text("def make():\n    pass\n")
    namespace = {"__name__": "__main__"}
    exec(compile(cell.read_text(), str(cell), "exec"), namespace)
    with pytest.raises(dlperf.UsageError) as caught:
        dlperf.run(namespace["make"], db=str(tmp_path / "a.db"))
    assert str(caught.value).startswith(f"make is not defined in a file ({cell}): dlperf builds the model in processes")
    assert not (tmp_path / "a.db").exists()


def make():  # a factory, as the API takes it: never called here
    raise AssertionError("built")


def test_one_factory_is_taken_as_one_name_is(tmp_path, monkeypatch):
    """`dlperf.run("tiny-fcn-r")` takes one name, but `dlperf.run(make)` failed before planning: 'function' object is
    not iterable."""

    class Planned(Exception):
        pass

    monkeypatch.setattr(api, "make_plan", lambda spec, **kw: (_ for _ in ()).throw(Planned(spec)))
    with pytest.raises(Planned) as planned:
        dlperf.run(make, threads=[1], db=str(tmp_path / "a.db"), dry_run=True)
    assert planned.value.args[0].workloads == make_spec([make]).workloads


def test_the_interrupt_crosses_a_process_pool_as_it_was_raised():
    """A script that runs `dlperf.run` in a worker process (concurrent.futures, multiprocessing) gets the worker's
    exception pickled back: RunInterrupted was made again from its message alone ('missing 1 required positional
    argument: db'), so a ProcessPoolExecutor said 'BrokenProcessPool: A process in the process pool was terminated
    abruptly', not the interrupt and its run; copy.copy failed alike."""
    import copy
    import pickle

    for again in (
        pickle.loads(pickle.dumps(dlperf.RunInterrupted(3, "/tmp/r.db"))),
        copy.copy(dlperf.RunInterrupted(3, "r.db")),
    ):
        assert isinstance(again, KeyboardInterrupt) and again.run_id == 3 and again.db.endswith("r.db")
        assert str(again).startswith("run 3 of ") and "dlperf.resume(db=" in str(again)


def test_an_uncaught_run_interrupted_exits_1_and_the_plain_one_raised_for_it_ends_by_sigint(tmp_path):
    """Reported: a script interrupted in `dlperf.run` exits 1, not a shell's 130. True, and CPython's: it ends a script
    by SIGINT only for an uncaught KeyboardInterrupt itself, not a subclass (`RunInterrupted`'s docstring); the way
    that docstring and docs/reference/api.md give, the plain one raised for it, ends by SIGINT (130 in a shell)."""
    require("torch")
    script = textwrap.dedent("""
        import signal, sys, time
        import dlperf
        from dlperf.runner import sweep

        def ctrl_c(task, ctx, poll):
            signal.raise_signal(signal.SIGINT)
            time.sleep(3)

        sweep.run_task = ctrl_c
        try:
            dlperf.run("tiny-fcn-r", db=sys.argv[1], threads=[1], devices="cpu", predict=False, loss_check=False)
        except dlperf.RunInterrupted:
            if sys.argv[2] == "plain":
                raise KeyboardInterrupt from None
            raise
    """)
    for way, code in (("again", 1), ("plain", -signal.SIGINT)):  # -2: ended by SIGINT, a shell's 130
        db = str(tmp_path / f"{way}.db")
        proc = subprocess.run([sys.executable, "-c", script, db, way], capture_output=True, text=True, timeout=120,
                              env=child_env())  # fmt: skip
        assert proc.returncode == code, proc.stderr
        assert [(r["id"], r["status"]) for r in rows(db, "SELECT * FROM runs")] == [(1, "interrupted")]
