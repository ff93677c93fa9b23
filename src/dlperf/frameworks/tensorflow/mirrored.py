"""TensorFlow's MirroredStrategy: N replicas of the TensorFlow backend's step in one process (`--parallel mirrored`).

On a CPU the replicas are N logical CPU devices (`tf.config.set_logical_device_configuration`, before TensorFlow
initializes its devices), on GPUs one GPU each. The model, loss and optimizer are the backend's (`backend.py`); each
replica trains its slice of the total batch, the job's (`plan.ddp_workload`: strong scaling splits the workload's
total, weak gives each replica the workload's batch). A step is `strategy.run` of one tf.function (graph mode), the
loss summed over the replicas.

Gradients. Each replica's loss is its slice's mean over N, so the all-reduced (summed) gradient is the gradient of the
total batch's mean, as one device computes it. The step all-reduces them itself (`ReplicaContext.all_reduce`, one
all-reduce through the strategy's cross-device ops), clips (the LSTM) and then hands them to Keras' SGD with its own
all-reduce off: Keras would clip each replica's gradient before summing, where PyTorch's DDP (and one device) clip the
summed one. BatchNorm normalizes over each replica's slice, as DDP without SyncBatchNorm does.

Precision: fp32, or bf16 as on one device (Keras's `mixed_bfloat16` policy, the logits cast to fp32 for the loss): the
variables, the gradients, their all-reduce and the update stay fp32. No other mode runs under the strategy.

Cross-device ops: TensorFlow's own choice for the devices, read back from the strategy and recorded. On CPU devices
that is CollectiveAllReduce with the RING implementation; on GPUs, CollectiveAllReduce over NCCL. Of the others,
NcclAllReduce has no CPU kernel; ReductionToOneDevice and HierarchicalCopyAllReduce run on CPUs too, but on this
shared 2-core machine (tiny-resnet-56, 2 x 1 threads) their step times varied more from run to run than they
differed from the default's, so TensorFlow's choice stands.

Threads. TensorFlow has one intra-op pool per process, which every logical CPU device's kernels share: the process
gets N x threads intra-op threads (the variables the launcher set for the cell) and N inter-op threads, so one
replica's ops are scheduled while another's run. With one inter-op thread, as the plain backend has
(`inter_op_threads`), tiny-resnet-56's 2 x 1 step was slower in each of three interleaved pairs on a busy machine
(6.1-7.2 ms against 5.0-6.1 ms with two).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

import tensorflow as tf

from dlperf.frameworks import builtin_only
from dlperf.frameworks.common import comm
from dlperf.frameworks.tensorflow import backend as tb
from dlperf.frameworks.tensorflow.models import build_model
from dlperf.measure import system
from dlperf.measure.stats import bus_bandwidth
from dlperf.measure.timer import timed_step
from dlperf.modes import Mode, mode_components
from dlperf.protocol import Cell
from dlperf.workloads.base import Workload

COMM_REPEATS = 10  # all-reduces of the gradients alone


def configure(cell: Cell) -> dict[str, Any]:
    """Threads and devices for `cell.nproc` replicas, before TensorFlow initializes its devices."""
    replicas = cell.nproc
    try:
        tf.config.threading.set_intra_op_parallelism_threads(cell.threads * replicas)
        tf.config.threading.set_inter_op_parallelism_threads(replicas)
        if cell.device == "cpu":
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    except RuntimeError as exc:  # TensorFlow already initialized: the replicas could not be set up as asked
        raise RuntimeError(f"MirroredStrategy: TensorFlow was initialized before its devices were set ({exc})") from exc
    return tb.thread_settings()


def replica_devices(device: str, replicas: int) -> list[str]:
    """N logical CPUs, or the first N GPUs; NotImplementedError where there are fewer."""
    if device == "cpu":
        return [d.name for d in tf.config.list_logical_devices("CPU")][:replicas]
    gpus = tf.config.list_logical_devices("GPU")
    if not device.startswith("cuda") or len(gpus) < replicas:
        raise NotImplementedError(f"MirroredStrategy on {device}: {replicas} GPUs wanted, tensorflow sees {len(gpus)}")
    return [d.name for d in gpus[:replicas]]


def cross_device_ops_name(strategy: tf.distribute.Strategy) -> str:
    """The all-reduce the strategy chose, as TensorFlow names it (and the collective's implementation)."""
    ops = strategy.extended._cross_device_ops  # no public accessor; what the strategy really runs
    options = getattr(ops, "_options", None)
    implementation = getattr(getattr(options, "implementation", None), "name", None)
    return type(ops).__name__ + (f" ({implementation})" if implementation else "")


def keep_reduced(optimizer) -> None:
    """Keras' optimizer all-reduces the gradients it is given inside a replica; these arrive all-reduced (and
    clipped) already, or stay local on purpose (`local_step`), so its own all-reduce passes them through."""
    optimizer._all_reduce_sum_gradients = lambda grads_and_vars: list(grads_and_vars)


class MirroredStep:
    """The backend's model, loss and optimizer under MirroredStrategy; each replica a fixed slice of one batch."""

    def __init__(self, workload: Workload, cell: Cell, *, seed: int = 0) -> None:
        self.workload, self.cell, self.replicas = workload, cell, cell.nproc
        self.per_replica_batch = workload.batch // cell.nproc
        self.strategy = self._strategy()
        self.precision = Mode.BF16 if Mode.BF16 in mode_components(cell.mode) else Mode.FP32
        with self.strategy.scope():
            tf.keras.utils.set_random_seed(seed)
            with tb.dtype_policy(tb.POLICIES[self.precision]):  # bf16: Keras's mixed precision, as on one device
                self.model = build_model(workload)
            self.optimizer = tb.make_optimizer(workload.optimizer)
            self.optimizer.build(self.model.trainable_variables)
        keep_reduced(self.optimizer)
        self.variables = self.model.trainable_variables
        self.params = sum(math.prod(v.shape) for v in self.variables)
        self.inputs, self.targets = self._slices(*tb.synthetic_batch(workload))
        self.function = tf.function(self._step_fn(reduce=True), jit_compile=False)
        self.local_function = tf.function(self._step_fn(reduce=False), jit_compile=False)
        self.compiles = True  # the first call traces: the worker times it apart
        self.loss: tf.Tensor | None = None

    def _strategy(self) -> tf.distribute.Strategy:
        self.devices = replica_devices(self.cell.device, self.cell.nproc)
        return tf.distribute.MirroredStrategy(self.devices)

    def _slices(self, inputs: tf.Tensor, targets: tf.Tensor):
        """Replica i's slice i of the batch, on its device: together they are the one device's batch (under
        MultiWorkerMirroredStrategy the replica's id counts every worker's replicas)."""
        n = self.per_replica_batch

        def part(tensor: tf.Tensor):
            return lambda ctx: tf.identity(tensor[ctx.replica_id_in_sync_group * n :][:n])

        distribute = self.strategy.experimental_distribute_values_from_function
        return distribute(part(inputs)), distribute(part(targets))

    def _step_fn(self, *, reduce: bool):
        """The step of every replica, its gradients all-reduced (`reduce`) or kept local, and its loss summed."""
        model, optimizer, variables = self.model, self.optimizer, self.variables
        clip, replicas = self.workload.optimizer.clip_grad_norm, self.replicas

        def replica(inputs: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = tf.cast(model(inputs, training=True), tf.float32)  # bf16 logits cast, as on one device
                loss = tb.cross_entropy(logits, targets) / replicas  # summed over replicas: the whole batch's mean
            grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]  # dense, as PyTorch's
            if reduce:
                grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)
            if clip is not None:
                grads, _ = tf.clip_by_global_norm(grads, clip)
            optimizer.apply(grads, variables)
            return loss

        def step(inputs, targets) -> tf.Tensor:
            losses = self.strategy.run(replica, args=(inputs, targets))
            return self.strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

        return step

    def step(self) -> tf.Tensor:
        self.loss = self.function(self.inputs, self.targets)
        return self.loss

    def local_step(self) -> tf.Tensor:
        """The same step without the all-reduce, each replica updating from its own gradients: computing alone."""
        self.loss = self.local_function(self.inputs, self.targets)
        return self.loss

    def device_clock(self) -> None:
        return None

    def sync(self) -> None:
        """Wait for the step: the summed loss depends on every replica's, and the function's variable updates run
        before it returns (see the backend's docstring)."""
        if self.loss is not None:
            self.loss.numpy()

    def compile_stats(self) -> dict[str, Any]:
        traces = self.function.experimental_get_tracing_count()
        return {"graphs": traces, "frames_compiled": traces, "jit_compile": False}

    def count_flops(self) -> dict[str, Any] | None:
        """The whole job's: one replica's step (the backend's counter, on its slice of the batch) times N."""
        one = tb.TFStep(self._replica_workload(), self.cell.device, xla=False, seed=0, precision=self.precision)
        one = one.count_flops()
        return {"flops_per_step": one["flops_per_step"] * self.replicas, "flops_by_dtype": None}

    def _replica_workload(self) -> Workload:
        return replace(self.workload, batch=self.per_replica_batch)

    def memory_of_step(self) -> dict[str, int]:
        """The process's resident-set peak over one untimed step (every replica's); TensorFlow keeps no per-device
        figure on a CPU (see the backend's `memory_of_step`)."""
        reset = system.reset_rss_hwm()
        self.step()
        self.sync()
        return {"process_rss_peak_bytes": system.rss_hwm_bytes()} if reset else {}

    def held_bytes(self) -> dict[str, list[int]]:
        """What each replica holds between steps: its copy of the parameters, and with them the optimizer's state
        (TensorFlow keeps no gradient between steps)."""
        params = sum(nbytes(v) for v in self.variables)
        state = sum(nbytes(v) for v in self.optimizer.variables if len(v.shape))  # not the step counter
        return {"param_bytes_rank": [params] * self.replicas, "state_bytes_rank": [params + state] * self.replicas}

    def communication(self) -> dict[str, Any]:
        return communication(self)

    def settings(self) -> dict[str, Any]:
        return {
            **tb.thread_settings(),
            "threads_per_replica": self.cell.threads,
            "threading": f"one process: intra-op pool of {self.cell.threads} x {self.replicas} threads shared by the "
            f"replicas, inter-op pool of {self.replicas} (one per replica)",
            "replicas": self.replicas,
            "replica_devices": self.devices,
            "per_replica_batch": self.per_replica_batch,
            "cross_device_ops": cross_device_ops_name(self.strategy),
            "batch_norm": "per replica (not synchronized)",
            "execution": "tf.function graph (jit_compile=False), MirroredStrategy.run",
            "dtype_policy": self.model.dtype_policy.name,
            **({"layout": "NHWC"} if self.workload.input.kind == "image" else {}),
        }


