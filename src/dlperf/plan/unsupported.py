"""The cells known to be unsupported before any child starts: what a backend refuses whatever the machine, in the
words its child records, so the run stores the same status and reason without a process that imports the framework
(1.9-7.5 s each): a user's model (PyTorch only) on another backend, a mode the backend does not implement (the
capability table says which, and why), a network only PyTorch defines; and, asked of this machine as the child asks
it first, a mode's malloc to preload (tcmalloc, jemalloc) that is not installed here.

PyTorch's first checks are of the mode too, a component it lacks, then one that does not run on the cell's kind of
device (`modes.check_device`): on a CPU that depends on no machine (`--modes tf32` there started a child, and a dry
run's pilot, to say "tf32 applies to CUDA GPUs only"). What depends on the machine is still asked of the child: its
other refusals (bf16 on a CPU without it, a mode on a GPU), any other GPU cell's, a multi-process cell's. Each
backend's checks are followed in the order its `build` makes them, as far as none depends on the machine: torch asks
of the mode alone; jax of the workload, then the mode; tensorflow and mxnet the mode first; each then its device,
mxnet first its optimizer, and only then of the network (`torch_only`).
"""

from __future__ import annotations

from dataclasses import replace

from dlperf.frameworks import builtin_only, mode_refusal
from dlperf.frameworks.common import capabilities, heap
from dlperf.modes import check_device, strategy_refusal
from dlperf.protocol import Cell
from dlperf.runner.tasks import Task
from dlperf.vocab import DeviceKind, Framework
from dlperf.workloads import Workload
from dlperf.workloads.published import torch_only_refusal


def reason(cell: Cell, workload: Workload) -> str | None:
    """Why `cell`'s child would find it unsupported whatever the machine, as it would say it; None: ask the child."""
    if cell.nproc or cell.parallel:
        return processes_refusal(cell, workload)
    if missing := heap.not_installed(cell.mode):  # the child's first check, before it imports its framework
        return f"{heap.preloaded(cell.mode)}: {missing}"
    if cell.framework == Framework.TORCH:
        return torch_on_cpu(cell.mode) if cell.device == "cpu" else None
    row = capabilities.of(cell.framework)
    user = builtin_only(cell.framework) if workload.arch == "user" else None
    mode = mode_refusal(cell.framework, row.modes, cell.mode, row.why_not)
    checks = (user, mode) if row.framework is Framework.JAX else (mode, user)  # in the order its build asks them
    if found := next(filter(None, checks), None):
        return found
    if cell.device != "cpu" or (row.framework is Framework.MXNET and workload.optimizer.name != "sgd"):
        return None  # its device is asked of the framework (mxnet's optimizer is refused in words of its own) first
    return torch_only_refusal(workload)


def processes_refusal(cell: Cell, workload: Workload) -> str | None:
    """Why a PyTorch multi-process cell's processes would refuse it whatever the machine, each one's first checks:
    its mode's malloc not installed here, then a mode its strategy does not measure (`modes.strategy_refusal`: a dry
    run's pilot timed `--nproc 2 --modes compile` as a one-process step, 29 s, for a cell that is unsupported). FSDP
    first splits the batch (`ddp.share`): one that does not split is the processes' to say. None: ask them."""
    if cell.framework != Framework.TORCH:
        return None
    if missing := heap.not_installed(cell.mode):
        return f"{heap.preloaded(cell.mode)}: {missing}"
    if cell.parallel == "fsdp" and workload.batch % max(cell.nproc, 1):
        return None
    return strategy_refusal(cell.parallel, cell.mode)


def torch_on_cpu(mode: str) -> str | None:
    """Why PyTorch's build refuses `mode` on a CPU, in its order (`torch/build.py` `_check_modes`): a component it does
    not implement, one that does not run on a CPU (tf32, cuda_graphs, dataparallel); None: ask the child."""
    if found := mode_refusal(Framework.TORCH, capabilities.of(Framework.TORCH).modes, mode, {}):
        return found
    try:
        check_device(mode, DeviceKind.CPU)
    except NotImplementedError as exc:
        return str(exc)
    return None


def marked(tasks: list[Task], workloads: dict[str, dict]) -> list[Task]:
    """`tasks`, each of a cell known to be unsupported carrying why (`Task.unsupported`: no child is started for it).
    `workloads`: cell key -> workload JSON."""
    found: dict[str, str | None] = {}
    for t in tasks:
        if t.cell.key not in found:
            found[t.cell.key] = reason(t.cell, Workload.from_json(workloads[t.cell.key]))
    return [replace(t, unsupported=found[t.cell.key]) if found[t.cell.key] else t for t in tasks]
