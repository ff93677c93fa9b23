"""The command line: bad input is one line on stderr and exit code 2, and nothing is written."""

import itertools
import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, dlperf, one_line_error
from dlperf.cli import main


def test_importing_the_cli_and_api_loads_no_framework():
    code = (
        "import sys, dlperf, dlperf.cli, dlperf.api, dlperf.report.table, dlperf.store;"
        "dlperf.cli.build_parser().format_help();"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'jax', 'tensorflow', 'mxnet')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(ROOT / "src")}
    )
    assert out.stdout.strip() == "[]"


def test_help_loads_the_standard_library_only():
    """What keeps `dlperf --help` fast (about 0.1 s): building every command's parser imports no rich, numpy,
    scipy or matplotlib, only the standard library and dlperf's own light modules."""
    code = (
        "import sys, dlperf.cli; dlperf.cli.build_parser().format_help();"
        "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names) - {'__main__'}))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "src")})  # fmt: skip
    assert out.stdout.strip() == "['dlperf']"


# `dlperf --help` and every command's, in one process (`main`, as the `dlperf` script runs it); with BAD_FLAGS, the
# one-line errors a user sees most: a bad number, a misspelt command, option or duration
EVERY_HELP = (
    "import io, sys, contextlib; from dlperf.cli import main; from dlperf.commands import NAMES\n"
    "for argv in [['--help'], *([name, '--help'] for name in NAMES), *ERRORS]:\n"
    "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
    "        try: main(argv)\n"
    "        except SystemExit: pass\n"
)
NO_ERRORS = "ERRORS = []\n"
BAD_FLAGS = (
    "ERRORS = [['run', '--threads', 'x'], ['frobnicate'], ['table', '--run', '2x'], ['run', '--thread', '2'],"
    " ['optimize', 'fcn-r', '--budget', '5x'], ['fit', '--max-time', 'x'], ['predict', '--batch', '0']]\n"
)


def test_help_builds_the_parsers_without_the_code_behind_the_commands():
    """`dlperf --help` once took 0.43-0.75 s on a slow machine because building the parser imported `optimize` and
    `comm`, and with them the runner, the store and the API: only the commands and their light vocabulary load.
    Then it loaded 171 modules (45 of dlperf's), 0.11 s of CPU: `spec` for the limits the help quotes and the flags'
    number parsers (and with it `measure.timer`, `measure.stats`, `workloads`, `parallel`, `loaders`), `advise`,
    `predict.gpus`, `predict.cost` and `predict.prices` for defaults; those are in `defaults.py` and the parsers
    in `flagtext.py` now. Every command's --help, and a bad flag's one-line error, loads none of them either."""
    code = BAD_FLAGS + EVERY_HELP + "print(sorted(m for m in sys.modules if m.startswith('dlperf')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "src")})  # fmt: skip
    loaded = eval(out.stdout)
    heavy = ("dlperf.api", "dlperf.optimize", "dlperf.runner", "dlperf.store", "dlperf.report.", "dlperf.protocol",
             "dlperf.spec", "dlperf.advise", "dlperf.predict.", "dlperf.measure.timer", "dlperf.measure.stats",
             "dlperf.workloads", "dlperf.parallel", "dlperf.loaders", "dlperf.crossover", "dlperf.fit")  # fmt: skip
    light = ("dlperf.report.format",)  # an error's message made terminal-safe (`cli.dispatch`)
    assert [m for m in loaded if m.startswith(heavy) and m not in light] == []
    assert "dlperf.commands.advise" in loaded and "dlperf.flagtext" in loaded  # what was asked did run


def test_help_loads_no_module_only_a_command_needs():
    """`dlperf --help` loaded 14 modules more than at 0ef0231: spec.py imported measure.system at its top (ctypes,
    struct, platform, glob), workloads.user the digests of the user's files (hashlib, _hashlib, _blake2); they load
    where a command parses --nproc or reads a user's file. shlex (commands run and table's tops) and measure.units
    (commands run and plot's, advise's, predict.cost's) load where a command quotes a line or words a figure;
    tempfile and pathlib (commands.common's top, and data's, export's and report's: 12 modules of the standard
    library) where a command writes a file or names a path. Every command's --help alike."""
    loaded = (
        "print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('ctypes', 'struct', 'platform', 'glob', 'hashlib', '_hashlib', '_blake2', 'shlex', 'tempfile', 'pathlib')"
        " or m in ('dlperf.measure.system', 'dlperf.workloads.userfiles', 'dlperf.measure.units')))"
    )
    code = NO_ERRORS + EVERY_HELP + loaded
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "src")})  # fmt: skip
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("columns", ["40", "60", "80"])
def test_help_breaks_lines_between_words_only(columns, monkeypatch):
    """`run --help` at 60 columns broke "e.g. fp32,bf16+channels_last" as "fp3" over "2,bf16...", at 40 a path as
    "src/d" over "lperf/...", at 80 "built-" over "in"; and the usage line listed every command, 114 columns. A line
    is as wide as the terminal at most, a token too long for it broken after a ',', '/' or '|'."""
    from dlperf.commands import NAMES, build_parser

    def text(command: list[str], width: str) -> str:
        monkeypatch.setenv("COLUMNS", width)
        parser = build_parser()
        for name in command:
            parser = parser._subparsers._group_actions[0].choices[name]
        return parser.format_help()

    for command in [[], *([name] for name in NAMES)]:
        narrow, wide = text(command, columns), text(command, "10000")
        assert "".join(narrow.split()) == "".join(wide.split()), command
        said, pieces = set(wide.split()), narrow.split()
        for before, word in itertools.pairwise(["", *pieces]):
            # a token longer than the line is broken after a ',', '/' or '|' in it, nowhere else
            assert word in said or word.endswith((",", "/", "|")) or before.endswith((",", "/", "|")), (command, word)
        for line in narrow.splitlines():
            # `predict --help` at 60 columns had a 61-character line, "fp32,bf16,checkpoint,bf16+checkpoint)"; at 40
            # only a name too long for the line with its indent is left longer than the line
            first = line.split()[0] if line.strip() else ""
            alone = int(columns) < 60 and len(line) - len(line.lstrip()) + len(first) > int(columns)
            assert len(line) <= int(columns) or (alone and not set(first[:-1]) & set(",/|")), (command, line)
    monkeypatch.setenv("COLUMNS", columns)
    assert max(len(line) for line in build_parser().format_usage().splitlines()) <= int(columns)


