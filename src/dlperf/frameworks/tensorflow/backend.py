"""The TensorFlow backend: Keras 3 models on the TensorFlow backend, the whole train step in one tf.function.

Implements the contract in `dlperf.frameworks` (read that first). Imported only in child processes (the worker and
the probe), usually in the environment of `dlperf env install tensorflow`. Imports the standard library, TensorFlow,
Keras, the numpy they installed and dlperf's standard-library-only modules.

Modes. `fp32` is graph mode: forward, loss, gradients (tf.GradientTape) and the optimizer update traced into one
`tf.function(jit_compile=False)`, which TensorFlow runs through its graph executor with Grappler's and oneDNN's
rewrites: today's idiomatic TensorFlow training, and what the paper's TensorFlow scripts (session.run of one graph)
measured. `compile` is the same step with `jit_compile=True`: XLA compiles the whole step into fused kernels. Both
set `jit_compile` explicitly (Keras 3's own default, "auto", would turn graph mode into XLA silently), and in both the
first call traces (and, under XLA, compiles), which the worker times apart. `bf16` is Keras's mixed precision, the
model built under the `mixed_bfloat16` dtype policy: every layer computes in bfloat16 from fp32 variables, and the
loss (on logits cast to fp32, as autocast computes a loss), the gradients and the update stay fp32; with `compile`,
under XLA. No other mode component is implemented: each raises NotImplementedError with the reason (see
`UNSUPPORTED`).

Optimizer. `keras.optimizers.SGD(lr, momentum)`: Keras keeps the velocity with the learning rate folded in,
m <- momentum * m - lr * g; p <- p + m. PyTorch keeps b <- momentum * b + g; p <- p - lr * b. With a constant learning
rate m = -lr * b at every step, so the updates are identical (tests/frameworks/tensorflow checks two steps
against the PyTorch formula). The LSTM clips the global gradient norm at 5 inside the step with tf.clip_by_global_norm,
after making the embedding's gradient dense: tf.gather's gradient is an IndexedSlices with one row per token, and the
norm of those rows is not the norm of the gradient when a token occurs twice (PyTorch's embedding gradient is dense).

Synchronization. `sync()` reads the last loss (`.numpy()`). That suffices, by TensorFlow's function semantics: every
stateful op of a tf.function (here the optimizer's variable updates) is a control output of the function, and the
call returns only after all of them have run; eager execution is synchronous (async eager is off), so on the CPU the
updates have happened when `step()` returns. On a GPU "run" means enqueued on the device's compute stream, and the
device-to-host copy that `.numpy()` makes waits for that stream, hence for every kernel the step enqueued.
"""

from __future__ import annotations

import os

# Before TensorFlow and Keras are imported: Keras reads its backend once, TensorFlow its log level once.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import contextlib
import importlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from dlperf.frameworks import builtin_only, check_mode, no_loader, probe_builtin_only
from dlperf.frameworks import precision as mixed
from dlperf.frameworks.common import capabilities
from dlperf.frameworks.common import losscheck as common
from dlperf.frameworks.common.speed import relative_speed
from dlperf.frameworks.tensorflow import losscheck, profiler
from dlperf.frameworks.tensorflow.models import build_model, deviations, param_deviation
from dlperf.measure import system
from dlperf.modes import Mode, mode_components
from dlperf.protocol import Cell
from dlperf.vocab import Framework, Parallel
from dlperf.workloads.base import OptimizerSpec, Workload

if keras.backend.backend() != "tensorflow":
    raise ImportError(
        f"KERAS_BACKEND={os.environ['KERAS_BACKEND']!r}: dlperf's tensorflow backend needs Keras on TensorFlow "
        "(unset KERAS_BACKEND or set it to 'tensorflow')"
    )

MODES = capabilities.of(Framework.TENSORFLOW).modes  # the mode components implemented here
UNSUPPORTED = capabilities.of(Framework.TENSORFLOW).why_not  # the table says why, so the plan knows it too

# ----------------------------------------------------------------------------------------------------------------------
# Threads and settings


