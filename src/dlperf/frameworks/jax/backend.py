"""The JAX backend: Flax NNX models, an optax optimizer and the whole train step as one jitted XLA computation.

Implements the contract in `dlperf.frameworks` (read that first). Imported only in child processes, in JAX's own
environment (`dlperf env install jax`). Importing JAX does not start its backend; `configure_threads` runs before
anything does, because XLA sizes its CPU thread pool once, when the backend starts.

The step: `nnx.split` turns the model into a static graph definition and its state (parameters; BatchNorm statistics),
and one `jax.jit` function does forward, loss, gradients and the optax update on that state and the optimizer's,
donated so XLA updates the buffers in place. The first call traces and compiles (`compiles` is True: the worker times
it apart); every later call runs the compiled executable. The modes are fp32 and bf16, mixed precision as Flax does
it: every layer computes in bfloat16 (its `dtype`) from fp32 parameters, and the loss, the gradients and the optax
update stay fp32, as under PyTorch's autocast; see `UNSUPPORTED` for why each other component does not apply. The
models and their deviations from the reference are in `models`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import flax
import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
import optax
from flax import nnx

from dlperf.frameworks import builtin_only, check_mode, no_loader, probe_builtin_only
from dlperf.frameworks import precision as mixed
from dlperf.frameworks.common import capabilities
from dlperf.frameworks.common import losscheck as common
from dlperf.frameworks.common.speed import relative_speed
from dlperf.frameworks.jax.models import build_model, param_deviation
from dlperf.measure import system
from dlperf.measure.timer import HostClock
from dlperf.modes import Mode, mode_components
from dlperf.vocab import Framework
from dlperf.workloads.base import OptimizerSpec, Workload

# ----------------------------------------------------------------------------------------------------------------------
# Threads

# XLA:CPU's intra-op pool (threads named tf_XLAEigen) is sized once, when the backend starts: from PJRT_NPROC where it
# is set (XLA's DefaultThreadPoolSize), else one thread per CPU the process may use. PJRT_NPROC is set to the cell's
# count, so a cell above the usable CPUs runs that many threads, oversubscribed as the other frameworks' are (on 2
# CPUs, `--threads 4` ran 2 threads before it: restricting the affinity was all that set them); the affinity is still
# restricted to N CPUs where there are more (one per core first), so that the process's other threads share the
# pool's CPUs.
# XLA_FLAGS cannot set the count: measured with jax 0.10.2 on 2 CPUs, a 1024^2 fp32 matrix product and a 3x3
# convolution keep 1.92 cores busy with `--xla_cpu_multi_thread_eigen=false` as without it. It is set at one thread
# all the same, as the documented single-thread setting. Its often-quoted companion `intra_op_parallelism_threads=1`
# is no XLA flag: XLA drops it as a positional argument without `--` and aborts at "Unknown flag in XLA_FLAGS" with
# it, so it is not set.
SINGLE_THREAD_FLAG = "--xla_cpu_multi_thread_eigen=false"
POOL_SIZE_VAR = "PJRT_NPROC"
POOL_THREAD_NAME = "tf_XLAEigen"


_threads: dict[str, Any] = {}  # what configure_threads was asked and found


def profile(train, steps: int, trace_path: str | None, max_trace_bytes: int) -> dict:
    """jax.profiler over `steps` steps of a warmed-up step, mapped into dlperf's categories (`profiler`)."""
    from dlperf.frameworks.jax import profiler  # the profile child's only: a timed worker never loads it

    return profiler.profile(train, steps, trace_path, max_trace_bytes)


def version() -> str:
    return jax.__version__


