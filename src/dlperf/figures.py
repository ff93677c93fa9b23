"""The figures a child's events carry, typed (`protocol.Comm`, `protocol.Loader`, `protocol.LossCheck`): one field per
figure, the field's name its key in JSON, on the wire and in the store. Standard library only: every child imports
this (through `protocol.py`), and so does the store, which keeps them as the child reported them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Self

from dlperf.wire import Wire


class Figures(Wire):
    """A JSON object of named figures, typed (`wire.Wire`): a key this dlperf does not know is left out, one it lacks
    is None, since every figure is optional."""

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> Self | None:
        return cls.from_json(d) if d else None


@dataclass(frozen=True)
class CommFigures(Figures):
    """Where a multi-process step's time goes, and what each rank holds (frameworks/torch/ddp.py `communication`;
    every strategy's step reports the same figures, and those only it has: a pipeline's bubble)."""

    gradient_bytes: int | None = None  # all-reduced per step
    buckets: int | None = None
    allreduce_s: float | None = None  # the step's buckets all-reduced alone
    algbw_bytes_s: float | None = None
    busbw_bytes_s: float | None = None
    local_step_s: float | None = None  # the step under no_sync: computing without all-reducing
    step_s: float | None = None  # the strategy's step (DDP, FSDP, tp, a pipeline, MirroredStrategy), communicating
    exposed_comm_s: float | None = None  # the step minus the local step: communication compute did not hide
    comm_share: float | None = None  # exposed / step
    bound: str | None = None  # "communication" (half the step or more exposed) or "compute"
    backend: str | None = None
    world: int | None = None
    strategy: str | None = None  # the cell's `--parallel`
    state_bytes_rank: list[int] | None = None  # per rank: parameters, gradients and optimizer state held between steps
    param_bytes_rank: list[int] | None = None  # per rank: the parameters alone (FSDP: its shard)
    peak_bytes_rank: list[int] | None = None  # per rank: the peak during a step (CUDA allocator; else live tensors)
    peak_of: str | None = None  # "process": `peak_bytes_rank` is the process's resident set (TF's multiworker)
    bubble: float | None = None  # a pipeline: the share of the step the busiest stage idles, measured
    bubble_theory: float | None = None  # (N-1) / (M+N-1)
    stage_s: list[float] | None = None  # a pipeline: each stage's forward and backward of every micro-batch, alone
    split: list[str] | None = None  # a pipeline: the module each stage after the first starts at
    split_by: str | None = None  # a pipeline: "measured" (per-module times) or "flops"


@dataclass(frozen=True)
class LoaderFigures(Figures):
    """What a cell with a loader (`Cell.loader`) measured of its input pipeline, in one process (several `Loader`
    events each add some: the loader alone first, so a child killed later keeps it)."""

    setting: str | None = None  # the loader's name
    workers: int | None = None
    threads: int | None = None  # the step's compute threads
    cores: int | None = None  # the process's allowed CPUs
    oversubscribed: bool | None = None  # workers + threads > cores
    dataset: str | None = None
    samples: int | None = None  # in the dataset
    batches: int | None = None  # an epoch's, as the loader counts them (`len(loader)`: its last partial one dropped)
    alone_samples_per_s: float | None = None  # the loader iterated alone, no step
    alone_batches: int | None = None
    alone_s: float | None = None
    alone_first_s: float | None = None  # its first batch (starting workers, opening files), left out of the rate
    wait_s: list[float] | None = None  # each timed step's wait for its batch, in order, one per `Sample`
    wait_share: float | None = None  # their sum over the timed steps' sum
    # on a GPU, one batch's host->device copy: {"bytes", "pageable_s", "pinned_s", "pinned_async_s"} and bandwidths
    h2d: dict[str, float | None] | None = None

    @classmethod
    def merged(cls, reported: list[LoaderFigures]) -> LoaderFigures | None:
        """Every event's figures, a later one's adding to (or replacing) an earlier one's; None without any."""
        found = {k: v for figures in reported for k, v in asdict(figures).items() if v is not None}
        return cls(**found) if reported else None


@dataclass(frozen=True)
class LossCheckFigures(Figures):
    """What a loss check measured beside its verdict (frameworks/torch/losscheck.py; TensorFlow's XLA check)."""

    seconds: float | None = None
    steps: int | None = None
    batch: int | None = None
    note: str | None = None  # why there was nothing to train (the mode is the reference itself)
    tolerance: list[float] | dict[str, float] | None = None  # torch: per step; TensorFlow: per compared figure
    fp32_losses: list[float] | None = None  # torch: each curve, every step
    mode_losses: list[float] | None = None
    mode_updated: list[bool] | None = None  # per step: whether it changed a parameter (a skipped step did not)
    spread_losses: list[list[float]] | None = None  # fp32 from other seeds
    skipped_steps: int | None = None
    changed_fraction: float | None = None
    fp32_changed_fraction: float | None = None
    cosine: float | None = None  # the first update's, against fp32's
    min_cosine: float | None = None
    rounding_cosine: float | None = None
    random_cosine: float | None = None  # torch, a compiled mode: fp32's first update against fp32's with other draws
    size_ratio: float | None = None
    progress: float | None = None  # the mode's loss decrease / fp32's
    graph_losses: list[float] | None = None  # TensorFlow: graph mode's curve and XLA's
    xla_losses: list[float] | None = None
    first_update_difference: float | None = None
    loss_difference: float | None = None
    rounding_spread: dict[str, float] | None = None
