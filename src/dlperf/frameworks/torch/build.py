"""A cell's PyTorch train step built: the workload's model, batch and optimizer (or a user's own), then each component
of the mode applied to it: TensorFloat-32, channels-last, gradient checkpointing, the optimizer's foreach or fused
implementation, autocast (fp16 with a gradient scaler), DataParallel, torch.compile, CUDA graphs, NVTX ranges. The
allocator's modes are the process's, set by the worker before the framework is imported (`common/heap.py`).

Part of the PyTorch backend (`backend.py`), imported only in child processes. The mode components implemented are
this backend's row of `frameworks.common.capabilities`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from dlperf.frameworks import check_mode
from dlperf.frameworks.common import capabilities
from dlperf.frameworks.torch import nvtx as nvtx_ranges
from dlperf.frameworks.torch import recompute
from dlperf.frameworks.torch.models import build_model
from dlperf.frameworks.torch.optimizers import NoSuchArgument, rebuild_optimizer
from dlperf.frameworks.torch.step import (
    TorchStep,
    cross_entropy,
    data_seeded,
    make_optimizer,
    synthetic_batch,
)
from dlperf.frameworks.torch.user import build_user, scripted
from dlperf.modes import Mode, check_device, mode_components
from dlperf.vocab import DeviceKind, Framework
from dlperf.workloads.base import Workload

MODES = capabilities.of(Framework.TORCH).modes  # mode components this backend implements (dlperf.modes)
AUTOCAST_DTYPES = {Mode.BF16: torch.bfloat16, Mode.FP16: torch.float16}


def build(workload: Workload, device: str, mode: str, *, seed: int | None = 0, nvtx: bool = False) -> TorchStep:
    """The train step of `workload` on `device` in `mode`, weights initialized from `seed` (the same weights and data
    in every cell; None: drawn from torch's generator as the caller left it, which is then left as after those
    draws, `training_parts`); with `nvtx` (`--nvtx`), its phases in NVTX ranges. NotImplementedError (recorded as
    `unsupported`, with the reason) when the mode does not apply to this workload or device."""
    components = set(mode_components(mode))
    dev = torch.device(device)
    _check_modes(mode, dev)
    _set_tf32(dev, Mode.TF32 in components)
    step = build_user(workload, dev, seed) if workload.arch == "user" else _builtin(workload, dev, seed)
    _apply(step, components, workload.name, user=workload.arch == "user")
    if nvtx:  # last: the ranges wrap what the modes made (the compiled forward, the rebuilt optimizer)
        step.mode_settings["nvtx"] = nvtx_ranges.put_on(step)
    return step


def _builtin(workload: Workload, device: torch.device, seed: int | None) -> TorchStep:
    if seed is not None:
        torch.manual_seed(seed)
    model = build_model(workload).to(device)
    with data_seeded(device, callers=seed is None):
        batch = synthetic_batch(workload, device)
    optimizer = make_optimizer(workload.optimizer, model.parameters())
    return TorchStep(model, batch, cross_entropy, optimizer, workload.optimizer.clip_grad_norm, device)


def _apply(step: TorchStep, components: set[Mode], name: str, *, user: bool = False) -> None:
    """The mode's components applied to `step`, in a fixed order (CUDA graphs after autocast: they refuse fp16's
    gradient scaler); `user`: a user's model (a refusal says what to change in it)."""
    for part in components & {Mode.CHECKPOINT, Mode.COMPILE} if user else ():
        if why := scripted(step.model, name, part.value):
            raise NotImplementedError(why)
    if Mode.CHANNELS_LAST in components:
        _channels_last(step, name)
    if Mode.CHECKPOINT in components:
        recompute.apply(step, name, user=user)
    for impl in (Mode.FOREACH, Mode.FUSED):
        if impl in components:
            set_optimizer_implementation(step, impl.value)
    for precision, dtype in AUTOCAST_DTYPES.items():
        if precision in components:
            set_autocast(step, dtype, scaled=precision is Mode.FP16)
    if Mode.DATA_PARALLEL in components:
        _data_parallel(step)
    if Mode.COMPILE in components:
        _compile(step, cuda_graphs=Mode.CUDA_GRAPHS in components)
    elif Mode.CUDA_GRAPHS in components:
        _cuda_graphs(step)


def _check_modes(mode: str, device: torch.device) -> None:
    """NotImplementedError (the cell is `unsupported`) for a component this backend lacks, one that does not run on
    this device (the modes table says where each runs), or a combination it does not measure."""
    check_mode(Framework.TORCH, MODES, mode, {})
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


def set_optimizer_implementation(step: TorchStep, impl: str) -> None:
    """Rebuild the optimizer (still without state) with `foreach=True` or `fused=True`, the other left to torch.
    NotImplementedError either way, saying which: the optimizer has no such implementation, or its constructor
    refused it here (a device or dtype without the kernel)."""
    opt, other = step.optimizer, next(k for k in ("foreach", "fused") if k != impl)
    sparse = [n or "model" for n, m in step.model.named_modules() if getattr(m, "sparse", False) is True]
    if impl == "fused" and sparse:  # torch's fused kernels refuse them at the first update ("does not support sparse")
        raise NotImplementedError(f"fused: {type(opt).__name__}'s fused implementation takes no sparse gradients: "
                                  f"those of {', '.join(sparse[:3])} (sparse=True)")  # fmt: skip
    try:
        step.optimizer = rebuild_optimizer(opt, opt.param_groups, **{impl: True, other: None})
    except NoSuchArgument as exc:
        raise NotImplementedError(f"{impl}: {exc}") from exc
    except (TypeError, RuntimeError, ValueError) as exc:
        name = type(opt).__name__
        raise NotImplementedError(f"{impl}: {name} on {step.device.type} does not support it ({exc})") from exc


def set_autocast(step: TorchStep, dtype: torch.dtype, *, scaled: bool) -> None:
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
    if any(isinstance(m, torch.nn.RNNBase) for m in step.model.modules()):
        step.forward = _rnn_allowed(step.forward)
        step.mode_settings["dynamo_allow_rnn"] = True
    step.compiles = step.check_capture = True
    step.mode_settings["compile_mode"] = compile_mode


def _rnn_allowed(compiled: Callable) -> Callable:
    """`compiled` called with Dynamo's allow_rnn on. Off (torch's default), Dynamo skips a frame that calls an
    nn.LSTM, GRU or RNN: such a model ran eager under the compile label. The setting is read when a frame is traced,
    which may be at any call (a recompile), so it is on for each call, and for this model's calls alone."""
    config = torch._dynamo.config

    def forward(*args: Any, **kwargs: Any) -> Any:  # set and reset: 6 µs a step on 2 cores, config.patch's 20
        before, config.allow_rnn = config.allow_rnn, True
        try:
            return compiled(*args, **kwargs)
        finally:
            config.allow_rnn = before

    return forward


def _cuda_graphs(step: TorchStep) -> None:
    if step.scaler is not None:
        raise NotImplementedError("cuda_graphs cannot capture fp16 gradient scaling: it checks overflow on the host")
    step.cuda_graph = step.compiles = True
