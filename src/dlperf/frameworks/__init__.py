"""Framework backends: the only place a deep-learning framework is imported.

Each backend module (`torch_backend`, `jax_backend`, `tf_backend`, `mxnet_backend`) is imported only by the worker and
the probe, in a child process whose thread variables are already fixed, and possibly in another virtual environment
(`envs`): a backend imports the standard library, its framework (and what the framework installs, such as its numpy)
and dlperf's standard-library-only modules, nothing else. This package itself imports nothing but the standard library.

A backend module provides:

    configure_threads(threads: int) -> dict   # called first, before the framework has run anything: the framework's
                                              # own thread controls; returns the settings in effect
    build(workload: Workload, device: str, mode: str, *, seed: int = 0) -> TrainStep
                                              # NotImplementedError(reason) when the mode or workload does not apply
                                              # here: the cell is `unsupported` with that reason, not failed
    probe(request: dict) -> dict              # {"what": "env"}: framework, version, build, devices (JSON-ready)
    loss_check(workload, device, mode) -> dict  # non-fp32 modes: does the mode still train like fp32?
                                              # {"ok": bool | None, "reason": str | None, "seconds": float, ...}
    matmul(size: int) -> Callable[[], None]   # one size x size fp32 matrix product, finished when the call returns
                                              # (the thread test: CPU time / wall time of these at N threads ~ N)

and a `TrainStep` has:

    params: int             # trainable parameters (what the framework really trains, deviations included)
    compiles: bool          # the first step compiles or traces: the worker times it apart, never as a sample
    step() -> Any           # one training iteration (forward, loss, backward, update); returns the loss, a framework
                            # scalar that float() accepts. Timed: no host syncs inside.
    sync() -> None          # wait until every queued computation of the step has finished, updated state included
    compile_stats() -> dict # what the compiler did (graphs, recompiles, ...); {} when nothing to say
    count_flops() -> dict | None         # {"flops_per_step": int, "flops_by_dtype": {"fp32": int, ...}} from the
                                         # framework's own counter; None where no counter exists
    memory_of_step() -> dict[str, int]   # peak memory of extra, untimed steps, each figure labelled with a key of
                                         # dlperf.runner.collect.MEMORY_KINDS
    settings() -> dict                   # effective thread and kernel settings, recorded with the cell
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Protocol

from dlperf.frameworks import envs

# framework name -> (backend module, the import name whose presence makes it available)
BACKENDS: dict[str, tuple[str, str]] = {
    "torch": ("dlperf.frameworks.torch_backend", "torch"),
    "jax": ("dlperf.frameworks.jax_backend", "jax"),
    "tensorflow": ("dlperf.frameworks.tf_backend", "tensorflow"),
    "mxnet": ("dlperf.frameworks.mxnet_backend", "mxnet"),
}


# Every tool of Shi et al. (2016) and today's choices: what dlperf can measure here, and why not where it cannot.
PAPER_TOOLS = ("caffe", "cntk", "tensorflow", "torch7", "mxnet")
UNINSTALLABLE = {
    "caffe": "no release installs on a supported Python (last release 1.0, 2017; never on PyPI)",
    "cntk": "no release installs on a supported Python (last release 2.7, 2019; wheels for Python 2.7, 3.5, 3.6)",
    "torch7": "Lua, not Python; development stopped in 2017 (PyTorch is its successor)",
}
KNOWN_FRAMEWORKS = ("torch", "jax", "tensorflow", "mxnet", "caffe", "cntk", "torch7")


def framework_status(name: str) -> dict[str, Any]:
    """Whether dlperf can measure `name` here, without importing it: {name, paper, available, version, reason}."""
    version = None
    if name in UNINSTALLABLE:
        available, reason = False, UNINSTALLABLE[name]
    elif not is_available(name):
        available, reason = False, envs.unavailable_reason(name)
    else:
        available, reason = True, None
        version = _installed_version(name)
    python = envs.interpreter_for(name) if available else None
    where = None if python is None else ("current" if python == sys.executable else str(envs.env_dir(name)))
    return {
        "name": name,
        "paper": name in PAPER_TOOLS,
        "available": available,
        "version": version,
        "environment": where,
        "reason": reason,
    }


def _installed_version(name: str) -> str | None:
    """The version installed where the framework's workers run, read from package metadata (no import)."""
    from importlib import metadata

    if envs.importable_here(name):
        try:
            return metadata.version(BACKENDS[name][1])
        except metadata.PackageNotFoundError:
            return None
    return ((envs.record(name) or {}).get("versions") or {}).get(envs.PACKAGES[name][0])


class TrainStep(Protocol):
    params: int

    def step(self) -> Any: ...

    def sync(self) -> None: ...

    def count_flops(self) -> int | None: ...

    def memory_of_step(self) -> dict[str, int]: ...

    def settings(self) -> dict[str, Any]: ...


def is_available(framework: str) -> bool:
    """Whether the framework can run here (in this environment or its own), found without importing it."""
    return envs.interpreter_for(framework) is not None


def builtin_only(framework: str) -> str:
    """Why a backend other than PyTorch's refuses a user workload (user factories build PyTorch models)."""
    return f"user workloads are PyTorch models; the {framework} backend trains the built-in workloads only"


def probe_builtin_only(framework: str, request: dict[str, Any], probe_env) -> dict[str, Any]:
    """`probe` of a backend that trains the built-in workloads only: it answers "env" with `probe_env()`."""
    from dlperf.errors import UsageError

    what = request.get("what")
    if what == "env":
        return probe_env()
    if what == "workload":
        raise UsageError(f"--workloads {request.get('source')!r}: {builtin_only(framework)}")
    raise ValueError(f"unknown probe request {what!r}")


def backend(framework: str):
    """Import and return the backend module (child processes only)."""
    return importlib.import_module(BACKENDS[framework][0])
