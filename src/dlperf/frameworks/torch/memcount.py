"""A training step's memory traced on fake tensors: what `dlperf predict --memory` reads (`predict/memory.py`).

The step is built as the operator count builds it (`opcount.py`: the mode's autocast, the foreach optimizer, its
state made by one warm-up update), under the fake mode where the user's factory runs so (else for real, then turned
fake), once per (workload, mode) in a process, and one steady iteration runs under `LiveTensorBytes` (the tracer
`dlperf run` measures a CPU step's live tensors with): every storage counted once from the op that made it until it
dies, so the peak is the bytes a step holds at once, no activation ever allocated. At the peak, what is alive is split
into the parameters and buffers, the optimizer's state, the batch, the gradients alive then, and the activations (the
rest: what forward saved for backward, and the temporaries of the op at the peak). Not traced: kernel workspaces and
the allocator's rounding and caching, which `predict/memory.py` adds by its stated rule.

Imports torch and dlperf's standard-library modules; the backend's builder, never the backend itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings
from functools import partial
from typing import Any

import torch
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from dlperf.frameworks.torch.build import build, set_optimizer_implementation
from dlperf.frameworks.torch.instruments import LiveTensorBytes
from dlperf.frameworks.torch.opcount import _fake, _warm_up, count_step, tensors_in, unfused_rnns
from dlperf.frameworks.torch.step import synthetic_batch
from dlperf.modes import Mode
from dlperf.workloads.base import Workload

PARTS = ("params", "optimizer", "data", "grads", "activations")


class PeakParts(LiveTensorBytes):
    """Live tensor bytes, and at the peak the bytes of the gradients alive then (the other fixed parts are known
    before the step: parameters, buffers, optimizer state and batch live throughout)."""

    def __init__(self, step, existing) -> None:
        self.trainable = list(step.trainable)
        self.grads_at_peak = 0
        self.updating = self.in_update = False  # in the optimizer's step now; at the peak
        self._hook = step.optimizer.register_step_pre_hook(self._update_starts)
        super().__init__(existing)

    def _update_starts(self, *args) -> None:
        self.updating = True

    def __exit__(self, *exc):
        self._hook.remove()
        return super().__exit__(*exc)

    def _peaked(self) -> None:
        self.grads_at_peak = storage_bytes(p.grad for p in self.trainable if p.grad is not None)
        self.in_update = self.updating  # the rest at the peak is the update's temporaries, not activations


def storage_bytes(tensors) -> int:
    """The bytes of the storages behind `tensors`, each storage once."""
    seen = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[id(s)] = s.nbytes()
    return sum(seen.values())


def memory_count(workload: Workload, mode: str, batches: list[int]) -> list[dict[str, Any]]:
    """For each batch, one steady iteration of `workload` in `mode` (fp32, tf32, bf16 or fp16, with `+checkpoint`
    for gradient checkpointing) traced on fake tensors: {"batch", "peak", and each of PARTS in bytes}. A step that
    cannot be built so (checkpoint on a model without a trunk of blocks) or run on fake tensors answers
    [{"error": why}] for every batch: the user's own error where the step fails run for real too (`own_error`); dlperf's
    refusal of the mode for this model (NotImplementedError) is marked `refused`: the same whenever it is asked again
    of the same model, which the parent keeps (a failure of the machine, out of its memory, is never so marked)."""
    try:
        step, fake = _built(workload, mode)
    except NotImplementedError as exc:
        return [{"batch": b, "error": str(exc), "refused": True} for b in batches]
    except Exception as exc:  # the user's model, whatever it raises
        return [{"batch": b, "error": _why(workload, mode, exc)} for b in batches]
    found = []
    try:
        with unfused_rnns(step.model), fake:
            for b in batches:
                step.inputs, step.targets = batch_of(workload, b, step)
                found.append(_traced(step, b))
    except Exception as exc:
        _STEPS.pop(_key(workload, mode), None)  # a trace cut short may leave the step half-way: built again if asked
        return [{"batch": b, "error": _why(workload, mode, exc)} for b in batches]
    return found


# (workload, mode) -> its step, made fake and steady, and its fake mode: a probe child is asked for one (workload,
# mode) at several batches (`predict.memory.largest`'s rounds), and builds it once; each trace starts with its
# gradients unset, as the operator count's batches do (`opcount.count_calls`)
_STEPS: dict[tuple[str, str], tuple[Any, FakeTensorMode]] = {}


def _built(workload: Workload, mode: str) -> tuple[Any, FakeTensorMode]:
    key = _key(workload, mode)
    if key not in _STEPS:
        fake = FakeTensorMode()
        built = _cpu_mode(mode)
        step = _fake_built(workload, built, fake)
        if not {Mode.FOREACH.value, Mode.FUSED.value} & set(built.split("+")):
            as_on_a_gpu(step)
        with unfused_rnns(step.model), fake:
            _fake(step, fake)  # a step built for real: its weights and batch turned fake
            _warm_up(step)
        _STEPS[key] = (step, fake)
    return _STEPS[key]


def as_on_a_gpu(step) -> None:
    """The optimizer's update as a GPU runs it: in the implementation the optimizer was given (fused=True, or
    foreach=False: one tensor at a time), else foreach, CUDA's default where none is given (this CPU's, one tensor at
    a time, is not). A user's `Adam(fused=True)` was traced foreach, its peak 1 GiB high; an optimizer without a
    foreach implementation is traced as it is (it was refused)."""
    given = getattr(step.optimizer, "defaults", {})  # a duck-typed optimizer's: none
    if given.get("foreach") is False and not given.get("fused"):
        return
    with contextlib.suppress(NotImplementedError):
        set_optimizer_implementation(step, Mode.FUSED.value if given.get("fused") else Mode.FOREACH.value)


def _cpu_mode(mode: str) -> str:
    """`mode` as the CPU builds it: tf32 is the GPU's peak only, fp32 here."""
    return "+".join("fp32" if c == "tf32" else c for c in mode.split("+"))


