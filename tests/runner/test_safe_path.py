"""dlperf's children started with `python -m`, which puts the working directory first on sys.path: a user's own
statistics.py there (`dlperf run --workloads statistics:make`) replaced the standard library's for dlperf's own worker
too, and the cell failed "module 'statistics' has no attribute 'median'". Every child starts with `python -P` (no
working directory on sys.path), the warm parent's forks as its cold children, and the working directory is put back
last where a user's `module:function` is found: the user's statistics.py is still the user's, `mymodel:make` from
the working directory still resolves."""

import json
import os
import sqlite3
import statistics
import subprocess
import sys

import pytest

from conftest import FAST, ROOT, require
from dlperf.runner.distributed import python_module
from dlperf.workloads.user import load_factory

MINE = """
def make():
    return "the user's own"
"""


@pytest.fixture
def cwd_off_path(tmp_path, monkeypatch):
    """tmp_path as the working directory, and sys.path as a `python -P` child's: without it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    return tmp_path


def test_every_child_starts_without_the_working_directory_on_its_path():
    assert python_module("/py", "dlperf.worker.cell") == ["/py", "-P", "-m", "dlperf.worker.cell"]


def test_a_users_statistics_py_in_the_working_directory_is_the_users_and_dlperfs_stays_the_standard_librarys(
    cwd_off_path, monkeypatch
):
    (cwd_off_path / "statistics.py").write_text(MINE)
    factory = load_factory("statistics:make")
    assert factory() == "the user's own" and factory.__code__.co_filename == str(cwd_off_path / "statistics.py")
    assert sys.modules["statistics"] is statistics and statistics.median([1, 3]) == 2  # dlperf's own is untouched
    assert sys.path[-1] == str(cwd_off_path)  # put back last, never first


def test_a_module_of_the_working_directory_still_resolves(cwd_off_path, monkeypatch):
    (cwd_off_path / "mymodel_safe_path.py").write_text(MINE)
    monkeypatch.delitem(sys.modules, "mymodel_safe_path", raising=False)
    assert load_factory("mymodel_safe_path:make")() == "the user's own"


FACTORY = """
import torch

import dlperf


def make():
    batch = lambda b, d: (torch.randn(b, 4, device=d), torch.randint(0, 2, (b,), device=d))
    return dlperf.user_workload("{name}", torch.nn.Linear(4, 2), batch, torch.nn.functional.cross_entropy,
                                batch_size=8)
"""


def started(db) -> dict[str, tuple[str, str | None, str]]:
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT c.workload, c.status, c.error, m.detail_json FROM cells c JOIN measurements m "
                        "ON c.run_id = m.run_id AND c.key = m.cell_key").fetchall()  # fmt: skip
    conn.close()
    return {w: (s, e, json.loads(d)["started"]) for w, s, e, d in rows}


@pytest.mark.slow  # two runs, each importing torch in its probe and its cells
@pytest.mark.timeout(600)
def test_a_users_statistics_py_in_the_working_directory_trains_forked_and_cold(tmp_path):
    """The dlperf command, as its console script starts it (no working directory on the path: `-P` here), in a
    folder holding statistics.py and mymodel.py: both cells measured, forked from the warm parent, and cold."""
    require("torch")
    (tmp_path / "statistics.py").write_text(FACTORY.format(name="stat"))
    (tmp_path / "mymodel.py").write_text(FACTORY.format(name="mine"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("DLPERF_NO_WARM", None)
    for db, extra in (("warm.db", {}), ("cold.db", {"DLPERF_NO_WARM": "1"})):
        cmd = [sys.executable, "-P", "-m", "dlperf", "run", "--workloads", "statistics:make,mymodel:make",
               "--threads", "1", "--no-loss-check", *FAST, "--db", str(tmp_path / db)]  # fmt: skip
        done = subprocess.run(cmd, cwd=tmp_path, env={**env, **extra}, capture_output=True, text=True, timeout=500)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        way = "cold" if extra else "warm"
        assert started(tmp_path / db) == {"stat": ("ok", None, way), "mine": ("ok", None, way)}, done.stdout


@pytest.mark.parametrize("package", ["test", "code"])  # the standard library's package, and its module
def test_a_users_package_named_as_the_standard_librarys_still_resolves(cwd_off_path, package):
    """`test.model:make` found the user's test/ first under `python -m`; with the working directory last, `test` is
    the standard library's, which has no `model` ('No module named test.model'): the user's package is imported by
    its folder, under a name of its own, as a user's statistics.py is, its relative imports working."""
    (cwd_off_path / package).mkdir()
    (cwd_off_path / package / "__init__.py").write_text("")
    (cwd_off_path / package / "layers.py").write_text('OWN = "the user\'s own"\n')
    (cwd_off_path / package / "model.py").write_text("from .layers import OWN\n\ndef make():\n    return OWN\n")
    stdlib = __import__(package)
    assert load_factory(f"{package}.model:make")() == "the user's own"
    assert sys.modules[package] is stdlib  # dlperf's own is untouched


def test_a_users_package_named_as_a_standard_module_is_the_users(cwd_off_path):
    """`statistics:make` where statistics/ is the user's package (its __init__.py importing a neighbour)."""
    (cwd_off_path / "statistics").mkdir()
    (cwd_off_path / "statistics" / "own.py").write_text('OWN = "the user\'s own"\n')
    (cwd_off_path / "statistics" / "__init__.py").write_text("from .own import OWN\n\ndef make():\n    return OWN\n")
    assert load_factory("statistics:make")() == "the user's own"
    assert sys.modules["statistics"] is statistics
