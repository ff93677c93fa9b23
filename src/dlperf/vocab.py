"""Closed vocabularies. `str` enums so they serialize to JSON and SQLite as themselves."""

from enum import StrEnum


class Framework(StrEnum):
    TORCH = "torch"


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
    """One component of a training mode; a mode is components joined by '+', e.g. `bf16+channels_last`."""

    FP32 = "fp32"  # fp32 eager: the paper's setting
    BF16 = "bf16"  # bfloat16 autocast of forward and loss; weights, gradients and optimizer stay fp32
    FP16 = "fp16"  # float16 autocast with gradient scaling
    CHANNELS_LAST = "channels_last"  # NHWC memory format for convolutional networks


PRECISIONS = (Mode.FP32, Mode.BF16, Mode.FP16)
# Canonical order of components in a mode name: `channels_last+bf16` and `bf16+channels_last` are one cell.
MODE_ORDER = (Mode.FP32, Mode.BF16, Mode.FP16, Mode.CHANNELS_LAST)


def mode_components(mode: str) -> list[Mode]:
    """The components of a canonical mode name; fp32 is implied when no precision is named."""
    parts = [Mode(p) for p in mode.split("+")]
    return parts if any(p in PRECISIONS for p in parts) else [Mode.FP32, *parts]


class ExitCode:
    OK = 0
    CELLS_FAILED = 1
    BAD_INPUT = 2
    INTERRUPTED = 130
