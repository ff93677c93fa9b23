"""What the children that answer once are asked, and what they answer: the probe's questions and answers, the peaks
of `dlperf peak` and the collective figures of `dlperf comm`.

Each is a typed record (`wire.Wire`) with the JSON keys its producer writes, so the wire and the stored figures are
what they were when they were dicts. A child builds its answer's record before it reports it (a producer that lost a
key fails there, naming the key); the parent reads the `protocol.Answer` back as that record, by field.

A probe question names its kind on the wire (`"what": "env"`); `REQUESTS` maps the kind to its type, and each type
knows its answer's. Standard library only: every child imports this.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, dataclass_transform

from dlperf.wire import ABSENT, FLAT, Wire

A = TypeVar("A", bound=Wire)
T = TypeVar("T", bound=type)

# ----------------------------------------------------------------------------------------------------------------------
# The probe's answers


@dataclass(frozen=True)
class EnvAnswer(Wire):
    """A framework's version, build and devices, stored with every run (`envinfo.capture`)."""

    framework: str
    version: str
    build: dict[str, Any]  # the framework's own build facts (CUDA, oneDNN, XLA, ...)
    devices: list[dict[str, Any]]  # {"name": "cpu" | "cuda:N" | "mps", ...}: each framework says what it knows
    # torch only: device -> dtype -> a matrix product's speed against fp32's
    precision_speed: dict[str, dict[str, float]] | None = field(default=None, metadata=ABSENT)

    @property
    def device_names(self) -> list[str]:
        return [d["name"] for d in self.devices]


@dataclass(frozen=True)
class WorkloadAnswer(Wire):
    """A user's workload factory, built on the CPU and described; its model never ran."""

    name: str
    framework: str
    params: int
    batch: int
    clip_grad_norm: float | None
    input_shape: list[int] | None  # per sample; None when the input is not one tensor
    input_dtype: str | None
    batch_error: str | None = field(default=None, metadata=ABSENT)  # the batch maker failed here: the workers will say
    input_names: list[str] | None = field(default=None, metadata=ABSENT)  # a dict of inputs: the model takes them so
    # a dict of inputs: each one's per-sample shape, then its dtype ({"input_ids": [128, "int64"]}): the step's work
    input_shapes: dict[str, list] | None = field(default=None, metadata=ABSENT)
    optimizer: dict[str, Any] | None = field(default=None, metadata=ABSENT)  # its class and settings, as cells build it
    no_checkpoint: str | None = field(default=None, metadata=ABSENT)  # why the checkpoint mode refuses the model
    no_compile: str | None = field(default=None, metadata=ABSENT)  # why the compile mode refuses it (TorchScript)
    dataset_samples: int | None = field(default=None, metadata=ABSENT)  # len(dataset=): an epoch of the user's data
    param_bytes: int | None = field(default=None, metadata=ABSENT)  # the trainable parameters, in their own dtypes
    repeated: bool | None = field(default=None, metadata=ABSENT)  # no make_batch: the batch is the data's first sample
    # without --data DIR, the folder the factory's `data_dir` defaults to, absolute (`workloads.user.default_data_dir`)
    default_data_dir: str | None = field(default=None, metadata=ABSENT)
    # the user's files the child imported (`worker/sources.py`): what the kept answer was made from (`predict/cache.py`)
    sources: dict[str, list] | None = field(default=None, metadata=ABSENT)


@dataclass(frozen=True)
class DataCheck(Wire):
    """One workload's `--data`: opened and a sample read, or why its loader cells will be unsupported."""

    samples: int | None
    input_shape: list[int] | None = field(default=None, metadata=ABSENT)
    unsupported: str | None = None
    batches: int | None = field(default=None, metadata=ABSENT)  # an epoch's, as its loader counts them (len)
    folder: str | None = field(default=None, metadata=ABSENT)  # the image folder found in --data DIR, absolute
    classes: int | None = field(default=None, metadata=ABSENT)  # ... and its class folders
    skipped: str | None = field(default=None, metadata=ABSENT)  # ... and the files of them not read, and why


