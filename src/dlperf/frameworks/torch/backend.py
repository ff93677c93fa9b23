"""The PyTorch backend: thread settings, a train step per workload, FLOP and memory counts, and the probe.

Implements the contract in `dlperf.frameworks` (read that first). Imported only in child processes (the worker and
the probe), after the parent has fixed the thread variables. Imports the standard library, torch and dlperf's
standard-library-only modules, nothing else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint_sequential

from dlperf.errors import UsageError
from dlperf.frameworks import check_mode
from dlperf.frameworks.torch import losscheck, profiler
from dlperf.frameworks.torch import nvtx as nvtx_ranges
from dlperf.frameworks.torch.models import build_model
from dlperf.frameworks.torch.opcount import (
    count_ops,
    dtype_name,
    first_floating_dtype,
    nbytes,
    op_flops,
    tensors_in,
    unfused_rnns,
)
from dlperf.loaders import LoaderSetting
from dlperf.measure import system
from dlperf.modes import Mode, check_device, mode_components
from dlperf.vocab import DeviceKind
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload
from dlperf.workloads.user import UserWorkload, build_user_workload

# Mode components this backend implements (dlperf.modes); a mode is one precision plus techniques.
MODES = frozenset({
    Mode.FP32, Mode.BF16, Mode.FP16, Mode.TF32, Mode.CHANNELS_LAST, Mode.FOREACH, Mode.FUSED, Mode.CHECKPOINT,
    Mode.COMPILE, Mode.CUDA_GRAPHS, Mode.DATA_PARALLEL,
})  # fmt: skip
NVTX = True  # build(..., nvtx=True) puts NVTX ranges around the step's phases (`--nvtx`)
AUTOCAST_DTYPES = {Mode.BF16: torch.bfloat16, Mode.FP16: torch.float16}

# ----------------------------------------------------------------------------------------------------------------------
# Threads and settings


def version() -> str:
    return torch.__version__


def configure_threads(threads: int) -> dict[str, Any]:
    """Size both of PyTorch's CPU pools; call before building anything. Returns the settings in effect."""
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        pass  # the inter-op pool can be sized once, before first use; the value in effect is reported below
    return thread_settings()


