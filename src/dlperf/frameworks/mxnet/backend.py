"""The MXNet backend: MXNet 1.9 Gluon, the paper's own tool, kept for continuity.

Implements the contract in `dlperf.frameworks` (read that first). Runs in its own environment (MXNet 1.9 needs
numpy<1.24). Only the fp32 mode exists: the model and its loss are one Gluon HybridBlock, hybridized with
`static_alloc` and `static_shape` (a static graph whose memory is planned once), trained under `autograd.record()`
with `backward()` and a `gluon.Trainer`. The first step builds the cached graph, so `compiles` is True and the worker
times it apart.

MXNet's engine is asynchronous: `step()` only queues the work, `sync()` (`mx.nd.waitall()`) waits for it, and the
returned loss is read only when `float()` asks for it.

Threads: MXNet reads its thread settings from the environment once, when it is loaded, so `configure_threads` sets
them and only then imports mxnet (this module imports it lazily, nowhere else). Operators run on
MXNET_CPU_WORKER_NTHREADS engine workers, each using an OpenMP team of OMP_NUM_THREADS (MXNet's own operators, oneDNN
and its OpenMP build of OpenBLAS alike): one worker keeps a cell at N threads on about N cores. The Python thread
pushes the step's operators while the worker runs those pushed before, so the process is held to N CPUs where it may
use more, as JAX's is: free, a 1-thread cell kept 1.3-1.4 cores busy on tiny networks (1.43 on tiny-resnet-56,
where torch's kept 0.99).

Training matches the torch backend: mean softmax cross-entropy (per token for the LSTM), SGD with the workload's
learning rate and momentum, weight decay 0, and global-norm clipping where the workload asks for it. MXNet's
sgd_mom_update keeps mom = m * mom - lr * grad and adds it to the weight; PyTorch keeps buf = m * buf + grad and
subtracts lr * buf. With a constant learning rate, as here, mom = -lr * buf at every step: the updates are the same
(a learning rate that changed would rescale PyTorch's whole buffer, but only MXNet's newest gradient).

Not the same as the reference (listed in `settings()["deviations"]`): biases start at zero and embeddings at
U(+-1/sqrt(embed)), MXNet's initializers (the weights of dense, convolution and LSTM layers are drawn from
U(+-1/sqrt(fan_in)), PyTorch's default bound); MXNet's clipping divides by norm + 1e-8 where PyTorch adds 1e-6. The
parameter counts are the reference's exactly (`param_deviation` is 0). MXNet has no FLOP counter: `count_flops`
returns None.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from typing import Any

from dlperf.frameworks import builtin_only, check_mode, no_loader, probe_builtin_only
from dlperf.frameworks.common import capabilities
from dlperf.measure import system
from dlperf.vocab import Framework
from dlperf.workloads.base import Workload

DATA_SEED = 10_000  # the batch is the same whatever `seed` initialized the weights
EXECUTION = "gluon hybridized (static_alloc, static_shape)"

MODES = capabilities.of(Framework.MXNET).modes  # the mode components implemented here
UNSUPPORTED = capabilities.of(Framework.MXNET).why_not  # the table says why, so the plan knows it too

# Variables MXNet reads when it is loaded; reported as they are, None where MXNet uses its default.
MXNET_VARS = (
    "MXNET_CPU_WORKER_NTHREADS",
    "MXNET_OMP_MAX_THREADS",
    "MXNET_ENGINE_TYPE",  # default ThreadedEnginePerDevice
    "MXNET_MKLDNN_ENABLED",  # default 1
    "MXNET_USE_OPERATOR_TUNING",  # default 1: element-wise operators go parallel only where that was measured faster
    "MXNET_OPTIMIZER_AGGREGATION_SIZE",  # default 4 parameters per multi-tensor update
)


def _mx():
    import mxnet

    return mxnet


# ----------------------------------------------------------------------------------------------------------------------
# Threads and settings


def profile(train, steps: int, trace_path: str | None, max_trace_bytes: int) -> dict:
    """No profile yet: the profile is `unsupported`, with the reason."""
    raise NotImplementedError("profile: mxnet.profiler's trace is not mapped into dlperf's categories yet")


def version() -> str:
    return _mx().__version__


def configure_threads(threads: int) -> dict[str, Any]:
    """Set the thread variables MXNet reads at load time, then load it. Returns the settings in effect."""
    late = "mxnet" in sys.modules  # then the variables below come too late and the report shows what is in force
    os.environ.update(system.thread_env(threads))  # what the parent set already; here too for a direct caller
    os.environ["MXNET_CPU_WORKER_NTHREADS"] = "1"  # one engine worker: workers x OpenMP threads = `threads` cores
    os.environ["MXNET_OMP_MAX_THREADS"] = str(threads)  # MXNet's own cap on its operators' OpenMP teams
    system.hold_threads(threads)  # the engine worker and the Python thread feeding it share the N cores
    _mx()
    return {**thread_settings(), "configured_after_import": late}


def thread_settings() -> dict[str, Any]:
    mx = _mx()
    openblas = os.path.join(os.path.dirname(os.path.realpath(mx.__file__)), "libopenblas")  # MXNet's, not numpy's
    return {
        **{name: os.environ.get(name) for name in system.THREAD_COUNT_VARS + MXNET_VARS},
        "omp_max_threads": _native_int("libgomp", "omp_get_max_threads"),  # the team size a new engine worker gets
        "openblas_threads": _native_int(openblas, "openblas_get_num_threads"),
        "mkldnn": mx.runtime.Features().is_enabled("MKLDNN"),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
    }


def _native_int(library: str, function: str) -> int | None:
    """Call `function()` of the loaded shared library whose path contains `library` (the copy MXNet really uses, not
    another one of the same name); None if no such library is loaded."""
    with open("/proc/self/maps") as maps:
        paths = {line.split(maxsplit=5)[-1].strip() for line in maps if library in line}
    for path in sorted(paths):
        try:
            return int(getattr(ctypes.CDLL(path), function)())
        except (OSError, AttributeError):
            continue
    return None


# ----------------------------------------------------------------------------------------------------------------------
# The train step


class PendingLoss:
    """A step's loss, possibly still being computed: `float()` waits for it (a host sync the timed loop never does).
    MXNet's NDArray itself has no `__float__`."""

    def __init__(self, value) -> None:
        self.value = value

    def __float__(self) -> float:
        return float(self.value.asscalar())


