"""Closed vocabularies. `str` enums so they serialize to JSON and SQLite as themselves."""

from enum import StrEnum


class Framework(StrEnum):
    TORCH = "torch"
    JAX = "jax"
    TENSORFLOW = "tensorflow"
    MXNET = "mxnet"


class DeviceKind(StrEnum):
    CPU = "cpu"
    CUDA = "cuda"
    MPS = "mps"


class Status(StrEnum):
    PENDING = "pending"
    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    UNSUPPORTED = "unsupported"

    @property
    def is_failure(self) -> bool:
        return self in (Status.FAILED, Status.TIMEOUT)


class Mode(StrEnum):
    """One component of a training mode; a mode is components joined by '+', e.g. `bf16+channels_last+compile`."""

    # precision: exactly one (fp32 is implied when none is named)
    FP32 = "fp32"  # fp32 eager: the paper's setting
    BF16 = "bf16"  # bfloat16 autocast of forward and loss; weights, gradients and optimizer stay fp32
    FP16 = "fp16"  # float16 autocast with gradient scaling
    # with fp32 (or the fp32 ops of autocast)
    TF32 = "tf32"  # CUDA only: fp32 matrix products and convolutions on TensorFloat-32 tensor cores
    # memory format
    CHANNELS_LAST = "channels_last"  # NHWC memory format for convolutional networks
    # optimizer implementation: at most one (the default is the optimizer's for-loop over parameters)
    FOREACH = "foreach"  # one multi-tensor kernel per operation over all parameters
    FUSED = "fused"  # the whole update in one fused kernel per parameter group
    # memory for time
    CHECKPOINT = "checkpoint"  # gradient checkpointing: recompute activations in backward instead of keeping them
    # compilation and launch
    COMPILE = "compile"  # torch.compile of the model (TorchInductor)
    CUDA_GRAPHS = "cuda_graphs"  # CUDA only: the whole step captured once and replayed
    # parallelism within one process
    DATA_PARALLEL = "dataparallel"  # CUDA only, 2+ GPUs: torch.nn.DataParallel, the batch split over every GPU


# Components of which a mode has at most one.
EXCLUSIVE = {
    "precision": (Mode.FP32, Mode.BF16, Mode.FP16),
    "optimizer implementation": (Mode.FOREACH, Mode.FUSED),
}
PRECISIONS = EXCLUSIVE["precision"]
# Canonical order of components in a mode name: `compile+bf16` and `bf16+compile` are one cell.
MODE_ORDER = tuple(Mode)


def mode_components(mode: str) -> list[Mode]:
    """The components of a canonical mode name; fp32 is implied when no precision is named."""
    parts = [Mode(p) for p in mode.split("+")]
    return parts if any(p in PRECISIONS for p in parts) else [Mode.FP32, *parts]


class ExitCode:
    OK = 0
    CELLS_FAILED = 1
    BAD_INPUT = 2
    INTERRUPTED = 130
