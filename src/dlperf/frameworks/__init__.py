"""Framework backends: the only place a deep-learning framework is imported.

One package per framework, Keras-style: `torch/`, `jax/`, `tensorflow/`, `mxnet/`, each with a `backend` module that
implements the interface below and a `models` module with the networks of the Shi et al. (2016) suite built in that
framework. What only one framework has sits beside its backend (PyTorch: the loss check, peaks, DDP, collectives).

A backend module is imported only in a child process (a worker or the probe) whose thread variables are already fixed,
and possibly in another virtual environment (`dlperf.envs`): it imports the standard library, its framework (and what
the framework installs, such as its numpy) and dlperf's standard-library-only modules, nothing else. This package
itself imports nothing but the standard library and dlperf's vocabulary.

A backend module provides:

    MODES: frozenset[Mode]                    # the mode components it implements; every other component of a mode
                                              # is `unsupported`, with the reason from `unsupported_reason`
    version() -> str                          # the framework's version, as it reports it
    configure_threads(threads: int) -> dict   # called first, before the framework has run anything: the framework's
                                              # own thread controls; returns the settings in effect
    build(workload: Workload, device: str, mode: str, *, seed: int = 0) -> TrainStep
                                              # NotImplementedError(reason) when the mode or workload does not apply
                                              # here: the cell is `unsupported` with that reason, not failed
    NVTX: bool (optional)                     # True: build also takes nvtx=True (`--nvtx`: NVTX ranges around the
                                              # step's phases, said in its settings); see `build_step`
    probe(request: dict) -> dict              # {"what": "env"}: framework, version, build, devices (JSON-ready)
    loss_check(workload, device, mode) -> dict  # non-fp32 modes: does the mode still train like fp32?
                                              # {"ok": bool | None, "reason": str | None, "seconds": float, ...}
    matmul(size: int) -> Callable[[], None]   # one size x size fp32 matrix product, finished when the call returns
                                              # (the thread test: CPU time / wall time of these at N threads ~ N)
    loader(workload, data, setting, device, train=None) -> a DataLoader
                                              # a loader cell's (`--data`): the workload's dataset in `data` (a
                                              # directory, or "dataset": a user workload's own) loaded with the
                                              # `dlperf.loaders.LoaderSetting`; `train`, the step built of the
                                              # workload, lends a user workload's Dataset. Iterated, it gives
                                              # (inputs, targets) batches shaped as the step's, which the worker
                                              # copies in with `TrainStep.load`. NotImplementedError where the
                                              # backend reads no real data (`no_loader`: only PyTorch's does)
    h2d(batch, device) -> dict                # a GPU's figures of one batch's copy to it (`protocol.Loader`'s h2d)
    profile(train, steps, trace_path, max_trace_bytes) -> dict
                                              # `steps` steps of a warmed-up TrainStep under the framework's
                                              # profiler (the profile child only, never a timed one): the fields
                                              # of dlperf.protocol.Profiled; the gzip Chrome trace at trace_path
                                              # (None: none), dropped with a note above max_trace_bytes;
                                              # NotImplementedError(reason) where no profiler is mapped

and a `TrainStep` (the `TrainStep` protocol below) has:

    params: int             # trainable parameters (what the framework really trains, deviations included)
    compiles: bool          # the first step compiles or traces: the worker times it apart, never as a sample
    load(inputs, targets)   # with a loader (`--data`): copy a loaded batch into the step's own input buffers
    step() -> Any           # one training iteration (forward, loss, backward, update); returns the loss, a framework
                            # scalar that float() accepts. Timed: no host syncs inside.
    sync() -> None          # wait until every queued computation of the step has finished, updated state included
    device_clock() -> DeviceClock | None  # marks in an asynchronous device's queue (CUDA events), so the timer need
                                          # not sync every step; None where the step is synchronous or has none
    compile_stats() -> dict # what the compiler did (graphs, recompiles, ...); {} when nothing to say
    count_flops() -> dict | None         # {"flops_per_step": int, "flops_by_dtype": {"fp32": int, ...}} from the
                                         # framework's own counter; None where no counter exists; raises where the
                                         # counter fails (the worker records no figure, with a note: never a failure)
    memory_of_step() -> dict[str, int]   # peak memory of extra, untimed steps, each figure labelled with a key of
                                         # dlperf.protocol.MEMORY_KINDS; like count_flops, optional
    settings() -> dict                   # effective thread and kernel settings, recorded with the cell

Adding a framework: a package here with `backend.py` and `models.py`, a row in `BACKENDS`, a member of
`dlperf.vocab.Framework`, and, when its dependencies clash with dlperf's, a constraints file in `dlperf/envs/`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Protocol

from dlperf.errors import UsageError
from dlperf.measure.timer import DeviceClock
from dlperf.modes import Mode, mode_components
from dlperf.vocab import Category, Framework

# framework -> its backend module
BACKENDS: dict[Framework, str] = {
    Framework.TORCH: "dlperf.frameworks.torch.backend",
    Framework.JAX: "dlperf.frameworks.jax.backend",
    Framework.TENSORFLOW: "dlperf.frameworks.tensorflow.backend",
    Framework.MXNET: "dlperf.frameworks.mxnet.backend",
}


class TrainStep(Protocol):
    params: int
    compiles: bool

    def step(self) -> Any: ...

    def sync(self) -> None: ...

    def device_clock(self) -> DeviceClock | None:
        """Marks in the device's own queue where it runs asynchronously and has them (CUDA events): the timer then
        lets the host run ahead as a training loop does (`dlperf.measure.timer.pipelined`). None: sync every step."""
        ...

    def compile_stats(self) -> dict[str, Any]: ...

    def count_flops(self) -> dict[str, Any] | None: ...

    def memory_of_step(self) -> dict[str, int]: ...

    def settings(self) -> dict[str, Any]: ...


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
    for component in mode_components(mode):
        if component not in supported:
            why = reasons.get(component) or f"the {framework} backend does not implement it"
            raise NotImplementedError(f"{component.value}: {why}")


def builtin_only(framework: str) -> str:
    """Why a backend other than PyTorch's refuses a user workload (user factories build PyTorch models)."""
    return f"user workloads are PyTorch models; the {framework} backend trains the built-in workloads only"


NO_LOADER = "real data is read by the torch backend only"


def no_loader(workload: Any, data: str, setting: Any, device: str, train: Any = None) -> Any:
    """`loader` of a backend that reads no real data: its loader cells are `unsupported`."""
    raise NotImplementedError(NO_LOADER)


def probe_builtin_only(framework: str, request: dict[str, Any], probe_env) -> dict[str, Any]:
    """`probe` of a backend that trains the built-in workloads only: it answers "env" with `probe_env()`."""
    what = request.get("what")
    if what == "env":
        return probe_env()
    if what == "workload":
        raise UsageError(f"--workloads {request.get('source')!r}: {builtin_only(framework)}")
    raise ValueError(f"unknown probe request {what!r}")


def fill_to_step(seconds: dict[str, float], step_s: float, rest: Category) -> dict[str, float]:
    """A profile's seconds by category and the step's remainder under `rest`, summing to `step_s` exactly (scaled
    down if over: ops on several threads may overlap). Shared by the backends' profilers."""
    total = sum(seconds.values())
    scale = step_s / total if total > step_s else 1.0
    out = {k: v * scale for k, v in seconds.items() if v > 0}
    out[rest.value] = out.get(rest.value, 0.0) + max(0.0, step_s - total * scale)
    return out
