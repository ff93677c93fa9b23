"""A child's environment, as every launch makes it (`runner/launch.py`) and a warm parent's (`runner/warm.py`):
the thread variables fixed before any framework is imported, the compiler caches in the child's own directory."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from dlperf.measure.system import thread_env


def child_env(base: Mapping[str, str], threads: int, python: str = sys.executable) -> dict[str, str]:
    """The child's environment: thread variables fixed before any framework is imported."""
    env = dict(base)
    env.update(thread_env(threads))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    from dlperf.envs import is_current, worker_path

    if not is_current(python):  # another environment: make this dlperf importable there, nothing more
        env["PYTHONPATH"] = worker_path()  # never this environment's own paths: they hold another numpy
    return env


def cache_env(tmpdir: Path) -> dict[str, str]:
    """Compiler caches inside the cell's own temporary directory: every cell compiles cold, so an earlier cell
    (or an earlier run) cannot make compiling look cheap, and nothing is left behind."""
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(tmpdir / "inductor"),
        "TRITON_CACHE_DIR": str(tmpdir / "triton"),
        "CUDA_CACHE_PATH": str(tmpdir / "cuda"),
    }
