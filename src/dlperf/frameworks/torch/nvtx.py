"""NVTX ranges around a train step's phases (`--nvtx`), so that an Nsight Systems capture of a dlperf run shows
forward, loss, backward and optimizer apart.

Put on the step once, at build time, and only when asked, as the profiler's labels are: the step's own callables are
wrapped (the forward, the loss, the clipping, fp16's scaler) and the optimizer's step hooks used; backward is opened
by a hook on the loss's gradient and closed by a callback autograd's engine runs once backward is over. Off, nothing
is wrapped: no cost per step. On, a few host calls per step, recorded in the cell's settings.

NVTX ranges are the host's: an Nsight Systems capture shows them on a CPU cell too, so a CUDA build of torch emits
them whatever the device. A CPU-only build has no NVTX (torch.cuda.nvtx raises RuntimeError: "NVTX functions not
installed"): the step is built without ranges and its settings say so. Under cuda_graphs a replayed step is one
launch and runs no Python: the ranges exist only in the capture. The batch is fixed on the device, so no data phase
has a range yet.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.cuda import nvtx

FORWARD, LOSS, BACKWARD, OPTIMIZER = "forward", "loss", "backward", "optimizer"


def available() -> str | None:
    """None when this torch can emit NVTX ranges; otherwise why not."""
    try:
        nvtx.range_push("dlperf")
        nvtx.range_pop()
    except RuntimeError as exc:
        return f"not emitted: this torch has no NVTX ({exc})"
    return None


def put_on(step) -> str:
    """Wrap `step`'s phases (a TorchStep of step.py) in NVTX ranges; returns what its settings record."""
    if why := available():
        return why
    step.forward = ranged(FORWARD, step.forward)
    step.loss_fn = ranged(LOSS, _opening_backward(step.loss_fn))
    step._clip = ranged(OPTIMIZER, step._clip)
    step.optimizer.zero_grad = ranged(OPTIMIZER, step.optimizer.zero_grad)
    step.optimizer.register_step_pre_hook(_opening(OPTIMIZER))
    step.optimizer.register_step_post_hook(_closing)
    if step.scaler is not None:  # fp16: unscaling and the scale's update are the optimizer's, as in the profile
        step.scaler.unscale_ = ranged(OPTIMIZER, step.scaler.unscale_)
        step.scaler.update = ranged(OPTIMIZER, step.scaler.update)
    return "on: forward, loss, backward and optimizer ranges"


def _opening(label: str):
    """An optimizer pre-hook opening the range `label`. It returns None: range_push returns the range's depth (an int),
    and a pre-hook that returns anything but None or (args, kwargs) makes the optimizer's step raise."""

    def hook(*_) -> None:
        nvtx.range_push(label)

    return hook


def _closing(*_) -> None:
    nvtx.range_pop()


def ranged(label: str, fn):
    """`fn` inside an NVTX range named `label`."""

    def call(*args, **kwargs):
        nvtx.range_push(label)
        try:
            return fn(*args, **kwargs)
        finally:
            nvtx.range_pop()

    return call


def _opening_backward(loss_fn):
    """The loss function, its result hooked: the loss's gradient is the first thing backward computes, so the hook
    opens the backward range, and queues its closing at the end of the backward pass."""

    def call(*args, **kwargs):
        loss = loss_fn(*args, **kwargs)
        if isinstance(loss, torch.Tensor) and loss.requires_grad:
            loss.register_hook(_backward_starts)
        return loss

    return call


def _backward_starts(grad: Any) -> None:
    nvtx.range_push(BACKWARD)
    torch.autograd.Variable._execution_engine.queue_callback(nvtx.range_pop)
