"""Multi-process scaling, every strategy side by side (`--parallel`): each cell against the one-process cell of the
same strategy and protocol, against DDP on the same processes, with what each rank holds and where the time goes.

Strong scaling (the total batch fixed and split): speed-up T1 / TN, efficiency T1 / (N x TN). Weak scaling (each
process's batch fixed): the step should take as long with N processes as with one, so efficiency is T1 / TN and the
job's throughput grows N x T1 / TN. T1 is the one-process cell of the same workload, mode, device, protocol and
strategy (`fsdp:1x1`, `gpipe.m4:1x1`), or, without one, the `ddp:1` cell: both sides train the same total batch.
"vs DDP" is the DDP step on the same processes over this one (above 1: this strategy is faster).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from dlperf.parallel import STRATEGIES
from dlperf.report.format import nbytes, seconds
from dlperf.store.records import CellRecord, CommRecord
from dlperf.vocab import Parallel

ORDER = {p.value: i for i, p in enumerate(STRATEGIES)}


@dataclass
class Scaling:
    workload: str
    mode: str
    scaling: str  # strong | weak
    column: str  # ddp:2x1, fsdp:2x1, gpipe.m4:2x1
    nproc: int
    median_s: float
    t1_column: str | None
    t1_s: float | None
    speedup: float | None  # strong: T1 / TN; weak: N x T1 / TN (the job's samples per second)
    efficiency: float | None
    comm: CommRecord  # the cell's communication and per-rank figures (frameworks/torch/ddp.py `communication`)
    strategy: str = Parallel.DDP.value
    microbatches: int = 0
    vs_ddp: float | None = None  # the DDP step on the same processes / this step; None for DDP itself

    def to_json(self) -> dict:
        return {**self.__dict__, "comm": asdict(self.comm)}

    @property
    def param_bytes(self) -> int | None:
        """The largest rank's parameters: what decides whether a model fits."""
        return max(self.comm.param_bytes_rank) if self.comm.param_bytes_rank else None

    @property
    def state_bytes(self) -> int | None:
        return max(self.comm.state_bytes_rank) if self.comm.state_bytes_rank else None

    @property
    def peak_bytes(self) -> int | None:
        return max(self.comm.peak_bytes_rank) if self.comm.peak_bytes_rank else None


def build(cells: list[CellRecord]) -> list[Scaling]:
    """A row per timed multi-process cell, per workload the strategies side by side on the same processes."""
    multi = [c for c in cells if c.nproc and c.ok and c.median_s]
    rows = []
    for c in sorted(multi, key=_order):
        base = _fastest(b for b in multi if b.nproc == 1 and _group(b) == _group(c))
        if base is None:  # no one-process cell of its own strategy: DDP's
            base = _fastest(b for b in multi if b.nproc == 1 and _ddp_group(b) == _ddp_group(c))
        n, t = c.nproc, c.median_s
        speedup = efficiency = None
        if base is not None:
            t1 = base.median_s
            speedup = t1 / t if c.scaling == "strong" else n * t1 / t
            efficiency = t1 / (n * t) if c.scaling == "strong" else t1 / t
        ddp = None
        if c.parallel != Parallel.DDP:
            ddp = _fastest(d for d in multi if d.parallel == Parallel.DDP and _ddp_group(d) == _ddp_group(c)
                           and d.nproc == n and d.threads == c.threads)  # fmt: skip
        rows.append(Scaling(c.workload, c.mode, c.scaling, c.column, n, t, base and base.column,
                            base and base.median_s, speedup, efficiency, c.comm or CommRecord(), c.parallel,
                            c.microbatches, ddp.median_s / t if ddp else None))  # fmt: skip
    return rows


def _fastest(cells) -> CellRecord | None:
    return min(cells, key=lambda b: b.median_s, default=None)  # several thread counts: the fastest one


def _order(c: CellRecord) -> tuple:
    return (c.workload, c.mode, c.device, c.scaling, c.nproc, c.threads, ORDER.get(c.parallel, 99), c.microbatches)


def _group(c: CellRecord) -> tuple:
    return (c.workload, c.framework, c.mode, c.device, c.scaling, c.parallel, c.microbatches)


def _ddp_group(c: CellRecord) -> tuple:
    return (c.workload, c.mode, c.device, c.scaling)


HEAD = ("workload", "mode", "scaling", "column", "step", "vs 1 process", "speed-up", "efficiency", "vs DDP",
        "params/rank", "peak/rank", "bubble (theory)", "gradients", "all-reduce", "bus bandwidth", "exposed comm",
        "bound")  # fmt: skip


