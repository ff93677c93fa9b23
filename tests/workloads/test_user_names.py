"""Naming a user's factory (issue 31): a misspelt factory gets a "did you mean" among the file's own factories, and a
file named without its factory says the `file.py:factory` form and lists them."""

from __future__ import annotations

import pytest

from conftest import dlperf, one_line_error
from dlperf.errors import UsageError
from dlperf.spec import parse_workloads
from dlperf.workloads.user import load_factory

MODELS = """
import os
from os.path import join


def resnet18():
    return None


def resnet50(width=64):
    return None


def transformer(data_dir=None):
    return None


def make_batch(batch, device):  # takes arguments: no factory
    return None


def _private():
    return None


class Net:
    pass
"""


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "mymodels.py"
    path.write_text(MODELS)
    return path


def test_a_misspelt_factory_suggests_the_files_own_factories(models):
    with pytest.raises(UsageError, match=r"has no factory 'resnt18' \(did you mean 'resnet18' or 'resnet50'\?; its "
                                         r"factories: resnet18, resnet50, transformer\)"):  # fmt: skip
        load_factory(f"{models}:resnt18")
    with pytest.raises(UsageError, match=r"has no factory 'zzz' \(its factories: resnet18, resnet50, transformer\)"):
        load_factory(f"{models}:zzz")
    assert load_factory(f"{models}:resnet50")() is None


def test_a_file_named_without_its_factory_says_the_form_and_lists_them(models, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for named in (str(models), "mymodels.py"):
        with pytest.raises(UsageError) as caught:
            parse_workloads(named)
        said = str(caught.value)
        assert f"--workloads {named!r}: name the factory in the file, as {named}:FACTORY" in said
        assert said.endswith("(its factories: resnet18, resnet50, transformer)") and "\n" not in said
    with pytest.raises(UsageError, match=r"'nothere.py': no such file"):
        parse_workloads("nothere.py")
    with pytest.raises(UsageError, match=r"unknown workload 'mypkg.models'.*path/to/file.py:factory"):
        parse_workloads("mypkg.models")


def test_the_command_line_says_both_in_one_line(models):
    one_line_error(dlperf("run", "--workloads", str(models)), f"{models}:FACTORY", "resnet18, resnet50, transformer")
    one_line_error(dlperf("predict", str(models), "--gpu", "T4"), f"{models}:FACTORY", "resnet18, resnet50")
    one_line_error(dlperf("predict", "resnt-50", "--gpu", "T4"), "did you mean 'resnet-50'")
    one_line_error(dlperf("run", "--workloads", f"{models}:resnt18", "--dry-run"), "did you mean 'resnet18'")


def test_a_name_bound_to_a_built_workload_says_to_name_a_function_that_returns_it(tmp_path):
    """`WORKLOAD = dlperf.user_workload(...)` at a file's top level, named as `file.py:WORKLOAD`: "is not callable"."""
    path = tmp_path / "objs.py"
    built = "dlperf.user_workload('w', object(), None, len, batch_size=4, loader=len)"
    path.write_text(f"import dlperf\n\nWORKLOAD = {built}\nSIZE = 4\n")
    said = r"WORKLOAD is not callable \(a workload built at import\): name a function that returns dlperf.user_workl"
    with pytest.raises(UsageError, match=said + r"oad\(...\), def make\(\): return ...$"):
        load_factory(f"{path}:WORKLOAD")
    with pytest.raises(UsageError, match=r"SIZE is not callable: name a function"):
        load_factory(f"{path}:SIZE")
