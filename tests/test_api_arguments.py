"""What `dlperf.run` takes from a Python caller that no command line can give: a size's text for max_memory (its
own example, 512MiB, was refused, naming a --max-memory that `dlperf run` lacks), one value or None for a list
(threads=1 was a TypeError from inside; frameworks=None an AttributeError), a yes/no argument that is no bool
(pin="false" was stored as given, profile="no" switched profiling on), text for a number (repeats="3" was told to
give a whole number). Each is refused in one line naming the argument before anything runs, or taken. And
`dir(dlperf)` lists the names `__getattr__` gives lazily."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

import dlperf
from dlperf import api, api_arguments
from dlperf.errors import UsageError
from dlperf.spec import RunSpec, make_spec

WORKLOADS = ["tiny-fcn-r"]


def refused(**given) -> str:
    with pytest.raises(UsageError) as caught:
        dlperf.run(WORKLOADS, dry_run=True, db="unused.db", **given)
    return str(caught.value)


@pytest.mark.parametrize(("text", "size"), [("512MiB", 512 * 2**20), ("2GiB", 2 * 2**30), ("1.5G", 3 * 2**29)])
def test_max_memory_takes_a_size_as_its_flag_does(text, size):
    assert make_spec(WORKLOADS, max_memory=text).max_memory == size
    assert make_spec(WORKLOADS, max_memory=size).max_memory == size


def test_dlperf_run_takes_its_own_example_of_a_size(monkeypatch, tmp_path):
    monkeypatch.setattr(api, "for_plan", lambda *args: None)  # no pilot step
    outcome = dlperf.run(WORKLOADS, threads=1, max_memory="512MiB", dry_run=True, db=str(tmp_path / "x.db"))
    assert outcome.plan.spec.max_memory == 512 * 2**20 and outcome.plan.spec.threads == (1,)


@pytest.mark.parametrize(
    ("size", "said"),
    [("512X", "max_memory='512X': expected a size such as 512MiB"),
     (0, "max_memory=0: expected a size above 0, a whole number of bytes below 8 EiB or its text"),
     (True, "max_memory=True: expected a size above 0"),
     (2.5e9, "max_memory=2500000000.0: expected a size above 0")],
)  # fmt: skip
def test_max_memory_of_no_size_names_the_argument(size, said):
    assert refused(max_memory=size).startswith(said)


def test_max_memory_on_a_gpu_names_the_argument():
    said = refused(max_memory="1G", devices="cuda")
    assert said == ("max_memory limits a CPU process's memory; on cuda the GPU's own memory is the limit: give no "
                    "max_memory")  # fmt: skip


@pytest.mark.parametrize(
    ("name", "value", "taken"),
    [("threads", 1, (1,)), ("nprocs", 2, (2,)), ("microbatches", 4, (4,)), ("devices", "cpu", ("cpu",))],
)
def test_one_value_is_a_list_of_one(name, value, taken):
    extra = {"nprocs": 2, "parallel": "pipeline"} if name == "microbatches" else {}
    assert getattr(make_spec(WORKLOADS, **extra, **{name: value}), name) == taken


@pytest.mark.parametrize(("name", "default"), [("frameworks", ("torch",)), ("modes", ("fp32",)), ("threads", None)])
def test_none_for_a_list_is_its_default(name, default):
    assert getattr(make_spec(WORKLOADS, **{name: None}), name) == default


@pytest.mark.parametrize(
    ("given", "said"),
    [({"devices": 0}, "devices: unknown device '0' (expected cpu, cuda, cuda:N or mps)"),
     ({"modes": 1}, "modes: unknown mode '1'"),
     ({"threads": 0}, "threads=0: expected a whole number of at least 1"),
     ({"data": 1}, "data 1: expected synthetic, dataset, or a directory of datasets (a str or a pathlib.Path), "
                   "not an int"),
     ({"trace_dir": 1, "profile": True}, "trace_dir 1: expected a path (a str or a pathlib.Path), not an int")],
)  # fmt: skip
def test_a_value_of_another_type_is_refused_naming_its_argument(given, said):
    assert refused(**given).startswith(said)


@pytest.mark.parametrize(
    ("given", "said"),
    [({"threads": "two"}, "threads='two': expected a whole number of at least 1"),
     ({"workloads": "nosuch"}, "workloads: unknown workload 'nosuch'"),
     ({"repeats": 0}, "repeats=0: expected a whole number of at least 1"),
     ({"timeout": -1}, "timeout=-1: expected a number of seconds above 0"),
     ({"nprocs": "a"}, "nprocs='a': expected a whole number of at least 1"),
     ({"frameworks": "caffe"}, "frameworks: caffe is one of the paper's tools and cannot be measured: "),
     ({"nnodes": 2, "rdzv_endpoint": "h:1"}, "nnodes and rdzv_endpoint are for data-parallel cells: add nprocs=N")],
)  # fmt: skip
def test_a_bad_value_names_the_argument_not_the_flag_of_dlperf_run(given, said):
    """A Python caller was told of `--threads 'two'`, `--workloads`, `--repeats '0'`: flags it never typed, where
    others (`pin=`, `db=`) named its arguments. A command a line names is kept as it is typed in a shell."""
    kwargs = {"workloads": WORKLOADS, **given}
    with pytest.raises(UsageError) as caught:
        dlperf.run(kwargs.pop("workloads"), dry_run=True, db="unused.db", **kwargs)
    assert str(caught.value).startswith(said), str(caught.value)
    assert "--" not in str(caught.value).replace("dlperf list --frameworks", "")


def test_a_command_a_line_names_is_kept_as_it_is_typed():
    from types import SimpleNamespace

    from dlperf.store.location import as_arguments

    line = "--frameworks: caffe cannot be measured; dlperf list --frameworks lists what can"
    said = as_arguments(line, {"frameworks": "--frameworks"}, SimpleNamespace(frameworks="caffe"))
    assert said == "frameworks: caffe cannot be measured; dlperf list --frameworks lists what can"
    # a whole command in backticks, values and all: its --repeats after a value lost its dashes
    line = "try `dlperf run --modes fp32,bf16 --repeats 3` rather than --repeats 2"
    said = as_arguments(line, {"repeats": "--repeats"}, SimpleNamespace(repeats=2))
    assert said == "try `dlperf run --modes fp32,bf16 --repeats 3` rather than repeats 2"


def test_resume_names_itself_not_the_flag(tmp_path):
    """`dlperf.resume` said `--resume: every run in ... is complete`, a flag its caller never typed."""
    from dlperf.store import Store

    db = tmp_path / "r.db"
    Store.open(str(db), create=True).close()
    with pytest.raises(UsageError, match=r"^resume: .* holds no run to resume \(dlperf run starts one\)$"):
        dlperf.resume(db=str(db))


def test_a_spec_made_with_none_for_a_list_is_refused_in_one_line():
    with pytest.raises(UsageError, match=r"^--frameworks None: expected a comma-separated list, not None$"):
        RunSpec(workloads=tuple(WORKLOADS), frameworks=None)


SWITCHES = [f.name for f in dataclasses.fields(RunSpec) if f.type == "bool"]


def test_every_yes_no_field_is_checked():
    assert {"pin", "profile", "loss_check", "predict", "nvtx"} <= set(SWITCHES)


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize(("value", "kind"), [("false", "a str"), ("no", "a str"), (0, "an int"), (None, "None")])
def test_a_yes_no_argument_takes_a_bool_only(name, value, kind):
    assert refused(threads=[1], **{name: value}) == f"{name}={value!r}: expected True or False, not {kind}"


@pytest.mark.parametrize(
    ("given", "said"),
    [({"repeats": "3"}, "repeats='3': expected a whole number of at least 1 (an int, not a str)"),
     ({"repeats": True}, "repeats=True: expected a whole number of at least 1"),
     ({"compile_at_once": "2"}, "compile_at_once must be a whole number from 1 to 16 (an int, not a str)")],
)  # fmt: skip
def test_text_for_a_whole_number_says_an_int_is_expected(given, said):
    assert refused(**given) == said


@pytest.mark.parametrize("name", ["timeout", "compile_timeout"])
def test_text_for_seconds_says_a_number_is_expected(name):
    said = refused(**{name: "10"})
    assert said.startswith(f"{name}='10': expected a number of seconds above 0"), said
    assert said.endswith("(an int or float, not a str)"), said


def test_dir_lists_the_lazy_names_and_loads_nothing_heavy():
    code = (
        "import sys, dlperf; names = dir(dlperf); "
        "print(sorted(set(dlperf.__all__) - set(names))); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'rich', 'jax', 'tensorflow')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "[]"]
    assert {"run", "training_parts", "TimerConfig", "UsageError"} <= set(dir(dlperf))


def test_progress_false_shows_no_progress(tmp_path):
    """`dlperf.run(..., progress=False)` still drew '[1/1] tiny-fcn-r torch cpu:1 fp32 ...' on stderr: a notebook had
    no quiet run. False now shows none; the default shows it."""
    script = (f"import dlperf\nt = dlperf.TimerConfig(min_time=0.05, max_time=0.2, min_steps=3)\n"
              f"for quiet in (False, None):\n"
              f"    dlperf.run(['tiny-fcn-r'], threads=[1], timer=t, predict=False, progress=quiet, "
              f"db={str(tmp_path / 'p.db')!r})\n"
              "    print('--', file=__import__('sys').stderr, flush=True)\n")  # fmt: skip
    said = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert said.returncode == 0, said.stderr
    quiet, shown = said.stderr.split("--\n")[:2]
    assert "tiny-fcn-r torch cpu:1 fp32" not in quiet and "tiny-fcn-r torch cpu:1 fp32" in shown


def test_a_progress_that_is_no_display_is_refused_before_anything_is_stored(tmp_path):
    """`progress=True` was a TypeError once the run was stored, which then read "stopped (its process is gone)" in a
    live notebook, and warned of itself at every later run."""
    db = tmp_path / "p.db"
    for value in ("no", 1, object()):
        with pytest.raises(UsageError, match=r"^progress=.*: expected None or True \(the default display\), False"):
            dlperf.run(WORKLOADS, progress=value, db=str(db))
        with pytest.raises(UsageError, match=r"^progress="):
            dlperf.resume(progress=value, db=str(db))
    assert not db.exists()
    assert (
        api_arguments.checked_progress(True) is None and api_arguments.checked_progress(False) is False
    )  # True: the default display


def test_a_display_lacking_a_method_the_sweep_calls_is_refused_naming_it_before_anything_is_stored(tmp_path):
    """A display with `__enter__`, `__exit__` and `start` passed the check, then failed with an AttributeError once
    its first cell was measured (`finish`), the run left half stored."""

    class Partial:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def start(self, *args):
            return None

        def refresh(self):
            return None

    db = tmp_path / "p.db"
    for call in (lambda: dlperf.run(WORKLOADS, progress=Partial(), db=str(db)),
                 lambda: dlperf.resume(progress=Partial(), db=str(db))):  # fmt: skip
        with pytest.raises(UsageError) as caught:
            call()
        said = str(caught.value)
        assert said.startswith("progress=") and "\n" not in said
        assert said.endswith(": it lacks start_together, finish, profiling, profiled")
    assert not db.exists()


def test_a_subclass_of_progress_is_a_display():
    from dlperf.progress import Progress

    class Mine(Progress):
        def finish(self, *args):
            return None

    mine = Mine(1)
    assert api_arguments.checked_progress(mine) is mine
    with pytest.raises(UsageError, match=r"^progress=Mine: a display class, not a display: give one made of it"):
        api_arguments.checked_progress(Mine)  # its methods are there, unbound: it failed once the run was stored


def test_every_method_the_sweep_calls_on_a_display_is_checked():
    """The check named three of the eight methods the sweep calls: a display it passed could fail mid-run."""
    import re
    from pathlib import Path

    from dlperf.runner import sweep

    called = set(re.findall(r"\bprogress\.(\w+)", Path(sweep.__file__).read_text()))
    assert called and called <= set(api_arguments.DISPLAY_METHODS)


def test_a_display_that_fails_leaves_its_run_interrupted_and_resumable_not_stopped(tmp_path):
    from dlperf.progress import Progress
    from dlperf.store import Store
    from dlperf.store.state import run_state

    class Broken(Progress):
        def __enter__(self):
            raise RuntimeError("the display broke")

    db = str(tmp_path / "b.db")
    with pytest.raises(RuntimeError, match="the display broke"):
        dlperf.run(WORKLOADS, threads=1, predict=False, progress=Broken(1), db=db)
    store = Store.open(db, create=False)
    try:
        [run] = store.runs()
        assert run_state(store, run).state == "interrupted"
    finally:
        store.close()


@pytest.mark.parametrize(
    ("given", "said"),
    [({"warn": 123}, "warn=123: expected a function, called with each warning's text (None: to stderr)"),
     ({"argv": "my args"}, "argv='my args': expected the command line stored with the run as a list of str"),
     ({"argv": ["x.py", 3]}, "argv=['x.py', 3]: expected the command line stored with the run as a list of str"),
     ({"dry_run": "no"}, "dry_run='no': expected True or False, not a str")],
)  # fmt: skip
def test_runs_own_arguments_of_another_kind_are_refused_naming_them_before_anything_is_stored(
    given, said, tmp_path, monkeypatch
):
    """warn=123 was a TypeError at the first warning, an empty store left behind; argv="my args" was stored as the
    list of its characters; dry_run="no" was a dry run, its truth taken."""
    monkeypatch.setattr(api, "make_plan", lambda *a, **k: pytest.fail("planned"))
    db = tmp_path / "own.db"
    calls = [lambda: dlperf.run(WORKLOADS, db=str(db), **given)]
    if "argv" not in given:
        calls.append(lambda: dlperf.resume(db=str(db), **given))
    for call in calls:
        with pytest.raises(UsageError) as caught:
            call()
        assert str(caught.value).startswith(said) and "\n" not in str(caught.value)
    assert not db.exists()


def test_argv_takes_a_tuple_of_str_as_a_list():
    assert api_arguments.checked_own(False, print, ("train.py", "--fast")) == ["train.py", "--fast"]
    assert api_arguments.checked_own(True, None) is None


def test_a_bad_timer_value_is_a_usage_error_of_one_line_and_still_a_value_error():
    """TimerConfig(max_time=-1) raised a bare ValueError: a notebook showed a dataclass's frames, not the one line
    every other bad input of the API is."""
    with pytest.raises(UsageError) as caught:
        dlperf.TimerConfig(max_time=-1)
    assert isinstance(caught.value, ValueError)
    said = "TimerConfig: max_time -1: expected a number of seconds above 0"
    assert str(caught.value) == said and caught.value._render_traceback_() == [f"BadValue: {said}"]


@pytest.mark.parametrize("db", [123, ["x.db"], b"x.db"])
def test_a_db_that_is_no_path_is_refused(db, tmp_path, monkeypatch):
    """db=123 ran a whole sweep into a file named 123, db=['x.db'] into one named "['x.db']"."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"^db=.*: expected a path \(a str or pathlib.Path\), or None"):
        dlperf.run(WORKLOADS, dry_run=True, db=db)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_while_planning_is_a_plain_keyboard_interrupt_that_says_so(tmp_path, monkeypatch):
    """Ctrl-C while a probe child planned raised launch.ChildInterrupted, with no message, 11 frames deep; the
    docstring promises a plain KeyboardInterrupt while the run is planned, nothing stored."""
    from dlperf.runner.launch import ChildInterrupted

    def interrupted(*args, **kwargs):
        raise ChildInterrupted({})

    monkeypatch.setattr(api, "make_plan", interrupted)
    with pytest.raises(KeyboardInterrupt) as caught:
        dlperf.run(WORKLOADS, db=str(tmp_path / "i.db"))
    assert type(caught.value) is KeyboardInterrupt
    assert str(caught.value) == "dlperf.run was interrupted while it planned: nothing was stored"
    assert not (tmp_path / "i.db").exists()