def test_help_runs_without_a_framework():
    proc = dlperf("--help")
    assert proc.returncode == 0 and "run" in proc.stdout


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["run", "--workloads", "resnet50"], ["unknown workload 'resnet50'", "'resnet-50'"]),
        (["run", "--workloads", "fcn-r", "--threads", "1,x"], ["--threads", "'x'"]),
        (["run", "--workloads", "fcn-r", "--threads", "0"], ["--threads"]),
        (["run", "--workloads", "fcn-r", "--threads", "1,,2"], ["--threads"]),
        (
            ["run", "--workloads", "tiny-fcn-r", "--threads", "1,100000"],
            ["--threads 100000: at most 8 per usable core"],
        ),
        (["run", "--workloads", "fcn-r", "--devices", "tpu"], ["unknown device 'tpu'"]),
        (["run", "--workloads", "fcn-r", "--frameworks", "caffe2"], ["unknown framework 'caffe2'"]),
        (["run", "--workloads", "fcn-r", "--modes", "fp8"], ["unknown mode 'fp8'"]),
        (["run", "--workloads", "fcn-r", "--modes", "bf16+fp16"], ["at most one precision"]),
        (["run", "--workloads", "fcn-r", "--repeats", "0"], ["--repeats"]),
        (["run", "--workloads", "fcn-r", "--min-time", "9", "--max-time", "1"], ["--min-time"]),
        (["run", "--workloads", "/no/such/file.py:make"], ["no such file"]),
        (["run", "--bogus-flag"], ["unrecognized arguments"]),
        # flags that would do nothing are refused, not ignored
        (["run", "--workloads", "tiny-fcn-r", "--scaling", "weak"], ["--scaling weak", "--nproc"]),
        (["run", "--workloads", "tiny-fcn-r", "--trace-dir", "t"], ["--trace-dir", "--profile"]),
        (["list", "--frameworks", "--parallel"], ["--parallel", "cannot be given together", "--frameworks"]),
        (["env", "list", "extra"], ["env list takes no names"]),
        (["frobnicate"], ["unknown command 'frobnicate'"]),
    ],
)
def test_bad_input_in_process(args, fragments, capsys, tmp_path):
    code = main([*args, "--db", str(tmp_path / "x.db")] if args[0] == "run" else args)
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and all(f in lines[0] for f in fragments), err
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("command", ["profile", "optimize", "crossover", "fit", "advise", "predict"])
def test_a_misspelt_positional_workload_is_not_blamed_on_a_flag_it_was_not_given(command, capsys, tmp_path):
    """`dlperf predict nope` said "--workloads: unknown workload 'nope'": that command has no --workloads."""
    # predict reads a store only with --cost, and refuses a --db beside anything else
    extra = ["--gpu", "T4"] if command == "predict" else ["--db", str(tmp_path / "x.db")]
    code = main([command, "resnt-50", *extra])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("dlperf: error: unknown workload 'resnt-50'") and "'resnet-50'" in lines[0]
    assert not (tmp_path / "x.db").exists()