class MXNetStep:
    """One hybridized model, one fixed mini-batch already on the device, one Trainer: what the worker times."""

    compiles = True  # the first call builds the cached graph

    def __init__(self, workload: Workload, net, batch, device: str, ctx) -> None:
        from dlperf.frameworks.mxnet.models import Objective

        mx = _mx()
        self.workload, self.net, self.device, self.ctx = workload, net, device, ctx
        self.inputs, self.targets = batch
        self.objective = Objective(net)
        self.objective.hybridize(static_alloc=True, static_shape=True)
        self.trainable = [p for p in net.collect_params().values() if p.grad_req != "null"]  # not BN statistics
        self.params = sum(p.data(ctx).size for p in self.trainable)
        self.grads = [p.grad(ctx) for p in self.trainable]  # the arrays backward writes into, the same every step
        spec = workload.optimizer
        sgd = {"learning_rate": spec.lr, "momentum": spec.momentum, "wd": 0.0}
        # No kvstore: nothing reduces or rescales the gradients between the clip and the update.
        self.trainer = mx.gluon.Trainer(self.trainable, "sgd", sgd, kvstore=None, update_on_kvstore=False)
        self.clip = spec.clip_grad_norm

    def step(self) -> PendingLoss:
        """One iteration, queued on MXNet's engine; returns before the work is done. No host syncs in here."""
        mx = _mx()
        with mx.autograd.record(train_mode=True):  # training mode: BatchNorm uses and updates batch statistics
            loss = self.objective(self.inputs, self.targets)
        loss.backward()  # grad_req "write": each backward overwrites the gradients, nothing to zero
        if self.clip is not None:
            # check_isfinite=False: the default reads the norm back to the host, a sync in the middle of the step
            mx.gluon.utils.clip_global_norm(self.grads, self.clip, check_isfinite=False)
        self.trainer.step(1)  # 1, not the batch size: the loss is already a mean
        return PendingLoss(loss)

    def device_clock(self) -> None:
        """None: the engine is synchronized every step (waitall)."""
        return None

    def sync(self) -> None:
        _mx().nd.waitall()

    def compile_stats(self) -> dict[str, Any]:
        return {"graphs": self.objective.traces, "frames_compiled": self.objective.traces}

    def count_flops(self) -> None:
        """MXNet has no FLOP counter; dlperf does not count by hand."""
        return None

    def memory_of_step(self) -> dict[str, int]:
        """The process's resident-set peak during one untimed step (MXNet's CPU memory pool included)."""
        if not system.reset_rss_hwm():
            return {}
        self.step()
        self.sync()
        return {"process_rss_peak_bytes": system.rss_hwm_bytes()}

    def settings(self) -> dict[str, Any]:
        layout = {"layout": "NCHW"} if self.workload.input.kind == "image" else {}
        return {
            **thread_settings(),
            "mxnet_version": _mx().__version__,
            "device": self.device,
            "execution": EXECUTION,
            **layout,
            "optimizer": f"gluon.Trainer sgd (momentum {self.workload.optimizer.momentum}), no kvstore",
            "deviations": deviations(self.workload),
        }


