"""The sweep expanded into cells. A cell is one measurement: (workload, framework, device, threads, mode).

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
    threads: int  # CPU threads of the process (for GPU cells: the host threads)
    mode: str

    @property
    def key(self) -> str:
        return f"{self.workload}|{self.framework}|{self.device}|{self.threads}|{self.mode}"

    @property
    def column(self) -> str:
        """Where the cell goes in the Table-7 view: `cpu:4`, `cuda:0`, `mps`."""
        return f"cpu:{self.threads}" if self.device == "cpu" else self.device

    @property
    def label(self) -> str:
        return f"{self.workload} {self.framework} {self.column} {self.mode}"

    def to_json(self) -> dict:
        return asdict(self)


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


def schedule(cells: list[Cell], repeats: int) -> list[Task]:
    """Repeats interleaved with the other cells: processes of one cell are spread over the run, not back to back,
    so a slow spell of a shared machine does not land on one cell."""
    return [Task(cell, r) for r in range(repeats) for cell in cells]
