"""What each backend can do, one row per backend, read by the parent without importing any framework.

The parent's checks ask this table, never a framework's name: `--profile` (is the backend profilable, and why not),
`--nproc` without `--parallel` (its data-parallel strategy), whose engine runs a strategy (`parallel.STRATEGIES`),
who reads real data (`--data`), who counts a step's operators for the GPU predictor (`dlperf predict`, `dlperf
crossover`), which mode components a backend implements (the backend's `MODES` is its row's `modes`), and how its
fp32 step runs (the baseline of `table --best`). A backend gains a capability by a change to its row here and the
implementation beside its backend; no other place names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlperf.modes import Mode
from dlperf.vocab import Framework, Parallel


@dataclass(frozen=True)
class Capabilities:
    framework: Framework
    packages: tuple[str, ...]  # the framework's own top-level modules, the first found to tell it is installed
    modes: frozenset[Mode]  # the mode components its `build` implements; any other component is `unsupported`
    fp32_step: str  # how its fp32 cell's step runs: the baseline its modes' speed-ups are over (`table --best`)
    # why each other component is not implemented, in the words its cell records (one missing: said plainly); here,
    # not in the backend, so the plan knows such a cell is unsupported before any child imports the framework
    why_not: dict[Mode, str] = field(default_factory=dict, compare=False)
    unprofilable: str | None = None  # why `--profile` is refused for it; None: its `profile` maps its profiler
    strategies: tuple[Parallel, ...] = ()  # the `--parallel` strategies its engine runs
    data_parallel: Parallel | None = None  # what `--nproc` measures without `--parallel`; None: no multi-process cell
    reads_data: bool = False  # its `loader` reads real data (`--data`); elsewhere loader cells are `unsupported`
    counts_ops: bool = False  # its probe counts a step's operators on fake tensors (`predict.count`)
    also_imports: tuple[str, ...] = ()  # what else its package may import (what the framework installs with it)
    forks: bool = False  # its CPU cells' children may fork from a warm parent (`runner/warm.py`): its import starts
    # no thread, so a process that has imported it can fork; its backend's `preload()` imports what a step would

    @property
    def profilable(self) -> bool:
        return self.unprofilable is None


MXNET_AGGREGATED = (
    "mxnet's Trainer already updates several parameters per kernel (multi_sgd_update, multi_sgd_mom_update)"
)
# the allocator's modes: the process's setting, not the framework's (the worker sets it: `common/heap.py`)
ALLOCATORS = frozenset({Mode.MALLOC_KEEP, Mode.TCMALLOC, Mode.JEMALLOC})

# fmt: off
TABLE: dict[Framework, Capabilities] = {
    Framework.TORCH: Capabilities(
        Framework.TORCH, ("torch",),
        frozenset({Mode.FP32, Mode.BF16, Mode.FP16, Mode.TF32, Mode.CHANNELS_LAST, Mode.FOREACH, Mode.FUSED,
                   Mode.CHECKPOINT, Mode.COMPILE, Mode.CUDA_GRAPHS, Mode.DATA_PARALLEL}) | ALLOCATORS,
        "eager",
        strategies=(Parallel.DDP, Parallel.FSDP, Parallel.GPIPE, Parallel.ONE_F_ONE_B, Parallel.TP),
        data_parallel=Parallel.DDP, reads_data=True, counts_ops=True, forks=True,
        # Pillow decodes --data's images (torchvision's wheel needs CUDA's torch); threadpoolctl sizes numpy's BLAS pool
        # in a cell forked from a warm parent (backend.after_fork)
        also_imports=("PIL", "threadpoolctl"),
    ),
    Framework.JAX: Capabilities(
        Framework.JAX, ("jax", "jaxlib", "flax", "optax"), frozenset({Mode.FP32, Mode.BF16}) | ALLOCATORS,
        "compiled by jax.jit", also_imports=("numpy",),
        why_not={
            Mode.FP16: "the jax backend's mixed precision is bf16 only (fp16 would need loss scaling)",
            Mode.TF32: "the jax backend has no such mode; its fp32 cells multiply at full fp32 precision",
            Mode.CHANNELS_LAST: "the jax backend has no such mode; its convolutions are NHWC already",
            Mode.FOREACH: "the jax backend has no such mode; XLA fuses the whole optax update already",
            Mode.FUSED: "the jax backend has no such mode; XLA fuses the whole optax update already",
            Mode.CHECKPOINT: "the jax backend does not rematerialize activations (jax.checkpoint is not wired in)",
            Mode.COMPILE: "jax: every step is already XLA-compiled by jax.jit; the same mode without compile (fp32, "
                          "bf16) is the compiled one",
            Mode.CUDA_GRAPHS: "the jax backend has no such mode; XLA launches the compiled step as a whole",
            Mode.DATA_PARALLEL: "torch.nn.DataParallel is PyTorch's; the jax backend runs one device",
        },
    ),
    Framework.TENSORFLOW: Capabilities(
        Framework.TENSORFLOW, ("tensorflow", "keras"),
        frozenset({Mode.FP32, Mode.BF16, Mode.COMPILE}) | ALLOCATORS,  # Keras's mixed_bfloat16; XLA
        "a tf.function graph, without XLA",
        strategies=(Parallel.MIRRORED, Parallel.MULTIWORKER), data_parallel=Parallel.MIRRORED, also_imports=("numpy",),
        why_not={
            Mode.FP16: "the tensorflow backend's mixed precision is bf16 only (fp16 would need Keras's loss scaling)",
            Mode.TF32: "TensorFloat-32 is a CUDA mode, not implemented in dlperf's tensorflow backend",
            Mode.CHANNELS_LAST: "tensorflow runs NHWC (its native CPU layout) in every mode here: there is nothing to "
                                "switch",
            Mode.FOREACH: "foreach is a PyTorch optimizer implementation; Keras' SGD on tensorflow has no such variant",
            Mode.FUSED: "fused is a PyTorch optimizer implementation; Keras' SGD on tensorflow has no such variant",
            Mode.CHECKPOINT: "gradient checkpointing (tf.recompute_grad) is not implemented in dlperf's tensorflow "
                             "backend",
            Mode.CUDA_GRAPHS: "CUDA graphs are a PyTorch feature; tensorflow has no equivalent to measure",
            Mode.DATA_PARALLEL: "torch.nn.DataParallel is a PyTorch feature; the tensorflow backend runs one device",
        },
    ),
    Framework.MXNET: Capabilities(
        Framework.MXNET, ("mxnet",), frozenset({Mode.FP32}) | ALLOCATORS, "a hybridized gluon graph",
        also_imports=("numpy",),
        unprofilable="MXNet 1.9's profiler shows a hybridized graph's operators in bulks, one event for many kinds",
        why_not={
            Mode.BF16: "the mxnet backend trains in fp32 only (MXNet 1.x has bf16 only through its contrib AMP)",
            Mode.FP16: "the mxnet backend trains in fp32 only (MXNet 1.x has fp16 only through its contrib AMP)",
            Mode.TF32: "the mxnet backend has no TensorFloat-32 mode (CUDA only; the backend measures fp32)",
            Mode.CHANNELS_LAST: "the mxnet backend runs MXNet's native NCHW layout only",
            Mode.FOREACH: MXNET_AGGREGATED,
            Mode.FUSED: MXNET_AGGREGATED,
            Mode.CHECKPOINT: "the mxnet backend has no gradient checkpointing mode",
            Mode.COMPILE: "the mxnet fp32 cell is already hybridized (a static graph); there is nothing more to "
                          "compile",
            Mode.CUDA_GRAPHS: "the mxnet backend has no CUDA-graphs mode (CUDA only)",
            Mode.DATA_PARALLEL: "torch.nn.DataParallel is a PyTorch feature; the mxnet backend runs one device",
        },
    ),
}
# fmt: on


def of(framework: str) -> Capabilities:
    return TABLE[Framework(framework)]


def fp32_steps(frameworks: list[str] | None = None) -> str:
    """How each framework's fp32 step runs (of `frameworks`, else of every backend): "torch: eager; jax: ..."."""
    return "; ".join(f"{row.framework}: {row.fp32_step}" for row in TABLE.values()
                     if frameworks is None or row.framework in frameworks)  # fmt: skip


def owner(strategy: Parallel) -> Framework:
    """The backend whose engine runs `strategy`: the one row that lists it."""
    [found] = [row.framework for row in TABLE.values() if strategy in row.strategies]
    return found


def data_readers(frameworks: tuple[str, ...] | list[str]) -> list[str]:
    """Those of `frameworks` whose backend reads real data (`--data`), in order."""
    return [f for f in frameworks if of(f).reads_data]


def op_counter() -> Framework:
    """The backend that counts a step's operators for the GPU predictor (the first row that does)."""
    return next(row.framework for row in TABLE.values() if row.counts_ops)