def inter_op_threads(threads: int) -> int:
    """One inter-op thread whatever the intra-op count. Measured on 2 cores (full-size networks, 2 intra-op threads,
    graph mode and XLA, 18 interleaved pairs on a quiet machine): a second inter-op thread changed the step time by
    x0.99 (geometric mean; pairs from x0.79 to x1.15, within run-to-run noise) and the cores kept busy not at all
    (1.90 either way, 1.77 at least). At one intra-op thread every step kept 1.00 core busy. So the n threads of a cell
    are the intra-op pool, which runs the kernels, and one scheduling thread that never competes with them."""
    return 1


def profile(train, steps: int, trace_path: str | None, max_trace_bytes: int) -> dict:
    """`steps` steady steps under tf.profiler, mapped into dlperf's categories (`profiler.py`)."""
    return profiler.profile(train, steps, trace_path, max_trace_bytes)


def version() -> str:
    return tf.__version__


def configure_threads(threads: int) -> dict[str, Any]:
    """Size TensorFlow's two CPU pools before it runs anything; returns the settings in effect. The intra-op pool
    runs the kernels (Eigen, oneDNN and XLA:CPU all take it); the inter-op pool schedules independent ops."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads(threads))
    except RuntimeError:
        pass  # TensorFlow has already run something: the pools keep their sizes, reported below
    return thread_settings()


def thread_settings() -> dict[str, Any]:
    return {
        "tf_intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "tf_inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "onednn_enabled": _onednn_enabled(),
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
    }


def _onednn_enabled() -> bool | None:
    """Whether TensorFlow's oneDNN rewrites are on: TF_ENABLE_ONEDNN_OPTS, else the build's default (on for x86)."""
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None


def _xla_built() -> bool | None:
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsBuiltWithXLA())
    except (ImportError, AttributeError):
        return None


def tf_device(device: str) -> str:
    """dlperf's device name -> TensorFlow's: "cpu" -> /CPU:0, "cuda:N" -> /GPU:N."""
    if device == "cpu":
        return "/CPU:0"
    if device.startswith("cuda"):
        index, visible = int(device.partition(":")[2] or 0), len(tf.config.list_physical_devices("GPU"))
        if index >= visible:
            raise NotImplementedError(f"tensorflow sees {visible} GPU(s) here, not {device} (tensorflow-cpu has none)")
        return f"/GPU:{index}"
    raise NotImplementedError(f"tensorflow backend: device {device!r} is not supported (cpu or cuda:N)")


# ----------------------------------------------------------------------------------------------------------------------
# The train step


def cross_entropy(logits: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """Mean softmax cross-entropy over every prediction: (B, K) with (B,), or per token (B, T, V) with (B, T)."""
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits))


def train_step_fn(model: keras.Model, optimizer: keras.optimizers.Optimizer, clip_norm: float | None) -> Callable:
    """The Python function of one step; `tf.function` traces it (with or without XLA) into one graph."""
    variables = model.trainable_variables

    def train_step(inputs: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(inputs, training=True), tf.float32)  # BatchNorm in training mode; bf16 logits cast
            with tf.name_scope("loss"):  # the profiler finds the loss's ops, and their gradients, by this scope
                loss = cross_entropy(logits, targets)
        grads = tape.gradient(loss, variables)
        if clip_norm is not None:
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]  # exact norm
            grads, _ = tf.clip_by_global_norm(grads, clip_norm)
        optimizer.apply(grads, variables)
        return loss

    return train_step


class TFStep:
    """One Keras model, one fixed mini-batch already on the device, one optimizer, one traced step."""

    def __init__(self, workload: Workload, device: str, *, xla: bool, seed: int, precision: Mode = Mode.FP32) -> None:
        self.workload, self.device, self.xla, self.precision = workload, tf_device(device), xla, precision
        self.clip_norm = workload.optimizer.clip_grad_norm
        with tf.device(self.device):
            keras.utils.set_random_seed(seed)
            with dtype_policy(POLICIES[precision]):
                self.model = build_model(workload, **self._lstm_options())
            self.optimizer = make_optimizer(workload.optimizer)
            self.optimizer.build(self.model.trainable_variables)  # no variable is created while tracing
            self.inputs, self.targets = synthetic_batch(workload)
        self.params = sum(math.prod(v.shape) for v in self.model.trainable_variables)
        self.function = tf.function(train_step_fn(self.model, self.optimizer, self.clip_norm), jit_compile=xla)
        self.compiles = True  # the first call traces (and under XLA compiles): the worker times it apart
        self.loss: tf.Tensor | None = None

    def _lstm_options(self) -> dict[str, Any]:
        if self.workload.arch != "lstm-lm":
            return {}
        return {"cudnn": False if self.xla else "auto"}  # XLA cannot compile the cuDNN LSTM op

    def step(self) -> tf.Tensor:
        with tf.device(self.device):
            self.loss = self.function(self.inputs, self.targets)
        return self.loss

    def device_clock(self) -> None:
        """None: eager execution is synchronous here."""
        return None

    def sync(self) -> None:
        """Wait for the step, updates included (see the module docstring for why reading the loss suffices)."""
        if self.loss is not None:
            self.loss.numpy()

    def compile_stats(self) -> dict[str, Any]:
        traces = self.function.experimental_get_tracing_count()
        return {"graphs": traces, "frames_compiled": traces, "jit_compile": self.xla}

    def count_flops(self) -> dict[str, Any] | None:
        """FLOPs of the matrix products and convolutions of one step (see `graph_flops`), counted on the traced
        graph-mode step; the LSTM's on a twin with its time loop unrolled, whose loop body the graph would hide."""
        with tf.device(self.device):  # a graph the counter cannot read raises: the worker notes why, no figure
            function = self.function if self.workload.arch != "lstm-lm" else self._unrolled_twin()
            graph = function.get_concrete_function(self.inputs, self.targets).graph
        by_op = graph_flops(graph)
        total = sum(by_op.values())
        return {"flops_per_step": total, "flops_by_dtype": {self.precision.value: total}, "flops_by_op": by_op}

    def _unrolled_twin(self) -> Callable:
        with dtype_policy(POLICIES[self.precision]):
            twin = build_model(self.workload, unroll=True, cudnn=False)  # the same products, one per time step
        optimizer = make_optimizer(self.workload.optimizer)
        optimizer.build(twin.trainable_variables)
        return tf.function(train_step_fn(twin, optimizer, self.clip_norm), jit_compile=False)

    def memory_of_step(self) -> dict[str, int]:
        """Peak memory of one untimed step: on a GPU TensorFlow's (BFC) allocator peak; everywhere the process's
        resident-set peak. The CPU has no tensor-level figure: TensorFlow's CPU allocator keeps statistics only with
        oneDNN's allocator and then for part of the allocations (0 bytes for tiny-fcn-s, 4 MiB held by ResNet-56
        after a step whose weights and momentum alone take 6.8 MB), so it is not reported."""
        figures: dict[str, int] = {}
        gpu = self.device.strip("/") if "GPU" in self.device else None
        if gpu:
            tf.config.experimental.reset_memory_stats(gpu)
        rss_reset = system.reset_rss_hwm()
        self.step()
        self.sync()
        if gpu:
            figures["cuda_allocator_peak_bytes"] = int(tf.config.experimental.get_memory_info(gpu)["peak"])
        if rss_reset:
            figures["process_rss_peak_bytes"] = system.rss_hwm_bytes()
        return figures

    def settings(self) -> dict[str, Any]:
        settings = {
            **thread_settings(),
            "device": "cpu" if "CPU" in self.device else "cuda:" + self.device.rpartition(":")[2],
            "tf_device": self.device,
            "jit_compile": self.xla,
            "execution": f"tf.function {'XLA' if self.xla else 'graph'} (jit_compile={self.xla})",
            "dtype_policy": self.model.dtype_policy.name,
            **({"layout": "NHWC"} if self.workload.input.kind == "image" else {}),
            "keras_backend": keras.backend.backend(),
            "param_deviation": param_deviation(self.workload),
            "deviations": deviations(self.workload),
        }
        if self.workload.arch == "lstm-lm":
            settings["lstm_implementation"] = lstm_implementation(self.device, self.xla)
        return settings


