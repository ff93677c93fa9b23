"""A training step's operators as the predictor reads them: what the torch probe's op count answers.

One `Op` is a group of identical calls: the same kind, dtype, work and traffic per call. The count runs once per
(workload, mode, batch) on fake tensors, so no activation is ever allocated (ResNet-50 at batch 256 counts in a few
hundred MB); `frameworks/torch/opcount.py` produces the dicts, `Op.from_json` reads them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# memory: every other kernel (element-wise, norms, reductions, copies)
KINDS = ("matmul", "conv", "attention", "memory")
PHASES = ("forward", "backward", "optimizer")


@dataclass(frozen=True)
class Op:
    """`calls` identical kernels of one step.

    flops: per call, multiply-adds counted as 2 (PyTorch's FLOP counter formulas); 0 for a memory kernel.
    bytes: per call, every tensor the kernel reads plus every tensor it writes, at their dtypes.
    launches: kernels per call on a GPU: 1 for most; a foreach op is ceil(tensors / 110) multi-tensor launches; an
        element-wise op inside a cuDNN RNN cell is 0 (cuDNN fuses a step's gate math into the kernel after its GEMM).
    dtype: the dtype the work runs in ("fp32", "bf16", "fp16"; for memory kernels the widest floating input).
    phase: forward (model and loss), backward, optimizer (the update, and zeroing the gradients).
    """

    kind: str
    dtype: str
    flops: int
    bytes: int
    calls: int = 1
    launches: int = 1
    phase: str = "forward"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown op kind {self.kind!r}")
        if self.phase not in PHASES:
            raise ValueError(f"unknown op phase {self.phase!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Op:
        return cls(**{k: d[k] for k in ("kind", "dtype", "flops", "bytes", "calls", "launches", "phase") if k in d})


@dataclass(frozen=True)
class Count:
    """One (workload, mode, batch)'s step as counted: its ops, the bytes of one batch of inputs and targets on the
    host (what a step copies to the device), and the parameters (for the optimizer's traffic and the memory check)."""

    workload: str
    mode: str
    batch: int
    ops: tuple[Op, ...]
    input_bytes: int
    params: int

    @property
    def flops(self) -> int:
        return sum(op.flops * op.calls for op in self.ops)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Count:
        ops = tuple(Op.from_json(o) for o in d["ops"])
        return cls(d["workload"], d["mode"], int(d["batch"]), ops, int(d["input_bytes"]), int(d["params"]))
