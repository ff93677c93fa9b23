"""Execute a planned sweep: one child per task, each result stored as soon as it is in.

Ctrl-C, SIGTERM or SIGHUP stops the running child's process tree, keeps every finished measurement, leaves the
interrupted cell pending (so `dlperf run --resume` measures it), and the run ends with exit code 130. Ctrl-Z stops the
children with dlperf; a process suspended while it ran is measured again (`launch.unsuspended`), as is a profile.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from dlperf import envs
from dlperf.errors import MissingDependency, StoreFault, UsageError
from dlperf.measure.gate import Gate
from dlperf.measure.system import affinity_cpus, busy_lately, pin_cpus
from dlperf.modes import Mode, changes_arithmetic, mode_components
from dlperf.parallel import Rendezvous, distributed
from dlperf.protocol import Cell, CellTask, Compiled, Compiling, DDPTask, Event, MultiWorkerTask, Start
from dlperf.runner import collect, kept, lifeline, room, warm
from dlperf.runner import profile as profiling
from dlperf.runner.distributed import rendezvous_id
from dlperf.runner.launch import Launched, Watch, launch, unsuspended
from dlperf.runner.lifeline import sigterm_as_interrupt
from dlperf.runner.room import Unwritten
from dlperf.runner.tasks import Task, processes, schedule
from dlperf.spec import RunSpec
from dlperf.store import Store, spill
from dlperf.store.location import StoreGone, resume_command
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, CellRecord
from dlperf.vocab import Parallel, Status


class Interrupted(Exception):
    """Ctrl-C, SIGTERM or SIGHUP during a sweep. `unstored`: why the run could not be marked interrupted (the store
    refused the write: a full disk), None where it was."""

    def __init__(self, unstored: str | None = None) -> None:
        super().__init__(unstored or "interrupted")
        self.unstored = unstored

    def notes(self) -> list[str]:
        """A search's note on it, where its status could not be stored; none where it was."""
        return [f"the run's status could not be stored ({self.unstored}): it reads as stopped"] * bool(self.unstored)


class OutOfRoom(UsageError):
    """A cell's worker could not write its files (`room.no_room`: its temporary folder full, `ulimit -f`): every
    cell's would fail alike, so the sweep stops there, the cell left pending for `dlperf run --resume`, as a store that
    refuses a write stops it (one line, exit 2)."""


def room_checked(launched: Launched, task: Task, ctx: SweepContext) -> Launched:
    """`launched`, unless its child failed for want of room to write (`OutOfRoom`)."""
    if launched.child.no_room is None:
        return launched
    raise out_of_room(task.cell, launched.child.crashed_reason, launched.child.no_room.fix, ctx)


@contextmanager
def room_for(cell: Cell, ctx: SweepContext) -> Iterator[None]:
    """dlperf's own writes for `cell`'s children in the temporary folder (`room.Unwritten`: a $TMPDIR that filled up
    since the sweep began) stop the sweep as a worker that could not write does (`room_checked`): one line, the cell
    left to --resume, where the refused task file was a traceback."""
    try:
        yield
    except Unwritten as exc:
        raise out_of_room(cell, f"dlperf could not {exc.what} ({exc.said.why})", exc.said.fix, ctx) from None


def out_of_room(cell: Cell, reason: str, fix: str, ctx: SweepContext) -> OutOfRoom:
    """The sweep's last line where `cell` could not be measured for want of room: why, and how to go on."""
    again = resume_command(ctx.store.path)
    return OutOfRoom(f"{cell.label} not measured: {reason}; every cell's worker would fail alike, so the sweep "
                     f"stopped: {fix}, then `{again}` measures the cells left")  # fmt: skip


def mark_interrupted(store: Store, run_id: int) -> str | None:
    """The run marked interrupted; where the store refuses it (a full disk, a file made read-only), the store's
    line, not raised: the interrupt is what the command says (a fault raised from here replaced it, exit 2 and no
    resume command), and the run, its lease gone with this process, reads as stopped, which --resume takes up too."""
    try:
        store.set_run_status(run_id, "interrupted")
    except StoreFault as exc:
        return str(exc)
    return None


