"""The source files a child imported that are neither the interpreter's, an installed package's nor dlperf's: the user's
own modules (the model file, the neighbours it imports, a module of the working directory, which `python -P` puts last
on sys.path, a package of theirs installed editable), as a build system's dependency file lists what a target was made
from. A cell's counted figures are kept with them (`runner/kept.py`) and no longer taken once any of them changes:
the model's file alone by its bytes would keep the FLOP count of a model whose layers.py was edited. Standard library
only.
"""

from __future__ import annotations

import hashlib
import os
import site
import stat
import sys
import sysconfig

MAX_FILES = 1000  # beyond it (a framework installed editable, say) nothing is said, and the figures are not kept
DLPERF = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # dlperf's own package


def imported(scratch: str | None = None) -> dict[str, list] | None:
    """{path: [size, mtime_ns, sha256]} of the user's own source files among the modules imported (`sys.modules`),
    each read whole, its size and time taken after the read: a file edited while it was read has a time after the
    process started, which `kept.keep` refuses. None: more than `MAX_FILES`. `scratch`: the child's own temporary
    folder (`child.own_temp`), whose modules the process wrote itself (TensorFlow's AutoGraph, TorchInductor's
    compiled code), never the user's: counted, they were written after it started, and no TensorFlow or compiled
    cell's figures were kept."""
    installed = _installed(scratch)
    found: dict[str, list] = {}
    for module in list(sys.modules.values()):
        path = _file_of(module)
        if not isinstance(path, str) or (path := os.path.abspath(path)) in found or _under(path, installed):
            continue
        if (state := described(path)) is not None:
            found[path] = state
            if len(found) > MAX_FILES:
                return None
    return found


def _file_of(module: object) -> object:
    """A module's `__file__` as its namespace holds it, read without the module's own attribute lookup: a lazily
    imported module (`importlib.util.LazyLoader`, which the lazy_loader package of scikit-image and others puts in
    sys.modules) runs its import at any attribute asked, and one that failed there (an optional dependency missing)
    failed the cell after its steps were timed; None for what has no namespace."""
    try:
        return object.__getattribute__(module, "__dict__").get("__file__")
    except Exception:  # not a module, or a namespace that is no dict: no file of the user's said
        return None


def described(path: str) -> list | None:
    """[size, mtime_ns, sha256] of a regular file, None where it is not one or cannot be read."""
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
            st = os.fstat(f.fileno())
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, digest] if stat.S_ISREG(st.st_mode) else None


def _installed(scratch: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The folders whose files are not the user's, as named and with their links resolved: the standard library,
    every site-packages (the user's own too), dist-packages, dlperf, and the child's own temporary folder."""
    places = {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    places |= set(site.getsitepackages()) | {site.getusersitepackages(), DLPERF, scratch}
    places |= {p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")}
    named = tuple(os.path.join(os.path.abspath(p), "") for p in places if p)
    return named, tuple(os.path.join(os.path.realpath(p), "") for p in places if p)


def _under(path: str, installed: tuple[tuple[str, ...], tuple[str, ...]]) -> bool:
    named, resolved = installed
    return path.startswith(named) or os.path.realpath(path).startswith(resolved)
