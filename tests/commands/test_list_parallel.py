"""`dlperf list --parallel`: every strategy of `--parallel` and Horovod, what each rank holds, measurable here or why
not, without importing a framework; and `dlperf env install horovod` as a one-line refusal."""

import json
import re
import subprocess
import sys

from conftest import ROOT, dlperf, one_line_error
from dlperf import envs
from dlperf.commands.list import strategy_rows
from dlperf.parallel import STRATEGIES


def test_list_parallel_json_has_every_strategy_and_horovod_with_its_reason():
    proc = dlperf("list", "--parallel", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert list(rows) == [*map(str, STRATEGIES), "horovod"]
    for p, s in STRATEGIES.items():
        row = rows[str(p)]
        assert (row["frameworks"], row["engine"], row["splits"]) == ([s.framework], s.engine, s.splits)
        assert row["scalings"] == list(s.scalings) and row["pipeline"] == s.pipeline
    assert rows["gpipe"]["pipeline"] and not rows["ddp"]["pipeline"] and not rows["mirrored"]["processes"]
    assert rows["ddp"]["measurable"] and "gloo" in rows["ddp"]["needs"]  # torch is this test's own
    horovod = rows["horovod"]
    assert not horovod["measurable"] and envs.UNINSTALLABLE["horovod"] in horovod["reason"]
    assert "C++17" in horovod["reason"]


def test_list_parallel_text_names_each_strategy_what_a_rank_holds_and_why_not():
    proc = dlperf("list", "--parallel", env={"COLUMNS": ""})  # a pipe (pytest-xdist's workers set COLUMNS=80)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    heads = [line.split(" (")[0] for line in lines if not line.startswith(" ")]
    assert heads == [*map(str, STRATEGIES), "horovod"]
    assert "  each rank     a 1/N shard of the parameters" in proc.stdout
    assert "  each replica  the whole model on each replica" in proc.stdout
    assert "gpipe (torch; --scaling strong; --microbatches)" in lines
    assert f"  here          no: {envs.UNINSTALLABLE['horovod']}" in lines


def test_list_parallel_starts_every_strategys_values_at_one_column(monkeypatch, capsys):
    """Each strategy was a table of its own, its values starting where its own labels ended: "each rank" strategies'
    at column 13, "each replica" ones' at 16."""
    from dlperf.cli import main

    for columns in ("60", "100"):
        monkeypatch.setenv("COLUMNS", columns)
        assert main(["list", "--parallel"]) == 0
        labelled = [line for line in capsys.readouterr().out.splitlines() if re.match(r"  (engine|each|here) ", line)]
        starts = {len(re.match(r"  \S+( \S+)? +", line)[0]) for line in labelled}
        assert starts == {len("  each replica  ")}, (columns, starts)


def test_a_strategy_whose_framework_has_no_environment_says_how_to_get_one(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path))  # no dedicated environment there
    if envs.importable_here("tensorflow"):
        monkeypatch.setattr(envs, "importable_here", lambda name: name == "torch")
    rows = {r.name: r for r in strategy_rows()}
    assert not rows["mirrored"].measurable
    assert rows["mirrored"].reason == "tensorflow: not installed: run `dlperf env install tensorflow`"
    assert rows["fsdp"].measurable and rows["fsdp"].reason is None


def test_list_parallel_loads_no_framework():
    code = (
        "import sys; from dlperf.cli import main; main(['list', '--parallel', '--format', 'json']);"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'jax', 'tensorflow', 'mxnet', 'horovod')),"
        " file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "src")})  # fmt: skip
    assert json.loads(out.stdout) and out.stderr.strip() == "[]"


def test_env_install_horovod_is_one_line_with_the_reason_and_installs_nothing(tmp_path):
    proc = dlperf("env", "install", "horovod", env={"DLPERF_DATA_DIR": str(tmp_path)})
    one_line_error(proc, "dlperf env install horovod: horovod cannot be installed", envs.UNINSTALLABLE["horovod"])
    assert not (tmp_path / "envs").exists()


def test_list_frameworks_names_horovod_and_why_not():
    rows = {r["name"]: r for r in json.loads(dlperf("list", "--frameworks", "--format", "json").stdout)}
    assert not rows["horovod"]["available"] and not rows["horovod"]["paper"]
    assert rows["horovod"]["reason"] == envs.UNINSTALLABLE["horovod"]


def test_a_listed_library_or_a_pipeline_given_as_run_names_it_says_why_not_in_its_own_words():
    """`--parallel horovod` got the generic 'expected one of pipeline, ddp, ...', though `list --parallel` lists it
    with why it cannot run; `--parallel pipeline --scaling weak` was refused as `--parallel gpipe`, a name not typed."""
    import pytest

    from dlperf.api import make_spec
    from dlperf.errors import UsageError

    with pytest.raises(UsageError) as caught:
        make_spec("tiny-fcn-r", nprocs="2", parallel="horovod")
    assert str(caught.value) == (f"--parallel horovod: dlperf lists it (`dlperf list --parallel`) but cannot measure "
                                 f"it: {envs.UNINSTALLABLE['horovod']}")  # fmt: skip
    with pytest.raises(UsageError, match=r"^--parallel pipeline \(gpipe, 1f1b\) --scaling weak: "):
        make_spec("tiny-fcn-r", nprocs="2", parallel="pipeline", scaling="weak")
