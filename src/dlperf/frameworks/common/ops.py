"""A training step's operators as the predictor reads them: what the torch probe's op count answers.

One `Op` is a group of identical calls: the same kind, dtype, work and traffic per call. The count runs once per
(workload, mode, batch) on fake tensors, so no activation is ever allocated (ResNet-50 at batch 256 counts in a few
hundred MB); `frameworks/torch/opcount.py` produces the dicts, `Op.from_json` reads them.

A step's operators are affine in the batch for most models: the same kernels in the same order at every batch, each
one's FLOPs and bytes a fixed part (its weights) plus a part per sample. `Affine.fit` finds that form from the calls
counted at two batches and checks it, exactly, at every other batch counted; `Affine.at` gives the count at any batch,
grouped as a direct count groups it, so a scaled count equals the direct one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

# memory: every other kernel (element-wise, norms, reductions, copies)
KINDS = ("matmul", "conv", "attention", "memory")
PHASES = ("forward", "backward", "optimizer")
# one kernel call as the count records it, a tuple (issued and shape: see `Op`)
CALL = ("kind", "dtype", "flops", "bytes", "launches", "phase", "issued", "shape")


@dataclass(frozen=True)
class Op:
    """`calls` identical kernels of one step.

    flops: per call, multiply-adds counted as 2 (PyTorch's FLOP counter formulas); 0 for a memory kernel.
    bytes: per call, every tensor the kernel reads plus every tensor it writes, at their dtypes.
    launches: kernels per call the GPU runs: 1 for most; a foreach op is ceil(tensors / 110) multi-tensor launches;
        an element-wise op inside a cuDNN RNN cell is 0 (cuDNN fuses a step's gate math into the kernel after its GEMM).
    issued: kernels per call the framework's host issues (its dispatch cost each): `launches` for most; 0 inside a
        cuDNN RNN, whose kernels cuDNN launches itself, one host-issued call per layer and direction standing for them
        (an op of no work, `launches` 0: forward, and backward data and weights).
    shape: a product's (batch, m, n, k), a convolution's implicit GEMM (groups, N x output pixels, output channels
        per group, input channels per group x kernel size); () where none is counted (an older count, other kinds).
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
    issued: int | None = None  # None: `launches`
    shape: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.issued is None:
            object.__setattr__(self, "issued", self.launches)
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.kind not in KINDS:
            raise ValueError(f"unknown op kind {self.kind!r}")
        if self.phase not in PHASES:
            raise ValueError(f"unknown op phase {self.phase!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Op:
        """Read back; a count written before `issued` and `shape` existed reads as one launch issued per kernel and
        no shape."""
        return cls(**{k: d[k] for k in (*CALL, "calls") if k in d})


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

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ops": [op.to_json() for op in self.ops]}


def grouped(calls: Iterable[tuple]) -> list[Op]:
    """Kernel calls (`CALL` tuples, in the order they ran) as `Op`s: identical calls one op, in first-seen order."""
    return [Op(**dict(zip(CALL, call, strict=True)), calls=n) for call, n in Counter(calls).items()]


@dataclass(frozen=True)
class Affine:
    """A step's count as a function of the batch: each kernel call's (kind, dtype, launches, phase, issued) fixed, its
    FLOPs, bytes and each dimension of its shape `a + s * batch`; `calls` lists them as (kind, dtype, flops a, flops s,
    bytes a, bytes s, launches, phase, issued, shape a, shape s, calls). `batches`: where it was counted and found
    exact (the first two fitted it)."""

    workload: str
    mode: str
    calls: tuple[tuple, ...]
    input_bytes: tuple[int, int]
    params: int
    batches: tuple[int, ...]

    @classmethod
    def fit(cls, workload: str, mode: str, params: int, points: list[tuple[int, list[tuple], int]]) -> Affine | str:
        """From (batch, its calls in order, its input bytes) at two or more batches: the form through the first two,
        if every other one is exactly on it; else why the step is not affine in the batch."""
        (b0, calls0, in0), (b1, calls1, in1) = points[:2]
        if len(calls0) != len(calls1):
            return f"not affine in the batch: {len(calls0)} kernels at batch {b0}, {len(calls1)} at batch {b1}"
        lines = []
        for c0, c1 in zip(calls0, calls1, strict=True):
            if (*c0[:2], *c0[4:7], len(c0[7])) != (*c1[:2], *c1[4:7], len(c1[7])):
                return f"not affine in the batch: another kernel at batch {b1} than at batch {b0} ({c0[0]}, {c1[0]})"
            dims = [_line(b0, d0, b1, d1) for d0, d1 in zip(c0[7], c1[7], strict=True)]
            shape = (tuple(a for a, _ in dims), tuple(s for _, s in dims))
            lines.append((*_line(b0, c0[2], b1, c1[2]), *_line(b0, c0[3], b1, c1[3]), *shape))
        if any(None in line[:4] or None in line[4] for line in lines) or None in _line(b0, in0, b1, in1):
            return (
                f"not affine in the batch: a kernel's FLOPs, bytes or shape grow by a fraction per sample ({b0}, {b1})"
            )
        grouped_calls = Counter((*c[:2], *line[:4], *c[4:7], *line[4:]) for c, line in zip(calls0, lines, strict=True))
        found = cls(workload, mode, tuple((*k, n) for k, n in grouped_calls.items()), _line(b0, in0, b1, in1),
                    params, (b0, b1))  # fmt: skip
        for batch, calls, input_bytes in points[2:]:
            if grouped(calls) != list(found.at(batch).ops) or input_bytes != found.at(batch).input_bytes:
                return f"not affine in the batch: counted at batch {batch}, the count fitted at {b0} and {b1} is off"
        return cls(workload, mode, found.calls, found.input_bytes, params, tuple(p[0] for p in points))

    def at(self, batch: int) -> Count:
        """The count at `batch`, grouped as a direct count groups it. ValueError: a figure below 0 there."""
        ops: Counter[tuple] = Counter()
        for kind, dtype, fa, fs, ba, bs, launches, phase, issued, sa, ss, n in self.calls:
            shape = tuple(a + s * batch for a, s in zip(sa, ss, strict=True))
            ops[(kind, dtype, fa + fs * batch, ba + bs * batch, launches, phase, issued, shape)] += n
        if any(k[2] < 0 or k[3] < 0 or min(k[7], default=0) < 0 for k in ops):
            raise ValueError(f"the count fitted at batches {self.batches} has a figure below 0 at batch {batch}")
        op_list = tuple(Op(**dict(zip(CALL, k, strict=True)), calls=n) for k, n in ops.items())
        a, s = self.input_bytes
        return Count(self.workload, self.mode, batch, op_list, a + s * batch, self.params)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "calls": [[*c[:9], list(c[9]), list(c[10]), c[11]] for c in self.calls]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Affine:
        """Read back; ValueError or KeyError or TypeError on a dict that is not one."""
        calls = tuple(_affine_call(c) for c in d["calls"])
        a, s = (int(v) for v in d["input_bytes"])
        batches = tuple(int(b) for b in d["batches"])
        return cls(str(d["workload"]), str(d["mode"]), calls, (a, s), int(d["params"]), batches)


def _line(b0: int, y0: int, b1: int, y1: int) -> tuple[int, int] | tuple[None, None]:
    """(a, s) with y = a + s * b through both points, in whole numbers; (None, None) where s is a fraction."""
    s, rest = divmod(y1 - y0, b1 - b0)
    return (None, None) if rest else (y0 - s * b0, s)


def _affine_call(c: list) -> tuple:
    """One call of an Affine's JSON; ValueError on another layout (an entry written by an older dlperf)."""
    kind, dtype, fa, fs, ba, bs, launches, phase, issued, sa, ss, n = c
    if kind not in KINDS or phase not in PHASES or len(sa) != len(ss):
        raise ValueError(f"not an affine call: {c!r}")
    shape = (tuple(int(a) for a in sa), tuple(int(s) for s in ss))
    return (kind, str(dtype), int(fa), int(fs), int(ba), int(bs), int(launches), phase, int(issued), *shape, int(n))
