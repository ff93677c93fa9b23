"""The PyTorch backend: the module `dlperf.frameworks.backend("torch")` loads, implementing the backend interface
(`frameworks.common.interface.Backend`; read that first) from the modules beside it, one concern each:

- `threads.py`: PyTorch's thread pools and the device's settings (`version`, `configure_threads`, `matmul`);
- `instruments.py`: live tensor bytes, FLOPs by dtype, CUDA events as the timer's device clock;
- `step.py`: `TorchStep`, what the worker times, and the built-in workloads' batch, loss and optimizers;
- `build.py`: `build`, a step with its mode's components applied (the modes this backend implements: `MODES`);
- `user.py`: a user's own workload, built and described;
- `probe.py`: the probe's answers, the GPU predictor's operator counts among them;
and here what joins them: the loss check, the profile, the loaders of real data, and `training_parts`.

Imported only in child processes (the worker and the probe), after the parent has fixed the thread variables. Imports
the standard library, torch and dlperf's standard-library-only modules, nothing else.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import torch

from dlperf.errors import UsageError
from dlperf.frameworks.common import losscheck as common
from dlperf.frameworks.torch import losscheck, profiler
from dlperf.frameworks.torch.build import MODES, build
from dlperf.frameworks.torch.instruments import CudaEvents, DtypeFlopCounter, LiveTensorBytes
from dlperf.frameworks.torch.opcount import unfused_rnns
from dlperf.frameworks.torch.probe import devices, op_count, precision_speed, probe, probe_env
from dlperf.frameworks.torch.step import (
    DATA_SEED,
    CudaGraphStep,
    TorchStep,
    cross_entropy,
    make_optimizer,
    synthetic_batch,
)
from dlperf.frameworks.torch.threads import configure_threads, matmul, pool_threads, version
from dlperf.frameworks.torch.user import load_user, user_of
from dlperf.loaders import LoaderSetting
from dlperf.modes import Mode, mode_components
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload

NVTX = True  # build(..., nvtx=True) puts NVTX ranges around the step's phases (`--nvtx`)

__all__ = [  # the interface, and what the other modules, tests and recipes reach through this module
    "DATA_SEED", "MODES", "NVTX", "CudaEvents", "CudaGraphStep", "DtypeFlopCounter", "LiveTensorBytes", "TorchStep",
    "build", "configure_threads", "cross_entropy", "devices", "h2d", "loader", "loss_check", "make_optimizer",
    "matmul", "op_count", "pool_threads", "precision_speed", "probe", "probe_env", "profile", "synthetic_batch",
    "training_parts", "unfused_rnns", "version",
]  # fmt: skip


def preload() -> None:
    """What a warm parent imports before it forks cells (`worker/zygote.py`): what the first step would import,
    `torch._dynamo` above all (torch.optim imports it on first use: a second of every cold cell). Imports only: no
    operator runs, no thread pool or device is touched."""
    import torch._dynamo
    import torch.optim
    import torch.utils.data  # noqa: F401


def after_fork() -> None:
    """A cell's child forked from a warm parent (`worker/zygote.py`), before anything else: numpy's OpenBLAS pool
    sized from the environment, as loading it in a fresh interpreter sizes it. The parent loaded it with one thread;
    a cold child's pool follows OPENBLAS_NUM_THREADS (else GOTO_NUM_THREADS, else OMP_NUM_THREADS), which the
    launcher sets to the cell's threads. PyTorch's own pools the cell sets itself, forked or cold."""
    if "numpy" not in sys.modules:
        return
    wanted = (os.environ.get(v, "").strip() for v in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"))
    count = next((int(v) for v in wanted if v.isdigit() and int(v) > 0), None)
    if count is None:
        return  # none set (the launcher sets all three): left as loaded
    environ = dict(os.environ)
    from threadpoolctl import ThreadpoolController  # its import sets KMP_DUPLICATE_LIB_OK: the cell's env stays exact

    os.environ.clear()
    os.environ.update(environ)
    ThreadpoolController().select(internal_api="openblas").limit(limits=count)


def loss_check(
    workload: Workload,
    device: str,
    mode: str,
    *,
    steps: int = losscheck.STEPS,
    batch: int | None = None,
    seeds: int = losscheck.SEEDS,
) -> dict[str, Any]:
    """Does `mode` still train like fp32? `mode` and fp32 train on one batch of at most `batch` samples (see
    `losscheck`); a JSON-ready verdict with the measured figures. NotImplementedError from `build` (the mode does not
    apply) propagates before any training.

    `batch` by default: losscheck.BATCH, but a compiled mode's timed batch. At the cell's shapes the check runs the
    program the cell timed (dynamo reuses it for a new model: resnet-56 on 2 CPU cores, 0.85 s), where a smaller
    batch compiled another program, as long again as the cell's compile (51 s there, 40 s on an H200)."""
    if batch is None:
        batch = workload.batch if Mode.COMPILE in mode_components(mode) else losscheck.BATCH
    small = common.small(workload, batch)
    result = losscheck.check(
        lambda seed: build(small, device, "fp32", seed=seed),
        lambda seed: build(small, device, mode, seed=seed),
        steps=steps,
        seeds=seeds,
        rounding=losscheck.rounding_dtype(mode),
        own_draws=bool({Mode.COMPILE, Mode.CUDA_GRAPHS} & set(mode_components(mode))),
    )
    return {**result, "batch": small.batch}


