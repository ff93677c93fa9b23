"""Bad input said in the user's words: no command prints the help, a misspelt command, choice or option is named with
the closest one, a timer flag that cannot work is refused before anything runs, numbers and lists say what was wrong
with them, and a count of one reads as one."""

import itertools
import json
from types import SimpleNamespace

import pytest

from dlperf.cli import build_parser, main
from dlperf.errors import UsageError
from dlperf.store import Store


def error_line(args: list[str], capsys, tmp_path) -> str:
    """The one line a bad command line prints, after checking its exit code 2 and that nothing was written."""
    db = tmp_path / "x.db"
    assert main([*args, "--db", str(db)] if args and args[0] == "run" else args) == 2
    out, err = capsys.readouterr()
    [line] = err.strip().splitlines()
    assert line.startswith("dlperf: error: ") and not db.exists(), err
    said = line.removeprefix("dlperf: error: ")
    document = {
        "json": json.dumps({"error": said, "exit_code": 2}, indent=2),
        "md": f"**dlperf: error** (exit code 2): {said}",
    }
    given = [b for a, b in itertools.pairwise(args) if a == "--format"] + [
        a.removeprefix("--format=") for a in args if a.startswith("--format=")
    ]
    fmt = next((f for f in given if f in document), None)
    assert out == ("" if fmt is None else document[fmt] + "\n"), out
    return said


# ----------------------------------------------------------------------------------------------------------------------
# Commands, choices and options


def test_no_command_prints_the_help_and_exits_2(capsys):
    """`dlperf` alone said only "the following arguments are required: command"."""
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("usage: dlperf")
    assert all(f"\n    {name} " in err for name in ("run", "profile", "advise")), err  # each command, its help after
    assert err.strip().splitlines()[-1].startswith("dlperf: error: no command given")


CHOICES = [
    (["rnu"], "unknown command 'rnu' (did you mean 'run'?)"),
    (["frobnicate"], "unknown command 'frobnicate' (dlperf --help lists them)"),
    (["env", "lsit"], "unknown env action 'lsit' (did you mean 'list'?) (known: show, list or install)"),
    (["plot", "scalling", "-o", "x.png"], "unknown plot kind 'scalling' (did you mean 'scaling'?) (known: "),
    (["data", "make", "d"], "unknown data action 'make' (known: synth)"),
    (["optimize", "x", "--order", "verdct"], "--order 'verdct': expected verdict or fixed (did you mean 'verdict'?)"),
    # optimize's flag is --device, one device; the message named run's --devices
    (["optimize", "fcn-r", "--device", "tpu"], "--device: unknown device 'tpu' (expected cpu, cuda, cuda:N or mps)"),
    (["table", "--format", "jsn"], "--format 'jsn': expected text, md, csv or json (did you mean 'json'?)"),
    (["crossover", "x", "--mode", "bf61"], "--mode 'bf61': expected fp32, bf16 or fp16 (did you mean 'bf16'?)"),
    # a choice of an enum's members suggested the member's repr: (did you mean <CommBackend.NCCL: 'nccl'>?)
    (["comm", "--backend", "ncl"], "--backend 'ncl': expected gloo or nccl (did you mean 'nccl'?)"),
]


def test_a_store_named_before_the_command_is_the_commands_own(tmp_path, capsys):
    """`dlperf --db X table` said "unknown command 'X'": --db is each command's, and people write it first (git -C)."""
    db = tmp_path / "mine.db"
    Store.open(str(db), create=True).close()
    first = build_parser().parse_args(["--db", str(db), "table", "--run", "2"])
    assert first.db_first == str(db) and first.command == "table"
    assert main(["--db", str(db), "table"]) == 2
    assert f"{db}: no runs yet" in capsys.readouterr().err  # the store named, opened
    assert main(["--db", str(tmp_path / "none.db"), "table"]) == 2
    assert f"--db '{tmp_path / 'none.db'}': no such database" in capsys.readouterr().err
    assert main([f"--db={db}", "export", "--db", str(db), "--run", "7"]) == 2  # the same store twice is one store
    assert f"--run 7: no such run in {db}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["plot"], "dlperf plot needs KIND and -o/--output (see dlperf plot --help)"),
        (["plot", "scaling"], "dlperf plot needs -o/--output (see dlperf plot --help)"),
        (["data", "synth"], "dlperf data needs DIR (see dlperf data --help)"),
    ],
)
def test_what_a_command_needs_and_was_not_given_is_named_as_its_help_names_it(args, said, capsys, tmp_path):
    """argparse said "the following arguments are required: kind, -o/--output": a destination, not --help's KIND."""
    assert error_line(args, capsys, tmp_path) == said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--db", "a.db", "data", "synth", "d"], "--db: dlperf data reads and writes no store"),
        (["--db", "a.db", "table", "--db", "b.db"], "--db given twice, before and after table: 'a.db' and 'b.db'"),
    ],
)
def test_a_store_named_before_a_command_that_has_none_or_twice_is_one_line(args, said, capsys, tmp_path):
    assert error_line(args, capsys, tmp_path) == said


