"""Whose function a `module:function` workload names is told by where its module was imported from, not by its
name: a user's own statistics.py or random.py (on sys.path) was refused as the standard library's ('make is
statistics.make, statistics's own, not yours'); and a function of an installed package that never uses dlperf
(`rich:print`, `torch:get_default_device`) was called inside the probe, what it does done there, before 'the factory
must return dlperf.user_workload(...), got NoneType'. It is refused in one line before it runs; a package of the
user's installed beside the others, which imports dlperf, is not."""

import sys

import pytest

from dlperf.errors import UsageError
from dlperf.workloads.user import build_user_workload, load_factory

MINE = """
def make():
    return "the user's own"
"""


@pytest.mark.parametrize("name", ["random", "statistics"])
def test_a_users_module_named_as_a_standard_library_module_is_the_users(tmp_path, monkeypatch, name):
    (tmp_path / f"{name}.py").write_text(MINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)  # as in a child that had not imported it yet
    factory = load_factory(f"{name}:make")
    assert factory() == "the user's own" and factory.__code__.co_filename == str(tmp_path / f"{name}.py")


def test_the_standard_librarys_own_module_is_still_refused_and_said_to_shadow_the_users(tmp_path, monkeypatch):
    (tmp_path / "random.py").write_text(MINE)
    monkeypatch.syspath_prepend(str(tmp_path))  # random is imported already: the standard library's is the one
    with pytest.raises(UsageError) as caught:
        load_factory("random:make")
    said = str(caught.value)
    assert "random has no factory 'make' (random is the standard library's module, at " in said
    assert said.endswith("name your file instead, path/to/random.py:make)") and "\n" not in said
    with pytest.raises(UsageError, match=r"shuffle is random\.Random\.shuffle, random's own, not yours"):
        load_factory("random:shuffle")


PACKAGES = {
    "acme_tools": "def hello():\n    print('ran')\n",  # what an installed package's function does, done in the probe
    "acme_models": "import dlperf\n\ndef make():\n    return 'built'\n",
    "acme_late": "def make():\n    from dlperf import user_workload\n    return 'built'\n",
}


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Packages installed in a site-packages folder: one that never uses dlperf, two that do."""
    site = tmp_path / "lib" / "site-packages"
    for name, code in PACKAGES.items():
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(code)
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(site))


def test_an_installed_packages_function_that_never_uses_dlperf_is_refused_before_it_runs(installed, capsys):
    with pytest.raises(UsageError) as caught:
        build_user_workload("acme_tools:hello")
    said = str(caught.value)
    assert "hello is acme_tools.hello, of the installed package acme_tools, which never uses dlperf" in said
    assert "returns dlperf.user_workload(...)" in said and "\n" not in said
    assert "ran" not in capsys.readouterr().out


def test_rich_print_is_refused_before_it_prints():
    pytest.importorskip("rich")
    with pytest.raises(UsageError, match="of the installed package rich, which never uses dlperf"):
        load_factory("rich:print")


def test_an_installed_package_of_the_users_that_uses_dlperf_is_loaded(installed):
    assert load_factory("acme_models:make")() == "built"
    assert load_factory("acme_late:make")() == "built"