class SweepContext(Protocol):
    """The run being measured, as the sweep reads it: a `runner.session.Session`, which runs the sweep (so the
    sweep names what it reads rather than importing it)."""

    store: Store
    run_id: int
    spec: RunSpec
    workloads: dict[str, dict]  # cell key -> workload JSON
    cores: int
    deadline: float | None  # time.monotonic() past which no child runs (a search's --budget); None: no such end
    forkable: dict  # the run's processes so far that may fork: identity -> framework (`warm.prepare`)


def interpreter_for(framework: str) -> str:
    """The Python that runs this framework's workers: the current one, or the framework's own environment."""
    python = envs.interpreter_for(framework)
    if python is None:
        raise MissingDependency(f"--frameworks {framework}: {envs.unavailable_reason(framework)}")
    return python


def siblings(cell: Cell, stored: list[CellRecord]) -> list[CellRecord]:
    """The run's cells that differ from `cell` at most in their thread count: their FLOPs per step, the memory of a
    step and their loss check's verdict are the cell's too (the same model, batch, dtypes and seeds: the tensors a
    step holds do not depend on how many threads compute them), so a run measures them once."""
    same = (cell.workload, cell.framework, cell.device, cell.mode, cell.nproc, cell.scaling, cell.parallel,
            cell.microbatches)  # fmt: skip
    return [c for c in stored if (c.workload, c.framework, c.device, c.mode, c.nproc, c.scaling or "", c.parallel,
                                  c.microbatches) == same]  # fmt: skip


def child_task(task: Task, ctx: SweepContext) -> CellTask | DDPTask:
    """What the child of `task` receives. The loss check runs once per cell, in its first process (it trains from
    fixed seeds: another process would repeat it), for every mode but fp32 (the reference), unless --no-loss-check
    or a sibling cell has its verdict; FLOPs and the memory of a step are measured once per sibling group, and not
    at all where an earlier run's are kept (`kept`: counted, not read from the machine's state)."""
    cell, spec = task.cell, ctx.spec
    group = siblings(cell, ctx.store.cells(ctx.run_id))
    wants_check = spec.loss_check and task.repeat == 0 and changes_arithmetic(cell.mode)
    count_flops = not any(c.flops_per_step is not None for c in group)
    measure_memory = not any(c.peak_mem_bytes is not None and collect.shares_memory(c.peak_mem_kind) for c in group)
    if count_flops or measure_memory:
        flops, memory = kept.extras(kept.key(cell, ctx.workloads[cell.key]))
        count_flops, measure_memory = count_flops and flops is None, measure_memory and memory is None
    # a dlperf fit try (under --max-memory) is asked its memory, not its FLOPs: counting them is one more step, 41 s of
    # a 300 s --timeout at alexnet-r's batch 39,762 on 2 threads, after the timed steps, where a try ran out of time
    count_flops = count_flops and spec.max_memory is None
    common = {
        "cell": cell,
        "repeat": task.repeat,
        "workload": ctx.workloads[cell.key],
        "timer": spec.timer,
        "count_flops": count_flops,
        "measure_memory": measure_memory,
        "loss_check": wants_check and not any(c.loss_check and c.loss_check.ok is not None for c in group),
        "check_if_faster_than_s": task.check_if_faster_than_s,
        "stop": task.stop,
        "nvtx": spec.nvtx,
        "data": spec.data if cell.loader else None,
    }
    on_cpu = spec.pin and cell.device == "cpu"
    if not distributed(cell.nproc, cell.parallel):  # a plain cell, or MirroredStrategy's replicas in one process
        # the least busy CPUs, as a held cell's threads take them (`hold_threads`): the lowest-numbered were taken
        # whatever ran there (a loop on CPU 0, `taskset -c 0`: a 1-thread cell was pinned beside it on CPU 0)
        pins = pin_cpus(cell.threads * max(1, cell.nproc), busy=busy_lately(affinity_cpus())) if on_cpu else None
        return CellTask(**common, pin_cpus=pins, memory_limit=spec.max_memory)
    per_node = cell.nproc // spec.nnodes
    pins = ddp_pins(cell.threads, per_node) if on_cpu else None
    kind = MultiWorkerTask if cell.parallel == Parallel.MULTIWORKER else DDPTask
    return kind(**common, group_timeout_s=spec.timeout, rank_cpus=pins)


