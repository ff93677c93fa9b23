"""Dedicated environments: one virtual environment per framework whose dependencies clash with the others'.

MXNet 1.9.1 needs numpy<1.24; TensorFlow and JAX pin numpy and ml_dtypes their own way; none of them can share an
environment with the others or with dlperf's own dependencies. `dlperf env install NAME` makes

    DATA_DIR/envs/NAME/            a venv with exactly the versions of dlperf/envs/constraints/NAME.txt
    DATA_DIR/envs/NAME/dlperf.json what was installed and the verifying step's result

and the launcher starts that framework's workers with the venv's interpreter. dlperf itself is not installed there:
the child finds it through PYTHONPATH at a directory holding nothing but a link to this `dlperf` package
(`worker_path`), so the worker imports the framework's own numpy, never dlperf's dependencies.

A framework importable in the current environment is used directly. Nothing here imports a framework, and nothing
from `dlperf.runner`: the verifying step of an install is passed in by the caller (it runs in a probe child).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.frameworks.common import capabilities

if TYPE_CHECKING:
    from dlperf.answers import SelftestAnswer

# framework -> the packages asked of pip (their dependencies come pinned from the constraints file)
PACKAGES: dict[str, tuple[str, ...]] = {
    "jax": ("jax", "jaxlib", "flax", "optax"),
    "tensorflow": ("tensorflow-cpu", "keras"),
    "mxnet": ("mxnet", "numpy"),
}
RECORD = "dlperf.json"
CONSTRAINTS = Path(__file__).resolve().parent / "constraints"


def import_name(framework: str) -> str:
    """The module that tells `framework` is installed, found without importing it: its backend's first package, or
    its own name (the paper's tools dlperf only lists)."""
    known = framework in capabilities.TABLE
    return capabilities.of(framework).packages[0] if known else framework


def pinned_version(framework: str) -> str | None:
    """The version dlperf pins for `framework`: its constraints file's (jax, tensorflow, mxnet), or the `torch` extra
    of dlperf's own requirements; None where nothing says (dlperf not installed as a package)."""
    if framework in PACKAGES:
        wanted = _normalized(PACKAGES[framework][0])
        try:
            lines = constraints_file(framework).read_text().splitlines()
        except OSError:
            return None
        return next((v for n, _, v in (line.partition("==") for line in lines) if _normalized(n) == wanted), None)
    try:
        from importlib import metadata

        requires = metadata.requires("dlperf") or []
    except Exception:  # not installed: run from a source tree, or linked into a framework's environment
        return None
    pins = (r.split(";")[0].strip().partition("==") for r in requires)
    return next((v for n, _, v in pins if _normalized(n) == _normalized(import_name(framework))), None)


def _normalized(name: str) -> str:
    """A package name as pip compares them (PEP 503): tensorflow_cpu is tensorflow-cpu."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def same_release(version: str | None, pinned: str | None) -> bool:
    """`2.13.0+cpu` is the pinned `2.13.0`: a local build label does not make another release."""
    return version is None or pinned is None or version.split("+")[0] == pinned


def data_dir() -> Path:
    """Where dlperf keeps its environments: $DLPERF_DATA_DIR, else $XDG_DATA_HOME/dlperf, else ~/.local/share/dlperf."""
    if os.environ.get("DLPERF_DATA_DIR"):
        return Path(os.environ["DLPERF_DATA_DIR"]).expanduser().resolve()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base).expanduser().resolve() / "dlperf"


def write_whole(path: Path, data: bytes) -> None:
    """A cache entry in DATA_DIR (`predict/cache.py`, `runner/probe_cache.py`) written whole or not at all: a
    temporary file beside `path`, then renamed over it. A folder that cannot be written is no error: what it holds is
    only not kept."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException as exc:  # an interrupt too: no temporary file left behind
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if not isinstance(exc, OSError):
            raise


def env_dir(framework: str) -> Path:
    return data_dir() / "envs" / framework


def unusable_data_dir() -> str | None:
    """Why the environments cannot be made where `data_dir` says, in words ending in the fix; None where they can
    (a DLPERF_DATA_DIR that names a file, or a read-only folder, was a traceback of `env install`)."""
    folder = data_dir() / "envs"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as exc:
        named = "DLPERF_DATA_DIR" if os.environ.get("DLPERF_DATA_DIR") else "dlperf's data folder"
        return (f"the frameworks' environments go in {folder} ({named}), which cannot be made or written there "
                f"({exc.strerror or exc}): set DLPERF_DATA_DIR to a folder you can write")  # fmt: skip
    return None


def env_python(framework: str) -> Path:
    return env_dir(framework) / "bin" / "python"


def constraints_file(framework: str) -> Path:
    return CONSTRAINTS / f"{framework}.txt"


def importable_here(framework: str) -> bool:
    """Whether the current interpreter can import the framework (found without importing it). A directory of that
    name without an __init__.py (a project's `jax/` folder, a test folder) is a namespace package, not the framework:
    it does not count."""
    spec = importlib.util.find_spec(import_name(framework))
    return spec is not None and spec.origin is not None


def record(framework: str) -> dict[str, Any] | None:
    """The install record of a verified dedicated environment, or None (absent, or an install that did not finish)."""
    path = env_dir(framework) / RECORD
    try:
        rec = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return rec if rec.get("verified") and env_python(framework).exists() else None


def is_current(python: str) -> bool:
    """`python` is the interpreter running dlperf, however either path is spelt: started as ../venv/bin/python, dlperf's
    own Python read as another environment's (the child reports its path made absolute). Not resolved through links:
    a venv's python links to the base interpreter, which is no environment of its own."""
    return os.path.abspath(python) == os.path.abspath(sys.executable)


def interpreter_for(framework: str) -> str | None:
    """The Python that runs this framework's workers: the current one if it has the framework, else the dedicated
    environment's, else None."""
    if importable_here(framework):
        return sys.executable
    if record(framework) is not None:
        return str(env_python(framework))
    return None


# Every tool of Shi et al. (2016) and today's choices: what dlperf can measure here, and why not where it cannot.
PAPER_TOOLS = ("caffe", "cntk", "tensorflow", "torch7", "mxnet")
UNINSTALLABLE = {
    "caffe": "no release installs on a supported Python (last release 1.0, 2017; never on PyPI)",
    "cntk": "no release installs on a supported Python (last release 2.7, 2019; wheels for Python 2.7, 3.5, 3.6)",
    "torch7": "Lua, not Python; development stopped in 2017 (PyTorch is its successor)",
    # tried: pip install --no-build-isolation horovod==0.28.1 (isolated, its CMake finds no torch) with gloo, without
    # MPI, gcc 12, cmake 3.25, Python 3.11; each build fails after 5-11 minutes of compiling on 2 cores
    "horovod": "no release builds against the pinned frameworks (last release 0.28.1, 2023): its PyTorch extension "
    "compiles as C++14 and torch 2.13's headers need C++17; against tensorflow-cpu 2.21 its XLA ops do not find "
    "the headers TensorFlow keeps under include/external (highwayhash, then farmhash)",
}
# what `dlperf list --frameworks` lists: each backend dlperf has, then what cannot be installed here
KNOWN_FRAMEWORKS = (*(str(f) for f in capabilities.TABLE), *UNINSTALLABLE)


@dataclass(frozen=True)
class FrameworkStatus:
    """Whether dlperf can measure a framework here (`dlperf list --frameworks`), found without importing it."""

    name: str
    paper: bool  # a tool of Shi et al. (2016)
    available: bool
    version: str | None  # where its workers run
    environment: str | None  # "current", or the dedicated environment's directory; None when not available
    reason: str | None  # why not, when not available


def framework_status(name: str) -> FrameworkStatus:
    """Whether dlperf can measure `name` here, without importing it."""
    version = None
    if name in UNINSTALLABLE:
        available, reason = False, UNINSTALLABLE[name]
    elif not is_available(name):
        available, reason = False, unavailable_reason(name)
    else:
        available, reason = True, None
        version = _installed_version(name)
    python = interpreter_for(name) if available else None
    where = None if python is None else ("current" if is_current(python) else str(env_dir(name)))
    return FrameworkStatus(name, name in PAPER_TOOLS, available, version, where, reason)


def _installed_version(name: str) -> str | None:
    """The version installed where the framework's workers run, read from package metadata (no import)."""
    from importlib import metadata

    if importable_here(name):
        try:
            return metadata.version(import_name(name))
        except metadata.PackageNotFoundError:
            return None
    return ((record(name) or {}).get("versions") or {}).get(PACKAGES[name][0])


def is_available(framework: str) -> bool:
    """Whether the framework can run here (in this environment or its own), found without importing it."""
    return interpreter_for(framework) is not None


def unavailable_reason(framework: str) -> str:
    if framework in PACKAGES:
        if env_python(framework).exists() and record(framework) is None:
            return f"its environment in {env_dir(framework)} is not verified: run `dlperf env install {framework}`"
        return f"not installed: run `dlperf env install {framework}`"
    return f"not installed here (pip install 'dlperf[{framework}]')"


def worker_path() -> str:
    """A directory holding only a link named `dlperf` to this package: on another interpreter's PYTHONPATH it makes
    dlperf's worker importable without anything else from this environment (its numpy, rich, torch)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha1(os.fsencode(package)).hexdigest()[:12]
    lib = data_dir() / "lib" / digest
    link = lib / "dlperf"
    if not (link.is_symlink() and link.resolve() == package):
        lib.mkdir(parents=True, exist_ok=True)
        tmp = lib / f".dlperf-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(package, target_is_directory=True)
        os.replace(tmp, link)  # atomic: a worker starting meanwhile sees the old link or the new one
    return str(lib)


@dataclass(frozen=True)
class EnvironmentState:
    """A framework's dedicated environment as `dlperf env list` shows it."""

    framework: str
    used: str | None  # "current environment" (importable here), "dedicated", or None: neither
    path: str
    installed: bool  # a verified install
    versions: dict[str, str | None] | None  # what the install verified
    verified_at: str | None
    step_s: float | None  # the verifying step's time
    reason: str | None  # why it cannot be used, when it cannot
    pins_changed: bool = False  # installed from another constraints file than this dlperf's (`dlperf env install`)


def listing() -> list[EnvironmentState]:
    """Every framework that has (or could have) a dedicated environment, with its state."""
    rows = []
    for name in PACKAGES:
        rec = record(name) or {}
        here = importable_here(name)
        rows.append(
            EnvironmentState(
                framework=name,
                used="current environment" if here else ("dedicated" if rec else None),
                path=str(env_dir(name)),
                installed=bool(rec),
                versions=rec.get("versions"),
                verified_at=rec.get("verified_at"),
                step_s=rec.get("verify", {}).get("step_s"),
                reason=None if rec or here else unavailable_reason(name),
                pins_changed=bool(rec) and pins_changed(name, rec.get("versions") or {}),
            )
        )
    return rows


class InstallError(RuntimeError):
    pass


@dataclass(frozen=True)
class InstallRecord:
    """A verified install, written to the environment's RECORD file (what `record` reads back)."""

    framework: str
    verified: bool
    versions: dict[str, str | None]
    python: str
    constraints: str  # the constraints file's name
    constraints_sha1: str
    verify: dict[str, Any]  # the verifying step's answer (`answers.SelftestAnswer`)
    verified_at: str
    install_s: float


def install(
    framework: str,
    verify: Callable[[str], SelftestAnswer],
    *,
    log: Callable[[str], None] = print,
    force: bool = False,
    python: str = sys.executable,
) -> InstallRecord:
    """Create (or re-create, with `force`) the framework's environment, install it from its constraints file, make
    dlperf's worker importable there and verify it: `verify(interpreter)` trains one tiny step there and returns what
    it found (versions, Python, losses), or raises. Returns the install record."""
    if framework not in PACKAGES:
        raise InstallError(install_refusal(framework))
    with installing(framework):
        return _install(framework, verify, log, force, python)


@contextlib.contextmanager
def installing(framework: str) -> Iterator[None]:
    """The framework's environment held by this install alone: a second `dlperf env install` of it at once would take
    the first's half-made environment for one cut short and remove it under it."""
    import fcntl

    folder = env_dir(framework).parent
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{framework}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            said = f"another `dlperf env install {framework}` is making it now: wait for it to end"
            raise InstallError(said) from None
        yield


def _install(framework: str, verify: Callable[[str], SelftestAnswer], log: Callable[[str], None], force: bool,
             python: str) -> InstallRecord:  # fmt: skip
    target = env_dir(framework)
    if target.exists() and not force and record(framework) is None:  # cut short: no pip, or half a package unpacked
        log(f"its last install in {target} did not finish: making it again from scratch")
        force = True  # pip, where it ran, thinks a half-unpacked package installed: a plain install never mends it
    if force and target.exists():
        shutil.rmtree(target)
    start = time.perf_counter()
    (target / RECORD).unlink(missing_ok=True)  # an interrupted install is never taken for a verified one
    if not env_python(framework).exists():
        log(f"creating {target}")
        _check([python, "-m", "venv", str(target)], "creating the virtual environment")
    constraints = constraints_file(framework)
    log(f"installing {' '.join(PACKAGES[framework])} with the versions of {constraints.name}")
    pip = [str(env_python(framework)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _check([*pip, "-c", str(constraints), *PACKAGES[framework]], "pip install")
    log("verifying: one tiny training step")
    verified = verify(str(env_python(framework)))
    rec = InstallRecord(
        framework=framework,
        verified=True,
        versions=verified.versions,
        python=verified.python,
        constraints=constraints.name,
        constraints_sha1=_sha1(constraints),
        verify=verified.to_json(),
        verified_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        install_s=round(time.perf_counter() - start, 1),
    )
    (target / RECORD).write_text(json.dumps(asdict(rec), indent=2) + "\n")
    return rec


def pins_changed(framework: str, installed: dict[str, str | None]) -> bool:
    """Whether a package the install verified is at another version than this dlperf's constraints file pins (a
    comment edited in the file is no change: its hash had been compared)."""
    try:
        lines = constraints_file(framework).read_text().splitlines()
    except OSError:
        return False
    pins = {_normalized(n): v.strip() for n, _, v in (line.split("#")[0].partition("==") for line in lines) if v}
    return any(not same_release(v, pins.get(_normalized(k))) for k, v in installed.items() if _normalized(k) in pins)


def _sha1(path: Path) -> str | None:
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()
    except OSError:
        return None


def install_refusal(framework: str) -> str:
    """Why `framework` gets no dedicated environment."""
    if framework == "torch":
        return "torch is installed with dlperf itself: pip install 'dlperf[torch]' (torch==2.13.0, the CPU build here)"
    if framework in UNINSTALLABLE:
        return f"{framework} cannot be installed: {UNINSTALLABLE[framework]}"
    return f"unknown framework {framework!r} (dedicated environments: {', '.join(PACKAGES)})"


def _check(cmd: list[str], what: str) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise InstallError(f"{what} failed (exit code {result.returncode}):\n{tail}")
