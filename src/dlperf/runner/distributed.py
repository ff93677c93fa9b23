"""Multi-process jobs through torchrun (`torch.distributed.run`), or dlperf's spawner for TensorFlow's
MultiWorkerMirroredStrategy: the commands, pure, so they are unit-tested.

dlperf never writes its own communication or process-group code: torchrun starts the processes and runs the
rendezvous, `torch.distributed` (gloo on CPUs, NCCL on CUDA) does every collective. One node runs standalone (a local
rendezvous on a free port); several nodes meet at a c10d rendezvous endpoint, `host:port`, that every node names.
"""

from __future__ import annotations

import hashlib

from dlperf.parallel import Rendezvous

MONITOR_INTERVAL_S = 0.2  # how often torchrun checks its workers: a dead rank ends the job this fast
# how every child interpreter starts (Python >= 3.11): -P puts no working directory first on sys.path, so a user's
# statistics.py there never replaces the standard library's for dlperf's own imports (`workloads/user.py` puts the
# working directory last, where a user's `module:function` is found)
SAFE_PATH = "-P"


def python_module(python: str, module: str) -> list[str]:
    """`python -P -m module`."""
    return [python, SAFE_PATH, "-m", module]


def rendezvous_id(*parts: object) -> str:
    """The same id on every node for the same job (cell and repeat), another for the next: nodes that run the same
    plan meet cell by cell."""
    return "dlperf-" + hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def torchrun_command(
    python: str, nproc_per_node: int, rdzv: Rendezvous, job_id: str, module: str, args: list[str], log_dir: str
) -> list[str]:
    """`python -P -m torch.distributed.run ... --no-python python -u -P -m module args`: no restarts (a failed rank
    fails the cell, with its reason), workers watched every MONITOR_INTERVAL_S; each worker started as torchrun's own
    `-m` would (`-u`), and with -P, which torchrun's `-m` does not pass. Its logs go to `log_dir` (the launcher's
    temporary folder): left to itself torchrun makes a /tmp/torchelastic_* folder per job and never removes it."""
    cmd = [
        *python_module(python, "torch.distributed.run"), f"--nproc-per-node={nproc_per_node}", "--max-restarts=0",
        f"--monitor-interval={MONITOR_INTERVAL_S}", f"--log-dir={log_dir}",
    ]  # fmt: skip
    if rdzv.standalone:
        cmd.append("--standalone")
    else:
        cmd += [
            f"--nnodes={rdzv.nnodes}", f"--node-rank={rdzv.node_rank}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint={rdzv.endpoint}", f"--rdzv-id={job_id}",
            f"--rdzv-conf=join_timeout={max(1, int(rdzv.join_timeout_s))}",
        ]  # fmt: skip
    return [*cmd, "--no-python", python, "-u", SAFE_PATH, "-m", module, *args]


SPAWNER = "dlperf.worker.spawn"


def spawn_command(
    python: str, nproc_per_node: int, rdzv: Rendezvous, job_id: str, module: str, args: list[str]
) -> list[str]:
    """`python -P -m dlperf.worker.spawn ... -m module args`: the workers of a MultiWorkerMirroredStrategy job, each
    with its TF_CONFIG. Not torchrun: it runs in the framework's own environment, and TensorFlow's has no torch; and
    torchrun gives each worker the rendezvous's one address, where TF_CONFIG needs every worker's host and port."""
    cmd = [
        *python_module(python, SPAWNER),
        f"--nproc-per-node={nproc_per_node}",
        f"--monitor-interval={MONITOR_INTERVAL_S}",
    ]
    if not rdzv.standalone:
        cmd += [f"--nnodes={rdzv.nnodes}", f"--node-rank={rdzv.node_rank}", f"--rdzv-endpoint={rdzv.endpoint}",
                f"--rdzv-id={job_id}", f"--join-timeout={rdzv.join_timeout_s:g}"]  # fmt: skip
    return [*cmd, "-m", module, *args]