@pytest.mark.parametrize(("args", "said"), CHOICES)
def test_a_choice_not_known_names_what_was_typed_and_the_closest(args, said, capsys, tmp_path):
    """argparse said "argument command: invalid choice: 'rnu' (choose from ...)": its destination's name, no hint."""
    line = error_line(args, capsys, tmp_path)
    assert line.startswith(said) and "argument" not in line and "invalid choice" not in line, line


OPTIONS = [
    (["profile", "x", "--devices", "cpu"], "unrecognized arguments: --devices cpu (did you mean --device?)"),
    (["crossover", "x", "--modes", "bf16"], "unrecognized arguments: --modes bf16 (did you mean --mode?)"),
    (["run", "--workloads", "x", "--treads=2"], "unrecognized arguments: --treads=2 (did you mean --threads?)"),
    (
        ["fit", "x", "--devices", "cpu", "--treads", "1"],
        "(did you mean --device for --devices, --threads for --treads?)",
    ),
    (["--verison"], "unrecognized arguments: --verison (did you mean --version?)"),
    (["run", "--networks", "fcn-r"], "unrecognized arguments: --networks fcn-r (did you mean --workloads?)"),
    (["run", "--bogus-flag"], "unrecognized arguments: --bogus-flag (dlperf run --help lists its options)"),
    # after `--` the command's own option is a value: "did you mean --db?" named the very flag typed
    (
        ["compare", "--", "-1", "1", "--db", "x.db"],
        "unrecognized arguments: --db x.db (--db comes after `--`, which makes it a value: put it before `--`)",
    ),
]


@pytest.mark.parametrize(("args", "said"), OPTIONS)
def test_an_unknown_option_names_the_commands_closest(args, said, capsys, tmp_path):
    line = error_line(args, capsys, tmp_path)
    assert said in line, line


# ----------------------------------------------------------------------------------------------------------------------
# --max-time 0

POSITIONALS = {
    "profile": ["tiny-fcn-r"],
    "optimize": ["tiny-fcn-r"],
    "crossover": ["tiny-fcn-r"],
    "fit": ["tiny-fcn-r"],
}


def timed_commands() -> list[str]:
    from argparse import _SubParsersAction

    [sub] = [a for a in build_parser()._actions if isinstance(a, _SubParsersAction)]
    found = [name for name, p in sub.choices.items() if any("--max-time" in a.option_strings for a in p._actions)]
    assert {"run", "profile", "optimize", "crossover", "fit", "peak"} <= set(found)
    return found


@pytest.mark.parametrize("command", timed_commands())
def test_max_time_0_is_refused_by_every_command_before_anything_runs(command):
    """`run --min-time 0 --max-time 0` passed, then every cell failed: "no timed step: sampling ended before the first
    one"."""
    with pytest.raises(UsageError) as caught:
        build_parser().parse_args([command, *POSITIONALS.get(command, []), "--max-time=0"])
    assert str(caught.value) == "--max-time '0': expected a number of seconds above 0"


def test_the_timer_refuses_no_time_and_keeps_the_pilots_thousandth_of_a_second(tmp_path):
    from dlperf.measure.timer import TimerConfig
    from dlperf.plan.estimate import PILOT_TIMER
    from dlperf.spec import RunSpec, make_spec

    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match=r"^TimerConfig: max_time .*: expected a number of seconds above 0$"):
            TimerConfig(min_time=0.0, max_time=bad)
    assert PILOT_TIMER.max_time == 0.001
    stored = make_spec(["tiny-fcn-r"]).to_json()
    stored["timer"].update(min_time=0.0, max_time=0.0)  # a run stored before the check, resumed
    with pytest.raises(UsageError, match=r"^--max-time 0.0: expected a number of seconds above 0$"):
        RunSpec.from_json(stored)


# ----------------------------------------------------------------------------------------------------------------------
# Numbers and lists