def _key(workload: Workload, mode: str) -> tuple[str, str]:
    return json.dumps(dataclasses.replace(workload, batch=1).to_json(), sort_keys=True), mode


def _fake_built(workload: Workload, mode: str, fake: FakeTensorMode):
    """The step at a batch of 1, built under the fake mode: its weights never allocated nor initialized (a
    1.3B-parameter model's 5 GB, 7 s each time); built for real where the user's factory cannot run on fake tensors
    (it reads a value, loads a checkpoint). The tensors' shapes, dtypes and sharing are the same either way."""
    small = dataclasses.replace(workload, batch=1)
    try:
        with fake, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a fake tensor's data pointer, read by deepcopy (nn.TransformerEncoder)
            return build(small, "cpu", mode)
    except NotImplementedError:
        raise
    except Exception:  # built again for real: what it raises then is the user's own error
        return build(small, "cpu", mode)


def _why(workload: Workload, mode: str, exc: BaseException) -> str:
    """Why the step cannot be traced, in one line: first the user's own error, at the user's line, where the step
    fails on its own too (as the operator count says it: `own_error`)."""
    return own_error(workload, mode) or uncountable(exc)


def uncountable(exc: BaseException) -> str:
    """Why a step cannot be counted or traced on fake tensors, in one line: a value read, or shapes that depend on
    values (pack_padded_sequence, nonzero, a boolean mask), named as such, with what measures such a step."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    if isinstance(exc, fake_tensor.DynamicOutputShapeException):
        return (f"its step's shapes depend on its values (pack_padded_sequence, nonzero, a boolean mask), which fake "
                f"tensors do not hold ({text}); `dlperf run` and `dlperf fit` measure it on this machine")  # fmt: skip
    if isinstance(exc, fake_tensor.DataDependentOutputException) or "data-dependent" in text.lower():
        return (f"its step reads a tensor's value (.item(), float(), a Python `if` on a tensor), which fake tensors "
                f"do not hold ({text})")  # fmt: skip
    return text


_OWN_ERRORS: dict[tuple[str, str], str | None] = {}  # (workload, mode) -> its own error (None: its step runs)


def own_error(workload: Workload, mode: str = "fp32") -> str | None:
    """What a user's step in `mode` raises on its own, in the user's words and at the user's line
    (`where_in_user_code`): a step the operator count (`probe.op_count`) or the memory trace cannot take is first the
    model's own error where it has one. Asked once per (workload, mode) in a process. The step is built and run on
    fake tensors (no weight nor activation allocated: a 1.3B-parameter model's real step at a batch of 2 held 10 GB,
    more than some machines have), at a batch of 2 (a batch of 1 fails BatchNorm's training check, no user's error);
    the failing operator is run again for real on tensors of its arguments' shapes that hold one element each, so the
    error is in the words `dlperf run` says it in. Where fake tensors cannot run the step (it reads a value, an
    operator has no fake kernel), it is run for real, on the same batch of 2."""
    if workload.arch != "user":
        return None
    key = (_key(workload, "")[0], _cpu_mode(mode))
    if key not in _OWN_ERRORS:
        _OWN_ERRORS[key] = _own_error(workload, key[1])
    return _OWN_ERRORS[key]


def _own_error(workload: Workload, mode: str) -> str | None:
    failing = _FailingOp()
    try:
        with FakeTensorMode(), failing, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a fake tensor's data pointer, read by deepcopy (nn.TransformerEncoder)
            step = build(dataclasses.replace(workload, batch=2), "cpu", mode)
            with unfused_rnns(step.model):
                count_step(step)
        return None
    except Exception as exc:
        if not _fake_only(exc):
            return _said(failing.real_error(exc), "run on fake tensors, a batch of 2")
    try:  # as the user would run it, as small as BatchNorm lets a training step go
        step = build(dataclasses.replace(workload, batch=2), "cpu", mode)
    except NotImplementedError:  # dlperf's refusal of the mode (checkpoint without a trunk of blocks): said by it
        return None
    except Exception as exc:
        return _said(exc, "run for real on a batch of 2")
    try:
        step.step()
    except Exception as exc:
        return _said(exc, "run for real on a batch of 2")
    return None


def _said(exc: BaseException, how: str) -> str:
    from dlperf.errors import where_in_user_code

    text = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    return f"the model's own step raises {text}{where_in_user_code(exc)} ({how})"


FAKE_LIMITS = (*(getattr(fake_tensor, n) for n in dir(fake_tensor) if n.endswith("Exception")), NotImplementedError)


def _fake_only(exc: BaseException) -> bool:
    """Whether `exc` (or what it was raised from) is what fake tensors cannot do, not what the step does wrong: a
    value read, an operator without a fake kernel, a tensor's data asked for."""
    while exc is not None:
        said = str(exc).lower()
        if isinstance(exc, FAKE_LIMITS) or any(w in said for w in ("fake", "subclass", "data pointer", "meta")):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class _FailingOp(TorchDispatchMode):
    """The first operator that raised under the fake mode, with its arguments: its error comes from the operator's
    fake (meta) kernel, in words of its own ('a and b must have same reduction dim' where the CPU's kernel says
    'mat1 and mat2 shapes cannot be multiplied (4x7 and 8x2)')."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: tuple | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            self.failed = self.failed or (func, args, kwargs or {})
            raise

    def real_error(self, exc: BaseException) -> BaseException:
        """`exc` in the CPU kernel's words: the failing operator run for real on tensors of its arguments' shapes and
        dtypes, each one element expanded (no memory, nothing computed before the kernel's checks); `exc` itself
        where that raises nothing or something else. The traceback stays `exc`'s: the user's line."""
        if self.failed is None or not isinstance(exc, RuntimeError):
            return exc
        func, args, kwargs = self.failed
        shaped = [t for t in tensors_in([list(args), kwargs]) if isinstance(t, torch.Tensor)]
        if sum(t.numel() for t in shaped) > 2**28:  # were the kernel to compute after all: a bounded product
            return exc
        real = partial(tree_map, lambda x: _one_element(x) if isinstance(x, torch.Tensor) else x)
        try:
            func(*real(args), **real(kwargs))
        except Exception as own:
            return own.with_traceback(exc.__traceback__) if type(own) is type(exc) else exc
        return exc


def _one_element(t: torch.Tensor) -> torch.Tensor:
    return torch.zeros((), dtype=t.dtype).expand(t.shape)


def batch_of(workload: Workload, batch: int, step) -> tuple[Any, Any]:
    """The step's batch at `batch` (made under the fake mode: no memory)."""
    cpu = torch.device("cpu")
    if workload.arch == "user":
        return step.user.make_batch(batch, cpu)
    return synthetic_batch(dataclasses.replace(workload, batch=batch), cpu)


def _traced(step, batch: int) -> dict[str, Any]:
    params = storage_bytes([*step.model.parameters(), *step.model.buffers()])
    optimizer = storage_bytes(tensors_in(list(step.optimizer.state.values())))
    data = storage_bytes(tensors_in((step.inputs, step.targets)))
    existing = [*step.model.parameters(), *step.model.buffers(), *tensors_in(list(step.optimizer.state.values())),
                *tensors_in((step.inputs, step.targets))]  # fmt: skip
    with PeakParts(step, existing) as live:
        count_step(step)
    grads = live.grads_at_peak
    activations = live.peak - params - optimizer - data - grads
    return {"batch": batch, "peak": live.peak, "params": params, "optimizer": optimizer, "data": data,
            "grads": grads, "activations": activations, "in_update": live.in_update}  # fmt: skip
