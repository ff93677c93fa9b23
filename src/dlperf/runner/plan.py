"""The sweep expanded into cells. A cell is one measurement: (workload, framework, device, threads, mode), and for a
data-parallel cell the number of processes and the scaling protocol.

A cell's key is stable across runs, so a sweep can be resumed and two runs compared cell by cell.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from dlperf.spec import RunSpec, device_kind
from dlperf.vocab import DeviceKind
from dlperf.workloads import Workload


@dataclass(frozen=True)
class Cell:
    workload: str
    framework: str
    device: str  # "cpu", "cuda:0", "mps"
    threads: int  # CPU threads of the process (for GPU cells: the host threads); of each process under DDP
    mode: str
    nproc: int = 0  # DDP processes in all (every node's); 0: one plain process, no torch.distributed
    scaling: str = ""  # DDP: "strong" (the total batch fixed and split) or "weak" (each process's batch fixed)

    @property
    def key(self) -> str:
        base = f"{self.workload}|{self.framework}|{self.device}|{self.threads}|{self.mode}"
        return f"{base}|ddp:{self.nproc}:{self.scaling}" if self.nproc else base

    @property
    def column(self) -> str:
        """Where the cell goes in the Table-7 view: `cpu:4`, `cuda:0`, `mps`, `ddp:2x1` (2 processes x 1 thread)."""
        return column_name(self.device, self.threads, self.nproc)

    @property
    def label(self) -> str:
        return f"{self.workload} {self.framework} {self.column} {self.mode}"

    def to_json(self) -> dict:
        return asdict(self)


def column_name(device: str, threads: int, nproc: int = 0) -> str:
    if nproc:
        return f"ddp:{nproc}x{threads}" if device == "cpu" else f"ddp:{nproc}x{device}"
    return f"cpu:{threads}" if device == "cpu" else device


@dataclass(frozen=True)
class Task:
    """One child process: a cell's `repeat`-th measurement."""

    cell: Cell
    repeat: int


def expand(spec: RunSpec, workloads: list[Workload], devices: list[str], threads: list[int], host_threads: int):
    """Cells in sweep order: workload-major, so one network's thread scaling is measured back to back."""
    cells = []
    for w in workloads:
        for framework in spec.frameworks:
            for device in devices:
                counts = threads if device_kind(device) is DeviceKind.CPU else [host_threads]
                for n in counts:
                    for mode in spec.modes:
                        cells.append(Cell(w.name, framework, device, n, mode))
    return cells


def expand_ddp(spec: RunSpec, workloads: list[Workload], kinds: list[str], cores: int) -> list[Cell]:
    """DDP cells in sweep order: per workload and device kind (cpu, cuda), every process count per node, each with
    `--threads` per process or the cores shared evenly; `nproc` counts every node's processes."""
    cells = []
    for w in workloads:
        for kind in kinds:
            for n in spec.nprocs or ():
                for threads in spec.threads or (max(1, cores // n),):
                    for mode in spec.modes:
                        cells.append(Cell(w.name, "torch", kind, threads, mode, n * spec.nnodes, spec.scaling))
    return cells


def schedule(cells: list[Cell], repeats: int) -> list[Task]:
    """Repeats interleaved with the other cells: processes of one cell are spread over the run, not back to back,
    so a slow spell of a shared machine does not land on one cell."""
    return [Task(cell, r) for r in range(repeats) for cell in cells]
