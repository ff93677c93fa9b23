"""The house rules, read from the code's own imports (lazy imports inside functions and TYPE_CHECKING blocks
included, since they are arrows of the structure too): no import circles, between modules or between the top-level
folders; frameworks only in `frameworks/`; workers on the standard library and their framework; SQL only in
`store/`; and every layer importing only downward.

Each rule is checked on the real package, and each is shown to fail on a small package built to break it, so a
rule that cannot fail would be seen.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from dlperf.frameworks.common import capabilities

PACKAGE = ROOT / "src" / "dlperf"
# the frameworks' own modules, and what each framework's package may import besides the standard library and dlperf
# (its numpy is its own): read from the backends' rows, so a new framework is one row there, not a line here too
FRAMEWORK_PACKAGES = {name for row in capabilities.TABLE.values() for name in row.packages}
FRAMEWORK_DEPENDENCIES = {str(fw): {*row.packages, *row.also_imports} for fw, row in capabilities.TABLE.items()}
# the child's side: every module a child process runs, one per task type (`protocol.TASKS`), and what they share;
# they import the standard library, dlperf's standard-library-only modules and one framework
CHILD_SIDE = "dlperf.worker"
PARENT_SIDE = "dlperf.runner"
# modules every process imports, child processes in a framework's own environment included: standard library only
STDLIB_ONLY = (
    "dlperf.measure",
    "dlperf.protocol",
    "dlperf.figures",
    "dlperf.modes",
    "dlperf.vocab",
    "dlperf.errors",
    "dlperf.version",
    "dlperf.loaders",
    "dlperf.answers",
    "dlperf.wire",
    "dlperf.frameworks.common",  # what every backend shares, imported in each framework's own environment
)
VIEWS = "dlperf.report"
ABOVE_VIEWS = ("dlperf.cli", "dlperf.commands", "dlperf.api", "dlperf.optimize", "dlperf.progress")


def modules_of(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under `root` (the package `package`)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module `name` imports anywhere in its file: dlperf modules by their full name (`from a import b` is
    a.b when that is a module, else a), others by their top-level name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {_known_prefix(alias.name, known) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, name, is_package)
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if child in known else _known_prefix(base, known))
    return found


def _absolute(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = name.split(".")
    anchor = parts if is_package else parts[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def _known_prefix(name: str, known: set[str]) -> str:
    """The longest prefix of `name` that is a module of the package, else its top-level name (another package)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return parts[0]


def graph(root: Path = PACKAGE, package: str = "dlperf") -> dict[str, set[str]]:
    mods = modules_of(root, package)
    known = set(mods)
    return {name: imports_of(name, path, known) - {name} for name, path in mods.items()}