LONGEST = "9223372036 (the longest wait the platform can make)"  # threading.TIMEOUT_MAX, the bound of every timeout


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--max-time", "-1"], "--max-time '-1': expected a number of seconds above 0"),
        (["--min-time", "-1"], "--min-time '-1': expected a number of seconds of at least 0"),
        (["--timeout", "1e400"], f"--timeout '1e400': expected a number of seconds above 0 and at most {LONGEST}"),
        (["--timeout", "٣"], "--timeout '٣': expected a number of seconds above 0 in ASCII digits"),
        (["--threads", "-1"], "--threads '-1': expected a whole number of at least 1"),
        (["--threads", "1,-1"], "--threads '1,-1': '-1' is not a whole number of at least 1"),
        (["--threads", "1,٣"], "--threads '1,٣': '٣' is not a whole number of at least 1 in ASCII digits"),
        (["--repeats", "1.5"], "--repeats '1.5': expected a whole number of at least 1"),
        (["--compile-at-once", "99"], "--compile-at-once '99': expected a whole number from 1 to 16"),
        (["--workloads", "tiny-fcn-r,"], "--workloads 'tiny-fcn-r,': an empty item (a trailing comma)"),
        (["--workloads", ",tiny-fcn-r"], "--workloads ',tiny-fcn-r': an empty item (a leading comma)"),
        (["--workloads", "tiny-fcn-r,,fcn-r"], "--workloads 'tiny-fcn-r,,fcn-r': an empty item (a doubled comma)"),
        (["--workloads", " "], "--workloads ' ': expected a comma-separated list, got nothing"),
    ],
)
def test_a_bad_number_or_list_says_what_was_wrong_with_it(flags, said, capsys, tmp_path):
    """Once "expected a finite number of at least 0 and at most 9.22337e+09 in ASCII digits" for '-1', and "expected
    a comma-separated list" for one with a trailing comma."""
    workloads = [] if "--workloads" in flags else ["--workloads", "tiny-fcn-r"]  # a flag is given once
    assert error_line(["run", *workloads, *flags], capsys, tmp_path) == said


def test_an_unknown_mode_names_the_closest_and_its_combination_only_when_there_is_one(capsys, tmp_path):
    """Once "unknown mode 'fp23' in 'fp23'", with no hint."""
    alone = error_line(["run", "--workloads", "tiny-fcn-r", "--modes", "fp23"], capsys, tmp_path)
    assert alone.startswith("--modes: unknown mode 'fp23' (did you mean 'fp32'?) (components: fp32, bf16, "), alone
    combined = error_line(["run", "--workloads", "tiny-fcn-r", "--modes", "bf16+chanels_last"], capsys, tmp_path)
    assert combined.startswith("--modes: unknown mode 'chanels_last' in 'bf16+chanels_last' (did you mean "
                               "'channels_last'?)"), combined  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------------
# One of a kind


def test_plural_reads_one_as_one():
    from dlperf.measure.units import plural

    assert [plural(n, "thread") for n in (0, 1, 2)] == ["0 threads", "1 thread", "2 threads"]
    assert plural(1, "process", "es") == "1 process" and plural(1200, "process", "es") == "1,200 processes"


def test_optimize_says_one_thread_and_one_step(monkeypatch):
    """The title read "optimize tiny-fcn-r on cpu, 1 threads"."""
    from dlperf import optimize
    from dlperf.commands.optimize import few_steps, render_rich

    search = SimpleNamespace(workload="tiny-fcn-r", device="cpu", threads=1, run_id=9, results=[], best=None)
    assert render_rich(search).title == "optimize tiny-fcn-r on cpu, 1 thread (run 9)"
    rested = few_steps(SimpleNamespace(samples=1, mode="bf16"), SimpleNamespace(samples=4, mode="fp32"))
    assert rested == " (rests on 1 step of bf16 and 4 of fp32)"
    said = optimize.budget_check(60.0, 30.0, candidates=1, repeats=1, process_s=20.0)
    assert "(1 candidate, 1 process each)" in said, said


def test_peak_and_predict_count_one_as_one(monkeypatch, capsys):
    from dlperf.commands import common
    from dlperf.commands import predict as predict_command
    from dlperf.commands.peak import _print_text

    _print_text([], [], 1, SimpleNamespace(copy_sizes=()), "x.db", gpus=False)
    assert "1 peak stored in x.db" in capsys.readouterr().out
    said = []
    monkeypatch.setattr(common, "print_rich", lambda table, lines=(), notes=(): said.extend(notes))
    for name in ("rows_table", "summary_table"):
        monkeypatch.setattr(predict_command, name, lambda *args, **kwargs: None)
    predict_command.report([SimpleNamespace(case=SimpleNamespace(in_scope=True))], [])
    assert said[-1] == "1 row predicted, 0 not" and said[0].startswith("the efficiencies were fitted on")


