"""benchmarks/cell_cost.py: each source tree's runs keep the probe's answer in a data directory of their own, so two
trees alternated do not write over each other's entry (every run after a switch probed again), and a tree's bytecode
is written before it is measured."""

import os
from pathlib import Path

from conftest import benchmark


def asked(monkeypatch) -> list[dict]:
    """The environments the script's `dlperf run`s were started with, none of them started."""
    cell_cost, envs = benchmark("cell_cost"), []

    class Done:
        returncode = 0

    def run(cmd, env, **kwargs):
        envs.append(env)
        return Done()

    monkeypatch.setattr(cell_cost.subprocess, "run", run)
    return envs


def test_each_source_tree_runs_in_a_data_directory_of_its_own(monkeypatch, tmp_path):
    cell_cost, envs = benchmark("cell_cost"), asked(monkeypatch)
    old, new = tmp_path / "old" / "src", tmp_path / "new" / "src"
    for src in (old, new, old):
        cell_cost.dlperf_run(src, tmp_path / "x.db", ["--workloads", "tiny-fcn-r"], cold=True)
    dirs = [env["DLPERF_DATA_DIR"] for env in envs]
    assert dirs[0] == dirs[2] != dirs[1], dirs
    assert os.environ.get("DLPERF_DATA_DIR") not in dirs
    assert [env["PYTHONPATH"] for env in envs] == [str(old), str(new), str(old)]


def test_a_tree_is_compiled_and_primed_before_it_is_measured(monkeypatch, tmp_path):
    cell_cost, envs = benchmark("cell_cost"), asked(monkeypatch)
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    cell_cost.prepare(src)
    assert list(Path(src / "pkg" / "__pycache__").glob("mod.*.pyc"))
    assert len(envs) == 1 and envs[0]["DLPERF_DATA_DIR"] == str(cell_cost.data_dir(src))
