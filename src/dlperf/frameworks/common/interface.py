"""The backend interface: what a backend module (`frameworks/<name>/backend.py`) provides, as protocols each backend
is checked against (`missing`, run by tests/frameworks/test_interface.py in each framework's own environment).

A backend module is a `Backend`; where its row of `capabilities` says it reads real data, it is also a `ReadsData`.
Two members are optional: `NVTX: bool` (True: `build` also takes `nvtx=True`, NVTX ranges around the step's phases,
`--nvtx`; see `frameworks.build_step`) and `build_parallel(workload, cell)` (the step of a strategy of one process,
such as TensorFlow's MirroredStrategy; `worker/cell.py` finds it, a backend without one makes such a cell
`unsupported`). What `build` returns is a `TrainStep`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

from dlperf.frameworks.common import capabilities
from dlperf.measure.timer import DeviceClock
from dlperf.modes import Mode


class TrainStep(Protocol):
    """One model, one fixed mini-batch on the device, one optimizer: what the worker times. PyTorch's also has
    `load(inputs, targets)`: with a loader (`--data`), a loaded batch copied into the step's own input buffers."""

    params: int  # trainable parameters (what the framework really trains, deviations included)
    compiles: bool  # the first step compiles or traces: the worker times it apart, never as a sample

    def step(self) -> Any:
        """One training iteration (forward, loss, backward, update); returns the loss, a framework scalar that
        float() accepts. Timed: no host syncs inside."""

    def sync(self) -> None:
        """Wait until every queued computation of the step has finished, updated state included."""

    def device_clock(self) -> DeviceClock | None:
        """Marks in the device's own queue where it runs asynchronously and has them (CUDA events): the timer then
        lets the host run ahead as a training loop does (`dlperf.measure.timer.pipelined`). None: sync every step."""

    def compile_stats(self) -> dict[str, Any]:
        """What the compiler did (graphs, recompiles, ...); {} when there is nothing to say."""

    def count_flops(self) -> dict[str, Any] | None:
        """{"flops_per_step": int, "flops_by_dtype": {"fp32": int, ...}} from the framework's own counter; None where
        no counter exists; raises where the counter fails (the worker records no figure, with a note)."""

    def memory_of_step(self) -> dict[str, int]:
        """Peak memory of extra, untimed steps, each figure labelled with a key of `dlperf.protocol.MEMORY_KINDS`;
        optional like count_flops."""

    def settings(self) -> dict[str, Any]:
        """Effective thread and kernel settings, recorded with the cell."""


class Backend(Protocol):
    """A backend module, imported only in a child process (a worker or the probe) whose thread variables are already
    fixed, and possibly in another virtual environment (`dlperf.envs`)."""

    MODES: frozenset[Mode]  # the mode components it implements: its row's `modes` in `capabilities`

    def version(self) -> str:
        """The framework's version, as it reports it."""

    def configure_threads(self, threads: int) -> dict[str, Any]:
        """Called first, before the framework has run anything: the framework's own thread controls; returns the
        settings in effect."""

    # optional: `pool_threads() -> int`, the threads its CPU pool has now, where the model's own code can change them
    # (PyTorch's torch.set_num_threads): the worker sets them back after the build and says so

    def build(self, workload: Any, device: str, mode: str, *, seed: int = 0) -> TrainStep:
        """The train step of `workload` (a `workloads.base.Workload`) on `device` in `mode`. NotImplementedError
        (reason) when the mode or workload does not apply here: the cell is `unsupported`, not failed. A mode
        component outside MODES is refused by `frameworks.check_mode` with the backend's reason."""

    def probe(self, request: dict[str, Any]) -> dict[str, Any]:
        """The parent's question answered in JSON-ready values: {"what": "env"}: framework, version, build, devices."""

    def loss_check(self, workload: Any, device: str, mode: str) -> dict[str, Any]:
        """Does a non-fp32 mode still train like fp32 (`common.losscheck`)? {"ok": bool | None, "reason": str | None,
        "seconds": float, ...}."""

    def matmul(self, size: int) -> Callable[[], None]:
        """One size x size fp32 matrix product, finished when the call returns (the thread test: CPU time / wall time
        of these at N threads is about N)."""

    def loader(self, workload: Any, data: str, setting: Any, device: str, train: Any = None) -> Any:
        """A loader cell's DataLoader (`--data`): the workload's dataset in `data` (a directory, or "dataset": a user
        workload's own) loaded with the `dlperf.loaders.LoaderSetting`; `train`, the step built of the workload, lends
        a user workload's Dataset. Iterated, it gives (inputs, targets) batches shaped as the step's.
        NotImplementedError where the backend reads no real data (`frameworks.no_loader`)."""

    def profile(self, train: Any, steps: int, trace_path: str | None, max_trace_bytes: int) -> dict[str, Any]:
        """`steps` steps of a warmed-up TrainStep under the framework's profiler (the profile child only, never a timed
        one): the fields of `dlperf.protocol.Profiled`; the gzip Chrome trace at trace_path (None: none), dropped with
        a note above max_trace_bytes (`common.profiling`); NotImplementedError(reason) where no profiler is mapped."""


class ReadsData(Protocol):
    """A backend whose row says `reads_data`: its loader's batches are real, and on a GPU their copy is measured."""

    def h2d(self, batch: Any, device: str) -> dict[str, Any]:
        """A GPU's figures of one batch's copy to it (`protocol.Loader`'s h2d)."""


OPTIONAL = {"NVTX": False, "build_parallel": True}  # name -> called (a function) rather than read


def members(protocol: type) -> dict[str, bool]:
    """A protocol's members: name -> whether it is called (a method) rather than read (an attribute)."""
    found = {name: False for name in getattr(protocol, "__annotations__", {})}
    found |= {name: True for name, value in vars(protocol).items() if callable(value) and not name.startswith("_")}
    return found


def missing(module: ModuleType, framework: str) -> list[str]:
    """What `module`, the backend of `framework`, lacks of the interface, one line each: a member absent, a method
    that is not callable, an optional member of the wrong kind, MODES other than its row's."""
    row = capabilities.of(framework)
    wanted = members(Backend) | (members(ReadsData) if row.reads_data else {})
    found = [f"{name}: absent" for name in wanted if not hasattr(module, name)]
    for name, called in {**wanted, **OPTIONAL}.items():
        if hasattr(module, name) and called and not callable(getattr(module, name)):
            found.append(f"{name}: not callable")
    if getattr(module, "MODES", row.modes) != row.modes:
        found.append(f"MODES: {sorted(module.MODES)} is not its row's {sorted(row.modes)}")
    return found