def test_a_loader_warning_says_one_thread():
    from dlperf.plan.warnings import loader_warnings
    from dlperf.protocol import Cell

    [warning] = loader_warnings([Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32", loader="w2")], cores=2)
    assert "w2 with 1 thread:" in warning, warning


def test_the_report_of_one_cell_on_one_machine_says_so(tmp_path, capsys):
    """`dlperf report` said "wrote ... (1 cells of run 1, 1 machines of solo)"."""
    from dlperf.store import Store
    from report.campaign import ALPHA, CELLS, write

    db = tmp_path / "solo.db"
    store = Store.open(db, create=True)
    write(store, ALPHA, CELLS["alpha"][:1], "solo")
    store.close()
    assert main(["report", "-o", str(tmp_path / "r.html"), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "1 cell of run 1, 1 machine of " in out, out


def test_the_report_of_a_run_with_nothing_measured_yet_says_so(tmp_path, capsys):
    """A run interrupted before its first cell was reported as "wrote empty.html (8 KiB, 4 cells of run 1)", exit 0,
    as if its cells were measured."""
    from dlperf.store import Store
    from report.runs import cell

    db = tmp_path / "p.db"
    store = Store.open(db, create=True)
    store.create_run({"spec": 1}, {}, {}, ["dlperf", "run"], [cell("fcn-r", threads=t) for t in (1, 2)])
    store.close()
    assert main(["report", "-o", str(tmp_path / "r.html"), "--db", str(db)]) == 0
    assert "(none measured yet)" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------------------------------
# Paths


def test_a_path_too_long_to_look_up_is_one_line_naming_its_flag(tmp_path, capsys):
    """A name past NAME_MAX raised OSError (ENAMETOOLONG) out of Path.is_dir(): a traceback for --db, -o and merge."""
    db = tmp_path / "store.db"
    Store.open(db, create=True).close()
    long = str(tmp_path / ("y" * 300))
    too_long = "a name longer than this system allows"
    for args, flag in [
        (["table", "--db", long + ".db"], "--db"),
        (["export", "--db", str(db), "-o", long + ".csv"], "-o"),
        (["plot", "scaling", "--db", str(db), "-o", long + ".png"], "-o"),
        (["merge", long + ".db", "--db", str(db)], "merge"),
    ]:
        line = error_line(args, capsys, tmp_path)
        assert line.startswith(f"{flag} '{long}") and too_long in line, line


DATA_EXPECTED = "(expected synthetic, dataset, or a directory of datasets, as `dlperf data synth DIR` writes)"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--workloads", "tiny-fcn-r", "--gpu-specs", ""], "--gpu-specs '': expected a CSV file, got nothing"),
        (["run", "--workloads", "tiny-fcn-r", "--ray", ""],
         "--ray '': expected auto, HOST:PORT, ray://HOST:PORT or local, got nothing"),
        (["run", "--workloads", "tiny-fcn-r", "--nodes", " "], "--nodes ' ': expected all or KEY=VALUE, got nothing"),
        (["run", "--workloads", "tiny-fcn-r", "--data", ""], f"--data '': an empty path {DATA_EXPECTED}"),
        (["run", "--workloads", "tiny-fcn-r", "--data", "d" * 300],
         f"--data '{'d' * 300}': cannot be looked at (File name too long) {DATA_EXPECTED}"),
        (["profile", "tiny-fcn-r", "--trace-dir", ""], "--trace-dir '': expected a directory, got nothing"),
        (["fit", "tiny-fcn-r", "--gpu", ""], "--gpu '': expected a GPU name, got nothing"),
        (["data", "synth", ""], "DIR '': expected the folder to write the datasets in, got nothing"),
        (["export", "--run", "1,,2"], "--run '1,,2': an empty item (a doubled comma)"),
        (["report", "--run", "1,"], "--run '1,': an empty item (a trailing comma)"),
        (["table", "--modes", ""], "--modes '': expected a comma-separated list, got nothing"),
        (["run", "--workloads", "tiny-fcn-r", "--max-trace-mib", "5"],
         "--max-trace-mib 5: the traces are --profile's; add --profile"),
    ],
)  # fmt: skip
def test_an_empty_value_or_a_flag_without_its_partner_is_refused_not_taken_as_not_given(args, said, capsys, tmp_path):
    """Each was taken as not given, or as the current folder (`--gpu-specs "$SPECS"` with $SPECS unset ran with the
    built-in GPUs; `--data ''` searched the current folder; `data synth ''` wrote there; `--run 1,,2` read past the
    blank, `table --modes ''` showed every mode, `fit --gpu ''` suggested `predict ... --gpu  predicts`), or a
    traceback (a --data name too long to look up); --max-trace-mib without --profile was ignored, where --trace-dir
    without it is refused."""
    assert error_line(args, capsys, tmp_path) == said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["env", "list", "--force"], "--force: only dlperf env install takes it, not env list"),
        (["env", "list", "--run", "3"], "--run: only dlperf env show takes it, not env list"),
        (["env", "show", "--force"], "--force: only dlperf env install takes it, not env show"),
        (
            ["env", "install", "jax", "--format", "json"],
            "--format: only dlperf env show and list take it, not env install",
        ),
        (["--db", "x.db", "env", "list"], "--db: only dlperf env show takes it, not env list"),
    ],
)
def test_a_flag_of_another_env_action_is_refused_not_ignored(args, said, capsys, tmp_path):
    """`env list --run 3` listed the environments, `env show --force` showed the run: the flag was ignored."""
    assert error_line(args, capsys, tmp_path) == said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["fit", "x", "--max-memory", "-1G"], "--max-memory needs a value (one that starts with '-' is written "
                                               "--max-memory=VALUE)"),
        (["plot", "scaling", "-o"], "--output needs a value (one that starts with '-' is written --output=VALUE)"),
        (["run", "--profile=yes"], "--profile takes no value (got 'yes')"),
        (["list", "--frameworks", "--runs"], "--runs and --frameworks cannot be given together"),
    ],
)  # fmt: skip
def test_argparse_own_errors_name_the_flag_as_typed_not_as_an_argument(args, said, capsys, tmp_path):
    """argparse said "argument --max-memory: expected one argument" for `--max-memory -1G`, which it read as a flag."""
    assert error_line(args, capsys, tmp_path) == said


