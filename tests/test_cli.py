"""The command line: bad input is one line on stderr and exit code 2, and nothing is written."""

import json
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


def test_help_builds_the_parsers_without_the_code_behind_the_commands():
    """`dlperf --help` once took 0.43-0.75 s on a slow machine because building the parser imported `optimize` and
    `comm`, and with them the runner, the store and the API: only the commands and their light vocabulary load."""
    code = (
        "import sys, dlperf.cli; dlperf.cli.build_parser().format_help();"
        "print(sorted(m for m in sys.modules if m.startswith('dlperf')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "src")})  # fmt: skip
    loaded = eval(out.stdout)
    heavy = ("dlperf.api", "dlperf.optimize", "dlperf.runner", "dlperf.store", "dlperf.report", "dlperf.protocol")
    assert [m for m in loaded if m.startswith(heavy)] == []


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
        (["run", "--workloads", "fcn-r", "--devices", "tpu"], ["unknown device 'tpu'"]),
        (["run", "--workloads", "fcn-r", "--frameworks", "caffe2"], ["unknown framework 'caffe2'"]),
        (["run", "--workloads", "fcn-r", "--modes", "fp8"], ["unknown mode 'fp8'"]),
        (["run", "--workloads", "fcn-r", "--modes", "bf16+fp16"], ["at most one precision"]),
        (["run", "--workloads", "fcn-r", "--repeats", "0"], ["--repeats"]),
        (["run", "--workloads", "fcn-r", "--min-time", "9", "--max-time", "1"], ["--min-time"]),
        (["run", "--workloads", "/no/such/file.py:make"], ["no such file"]),
        (["run", "--bogus-flag"], ["unrecognized arguments"]),
        (["frobnicate"], ["invalid choice"]),
    ],
)
def test_bad_input_in_process(args, fragments, capsys, tmp_path):
    code = main([*args, "--db", str(tmp_path / "x.db")] if args[0] == "run" else args)
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and all(f in lines[0] for f in fragments), err
    assert not (tmp_path / "x.db").exists()


def test_views_on_missing_or_corrupt_database(tmp_path):
    one_line_error(dlperf("table", db=tmp_path / "none.db"), "no such database")
    bad = tmp_path / "bad.db"
    bad.write_text("garbage" * 50)
    one_line_error(dlperf("table", db=bad), "corrupt")
    one_line_error(dlperf("run", "--workloads", "tiny-fcn-r", db=bad), "corrupt")
    assert bad.read_text() == "garbage" * 50


def test_unwritable_database(tmp_path):
    one_line_error(dlperf("run", "--workloads", "tiny-fcn-r", db=tmp_path / "no" / "dir" / "x.db"), "does not exist")


def test_export_format_is_checked(tmp_path):
    one_line_error(dlperf("export", "--format", "xml", db=tmp_path / "x.db"), "--format 'xml'")


def test_list_json_has_names_and_params():
    proc = dlperf("list", "--format", "json")
    rows = json.loads(proc.stdout)
    assert {r["name"]: r["params"] for r in rows}["resnet-50"] == 25_557_032
    assert len(rows) == 7


def test_worker_and_probe_need_nothing_but_the_standard_library():
    """A worker runs in an environment holding only its framework: without site-packages, dlperf's worker side
    still imports (no rich, numpy or framework at import time)."""
    code = (
        "import sys; import dlperf.runner.worker, dlperf.runner.probe, dlperf.envinfo;"
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
