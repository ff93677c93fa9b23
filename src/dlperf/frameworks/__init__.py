"""Framework backends: the only place a deep-learning framework is imported.

Each backend module (`torch_backend`, later `jax_backend`, ...) is imported only by the worker and the probe, in a child
process whose thread settings are already fixed. This package itself imports nothing but the standard library.

A backend module provides:

    configure_threads(threads: int) -> dict          # before building anything; returns the effective settings
    build(workload: Workload, device: str, mode: str) -> TrainStep
    probe(request: dict) -> dict                     # versions, devices, user workloads; answered as JSON
    loss_check(workload, device, mode) -> dict       # does the mode still train like fp32? {"ok", "reason", ...}

and a `TrainStep` has:

    step() -> Any           # one training iteration: zero grads, forward, loss, backward, update; returns the loss
    sync() -> None          # wait until the device has finished all queued work (no-op on CPU)
    params: int             # trainable parameters
    count_flops() -> int | None          # FLOPs of one step, counted on the eager model by the framework's counter
    memory_of_step() -> dict[str, int]   # peak memory of one extra, untimed step, each figure labelled
    settings() -> dict                   # effective thread and kernel settings, recorded with the cell
"""

from __future__ import annotations

import importlib.util
from typing import Any, Protocol

# framework name -> (backend module, the import name whose presence makes it available)
BACKENDS: dict[str, tuple[str, str]] = {
    "torch": ("dlperf.frameworks.torch_backend", "torch"),
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
    elif name not in BACKENDS:
        available, reason = False, "no dlperf backend yet"
    elif not is_available(name):
        available, reason = False, f"not installed here (pip install 'dlperf[{name}]')"
    else:
        available, reason = True, None
        version = _installed_version(BACKENDS[name][1])
    return {"name": name, "paper": name in PAPER_TOOLS, "available": available, "version": version, "reason": reason}


def _installed_version(module: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return None


class TrainStep(Protocol):
    params: int

    def step(self) -> Any: ...

    def sync(self) -> None: ...

    def count_flops(self) -> int | None: ...

    def memory_of_step(self) -> dict[str, int]: ...

    def settings(self) -> dict[str, Any]: ...


def is_available(framework: str) -> bool:
    """Whether the framework can be imported here, without importing it."""
    return importlib.util.find_spec(BACKENDS[framework][1]) is not None


def backend(framework: str):
    """Import and return the backend module (child processes only)."""
    return importlib.import_module(BACKENDS[framework][0])