def test_export_to_dash_writes_standard_output_not_a_file_named_dash(tmp_path, capfd, monkeypatch):
    """`dlperf export -o -` wrote a file named '-' in the current folder."""
    from report.campaign import ALPHA, CELLS, write

    db = tmp_path / "one.db"
    store = Store.open(db, create=True)
    write(store, ALPHA, CELLS["alpha"][:1], "solo")
    store.close()
    monkeypatch.chdir(tmp_path)
    assert main(["export", "-o", "-", "--format", "csv", "--db", str(db)]) == 0
    assert capfd.readouterr().out.startswith("run_id,") and not (tmp_path / "-").exists()


def test_an_empty_gpu_or_price_file_is_refused_by_every_command_that_reads_one(capsys, tmp_path, monkeypatch):
    """predict and crossover said "--gpu-specs : no such file"; advise --prices '' went on with the built-in prices
    (or $DLPERF_PRICES) and measured for a minute."""
    from dlperf.predict import prices

    line = error_line(["predict", "tiny-fcn-r", "--gpu", "T4", "--gpu-specs", ""], capsys, tmp_path)
    assert line == "--gpu-specs '': expected a CSV file, got nothing"
    monkeypatch.setenv(prices.ENV, str(tmp_path / "mine.csv"))
    with pytest.raises(UsageError, match=r"^--prices '': expected a CSV file, got nothing$"):
        prices.use_prices("")