def configure_threads(threads: int) -> dict[str, Any]:
    """Size XLA's pool at `threads` and restrict the process to `threads` CPUs of its affinity set (`hold_threads`)
    where it has more, and add XLA's single-thread flag at one thread, before XLA starts. The user's own XLA_FLAGS are
    kept, their own setting of that flag included; an inherited PJRT_NPROC is replaced, as OMP_NUM_THREADS is."""
    flags = os.environ.get("XLA_FLAGS", "")
    if threads == 1 and "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {SINGLE_THREAD_FLAG}".strip()
    os.environ[POOL_SIZE_VAR] = str(threads)
    system.hold_threads(threads)
    _threads["requested"] = threads
    _threads["backend_started_before"] = _backend_started()
    return thread_settings()


def _backend_started() -> bool | None:
    try:
        from jax._src import xla_bridge  # private, hence guarded: whether some code already started XLA

        return xla_bridge.backends_are_initialized()
    except (ImportError, AttributeError):
        return None


def thread_settings() -> dict[str, Any]:
    """The settings in effect; the pool size is counted from the running threads once the backend has started."""
    return {
        "threads_requested": _threads.get("requested"),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
        POOL_SIZE_VAR: os.environ.get(POOL_SIZE_VAR),
        "xla_backend_started_before_configure": _threads.get("backend_started_before"),
        "xla_pool_threads": _pool_threads() if _backend_started() else None,
    }


def _pool_threads() -> int:
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().strip() == POOL_THREAD_NAME
        except OSError:  # a thread that ended meanwhile
            pass
    return count


# ----------------------------------------------------------------------------------------------------------------------
# Modes

MODES = capabilities.of(Framework.JAX).modes  # the mode components implemented here
UNSUPPORTED = capabilities.of(Framework.JAX).why_not  # the table says why, so the plan knows it too


COMPUTE_DTYPES = {Mode.BF16: jnp.bfloat16}  # a precision component -> what the layers compute in


def _check_mode(mode: str) -> None:
    check_mode("jax", MODES, mode, UNSUPPORTED)


def precision(mode: str) -> Mode:
    """The mode's precision component: bf16, or fp32 where it has none."""
    return next((c for c in mode_components(mode) if c in COMPUTE_DTYPES), Mode.FP32)


def _device(device: str) -> jax.Device:
    """The JAX device of a dlperf device name: "cpu", or "cuda:N" for the N-th GPU of a CUDA build of jaxlib."""
    if device == "cpu":
        return jax.devices("cpu")[0]
    kind, _, index = device.partition(":")
    gpus = _gpus()
    if kind == "cuda" and int(index or 0) < len(gpus):
        return gpus[int(index or 0)]
    raise NotImplementedError(f"{device}: this jax has no such device (it has {', '.join(map(str, jax.devices()))})")


def _gpus() -> list[jax.Device]:
    return [d for d in jax.devices() if d.platform == "gpu"]


# ----------------------------------------------------------------------------------------------------------------------
# The train step

DATA_SEED = 10_000  # the batch is the same whatever `seed` initialized the weights


def _key(seed: int) -> jax.Array:
    """A key of XLA's RngBitGenerator: each initializer compiles in a fraction of the time the default threefry hash
    takes (building ResNet-50: 4.6 s instead of 9 s on 2 cores); the values need only be fixed by the seed."""
    return jax.random.key(seed, impl="rbg")


