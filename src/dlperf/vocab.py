"""Closed vocabularies. `str` enums so they serialize to JSON and SQLite as themselves."""

import re
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


OUT_OF_MEMORY = "out of memory"  # the start of a stored reason of a cell out of memory (`worker/cell.oom_reason`)
# How the frameworks say they ran out of memory (CUDA's "out of memory", Windows' and MXNet's "not enough memory", the
# CPU allocator's "can't allocate memory" under a limit, TensorFlow's ResourceExhaustedError "OOM when allocating
# tensor ...", on the CPU as on a GPU): an error whose text holds one, in lower case, is one
# (`worker/child.describe`, `frameworks/torch/fsdp.out_of_memory`).
OUT_OF_MEMORY_SAID = ("out of memory", "not enough memory", "can't allocate memory", "oom when allocating")
# A process a signal ended where the launcher says it ran out of memory (`runner/launch.signal_reason`), on one rank
# of several or alone: "rank 1: worker killed by SIGKILL (out of memory: the kernel's out-of-memory killer ...)".
KILLED_OUT_OF_MEMORY = re.compile(rf"^(rank \d+: )?worker killed by \S+ \({OUT_OF_MEMORY}")


def ran_out_of_memory(error: str | None) -> bool:
    """A failed cell's stored reason says it ran out of memory: raised as such in the cell ("out of memory at batch
    16 ...": `worker/cell.oom_reason`, or on a rank: `runner/collect`), or its process killed for it (the kernel's
    out-of-memory killer counted a kill, an allocation failed and it aborted)."""
    return bool(error) and (error.startswith(OUT_OF_MEMORY) or KILLED_OUT_OF_MEMORY.match(error) is not None)


class ExitCode:
    OK = 0
    CELLS_FAILED = 1
    BAD_INPUT = 2
    OUTPUT_FAILED = 74  # sysexits.h's EX_IOERR
    INTERRUPTED = 130


class CommBackend(StrEnum):
    """How the processes of a collective talk (`dlperf comm`, DDP)."""

    GLOO = "gloo"  # CPU tensors, TCP between processes
    NCCL = "nccl"  # one CUDA GPU per process


class Parallel(StrEnum):
    """How a step is spread over processes or devices (`--parallel`; the table is `dlperf.parallel.STRATEGIES`)."""

    DDP = "ddp"  # data parallel: DistributedDataParallel
    FSDP = "fsdp"  # sharded data parallel: FSDP2's fully_shard
    GPIPE = "gpipe"  # pipeline parallel, the GPipe schedule
    ONE_F_ONE_B = "1f1b"  # pipeline parallel, the 1F1B schedule
    TP = "tp"  # tensor parallel: DTensor's parallelize_module
    MIRRORED = "mirrored"  # TensorFlow's MirroredStrategy: N replicas in one process
    MULTIWORKER = "multiworker"  # TensorFlow's MultiWorkerMirroredStrategy: one worker process per replica


EXPORT_FORMATS = ("jsonl", "csv")  # `dlperf export --format`


class Category(StrEnum):
    """Where a profiled step's time goes (`dlperf profile`). The shares of one step sum to its profiled time."""

    MATMUL = "matmul"  # matrix products and convolutions (forward and backward)
    ELEMENTWISE = "elementwise"  # element-wise arithmetic and activations
    NORMALIZATION = "normalization"  # batch/layer/group norm
    POOLING = "pooling"
    LOSS = "loss"
    OPTIMIZER = "optimizer"  # the update, gradient clipping and zeroing
    COPY_H2D = "copy_h2d"  # host -> device
    COPY_D2H = "copy_d2h"  # device -> host
    COPY = "copy"  # other copies, layout changes, casts inside one device
    DATA = "data"  # waiting for the input pipeline
    HOST = "host"  # host and framework time not hidden behind device work (Python, dispatch, launches)
    IDLE = "idle"  # the device waiting with nothing to run (GPU only)
    OTHER = "other"


class Bound(StrEnum):
    """What bounds a step: the verdict of a profiled cell."""

    COMPUTE = "compute"
    MEMORY = "memory"
    LAUNCH = "launch"  # launch- or dispatch-bound: the host cannot issue work fast enough
    TRANSFER = "transfer"  # host <-> device copies
    INPUT = "input"  # the input pipeline


# the start of a cell's warning where a process was timed too briefly to read other processes' load (`runner/collect`):
# a disturbance as a load read is (`report.charts.disturbances`: `?`, no star), for it may have been one
LOAD_UNREAD = "other processes' load not read"
LOSS_CHECK_BROKE = "the check could not run"  # a loss check's reason where the check itself failed (`worker/cell.py`)
