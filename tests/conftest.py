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
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def required() -> set[str]:
    return {x.strip() for x in os.environ.get("DLPERF_REQUIRE", "").split(",") if x.strip()}


def require(name: str):
    """Import and return module `name`, or skip (locally) / fail (in CI) saying why."""
    if importlib.util.find_spec(name) is not None:
        return importlib.import_module(name)
    message = f"{name} is not installed"
    if name in required():
        pytest.fail(f"{message}, and DLPERF_REQUIRE lists it", pytrace=False)
    pytest.skip(message, allow_module_level=True)


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


def run_in(framework: str, script: str, *args: str, threads: int = 1, timeout: float = 300) -> dict:
    """Run `script` (Python source) in the framework's interpreter, with dlperf importable and the thread variables of
    `threads` set as for a worker; returns the JSON object the script printed on its last line of stdout."""
    import json

    from dlperf.runner.launch import child_env

    python = framework_python(framework)
    env = child_env(os.environ, threads, python)
    if python == sys.executable:
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [python, "-c", script, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )
    assert done.returncode == 0, f"{framework} script failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def dlperf(*args: str, db: Path | None = None, cwd: Path | None = None, timeout: float = 600, env=None):
    """Run the real `dlperf` command line in a child process; returns the CompletedProcess."""
    cmd = [sys.executable, "-m", "dlperf", *args]
    if db is not None:
        cmd += ["--db", str(db)]
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), full_env.get("PYTHONPATH", "")])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=full_env)


def alive(pid: int) -> bool:
    """Whether a process still runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.fixture
def report_db(tmp_path):
    """A store with one synthetic run of every kind of cell the report draws (tests/report/synthetic.py)."""
    from report.synthetic import make_db

    path = tmp_path / "report.db"
    make_db(path)
    return path


@pytest.fixture
def torch():
    return require("torch")


FAST = ["--min-steps", "3", "--min-time", "0", "--max-time", "0.5", "--max-warmup", "3"]
