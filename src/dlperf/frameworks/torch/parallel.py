"""A multi-process cell's step by its strategy (`dlperf.parallel`), in a process torchrun started.

Every strategy's step offers what the DDP worker asks of it (`worker/ddp.py`): `step`, `sync`, `settings`,
`count_flops`, `memory_of_step`, `params`, `compiles`, `state_tensors` (what the rank holds between steps) and
`communication` (where the step's time goes, `store.records.CommRecord`'s figures).
"""

from __future__ import annotations

import importlib

from dlperf.frameworks.torch import ddp
from dlperf.protocol import Cell
from dlperf.vocab import Parallel
from dlperf.workloads.base import Workload

MODULES = {
    Parallel.DDP: "dlperf.frameworks.torch.ddp",
    Parallel.FSDP: "dlperf.frameworks.torch.fsdp",
    Parallel.TP: "dlperf.frameworks.torch.tp",
    **dict.fromkeys((Parallel.GPIPE, Parallel.ONE_F_ONE_B), "dlperf.frameworks.torch.pipeline"),
}


def build(workload: Workload, cell: Cell, group: ddp.Group):
    """The step of `cell`'s strategy; NotImplementedError (the cell is unsupported, with the reason) when this
    strategy cannot run the workload."""
    strategy = Parallel(cell.parallel or Parallel.DDP)
    if strategy is Parallel.DDP:
        return ddp.build(workload, cell.device, cell.mode, group)
    if strategy not in MODULES:
        raise NotImplementedError(f"--parallel {strategy} is not measured by this dlperf")
    return importlib.import_module(MODULES[strategy]).build(workload, cell, group)
