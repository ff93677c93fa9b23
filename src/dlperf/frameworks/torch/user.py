"""A user's own PyTorch workload (`dlperf.user_workload`): its factory loaded, its step built, its shape described
for the parent's probe.

Part of the PyTorch backend (`backend.py`), imported only in child processes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from dlperf.errors import UsageError
from dlperf.frameworks.torch.step import DATA_SEED, TorchStep
from dlperf.vocab import Framework
from dlperf.workloads.base import Workload
from dlperf.workloads.user import UserWorkload, build_user_workload


def build_user(workload: Workload, device: torch.device, seed: int) -> TorchStep:
    torch.manual_seed(seed)
    user = load_user(workload.source)
    model = user.model.to(device).train()
    torch.manual_seed(DATA_SEED)
    batch = user.make_batch(workload.batch, device)  # the planned batch size (the factory's, unless swept)
    make_optimizer: Callable = user.optimizer or partial(torch.optim.SGD, lr=0.01)
    optimizer = make_optimizer(model.parameters())  # after .to(device), so its state lives there too
    step = TorchStep(model, batch, user.loss, optimizer, user.clip_grad_norm, device)
    step.user = user
    return step


def load_user(source: str | None) -> UserWorkload:
    if source is None:
        raise ValueError("a user workload needs its source (file.py:factory)")
    user = build_user_workload(source)
    if user.framework != Framework.TORCH:
        raise UsageError(f"--workloads {source!r}: the factory describes a {user.framework} model, not a torch one")
    return user


def probe_workload(source: str) -> dict[str, Any]:
    """Build the user's workload on CPU and describe it. The model never runs here: a forward that crashes, hangs or
    exhausts memory must fail its own cell in a worker, not the planning of the whole sweep."""
    torch.manual_seed(0)
    user = load_user(source)
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