def run_task(task: Task, ctx: SweepContext, poll: Callable[[], None], group_of: Together | None = None,
             k: int = 0) -> ProcessMeasurement:  # fmt: skip
    """Measure one task in a fresh child; return the measurement (never raises for a child's failure). `group_of`:
    the group of cells compiling at once it is the k-th of (`run_together`), whose child tasks were made in the
    sweep's thread, the one that may read the store."""
    cell, timeout = task.cell, ctx.spec.timeout
    python = interpreter_for(cell.framework)
    if task.unsupported is not None:  # known before any child starts: stored as its child would have said it
        return collect.known_unsupported(task.unsupported, python)
    if distributed(cell.nproc, cell.parallel):
        rdzv = rendezvous(ctx.spec)
        job = rendezvous_id(cell.key, task.repeat, rdzv.endpoint)
        launched, notes = unsuspended(lambda: launch(child_task(task, ctx), python, cell.threads, timeout,
                                                     nproc=cell.nproc // rdzv.nnodes, rdzv=rdzv, job_id=job,
                                                     poll=poll), again=rdzv.nnodes == 1)  # fmt: skip
        return noted(ddp_outcome(room_checked(launched, task, ctx), timeout), notes)
    compiling, deadline = CompileWatch(ctx.spec.compile_timeout), Deadline(ctx.deadline)
    threads = cell.threads * max(1, cell.nproc)  # MirroredStrategy: every replica's threads, in one process
    child, watch = group_of.tasks[k] if group_of else child_task(task, ctx), lambda new: compiling(new) or deadline(new)
    if group_of is not None:  # its --timeout covers the waits for the group's other cells as well
        timeout, watch = timeout * len(group_of.tasks), group_of.watch(k, watch)
    launched, notes = unsuspended(lambda: launch(child, python, threads, timeout, poll=poll, watch=watch))
    launched = room_checked(launched, task, ctx)
    return noted(collect.measurement(launched.main, launched.child, timeout), notes)


def ddp_outcome(launched: Launched, timeout: float) -> ProcessMeasurement:
    """A multi-process job's measurement (`collect.ddp_measurement`), with the ranks' exit codes torchrun printed."""
    exits = collect.torchrun_exits(launched.stderr)
    return collect.ddp_measurement(launched.events, launched.child, timeout, exits)


def noted(m: ProcessMeasurement, notes: list[str]) -> ProcessMeasurement:
    """`m` with `notes` beside its own (its detail's: the cell's warnings say them)."""
    if notes:
        m.detail.notes = [*m.detail.notes, *notes]
    return m


def may_compile_at_once(cell: Cell) -> bool:
    """A cell that may compile beside others (`--compile-at-once`): a compiled mode in one plain process."""
    return Mode.COMPILE in mode_components(cell.mode) and not cell.nproc


def groups(tasks: list[Task], spec: RunSpec) -> list[list[Task]]:
    """The tasks in the order they run, each group in one step: with `--compile-at-once N`, a compiled cell takes
    the next N-1 compiled cells on its device along with it, from wherever they come later in the run (an eager
    cell between them runs after the group); every other task runs alone, in the run's order. A profiled run
    groups none: its profiles come between its cells."""
    if spec.compile_at_once < 2 or spec.profile:
        return [[task] for task in tasks]
    left, found = list(tasks), []
    while left:
        first = left.pop(0)
        group = [first]
        if may_compile_at_once(first.cell) and first.unsupported is None:
            mates = [t for t in left if may_compile_at_once(t.cell) and t.cell.device == first.cell.device
                     and t.unsupported is None]  # fmt: skip
            group += mates[: spec.compile_at_once - 1]
            left = [t for t in left if not any(t is g for g in group)]
        found.append(group)
    return found


