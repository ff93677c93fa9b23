"""The parent side of `dlperf comm`: one torchrun job runs `runner/comm_worker.py` in every process, the thread
variables fixed before torch loads; its result becomes store rows, one per message size. Nothing here imports a
framework.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.runner.distributed import Rendezvous, rendezvous_id, torchrun_command
from dlperf.vocab import Status

if TYPE_CHECKING:
    from dlperf.runner.launch import ChildResult


class Backend(StrEnum):
    GLOO = "gloo"  # CPU tensors, TCP between processes
    NCCL = "nccl"  # one CUDA GPU per process


@dataclass(frozen=True)
class CommJob:
    nproc: int  # processes on this node
    backend: Backend
    sizes: tuple[int, ...]  # message bytes per rank, ascending
    iters: int
    warmup: int
    timeout: float  # seconds for the whole job, the rendezvous included
    rdzv: Rendezvous


def task_of(job: CommJob, threads: int) -> dict[str, Any]:
    return {
        "backend": job.backend.value,
        "threads": threads,
        "sizes": list(job.sizes),
        "iters": job.iters,
        "warmup": job.warmup,
        "timeout": job.timeout,
    }


def job_command(job: CommJob, python: str, task: dict, task_file: str, result_file: str) -> list[str]:
    """The torchrun command; its rendezvous id is the same on every node that runs the same `dlperf comm`."""
    same = {k: task[k] for k in ("backend", "sizes", "iters", "warmup")}  # not threads: each node's own cores
    job_id = rendezvous_id("comm", job.rdzv.nnodes, json.dumps(same, sort_keys=True))
    return torchrun_command(python, job.nproc, job.rdzv, job_id, "dlperf.runner.comm_worker", [task_file, result_file])


def run_job(job: CommJob, python: str, threads: int) -> tuple[ChildResult, dict | None, bool]:
    """(torchrun's outcome, this node's result file or None, whether the processes ever met), in a temporary
    directory that holds the task, the result and torchrun's logs."""
    from dlperf.runner.comm_worker import joined_marker
    from dlperf.runner.launch import child_env, run_child
    from dlperf.runner.peak import read_answer  # the same result-file contract as the peak worker's

    task = task_of(job, threads)
    with tempfile.TemporaryDirectory(prefix="dlperf-comm-") as tmp:
        tmpdir = Path(tmp)
        task_file, result_file = tmpdir / "task.json", tmpdir / "result.json"
        task_file.write_text(json.dumps(task))
        cmd = job_command(job, python, task, str(task_file), str(result_file))
        child = run_child(cmd, child_env(os.environ, threads, python), job.timeout, tmpdir)
        return child, read_answer(result_file), joined_marker(str(result_file)).exists()


def failure_reason(job: CommJob, child: ChildResult, answer: dict | None, joined: bool) -> str | None:
    """Why the job gave no figures, in one line; None when it did."""
    if answer is not None and answer.get("status") == Status.OK and not child.timed_out:
        return None
    if answer is not None and answer.get("error"):
        return f"rank {answer.get('rank', '?')}: {answer['error']}"
    if not joined and job.rdzv.nnodes > 1:
        why = f"within --timeout {job.timeout:g} s" if child.timed_out else f"({last_line(child.stderr_tail)})"
        return (
            f"the {job.rdzv.nnodes} nodes never met at --rdzv-endpoint {job.rdzv.endpoint} {why}: run the same "
            f"command on every node, with --node-rank 0 to {job.rdzv.nnodes - 1}"
        )
    if child.timed_out:
        return f"timed out: the job exceeded --timeout {job.timeout:g} s"
    why = child.crashed_reason or "torchrun ended without a result"
    last = last_line(child.stderr_tail)
    return f"{why}{': ' + last if last else ''}"


def last_line(text: str) -> str:
    """The last line of torchrun's stderr that says something (it closes its reports with rules of '=')."""
    lines = [line.strip() for line in text.splitlines() if line.strip().strip("=*-")]
    return lines[-1][:300] if lines else ""


def comm_records(result: dict, job: CommJob) -> list[dict[str, Any]]:
    """The job's result as store rows, one per size; the rest of the result goes in each row's detail."""
    common = {k: v for k, v in result.items() if k != "sizes"}
    where = {"node_rank": job.rdzv.node_rank, "rdzv_endpoint": job.rdzv.endpoint}
    rows = []
    for size in result["sizes"]:
        figures = {k: size[k] for k in ("bytes", "time_s", "algbw", "busbw", "wrong")}
        detail = {**common, **where, **{k: v for k, v in size.items() if k not in figures}}
        rows.append({**{k: result[k] for k in ("backend", "device", "world", "nnodes", "threads", "op")},
                     **figures, "detail": detail})  # fmt: skip
    return rows