def matmul(size: int) -> Callable[[], None]:
    """One size x size fp32 matrix product on the CPU, finished when the call returns (the thread test)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    out = torch.empty(size, size)

    def product() -> None:
        torch.mm(a, b, out=out)

    return product


def thread_settings() -> dict[str, Any]:
    return {
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the ATen kernels picked: default, avx2, avx512
        "mkldnn_enabled": torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
        **_parallel_info(),
    }


# What the OpenMP and MKL runtimes themselves report: a library that ignored our settings shows here.
_PARALLEL_KEYS = {
    "ATen parallel backend": "parallel_backend",
    "omp_get_max_threads()": "omp_max_threads",
    "mkl_get_max_threads()": "mkl_max_threads",
}


def _parallel_info() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for line in torch.__config__.parallel_info().splitlines():
        match = re.match(r"\s*(.+?)\s*:\s+(\S.*)$", line)  # "key : value"; skips the "::" inside "at::..."
        if match and match[1] in _PARALLEL_KEYS:
            value = match[2].strip()
            found[_PARALLEL_KEYS[match[1]]] = int(value) if value.isdigit() else value
    return found


def describe_device(device: torch.device) -> dict[str, Any]:
    if device.type != "cuda":
        return {"name": device.type}
    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return {
        "name": f"cuda:{index}",
        "model": props.name,
        "memory_bytes": props.total_memory,
        "capability": f"{props.major}.{props.minor}",
    }


def _kernel_settings(device: torch.device) -> dict[str, Any]:
    if device.type != "cuda":
        return {}
    return {
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
    }


# ----------------------------------------------------------------------------------------------------------------------
# Live tensor memory on CPU


class LiveTensorBytes(TorchDispatchMode):
    """Peak bytes of live tensor storages while active: parameters, gradients, optimizer state, data, activations.

    CPU has no caching allocator whose peak we could read, so this counts what the tensors themselves hold. Every op
    result passes through `__torch_dispatch__` (backward ops too: on CPU autograd runs them in this thread with this
    mode active); each storage is counted once, however many views share it, and subtracted when it dies. PyTorch
    keeps one Python object per live storage (`untyped_storage()` returns the same object while the C++ storage
    lives), so a weakref callback on it fires exactly when the memory is released. A storage can also shrink or grow
    without an op returning it (FSDP2 frees an all-gathered layer with `untyped_storage().resize_(0)` and allocates
    it again the same way), so before each op every live storage's size is read again. Tensors that exist before the
    mode is entered are passed in. Not counted: kernel scratch space and allocator overhead, which no op returns.
    """

    def __init__(self, existing: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self._live: dict[int, tuple[weakref.ref, int]] = {}  # id(storage) -> (weakref with release callback, bytes)
        self.now = self.peak = 0
        for t in existing:
            self._see(t)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._resized()
        out = func(*args, **(kwargs or {}))
        for t in tensors_in(out):
            self._see(t)
        return out

    def _resized(self) -> None:
        """Storages resized in place since the last op (no op returned them): their sizes as they are now."""
        for key, (ref, size) in list(self._live.items()):
            storage = ref()
            if storage is not None and (now := storage.nbytes()) != size:
                self._live[key] = (ref, now)
                self.now += now - size

    def _see(self, t: torch.Tensor) -> None:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # layouts without one plain storage (sparse, mkldnn)
            return
        key, size = id(storage), storage.nbytes()
        ref, old = self._live.get(key, (None, 0))
        if ref is None:  # the key stays unique: the callback drops it before the id can be reused
            ref = weakref.ref(storage, partial(self._released, key))
        self._live[key] = (ref, size)  # a storage seen again may have been resized (resize_, out= ops)
        self.now += size - old
        self.peak = max(self.peak, self.now)

    def _released(self, key: int, _ref: weakref.ref) -> None:
        self.now -= self._live.pop(key)[1]


# ----------------------------------------------------------------------------------------------------------------------
# FLOPs by dtype


class DtypeFlopCounter(TorchDispatchMode):
    """FLOPs of one pass, per dtype the products ran in.

    Uses the formulas of PyTorch's own FLOP counter (`torch.utils.flop_counter.flop_registry`: matrix products,
    convolutions and attention, with their backward ops), so totals equal FlopCounterMode's (which counts the CPU's
    attention as zero, this does not: `opcount.op_flops`); each op's FLOPs go to
    the dtype of its first floating-point input, which under autocast is the dtype it was cast to."""

    def __init__(self) -> None:
        super().__init__()
        self.by_dtype: dict[str, int] = {}

    @property
    def total(self) -> int:
        return sum(self.by_dtype.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        flops = op_flops(func, args, kwargs, out)
        if flops is not None:
            name = dtype_name(first_floating_dtype(args))
            self.by_dtype[name] = self.by_dtype.get(name, 0) + flops
        return out


# ----------------------------------------------------------------------------------------------------------------------
# The train step


class CudaEvents:
    """`dlperf.measure.timer.DeviceClock` for a CUDA device: timing events recorded on its current stream."""

    def __init__(self, device: torch.device) -> None:
        self.stream = torch.cuda.current_stream(device)

    def mark(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record(self.stream)
        return event

    def seconds(self, start: torch.cuda.Event, end: torch.cuda.Event) -> float:
        end.synchronize()
        return start.elapsed_time(end) / 1000.0  # elapsed_time is in milliseconds


class TorchStep:
    """One model, one fixed mini-batch already on the device, one optimizer: what the worker times.

    `model` is always the eager module (FLOPs are counted on it); `forward` is what the step calls, the compiled
    module under `compile`. Modes configure the step after it is built (see `build`)."""

    def __init__(self, model, batch, loss_fn, optimizer, clip_grad_norm, device: torch.device) -> None:
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.forward: Callable = model
        self.inputs, self.targets = batch
        self.clip_grad_norm, self.device = clip_grad_norm, device
        self.trainable = [p for p in model.parameters() if p.requires_grad]
        self.params = sum(p.numel() for p in self.trainable)
        self.autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext  # fp32: none
        self.precision = Mode.FP32.value  # the autocast dtype's mode component
        self.scaler: torch.amp.GradScaler | None = None  # fp16: scale the loss so small gradients survive
        self.compiles = False  # the first step compiles (or captures): the worker times it apart
        self.cuda_graph = False  # cuda_graphs: capture the whole step at the first call, replay it after
        self.graph: CudaGraphStep | None = None
        self.mode_settings: dict[str, Any] = {}
        self._live_peak: int | None = None  # live tensor bytes traced with the FLOP count (see count_flops)
        self.user: UserWorkload | None = None  # a user workload's own objects (its Dataset, with --data)

    def step(self) -> torch.Tensor:
        """One iteration; returns the loss (a tensor: reading its value would sync, so the timed loop does not)."""
        if self.cuda_graph:
            if self.graph is None:
                self.graph = CudaGraphStep(self)
            return self.graph.replay()
        return self.iteration()

    def load(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """A loaded batch copied into the step's own input and target tensors (`--data`): compiled code, channels-last
        inputs and a captured CUDA graph keep reading the same buffers. Asynchronous from pinned memory."""
        self.inputs.copy_(inputs, non_blocking=True)
        self.targets.copy_(targets, non_blocking=True)

    def iteration(self, forward: Callable | None = None) -> torch.Tensor:
        # Timed: no host-device syncs here (.item(), printing, checks); the timer calls sync() itself.
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast(), _kernels_exist(self.precision):
            loss = self.loss_fn((forward or self.forward)(self.inputs), self.targets)
        if self.scaler is None:
            loss.backward()
            self._clip()
            self.optimizer.step()
            return loss.detach()
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
        self._clip()
        self.scaler.step(self.optimizer)  # skipped when a gradient overflowed
        self.scaler.update()
        return loss.detach()

    def _clip(self) -> None:
        if self.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.trainable, self.clip_grad_norm)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type == "mps":
            torch.mps.synchronize()

    def device_clock(self) -> CudaEvents | None:
        """CUDA events on the stream the step runs on (CUDA graphs replay there too); None elsewhere: a CPU step is
        over when it returns, and MPS is synchronized every step."""
        return CudaEvents(self.device) if self.device.type == "cuda" else None

    def count_flops(self) -> dict[str, Any] | None:
        """FLOPs of one step of the model's own work, split by the dtype the products ran in.

        Counted on the eager module without checkpointing (the counter does not see inside compiled code, and
        recomputed activations are not model work). The optimizer's element-wise update is not a matrix product, so
        it counts zero."""
        with unfused_rnns(self.model), no_checkpointing(), DtypeFlopCounter() as counter:
            if self._counted_step_is_the_step():  # the live tensor bytes of the same step, for memory_of_step
                with LiveTensorBytes(self._existing_tensors()) as live:
                    self.iteration(self.model)
                self._live_peak = live.peak
            else:
                self.iteration(self.model)  # a model the counter cannot trace raises: the worker notes why, no figure
        self.sync()
        return {"flops_per_step": counter.total, "flops_by_dtype": counter.by_dtype}

    def _counted_step_is_the_step(self) -> bool:
        """Whether the step FLOPs are counted on is the very step memory_of_step traces: eager, on a device whose
        memory is read from tensors (not CUDA's allocator), no RNN run unfused for the count, no checkpointing
        turned off for it. Then one traced step gives both figures (a traced step costs a few plain ones)."""
        rnn = any(isinstance(m, torch.nn.RNNBase) for m in self.model.modules())
        checkpointed = "checkpoint" in self.mode_settings
        return self.device.type != "cuda" and not (self.compiles or self.cuda_graph or rnn or checkpointed)

    def memory_of_step(self, retrace: bool = False) -> dict[str, int]:
        """Peak memory of untimed steps, each figure labelled: the CUDA allocator's own peak; on other devices the
        live tensor bytes (eager steps only: TorchDynamo runs a step eagerly while a dispatch mode is active, so
        a compiled model cannot be traced this way) and the process's resident-set peak during one step.
        `retrace`: trace a step anew even when the FLOP count traced one (a wrapper whose step is not that one)."""
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.step()
            self.sync()
            return {"cuda_allocator_peak_bytes": torch.cuda.max_memory_allocated(self.device)}
        figures = {}
        traced, self._live_peak = self._live_peak, None
        if traced is not None and not retrace:  # traced with the FLOP count, the same step
            figures["live_tensor_peak_bytes"] = traced
        elif not self.compiles:
            with LiveTensorBytes(self._existing_tensors()) as live:
                self.step()
            self.sync()
            figures["live_tensor_peak_bytes"] = live.peak
        if system.reset_rss_hwm():
            self.step()
            self.sync()
            figures["process_rss_peak_bytes"] = system.rss_hwm_bytes()
        return figures

    def _existing_tensors(self) -> Iterator[torch.Tensor]:
        # A generator, so the tracker does not hold last step's gradients alive after zero_grad drops them.
        yield from self.model.parameters()
        yield from (p.grad for p in self.model.parameters() if p.grad is not None)
        yield from self.model.buffers()
        yield from tensors_in(list(self.optimizer.state.values()))
        yield from tensors_in((self.inputs, self.targets))

    def compile_stats(self) -> dict[str, Any]:
        """What TorchDynamo did so far in this process: graphs, graph breaks with their reasons, frames compiled."""
        if not self.compiles or self.cuda_graph:
            return {}
        from torch._dynamo.utils import counters

        breaks = counters["graph_break"]
        return {
            "graphs": counters["stats"]["unique_graphs"],
            "graph_breaks": sum(breaks.values()),
            "graph_break_reasons": [reason.splitlines()[0][:200] for reason in list(breaks)[:5]],
            "frames_compiled": counters["frames"]["ok"],
            # hits would mean compiled code was reused from a warm cache: each cell gets its own, empty one
            "cache_hits": counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"],
        }

    def settings(self) -> dict[str, Any]:
        info = describe_device(self.device)
        device = {"device": info.pop("name"), **{f"device_{k}": v for k, v in info.items()}}
        optimizer = {f"optimizer_{k}": self.optimizer.defaults.get(k) for k in ("foreach", "fused")}
        return {**thread_settings(), **device, **_kernel_settings(self.device), **optimizer, **self.mode_settings}


@contextlib.contextmanager
def _kernels_exist(precision: str) -> Iterator[None]:
    """oneDNN refuses a dtype it has no kernel for on this CPU (an fp16 LSTM, seen on CPUs with AVX512-FP16 and
    without): the mode's precision does not apply here, which is `unsupported` with the reason, naming the precision,
    not a failure. Costs nothing while no exception is raised."""
    try:
        yield
    except RuntimeError as exc:
        if "could not create a primitive" not in str(exc):
            raise
        why = str(exc).split(".")[0]
        raise NotImplementedError(f"{precision}: no {precision} kernel for this op on this device ({why})") from exc


class CudaGraphStep:
    """The whole train step captured as one CUDA graph and replayed: one launch instead of hundreds.

    As the CUDA-graphs documentation prescribes: warm up on a side stream (so lazily created optimizer state and
    cuDNN workspaces exist before capture), capture with gradients set to None so backward allocates them from the
    graph's private pool, then replay on the same static input and target tensors."""

    WARMUP_STEPS = 3

    def __init__(self, step: TorchStep) -> None:
        side = torch.cuda.Stream(step.device)
        side.wait_stream(torch.cuda.current_stream(step.device))
        with torch.cuda.stream(side):
            for _ in range(self.WARMUP_STEPS):
                step.iteration()
        torch.cuda.current_stream(step.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        step.optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.loss = step.iteration()

    def replay(self) -> torch.Tensor:
        self.graph.replay()
        return self.loss


DATA_SEED = 10_000  # the batch is the same whatever `seed` initialized the weights


def build(workload: Workload, device: str, mode: str, *, seed: int = 0, nvtx: bool = False) -> TorchStep:
    """The train step of `workload` on `device` in `mode`, weights initialized from `seed` (the same weights and data
    in every cell); with `nvtx` (`--nvtx`), its phases in NVTX ranges. NotImplementedError (recorded as
    `unsupported`, with the reason) when the mode does not apply to this workload or device."""
    components = set(mode_components(mode))
    dev = torch.device(device)
    _check_modes(mode, dev)
    _set_tf32(dev, Mode.TF32 in components)
    if workload.arch == "user":
        step = _build_user(workload, dev, seed)
    else:
        torch.manual_seed(seed)
        model = build_model(workload).to(dev)
        torch.manual_seed(DATA_SEED)
        batch = synthetic_batch(workload, dev)
        optimizer = _optimizer(workload.optimizer, model.parameters())
        step = TorchStep(model, batch, cross_entropy, optimizer, workload.optimizer.clip_grad_norm, dev)
    if Mode.CHANNELS_LAST in components:
        _channels_last(step, workload.name)
    if Mode.CHECKPOINT in components:
        _checkpoint(step, workload.name)
    for impl in (Mode.FOREACH, Mode.FUSED):
        if impl in components:
            _optimizer_implementation(step, impl.value)
    for precision, dtype in AUTOCAST_DTYPES.items():
        if precision in components:
            _autocast(step, dtype, scaled=precision is Mode.FP16)
    if Mode.DATA_PARALLEL in components:
        _data_parallel(step)
    if Mode.COMPILE in components:
        _compile(step, cuda_graphs=Mode.CUDA_GRAPHS in components)
    elif Mode.CUDA_GRAPHS in components:
        _cuda_graphs(step)
    if nvtx:  # last: the ranges wrap what the modes made (the compiled forward, the rebuilt optimizer)
        step.mode_settings["nvtx"] = nvtx_ranges.put_on(step)
    return step


def _check_modes(mode: str, device: torch.device) -> None:
    """NotImplementedError (the cell is `unsupported`) for a component this backend lacks, one that does not run on
    this device (the modes table says where each runs), or a combination it does not measure."""
    check_mode("torch", MODES, mode, {})
    check_device(mode, DeviceKind(device.type), torch.cuda.device_count() if device.type == "cuda" else 0)
    components = set(mode_components(mode))
    if Mode.DATA_PARALLEL in components and components & {Mode.COMPILE, Mode.CUDA_GRAPHS, Mode.CHECKPOINT}:
        raise NotImplementedError("dataparallel with compile, cuda_graphs or checkpoint is not measured")


def _data_parallel(step: TorchStep) -> None:
    """torch.nn.DataParallel over every visible GPU: each step scatters the batch from the cell's GPU, replicates
    the model, gathers the outputs there; one process, one Python thread per GPU."""
    step.forward = torch.nn.DataParallel(step.model, device_ids=list(range(torch.cuda.device_count())),
                                         output_device=step.device)  # fmt: skip
    step.mode_settings["data_parallel_gpus"] = torch.cuda.device_count()


def _set_tf32(device: torch.device, on: bool) -> None:
    """fp32 means fp32: TensorFloat-32 products only in the tf32 mode (cuDNN convolutions default to TF32)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on


def _channels_last(step: TorchStep, name: str) -> None:
    """NHWC activations and weights: what oneDNN and cuDNN's fastest convolution kernels want."""
    has_conv = any(isinstance(m, torch.nn.Conv2d) for m in step.model.modules())
    if not has_conv or not isinstance(step.inputs, torch.Tensor) or step.inputs.dim() != 4:
        raise NotImplementedError(
            f"channels_last applies to 2-d convolutional networks on image batches; {name} has no Conv2d on a 4-d input"
        )
    step.model.to(memory_format=torch.channels_last)  # parameters keep their identity: the optimizer still has them
    step.inputs = step.inputs.contiguous(memory_format=torch.channels_last)


class _Checkpointing:
    active = True  # switched off while FLOPs are counted: recomputation is not model work


@contextlib.contextmanager
def no_checkpointing() -> Iterator[None]:
    saved, _Checkpointing.active = _Checkpointing.active, False
    try:
        yield
    finally:
        _Checkpointing.active = saved


MIN_CHECKPOINT_BLOCKS = 3


def _checkpoint(step: TorchStep, name: str) -> None:
    """Gradient checkpointing of the model's trunk: its largest nn.Sequential, split into about sqrt(n) segments
    whose inner activations are recomputed in backward instead of kept (the classic memory-optimal split)."""
    trunk_name, trunk, blocks = _trunk(step.model)
    if len(blocks) < MIN_CHECKPOINT_BLOCKS:
        raise NotImplementedError(
            f"checkpoint needs a sequential trunk of at least {MIN_CHECKPOINT_BLOCKS} blocks (an nn.Sequential); "
            f"{name} has none"
        )
    segments = max(2, round(math.sqrt(len(blocks))))
    eager = trunk.forward

    def forward(x: torch.Tensor) -> torch.Tensor:
        if not (_Checkpointing.active and torch.is_grad_enabled()):
            return eager(x)
        return checkpoint_sequential(blocks, segments, x, use_reentrant=False)

    trunk.forward = forward  # nn.Module.__call__ looks up the instance attribute first
    step.mode_settings["checkpoint"] = {"module": trunk_name or "(model)", "blocks": len(blocks), "segments": segments}


def _trunk(model: torch.nn.Module) -> tuple[str, torch.nn.Module | None, list[torch.nn.Module]]:
    """The nn.Sequential spanning the most modules (a ResNet's stack of blocks, not one block's layers), and its
    blocks, nested Sequentials flattened."""
    best: tuple[str, torch.nn.Module | None, list[torch.nn.Module]] = ("", None, [])
    span = 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Sequential) and sum(1 for _ in module.modules()) > span:
            span = sum(1 for _ in module.modules())
            best = (name, module, _flatten(module))
    return best


def _flatten(seq: torch.nn.Sequential) -> list[torch.nn.Module]:
    return [b for m in seq for b in (_flatten(m) if isinstance(m, torch.nn.Sequential) else [m])]


def _optimizer_implementation(step: TorchStep, impl: str) -> None:
    """Rebuild the optimizer (still without state) with `foreach=True` or `fused=True`."""
    opt = step.optimizer
    cls = type(opt)
    groups = [{k: v for k, v in g.items() if k not in ("foreach", "fused")} for g in opt.param_groups]
    defaults = {k: v for k, v in opt.defaults.items() if k not in ("foreach", "fused")}
    try:
        step.optimizer = cls(groups, **defaults, **{impl: True})
    except (TypeError, RuntimeError, ValueError) as exc:
        raise NotImplementedError(f"{impl}: {cls.__name__} on {step.device.type} does not support it ({exc})") from exc


def _autocast(step: TorchStep, dtype: torch.dtype, *, scaled: bool) -> None:
    """Mixed precision: forward and loss under autocast; weights, gradients and the update stay fp32."""
    device_type = step.device.type
    try:
        with torch.autocast(device_type, dtype=dtype):
            pass
    except (RuntimeError, ValueError) as exc:  # e.g. a dtype the device's autocast does not support
        raise NotImplementedError(f"{dtype} autocast is not supported on {device_type}: {exc}") from exc
    step.autocast = partial(torch.autocast, device_type, dtype=dtype)
    step.precision = next(m.value for m, d in AUTOCAST_DTYPES.items() if d == dtype)
    if scaled:
        step.scaler = torch.amp.GradScaler(device_type)


def _compile(step: TorchStep, *, cuda_graphs: bool) -> None:
    """torch.compile of the model (forward and, through AOTAutograd, backward); the first step compiles.
    With cuda_graphs, Inductor's own CUDA-graph trees ("reduce-overhead")."""
    compile_mode = "reduce-overhead" if cuda_graphs else "default"
    step.forward = torch.compile(step.model, mode=compile_mode)
    step.compiles = True
    step.mode_settings["compile_mode"] = compile_mode


def _cuda_graphs(step: TorchStep) -> None:
    if step.scaler is not None:
        raise NotImplementedError("cuda_graphs cannot capture fp16 gradient scaling: it checks overflow on the host")
    step.cuda_graph = step.compiles = True


def loss_check(
    workload: Workload,
    device: str,
    mode: str,
    *,
    steps: int = losscheck.STEPS,
    batch: int = losscheck.BATCH,
    seeds: int = losscheck.SEEDS,
) -> dict[str, Any]:
    """Does `mode` still train like fp32? `mode` and fp32 train on one batch of at most `batch` samples (see
    `losscheck`); a JSON-ready verdict with the measured figures. NotImplementedError from `build` (the mode does not
    apply) propagates before any training."""
    small = dataclasses.replace(workload, batch=min(workload.batch, batch))
    result = losscheck.check(
        lambda seed: build(small, device, "fp32", seed=seed),
        lambda seed: build(small, device, mode, seed=seed),
        steps=steps,
        seeds=seeds,
        rounding=losscheck.rounding_dtype(mode),
    )
    return {**result, "batch": small.batch}


def profile(train: TorchStep, steps: int, trace_path: str | None, max_trace_bytes: int) -> dict[str, Any]:
    """Where `steps` steady steps' time goes, by torch.profiler (`profiler.profile`): the fields of
    `dlperf.protocol.Profiled`."""
    return profiler.profile(train, steps, trace_path, max_trace_bytes)


def synthetic_batch(workload: Workload, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Random inputs and labels of the workload's shapes, made once, on the device."""
    shape = (workload.batch, *workload.input.shape)
    if workload.input.kind == "tokens":
        tokens = torch.randint(workload.input.vocab, shape, device=device)  # (B, T)
        return tokens, torch.randint(workload.outputs, shape, device=device)  # a target per position, (B, T)
    return torch.randn(shape, device=device), torch.randint(workload.outputs, (workload.batch,), device=device)


AUX_LOSS_WEIGHT = 0.4  # an auxiliary classifier's share of the loss (Inception-v3, as its training recipes weigh it)


def cross_entropy(logits: torch.Tensor | tuple[torch.Tensor, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
    """Mean softmax cross-entropy over every prediction: (B, K) with (B,), or per token (B, T, V) with (B, T). A
    model with an auxiliary classifier (Inception-v3 in training mode) gives (logits, auxiliary logits): the
    auxiliary term is added, weighed by AUX_LOSS_WEIGHT."""
    if isinstance(logits, tuple):
        main, aux = logits
        return cross_entropy(main, targets) + AUX_LOSS_WEIGHT * cross_entropy(aux, targets)
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten())


def _optimizer(spec: OptimizerSpec, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    match spec.name:
        case "sgd":
            return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum)
        case "adam":  # GNMT's (DeepLearningExamples)
            return torch.optim.Adam(params, lr=spec.lr)
        case "rmsprop":  # Keras's mnist_mlp: its decay rate is 0.9 where torch's default is 0.99
            return torch.optim.RMSprop(params, lr=spec.lr, alpha=0.9)
    raise NotImplementedError(f"optimizer {spec.name!r} is not implemented by the torch backend")


def _build_user(workload: Workload, device: torch.device, seed: int) -> TorchStep:
    torch.manual_seed(seed)
    user = _load_user(workload.source)
    model = user.model.to(device).train()
    torch.manual_seed(DATA_SEED)
    batch = user.make_batch(workload.batch, device)  # the planned batch size (the factory's, unless swept)
    make_optimizer: Callable = user.optimizer or partial(torch.optim.SGD, lr=0.01)
    optimizer = make_optimizer(model.parameters())  # after .to(device), so its state lives there too
    step = TorchStep(model, batch, user.loss, optimizer, user.clip_grad_norm, device)
    step.user = user
    return step


def loader(workload: Workload, data: str, setting: LoaderSetting, device: str, train: TorchStep | None = None):
    """The DataLoader of a loader cell (`data.loader`); a user workload's from the step `train` built of it."""
    from dlperf.frameworks.torch import data as datasets

    user = (train.user if train is not None else None) or (_load_user(workload.source) if workload.is_user else None)
    return datasets.loader(workload, data, setting, torch.device(device), user)


def h2d(batch: Any, device: str) -> dict[str, Any]:
    """One loaded batch's copy to the GPU, pageable against pinned, blocking against not (`data.h2d`)."""
    from dlperf.frameworks.torch import data as datasets

    return datasets.h2d(batch, torch.device(device))


def training_parts(workload: str, device: str = "cpu") -> tuple:
    """(model, optimizer, loss_fn, x, y): what dlperf trains for `workload` (a built-in name, or a factory
    `file.py:make`) in fp32 eager on `device`, the user's own optimizer included. `dlperf optimize`'s recipe starts
    from these, so it runs as printed; in one's own code, one's own objects take their place."""
    from dlperf.workloads import BUILTIN
    from dlperf.workloads.user import looks_like_source, normalize_source

    if workload in BUILTIN:
        chosen = BUILTIN[workload]
    elif looks_like_source(workload):
        source = normalize_source(workload)
        user = _load_user(source)
        chosen = Workload(user.name, "user", {}, InputSpec("user", ()), 0, user.batch_size, OptimizerSpec("user"),
                          source=source)  # fmt: skip
    else:
        raise UsageError(f"{workload!r}: neither a built-in workload nor a factory (file.py:make)")
    step = build(chosen, device, "fp32")
    return step.model, step.optimizer, step.loss_fn, step.inputs, step.targets


def _load_user(source: str | None) -> UserWorkload:
    if source is None:
        raise ValueError("a user workload needs its source (file.py:factory)")
    user = build_user_workload(source)
    if user.framework != "torch":
        raise UsageError(f"--workloads {source!r}: the factory describes a {user.framework} model, not a torch one")
    return user


# ----------------------------------------------------------------------------------------------------------------------
# The probe


def probe(request: dict[str, Any]) -> dict[str, Any]:
    """Answer the parent's question in JSON-ready values. UsageError (a bad user factory) propagates."""
    what = request.get("what")
    if what == "env":
        return probe_env()
    if what == "workload":
        return probe_workload(request["source"])
    if what == "data":
        return {w["name"]: probe_data(Workload.from_json(w), request["data"]) for w in request["workloads"]}
    if what == "ops":  # the GPU predictor's operator counts
        return {"counts": [op_count(Workload.from_json(r["workload"]), r["mode"], int(r["batch"]))
                           for r in request["requests"]]}  # fmt: skip
    raise ValueError(f"unknown probe request {what!r}")


OP_COUNT_PRECISIONS = {"fp32": None, "tf32": None, "bf16": Mode.BF16, "fp16": Mode.FP16}  # tf32: the GPU's peak only


def op_count(workload: Workload, mode: str, batch: int) -> dict[str, Any]:
    """One training step of `workload` at `batch` in `mode`, its operators counted on fake tensors (`opcount`), as
    `dlperf.predict.ops.Count` JSON. Built as the worker builds it on the CPU, with the optimizer's foreach
    implementation (torch's default on CUDA) and the mode's autocast on the CPU (it follows the tensors' device);
    never run. A step that cannot run on fake tensors (a user's model that reads its values) answers {"workload",
    "mode", "batch", "error"} instead: one such row must not cost the others of the request."""
    if mode not in OP_COUNT_PRECISIONS:
        raise ValueError(f"op count: unknown mode {mode!r} (one of {', '.join(OP_COUNT_PRECISIONS)})")
    precision = OP_COUNT_PRECISIONS[mode]
    try:
        step = build(dataclasses.replace(workload, batch=batch), "cpu", "fp32")
        with contextlib.suppress(NotImplementedError):  # a user's optimizer without foreach: counted as it is
            _optimizer_implementation(step, Mode.FOREACH.value)
        if precision is not None:
            _autocast(step, AUTOCAST_DTYPES[precision], scaled=precision is Mode.FP16)
        input_bytes = sum(nbytes(t) for t in tensors_in((step.inputs, step.targets)))
        ops = count_ops(step)
    except (NotImplementedError, RuntimeError) as exc:
        return {"workload": workload.name, "mode": mode, "batch": batch, "error": f"{type(exc).__name__}: {exc}"}
    return {"workload": workload.name, "mode": mode, "batch": batch, "ops": [op.to_json() for op in ops],
            "input_bytes": input_bytes, "params": step.params}  # fmt: skip


def probe_data(workload: Workload, data: str) -> dict[str, Any]:
    """A loader cell's data, checked before the run is created: opened, one sample read (`data.check`)."""
    from dlperf.frameworks.torch import data as datasets

    return datasets.check(workload, data, _load_user(workload.source) if workload.is_user else None)


def probe_env() -> dict[str, Any]:
    return {
        "framework": "torch",
        "version": torch.__version__,
        "build": {
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "debug": torch.version.debug,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        },
        "devices": devices(),
        "precision_speed": {"cpu": precision_speed()},
    }


def precision_speed(size: int = 256, repeats: int = 3) -> dict[str, float]:
    """bf16 and fp16 matrix products' speed on the CPU relative to fp32 (above 1: faster), the best of a few
    products each: whether a reduced-precision mode can pay on this CPU, measured before a sweep spends time on it
    (without native bf16, oneDNN emulates it many times slower than fp32; fp16 matmul on a CPU is often slower
    still). A fraction of a second at one thread."""
    base = torch.randn(size, size)
    best = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
        x = base.to(dtype)
        torch.mm(x, x)  # the first product picks and prepares its kernel
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            torch.mm(x, x)
            times.append(time.perf_counter() - start)
        best[name] = min(times)
    return {name: round(best["fp32"] / t, 3) for name, t in best.items() if name != "fp32"}


def devices() -> list[dict[str, Any]]:
    found = [{"name": "cpu"}]
    if torch.cuda.is_available():
        found += [describe_device(torch.device("cuda", i)) for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        found.append({"name": "mps"})
    return found


def probe_workload(source: str) -> dict[str, Any]:
    """Build the user's workload on CPU and describe it. The model never runs here: a forward that crashes, hangs or
    exhausts memory must fail its own cell in a worker, not the planning of the whole sweep."""
    torch.manual_seed(0)
    user = _load_user(source)
    return {
        "name": user.name,
        "framework": user.framework,
        "params": sum(p.numel() for p in user.model.parameters() if p.requires_grad),
        "batch": user.batch_size,
        "clip_grad_norm": user.clip_grad_norm,
        **_input_of(user),
    }


def _input_of(user: UserWorkload) -> dict[str, Any]:
    """Per-sample shape and dtype of the input, from one small batch (None if it is not a single tensor)."""
    try:
        inputs, _ = user.make_batch(1, torch.device("cpu"))
    except Exception as exc:  # e.g. a batch maker written for the GPU only: the workers will tell
        return {"input_shape": None, "input_dtype": None, "batch_error": f"{type(exc).__name__}: {exc}"}
    if not isinstance(inputs, torch.Tensor):
        return {"input_shape": None, "input_dtype": None}
    return {"input_shape": list(inputs.shape[1:]), "input_dtype": str(inputs.dtype).removeprefix("torch.")}
