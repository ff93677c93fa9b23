"""The seam between the parent and its child processes: what each child receives and what it reports.

Standard library only: every child imports this, in dlperf's environment or a framework's own. The parent writes a
task as JSON to a file, starts the child (`runner/launch.py`, one launcher for every kind), and reads back the
child's events, JSON lines flushed one by one so that a child killed at its timeout keeps what it reported.

A cell is one measurement: (workload, framework, device, threads, mode), and for a data-parallel cell the number of
processes and the scaling protocol. Its key is stable across runs, so a sweep can be resumed and two runs compared
cell by cell.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


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

    @classmethod
    def from_json(cls, d: dict) -> Cell:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def column_name(device: str, threads: int, nproc: int = 0) -> str:
    if nproc:
        return f"ddp:{nproc}x{threads}" if device == "cpu" else f"ddp:{nproc}x{device}"
    return f"cpu:{threads}" if device == "cpu" else device