def internal(edges: set[str], package: str = "dlperf") -> set[str]:
    return {e for e in edges if e == package or e.startswith(package + ".")}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g.get(v, set()) & set(g)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def third_party(edges: set[str], package: str = "dlperf") -> set[str]:
    return {e for e in edges if not (e == package or e.startswith(package + ".")) and e not in sys.stdlib_module_names}


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def folders(g: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The graph of the package's top-level parts (a folder or a module directly in it): two parts that import each
    other, through any of their modules, are one floor of the house, not two, and a layer could no longer be lifted
    out whole."""

    def part(name: str) -> str:
        return ".".join(name.split(".")[:2])

    parts: dict[str, set[str]] = {}
    for name, edges in g.items():
        parts.setdefault(part(name), set()).update(part(e) for e in internal(edges, package) if part(e) != part(name))
    return parts


def violations(g: dict[str, set[str]], package: str = "dlperf") -> list[str]:
    """Every broken rule, one line each (module names relative to `package`, so a test package can break them)."""
    p = package
    found = [f"import circle: {' -> '.join(c)}" for c in cycles(g)]
    found += [f"folder circle: {' <-> '.join(c)}" for c in cycles(folders(g, p))]
    for name, edges in sorted(g.items()):
        inside = internal(edges, p)
        outside = third_party(edges, p)
        if under(name, f"{p}.frameworks"):
            sides = [e for e in inside if under(e, f"{p}.runner") or under(e, f"{p}.worker")]
            found += [f"{name} imports {e}: frameworks/ never imports runner/ or worker/" for e in sides]
        else:
            found += [f"{name} imports {e}: only frameworks/ imports a framework" for e in outside & FRAMEWORK_PACKAGES]
        if not under(name, f"{p}.store"):
            found += [f"{name} imports sqlite3: no SQL runs outside the store" for e in edges if e == "sqlite3"]
        if under(name, f"{p}.envs"):
            found += [f"{name} imports {e}: envs/ never imports runner/" for e in inside if under(e, f"{p}.runner")]
        if under(name, f"{p}.runner"):
            found += [f"{name} imports {e}: runner/ never imports plan/" for e in inside if under(e, f"{p}.plan")]
        if under(name, f"{p}.report"):
            above = [f"{p}{a.removeprefix('dlperf')}" for a in ABOVE_VIEWS]
            found += [f"{name} imports {e}: views never import commands or the API" for e in inside
                      if any(under(e, a) for a in above)]  # fmt: skip
        if any(under(name, f"{p}{s.removeprefix('dlperf')}") for s in STDLIB_ONLY):
            stdlib_only = [f"{p}{s.removeprefix('dlperf')}" for s in STDLIB_ONLY]
            found += [f"{name} imports {e}: it must import the standard library only" for e in sorted(outside)]
            found += [f"{name} imports {e}: it must import the standard library only" for e in sorted(inside)
                      if not any(under(e, s) for s in stdlib_only)]  # fmt: skip
    return found + framework_violations(g, p) + side_violations(g, p) + worker_violations(g, p)


def side_violations(g: dict[str, set[str]], p: str) -> list[str]:
    """The parent's side (runner/) and the child's (worker/) meet only through `protocol.py`: neither imports the
    other, so a child never loads the parent's code and the parent never runs a child's in its own process."""
    parent, child = f"{p}{PARENT_SIDE.removeprefix('dlperf')}", f"{p}{CHILD_SIDE.removeprefix('dlperf')}"
    found = []
    for name, edges in sorted(g.items()):
        for mine, other, rule in ((parent, child, "runner/ never imports worker/"),
                                  (child, parent, "worker/ never imports runner/")):  # fmt: skip
            if under(name, mine):
                found += [f"{name} imports {e}: {rule}" for e in sorted(internal(edges, p)) if under(e, other)]
    return found


def framework_violations(g: dict[str, set[str]], p: str) -> list[str]:
    """Each framework's package imports its own framework (and what that installs) and no other's."""
    found = []
    for fw, allowed in FRAMEWORK_DEPENDENCIES.items():
        for name, edges in sorted(g.items()):
            if not under(name, f"{p}.frameworks.{fw}"):
                continue
            found += [f"{name} imports {e}: the {fw} backend imports {', '.join(sorted(allowed))} only"
                      for e in sorted(third_party(edges, p) - allowed)]  # fmt: skip
            others = [f"{p}.frameworks.{o}" for o in FRAMEWORK_DEPENDENCIES if o != fw]
            found += [f"{name} imports {e}: one framework's package never imports another's"
                      for e in sorted(internal(edges, p)) if any(under(e, o) for o in others)]  # fmt: skip
    return found


def worker_violations(g: dict[str, set[str]], p: str) -> list[str]:
    """What a child process loads, outside the framework packages it reaches, is the standard library only: it may
    run in a framework's own environment, where dlperf's dependencies (rich, numpy, scipy, matplotlib) are absent."""
    found = []
    for worker in (name for name in sorted(g) if under(name, f"{p}{CHILD_SIDE.removeprefix('dlperf')}")):
        seen, todo = set(), [worker]
        while todo:
            name = todo.pop()
            if name in seen or name not in g:
                continue
            seen.add(name)
            if any(under(name, f"{p}.frameworks.{fw}") for fw in FRAMEWORK_DEPENDENCIES):
                continue  # a framework's package: checked by framework_violations
            found += [f"{worker} reaches {name}, which imports {e}" for e in sorted(third_party(g[name], p))]
            todo += sorted(internal(g[name], p))
    return found


# ----------------------------------------------------------------------------------------------------------------------
# The real package


def test_the_package_keeps_every_rule():
    g = graph()
    assert len(g) > 60 and all(w in g for w in workers()), sorted(g)  # the walk found the package
    assert violations(g) == []


def workers() -> list[str]:
    """The module each kind of child runs, from the protocol's task table."""
    from dlperf.protocol import TASKS

    return sorted({t.WORKER for t in TASKS.values()})


def test_every_kind_of_child_runs_a_module_of_the_child_side():
    assert len(workers()) >= 6
    assert [w for w in workers() if not under(w, CHILD_SIDE)] == []


def test_lazy_imports_inside_functions_are_arrows_too():
    g = graph()
    assert "dlperf.api" in g["dlperf.commands.run"]  # imported inside `run`, not at the top


# ----------------------------------------------------------------------------------------------------------------------
# Each rule fails when broken


def fake_package(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    root = tmp_path / "fake"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            (root / parent / "__init__.py").touch()
        path.write_text(text)
    return graph(root, "fake")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"a.py": "from fake import b", "b.py": "def f():\n    from fake.a import x"},
         "import circle: fake.a -> fake.b"),
        ({"frameworks/torch/backend.py": "from fake.runner import launch", "runner/launch.py": ""},
         "frameworks/ never imports runner/"),
        ({"frameworks/torch/backend.py": "from fake.worker import feed", "worker/feed.py": ""},
         "frameworks/ never imports runner/ or worker/"),
        ({"worker/cell.py": "from fake.runner import collect", "runner/collect.py": ""},
         "worker/ never imports runner/"),
        ({"runner/sweep.py": "def f():\n    from fake.worker import cell", "worker/cell.py": ""},
         "runner/ never imports worker/"),
        ({"report/table.py": "def f():\n    import fake.api", "api.py": ""}, "views never import commands or the API"),
        ({"report/table.py": "from fake.commands import run", "commands/run.py": ""}, "views never import commands"),
        ({"measure/timer.py": "import numpy"}, "standard library only"),
        ({"protocol.py": "from fake.store import x", "store.py": ""}, "standard library only"),
        ({"runner/sweep.py": "import torch"}, "only frameworks/ imports a framework"),
        ({"api.py": "def f():\n    import sqlite3"}, "no SQL runs outside the store"),
        ({"envs/__init__.py": "def f():\n    from fake.runner import probe", "runner/probe.py": ""},
         "envs/ never imports runner/"),
        ({"runner/session.py": "from fake.plan import cells", "plan/cells.py": ""}, "runner/ never imports plan/"),
        ({"spec.py": "def f():\n    from fake.runner import distributed", "runner/distributed.py": "",
          "runner/sweep.py": "from fake import spec"}, "folder circle: fake.runner <-> fake.spec"),
        ({"worker/cell.py": "from fake import workloads", "workloads.py": "import rich"},
         "fake.worker.cell reaches fake.workloads, which imports rich"),
        ({"frameworks/jax/backend.py": "import torch"}, "the jax backend imports"),
        ({"frameworks/jax/backend.py": "from fake.frameworks.torch import models", "frameworks/torch/models.py": ""},
         "one framework's package never imports another's"),
    ],
)  # fmt: skip
def test_a_broken_rule_is_found(tmp_path, files, expected):
    found = violations(fake_package(tmp_path, files), "fake")
    assert any(expected in line for line in found), found


def test_a_clean_package_passes(tmp_path):
    files = {
        "measure/timer.py": "import time",
        "worker/cell.py": "from fake.measure import timer",
        "frameworks/torch/backend.py": "import torch\nfrom fake.measure import timer",
        "report/table.py": "from fake.measure import timer",
        "api.py": "from fake.report import table",
    }
    assert violations(fake_package(tmp_path, files), "fake") == []
