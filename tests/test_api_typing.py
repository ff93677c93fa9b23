"""What a type checker and a path object get from the Python API: `dlperf.run`, `dlperf.results` and the other lazy
names read as `Any` to a type checker (the package serves them through a module `__getattr__`), and `db=` was typed
`str` though the reference says a `pathlib.Path` works; a path object whose `str()` is not its path (it need only
have `__fspath__`) named a store called `<...object at 0x...>`."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import dlperf
from dlperf import api, stored
from dlperf.errors import UsageError


def test_a_type_checker_sees_every_public_name_that_is_served_lazily():
    """Each name of `__all__` but `__version__` was `Any` to mypy and pyright: none was imported where they look."""
    tree = ast.parse(Path(dlperf.__file__).read_text())
    checked = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    imported = {alias.asname or alias.name for node in checked.body for alias in node.names}
    assert imported == set(dlperf.__all__) - {"__version__"}


def test_the_names_a_type_checker_reads_are_not_imported_at_run_time():
    code = "import sys, dlperf; print(sorted(m for m in sys.modules if m.startswith('dlperf.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['dlperf.version']"


@pytest.mark.parametrize("function", [api.run, api.resume, stored.results])
def test_db_is_typed_as_a_path_object_too(function):
    assert inspect.signature(function).parameters["db"].annotation == "str | os.PathLike[str] | None"


class Where:
    """A path object as `os.fspath` takes it: `__fspath__` alone, no `__str__` of its own."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return str(self.path)


@pytest.mark.parametrize("kind", [Path, Where])
def test_a_path_object_names_its_store(kind, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "missing.db"
    with pytest.raises(UsageError, match=f"^db={str(missing)!r}: no such database"):
        dlperf.results(db=kind(missing))
    with pytest.raises(UsageError, match=f"{missing}"):
        dlperf.resume(db=kind(missing))
    monkeypatch.setattr(api, "for_plan", lambda *args: None)  # no pilot step: the path is what is looked at
    assert dlperf.run("tiny-fcn-r", threads=1, dry_run=True, db=kind(missing)).exit_code == 0
    assert list(tmp_path.iterdir()) == []
