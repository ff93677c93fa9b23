"""Shared test helpers.

`require(name)`: a test whose dependency is missing skips locally, with the reason, but FAILS when `DLPERF_REQUIRE`
(comma-separated, set by .ci/run) names it: a green CI that skipped everything would prove nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def pytest_configure(config):
    """The tests of Ctrl-C send SIGINT to dlperf and its children. A shell starting pytest in the background without
    job control (`(pytest ... &)`, nohup) leaves SIGINT ignored, and an ignored signal stays ignored across exec: every
    such test failed (12 at once) though nothing was wrong. Python's own handler again, here and in every child."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # the tests' `python -m dlperf` as from an activated environment, its `dlperf` on PATH: the hints they check say
    # `dlperf ...`, where without it they name this interpreter (`location.program`)
    here = os.path.dirname(sys.executable)
    if here not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PATH")]))
    own_data_dir(config)


def own_data_dir(config) -> None:
    """dlperf's data folder for this session (the kept figures, kept measurements, the worker's link), with the
    frameworks' installed environments and the answers cached by what they answer linked in: the tests wrote their
    figures into the user's cache, and a user's export then said a figure was "cached from run 1 of
    /tmp/pytest-of-root/.../p.db". Set once, by the first process (xdist's workers inherit it); a DLPERF_DATA_DIR
    given is kept."""
    import shutil
    import tempfile

    if os.environ.get("DLPERF_DATA_DIR"):
        return
    from dlperf import envs

    real = envs.data_dir()
    session = Path(tempfile.mkdtemp(prefix="dlperf-tests-data-"))
    # the environments, the planning probe's answers and the operator counts (keyed by what they answer, and cited
    # nowhere) are the user's; the kept figures, which a cell cites ("cached from run N of DB"), the session's own
    for shared in ("envs", "cache/probe", "cache/opcounts"):
        if (real / shared).is_dir():
            (session / shared).parent.mkdir(parents=True, exist_ok=True)
            (session / shared).symlink_to(real / shared, target_is_directory=True)
    os.environ["DLPERF_DATA_DIR"] = str(session)
    config.add_cleanup(lambda: shutil.rmtree(session, ignore_errors=True))


def required() -> set[str]:
    return {x.strip() for x in os.environ.get("DLPERF_REQUIRE", "").split(",") if x.strip()}