class Together:
    """A group compiling at once: its lock file (`measure/gate.py`), held shared by this process until each child
    holds its own (the child's first event says so), and a stop that every child's watch sees."""

    STOPPED = "stopped: the sweep ended (interrupted, or another cell's process failed to be stored)"

    def __init__(self, path: str, tasks: list[CellTask]) -> None:
        self.path = path
        self.tasks = [replace(task, gate=path, gate_group=len(tasks)) for task in tasks]
        self.started = [threading.Event() for _ in tasks]
        self.ended = threading.Event()
        self.held = Gate(path)
        self.held.work()

    def watch(self, k: int, inner: Watch) -> Watch:
        def seen(new: list[Event]) -> str | None:
            if any(not isinstance(e, Start) for e in new):  # its first event after `start` comes once it holds its own
                self.started[k].set()
            return self.STOPPED if self.ended.is_set() else inner(new)

        return seen

    def let_go(self) -> None:
        """The parent's own hold released, once every child holds its lock or has ended."""
        if all(s.is_set() for s in self.started):
            self.held.release()


def run_together(
    ctx: SweepContext, group: list[Task], poll: Callable[[], None]
) -> Iterator[tuple[int, ProcessMeasurement]]:
    """The group's tasks, each in its child, launched at once from threads of this process (`--compile-at-once`):
    their builds and compilations side by side, each warm-up and timed steps alone (`measure/gate.py`). Yields (k,
    measurement) as each ends. An interrupt, or an error storing a measurement, stops every child still running
    before it goes on."""
    tasks, of = [child_task(task, ctx) for task in group], "of cells compiling at once"
    with room_for(group[0].cell, ctx), room.writing(f"make the folder {of}", Path(tempfile.gettempdir())):
        made = tempfile.TemporaryDirectory(prefix=lifeline.tmp_prefix("gate"))  # $TMPDIR full: one line
    with made as tmp:
        with room_for(group[0].cell, ctx), room.writing(f"write the lock file {of}", Path(tmp).parent):
            group_of = Together(os.path.join(tmp, "gate"), tasks)
        pool = ThreadPoolExecutor(len(group))

        def one(k: int) -> ProcessMeasurement:
            try:
                with room_for(group[k].cell, ctx):
                    return run_task(group[k], ctx, lambda: None, group_of, k)
            finally:
                group_of.started[k].set()  # a child that never started holds nothing

        try:
            pending = {pool.submit(one, k): k for k in range(len(group))}
            while pending:
                group_of.let_go()
                poll()
                done, _ = wait(pending, timeout=0.25)
                for future in sorted(done, key=pending.__getitem__):
                    yield pending.pop(future), future.result()
        except BaseException:
            group_of.ended.set()
            raise
        finally:
            pool.shutdown(wait=True)
            group_of.held.release()


def rendezvous(spec: RunSpec) -> Rendezvous:
    return Rendezvous(spec.nnodes, spec.node_rank, spec.rdzv_endpoint, join_timeout_s=spec.timeout)


def ddp_pins(threads: int, per_node: int) -> dict[str, list[int]]:
    """--pin under DDP: each process of this node its own `threads` CPUs of the allowed ones."""
    allowed = sorted(affinity_cpus())
    return {str(r): allowed[r * threads : (r + 1) * threads] or allowed for r in range(per_node)}


class Deadline:
    """Stops a child still running when a search's budget runs out (`Session.deadline`), saying so."""

    REASON = "the search's --budget ran out"

    def __init__(self, at: float | None) -> None:
        self.at = at

    def __call__(self, new: list[Event] = ()) -> str | None:
        return self.REASON if self.at is not None and time.monotonic() >= self.at else None


