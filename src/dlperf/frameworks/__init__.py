"""Framework backends: the only place a deep-learning framework is imported.

One package per framework, Keras-style: `torch/`, `jax/`, `tensorflow/`, `mxnet/`, each with a `backend` module that
implements the backend interface (`common/interface.py`: the `Backend` and `TrainStep` protocols, each backend checked
against them by tests/frameworks/test_interface.py) and a `models` module with the networks of the Shi et al. (2016)
suite built in that framework. What only one framework has sits beside its backend (PyTorch: the loss check, peaks,
DDP, collectives). What every backend shares is in `common/`, the table of what each can do among it
(`common/capabilities.py`), which the parent reads instead of naming a framework.

A backend module is imported only in a child process (a worker or the probe) whose thread variables are already fixed,
and possibly in another virtual environment (`dlperf.envs`): it imports the standard library, its framework (and what
the framework installs, such as its numpy) and dlperf's standard-library-only modules, nothing else. This package
itself imports nothing but the standard library and dlperf's standard-library-only modules.

Adding a framework: a package here named as it, with `backend.py` and `models.py`; a member of
`dlperf.vocab.Framework`; its row in `common.capabilities.TABLE` (which the registry below, the parent's checks,
`dlperf list --frameworks` and the import rules read); and, when its dependencies clash with dlperf's, its packages in
`dlperf.envs.PACKAGES` and a constraints file in `dlperf/envs/constraints/`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from dlperf.errors import UsageError
from dlperf.frameworks.common import capabilities
from dlperf.modes import Mode, mode_components
from dlperf.vocab import Framework

# framework -> its backend module
# each backend's module, by its row of the capability table: the package named after the framework
BACKENDS: dict[Framework, str] = {fw: f"{__name__}.{fw}.backend" for fw in capabilities.TABLE}


def backend(framework: str) -> ModuleType:
    """Import and return the backend module (child processes only)."""
    return importlib.import_module(BACKENDS[Framework(framework)])


def build_step(fw: ModuleType, framework: str, workload: Any, device: str, mode: str, *, nvtx: bool = False):
    """`fw.build` of a cell, with NVTX ranges when asked (`--nvtx`) of a backend that has them; returns the step and
    the settings to record beside its own: a backend without NVTX ranges builds the plain step, noted there."""
    if not nvtx:
        return fw.build(workload, device, mode), {}
    if getattr(fw, "NVTX", False):
        return fw.build(workload, device, mode, nvtx=True), {}
    return fw.build(workload, device, mode), {"nvtx": f"not emitted: the {framework} backend has no NVTX ranges"}


def check_mode(framework: str, supported: frozenset[Mode], mode: str, reasons: dict[Mode, str]) -> None:
    """NotImplementedError (the cell is `unsupported`) naming the first component of `mode` the backend does not
    implement, with the backend's reason for it, or a plain one for a component it has never heard of."""
    if why := mode_refusal(framework, supported, mode, reasons):
        raise NotImplementedError(why)


def mode_refusal(framework: str, supported: frozenset[Mode], mode: str, reasons: dict[Mode, str]) -> str | None:
    """Why `check_mode` refuses `mode`, in its words; None where the backend implements every component."""
    for component in mode_components(mode):
        if component not in supported:
            return f"{component.value}: {reasons.get(component) or f'the {framework} backend does not implement it'}"
    return None


def builtin_only(framework: str) -> str:
    """Why a backend other than PyTorch's refuses a user workload (user factories build PyTorch models)."""
    return f"user workloads are PyTorch models; the {framework} backend trains the built-in workloads only"


def no_loader(workload: Any, data: str, setting: Any, device: str, train: Any = None) -> Any:
    """`loader` of a backend that reads no real data: its loader cells are `unsupported`, saying which read it."""
    readers = " and ".join(capabilities.data_readers([f.value for f in Framework]))
    raise NotImplementedError(f"real data is read by the {readers} backend only")


def probe_builtin_only(framework: str, request: dict[str, Any], probe_env) -> dict[str, Any]:
    """`probe` of a backend that trains the built-in workloads only: it answers "env" with `probe_env()`."""
    what = request.get("what")
    if what == "env":
        return probe_env()
    if what == "workload":
        raise UsageError(f"workload {request.get('source')!r}: {builtin_only(framework)}")
    raise ValueError(f"unknown probe request {what!r}")