def test_merging_a_store_with_no_runs_says_so(tmp_path, capsys):
    """`dlperf merge empty.db --db all.db` printed nothing and exited 0: the wrong file named looked like a merge."""
    empty = tmp_path / "empty.db"
    Store.open(empty, create=True).close()
    assert main(["merge", str(empty), "--db", str(tmp_path / "all.db")]) == 0
    assert capsys.readouterr().out == f"{empty}: nothing to copy (it holds no run and no peak)\n"


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("folder", "'{t}' is a directory, not a Python file"),
        ("notes.txt", "'{t}' is not a Python file (expected path/to/file.py)"),
        ("m" * 300 + ".py", "'{t}' cannot be looked at (File name too long)"),
    ],
)
def test_a_factory_file_that_is_no_python_file_is_named_so(target, said, capsys, tmp_path):
    """A folder was "no such file", a .txt was imported as a module named after its path ("No module named
    '/x/notes'"), and a name too long to look up was a traceback (ENAMETOOLONG out of Path.is_file)."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "notes.txt").write_text("def make():\n    pass\n")
    full = str(tmp_path / target)
    line = error_line(["run", "--workloads", f"{full}:make"], capsys, tmp_path)
    assert line == f"workload '{full}:make': " + said.format(t=full), line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["compare", "", "1"], "A '': expected a run id, a database file or path.db:ID, got nothing"),
        (["merge", ""], "merge '': expected a database file, got nothing"),
        (["plot", "scaling", "-o", "x.png", "--workloads", ""], "--workloads '': expected a comma-separated list, got "
                                                                 "nothing"),
        (["plot", "scaling", "-o", "x.png", "--workloads", "a,,b"], "--workloads 'a,,b': an empty item (a doubled "
                                                                    "comma)"),
    ],
)  # fmt: skip
def test_an_empty_run_store_or_workload_list_is_named_as_empty(args, said, capsys, tmp_path):
    """compare and merge said "'' is a directory, not a database file" (the current folder), plot --workloads ''
    drew every workload."""
    assert error_line(args, capsys, tmp_path) == said


def test_optimize_given_two_devices_says_it_searches_one(capsys, tmp_path):
    """`optimize --device cpu,cuda` was a traceback: "too many values to unpack (expected 1)"."""
    line = error_line(["optimize", "tiny-fcn-r", "--device", "cpu,cuda"], capsys, tmp_path)
    assert line == ("--device 'cpu,cuda': optimize searches one device's modes; give one (dlperf run --devices "
                    "cpu,cuda measures each)")  # fmt: skip


def test_comm_refuses_buffers_beyond_the_machines_memory_before_the_job(capsys, tmp_path, monkeypatch):
    """`comm --sizes 4K:1T` started torchrun, and each rank then failed "can't allocate memory"."""
    from dlperf.measure import system
    from dlperf.runner import comm

    monkeypatch.setattr(system, "memory_total_bytes", lambda root="/": 16 * 10**9)
    monkeypatch.setattr(comm, "run_job", lambda *args: pytest.fail("the job was launched"))
    line = error_line(["comm", "--sizes", "4K,8G", "--db", str(tmp_path / "c.db")], capsys, tmp_path)
    assert line == ("--sizes 4K,8G: 2 processes' buffers of 8.59 GB take 17.2 GB, more than this machine's 16 GB "
                    "of memory")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--workloads", "tiny-fcn-r", "--timeout", "1", "--min-time", "5"], "--timeout 1 is not above "
         "--min-time 5"),
        (["profile", "tiny-fcn-r", "--timeout", "0.5"], "--timeout 0.5 is not above --min-time 0.5"),
        (["fit", "tiny-fcn-r", "--timeout", "0.1"], "--timeout 0.1 is not above --min-time 0.3"),
    ],
)  # fmt: skip
def test_a_timeout_no_cell_can_meet_is_refused_before_anything_runs(args, said, capsys, tmp_path):
    """`run --timeout 1 --min-time 5` ran every cell into its timeout: "exceeded --timeout 1 s ... (kept 0
    samples)"."""
    line = error_line([*args, "--db", str(tmp_path / "t.db")] if args[0] != "run" else args, capsys, tmp_path)
    assert line == f"{said}: each cell process times steps for at least --min-time seconds; raise --timeout or " \
                   "lower --min-time"  # fmt: skip


def test_export_into_a_fifo_writes_through_it_and_leaves_it_a_fifo(tmp_path, capsys):
    """The output was a temporary file renamed over the path: a FIFO became a regular file, and, as root,
    `export -o /dev/null` replaced /dev/null itself with one."""
    import os
    import stat
    import threading

    from report.campaign import ALPHA, CELLS, write

    db = tmp_path / "one.db"
    store = Store.open(db, create=True)
    write(store, ALPHA, CELLS["alpha"][:1], "solo")
    store.close()
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main(["export", "-o", str(fifo), "--db", str(db)]) == 0
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got and got[0].startswith(b"run_id,"), got


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--thread", "2", "--dry-run"], "unrecognized arguments: --thread 2 (did you mean --threads?)"),
        (["table", "--for", "md"], "unrecognized arguments: --for md (did you mean --format?)"),
        (["run", "--max-t", "3"], "unrecognized arguments: --max-t 3 (did you mean --max-time?)"),
    ],
)
def test_an_option_is_taken_only_as_spelt_in_full(args, said, capsys, tmp_path):
    """argparse took `--thread 2` for `--threads 2`: a typo passed unseen, and an abbreviation in a user's script
    would break, or change meaning, the day a longer option begins the same way. It is refused, naming the option."""
    assert error_line(args, capsys, tmp_path) == said


def test_ctrl_c_while_the_command_line_is_read_is_one_line_and_130(monkeypatch, capsys):
    """Ctrl-C before dlperf's own handler is set (the parser built with its commands' modules imported: about a
    second on a busy machine) was Python's traceback and exit -2 (3 of 10 interrupts of dlperf data synth)."""
    from dlperf import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["data", "synth", "x"]) == 130
    assert capsys.readouterr().err == "dlperf: interrupted\n"


def test_fit_asked_of_a_gpu_this_machine_lacks_names_the_command_that_predicts_it(capsys, tmp_path):
    """`dlperf fit model.py:make --gpu 4090` (does it fit a 4090?) said only 'unrecognized arguments'."""
    line = error_line(["fit", "tiny-fcn-r", "--gpu", "4090", "--db", str(tmp_path / "f.db")], capsys, tmp_path)
    assert line == ("--gpu: dlperf fit measures a device this machine has (--device cuda:N); for a GPU it has not: "
                    "dlperf predict tiny-fcn-r --memory --gpu 4090 predicts its largest batch")  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------------
# --format json: an error is a document too