POLICIES = {Mode.FP32: "float32", Mode.BF16: "mixed_bfloat16"}  # a precision -> the Keras dtype policy it builds under


@contextlib.contextmanager
def dtype_policy(name: str) -> Iterator[None]:
    """Keras's global dtype policy set to `name` while layers are made (each keeps the policy it was made under), and
    put back after."""
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(before)


def lstm_implementation(device: str, xla: bool) -> str:
    """Which LSTM Keras runs: cuDNN's fused kernel only on a GPU in graph mode, else its generic RNN loop."""
    if "GPU" in device and not xla:
        return "cuDNN (CudnnRNNV3) when Keras' cudnn_ok conditions hold, else the generic loop"
    return "keras generic RNN: tf.while_loop over LSTMCell (two matmuls per step)" + (", XLA-compiled" if xla else "")


def make_optimizer(spec: OptimizerSpec) -> keras.optimizers.Optimizer:
    if spec.name != "sgd":
        raise NotImplementedError(f"optimizer {spec.name!r} is not implemented by the tensorflow backend")
    return keras.optimizers.SGD(learning_rate=spec.lr, momentum=spec.momentum)


DATA_SEED = 10_000  # the batch is the same whatever `seed` initialized the weights


def synthetic_batch(workload: Workload) -> tuple[tf.Tensor, tf.Tensor]:
    """Random inputs and labels of the workload's shapes, made once on the current device; images NHWC, token ids and
    labels int32 (TensorFlow's index type)."""
    rng = np.random.default_rng(DATA_SEED)
    spec, batch = workload.input, workload.batch
    if spec.kind == "tokens":
        shape = (batch, *spec.shape)  # (B, T)
        tokens = rng.integers(0, spec.vocab, shape, dtype=np.int32)
        return tf.constant(tokens), tf.constant(rng.integers(0, workload.outputs, shape, dtype=np.int32))
    shape = (batch, *spec.shape[1:], spec.shape[0]) if spec.kind == "image" else (batch, *spec.shape)  # NHWC
    inputs = rng.standard_normal(shape, dtype=np.float32)
    return tf.constant(inputs), tf.constant(rng.integers(0, workload.outputs, (batch,), dtype=np.int32))


