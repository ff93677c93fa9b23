"""The sweep expanded into cells (`dlperf.protocol.Cell`, one measurement each), in the order they are measured."""

from __future__ import annotations

from dlperf.loaders import DATA_SYNTHETIC, SYNTHETIC, default_loaders
from dlperf.parallel import DEFAULT_MICROBATCHES, STRATEGIES
from dlperf.protocol import Cell
from dlperf.spec import RunSpec, device_kind
from dlperf.vocab import DeviceKind, Parallel
from dlperf.workloads import Workload


def expand(spec: RunSpec, workloads: list[Workload], devices: list[str], threads: list[int], host_threads: int):
    """Cells in sweep order: workload-major, so one network's thread scaling is measured back to back. With real data
    (`--data`), each cell on synthetic data is followed by the same cell with each loader setting: the synthetic
    step is what a loader is held against (is it enough?)."""
    cells = []
    for w in workloads:
        for framework in spec.frameworks:
            for device in devices:
                counts = threads if device_kind(device) is DeviceKind.CPU else [host_threads]
                for n in counts:
                    for mode in spec.modes:
                        for loader in loaders_of(spec, device, host_threads):
                            cells.append(Cell(w.name, framework, device, n, mode, loader=loader))
    return cells


def loaders_of(spec: RunSpec, device: str, cores: int) -> tuple[str, ...]:
    """The loader dimension of a cell on `device`: synthetic only, or synthetic and then each loader setting (none
    where `spec.loaders` is empty: advise's thread search, whose factory reads --data DIR, `crossover.Options.data`)."""
    if spec.data == DATA_SYNTHETIC:
        return (SYNTHETIC,)
    gpu = device_kind(device) is DeviceKind.CUDA
    return (SYNTHETIC, *(default_loaders(cores, gpu) if spec.loaders is None else spec.loaders))


def expand_ddp(spec: RunSpec, workloads: list[Workload], kinds: list[str], cores: int) -> list[Cell]:
    """Multi-process cells in sweep order: per workload and device kind (cpu, cuda), every process count per node,
    each with `--threads` per process or the cores shared evenly, then each strategy (`--parallel`) of each
    framework, a pipeline at each `--microbatches`, so one workload's strategies on the same processes are measured
    back to back; `nproc` counts every node's processes (a MirroredStrategy cell: its replicas)."""
    cells = []
    for w in workloads:
        for kind in kinds:
            for n in spec.nprocs or ():
                for threads in spec.threads or (max(1, cores // n),):
                    for mode in spec.modes:
                        cells += [Cell(w.name, STRATEGIES[Parallel(p)].framework, kind, threads, mode,
                                       n * spec.nnodes, spec.scaling, "", p, m)
                                  for p, m in strategies(spec)]  # fmt: skip
    return cells


def strategies(spec: RunSpec) -> list[tuple[str, int]]:
    """(strategy, micro-batches) pairs of the spec: a pipeline once per micro-batch count, the others once."""
    micro = spec.microbatches or DEFAULT_MICROBATCHES
    pairs = []
    for p in spec.parallel or (Parallel.DDP.value,):
        pairs += [(p, m) for m in micro] if STRATEGIES[Parallel(p)].pipeline else [(p, 0)]
    return pairs