class CompileWatch:
    """Stops a cell whose compilation outlasts --compile-timeout: sees the worker's events as they arrive."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.started: float | None = None
        self.finished = False

    def __call__(self, new: list[Event]) -> str | None:
        if self.timeout is None or self.finished:
            return None
        for event in new:
            if isinstance(event, Compiling):
                self.started = time.monotonic()
            elif isinstance(event, Compiled):
                self.finished = True
        if self.started is not None and not self.finished and time.monotonic() - self.started > self.timeout:
            return f"compilation exceeded --compile-timeout {self.timeout:g} s"
        return None


def store_result(ctx: SweepContext, task: Task, m: ProcessMeasurement, session: int | None = None) -> CellFigures:
    """Store one process's measurement with its cell's figures recomputed over every process measured so far;
    `session`: the session of the run that measured it, where not this one (a measurement a refusing store kept)."""
    cell = task.cell
    earlier = [e for e in ctx.store.measurements(ctx.run_id, cell.key) if e.repeat != task.repeat]
    batch = ctx.workloads[cell.key].get("batch")
    busy = cell.threads * (cell.nproc // ctx.spec.nnodes if cell.nproc else 1)  # threads of this node's processes
    figures = collect.cell_figures([*earlier, m], batch, busy, ctx.cores, cell.device, cell.framework)
    collect.share(figures, [c for c in siblings(cell, ctx.store.cells(ctx.run_id)) if c.key != cell.key])
    entry = kept.key(cell, ctx.workloads[cell.key])
    if figures.flops_per_step is None or figures.peak_mem_bytes is None:
        kept.take(figures, *kept.extras(entry))
    if cell.device == "cpu":  # the process's growth against the step's peak, a sibling's where it measured none
        figures.warnings += collect.growing([e.detail for e in [*earlier, m]], figures.peak_mem_bytes)
    ctx.store.record(ctx.run_id, cell.key, task.repeat, m, figures, session)
    kept.keep(entry, m.detail, f"run {ctx.run_id} of {os.path.abspath(ctx.store.path)}")  # read from any folder
    return figures


def store_or_keep(ctx: SweepContext, task: Task, m: ProcessMeasurement) -> CellFigures:
    """Store a measurement; when the store refuses it, keep it beside the database (`store/spill.py`) for
    `dlperf run --resume`, and stop the sweep with one line that says where it is."""
    try:
        with ctx.store.writing(f"cell {task.cell.key} of run {ctx.run_id}"):  # its reads too: a file damaged mid-run
            return store_result(ctx, task, m)
    except StoreFault as exc:
        what = f"the measurement of {task.cell.label} (process {task.repeat + 1})"
        db = str(exc.now_at) if isinstance(exc, StoreGone) and exc.now_at else ctx.store.path  # the file moved on
        try:
            run_id, store = ctx.run_id, ctx.store
            kept = spill.keep(
                db, run_id, task.cell.key, task.repeat, m, store.sessions.get(run_id), store.marks.get(run_id)
            )
        except OSError as lost:
            raise StoreFault(f"{exc}; {what} is lost: it could not be kept either ({lost.strerror or lost})") from None
        hint = (
            ""
            if isinstance(exc, StoreGone) and not exc.now_at
            else f": `{resume_command(db, spill.elsewhere(kept))}` stores it"
        )
        raise StoreFault(f"{exc}; {what} is kept in {kept}{hint}") from None


def take_up_kept(ctx: SweepContext) -> int:
    """Store the run's measurements a refusing store left beside it, each under the session that measured it where
    its line says (one kept before lines said it: this one's), then remove them; returns how many were stored. A
    process the store has already (measured again by a --resume that did not see the line) keeps its stored, newer,
    measurement."""
    entries = spill.kept(ctx.store.path, ctx.run_id, ctx.store.mark(ctx.run_id))  # not another run's of its id
    planned = {c.key: c.cell for c in ctx.store.cells(ctx.run_id)}
    stored = ctx.store.done_repeats(ctx.run_id)
    taken = [e for e in entries if e.key in planned and (e.key, e.repeat) not in stored]
    for entry in taken:
        store_result(ctx, Task(planned[entry.key], entry.repeat), entry.measurement, entry.session)
    spill.forget(ctx.store.path, ctx.run_id, ctx.store.mark(ctx.run_id))
    return len(taken)


def warm_up(ctx: SweepContext, tasks: list[Task], to_profile: list[Cell] = ()) -> None:
    """Start the warm parents these tasks' processes (and their profiles) will fork from, where the run has two or
    more that may fork (`warm.prepare`); a process counted earlier is not counted again."""
    found = processes(tasks, profile=ctx.spec.profile, to_profile=to_profile)
    warm.prepare(found, ctx.spec.max_memory, ctx.forkable)


def execute(
    ctx: SweepContext, tasks: list[Task], progress, *, last: bool = True, to_profile: list[Cell] = ()
) -> list[Status]:
    """Run every task; returns the statuses. Raises Interrupted after storing what finished. `last=False` leaves
    the run open for more tasks (a search adds cells as it goes). `to_profile`: measured cells whose profile an
    interrupt cut off (`unprofiled`), profiled first; the progress display counts each as an item."""
    statuses: list[Status] = []
    with sigterm_as_interrupt():  # the run's state is written within it: a second Ctrl-C does not cut that short
        try:
            measure_all(ctx, tasks, progress, to_profile, statuses)
            if last:  # held as a measurement is: an interrupt inside this write undid it, the run was left running
                with lifeline.held():  # and the line said nothing was stored; now it is stored, then interrupted
                    ctx.store.set_run_status(ctx.run_id, "complete")
        except KeyboardInterrupt:
            raise Interrupted(mark_interrupted(ctx.store, ctx.run_id)) from None
    return statuses


def measure_all(ctx: SweepContext, tasks: list[Task], progress, to_profile: list[Cell], statuses: list[Status]) -> None:
    """Every task, each measurement stored as it ends and its status appended to `statuses`."""
    warm_up(ctx, tasks, to_profile)
    if (ahead := getattr(progress, "ahead", None)) is not None:  # a display of the API caller's own may not ask
        ahead(tasks)
    for i, cell in enumerate(to_profile):
        profile_cell(ctx, cell, progress, i, own_item=True)
    at = 0
    for group in groups(tasks, ctx.spec):
        if Deadline(ctx.deadline)():  # past the budget: the rest stay pending
            break
        i, at = at + len(to_profile), at + len(group)
        if len(group) > 1:
            progress.start_together(i, group)
            with closing(run_together(ctx, group, progress.refresh)) as ended:  # a store's fault stops them
                for k, m in ended:
                    with lifeline.held():  # its line too: an interrupt while it is stored comes after both
                        figures = store_or_keep(ctx, group[k], m)
                        statuses.append(m.status)
                        progress.finish(i + k, group[k], m, figures)
            continue
        task = group[0]
        progress.start(i, task)
        with room_for(task.cell, ctx):
            m = run_task(task, ctx, progress.refresh)
        with lifeline.held():  # an interrupt comes once it is stored (one transaction: all or none) and its line said
            figures = store_or_keep(ctx, task, m)
            statuses.append(m.status)
            progress.finish(i, task, m, figures)
        if profiling.wanted(ctx.spec, task.repeat, figures.status):
            profile_cell(ctx, task.cell, progress, i)


def profile_cell(ctx: SweepContext, cell: Cell, progress, index: int, *, own_item: bool = False) -> None:
    """The cell's untimed profiled process, after its timed ones, stored as its profile."""
    if Deadline(ctx.deadline)():  # the budget has run out: not profiled, and no row says it was tried
        return
    progress.profiling(index, cell)
    median_s = next((c.median_s for c in ctx.store.cells(ctx.run_id) if c.key == cell.key), None)
    with room_for(cell, ctx):
        row = profiling.profile(cell, ctx.workloads[cell.key], ctx.spec, interpreter_for(cell.framework),
                                progress.refresh, median_s=median_s, watch=Deadline(ctx.deadline))  # fmt: skip
    with lifeline.held():
        ctx.store.record_profile(ctx.run_id, cell.key, row)
        progress.profiled(index, cell, row, own_item=own_item)


def unprofiled(ctx: SweepContext, tasks: list[Task]) -> list[Cell]:
    """The cells of a profiled run that were measured in full but have no profile: the run was interrupted between
    a cell's last timed process and its profile. A cell with a profile row, even one that could not be taken, is not
    profiled again; a cell with tasks left is profiled after its last one, as in any run."""
    if not ctx.spec.profile:
        return []
    left, profiles = {t.cell.key for t in tasks}, ctx.store.profiles(ctx.run_id)
    done = ctx.store.cells(ctx.run_id)
    return [c.cell for c in done if c.status is Status.OK and c.key not in left and c.key not in profiles]


def remaining(cells: list[Cell], repeats: int, done: set[tuple[str, int]]) -> list[Task]:
    return [t for t in schedule(cells, repeats) if (t.cell.key, t.repeat) not in done]
