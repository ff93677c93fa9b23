"""Execute a planned sweep: one child per task, each result stored as soon as it is in.

Ctrl-C or SIGTERM stops the running child's process tree, keeps every finished measurement, leaves the interrupted
cell pending (so `dlperf run --resume` measures it), and the run ends with exit code 130.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dlperf import envs
from dlperf.errors import MissingDependency
from dlperf.measure.system import pin_cpus
from dlperf.protocol import Cell
from dlperf.runner import collect
from dlperf.runner.launch import cache_env, child_env, read_events, run_child, worker_command
from dlperf.runner.plan import Task, schedule
from dlperf.spec import RunSpec
from dlperf.store import Store
from dlperf.vocab import Status


class Interrupted(Exception):
    """Ctrl-C or SIGTERM during a sweep."""


@dataclass
class SweepContext:
    store: Store
    run_id: int
    spec: RunSpec
    workloads: dict[str, dict]  # cell key -> workload JSON
    cores: int
    check_if_faster_than_s: float | None = None  # a search's bar: skip the loss check of modes not faster than it


def interpreter_for(framework: str) -> str:
    """The Python that runs this framework's workers: the current one, or the framework's own environment."""
    python = envs.interpreter_for(framework)
    if python is None:
        raise MissingDependency(f"--frameworks {framework}: {envs.unavailable_reason(framework)}")
    return python


@contextmanager
def sigterm_as_interrupt():
    """SIGTERM (a job scheduler, `kill`) is handled like Ctrl-C, so the run is left resumable either way."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def task_payload(task: Task, workload: dict, spec: RunSpec, check_if_faster_than_s: float | None = None) -> dict:
    pins = pin_cpus(task.cell.threads) if spec.pin and task.cell.device == "cpu" else None
    return {
        "cell": task.cell.to_json(),
        "repeat": task.repeat,
        "workload": workload,
        "timer": spec.to_json()["timer"],
        "pin_cpus": pins,
        "loss_check": spec.loss_check,
        "check_if_faster_than_s": check_if_faster_than_s,
    }


def run_task(task: Task, ctx: SweepContext, poll: Callable[[], None]) -> dict:
    """Measure one task in a fresh child; return the measurement (never raises for a child's failure)."""
    cell = task.cell
    if cell.nproc:
        return run_ddp_task(task, ctx, poll)
    with tempfile.TemporaryDirectory(prefix="dlperf-cell-") as tmp:
        tmpdir = Path(tmp)
        (tmpdir / "task.json").write_text(
            json.dumps(task_payload(task, ctx.workloads[cell.key], ctx.spec, ctx.check_if_faster_than_s))
        )
        python = interpreter_for(cell.framework)
        cmd = worker_command(python, str(tmpdir / "task.json"), str(tmpdir / "result.jsonl"))
        env = {**child_env(os.environ, cell.threads, python), **cache_env(tmpdir)}
        watch = CompileWatch(tmpdir / "result.jsonl", ctx.spec.compile_timeout)
        child = run_child(cmd, env, ctx.spec.timeout, tmpdir, poll, watch.check)
        return collect.measurement(read_events(tmpdir / "result.jsonl"), child, ctx.spec.timeout)


def rendezvous(spec: RunSpec):
    from dlperf.runner.distributed import Rendezvous

    return Rendezvous(spec.nnodes, spec.node_rank, spec.rdzv_endpoint, join_timeout_s=spec.timeout)


def ddp_pins(threads: int, per_node: int) -> dict[str, list[int]]:
    """--pin under DDP: each process of this node its own `threads` CPUs of the allowed ones."""
    from dlperf.measure.system import affinity_cpus

    allowed = sorted(affinity_cpus())
    return {str(r): allowed[r * threads : (r + 1) * threads] or allowed for r in range(per_node)}


