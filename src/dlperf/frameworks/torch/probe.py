"""The PyTorch backend's answers to the parent's probe (`runner/probe.py`): the framework and its devices, a user
workload's shape, real data opened, and steps' operators counted for the GPU predictor.

Part of the PyTorch backend (`backend.py`), imported only in child processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch

from dlperf.frameworks.common.ops import Affine, grouped
from dlperf.frameworks.common.speed import relative_speed
from dlperf.frameworks.torch.build import AUTOCAST_DTYPES, build, set_autocast, set_optimizer_implementation
from dlperf.frameworks.torch.memcount import FAKE_LIMITS, own_error, uncountable
from dlperf.frameworks.torch.opcount import count_calls, nbytes, tensors_in
from dlperf.frameworks.torch.step import synthetic_batch
from dlperf.frameworks.torch.threads import describe_device
from dlperf.frameworks.torch.user import probe_workload, user_of
from dlperf.modes import Mode
from dlperf.vocab import Framework
from dlperf.workloads.base import Workload


def probe(request: dict[str, Any]) -> dict[str, Any]:
    """Answer the parent's question in JSON-ready values. UsageError (a bad user factory) propagates."""
    what = request.get("what")
    if what == "env":
        return probe_env()
    if what == "workload":
        return probe_workload(request["source"], request.get("data_dir"))
    if what == "data":
        return {w["name"]: probe_data(Workload.from_json(w), request["data"]) for w in request["workloads"]}
    if what == "ops":  # the GPU predictor's operator counts
        return {"counts": [op_count(Workload.from_json(r["workload"]), r["mode"], int(r["batch"]), r.get("fit"))
                           for r in request["requests"]]}  # fmt: skip
    if what == "memory":  # the memory predictor's traces (`memcount.py`)
        from dlperf.frameworks.torch.memcount import memory_count

        asked = [(Workload.from_json(r["workload"]), r["mode"], r["batches"]) for r in request["requests"]]
        return {"traces": [t for w, mode, batches in asked for t in memory_count(w, mode, batches)]}
    raise ValueError(f"unknown probe request {what!r}")


OP_COUNT_PRECISIONS = {"fp32": None, "tf32": None, "bf16": Mode.BF16, "fp16": Mode.FP16}  # tf32: the GPU's peak only


def op_count(workload: Workload, mode: str, batch: int, fit: list[int] | None = None) -> dict[str, Any]:
    """One training step of `workload` at `batch` in `mode`, its operators counted on fake tensors (`opcount`), as
    `dlperf.frameworks.common.ops.Count` JSON. Built as the worker builds it on the CPU, with the optimizer's foreach
    implementation (torch's default on CUDA) and the mode's autocast on the CPU (it follows the tensors' device);
    never run. The step is built at a batch of 1 and counted on a batch of `batch` made fake, so no batch size costs
    memory. A step that cannot run on fake tensors (a user's model that reads its values) answers {"workload",
    "mode", "batch", "error"} instead, the reason in one line: one such row must not cost the others of the request.
    Where the reason is a limit of the count itself (a value read, an operator without a fake kernel, dlperf's
    refusal: NotImplementedError), the same whenever the same model is asked again, it is marked `refused`, which the
    parent keeps; the model's own error, and a failure of this machine (out of its memory), never are.

    `fit` (two batches): the step is also counted there, and the answer adds its count as a function of the batch
    (`affine`: `ops.Affine` JSON, through those two and checked at `batch`), or why it is not one (`not_affine`)."""
    if mode not in OP_COUNT_PRECISIONS:
        raise ValueError(f"op count: unknown mode {mode!r} (one of {', '.join(OP_COUNT_PRECISIONS)})")
    precision = OP_COUNT_PRECISIONS[mode]
    batches = [*(fit or []), batch]
    try:
        step = build(dataclasses.replace(workload, batch=1), "cpu", "fp32")
        with contextlib.suppress(NotImplementedError):  # a user's optimizer without foreach: counted as it is
            set_optimizer_implementation(step, Mode.FOREACH.value)
        if precision is not None:
            set_autocast(step, AUTOCAST_DTYPES[precision], scaled=precision is Mode.FP16)
        makers = [lambda b=b: batch_of(workload, b, step) for b in batches]
        points = [(b, calls, sum(nbytes(t) for t in tensors_in(data)))
                  for b, (calls, data) in zip(batches, count_calls(step, makers), strict=True)]  # fmt: skip
    except Exception as exc:  # the user's model, whatever it raises: this row's reason
        own = own_error(workload, mode)  # a user's step that fails for real too: the model's error
        found = {"workload": workload.name, "mode": mode, "batch": batch, "error": own or uncountable(exc)}
        return found if own or not isinstance(exc, FAKE_LIMITS) else {**found, "refused": True}
    _, calls, input_bytes = points[-1]
    found = {"workload": workload.name, "mode": mode, "batch": batch, "ops": [op.to_json() for op in grouped(calls)],
             "input_bytes": input_bytes, "params": step.params}  # fmt: skip
    if fit:
        fitted = Affine.fit(workload.name, mode, step.params, points)
        found.update(not_affine=fitted) if isinstance(fitted, str) else found.update(affine=fitted.to_json())
    return found


def batch_of(workload: Workload, batch: int, step) -> tuple[Any, Any]:
    """The step's batch at `batch`, as the worker makes it (called under the fake mode: no memory)."""
    cpu = torch.device("cpu")
    if workload.arch == "user":
        return step.user.make_batch(batch, cpu)
    return synthetic_batch(dataclasses.replace(workload, batch=batch), cpu)


def probe_data(workload: Workload, data: str) -> dict[str, Any]:
    """A loader cell's data, checked before the run is created: opened, one sample read (`data.check`)."""
    from dlperf.frameworks.torch import data as datasets

    return datasets.check(workload, data, user_of(workload))


def probe_env() -> dict[str, Any]:
    return {
        "framework": Framework.TORCH.value,
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


def precision_speed(size: int = 256, rounds: int = 3) -> dict[str, float]:
    """bf16 and fp16 matrix products' speed on the CPU relative to fp32 (above 1: faster), the best of a few
    products each (`common.speed`): whether a reduced-precision mode can pay on this CPU, measured before a sweep
    spends time on it (without native bf16, oneDNN emulates it many times slower than fp32; fp16 matmul on a CPU is
    often slower still). A fraction of a second."""
    base = torch.randn(size, size)
    operands = {name: base.to(dtype) for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16),
                                                           ("fp16", torch.float16))}  # fmt: skip
    return relative_speed({name: (lambda x=x: torch.mm(x, x)) for name, x in operands.items()}, rounds)


def devices() -> list[dict[str, Any]]:
    found = [{"name": "cpu"}]
    if torch.cuda.is_available():
        found += [describe_device(torch.device("cuda", i)) for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        found.append({"name": "mps"})
    return found