@pytest.mark.parametrize(
    "args, said",
    [
        (["compare", "1", "2", "--format", "json"], "A '1': no such database file"),  # a CI gate's bad input
        (["table", "--format=json"], "no such database"),
        (["compare", "1", "--format", "json"], "dlperf compare needs B"),  # refused by the parser, as typed
    ],
)
def test_an_error_under_format_json_prints_a_json_document(args, said, capsys, tmp_path):
    """A script parsing `dlperf compare --format json`'s stdout got nothing at all for a missing database: it now gets
    {"error", "exit_code"} beside the one line on stderr."""
    assert main([*args, "--db", str(tmp_path / "none.db")]) == 2
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert said in document["error"] and document["exit_code"] == 2, document
    assert err.strip() == f"dlperf: error: {document['error']}"


def test_an_error_under_format_md_is_a_markdown_line_and_under_text_nothing_on_stdout(capsys, tmp_path):
    """`compare --format md >> $GITHUB_STEP_SUMMARY` wrote nothing of an error: the summary read as if all was well."""
    assert main(["compare", "1", "2", "--format", "md", "--db", str(tmp_path / "none.db")]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("dlperf: error: A '1'") and out == f"**dlperf: error** (exit code 2): {err[15:].strip()}\n"
    assert main(["compare", "1", "2", "--db", str(tmp_path / "none.db")]) == 2
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "args",
    [["predict", "tiny-fcn-r"], ["advise", "tiny-fcn-r"], ["fit", "tiny-fcn-r"], ["profile", "tiny-fcn-r"],
     ["optimize", "tiny-fcn-r"], ["comm"], ["list"], ["--db", "x.db", "list"]],
)  # fmt: skip
def test_a_format_the_command_refuses_gets_no_document(args, capsys):
    """`predict tiny-fcn-r --format md` said on stderr that md is no format of predict's, and printed a Markdown
    document of that error on stdout: no document is written in a format the command does not write."""
    assert main([*args, "--format", "md"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("dlperf: error: --format 'md': expected text or json"), err


@pytest.mark.parametrize(
    ("raised", "limit"),
    [
        (BlockingIOError(11, "Resource temporarily unavailable"), "this user's processes or threads (ulimit -u)"),
        (RuntimeError("can't start new thread"), "this user's processes or threads (ulimit -u)"),
        (OSError(24, "Too many open files"), "a process's open files (ulimit -n)"),
    ],
)
def test_a_limit_of_processes_or_files_is_one_line_not_a_traceback(raised, limit, monkeypatch, capsys):
    """Under `ulimit -u 3` a cell's fork raised BlockingIOError, under `ulimit -u 2` a thread "can't start new
    thread", under `ulimit -n 8` EMFILE: each a traceback."""
    from dlperf.commands import list as list_command

    def fails(args):
        raise raised

    monkeypatch.setattr(list_command, "run", fails)
    assert main(["list"]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"dlperf: error: dlperf list: the limit of {limit} was reached (")


def test_an_error_document_takes_the_last_format_typed_and_escapes_what_it_quotes(capsys):
    """Where parsing failed, the first `--format` typed was taken, where argparse takes the last; the Markdown line
    printed a stored name's escape sequences raw."""
    from argparse import Namespace

    from dlperf.cli import asked_format, document_error

    assert asked_format(None, ["table", "--format", "json", "--format=md", "--bogus"]) == "md"
    assert asked_format(None, ["table", "--format=md", "--format", "text"]) is None
    # a document written to a file (`-o FILE`): standard output is no reader's, the error stays on stderr alone
    assert asked_format(None, ["export", "--format", "json", "-o", "x.json", "--bogus"]) is None
    assert asked_format(None, ["export", "--format", "json", "--output=-", "--bogus"]) == "json"
    assert asked_format(Namespace(format="json", output="x.json"), []) is None
    assert asked_format(Namespace(format="json", output=None), []) == "json"
    document_error("A (net\x1b]0;pwned\x07) and B share no cell", 2, "md")
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and out.startswith("**dlperf: error** (exit code 2): A (net")


def test_env_install_where_the_data_folder_cannot_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    """DLPERF_DATA_DIR naming a file (or a read-only folder) was a traceback, NotADirectoryError, of `env install`,
    the command `env list` names."""
    (afile := tmp_path / "afile").write_text("x")
    monkeypatch.setenv("DLPERF_DATA_DIR", str(afile))
    said = error_line(["env", "install", "jax"], capsys, tmp_path)
    assert said == (
        f"dlperf env install: the frameworks' environments go in {afile}/envs (DLPERF_DATA_DIR), which "
        "cannot be made or written there (Not a directory): set DLPERF_DATA_DIR to a folder you can write"
    )


# ----------------------------------------------------------------------------------------------------------------------
# A flag given twice


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--workloads", "tiny-fcn-r", "--workloads", "tiny-fcn-s", "--threads", "1", "--dry-run"],
         "--workloads given twice, 'tiny-fcn-r' and 'tiny-fcn-s': give it once (--workloads takes a comma list: "
         "--workloads tiny-fcn-r,tiny-fcn-s)"),
        (["run", "--workloads", "tiny-fcn-r", "--threads", "1", "--threads=2", "--dry-run"],
         "--threads given twice, '1' and '2': give it once (--threads takes a comma list: --threads 1,2)"),
        (["table", "--db", "a.db", "--db", "b.db"], "--db given twice, 'a.db' and 'b.db': give it once"),
        (["--db", "a.db", "--db", "b.db", "table"], "--db given twice, 'a.db' and 'b.db': give it once"),
        (["merge", "x.db", "-o", "a.db", "-o", "b.db"], "-o given twice, 'a.db' and 'b.db': give it once"),
        (["merge", "x.db", "-o", "a.db", "--output=b.db"],
         "-o 'a.db' and --output 'b.db' are one flag given twice: give it once"),
        (["predict", "--validate", "--validate", "x.csv"],
         "--validate given twice, no value and 'x.csv': give it once"),
        (["export", "--format", "csv", "--format", "jsonl"], "--format given twice, 'csv' and 'jsonl': give it once"),
    ],
)  # fmt: skip
def test_a_flag_given_twice_with_two_values_is_refused(args, said, capsys, tmp_path, monkeypatch):
    """argparse kept the last value and dropped the first unsaid: `run --workloads tiny-fcn-r --workloads tiny-fcn-s`
    planned tiny-fcn-s alone, `merge -o a.db -o b.db` wrote b.db. Each is one line naming both values as typed."""
    monkeypatch.chdir(tmp_path)
    assert error_line(args, capsys, tmp_path) == said