def profile(train: TorchStep, steps: int, trace_path: str | None, max_trace_bytes: int) -> dict[str, Any]:
    """Where `steps` steady steps' time goes, by torch.profiler (`profiler.profile`): the fields of
    `dlperf.protocol.Profiled`, with the cost of dispatching one operator measured here after it (`dispatch_s`)."""
    from dlperf.frameworks.torch.peak import DISPATCH_IN_PROFILE_S, dispatch_cost, sync_for, timer_config

    result = profiler.profile(train, steps, trace_path, max_trace_bytes)
    cost = dispatch_cost(train.device, timer_config(DISPATCH_IN_PROFILE_S), sync_for(train.device))
    return {**result, "dispatch_s": cost["median_s"]}


def loader(workload: Workload, data: str, setting: LoaderSetting, device: str, train: TorchStep | None = None):
    """The DataLoader of a loader cell (`data.loader`); a user workload's from the step `train` built of it."""
    from dlperf.frameworks.torch import data as datasets

    user = (train.user if train is not None else None) or user_of(workload)
    return datasets.loader(workload, data, setting, torch.device(device), user)


def h2d(batch: Any, device: str) -> dict[str, Any]:
    """One loaded batch's copy to the GPU, pageable against pinned, blocking against not (`data.h2d`)."""
    from dlperf.frameworks.torch import data as datasets

    return datasets.h2d(batch, torch.device(device))


def training_parts(workload: str, device: str = "cpu", data_dir: str | None = None) -> tuple:
    """(model, optimizer, loss_fn, x, y): what dlperf trains for `workload` (a built-in name, or a factory
    `file.py:make`; either at a batch of its own, `resnet-50@b64`) in fp32 eager on `device`, the user's own optimizer
    included, `data_dir` given to a factory that takes it. `dlperf optimize`'s recipe starts from these, so it runs as
    printed; in one's own code, one's own objects take their place. `workload` and `device` as `api.training_parts`
    checked them; a device this machine lacks is refused naming the argument (torch's traceback, for cuda on a PyTorch
    without CUDA). The weights are drawn from torch's generator as the caller left it, as a model built in one's own
    code is: in a factory dlperf calls, the seed it set for the cell, so the loss check's seeds differ (seeded with 0
    here, dlperf's cells' weights); the batch is the cells' whatever the seed."""
    from dlperf.workloads import BUILTIN
    from dlperf.workloads.base import split_variant

    name, batch = split_variant(workload)
    if device not in (present := [d["name"] for d in devices()]) and not (device == "cuda" and len(present) > 1):
        raise UsageError(f"device: {device!r} is not present on this machine (present: {', '.join(present)})")
    if name in BUILTIN:
        chosen = BUILTIN[name]
    else:
        with torch.random.fork_rng(devices=[]):  # the factory is called again to build: its weights from the seed
            user = load_user(name, data_dir)  # as the caller left it, not from after this call's draws
        chosen = Workload(user.name, "user", {}, InputSpec("user", ()), 0, user.batch_size, OptimizerSpec("user"),
                          source=name, extra={"data_dir": data_dir} if data_dir else {})  # fmt: skip
    if batch is not None:
        chosen = dataclasses.replace(chosen, batch=batch)
    step = build(chosen, device, "fp32", seed=None)
    return step.model, step.optimizer, step.loss_fn, step.inputs, step.targets
