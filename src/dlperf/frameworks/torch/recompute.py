"""The `checkpoint` mode: gradient checkpointing of a model's trunk, with torch.utils.checkpoint. The trunk is the
container spanning the most modules: an nn.Sequential (a ResNet's stack of blocks), split into about sqrt(n) segments
(the classic memory-optimal split), or an nn.ModuleList of blocks (a transformer's layers), each block checkpointed on
its own, as Hugging Face's gradient checkpointing does. Either way the blocks' inner activations are recomputed in
backward instead of kept.

Part of the PyTorch backend (`build.py` applies it), imported only in child processes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

from dlperf.frameworks.torch.step import Checkpointing, TorchStep

MIN_CHECKPOINT_BLOCKS = 3
NEED = (
    f"checkpoint needs an nn.Sequential of {MIN_CHECKPOINT_BLOCKS} or more modules, or an nn.ModuleList of "
    f"{MIN_CHECKPOINT_BLOCKS} or more blocks (modules made of modules), to recompute in backward"
)


@dataclass(frozen=True)
class Trunk:
    """A container of the model and its blocks: an nn.Sequential's modules (nested ones flattened), or an
    nn.ModuleList's blocks (its modules made of modules: a single layer keeps no more than checkpointing would)."""

    name: str  # "" the model itself
    module: torch.nn.Module
    blocks: list[torch.nn.Module] = field(default_factory=list)

    @property
    def listed(self) -> bool:
        return isinstance(self.module, torch.nn.ModuleList)

    @property
    def span(self) -> int:
        return sum(1 for b in self.blocks for _ in b.modules())


def apply(step: TorchStep, name: str, *, user: bool = False) -> None:
    """Checkpoint `step`'s model (named `name`; `user`: a user's model, whose refusal says what to change). Not while
    FLOPs are counted (`Checkpointing.active`): recomputation is not model work. NotImplementedError without a trunk
    of MIN_CHECKPOINT_BLOCKS blocks or more."""
    trunk = find_trunk(step.model)
    if trunk is None or len(trunk.blocks) < MIN_CHECKPOINT_BLOCKS:
        raise NotImplementedError(refusal(name, trunk, user))
    if trunk.listed:
        for block in trunk.blocks:
            block.forward = _each_call(block.forward)  # nn.Module.__call__ looks up the instance attribute first
        segments = len(trunk.blocks)
    else:
        segments = max(2, round(math.sqrt(len(trunk.blocks))))
        trunk.module.forward = _segmented(trunk.module.forward, trunk.blocks, segments)
    step.mode_settings["checkpoint"] = {"module": trunk.name or "(model)", "blocks": len(trunk.blocks),
                                        "segments": segments}  # fmt: skip


def _each_call(eager: Any) -> Any:
    def forward(*args: Any, **kwargs: Any) -> Any:
        if not (Checkpointing.active and torch.is_grad_enabled()):
            return eager(*args, **kwargs)
        return checkpoint(eager, *args, use_reentrant=False, **kwargs)

    return forward


def _segmented(eager: Any, blocks: list[torch.nn.Module], segments: int) -> Any:
    def forward(x: torch.Tensor) -> torch.Tensor:
        if not (Checkpointing.active and torch.is_grad_enabled()):
            return eager(x)
        return checkpoint_sequential(blocks, segments, x, use_reentrant=False)

    return forward


def find_trunk(model: torch.nn.Module) -> Trunk | None:
    """The container spanning the most modules among those of MIN_CHECKPOINT_BLOCKS blocks or more (a ResNet's stack
    of blocks, not one block's layers); without one, the largest of fewer (for the refusal); None: no nn.Sequential
    and no nn.ModuleList of blocks. Each of fewer blocks saves nothing: the peak is one block's recomputation."""
    found = [
        Trunk(name, module, _flatten(module) if isinstance(module, torch.nn.Sequential) else _blocks(module))
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Sequential | torch.nn.ModuleList)
    ]
    found = [t for t in found if not t.listed or t.blocks]
    enough = [t for t in found if len(t.blocks) >= MIN_CHECKPOINT_BLOCKS]
    return max(enough or found, key=lambda t: t.span, default=None)


def _flatten(seq: torch.nn.Sequential) -> list[torch.nn.Module]:
    return [b for m in seq for b in (_flatten(m) if isinstance(m, torch.nn.Sequential) else [m])]


def _blocks(modules: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in modules if next(m.children(), None) is not None]


def refusal(name: str, trunk: Trunk | None, user: bool) -> str:
    """Why `checkpoint` refuses a model whose largest trunk (None: none) has too few blocks, in the model's terms;
    for a user's model, what to change. A user's nn.Sequential of two linear layers reads "my-linear's largest
    nn.Sequential, the model itself, has 2"."""
    has = f"{name} has neither"
    change = "put its layers in an nn.Sequential, or its blocks in an nn.ModuleList, that forward calls"
    if trunk is not None:
        kind = "nn.ModuleList" if trunk.listed else "nn.Sequential"
        has = f"{name}'s largest {kind}, {f'its {trunk.name!r}' if trunk.name else 'the model itself'}, has "
        has += f"{len(trunk.blocks)}" + (" blocks" if trunk.listed else "")
        parts = "blocks" if trunk.listed else "layers"
        change = f"put {MIN_CHECKPOINT_BLOCKS} or more of its {parts} in one {kind} that forward calls"
    return f"{NEED}: {has}" + (f"; to checkpoint it, {change}" if user else "")
