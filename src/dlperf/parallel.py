"""The ways a training step is spread over processes or devices (`--parallel`), each by its framework's own engine.

Standard library only: the parent plans with it, `dlperf list --parallel` prints it, the workers read a cell's
strategy from it. A strategy is part of a cell (`protocol.Cell.parallel`, with `microbatches` for a pipeline), of its
key and of its column: `ddp:2x1`, `fsdp:2x1`, `tp:2x1`, `gpipe.m4:2x1`, `1f1b.m8:2x1`, `mirrored:2x1`,
`multiworker:2x1`. Where the
processes of a job meet (`Rendezvous`: --nnodes, --node-rank, --rdzv-endpoint) is checked here too, with the spec.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlperf.errors import UsageError
from dlperf.frameworks.common import capabilities
from dlperf.vocab import Framework, Parallel


@dataclass(frozen=True)
class Strategy:
    name: Parallel
    engine: str  # the engine that runs it, as its documentation names it
    splits: str  # what each process (or replica) holds and computes
    scalings: tuple[str, ...]  # the batch protocols it supports (`--scaling`)
    processes: bool = True  # one process per rank; False: one process, N devices (MirroredStrategy)
    launcher: str = "torchrun"  # what starts the processes
    pipeline: bool = False  # micro-batches (`--microbatches`) over stages
    shares_batch: bool = False  # each process (or replica) takes its share of the batch, not the whole of it

    @property
    def framework(self) -> str:
        """The framework whose engine runs it: the backend that lists it in `frameworks.common.capabilities`."""
        return capabilities.owner(self.name).value


# fmt: off
STRATEGIES: dict[Parallel, Strategy] = {
    s.name: s
    for s in (
        Strategy(Parallel.DDP, "torch.nn.parallel.DistributedDataParallel (gloo on CPUs, NCCL on GPUs)",
                 "the whole model; its share of the batch; gradients all-reduced", ("strong", "weak"),
                 shares_batch=True),
        Strategy(Parallel.FSDP, "FSDP2: torch.distributed.fsdp.fully_shard",
                 "a 1/N shard of the parameters, gradients and optimizer state; its share of the batch; parameters "
                 "all-gathered per layer, gradients reduce-scattered", ("strong", "weak"), shares_batch=True),
        Strategy(Parallel.GPIPE, "torch.distributed.pipelining, ScheduleGPipe",
                 "a stage of consecutive layers; every micro-batch forward, then every one backward",
                 ("strong",), pipeline=True),
        Strategy(Parallel.ONE_F_ONE_B, "torch.distributed.pipelining, Schedule1F1B",
                 "a stage of consecutive layers; forwards and backwards of micro-batches interleaved (1F1B)",
                 ("strong",), pipeline=True),
        Strategy(Parallel.TP, "DTensor: torch.distributed.tensor.parallel.parallelize_module",
                 "a column or row slice of each linear layer (ColwiseParallel/RowwiseParallel pairs); the whole "
                 "batch", ("strong",)),
        Strategy(Parallel.MIRRORED, "tf.distribute.MirroredStrategy (logical CPU devices, or GPUs)",
                 "the whole model on each replica of one process; its share of the batch; gradients all-reduced",
                 ("strong", "weak"), processes=False, shares_batch=True),
        Strategy(Parallel.MULTIWORKER, "tf.distribute.MultiWorkerMirroredStrategy (RING on CPUs, NCCL on GPUs)",
                 "the whole model on each worker process; its share of the batch; gradients all-reduced",
                 ("strong", "weak"), launcher="dlperf's spawner (TF_CONFIG per worker)", shares_batch=True),
    )
}
# fmt: on

PIPELINE = (Parallel.GPIPE, Parallel.ONE_F_ONE_B)  # `--parallel pipeline`: both schedules
DEFAULT_MICROBATCHES = (4,)


@dataclass(frozen=True)
class Library:
    """A parallel library dlperf lists beside its strategies but does not measure: why not is its framework entry's
    in `dlperf.envs` (tried, and found uninstallable), which `dlperf list --parallel` shows."""

    name: str
    frameworks: tuple[str, ...]  # the frameworks it drives
    engine: str
    splits: str


# Parallel libraries dlperf lists but cannot measure (`dlperf list --parallel`); the reason is envs.UNINSTALLABLE's.
NOT_MEASURED: dict[str, Library] = {
    "horovod": Library(
        "horovod",
        (Framework.TORCH.value, Framework.TENSORFLOW.value),
        "Horovod: hvd.DistributedOptimizer, horovodrun (gloo or MPI)",
        "the whole model; its share of the batch; gradients ring-all-reduced",
    ),
}


def check(strategies: tuple[Parallel, ...], frameworks: tuple[str, ...], scaling: str, microbatches: bool) -> None:
    """Combinations no cell could measure are one-line errors: a strategy of a framework not asked for, a scaling it
    does not have, micro-batches without a pipeline."""
    for p in strategies:
        s = STRATEGIES[p]
        if s.framework not in frameworks:
            raise UsageError(f"--parallel {p}: {s.engine} is {s.framework}'s; add --frameworks {s.framework}")
        if scaling not in s.scalings:  # a pipeline's schedule said as `--parallel pipeline` (both of them) is
            said = f"pipeline ({', '.join(PIPELINE)})" if s.pipeline else p
            raise UsageError(f"--parallel {said} --scaling {scaling}: {said} keeps the total batch fixed (strong "
                             "scaling)")  # fmt: skip
    if microbatches and not any(STRATEGIES[p].pipeline for p in strategies):
        raise UsageError("--microbatches: micro-batches are a pipeline's; add --parallel pipeline (or gpipe, 1f1b)")


def check_microbatches(microbatches: int, workload: str, batch: int, world: int) -> None:
    """A pipeline cell's micro-batches against its total batch, known before anything runs: more micro-batches than
    samples leaves one without a sample, which no engine runs (bad input); a batch that does not divide evenly is a
    cell dlperf does not measure, said by the cell (`unsupported`), as a DDP batch that does not split."""
    if microbatches > batch:
        raise UsageError(f"--microbatches {microbatches}: {workload}'s total batch at {world} processes is {batch}, "
                         f"and a micro-batch needs a sample: at most {batch}")  # fmt: skip


def for_framework(strategies: tuple[Parallel, ...], framework: str) -> list[Parallel]:
    return [p for p in strategies if STRATEGIES[p].framework == framework]


def distributed(nproc: int, strategy: str) -> bool:
    """Whether a cell runs as processes, one per rank (every strategy but MirroredStrategy's one process): under
    torchrun, or dlperf's spawner for MultiWorkerMirroredStrategy."""
    return bool(nproc) and STRATEGIES[Parallel(strategy or Parallel.DDP)].processes


@dataclass(frozen=True)
class Rendezvous:
    """Where the processes of one job meet. `endpoint` None: this node alone (torchrun --standalone)."""

    nnodes: int = 1
    node_rank: int = 0
    endpoint: str | None = None  # host:port of the c10d rendezvous, the same on every node
    join_timeout_s: float = 600.0  # how long a node waits for the others before the job fails

    def __post_init__(self) -> None:
        if self.nnodes < 1:
            raise UsageError("--nnodes must be at least 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise UsageError(f"--node-rank {self.node_rank}: must be between 0 and --nnodes - 1 ({self.nnodes - 1})")
        if self.nnodes > 1 and not self.endpoint:
            raise UsageError("--nnodes above 1 needs --rdzv-endpoint host:port (the same on every node)")
        if self.endpoint is not None:
            host, _, port = self.endpoint.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise UsageError(f"--rdzv-endpoint {self.endpoint!r}: expected host:port, e.g. 10.0.0.1:29400")

    @property
    def standalone(self) -> bool:
        return self.endpoint is None

    def to_json(self) -> dict:
        return {"nnodes": self.nnodes, "node_rank": self.node_rank, "endpoint": self.endpoint,
                "join_timeout_s": self.join_timeout_s}  # fmt: skip