def test_views_on_missing_or_corrupt_database(tmp_path):
    one_line_error(dlperf("table", db=tmp_path / "none.db"), "no such database")
    one_line_error(dlperf("table", db=tmp_path), "is a directory, not a database file")  # not "corrupt"
    bad = tmp_path / "bad.db"
    bad.write_text("garbage" * 50)
    one_line_error(dlperf("table", db=bad), "corrupt")
    one_line_error(dlperf("run", "--workloads", "tiny-fcn-r", db=bad), "corrupt")
    # a plan's warnings (here an inherited kernel variable, as some machines set) do not bury the one-line error
    inherited = {"OPENBLAS_CORETYPE": "Haswell"}
    one_line_error(dlperf("run", "--workloads", "tiny-fcn-r", db=bad, env=inherited), "corrupt")
    assert bad.read_text() == "garbage" * 50


def test_unwritable_database(tmp_path):
    one_line_error(dlperf("run", "--workloads", "tiny-fcn-r", db=tmp_path / "no" / "dir" / "x.db"), "does not exist")


def test_export_format_is_checked(tmp_path):
    one_line_error(dlperf("export", "--format", "xml", db=tmp_path / "x.db"), "--format 'xml'")


def test_list_json_has_names_and_params():
    proc = dlperf("list", "--format", "json")
    rows = json.loads(proc.stdout)
    assert {r["name"]: r["params"] for r in rows}["resnet-50"] == 25_557_032
    assert len([r for r in rows if not r["published"]]) == 7  # the paper's seven; the published networks apart