def build(workload: Workload, device: str, mode: str, *, seed: int = 0) -> TFStep:
    """The train step of `workload` on `device` in `mode` ("fp32": graph mode; "compile": XLA; "bf16": Keras's mixed
    precision, with or without XLA), weights from `seed`,
    the batch the same whatever the seed. NotImplementedError (recorded as `unsupported`) for any other mode."""
    check_mode("tensorflow", MODES, mode, UNSUPPORTED)
    if workload.arch == "user":
        raise NotImplementedError(builtin_only("tensorflow"))
    hold_to_pool()
    components = mode_components(mode)
    precision = Mode.BF16 if Mode.BF16 in components else Mode.FP32
    return TFStep(workload, device, xla=Mode.COMPILE in components, seed=seed, precision=precision)


def hold_to_pool() -> None:
    """A one-process cell's threads held to as many CPUs as its intra-op pool has threads (the cell's), where it may
    use more, as JAX's and MXNet's are (`system.hold_threads`); a strategy's cell (`build_parallel`, a multi-worker
    job's processes) sizes its own. Held, the Python thread, the inter-op thread and the pool share the cell's cores.
    Free, each step's hand-offs between them crossed CPUs: a 1-thread cell on 2 CPUs took 1.4-1.5x as long as held on
    one (tiny-fcn-r 0.75 ms against 0.52, tiny-lstm 2.84 against 1.87, tiny-alexnet-s 2.08 against 1.37;
    tiny-resnet-56 and tiny-alexnet-r alike; phases alternated in one process, about one core busy either way), a
    cost neither JAX's cells nor PyTorch's one thread pay."""
    system.hold_threads(tf.config.threading.get_intra_op_parallelism_threads() or len(os.sched_getaffinity(0)))


