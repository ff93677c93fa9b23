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


class ExitCode:
    OK = 0
    CELLS_FAILED = 1
    BAD_INPUT = 2
    INTERRUPTED = 130


class CommBackend(StrEnum):
    """How the processes of a collective talk (`dlperf comm`, DDP)."""

    GLOO = "gloo"  # CPU tensors, TCP between processes
    NCCL = "nccl"  # one CUDA GPU per process


EXPORT_FORMATS = ("jsonl", "csv")  # `dlperf export --format`