@dataclass(frozen=True)
class DataAnswer(Wire):
    """Each workload's `DataCheck`, by name: on the wire the object of the names themselves."""

    checks: dict[str, DataCheck]

    def to_json(self) -> dict[str, Any]:
        return {name: check.to_json() for name, check in self.checks.items()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DataAnswer:
        return cls({name: DataCheck.from_json(check) for name, check in d.items()})


@dataclass(frozen=True)
class OpCount(Wire):
    """One step's operators, as `frameworks.common.ops.Count` reads them, or why the fake tensors could not run it."""

    workload: str
    mode: str
    batch: int
    error: str | None = field(default=None, metadata=ABSENT)
    refused: bool | None = field(default=None, metadata=ABSENT)  # a limit of the count, not this run's: kept
    ops: list[dict[str, Any]] | None = field(default=None, metadata=ABSENT)  # `frameworks.common.ops.Op` JSON
    input_bytes: int | None = field(default=None, metadata=ABSENT)
    params: int | None = field(default=None, metadata=ABSENT)
    affine: dict[str, Any] | None = field(default=None, metadata=ABSENT)  # asked to fit: `ops.Affine` JSON
    not_affine: str | None = field(default=None, metadata=ABSENT)  # ... or why the step is not affine in the batch


@dataclass(frozen=True)
class OpsAnswer(Wire):
    counts: list[OpCount]  # in the order asked
    sources: dict[str, list] | None = field(default=None, metadata=ABSENT)  # as `WorkloadAnswer.sources`


@dataclass(frozen=True)
class SelftestAnswer(Wire):
    """The tiniest workload trained for two steps: what `dlperf env install` verifies and records."""

    framework: str
    python: str
    versions: dict[str, str | None]  # package -> version, None when absent
    params: int
    losses: list[float]
    step_s: float
    settings: dict[str, Any]


@dataclass(frozen=True)
class ThreadsAnswer(Wire):
    """Back-to-back matrix products at `threads`: how many cores the framework keeps busy with them.

    `ratio`, CPU time over wall time, is that number on a machine of its own; other processes lower it. `runnable`, the
    threads ready to run on average (their CPU time plus their waits for a CPU, over the wall time), is the same number
    whatever the others take, where the kernel counts those waits (None where it does not); more threads than the CPUs
    it may use count whole (JAX at 2 threads: about 3, its pool and the caller on its 2 CPUs)."""

    threads: int
    cpu_s: float
    wall_s: float
    ratio: float
    products: int
    others_cpu_share: float | None  # other processes' load meanwhile: a busy machine lowers the ratio
    settings: dict[str, Any]
    waited_s: float | None = field(default=None, metadata=ABSENT)  # its threads' time ready to run, waiting for a CPU
    runnable: float | None = field(default=None, metadata=ABSENT)  # (their CPU time + waited_s) / wall_s
    thread_cpu_s: list[float] | None = field(default=None, metadata=ABSENT)  # each thread's CPU time, busiest first


@dataclass(frozen=True)
class StartAnswer(Wire):
    """What a process holds before it builds a model: its data segment (`measure.system.data_bytes`) with the
    framework loaded and its threads started. `dlperf fit --max-memory` below it is refused."""

    data_bytes: int
    threads: int


# ----------------------------------------------------------------------------------------------------------------------
# The probe's questions

REQUESTS: dict[str, type[ProbeRequest]] = {}


class ProbeRequest(Wire, Generic[A]):
    """A question for the probe; `ProbeRequest[SomeAnswer]` names the type of its answer."""

    KIND: ClassVar[str]  # `what` on the wire
    ANSWER: ClassVar[type[Wire]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.ANSWER = next(typing.get_args(b)[0] for b in cls.__orig_bases__ if typing.get_origin(b) is ProbeRequest)  # type: ignore[attr-defined]

    def to_json(self) -> dict[str, Any]:
        return {"what": self.KIND, **super().to_json()}

    def answer_of(self, result: dict[str, Any]) -> A:
        """The answer's record, from its JSON."""
        return self.ANSWER.from_json(result)  # type: ignore[return-value]

    def subject(self) -> str:
        """What a failed probe was doing, for its message."""
        return "checking the frameworks and devices"


@dataclass_transform(frozen_default=True)
def request(kind: str) -> Callable[[T], T]:
    """Declare a probe question: a frozen dataclass, `"what": kind` on the wire, known to `read_request`."""

    def register(cls: T) -> T:
        cls.KIND = kind
        REQUESTS[kind] = dataclass(frozen=True)(cls)
        return REQUESTS[kind]  # type: ignore[return-value]

    return register


def read_request(d: dict[str, Any]) -> ProbeRequest:
    """A question from its JSON; an unknown kind is refused."""
    kind = REQUESTS.get(d.get("what"))  # type: ignore[arg-type]
    if kind is None:
        raise ValueError(f"unknown probe request {d.get('what')!r} (known: {', '.join(REQUESTS)})")
    return kind.from_json(d)


@request("env")
class EnvRequest(ProbeRequest[EnvAnswer]):
    """The framework's version, build and devices."""


@request("workload")
class WorkloadRequest(ProbeRequest[WorkloadAnswer]):
    source: str  # `path.py:factory` as --workloads names it
    data_dir: str | None = None  # --data DIR, given to a factory that takes `data_dir`

    def subject(self) -> str:
        return f"workload {self.source!r}"


@request("data")
class DataRequest(ProbeRequest[DataAnswer]):
    data: str  # --data
    workloads: list[dict[str, Any]]  # Workload.to_json() of each

    def subject(self) -> str:
        return f"--data {self.data}"


@dataclass(frozen=True)
class OpRequest(Wire):
    workload: dict[str, Any]  # Workload.to_json()
    mode: str
    batch: int
    fit: list[int] | None = field(default=None, metadata=ABSENT)  # two batches: also answer the count's affine form


@request("ops")
class OpsRequest(ProbeRequest[OpsAnswer]):
    """The GPU predictor's operator counts, every step asked in one child."""

    requests: list[OpRequest]

    def subject(self) -> str:
        return "counting the step's operators"


@dataclass(frozen=True)
class MemoryAsk(Wire):
    workload: dict[str, Any]  # Workload.to_json()
    mode: str  # fp32, tf32, bf16 or fp16, with +checkpoint
    batches: list[int]


@dataclass(frozen=True)
class MemoryTrace(Wire):
    """One step's live tensor bytes traced on fake tensors (`frameworks/torch/memcount.py`): the peak and its parts,
    or why the step could not be traced."""

    batch: int
    error: str | None = field(default=None, metadata=ABSENT)
    refused: bool | None = field(default=None, metadata=ABSENT)  # the error is dlperf's refusal of the mode: kept
    peak: int | None = field(default=None, metadata=ABSENT)
    params: int | None = field(default=None, metadata=ABSENT)  # and buffers
    optimizer: int | None = field(default=None, metadata=ABSENT)
    data: int | None = field(default=None, metadata=ABSENT)
    grads: int | None = field(default=None, metadata=ABSENT)  # alive at the peak
    activations: int | None = field(default=None, metadata=ABSENT)
    # the peak is in the optimizer's update: `activations` are its temporaries (a foreach update's, parameter-sized)
    in_update: bool | None = field(default=None, metadata=ABSENT)


@dataclass(frozen=True)
class MemoryAnswer(Wire):
    traces: list[MemoryTrace]  # each request's batches in turn
    sources: dict[str, list] | None = field(default=None, metadata=ABSENT)  # as `WorkloadAnswer.sources`


@request("memory")
class MemoryRequest(ProbeRequest[MemoryAnswer]):
    """The memory predictor's traces, every step asked in one child."""

    requests: list[MemoryAsk]

    def subject(self) -> str:
        return "tracing the step's memory"


@request("selftest")
class SelftestRequest(ProbeRequest[SelftestAnswer]):
    """Import the framework and train the tiniest workload for two steps."""


@request("start")
class StartRequest(ProbeRequest[StartAnswer]):
    threads: int

    def subject(self) -> str:
        return "measuring what a training process needs to start (--max-memory)"


@request("threads")
class ThreadsRequest(ProbeRequest[ThreadsAnswer]):
    threads: int
    seconds: float = 1.0


# ----------------------------------------------------------------------------------------------------------------------
# `dlperf peak`: what one device can do at one thread count (`frameworks/torch/peak.py` measures it)


@dataclass(frozen=True)
class Timed(Wire):
    """A figure timed with the one timer after a warm-up: its median and IQR per call, a step being several calls."""

    median_s: float
    iqr_s: float
    samples: int
    calls_per_step: int
    warmup_steps: int
    warmup_steady: bool


@dataclass(frozen=True)
class MatmulSize(Wire):
    """One square size n of a dtype's matmul: timed, or skipped (one product would take too long) with the reason."""

    n: int
    flops_per_s: float | None = field(default=None, metadata=ABSENT)
    timed: Timed | None = field(default=None, metadata=FLAT)
    skipped: str | None = field(default=None, metadata=ABSENT)


@dataclass(frozen=True)
class MatmulPeak(Wire):
    """A dtype's matmul peak: the best size's FLOP/s (None when every size was skipped), or, when the device cannot
    multiply the dtype, `unsupported` alone (the only key on the wire)."""

    peak_flops_per_s: float | None = None
    best_n: int | None = None
    sizes: list[MatmulSize] = field(default_factory=list)
    unsupported: str | None = field(default=None, metadata=ABSENT)  # the device cannot multiply this dtype

    def to_json(self) -> dict[str, Any]:
        return {"unsupported": self.unsupported} if self.unsupported is not None else super().to_json()


@dataclass(frozen=True)
class StreamKernel(Wire):
    bytes_per_call: int  # bytes moved by one call: 2 (copy) or 3 (triad) times the array's
    bytes_per_s: float
    timed: Timed = field(metadata=FLAT)


@dataclass(frozen=True)
class StreamKernels(Wire):
    copy: StreamKernel  # c = a
    triad: StreamKernel  # a = b + 3c


@dataclass(frozen=True)
class BandwidthPeak(Wire):
    """STREAM copy and triad on fp32 arrays of `array_bytes`; the peak is the faster's."""

    array_bytes: int
    kernels: StreamKernels
    peak_bytes_per_s: float
    best_kernel: str


@dataclass(frozen=True)
class DispatchCost(Wire):
    """The host time of one tiny operator, a chain of `ops_per_call` of them timed together (`timed` per op)."""

    ops_per_call: int
    ops_per_s: float
    timed: Timed = field(metadata=FLAT)


@dataclass(frozen=True)
class CopyFigure(Wire):
    """One copy of `bytes`: host memcpy, or host->device (h2d) and back (d2h) from pinned or pageable memory."""

    kind: str  # memcpy | h2d | d2h (`store.machine.COPY_KINDS`)
    pinned: bool
    bytes: int
    bytes_per_s: float  # bytes copied per second, the fastest of a few steps
    best_s: float
    steps: int
    calls_per_step: int
    stream_bytes_per_s: float | None = field(default=None, metadata=ABSENT)  # memcpy: STREAM's count, twice this


@dataclass(frozen=True, kw_only=True)
class PeakAnswer(Wire):
    """Everything one peak child measured, and the settings it measured them under."""

    framework: str
    framework_version: str | None
    device: str
    matmul: dict[str, MatmulPeak]  # dtype -> its peak
    bandwidth: BandwidthPeak
    dispatch: DispatchCost | None = field(default=None, metadata=ABSENT)
    copies: list[CopyFigure] = field(default_factory=list)  # the copy sweep, by kind then size; [] without one
    duration_s: float
    others_cpu_share: float | None  # other processes' share of the CPUs meanwhile: a busy machine lowers every peak
    steal_fraction: float | None = field(default=None, metadata=ABSENT)  # other virtual machines' share meanwhile
    threads: int
    settings: dict[str, Any]  # the thread settings in effect


# ----------------------------------------------------------------------------------------------------------------------
# `dlperf comm`: the all-reduce of one torchrun job (`frameworks/torch/comm.py` measures it)


@dataclass(frozen=True)
class CommSize(Wire):
    """One message size, as nccl-tests reports it."""

    bytes: int  # per rank
    count: int  # float32 elements
    time_s: float  # the slowest rank's median time of one all-reduce
    algbw: float  # bytes / time_s
    busbw: float  # algbw times what a link carries per message byte
    wrong: int  # elements of the checked result that differ from the expected sum, over every rank
    rank_medians_s: list[float]  # each rank's median, rank order
    samples_max_s: list[float]  # each timed iteration's slowest rank


@dataclass(frozen=True)
class CommAnswer(Wire):
    """The job's figures: every rank ends with the same, reduced over all of them."""

    op: str  # all_reduce
    dtype: str  # float32
    backend: str  # gloo | nccl
    device: str  # cpu | cuda
    world: int  # processes, every node's
    nnodes: int
    nproc: int  # processes on a node
    threads: int  # CPU threads per process
    torch_version: str
    iters: int
    warmup: int
    settings: dict[str, Any]
    sizes: list[CommSize]
    duration_s: float
