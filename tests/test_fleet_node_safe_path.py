"""A Ray node's sweep started `python -m dlperf run` in the actor's working directory, which `-m` puts first on
sys.path: a user's statistics.py there replaced the standard library's for that dlperf itself, and the node's run
failed 'module 'statistics' has no attribute 'median'' as a worker's had (e71d3a3). It starts with `python -P`, as
every child of dlperf's does; a user's `module:function` still finds the working directory (`workloads/user.py`)."""

import sqlite3
from pathlib import Path

import pytest

from conftest import FAST, require
from dlperf.fleet_node import NodeSweep


@pytest.mark.slow  # one dlperf run: its probe and one cell import torch
@pytest.mark.timeout(300)
def test_a_nodes_sweep_in_a_folder_holding_a_users_statistics_py_measures(tmp_path, monkeypatch):
    require("torch")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "statistics.py").write_text("def make():\n    return None\n")
    sweep = NodeSweep()
    try:
        sweep.start(["run", "--workloads", "tiny-fcn-r", "--threads", "1", "--no-loss-check", "--no-predict", *FAST])
        assert sweep.proc is not None and sweep.proc.wait(280) == 0, Path(sweep.dir, "err").read_text()[-2000:]
        conn = sqlite3.connect(sweep.db)
        assert conn.execute("SELECT status, error FROM cells").fetchall() == [("ok", None)]
        conn.close()
    finally:
        sweep.close()