def cross_entropy(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy over every prediction: (B, K) with (B,), or per token (B, T, V) with (B, T). Its
    named scope only labels the HLO's metadata: the profiler tells the loss's operations, forward and backward."""
    with jax.named_scope("dlperf.loss"):
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def optimizer(spec: OptimizerSpec) -> optax.GradientTransformation:
    """SGD as PyTorch does it (buf = m * buf + g; p -= lr * buf), after global-norm clipping when the spec asks."""
    if spec.name != "sgd":
        raise NotImplementedError(f"optimizer {spec.name!r} is not implemented by the jax backend")
    sgd = optax.sgd(spec.lr, momentum=spec.momentum or None)
    return sgd if spec.clip_grad_norm is None else optax.chain(optax.clip_by_global_norm(spec.clip_grad_norm), sgd)


def train_step(graphdef: nnx.GraphDef, tx: optax.GradientTransformation, on_trace: Callable[[], None]) -> Callable:
    """The pure step: (parameters, other state, optimizer state), inputs, targets -> new state, loss. The logits are
    fp32 for the loss whatever the layers computed in (bf16 ones are cast, as autocast computes a loss in fp32)."""

    def step(state, inputs, targets):
        on_trace()  # Python runs here only while JAX traces
        params, rest, opt_state = state
        model = nnx.merge(graphdef, params, rest)
        loss, grads = nnx.value_and_grad(lambda m: cross_entropy(m(inputs).astype(jnp.float32), targets))(model)
        updates, opt_state = tx.update(grads, opt_state, params)
        rest = nnx.state(model, nnx.Not(nnx.Param))  # the BatchNorm averages this forward pass updated
        return (optax.apply_updates(params, updates), rest, opt_state), loss

    return step


class JaxStep:
    """One model, one fixed mini-batch on the device, one optax optimizer: what the worker times."""

    compiles = True  # the first call traces and compiles

    def __init__(
        self, workload: Workload, model: nnx.Module, batch: tuple[jax.Array, jax.Array], device: str, mode: str = "fp32"
    ) -> None:
        """`device` is the dlperf name ("cpu", "cuda:0") of the device `placed_on` moves the state and batch to;
        `model` computes in the precision of `mode` (`build_model`'s dtype)."""
        self.workload, self.device, self.precision = workload, device, precision(mode)
        self.tx = optimizer(workload.optimizer)
        self.graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        self.state = (params, rest, self.tx.init(params))
        self.inputs, self.targets = batch
        self.params = sum(leaf.size for leaf in jax.tree.leaves(params))
        self.loss: jax.Array | None = None
        self.traces = 0
        self.placed = jax.devices("cpu")[0]  # where the state is (`placed_on`)
        self.jitted = jax.jit(train_step(self.graphdef, self.tx, self._traced), donate_argnums=0)

    def _traced(self) -> None:
        self.traces += 1

    def restart(self, seed: int) -> JaxStep:
        """Fresh weights from `seed`, a fresh optimizer state, on the step's device: the compiled step is kept (the
        state's structure is the same), so the loss check's runs from other seeds compile nothing again."""
        with jax.default_device(jax.devices("cpu")[0]):
            _, params, rest = nnx.split(self.model_of(seed), nnx.Param, ...)
            state = (params, rest, self.tx.init(params))
        self.state, self.loss = jax.device_put(state, self.placed), None
        return self

    def model_of(self, seed: int, **options: Any) -> nnx.Module:
        """This step's model, in its precision, initialized from `seed`."""
        return build_model(self.workload, nnx.Rngs(_key(seed)), dtype=COMPUTE_DTYPES.get(self.precision), **options)

    def placed_on(self, dev: jax.Device) -> JaxStep:
        """The state and the batch, made on the CPU, moved to `dev` at once. Made on a GPU, every initializer and
        every optimizer buffer's zeros would be a small XLA program compiled for it, one after another (a JAX cell's
        build took 8.3-8.8 s on an H200); on the CPU they compile in a fraction of that, and a cell on any device
        starts from the same weights and batch."""
        self.state, self.inputs, self.targets = jax.device_put((self.state, self.inputs, self.targets), dev)
        self.placed = dev
        return self

    def step(self) -> jax.Array:
        """One iteration, dispatched asynchronously; returns the loss (a scalar array: float() waits for it)."""
        self.state, self.loss = self.jitted(self.state, self.inputs, self.targets)
        return self.loss

    def device_clock(self) -> HostClock:
        """JAX dispatches a step and returns at once, as CUDA does: the host launches the next steps while the last
        ones run, and a step's time is when its loss is ready, as the host sees it (there are no device events to
        read). Synchronizing every step cost tiny-resnet-56 on the CPU 1.12x and tiny-fcn-r 1.5x a plain loop."""
        return HostClock(lambda: self.loss, jax.block_until_ready)

    def sync(self) -> None:
        """Wait for the whole updated state (parameters, BatchNorm statistics, optimizer state) and the loss."""
        jax.block_until_ready((self.state, self.loss))

    def _args(self) -> tuple:
        return self.state, self.inputs, self.targets

    def count_flops(self) -> dict[str, Any] | None:
        """FLOPs of one step by XLA's cost analysis of the unoptimized HLO (fusion and other optimizations do not
        change it). It counts differently from PyTorch's counter, which counts 2 x multiply-adds of matrix products
        and convolutions only: XLA also counts every element-wise operation (activations, BatchNorm, the loss, the
        optimizer update), but leaves out a convolution's products with its zero padding. Measured on the suite and
        its tiny variants: +0.1% to +17% for the FCNs and the LSTM, -6% to -18% for the AlexNets and ResNet-56,
        whose convolutions are padded. XLA counts a loop body once whatever its trip count, so the LSTM is counted on
        a twin of its step with the time loop fully unrolled: the same products, the same state. Where the device's
        analysis gives no figure (jax 0.11.2 on CUDA), the step is lowered for the CPU and counted there
        (`counted_on`: "cpu")."""
        graphdef = self._unrolled_graphdef() if self.workload.arch == "lstm-lm" else self.graphdef
        counted = jax.jit(train_step(graphdef, self.tx, lambda: None))
        try:
            flops, extra = cost_flops(counted.lower(*self._args()).cost_analysis()), {}
        except RuntimeError:  # no figure from this backend's analysis (jax 0.11.2 on CUDA gave None)
            flops, extra = self._counted_on_the_cpu(counted), {"counted_on": "cpu"}
        return {"flops_per_step": flops, "flops_by_dtype": {self.precision.value: flops}, **extra}

    def _counted_on_the_cpu(self, counted: Callable) -> int:
        """The same step lowered for the CPU from its shapes alone, and counted there: the unoptimized HLO's FLOPs
        do not depend on the backend that would compile it (raises as `cost_flops` does where that has none too).
        The CPU is made the default device for it: shapes without a sharding are lowered for the default device's
        backend, whose analysis is asked whatever `lowering_platforms` says (jax 0.11's `MeshComputation.
        cost_analysis`), and a GPU's, a PJRT plugin, has none."""
        shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), self._args())
        with jax.default_device(jax.devices("cpu")[0]):
            return cost_flops(counted.trace(*shapes).lower(lowering_platforms=("cpu",)).cost_analysis())

    def _unrolled_graphdef(self) -> nnx.GraphDef:
        steps = self.workload.input.shape[0]
        twin = nnx.eval_shape(lambda: self.model_of(0, unroll=steps))
        return nnx.graphdef(twin)

    def memory_of_step(self) -> dict[str, int]:
        """The process's resident-set peak during one extra step, and XLA's own plan for the compiled step: argument
        buffers (state and batch), outputs, and temporaries (activations kept for the backward pass, gradients)."""
        figures = {}
        if system.reset_rss_hwm():
            self.step()
            self.sync()
            figures["process_rss_peak_bytes"] = system.rss_hwm_bytes()
        try:
            stats = self.jitted.lower(*self._args()).compile().memory_analysis()  # the cached executable
        except Exception:
            stats = None
        if stats is not None:
            figures["xla_argument_bytes"] = stats.argument_size_in_bytes
            figures["xla_output_bytes"] = stats.output_size_in_bytes
            figures["xla_alias_bytes"] = stats.alias_size_in_bytes  # outputs written over donated arguments
            figures["xla_temp_bytes"] = stats.temp_size_in_bytes
            # every buffer the step holds at once by XLA's plan: comparable with PyTorch's live-tensor peak
            figures["xla_buffer_peak_bytes"] = (
                stats.argument_size_in_bytes
                + stats.output_size_in_bytes
                - stats.alias_size_in_bytes
                + stats.temp_size_in_bytes
            )
        return figures

    def compile_stats(self) -> dict[str, Any]:
        """Traces of the step function so far: each one is a compilation (a retrace means a recompile)."""
        return {"graphs": self.traces, "frames_compiled": self.traces}

    def settings(self) -> dict[str, Any]:
        image = self.workload.input.kind == "image"
        return {
            **thread_settings(),
            "jax": jax.__version__,
            "device": self.device,
            "execution": "jax.jit (whole train step; parameters and optimizer state donated)",
            "precision": PRECISION_SETTINGS[self.precision],
            **({"layout": "NHWC"} if image else {}),
            "deviations": deviations(self.workload),
            "model_notes": model_notes(self.workload),
        }


