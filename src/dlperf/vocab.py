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
    FP32 = "fp32"  # fp32 eager: the paper's setting, and the only mode for now


class ExitCode:
    OK = 0
    CELLS_FAILED = 1
    BAD_INPUT = 2
    INTERRUPTED = 130