# one process, N replicas (`--parallel`): the module of each strategy, imported by name (it imports this backend)
PARALLEL = {Parallel.MIRRORED: "dlperf.frameworks.tensorflow.mirrored"}


def build_parallel(workload: Workload, cell: Cell) -> Any:
    """The step of a one-process strategy's cell (MirroredStrategy: `cell.nproc` replicas), its devices and threads
    set up first, before TensorFlow initializes them; `workload.batch` is the job's total."""
    strategy = Parallel(cell.parallel)
    if strategy not in PARALLEL:
        raise NotImplementedError(f"--parallel {strategy}: not a tensorflow strategy of one process")
    module = importlib.import_module(PARALLEL[strategy])
    module.configure(cell)
    return module.build(workload, cell)


# ----------------------------------------------------------------------------------------------------------------------
# FLOPs

PRODUCT_OPS = ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
CONV_OPS = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter")


def graph_flops(graph: tf.Graph) -> dict[str, int]:
    """2 x multiply-accumulates of every matrix product and convolution that runs in `graph`, by op type.

    What PyTorch's counter counts (products, forward and backward), so the two frameworks' figures compare; the
    element-wise ops, the optimizer's update included, count zero. Counted from the traced graph's static shapes, on
    the ops that run: those the function's outputs and control outputs (the variable updates) depend on. TensorFlow's
    own counter (tf.compat.v1.profiler with ProfileOptionBuilder.float_operation()) sums the same MatMul and Conv2D
    figures but is not used: it counts ops the runtime prunes (a first convolution's input gradient, which nothing
    consumes) and its Conv2DBackpropInput/Filter formula takes the output size as input size / stride^2, which
    overcounts a strided convolution over a padded input. Its product total is 3.7% high on AlexNet-S, 2.1% on
    ResNet-50, 0.4% on ResNet-56 and exact on FCN-R (83,948,994,560, the hand count, as here). Raises ValueError on
    a product op it has no formula for, rather than undercount."""
    by_op: dict[str, int] = {}
    for op in live_ops(graph):
        if op.type in PRODUCT_OPS or op.type in CONV_OPS:
            by_op[op.type] = by_op.get(op.type, 0) + _product_flops(op)
        elif any(word in op.type for word in ("MatMul", "Conv", "Einsum")):
            raise ValueError(f"no FLOP formula for {op.type}")
    return by_op


def live_ops(graph: tf.Graph) -> set:
    """The ops the function's outputs and control outputs depend on: what the runtime executes."""
    seen: set = set()
    stack = [t.op for t in graph.outputs] + list(getattr(graph, "control_outputs", []))
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
    return seen


def _product_flops(op) -> int:
    def shape(t) -> list[int]:
        dims = t.shape.as_list()
        if None in dims:
            raise ValueError(f"{op.type} {op.name}: shape {dims} is not static")
        return dims

    if op.type in PRODUCT_OPS:  # (..., m, k) x (..., k, n)
        a = shape(op.inputs[0])
        transposed = op.get_attr("transpose_a" if op.type == "MatMul" else "adj_x")
        return 2 * (a[-2] if transposed else a[-1]) * math.prod(shape(op.outputs[0]))
    # every Conv2D* op does one MAC per output element of the forward convolution and per kernel tap and input channel
    out = shape(op.outputs[0]) if op.type == "Conv2D" else shape(op.inputs[2])  # (B, Ho, Wo, Cout)
    kernel = shape(op.outputs[0]) if op.type == "Conv2DBackpropFilter" else shape(op.inputs[1])  # (kh, kw, Cin, Cout)
    return 2 * math.prod(out) * kernel[0] * kernel[1] * kernel[2]


# ----------------------------------------------------------------------------------------------------------------------
# Does a mode still train like fp32?