def test_list_says_the_data_column_is_the_published_data_set_and_runs_train_on_random_batches(capsys):
    assert main(["list"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "its data: the data set it was published with" in text
    assert "one random batch of that input's shape" in text and "--data DIR" in text


@pytest.mark.parametrize("what", [[], ["--frameworks"], ["--parallel"]])
def test_list_fits_the_terminal_with_a_gap_between_columns(what, capsys, monkeypatch):
    """At 40 columns the lists printed rows of 78 to 163 characters, and `list`'s "its data" ran into its input
    ("Penn Treebank32"): a table of columns now, wrapped between words; in a pipe one row a line, no space after it."""
    monkeypatch.setenv("COLUMNS", "40")
    assert main(["list", *what]) == 0
    text = capsys.readouterr().out
    longest = max(map(len, text.split()))  # a path, a dotted name: never folded, so its column is as wide
    assert max(len(line.rstrip()) for line in text.splitlines()) <= max(40, longest + 16), text
    monkeypatch.delenv("COLUMNS")
    assert main(["list", *what]) == 0
    text = capsys.readouterr().out
    rows = [re.split(" {2,}", line.strip()) for line in text.splitlines()]
    assert what or ["lstm", "128", "Penn Treebank", "32", "10000", "6,182,672"] in rows
    # a row longer than the log's 160 columns is one line in a pipe too: horovod's reason was three
    first, last = {
        "--frameworks": ("horovod ", "then farmhash)"),
        "--parallel": ("each rank", "gradients reduce-scattered"),
    }.get(what[0] if what else "", ("lstm ", "6,182,672"))
    assert any(line.strip().startswith(first) and line.endswith(last) for line in text.splitlines()), text
    assert not [line for line in text.splitlines() if line.endswith(" ")]  # `| grep 'fp32$'` found no row


def test_list_says_how_many_tiny_variants_it_leaves_out_and_the_flag_that_shows_them(capsys):
    from dlperf.workloads import BUILTIN

    tiny = [name for name, w in BUILTIN.items() if w.hidden]
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert not any(f"{name} " in text for name in tiny)
    assert f"{len(tiny)} tiny test variants (tiny-*" in text and "dlperf list --all" in text.splitlines()[-1]
    assert main(["list", "--all"]) == 0
    text = capsys.readouterr().out
    assert all(f"{name} " in text for name in tiny) and "--all" not in text
    with pytest.raises(SystemExit):
        main(["list", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--all also the tiny test variants (tiny-*" in help_text and "left out without it" in help_text


def test_worker_and_probe_need_nothing_but_the_standard_library():
    """A worker runs in an environment holding only its framework: without site-packages, dlperf's worker side
    still imports (no rich, numpy or framework at import time)."""
    code = (
        "import sys; import dlperf.worker.cell, dlperf.worker.probe, dlperf.envinfo;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'numpy', 'torch', 'scipy'}))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "src")},
    )
    assert out.stdout.strip() == "[]"


def test_list_frameworks_names_every_tool_of_the_paper_and_why_not():
    proc = dlperf("list", "--frameworks", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert {name for name, r in rows.items() if r["paper"]} == {"caffe", "cntk", "tensorflow", "torch7", "mxnet"}
    assert not any(rows[name]["available"] for name in ("caffe", "cntk", "torch7"))
    assert "no release installs" in rows["caffe"]["reason"] and "no release installs" in rows["cntk"]["reason"]
    assert "Lua" in rows["torch7"]["reason"]
    assert rows["torch"]["available"] and rows["torch"]["environment"] == "current"
    text = dlperf("list", "--frameworks").stdout
    assert "caffe" in text and "why not" in text and "(current environment)" in text


def test_list_frameworks_says_the_modes_each_backend_runs():
    """From each backend's row of capabilities: a user comparing frameworks in bf16 learns which can run it."""
    rows = {r["name"]: r for r in json.loads(dlperf("list", "--frameworks", "--format", "json").stdout)}
    assert rows["jax"]["modes"] == ["fp32", "bf16", "malloc_keep", "tcmalloc", "jemalloc"]
    assert rows["tensorflow"]["modes"][:3] == ["fp32", "bf16", "compile"] and rows["caffe"]["modes"] is None
    assert {"cuda_graphs", "fused", "tf32"} <= set(rows["torch"]["modes"])
    text = dlperf("list", "--frameworks", env={"COLUMNS": ""}).stdout  # a pipe: pytest-xdist's workers set COLUMNS
    assert "each also the allocator's: malloc_keep, tcmalloc, jemalloc):\n" in text
    rows = [line.split() for line in text.splitlines()]
    assert ["jax", "fp32,", "bf16"] in rows and ["mxnet", "fp32"] in rows


# Every numeric flag of every command, found in the parsers themselves: a new flag cannot escape these tests.
POSITIONALS = {"optimize": ["tiny-fcn-r"], "compare": ["1", "2"], "plot": ["scaling", "-o", "x.png"], "merge": ["a"]}
NOT_A_NUMBER = ["nan", "inf", "-inf", "1e400", "٣", "３", "1_0"]  # int() or float() takes each but the last three
BAD_NUMBERS = {
    "whole": [*NOT_A_NUMBER, "9223372036854775808", "1.5"],  # one past SQLite's largest integer
    "whole list": [*NOT_A_NUMBER, "9223372036854775808", "2,nan", "2,٣"],
    "real": NOT_A_NUMBER,
}


def commands() -> dict:
    from argparse import _SubParsersAction

    from dlperf.cli import build_parser

    [sub] = [a for a in build_parser()._actions if isinstance(a, _SubParsersAction)]
    return sub.choices


def numeric_flags() -> list[tuple[str, str, str]]:
    return [
        (name, action.option_strings[-1], action.type.number)
        for name, parser in commands().items()
        for action in parser._actions
        if getattr(action.type, "number", None)
    ]


def test_every_numeric_flag_has_a_validated_type():
    """No bare int or float (they take nan, inf, '٣' and 1_000), and every flag with a number for default is typed."""
    for name, parser in commands().items():
        for action in parser._actions:
            where = f"dlperf {name} {'/'.join(action.option_strings) or action.dest}"
            assert action.type not in (int, float), where
            numeric_default = isinstance(action.default, int | float) and not isinstance(action.default, bool)
            assert not numeric_default or getattr(action.type, "number", None), where
    assert len(numeric_flags()) >= 35


@pytest.mark.parametrize(("command", "flag", "kind"), numeric_flags())
def test_a_bad_number_is_one_line_naming_the_flag(command, flag, kind):
    from dlperf.cli import build_parser
    from dlperf.errors import UsageError

    parser = build_parser()
    for bad in BAD_NUMBERS[kind]:
        with pytest.raises(UsageError) as caught:
            parser.parse_args([command, *POSITIONALS.get(command, []), f"{flag}={bad}"])
        message = str(caught.value)
        assert message.startswith(flag) and "\n" not in message, (bad, message)


def test_a_nan_timeout_stops_before_anything_runs(capsys, tmp_path):
    """`--timeout nan` once disabled the timeout: every comparison with nan is false."""
    assert main(["run", "--workloads", "tiny-fcn-r", "--timeout", "nan", "--db", str(tmp_path / "x.db")]) == 2
    assert capsys.readouterr().err.strip() == "dlperf: error: --timeout 'nan': expected a number of seconds above 0"
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("ref", ["²", "٣", "x.db:٣"])
def test_compare_reads_a_ref_in_other_digits_as_a_file_name(ref, tmp_path):
    from dlperf.report.compare_side import parse_ref

    assert parse_ref(ref, str(tmp_path / "x.db"), "B") == (ref, None)  # a file name, not run 2 or 3


@pytest.mark.parametrize(("ref", "run_id"), [("3", 3), ("x.db:12", 12), ("9223372036854775807", 2**63 - 1)])
def test_compare_takes_run_ids_in_ascii_digits(ref, run_id, tmp_path):
    from dlperf.report.compare_side import parse_ref

    default = str(tmp_path / "x.db")
    assert parse_ref(ref, default, "B") == ("x.db" if ":" in ref else default, run_id)


def test_compare_refuses_a_run_id_beyond_sqlites_integers(tmp_path):
    from dlperf.errors import UsageError
    from dlperf.report.compare_side import parse_ref

    too_large = str(2**63)
    with pytest.raises(UsageError, match=rf"^B '{too_large}': expected a whole number at most {2**63 - 1} "):
        parse_ref(too_large, str(tmp_path / "x.db"), "B")


def test_a_cell_without_a_sample_fails_the_run(tmp_path):
    """Exit 0 means every cell measured (README): a cell that took no timed step is failed, and the run exits 1.
    --max-time 0 is refused: a nanosecond is over before the first step starts."""
    proc = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", "--no-loss-check", "--max-warmup", "0",
                  "--min-time", "0", "--max-time", "1e-9", db=tmp_path / "x.db", timeout=120)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "failed: no timed step" in proc.stderr


def test_an_error_quoting_hostile_input_reaches_the_terminal_escaped(monkeypatch, capsys):
    # issue 15: a workload name, or a model's own error, with an escape sequence was printed raw
    from dlperf.commands import list as list_command
    from dlperf.errors import UsageError

    def run(args):
        raise UsageError("the model said \x1b]0;pwned\x07 and \x1b[2J")

    monkeypatch.setattr(list_command, "run", run)
    assert main(["list"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b]0;pwned\\x07" in err and err.count("\n") == 1


def test_env_show_counts_the_cpus_flags_only_where_they_are(capsys):
    """The CPU's flag list is shown as its count; a nested `cpu` (the precision speeds) gained a `flags` line."""
    from dlperf.commands.env import print_env

    print_env({"cpu": {"model": "X", "flags": ["avx2", "fma"]}, "precision_speed": {"cpu": {"bf16": 4.6}}})
    out = capsys.readouterr().out.splitlines()
    assert "  flags: 2 flags (see --format json)" in out
    assert out[-2:] == ["  cpu:", "    bf16: 4.6"]
    assert (
        out[-3]
        == "precision_speed (a matrix product's speed in each dtype against fp32's, per device; 2 is twice as fast):"
    )


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["optimize", "tiny-fcn-r,tiny-lstm"], ["workload 'tiny-fcn-r,tiny-lstm': give one"]),  # was a traceback
        (["profile", ""], ["workload '': give one"]),
        (["optimize", "tiny-fcn-r", "--device", "tpu"], ["--device: unknown device 'tpu'"]),  # not --devices
        (["profile", "tiny-fcn-r", "--framework", "tensorfow"], ["--framework: unknown framework"]),
        (["run", "--workloads", "tiny-fcn-r", "--frameworks", "tensorfow"], ["--frameworks: unknown framework"]),
    ],
)
def test_a_command_of_one_workload_and_its_singular_flags_are_named_as_typed(args, fragments, capsys, tmp_path):
    code = main([*args, "--db", str(tmp_path / "x.db")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and all(f in lines[0] for f in fragments), lines


@pytest.mark.parametrize("command", ["predict", "advise"])
def test_samples_take_a_count_as_dlperf_prints_it(command):
    """`predict --cost` prints the work as 1,281,167 samples; the same text given back to --samples is that count, while
    a comma that is not a thousands separator is still refused in one line."""
    from dlperf.cli import build_parser
    from dlperf.errors import UsageError

    parser = build_parser()
    for text, count in (("1,281,167", 1_281_167), ("1,000", 1000), ("640", 640)):
        assert parser.parse_args([command, "tiny-fcn-r", "--samples", text]).samples == count
    for bad in ("1,00", "1,0000", ",100", "1,000,", "-1,000", "1_000", "0,001", "001,000"):
        with pytest.raises(UsageError) as caught:
            parser.parse_args([command, "tiny-fcn-r", f"--samples={bad}"])
        assert str(caught.value).startswith(f"--samples {bad!r}"), bad  # what was typed, not its digits
    with pytest.raises(UsageError) as caught:
        parser.parse_args([command, "tiny-fcn-r", "--samples=1,000,000,000,000,000,000,000"])
    assert str(caught.value).startswith("--samples '1,000,000,000,000,000,000,000': expected")