PRECISION_SETTINGS = {
    Mode.FP32: "fp32 throughout",
    Mode.BF16: "bf16 layers (Flax's dtype) from fp32 parameters; loss, gradients and optax update in fp32",
}


def cost_flops(cost: Any) -> int:
    """The FLOPs of XLA's cost analysis, whichever shape this jax gives it: a dict, a list of one dict per
    computation (summed), or None (some backends and versions have none: jax 0.11.2 on CUDA). Raises, saying which,
    where there is no figure; the worker then records the cell with a note instead of a FLOP count."""
    parts = cost if isinstance(cost, (list, tuple)) else [cost]
    if not parts or any(not isinstance(p, dict) or "flops" not in p for p in parts):
        got = type(cost).__name__
        raise RuntimeError(f"XLA's cost analysis has no FLOP figure here (jax {jax.__version__} gave {got})")
    return int(sum(p["flops"] for p in parts))


def deviations(workload: Workload) -> list[str]:
    """How the parameter count differs from the reference (PyTorch) definition, in words; [] where it does not."""
    if not param_deviation(workload):
        return []
    return [f"one bias vector per LSTM layer (Flax), not two (PyTorch): {param_deviation(workload):+,} parameters"]


def model_notes(workload: Workload) -> list[str]:
    """Differences from the reference that leave the parameter count and the work of a step as they are."""
    notes = ["biases start at zero (PyTorch: uniform); LSTM and embedding weights with Flax's initializers"]
    if workload.arch in ("resnet-imagenet", "resnet-cifar"):
        notes.append("BatchNorm's running variance is updated with the biased batch variance (PyTorch: unbiased)")
    return notes