def test_every_option_of_a_value_is_taken_once_and_the_same_value_twice_is_that_value(capsys, tmp_path):
    """Every command's options that take a value refuse a second one (argparse's `store` is `StoreOnce` in each
    parser, and an action of its own is one too: `run`'s `Typed` of --min-time and --max-time was a plain Action,
    which kept the last of two values); the same value given twice is taken, as once."""
    from argparse import _AppendAction, _SubParsersAction

    from dlperf.commands.common import StoreOnce

    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, _SubParsersAction)]
    stores = [(name, a) for name, p in [("dlperf", parser), *sub.choices.items()] for a in p._actions
              if a.option_strings and a.nargs != 0 and not isinstance(a, StoreOnce | _AppendAction)]  # fmt: skip
    assert stores == []
    assert main(["run", "--workloads", "tiny-fcn-r", "--max-time", "2", "--max-time", "5", "--dry-run"]) == 2
    assert "--max-time given twice, '2' and '5'" in capsys.readouterr().err
    db = tmp_path / "x.db"
    Store.open(db, create=True).close()
    assert main(["list", "--runs", "--db", str(db), "--db", str(db), "--format", "json", "--format=json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--workloads", "tiny-fcn-r", "--devices", "cuda:١"],
         "--devices: unknown device 'cuda:١' (expected cpu, cuda, cuda:N or mps)"),
        (["fit", "tiny-fcn-r", "--device", "cuda:١"], "--device 'cuda:١': expected cpu, cuda, cuda:N or mps"),
        (["profile", "tiny-fcn-r@b１６"],
         "workload 'tiny-fcn-r@b１６': the batch after @b must be a whole number from 1 to 65,536 in ASCII digits"),
    ],
)  # fmt: skip
def test_other_digits_in_a_device_or_a_batch_are_refused_as_number_flags_refuse_them(args, said, capsys, tmp_path,
                                                                                      monkeypatch):  # fmt: skip
    """`\\d` matches '١' and '１', and int() reads them: `cuda:١` was looked for as cuda:1 ("not present"), `@b１６`
    measured a batch of 16, where `--batch ١٦` and `--threads ٣` are refused "in ASCII digits"."""
    monkeypatch.chdir(tmp_path)
    assert error_line(args, capsys, tmp_path) == said


def test_a_duration_in_other_digits_is_refused():
    """`optimize --budget ١٥m` searched for 15 minutes: the duration's parts were matched with `\\d`."""
    from dlperf.commands.common import duration

    for text, fraction in (("١٥m", "15m"), ("1h３0m", "1h30m")):
        with pytest.raises(UsageError, match=r"in ASCII digits$"):
            duration("--budget", 60.0, most_s=86400.0)(text)
        assert duration("--budget", 60.0, most_s=86400.0)(fraction) > 0