def require(name: str):
    """Import and return module `name`, or skip (locally) / fail (in CI) saying why. A test folder named after a
    framework (tests/frameworks/jax) is a namespace package, not the framework: it does not count."""
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.origin is not None:
        return importlib.import_module(name)
    message = f"{name} is not installed"
    if name in required():
        pytest.fail(f"{message}, and DLPERF_REQUIRE lists it", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def released(exc: BaseException) -> None:
    """The frames of `exc`'s tracebacks (its cause's, its context's) cleared, where a DataLoader's worker raised it:
    they held the loader's iterator in a reference cycle, which the cycle collector freed later, in another test, where
    torch's shutdown of its workers waited its whole join timeout (`MP_STATUS_CHECK_INTERVAL`, 5 s) in each (the
    collector frees the iterator's queues before the iterator, so the workers never hear to stop); freed now, the
    workers end at once."""
    import traceback

    while exc is not None:
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


MALLOC = "malloc"  # what DLPERF_REQUIRE names to fail the tests of a preloaded malloc where one is not installed


def preloadable(component) -> str:
    """The library of a preloaded malloc (`heap.library`: tcmalloc's, jemalloc's) where this machine has it; else a
    skip saying so, or a failure where DLPERF_REQUIRE lists `malloc` (CI installs both). Asked first, before any
    test of the mode: a test that took "not installed" as its expected answer passed with the detection broken."""
    from dlperf.frameworks.common import heap

    found = heap.library(component)
    if found is not None:
        return found
    names, source = heap.PRELOADS[component]
    message = f"lib{names[0]} is not installed here (it comes with {source})"
    if MALLOC in required():
        pytest.fail(f"{message}, and DLPERF_REQUIRE lists {MALLOC}", pytrace=False)
    pytest.skip(message)


MULTI_GPU = "multi-gpu"  # what DLPERF_REQUIRE names to fail the tests of 2 or more GPUs on a machine with fewer


def cuda_gpus(count: int = 1):
    """torch, on a machine with `count` or more CUDA GPUs; else a skip saying why, or a failure when DLPERF_REQUIRE
    lists `cuda` (and the machine has none) or `multi-gpu` (and it has fewer): a GPU run that skipped its GPU tests
    would prove nothing. Called before every test marked `gpu` (`@pytest.mark.gpu`, `@pytest.mark.gpu(2)`)."""
    spec = importlib.util.find_spec("torch")
    found = 0
    if spec is not None and spec.origin is not None:
        import torch

        found = torch.cuda.device_count()
        if found >= count:
            return torch
    message = "no CUDA device on this machine" if not found else f"needs {count} CUDA GPUs; this machine has {found}"
    for name, missing in (("cuda", not found), (MULTI_GPU, found < count)):
        if missing and name in required():
            pytest.fail(f"{message}, and DLPERF_REQUIRE lists {name}", pytrace=False)
    pytest.skip(message)


@pytest.hookimpl(tryfirst=True)  # before skipif markers and fixtures: the reason is the missing GPU
def pytest_runtest_setup(item):
    marker = item.get_closest_marker("gpu")
    if marker is not None:
        cuda_gpus(*marker.args)


def browser_paths() -> tuple[str, str]:
    """(chromium, chromedriver) for the browser tests, with selenium importable; skips locally, fails in CI when
    DLPERF_REQUIRE lists `chromium`, like `require`."""
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    selenium = importlib.util.find_spec("selenium") is not None
    if chromium and driver and selenium:
        return chromium, driver
    message = (
        "selenium is not installed (pip install -e '.[dev]')"
        if chromium and driver
        else "headless Chromium is not installed (Debian: apt install chromium chromium-driver)"
    )
    if "chromium" in required():
        pytest.fail(f"{message}, and DLPERF_REQUIRE lists it", pytrace=False)
    pytest.skip(message)


def docs_tools() -> str:
    """The `mkdocs` command of this interpreter's environment, for the docs site's tests; skips locally with the
    reason, fails in CI where DLPERF_REQUIRE lists `docs`, like `require`."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    found = importlib.util.find_spec("mkdocs") is not None and importlib.util.find_spec("material") is not None
    if found and mkdocs.is_file():
        return str(mkdocs)
    message = "mkdocs and its Material theme are not installed (pip install -e '.[docs]')"
    if "docs" in required():
        pytest.fail(f"{message}, and DLPERF_REQUIRE lists it", pytrace=False)
    pytest.skip(message)


def framework_python(name: str) -> str:
    """The interpreter that runs `name`'s workers (this one, or its `dlperf env install` environment); skips locally
    with the reason, fails in CI, like `require`. The framework is never imported in the test process."""
    from dlperf import envs

    python = envs.interpreter_for(name)
    if python is not None:
        return python
    message = f"{name}: {envs.unavailable_reason(name)}"
    if name in required():
        pytest.fail(f"{message}, and DLPERF_REQUIRE lists it", pytrace=False)
    pytest.skip(message)


# Python for a test script of glibc's heap: `write_block(mib)` writes a block from libc's own malloc and frees it
LIBC_BLOCK = """
import ctypes
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes, libc.memset.argtypes = [ctypes.c_void_p], [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]

def write_block(mib):
    block = libc.malloc(mib * 2**20)
    assert block, "malloc returned NULL"
    libc.memset(block, 1, mib * 2**20)
    libc.free(block)
"""


def run_in(framework: str, script: str, *args: str, threads: int = 1, timeout: float = 300) -> dict:
    """Run `script` (Python source) in the framework's interpreter, with dlperf importable and the thread variables of
    `threads` set as for a worker; returns the JSON object the script printed on its last line of stdout."""
    import json

    from dlperf.runner.launch import child_env

    python = framework_python(framework)
    env = child_env(os.environ, threads, python)
    if python == sys.executable:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [python, "-c", script, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )
    assert done.returncode == 0, f"{framework} script failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


SECTIONS = """
import contextlib as _contextlib, io as _io, json as _json, traceback as _traceback
_answers = {}
for _name, _body in _SECTIONS.items():
    _printed = _io.StringIO()
    try:
        with _contextlib.redirect_stdout(_printed):
            exec(_body, dict(globals()))
        _answers[_name] = _json.loads(_printed.getvalue().strip().splitlines()[-1])
    except BaseException:
        _answers[_name] = {"section failed": _traceback.format_exc() + _printed.getvalue()[-2000:]}
print(_json.dumps(_answers))
"""


def run_sections(framework: str, prelude: str, sections: dict[str, str], *args: str, threads: int = 1) -> dict:
    """`run_in` for several scripts in one child of the framework's interpreter (its import, seconds, paid once): each
    section runs after `prelude` in globals of its own and prints its JSON on its last line; returns name -> that
    JSON, or {"section failed": its traceback} (`section` fails the test that reads it, alone)."""
    return run_in(framework, f"{prelude}\n_SECTIONS = {sections!r}\n{SECTIONS}", *args, threads=threads)


def section(answers: dict, name: str):
    """A section's answer from `run_sections`; a section that raised fails the test reading it, with its traceback."""
    got = answers[name]
    if isinstance(got, dict) and "section failed" in got:
        pytest.fail(f"section {name!r} failed:\n{got['section failed']}", pytrace=False)
    return got


def benchmark(name: str):
    """A script of benchmarks/ as a module (`gpu_check`, `gpu_relations`), loaded once: a script's own imports of its
    neighbours (gpu_check's `import gpu_relations`) find the loaded one."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def dlperf(*args: str, db: Path | None = None, cwd: Path | None = None, timeout: float = 600, env=None):
    """Run the real `dlperf` command line in a child process; returns the CompletedProcess."""
    cmd = [sys.executable, "-m", "dlperf", *args]
    if db is not None:
        cmd += ["--db", str(db)]
    full_env = {**os.environ, **(env or {})}
    # no empty entry: "src:" would put the working directory before the standard library in every child
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), full_env.get("PYTHONPATH", "")]))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=full_env)


def alive(pid: int) -> bool:
    """Whether a process still runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def descendants(pid: int) -> list[int]:
    """Every process below `pid` now: its children, theirs (a cell forked from the warm parent), and so on. Read while
    it runs: once it has exited, what it left is init's, and a search by parent finds nothing (an interrupt test that
    looked afterwards could not fail)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # ended while read
            continue
    found, frontier = [], [pid]
    while frontier:
        below = [child for child, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found


def gone(pids: list[int], within_s: float | None = None) -> bool:
    """Whether every process of `pids` has ended (`alive`), polled for `within_s` seconds: by default the grace dlperf
    gives a process between SIGTERM and SIGKILL (`runner/launch.KILL_GRACE_S`), since what dlperf stopped may still be
    dying, or waiting for its reaper, when dlperf returns."""
    from dlperf.runner.launch import KILL_GRACE_S

    deadline = time.monotonic() + (KILL_GRACE_S if within_s is None else within_s)
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


def make_cell(workload="fcn-r", framework="torch", device="cpu", threads=1, mode="fp32", **fields):
    """A stored cell as the views read it (`CellRecord`), for tests of the views: the figures are made up."""
    from dlperf.protocol import Cell
    from dlperf.store.records import CellRecord
    from dlperf.vocab import Status

    nproc, scaling = fields.pop("nproc", 0), fields.pop("scaling", "")
    parallel, micro = fields.pop("parallel", ""), fields.pop("microbatches", 0)
    identity = Cell(workload, framework, device, threads, mode, nproc, scaling, "", parallel, micro)
    return CellRecord(
        run_id=fields.pop("run_id", 1), key=fields.pop("key", identity.key), position=fields.pop("position", 0),
        **identity.to_json(), batch=fields.pop("batch", None), workload_spec=fields.pop("workload_spec", {}),
        status=Status(fields.pop("status", "ok")), **fields,
    )  # fmt: skip


def rows(db, sql):
    """Rows of a store file as dicts, read with plain SQL: what the tests check the store against."""
    import sqlite3

    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def cells(db):
    """Every stored cell row of a store file, in run and plan order (raw columns, JSON undecoded)."""
    return rows(db, "SELECT * FROM cells ORDER BY run_id, position")


def mlp_factory(hidden: int, batch_size: int, option: str) -> str:
    """The source of a file whose factory `make` is a user workload "mini": an MLP from 8 inputs through `hidden`
    units to 3 classes; `option` is one more keyword of `dlperf.user_workload` (an optimizer, clipping)."""
    return f"""
import torch
import dlperf


def make():
    model = torch.nn.Sequential(torch.nn.Linear(8, {hidden}), torch.nn.ReLU(), torch.nn.Linear({hidden}, 3))

    def make_batch(n, device):
        return torch.randn(n, 8, device=device), torch.randint(3, (n,), device=device)

    return dlperf.user_workload("mini", model, make_batch, torch.nn.functional.cross_entropy,
                                batch_size={batch_size}, {option})
"""


def old_store(path, version: int):
    """A connection to a new store file at schema `version`, as an older dlperf wrote it (uncommitted)."""
    import sqlite3

    from dlperf.store import MIGRATIONS

    conn = sqlite3.connect(path)
    for target in range(1, version + 1):
        for statement in MIGRATIONS[target]:
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
    return conn


def one_line_error(proc, *fragments):
    """A bad input: exit code 2, one line on stderr naming what was wrong, no traceback."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dlperf: error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(scope="session")
def report_db_made(tmp_path_factory):
    """The synthetic store, written once a session: each of its commits waits for the disk (0.66 s of wall time for
    0.07 s of CPU on a shared machine), and some 150 tests read it."""
    from report.synthetic import make_db

    path = tmp_path_factory.mktemp("synthetic") / "report.db"
    make_db(path)
    return path


@pytest.fixture
def report_db(tmp_path, report_db_made):
    """A store with one synthetic run of every kind of cell the report draws (tests/report/synthetic.py): a copy of
    the session's, for the test to change as it likes."""
    import shutil

    path = tmp_path / "report.db"
    shutil.copyfile(report_db_made, path)
    return path


@pytest.fixture
def torch():
    return require("torch")


@pytest.fixture(autouse=True)
def one_torch_thread_beside_other_workers():
    """Where pytest-xdist runs tests side by side (make test: two workers, on CI's two cores), PyTorch in a test's own
    process computes on one thread: its default, a thread per core in each worker, put twice the cores' threads to
    spin at OpenMP's barriers (measured: test_losscheck's in-process steps took 96 s of CPU, at one thread 53 s).
    Set before each test, since a test may set its own count; a test run alone (the serial ones) keeps the default,
    and what a test starts (dlperf's cells, a framework's child) sets its threads as it always does."""
    torch = sys.modules.get("torch")
    if torch is not None and int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        torch.set_num_threads(1)


# a user file of models that fail each way a worker can: a signal, a raise, out of memory, a hang (once HANG_FILE
# exists: it writes its pid there), killed as the out-of-memory killer does (SIGKILL); `good` trains
FAULTY_MODELS = """
import os, signal, time
import torch
import dlperf

class Net(torch.nn.Module):
    def __init__(self, how):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)
        self.how = how

    def forward(self, x):
        if self.how == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.how == "killed":  # what the kernel's out-of-memory killer does
            os.kill(os.getpid(), signal.SIGKILL)
        if self.how == "raise":
            raise RuntimeError("bad forward")
        if self.how == "oom":
            torch.empty(1 << 50, dtype=torch.uint8)  # a petabyte: the allocator refuses at once
        if self.how == "hang" and os.path.exists(os.environ.get("HANG_FILE", "/nonexistent")):
            with open(os.environ["HANG_FILE"], "w") as f:
                f.write(str(os.getpid()))
            time.sleep(3600)
        return self.lin(x)

def batch(n, device):
    return torch.randn(n, 8, device=device), torch.randint(0, 4, (n,), device=device)

def make(how):
    return lambda: dlperf.user_workload(how, Net(how), batch, torch.nn.functional.cross_entropy, batch_size=16)

good, segv, hang, fails, oom = make("good"), make("segv"), make("hang"), make("raise"), make("oom")
killed = make("killed")

def not_a_workload():
    return 42

raise_on_import = False
"""


FAST = ["--min-steps", "3", "--min-time", "0", "--max-time", "0.5", "--max-warmup", "3"]


BUSY = 0.15  # others' share of the machine above which a low CPU/wall ratio says more about them than the framework
QUIET_WAIT_S = 60.0  # the longest a test that needs a quiet machine waits for one where it must have one
QUIET_PAUSE_S = 5.0  # between two tries of such a test


def quiet_required() -> bool:
    """Whether a test that needs a quiet machine must get one rather than skip: in CI (`CI=true`), or where
    DLPERF_REQUIRE lists `quiet`."""
    return os.environ.get("CI", "").lower() == "true" or "quiet" in required()


def in_quiet_window(measure: Callable[[], T], others_share: Callable[[T], float | None]) -> T:
    """`measure()` again until other processes kept less than BUSY of the CPUs meanwhile (`others_share` of its
    result). Locally a busy machine is a skip after 3 tries; where `quiet_required`, the tries go on for QUIET_WAIT_S
    seconds, QUIET_PAUSE_S apart, and a machine still busy then is a failure. Either says every load it saw."""
    seen, deadline = [], time.monotonic() + QUIET_WAIT_S
    while True:
        result = measure()
        seen.append(others_share(result) or 0.0)
        if seen[-1] < BUSY:
            return result
        loads = f"other processes kept {', '.join(f'{s:.0%}' for s in seen)} of the CPUs busy in {len(seen)} tries"
        if not quiet_required() and len(seen) >= 3:
            pytest.skip(loads)
        if quiet_required() and time.monotonic() > deadline:
            pytest.fail(f"{loads} over {QUIET_WAIT_S:.0f} s (a quiet machine is below {BUSY:.0%})", pytrace=False)
        time.sleep(QUIET_PAUSE_S if quiet_required() else 0)


def cores_kept_busy(framework: str, threads: int) -> dict:
    """The probe's answer (`ThreadsAnswer`) for back-to-back matrix products at `threads` in a child set up like a
    worker, with `cores`, the cores they keep busy: `runnable`, the threads ready to run on average, which other
    processes do not change, where the kernel counts the threads' waits for a CPU (issue 29, on 2 cores that others
    kept 65-80% busy: 1.00 to 1.18 at 1 thread; 1.65 to 2.02 at 2, JAX about 3). Where it does not, the CPU/wall
    `ratio`, which a busy machine lowers (issue 14: 0.93 at 2 threads on a shared machine): measured in a quiet
    window (`in_quiet_window`)."""
    import itertools

    from dlperf.answers import ThreadsRequest
    from dlperf.runner import probe

    python = framework_python(framework)

    def ask():
        return probe.ask(framework, ThreadsRequest(threads, seconds=1.5), python, threads=threads)

    first = ask()
    if first.runnable is not None:
        return first.to_json() | {"cores": first.runnable}
    answers = itertools.chain([first], iter(ask, None))  # the first answer, then new ones
    answer = in_quiet_window(answers.__next__, lambda a: a.others_cpu_share)
    return answer.to_json() | {"cores": answer.ratio}


def write_datasets(directory: Path) -> Path:
    """Tiny datasets in each real format, as `--data DIR` reads them: MNIST (64 images), CIFAR-10 (5 x 8), PTB (400
    words of 150) and an ImageNet-style folder of 3 classes x 3 random JPEGs of a few dozen pixels a side."""
    import random

    from PIL import Image

    from dlperf.workloads.datasets import cifar, idx, ptb

    idx.write_mnist(directory / "mnist", 64)
    cifar.write_cifar10(directory, per_batch=8)
    ptb.write_ptb(directory / "ptb", words=400, vocab=150)
    rng = random.Random(0)
    for c in range(3):
        folder = directory / "imagenet" / "train" / f"n{c:08d}"
        folder.mkdir(parents=True)
        for k in range(3):
            size = (rng.randint(40, 90), rng.randint(40, 90))
            Image.effect_noise(size, 60).convert("RGB").save(folder / f"n{c:08d}_{k}.JPEG", quality=75)
    return directory


def interrupt_once(args: list[str], err: Path, said: str, within_s: float = 180) -> tuple[int, str, list[int]]:
    """Run `dlperf ARGS`, Ctrl-C it once its stderr (into `err`) says `said` and a process of its own runs; its exit
    code, its stdout and the processes below it then."""
    import signal

    with err.open("w") as stderr:
        default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731 - the child's, before exec
        parent = subprocess.Popen([sys.executable, "-m", "dlperf", *args], stdout=subprocess.PIPE, stderr=stderr,
                                  text=True, preexec_fn=default_sigint)  # fmt: skip
        deadline = time.monotonic() + within_s
        while said not in err.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        seen, until = descendants(parent.pid), time.monotonic() + 30  # the next cell's process, and what it started
        while not seen and parent.poll() is None and time.monotonic() < until:  # between two cells: none yet
            time.sleep(0.01)
            seen = descendants(parent.pid)
        assert parent.poll() is None, err.read_text()
        parent.send_signal(signal.SIGINT)
        out, _ = parent.communicate(timeout=60)
    return parent.returncode, out, seen
