"""ARCHITECTURE.md matches the tree: every path it names exists, and every module and folder of the package, and
every module of `runner/`, `worker/` and `plan/`, is in its map."""

from __future__ import annotations

import re

from conftest import ROOT

DOC = (ROOT / "ARCHITECTURE.md").read_text()
PACKAGE = ROOT / "src" / "dlperf"


def named_paths() -> set[str]:
    """Every `path/like.py` or `folder/` the page writes in backticks."""
    tokens = re.findall(r"`([A-Za-z0-9_./<>-]+)`", DOC)
    return {t for t in tokens if (t.endswith((".py", "/")) or "/" in t) and "<" not in t and not t.startswith("-")}


def exists(path: str) -> bool:
    """A path as the page writes it: from the package (most), or from the repository (tests/, benchmarks/); a
    `module/file.function` names the function of that module's file."""
    if not path.endswith((".py", "/")) and "." in path.rsplit("/", 1)[-1]:
        path = path.rsplit(".", 1)[0] + ".py"
    bases = (PACKAGE, ROOT, PACKAGE / "runner", PACKAGE / "frameworks")
    return any((base / path.rstrip("/")).exists() for base in bases)


def test_every_path_the_page_names_exists():
    missing = sorted(p for p in named_paths() if not exists(p))
    assert len(named_paths()) > 30 and missing == []


def test_every_module_and_folder_of_the_package_is_on_the_map():
    tree = DOC[DOC.index("## The tree") : DOC.index("## The children")]
    entries = [p.name for p in PACKAGE.iterdir() if not p.name.startswith(("_", ".")) and p.name != "py.typed"]
    entries += [
        p.name for d in ("runner", "worker", "plan") for p in (PACKAGE / d).glob("*.py") if not p.name.startswith("_")
    ]
    entries += [p.name for p in (PACKAGE / "frameworks").iterdir() if p.is_dir() and not p.name.startswith("_")]
    entries = [e for e in entries if e != "__pycache__"]
    unnamed = sorted(e for e in entries if not re.search(rf"(?<![\w.]){re.escape(e.removesuffix('.py'))}\b", tree))
    assert unnamed == [], f"ARCHITECTURE.md's tree does not name {unnamed}"