def synthetic_batch(workload: Workload) -> tuple[jax.Array, jax.Array]:
    """Random inputs and labels of the workload's shapes, made once, on the default device; images in NHWC."""
    kx, ky = jax.random.split(_key(DATA_SEED))
    if workload.input.kind == "tokens":
        shape = (workload.batch, *workload.input.shape)  # (B, T) ids, and a target per position
        return (
            jax.random.randint(kx, shape, 0, workload.input.vocab, dtype=jnp.int32),
            jax.random.randint(ky, shape, 0, workload.outputs, dtype=jnp.int32),
        )
    shape = workload.input.shape
    if workload.input.kind == "image":
        channels, height, width = shape
        shape = (height, width, channels)
    inputs = jax.random.normal(kx, (workload.batch, *shape), jnp.float32)
    return inputs, jax.random.randint(ky, (workload.batch,), 0, workload.outputs, dtype=jnp.int32)


def build(workload: Workload, device: str, mode: str, *, seed: int = 0) -> JaxStep:
    """The train step of `workload` on `device` in `mode`, weights initialized from `seed` (the data always from
    DATA_SEED). NotImplementedError (recorded as `unsupported`, with the reason) for what the backend cannot run."""
    if workload.arch == "user":
        raise NotImplementedError(builtin_only("jax"))
    _check_mode(mode)
    dev = _device(device)
    if dev.platform == "gpu" and precision(mode) is Mode.FP32:  # fp32 means fp32: JAX's default GPU precision
        jax.config.update("jax_default_matmul_precision", "highest")  # multiplies fp32 in TensorFloat-32
    with jax.default_device(jax.devices("cpu")[0]):
        model = build_model(workload, nnx.Rngs(_key(seed)), dtype=COMPUTE_DTYPES.get(precision(mode)))
        batch = synthetic_batch(workload)
        step = JaxStep(workload, model, batch, device, mode)
    return step.placed_on(dev)