def loss_check(workload: Workload, device: str, mode: str, *, steps: int = common.STEPS) -> dict[str, Any]:
    """Train `steps` steps in fp32 graph mode and in `mode` from the same weights and batch, and compare them: bf16
    (with or without XLA) by PyTorch's decision (`frameworks.precision`), XLA in fp32 by its own, tighter one
    (`losscheck`). fp32 graph mode is the reference itself.

    NotImplementedError from `build` (a mode this backend does not implement) propagates before anything trains."""
    small = common.small(workload)
    components = mode_components(mode)
    if Mode.BF16 in components:
        result = mixed.check(seeded(small, device, "fp32"), seeded(small, device, mode), read=_read, write=_write,
                             steps=steps)  # fmt: skip
    elif Mode.COMPILE in components:
        result = losscheck.check(lambda: build(small, device, "fp32"), lambda: build(small, device, mode), steps=steps)
    else:
        build(small, device, mode)  # unsupported components raise here
        return {"ok": True, "reason": None, "seconds": 0.0, "note": "fp32 graph mode is the reference itself"}
    return {**result, "batch": small.batch}


def seeded(workload: Workload, device: str, mode: str) -> Callable[[int], TFStep]:
    """init seed -> a fresh step of `mode`: what the bf16 check trains from each seed."""
    return lambda seed: build(workload, device, mode, seed=seed)


def _read(step: TFStep) -> list[np.ndarray]:
    return [v.numpy() for v in step.model.trainable_variables]


def _write(step: TFStep, values: list[np.ndarray]) -> None:
    for variable, value in zip(step.model.trainable_variables, values, strict=True):
        variable.assign(value)


# ----------------------------------------------------------------------------------------------------------------------
# The thread test and the probe


def matmul(size: int) -> Callable[[], None]:
    """One size x size fp32 product in graph mode, finished when the call returns (its result read on the host)."""
    a, b = tf.random.normal((size, size)), tf.random.normal((size, size))
    product = tf.function(lambda: tf.matmul(a, b), jit_compile=False)

    def run() -> None:
        product().numpy()

    return run


def probe(request: dict[str, Any]) -> dict[str, Any]:
    return probe_builtin_only("tensorflow", request, probe_env)


loader = no_loader  # real data (`--data`) is read by the torch backend only: loader cells are `unsupported` here


def probe_env() -> dict[str, Any]:
    build_info = {k: v for k, v in tf.sysconfig.get_build_info().items() if isinstance(v, (str, int, float, bool))}
    return {
        "framework": "tensorflow",
        "version": tf.__version__,
        "build": {
            "keras": keras.__version__,
            "xla": _xla_built(),
            "onednn": _onednn_enabled(),
            "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
            **build_info,
        },
        "devices": devices(),
        "precision_speed": {"cpu": precision_speed()},
    }


def precision_speed(size: int = 512, rounds: int = 10) -> dict[str, float]:
    """bf16's matrix product on the CPU against fp32's in TensorFlow's own kernels (`common.speed`), as the bf16
    cells' layers run it under `mixed_bfloat16` (bf16 operands, a bf16 result): without avx512_bf16, oneDNN emulates
    it (0.2x fp32's speed on an Intel Xeon with AVX-512). About 0.2 s."""
    with tf.device("/CPU:0"):
        base = tf.random.normal((size, size), seed=0)
        operands = {"fp32": base, "bf16": tf.cast(base, tf.bfloat16)}
        return relative_speed({name: (lambda x=x: tf.linalg.matmul(x, x).numpy()) for name, x in operands.items()},
                              rounds)  # fmt: skip


def devices() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [{"name": "cpu"}]
    for i, gpu in enumerate(tf.config.list_physical_devices("GPU")):
        details = tf.config.experimental.get_device_details(gpu)
        capability = details.get("compute_capability")
        found.append(
            {
                "name": f"cuda:{i}",
                "model": details.get("device_name"),
                "capability": None if capability is None else ".".join(map(str, capability)),
            }
        )
    return found
