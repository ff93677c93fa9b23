"""The parent side of `dlperf comm`: one torchrun job runs `worker/comm.py` in every process, the thread
variables fixed before torch loads; its result becomes store rows, one per message size, and so do the sizes a job
interrupted or failed later had measured (`finished`). Nothing here imports a framework.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from dlperf.answers import CommAnswer
from dlperf.parallel import Rendezvous
from dlperf.protocol import Answer, AnswerPart, CommTask, Error, Event, Joined, all_of, first
from dlperf.runner.distributed import rendezvous_id
from dlperf.runner.outcome import outcome, tail
from dlperf.vocab import CommBackend

if TYPE_CHECKING:
    from dlperf.runner.launch import ChildResult, Launched
    from dlperf.store.machine import MeasuredComm


@dataclass(frozen=True)
class CommJob:
    nproc: int  # processes on this node
    backend: CommBackend
    sizes: tuple[int, ...]  # message bytes per rank, ascending
    iters: int
    warmup: int
    timeout: float  # seconds for the whole job, the rendezvous included
    rdzv: Rendezvous


def task_of(job: CommJob, threads: int) -> CommTask:
    return CommTask(job.backend.value, threads, list(job.sizes), job.iters, job.warmup, job.timeout)


def job_id(job: CommJob, task: CommTask) -> str:
    """The rendezvous id: the same on every node that runs the same `dlperf comm` (not its threads: each node's
    own cores), another for another job."""
    same = {"backend": task.backend, "sizes": task.sizes, "iters": task.iters, "warmup": task.warmup}
    return rendezvous_id("comm", job.rdzv.nnodes, json.dumps(same, sort_keys=True))


def run_job(job: CommJob, python: str, threads: int) -> Launched:
    """One torchrun job of this node's processes, through the one launcher."""
    from dlperf.runner.launch import launch

    task = task_of(job, threads)
    return launch(task, python, threads, job.timeout, nproc=job.nproc, rdzv=job.rdzv, job_id=job_id(job, task))


def result_of(events: list[Event]) -> CommAnswer | None:
    """The job's figures: the answer of this node's first process."""
    answer = first(events, Answer)
    return None if answer is None else CommAnswer.from_json(answer.result)


def finished(events: list[Event]) -> CommAnswer | None:
    """The sizes a job that did not end (interrupted, or failed) had measured, as one answer: this node's first
    process's parts (`AnswerPart`), in order; None when it had measured none."""
    parts = [CommAnswer.from_json(part.result) for part in all_of(events, AnswerPart)]
    if not parts:
        return None
    return replace(parts[-1], sizes=[size for part in parts for size in part.sizes])


def failure_reason(job: CommJob, child: ChildResult, events: list[Event]) -> str | None:
    """Why the job gave no figures, in one line; None when it did. `events`: every rank's of this node."""
    if first(events, Answer) is not None and not child.timed_out:
        return None
    errors = all_of(events, Error)
    if errors:
        cause = min(errors, key=lambda e: e.at)  # the first failure; the later ones are its peers losing it
        return f"rank {'?' if cause.rank is None else cause.rank}: {cause.error}"
    if first(events, Joined) is None and job.rdzv.nnodes > 1:
        why = f"within --timeout {job.timeout:g} s" if child.timed_out else f"({tail(child).removeprefix(': ')})"
        return (
            f"the {job.rdzv.nnodes} nodes never met at --rdzv-endpoint {job.rdzv.endpoint} {why}: run the same "
            f"command on every node, with --node-rank 0 to {job.rdzv.nnodes - 1}"
        )
    return outcome(events, child, job.timeout, result=Answer, ended="torchrun ended without a result").reason


def comm_records(answer: CommAnswer, job: CommJob) -> list[MeasuredComm]:
    """The job's answer as store rows, one per size; the rest of the answer, where this node met the others and the
    size's other figures go in each row's detail."""
    from dlperf.store.machine import MeasuredComm

    common = {k: v for k, v in answer.to_json().items() if k != "sizes"}
    where = {"node_rank": job.rdzv.node_rank, "rdzv_endpoint": job.rdzv.endpoint}
    return [
        MeasuredComm(
            backend=answer.backend,
            device=answer.device,
            world=answer.world,
            nnodes=answer.nnodes,
            threads=answer.threads,
            op=answer.op,
            bytes=size.bytes,
            time_s=size.time_s,
            algbw=size.algbw,
            busbw=size.busbw,
            wrong=size.wrong,
            detail={
                **common,
                **where,
                "count": size.count,
                "rank_medians_s": size.rank_medians_s,
                "samples_max_s": size.samples_max_s,
            },
        )
        for size in answer.sizes
    ]
