"""Multi-process jobs through torchrun (`torch.distributed.run`): the command, pure, so it is unit-tested.

dlperf never writes its own communication or process-group code: torchrun starts the processes and runs the
rendezvous, `torch.distributed` (gloo on CPUs, NCCL on CUDA) does every collective. One node runs standalone (a local
rendezvous on a free port); several nodes meet at a c10d rendezvous endpoint, `host:port`, that every node names.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from dlperf.errors import UsageError

MONITOR_INTERVAL_S = 0.2  # how often torchrun checks its workers: a dead rank ends the job this fast


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


def rendezvous_id(*parts: object) -> str:
    """The same id on every node for the same job (cell and repeat), another for the next: nodes that run the same
    plan meet cell by cell."""
    return "dlperf-" + hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def torchrun_command(
    python: str, nproc_per_node: int, rdzv: Rendezvous, job_id: str, module: str, args: list[str]
) -> list[str]:
    """`python -m torch.distributed.run ... -m module args`: no restarts (a failed rank fails the cell, with its
    reason), workers watched every MONITOR_INTERVAL_S."""
    cmd = [
        python, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}", "--max-restarts=0",
        f"--monitor-interval={MONITOR_INTERVAL_S}",
    ]  # fmt: skip
    if rdzv.standalone:
        cmd.append("--standalone")
    else:
        cmd += [
            f"--nnodes={rdzv.nnodes}", f"--node-rank={rdzv.node_rank}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint={rdzv.endpoint}", f"--rdzv-id={job_id}",
            f"--rdzv-conf=join_timeout={max(1, int(rdzv.join_timeout_s))}",
        ]  # fmt: skip
    return [*cmd, "-m", module, *args]