def deviations(workload: Workload) -> list[str]:
    found = ["initialization: biases start at zero and embeddings at U(+-1/sqrt(embed)) (MXNet's initializers)"]
    if workload.optimizer.clip_grad_norm is not None:
        found.append("clip_global_norm divides by norm + 1e-8 (PyTorch: norm + 1e-6)")
    return found


def param_deviation(workload: Workload) -> int:
    """Reported parameters minus the reference's: MXNet's layers have exactly PyTorch's parameters (two LSTM biases)."""
    return 0


def build(workload: Workload, device: str, mode: str, *, seed: int = 0) -> MXNetStep:
    """The train step of `workload` on `device`, weights from `seed`. NotImplementedError for every mode but fp32,
    for user workloads and for optimizers other than SGD."""
    _check_mode(mode)
    if workload.arch == "user":
        raise NotImplementedError(builtin_only("mxnet"))
    if workload.optimizer.name != "sgd":
        raise NotImplementedError(f"optimizer {workload.optimizer.name!r} is not implemented by the mxnet backend")
    from dlperf.frameworks.mxnet.models import build_model

    mx = _mx()
    ctx = context(device)
    mx.random.seed(seed)
    net = build_model(workload)
    # U(+-1/sqrt(fan_in)) for every weight, PyTorch's default bound for Linear and Conv2d; biases zero, BN gamma one.
    net.initialize(mx.init.Xavier(rnd_type="uniform", factor_type="in", magnitude=1), ctx=ctx)
    mx.random.seed(DATA_SEED)
    return MXNetStep(workload, net, synthetic_batch(workload, ctx), device, ctx)


def _check_mode(mode: str) -> None:
    check_mode("mxnet", MODES, mode, UNSUPPORTED)


def context(device: str):
    """The MXNet context of a dlperf device name: "cpu", or "cuda:N" on a CUDA build of MXNet."""
    mx = _mx()
    kind, _, index = device.partition(":")
    if kind == "cpu":
        return mx.cpu()
    if kind == "cuda":
        gpus = mx.context.num_gpus()
        if int(index or 0) >= gpus:
            raise NotImplementedError(f"{device}: this MXNet {mx.__version__} build sees {gpus} CUDA GPUs")
        return mx.gpu(int(index or 0))
    raise NotImplementedError(f"the mxnet backend does not run on {device}")


def synthetic_batch(workload: Workload, ctx) -> tuple[Any, Any]:
    """Random inputs and labels of the workload's shapes, made once, on the device. Token ids and labels are float32
    (MXNet's convention for Embedding and sparse labels; exact up to 2**24)."""
    nd = _mx().nd
    shape = (workload.batch, *workload.input.shape)
    if workload.input.kind == "tokens":
        tokens = nd.random.randint(0, workload.input.vocab, shape, ctx=ctx).astype("float32")  # (B, T)
        return tokens, nd.random.randint(0, workload.outputs, shape, ctx=ctx).astype("float32")  # a target per token
    labels = nd.random.randint(0, workload.outputs, (workload.batch,), ctx=ctx).astype("float32")
    return nd.random.normal(shape=shape, ctx=ctx), labels


def loss_check(workload: Workload, device: str, mode: str) -> dict[str, Any]:
    """Only fp32 runs here, and fp32 is the reference the other modes are checked against: nothing to check."""
    _check_mode(mode)
    return {"ok": None, "reason": "fp32 is the reference", "seconds": 0.0}


def matmul(size: int) -> Callable[[], None]:
    """One size x size fp32 product on the CPU, waited for (MXNet's engine would otherwise only queue it)."""
    nd = _mx().nd
    a, b = nd.random.normal(shape=(size, size)), nd.random.normal(shape=(size, size))

    def product() -> None:
        nd.dot(a, b).wait_to_read()

    return product


# ----------------------------------------------------------------------------------------------------------------------
# The probe


def probe(request: dict[str, Any]) -> dict[str, Any]:
    return probe_builtin_only("mxnet", request, probe_env)


loader = no_loader  # real data (`--data`) is read by the torch backend only: loader cells are `unsupported` here


def probe_env() -> dict[str, Any]:
    mx = _mx()
    import numpy

    features = [name for name, feature in mx.runtime.Features().items() if feature.enabled]
    gpus = [{"name": f"cuda:{i}"} for i in range(mx.context.num_gpus())]
    return {
        "framework": "mxnet",
        "version": mx.__version__,
        "build": {"features": features, "numpy": numpy.__version__},
        "devices": [{"name": "cpu"}, *gpus],
    }
