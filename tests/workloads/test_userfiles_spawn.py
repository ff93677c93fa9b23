"""A user's file is imported under a name a spawned process can import again (`workloads/userfiles`): a DataLoader
whose workers start by `spawn` or `forkserver` pickles the user's Dataset by its module's name, and each worker
imports that module. The file was imported as `dlperf_user_<hash()>`, which no other process could import ('No
module named dlperf_user_123'), so the cell failed as 'DataLoader worker exited unexpectedly'; fork worked."""

import multiprocessing
import subprocess
import sys

import pytest

from dlperf.workloads import userfiles
from dlperf.workloads.user import load_factory

SOURCE = """
from pathlib import Path


class Points:
    def __len__(self):
        return 3

    def write(self, path):
        Path(path).write_text(f"{len(self)} from {__name__}")


def make():
    return Points()
"""


@pytest.fixture
def saved_path(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_factory puts the user's folder on it


def rebuilt_in(method: str, points, out) -> str:
    """What a child started by `method` wrote from `points`, unpickled there as a DataLoader's worker unpickles a
    Dataset."""
    child = multiprocessing.get_context(method).Process(target=points.write, args=(str(out),))
    child.start()
    child.join(60)
    assert child.exitcode == 0, f"the {method} child could not rebuild the user's object (exit {child.exitcode})"
    return out.read_text()


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_users_file_is_imported_again_by_a_spawned_child(tmp_path, saved_path, method):
    (tmp_path / "my-model.py").write_text(SOURCE)
    points = load_factory(f"{tmp_path / 'my-model.py'}:make")()
    name = type(points).__module__
    assert rebuilt_in(method, points, tmp_path / "out") == f"3 from {name}"
    assert name.startswith("dlperf.workloads.userfiles.my_model_")  # the file's stem, readable in a traceback


def test_a_module_of_the_working_directory_named_as_the_standard_librarys(tmp_path, saved_path, monkeypatch):
    (tmp_path / "statistics.py").write_text(SOURCE)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "model.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    for source in ("statistics:make", "code.model:make"):  # a file, a package's module: both imported by dlperf
        points = load_factory(source)()
        assert rebuilt_in("spawn", points, tmp_path / "out") == f"3 from {type(points).__module__}"


def test_the_name_is_the_same_in_every_process_and_apart_for_files_of_one_name(tmp_path):
    one, other = tmp_path / "a" / "model.py", tmp_path / "b" / "model.py"
    assert userfiles.module_name(one) != userfiles.module_name(other)
    here = userfiles.module_name(one)
    code = f"import pathlib, dlperf.workloads.userfiles as u; print(u.module_name(pathlib.Path({str(one)!r})))"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert there == here  # hash() of a str differs between processes: the old name did


def test_a_name_of_no_file_on_sys_path_is_no_module(tmp_path, saved_path):
    name = userfiles.module_name(tmp_path / "gone.py")
    with pytest.raises(ModuleNotFoundError):
        __import__(name)
