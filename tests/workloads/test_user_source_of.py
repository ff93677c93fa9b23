"""How the Python API names a factory function for dlperf's own processes, which start afresh: a notebook that
imported it after `sys.path.insert(0, "examples")` gave 'my_model:make', which no child could import ('No module
named my_model'); a module found only through such a folder is named by its file. A module a new process finds
keeps its name, and a module of the user's that no process finds is said to be looked for where it is not."""

import importlib
import sys

import pytest

from dlperf.errors import UsageError
from dlperf.workloads.user import load_factory, source_of

MINE = "def make():\n    return 'built'\n"


def imported(folder, name: str, monkeypatch):
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module(name)


def test_a_module_found_through_a_folder_added_at_run_time_is_named_by_its_file(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "qa_notebook_model.py").write_text(MINE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    module = imported(tmp_path / "models", "qa_notebook_model", monkeypatch)
    source = source_of(module.make)
    assert source == f"{(tmp_path / 'models' / 'qa_notebook_model.py').resolve()}:make"
    assert load_factory(source)() == "built"


@pytest.mark.parametrize("where", ["cwd", "PYTHONPATH"])
def test_a_module_a_new_process_finds_keeps_its_name(tmp_path, monkeypatch, where):
    (tmp_path / "qa_found_model.py").write_text(MINE)
    monkeypatch.chdir(tmp_path if where == "cwd" else tmp_path.parent)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) if where == "PYTHONPATH" else "")
    module = imported(tmp_path, "qa_found_model", monkeypatch)
    assert source_of(module.make) == "qa_found_model:make"


def test_a_package_module_keeps_its_name_for_its_relative_imports(tmp_path, monkeypatch):
    (tmp_path / "qa_pkg").mkdir()
    (tmp_path / "qa_pkg" / "__init__.py").write_text("")
    (tmp_path / "qa_pkg" / "net.py").write_text("from . import parts\n" + MINE)
    (tmp_path / "qa_pkg" / "parts.py").write_text("")
    monkeypatch.chdir(tmp_path.parent)
    monkeypatch.delitem(sys.modules, "qa_pkg", raising=False)
    module = imported(tmp_path, "qa_pkg.net", monkeypatch)
    assert source_of(module.make) == "qa_pkg.net:make"


def test_a_module_of_the_users_not_found_says_where_dlperfs_processes_look(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as caught:
        load_factory("qa_nowhere.models:make")
    said = str(caught.value)
    assert "No module named 'qa_nowhere'" in said and f"look in the working directory {tmp_path}" in said
    assert "\n" not in said
    with pytest.raises(UsageError) as caught:  # a module the user's own imports and lacks: not where dlperf looks
        (tmp_path / "qa_needs.py").write_text("import qa_missing_dependency\n" + MINE)
        load_factory("qa_needs:make")
    assert "qa_missing_dependency" in str(caught.value) and "look in the working" not in str(caught.value)


@pytest.mark.parametrize("framework", ["keras", "flax.linen", "jax"])
def test_a_model_file_of_another_framework_says_own_models_are_pytorch_models(tmp_path, framework):
    """A Keras or Flax model's file, imported in dlperf's environment (which has neither), said "No module named
    'keras'": the user installed it there, to learn then that the model must be a torch.nn.Module."""
    raised = f"raise ModuleNotFoundError(\"No module named '{framework}'\", name='{framework}')\n"  # as if absent
    (tmp_path / "qa_keras_model.py").write_text(raised + MINE)
    with pytest.raises(UsageError) as caught:
        load_factory(f"{tmp_path / 'qa_keras_model.py'}:make")
    said = str(caught.value)
    assert f"No module named '{framework}'" in said and "your own models are PyTorch models (a torch.nn.Module)" in said


def test_a_lambda_bound_to_a_module_level_name_is_named_by_it(tmp_path, monkeypatch):
    """`make = lambda: ...` was refused as no module-level factory ('<lambda>' is no name to import); the one name
    the module binds it to is. A lambda bound to no name, or a nested function, is refused saying why."""
    nested = "def outer():\n    def inner():\n        return 1\n    return inner\n"
    lambdas = "make = lambda: 'built'\nalias = make\nmine = lambda: 'mine'\n"
    (tmp_path / "qa_lambda_model.py").write_text(lambdas + nested)
    monkeypatch.chdir(tmp_path)
    module = imported(tmp_path, "qa_lambda_model", monkeypatch)
    assert source_of(module.mine) == "qa_lambda_model:mine"
    assert load_factory(source_of(module.mine))() == "mine"
    for unnamed in (module.make, module.outer(), lambda: 1):  # two names; a nested function; bound to none
        with pytest.raises(UsageError, match="has no name a new process can import"):
            source_of(unnamed)