def communication(train: MirroredStep, agree: Callable | None = None, name: str = "mirrored") -> dict[str, Any]:
    """Where a mirrored step's time goes (untimed, after everything else: the local steps leave the replicas'
    weights apart):

    - `allreduce_s`: the gradients' all-reduce alone, through the same cross-device ops (median of COMM_REPEATS);
    - `local_step_s`: the step with each replica updating from its own gradients, no all-reduce;
    - `exposed_comm_s`: the synchronized step minus the local one (`common.comm`: alternated, medians)."""
    # each replica's gradient-sized tensors, on its device: arguments, not constants Grappler could fold
    grads = train.strategy.experimental_distribute_values_from_function(
        lambda ctx: [tf.zeros(v.shape, v.dtype) for v in train.variables]
    )
    context = tf.distribute.get_replica_context

    def replica(g):  # identity: placed on the replica's device; every reduced tensor read, so none is pruned
        reduced = context().all_reduce(tf.distribute.ReduceOp.SUM, [tf.identity(t) for t in g])
        return tf.add_n([tf.reduce_sum(t) for t in reduced])

    @tf.function
    def allreduce(grads):
        return train.strategy.reduce(tf.distribute.ReduceOp.SUM, train.strategy.run(replica, args=(grads,)), axis=None)

    allreduce(grads)  # both traced here, not timed
    train.local_step()
    allreduce_s = statistics.median(
        timed_step(lambda: allreduce(grads).numpy(), lambda: None) for _ in range(COMM_REPEATS)
    )
    agreed = {"agree": agree} if agree else {}  # several workers: each figure the slowest worker's
    exposed = comm.measure((train.local_step, train.sync), (train.step, train.sync), **agreed)
    gradient_bytes = sum(nbytes(v) for v in train.variables)
    algbw, busbw = bus_bandwidth(gradient_bytes, allreduce_s, train.replicas)
    return {
        "gradient_bytes": gradient_bytes, "allreduce_s": allreduce_s, "algbw_bytes_s": algbw, "busbw_bytes_s": busbw,
        **asdict(exposed), "backend": f"{name}: {cross_device_ops_name(train.strategy)}", "world": train.replicas,
        **train.held_bytes(),
    }  # fmt: skip


def nbytes(variable) -> int:
    return math.prod(variable.shape) * tf.as_dtype(variable.dtype).size


def check(workload: Workload, cell: Cell, over: str = "replicas") -> None:
    """NotImplementedError (the cell is unsupported, with the reason) where a mirrored step does not apply."""
    if workload.arch == "user":
        raise NotImplementedError(builtin_only("tensorflow"))
    if not set(mode_components(cell.mode)) <= {Mode.FP32, Mode.BF16}:
        raise NotImplementedError(
            f"{cell.mode} under MirroredStrategy is not measured by dlperf: graph mode, in fp32 or bf16, only"
        )
    if workload.batch % cell.nproc:
        raise NotImplementedError(f"a total batch of {workload.batch} does not split evenly over {cell.nproc} {over}")


def build(workload: Workload, cell: Cell, *, seed: int = 0) -> MirroredStep:
    """The mirrored step of `workload`, its `batch` the job's total; NotImplementedError (the cell is unsupported,
    with the reason) where it does not apply."""
    check(workload, cell)
    return MirroredStep(workload, cell, seed=seed)