def run_ddp_task(task: Task, ctx: SweepContext, poll: Callable[[], None]) -> dict:
    """A data-parallel cell: one torchrun job of this node's processes; every process reports on its own file."""
    from dlperf.runner.distributed import rendezvous_id, torchrun_command

    cell, rdzv = task.cell, rendezvous(ctx.spec)
    per_node = cell.nproc // rdzv.nnodes
    with tempfile.TemporaryDirectory(prefix="dlperf-ddp-") as tmp:
        tmpdir = Path(tmp)
        payload = task_payload(task, ctx.workloads[cell.key], ctx.spec)
        payload["pin_cpus"] = ddp_pins(cell.threads, per_node) if ctx.spec.pin and cell.device == "cpu" else None
        payload["group_timeout_s"] = ctx.spec.timeout
        (tmpdir / "task.json").write_text(json.dumps(payload))
        python = interpreter_for(cell.framework)
        job = rendezvous_id(cell.key, task.repeat, rdzv.endpoint)
        args = [str(tmpdir / "task.json"), str(tmpdir / "result")]
        cmd = torchrun_command(python, per_node, rdzv, job, "dlperf.runner.ddp_worker", args)
        env = {**child_env(os.environ, cell.threads, python), **cache_env(tmpdir)}
        child = run_child(cmd, env, ctx.spec.timeout, tmpdir, poll)
        files = tmpdir.glob("result.rank*.jsonl")
        by_rank = {int(p.name.removeprefix("result.rank").removesuffix(".jsonl")): read_events(p) for p in files}
        exits = collect.torchrun_exits((tmpdir / "stderr.log").read_text(errors="replace"))
        return collect.ddp_measurement(by_rank, child, ctx.spec.timeout, exits)


class CompileWatch:
    """Stops a cell whose compilation outlasts --compile-timeout: follows the worker's events as they are written."""

    def __init__(self, events: Path, timeout: float | None) -> None:
        self.events, self.timeout = events, timeout
        self.offset, self.started, self.finished = 0, None, False

    def check(self) -> str | None:
        if self.timeout is None or self.finished:
            return None
        self._read()
        if self.started is not None and not self.finished and time.monotonic() - self.started > self.timeout:
            return f"compilation exceeded --compile-timeout {self.timeout:g} s"
        return None

    def _read(self) -> None:
        try:
            with open(self.events, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written is read next time
        self.offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            if '"event": "compiling"' in line:
                self.started = time.monotonic()
            elif '"event": "compiled"' in line:
                self.finished = True


def store_result(ctx: SweepContext, task: Task, m: dict) -> dict:
    cell = task.cell
    earlier = [
        {
            "status": r["status"],
            "error": r["error"],
            "samples": json.loads(r["samples_json"]),
            "detail": json.loads(r["detail_json"]),
        }
        for r in ctx.store.measurements(ctx.run_id, cell.key)
        if r["repeat"] != task.repeat
    ]
    batch = ctx.workloads[cell.key]["batch"]
    busy = cell.threads * (cell.nproc // ctx.spec.nnodes if cell.nproc else 1)  # threads of this node's processes
    figures = collect.cell_figures([*earlier, m], batch, busy, ctx.cores, cell.device)
    ctx.store.record(ctx.run_id, cell.key, task.repeat, m, figures)
    return figures


def execute(ctx: SweepContext, tasks: list[Task], progress, *, last: bool = True) -> list[Status]:
    """Run every task; returns the statuses. Raises Interrupted after storing what finished. `last=False` leaves
    the run open for more tasks (a search adds cells as it goes)."""
    statuses = []
    try:
        with sigterm_as_interrupt():
            for i, task in enumerate(tasks):
                progress.start(i, task)
                m = run_task(task, ctx, progress.refresh)
                figures = store_result(ctx, task, m)  # one transaction: all of it or none of it
                statuses.append(Status(m["status"]))
                progress.finish(i, task, m, figures)
    except KeyboardInterrupt:
        ctx.store.set_run_status(ctx.run_id, "interrupted")
        raise Interrupted from None
    if last:
        ctx.store.set_run_status(ctx.run_id, "complete")
    return statuses


def remaining(cells: list[Cell], repeats: int, done: set[tuple[str, int]]) -> list[Task]:
    return [t for t in schedule(cells, repeats) if (t.cell.key, t.repeat) not in done]
