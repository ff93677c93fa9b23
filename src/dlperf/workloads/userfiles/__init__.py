"""The user's own files, imported under names any process can import again: `dlperf.workloads.userfiles.STEM_DIGEST`.

A factory's file (`path/to/model.py:make`), or a module of the working directory named as one of the standard
library's (`statistics:make`), is imported as a module of this package, named by its file's stem and a digest of its
path, not by a name of its own (two files named model.py, or the standard library's statistics, stay apart). A
DataLoader whose workers start by `spawn` or `forkserver` (`multiprocessing_context=`, macOS's default) pickles the
user's Dataset and collate function by their module's name, and each worker imports that module again: importing
this package installs the finder that takes such a name back to its file, found in a folder of `sys.path` (which a
spawned child is given: `multiprocessing.spawn.get_preparation_data`), so the worker runs the file as the worker
that started it did. Standard library only.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import re
import sys
from pathlib import Path

PACKAGE = __name__
_NAME = re.compile(r"(?P<stem>\w+)_(?P<digest>[0-9a-f]{10})")


def module_name(path: Path) -> str:
    """The name `path` (a .py file, or a package's folder) is imported under, the same in every process: the stem of
    the name it was given by (a link's, which is what `sys.path`'s folder holds), the digest of the file it is."""
    return f"{PACKAGE}.{_stem(path.absolute().name)}_{_digest(path.resolve())}"


def _stem(name: str) -> str:
    return re.sub(r"\W", "_", name.removesuffix(".py"))  # `my-model.py`, `v1.2.py`: a name without dots


def _digest(path: Path) -> str:
    return hashlib.blake2b(os.fsencode(path), digest_size=5).hexdigest()


def spec_for(name: str, path: Path) -> importlib.machinery.ModuleSpec | None:
    """The spec of the module `name` from `path`: a .py file, or a folder (its modules then imported below it, with
    or without an __init__.py); None where `path` is neither."""
    if path.is_file():
        return importlib.util.spec_from_file_location(name, path)
    if not path.is_dir():
        return None
    places = [str(path)]
    if (init := path / "__init__.py").is_file():
        return importlib.util.spec_from_file_location(name, init, submodule_search_locations=places)
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = places
    return spec


def _found(stem: str, digest: str) -> Path | None:
    """The file or folder of `sys.path`'s folders whose name and path give `stem` and `digest`."""
    for entry in sys.path:
        folder = Path(entry or os.getcwd())
        try:
            names = os.listdir(folder)
        except OSError:  # a zip, or a folder gone
            continue
        for name in (n for n in names if _stem(n) == stem):
            path = (folder / name).resolve()
            if _digest(path) == digest and (path.suffix == ".py" or path.is_dir()):
                return path
    return None


class Finder:
    """Finds `dlperf.workloads.userfiles.STEM_DIGEST` on `sys.path` (a meta path finder)."""

    @staticmethod
    def find_spec(fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or not (m := _NAME.fullmatch(name)):
            return None
        found = _found(m["stem"], m["digest"])
        return None if found is None else spec_for(fullname, found)


if not any(isinstance(f, Finder) for f in sys.meta_path):
    sys.meta_path.append(Finder())
