"""The shape of the code, counted from its syntax: what issue 28's redesign set out to lower.

    python benchmarks/house.py            # the counts, and whether each is within its goal
    python benchmarks/house.py --details  # ... and where each counted thing is

- subscripts by a constant string (`x["key"]`) in runner/, store/ and commands/: a figure passed by string key
  instead of a typed field (307 at f53c15c; the goal is under a quarter of that);
- functions of the write path (a worker's events -> a stored measurement and cell) that hand a bare `dict` to
  another module: public functions annotated `-> dict` or `-> dict[str, Any]` (a record whose fields live in prose;
  a mapping such as `dict[str, list[float]]` is typed), or unannotated and returning a dict display;
- files over 600 lines and functions over 60.

tests/test_house.py holds the package to these goals.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "dlperf"
KEYED_FOLDERS = ("runner", "store", "commands")
KEYED_AT_START = 307  # counted the same way at f53c15c, before the redesign
# the write path: a child's events become a measurement, the cell's figures, and rows of the store
WRITE_PATH = ("runner/collect.py", "runner/sweep.py", "runner/session.py", "store/__init__.py", "store/records.py")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60


@dataclass
class Counts:
    keyed: dict[str, list[str]] = field(default_factory=dict)  # folder -> "file:line key" of each subscript
    bare_dicts: list[str] = field(default_factory=list)  # "file:function"
    long_files: list[str] = field(default_factory=list)  # "file (lines)"
    long_functions: list[str] = field(default_factory=list)  # "file:function (lines)"

    @property
    def keyed_total(self) -> int:
        return sum(len(v) for v in self.keyed.values())

    def goals(self) -> dict[str, tuple[int, int]]:
        """name -> (count, the most it may be)."""
        return {
            "constant-string subscripts in runner/, store/, commands/": (self.keyed_total, KEYED_AT_START // 4),
            "write-path functions returning a bare dict": (len(self.bare_dicts), 0),
            f"files over {MAX_FILE_LINES} lines": (len(self.long_files), 0),
            f"functions over {MAX_FUNCTION_LINES} lines": (len(self.long_functions), 0),
        }


def count(package: Path = PACKAGE) -> Counts:
    counts = Counts()
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        text = path.read_text()
        tree = ast.parse(text, filename=str(path))
        if (lines := len(text.splitlines())) > MAX_FILE_LINES:
            counts.long_files.append(f"{rel} ({lines})")
        counts.long_functions += [f"{rel}:{f.name} ({n})" for f, n in _functions(tree) if n > MAX_FUNCTION_LINES]
        if (folder := rel.split("/")[0]) in KEYED_FOLDERS:
            counts.keyed.setdefault(folder, []).extend(f"{rel}:{line} {key!r}" for line, key in _keyed(tree))
        if rel in WRITE_PATH:
            counts.bare_dicts += [f"{rel}:{name}" for name in _bare_dicts(tree)]
    return counts


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node, node.end_lineno - node.lineno + 1


def _keyed(tree: ast.AST) -> list[tuple[int, str]]:
    return [(n.lineno, n.slice.value) for n in ast.walk(tree) if isinstance(n, ast.Subscript)
            and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)]  # fmt: skip


def _bare_dicts(tree: ast.Module) -> list[str]:
    """Public functions, and public methods of classes, that return a dict to their callers."""
    found = []
    for node in tree.body:
        scopes = node.body if isinstance(node, ast.ClassDef) and not node.name.startswith("_") else [node]
        for f in scopes:
            if not isinstance(f, ast.FunctionDef) or f.name.startswith("_") or f.name == "to_json":
                continue  # to_json: a record's JSON, what SQLite's text columns hold
            literal = any(isinstance(r, ast.Return) and isinstance(r.value, ast.Dict) for r in _own_nodes(f))
            if _is_dict(f.returns) if f.returns is not None else literal:
                found.append(f.name if scopes[0] is node else f"{node.name}.{f.name}")
    return found


def _is_dict(annotation: ast.expr) -> bool:
    """`dict`, `dict[str, Any]` or either `| None`: keys and values whose meaning the type does not say."""
    text = ast.unparse(annotation).replace(" ", "").strip("'\"").removesuffix("|None")
    return text in ("dict", "Dict", "dict[str,Any]", "Dict[str,Any]", "dict[str,object]")


def _own_nodes(f: ast.FunctionDef):
    """The nodes of `f`, not those of functions defined inside it."""
    todo = list(f.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            todo.extend(ast.iter_child_nodes(node))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--details", action="store_true", help="where each counted thing is")
    args = parser.parse_args(argv)
    counts = count()
    within = True
    for name, (n, most) in counts.goals().items():
        ok = n <= most
        within &= ok
        print(f"{'ok  ' if ok else 'over'} {n:4d} (goal <= {most}): {name}")
    print("     by folder: " + ", ".join(f"{k} {len(v)}" for k, v in counts.keyed.items()))
    if args.details:
        for what in (counts.bare_dicts, counts.long_files, counts.long_functions, *counts.keyed.values()):
            for line in what:
                print(f"  {line}")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
