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

import dataclasses
import json
import warnings
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from dlperf.frameworks.torch.build import build
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
        super().__init__(existing)

    def _peaked(self) -> None:
        self.grads_at_peak = storage_bytes(p.grad for p in self.trainable if p.grad is not None)


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
    cannot be built so (checkpoint on a model without a sequential trunk) or run on fake tensors answers
    [{"error": why}] for every batch: the user's own error where the step fails run for real too (`own_error`)."""
    try:
        step, fake = _built(workload, mode)
    except NotImplementedError as exc:
        return [{"batch": b, "error": str(exc)} for b in batches]
    except Exception as exc:  # the user's model, whatever it raises
        return [{"batch": b, "error": _why(workload, exc)} for b in batches]
    found = []
    try:
        with unfused_rnns(step.model), fake:
            for b in batches:
                step.inputs, step.targets = batch_of(workload, b, step)
                found.append(_traced(step, b))
    except Exception as exc:
        _STEPS.pop(_key(workload, mode), None)  # a trace cut short may leave the step half-way: built again if asked
        return [{"batch": b, "error": _why(workload, exc)} for b in batches]
    return found


# (workload, mode) -> its step, made fake and steady, and its fake mode: a probe child is asked for one (workload,
# mode) at several batches (`predict.memory.largest`'s rounds), and builds it once; each trace starts with its
# gradients unset, as the operator count's batches do (`opcount.count_calls`)
_STEPS: dict[tuple[str, str], tuple[Any, FakeTensorMode]] = {}


def _built(workload: Workload, mode: str) -> tuple[Any, FakeTensorMode]:
    key = _key(workload, mode)
    if key not in _STEPS:
        build_mode = "+".join("fp32" if c == "tf32" else c for c in mode.split("+"))  # tf32: the GPU's peak only
        fake = FakeTensorMode()
        step = _fake_built(workload, f"{build_mode}+{Mode.FOREACH.value}", fake)
        with unfused_rnns(step.model), fake:
            _fake(step, fake)  # a step built for real: its weights and batch turned fake
            _warm_up(step)
        _STEPS[key] = (step, fake)
    return _STEPS[key]


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


def _why(workload: Workload, exc: BaseException) -> str:
    """Why the step cannot be traced, in one line: first the user's own error, at the user's line, where the step
    fails run for real too (as the operator count says it: `own_error`), asked once per workload."""
    key = _key(workload, "")[0]
    if key not in _OWN_ERRORS:
        _OWN_ERRORS[key] = own_error(workload)
    return _OWN_ERRORS[key] or " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


_OWN_ERRORS: dict[str, str | None] = {}  # a workload's own error run for real (None: it runs), by workload


def own_error(workload: Workload) -> str | None:
    """What a user's step raises run for real, on a batch of 2 on the CPU, in the user's words and at the user's line
    (`where_in_user_code`): a step the operator count (`probe.op_count`) or the memory trace cannot take is first the
    model's own error where it has one."""
    from dlperf.errors import where_in_user_code

    if workload.arch != "user":
        return None
    try:
        build(dataclasses.replace(workload, batch=2), "cpu", "fp32").step()
    except Exception as exc:
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        return f"the model's own step raises {text}{where_in_user_code(exc)} (run for real on a batch of 2)"
    return None


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
            "grads": grads, "activations": activations}  # fmt: skip
