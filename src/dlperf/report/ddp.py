"""Data-parallel scaling: each DDP cell against the one-process cell of the same protocol, and where its time goes.

Strong scaling (the total batch fixed and split): speed-up T1 / TN, efficiency T1 / (N x TN). Weak scaling (each
process's batch fixed): the step should take as long with N processes as with one, so efficiency is T1 / TN and the
job's throughput grows N x T1 / TN. T1 is the `ddp:1` cell of the same workload, mode, device and protocol, so both
sides train the same total batch (strong) or per-process batch (weak) through the same DDP code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from dlperf.report.format import nbytes, seconds
from dlperf.store.records import CellRecord, CommRecord


@dataclass
class Scaling:
    workload: str
    mode: str
    scaling: str  # strong | weak
    column: str  # ddp:2x1
    nproc: int
    median_s: float
    t1_column: str | None
    t1_s: float | None
    speedup: float | None  # strong: T1 / TN; weak: N x T1 / TN (the job's samples per second)
    efficiency: float | None
    comm: CommRecord  # the cell's communication figures (frameworks/torch/ddp.py `communication`)

    def to_json(self) -> dict:
        return {**self.__dict__, "comm": asdict(self.comm)}


def build(cells: list[CellRecord]) -> list[Scaling]:
    ddp = [c for c in cells if c.nproc and c.ok and c.median_s]
    rows = []
    for c in ddp:
        same = [b for b in ddp if b.nproc == 1 and _group(b) == _group(c)]
        base = min(same, key=lambda b: b.median_s, default=None)  # several thread counts: the fastest one
        n, t = c.nproc, c.median_s
        speedup = efficiency = None
        if base is not None:
            t1 = base.median_s
            speedup = t1 / t if c.scaling == "strong" else n * t1 / t
            efficiency = t1 / (n * t) if c.scaling == "strong" else t1 / t
        rows.append(Scaling(c.workload, c.mode, c.scaling, c.column, n, t, base and base.column,
                            base and base.median_s, speedup, efficiency, c.comm or CommRecord()))  # fmt: skip
    return rows


def _group(c: CellRecord) -> tuple:
    return (c.workload, c.framework, c.mode, c.device, c.scaling)


HEAD = ("workload", "mode", "scaling", "column", "step", "vs ddp:1", "speed-up", "efficiency", "gradients",
        "all-reduce", "bus bandwidth", "exposed comm", "bound")  # fmt: skip


def values(r: Scaling) -> list[str]:
    comm = r.comm
    share, bw = comm.comm_share, comm.busbw_bytes_s
    return [
        r.workload, r.mode, r.scaling, r.column, seconds(r.median_s),
        f"{r.t1_column} {seconds(r.t1_s)}" if r.t1_column else "-",
        f"{r.speedup:.2f}x" if r.speedup is not None else "-",
        f"{100 * r.efficiency:.0f}%" if r.efficiency is not None else "-",
        nbytes(comm.gradient_bytes), seconds(comm.allreduce_s),
        f"{bw / 1e9:.2f} GB/s" if bw else "-",
        f"{seconds(comm.exposed_comm_s)} ({100 * share:.0f}%)" if share is not None else "-",
        f"{comm.bound}-bound" if comm.bound else "-",
    ]  # fmt: skip


def notes(rows: list[Scaling]) -> list[str]:
    """One line per DDP cell with more than one process, for the text table."""
    out = []
    for r in rows:
        if r.nproc < 2:
            continue
        v = dict(zip(HEAD, values(r), strict=True))
        against = f"{v['speed-up']} of {r.t1_column}, efficiency {v['efficiency']}" if r.t1_column else "no ddp:1 cell"
        out.append(
            f"{r.workload} {r.mode} {r.column} ({r.scaling} scaling): {against}; all-reduce of {v['gradients']} "
            f"takes {v['all-reduce']} ({v['bus bandwidth']} bus bandwidth), exposed communication {v['exposed comm']}"
            f" of the step: {v['bound']}"
        )
    return out