def values(r: Scaling) -> list[str]:
    comm = r.comm
    bw = comm.busbw_bytes_s
    bubble = "-"
    if comm.bubble is not None:
        theory = f" ({100 * comm.bubble_theory:.0f}%)" if comm.bubble_theory is not None else ""
        bubble = f"{100 * comm.bubble:.0f}%{theory}"
    return [
        r.workload, r.mode, r.scaling, r.column, seconds(r.median_s),
        f"{r.t1_column} {seconds(r.t1_s)}" if r.t1_column else "-",
        f"{r.speedup:.2f}x" if r.speedup is not None else "-",
        f"{100 * r.efficiency:.0f}%" if r.efficiency is not None else "-",
        f"{r.vs_ddp:.2f}x" if r.vs_ddp is not None else "-",
        nbytes(r.param_bytes), nbytes(r.peak_bytes) + (" (process)" if r.comm.peak_of and r.peak_bytes else ""), bubble,
        nbytes(comm.gradient_bytes), seconds(comm.allreduce_s),
        f"{bw / 1e9:.2f} GB/s" if bw else "-",
        exposed_comm(comm, r.nproc),
        f"{comm.bound}-bound" if comm.bound and r.nproc > 1 else "-",  # one process: nothing to be bound by
    ]  # fmt: skip


def exposed_comm(comm: CommRecord, nproc: int = 2) -> str:
    """The exposed communication and its share of the step it was measured against: `comm.step_s`, the strategy's
    step timed in alternated pairs with its compute alone after the timed steps (`frameworks/common/comm.py`), not
    the cell's median step, which the table shows and which a noisy machine can put far from it. With one process
    nothing is communicated: the difference is the strategy's own cost (DDP's gradient buckets and hooks)."""
    if comm.comm_share is None or comm.exposed_comm_s is None:
        return "-"
    of = f" of {seconds(comm.step_s)}" if comm.step_s else ""
    figure = f"{seconds(comm.exposed_comm_s) if comm.exposed_comm_s else '0'}{of} ({100 * comm.comm_share:.0f}%)"
    return f"none: 1 process; the strategy's own cost {figure}" if nproc == 1 else figure


PEAK_OF = {"process": "the process's resident memory, the framework's runtime included"}  # else: live tensors


def _exposed_note(comm: CommRecord) -> str:
    """The exposed communication for the notes, naming the step it is a share of (the table shows the median)."""
    if comm.comm_share is None or comm.exposed_comm_s is None:
        return "exposed communication -"
    step = f"a {seconds(comm.step_s)} step timed apart," if comm.step_s else "the step timed"
    alone = f" ({seconds(comm.local_step_s)})" if comm.local_step_s is not None else ""
    if not comm.exposed_comm_s:  # the step no slower than its compute alone: the difference within their noise
        return f"no exposed communication: {step} no slower than its compute alone{alone}"
    exposed = f"{seconds(comm.exposed_comm_s)} ({100 * comm.comm_share:.0f}%)"
    return f"exposed communication {exposed} of {step} beside its compute alone{alone}"


def notes(rows: list[Scaling]) -> list[str]:
    """One line per multi-process cell with more than one process, for the text table."""
    out = []
    for r in rows:
        if r.nproc < 2:
            continue
        v = dict(zip(HEAD, values(r), strict=True))
        against = (
            f"{v['speed-up']} of {r.t1_column}, efficiency {v['efficiency']}" if r.t1_column else "no 1-process cell"
        )
        where = _exposed_note(r.comm)
        if r.strategy == Parallel.DDP:
            where = (
                f"all-reduce of {v['gradients']} takes {v['all-reduce']} ({v['bus bandwidth']} bus bandwidth), {where}"
            )
        elif r.comm.bubble is not None:  # a pipeline's bubble is that same share (pipeline.communication)
            where = (
                where.replace("exposed communication", "exposed communication and pipeline bubble", 1)
                if r.comm.comm_share is not None
                else f"pipeline bubble {100 * r.comm.bubble:.0f}% of the step"
            )
            if r.comm.bubble_theory is not None:
                where += f" (the bubble alone, in theory: {100 * r.comm.bubble_theory:.0f}%)"
        ddp = f"; {v['vs DDP']} the speed of DDP on the same processes" if r.vs_ddp is not None else ""
        memory = f"; parameters {v['params/rank']} per rank" if r.param_bytes else ""
        memory += f", peak {v['peak/rank']}" if r.param_bytes and r.peak_bytes else ""
        memory += f" ({PEAK_OF[r.comm.peak_of]})" if r.param_bytes and r.peak_bytes and r.comm.peak_of else ""
        bound = f": {v['bound']}" if r.comm.bound else ""
        out.append(f"{r.workload} {r.mode} {r.column} ({r.scaling} scaling): {against}{ddp}; {where}{memory}{bound}")
    return out