def loss_check(workload: Workload, device: str, mode: str) -> dict[str, Any]:
    """Does `mode` still train like fp32? bf16 and fp32 train on one batch of at most four samples (`precision`); a
    mode of fp32 arithmetic (an allocator's) is the reference itself. NotImplementedError for a mode the backend does
    not implement, before anything is built."""
    start = time.perf_counter()
    _check_mode(mode)
    if precision(mode) is Mode.FP32:
        return {"ok": None, "reason": "fp32 is the reference: nothing to check", "seconds": time.perf_counter() - start}
    small = common.small(workload)
    made: dict[str, JaxStep] = {}  # one step per mode, compiled once: each later seed restarts it

    def make(which: str, seed: int) -> JaxStep:
        if which not in made:
            made[which] = build(small, device, which, seed=seed)
            return made[which]
        return made[which].restart(seed)

    result = mixed.check(lambda seed: make("fp32", seed), lambda seed: make(mode, seed), read=_read, write=_write)
    return {**result, "batch": small.batch}


def _read(step: JaxStep) -> list[np.ndarray]:
    """The step's parameters, copied to the host (the next step donates their buffers), in the state's order."""
    return [np.array(leaf, copy=True) for leaf in jax.tree.leaves(step.state[0])]


def _write(step: JaxStep, values: list[np.ndarray]) -> None:
    params, *rest = step.state
    placed = [jax.device_put(jnp.asarray(v), step.placed) for v in values]
    step.state = (jax.tree.unflatten(jax.tree.structure(params), placed), *rest)


# ----------------------------------------------------------------------------------------------------------------------
# The probe and the thread test


def probe(request: dict[str, Any]) -> dict[str, Any]:
    return probe_builtin_only("jax", request, probe_env)


loader = no_loader  # real data (`--data`) is read by the torch backend only: loader cells are `unsupported` here


def probe_env() -> dict[str, Any]:
    return {
        "framework": "jax",
        "version": jax.__version__,
        "build": {
            "jaxlib": jaxlib.__version__,
            "flax": flax.__version__,
            "optax": optax.__version__,
            "backend": jax.default_backend(),
        },
        "devices": [{"name": "cpu"}] + [{"name": f"cuda:{i}", "model": d.device_kind} for i, d in enumerate(_gpus())],
        "precision_speed": {"cpu": precision_speed()},
    }


def precision_speed(size: int = 512, rounds: int = 10) -> dict[str, float]:
    """bf16's matrix product on the CPU against fp32's in XLA's own kernels (`common.speed`), jitted as the bf16
    cells' layers run it (bf16 operands, a bf16 result): without avx512_bf16, XLA converts to fp32 (0.8x fp32's speed
    on an Intel Xeon where PyTorch's emulated bf16 ran 0.2x). About 0.1 s."""
    cpu = jax.devices("cpu")[0]
    base = jax.device_put(jax.random.normal(jax.random.key(0), (size, size), jnp.float32), cpu)
    product = jax.jit(jnp.matmul)
    operands = {"fp32": base, "bf16": base.astype(jnp.bfloat16).block_until_ready()}
    return relative_speed({name: (lambda x=x: product(x, x).block_until_ready()) for name, x in operands.items()},
                          rounds)  # fmt: skip


def matmul(size: int) -> Callable[[], None]:
    """A jitted size x size fp32 product; each call returns once the result is ready."""
    a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
    product = jax.jit(jnp.matmul)

    def run() -> None:
        product(a, a).block_until_ready()

    return run