def test_an_outcome_reads_as_one_short_line(monkeypatch, tmp_path):
    """A notebook cell ending with `outcome` printed 3,300 characters: the plan's whole environment."""
    from dlperf.vocab import Status

    monkeypatch.setattr(api, "for_plan", lambda *args: None)
    outcome = dlperf.run(WORKLOADS, threads=[1, 2], dry_run=True, db=str(tmp_path / "o.db"))
    assert repr(outcome) == "Outcome(exit_code=0, run_id=None, cells=2)"
    outcome.statuses = [Status.OK, Status.OK, Status.FAILED]
    assert repr(outcome) == "Outcome(exit_code=0, run_id=None, cells=2, statuses={ok: 2, failed: 1})"


def test_a_dry_run_says_the_processes_it_would_run(monkeypatch, tmp_path):
    """`run(..., dry_run=True).tasks` was None, though its docstring says a dry run fills it: only resume's did."""
    monkeypatch.setattr(api, "for_plan", lambda *args: None)
    outcome = dlperf.run(WORKLOADS, threads=[1, 2], dry_run=True, db=str(tmp_path / "d.db"))
    assert outcome.tasks == outcome.plan.tasks and [t.cell.threads for t in outcome.tasks] == [1, 2]


def test_a_run_begun_beside_this_one_is_looked_for_again_once_this_one_holds_its_lease(tmp_path, monkeypatch):
    """Two runs started at once on one store each looked before the other held its lease, and 3 times in 5 neither
    was warned that the two shared the CPU: this run looks again once its own run is stored."""
    warned, looked = [], []

    def beside(db, store, began, before=frozenset()):
        looked.append(before)
        return ["run 9 of x.db began beside this one while it was planned"] if len(looked) > 1 else []

    monkeypatch.setattr(api, "began_beside", beside)
    monkeypatch.setattr(api, "_execute", lambda session, *args, **kw: api.Outcome(0, session.run_id))
    outcome = dlperf.run(WORKLOADS, threads=1, predict=False, warn=warned.append, db=str(tmp_path / "b.db"))
    assert looked[-1] == frozenset({outcome.run_id}) and warned[-1].startswith("run 9 of x.db began beside")


def test_a_searchs_refusal_said_as_the_callers_arguments_keeps_its_type():
    """A BadValue (a ValueError too) raised inside a search was re-raised as a plain UsageError once its words were
    put as the caller's arguments: `except ValueError` no longer caught it."""
    from types import SimpleNamespace

    from dlperf.errors import BadValue
    from dlperf.store.location import said_to

    refused = BadValue("--max-time '-1': expected a number of seconds above 0")
    caller, command = (SimpleNamespace(flags=flags, max_time=-1.0) for flags in (False, True))
    with pytest.raises(BadValue, match=r"^max_time .*: expected a number of seconds above 0$"),\
            said_to(caller, {"max_time": "--max-time"}):  # fmt: skip
        raise refused
    with pytest.raises(BadValue, match=r"^--max-time '-1'"), said_to(command, {"max_time": "--max-time"}):
        raise BadValue("--max-time '-1': expected a number of seconds above 0")  # the command's flags: unchanged
