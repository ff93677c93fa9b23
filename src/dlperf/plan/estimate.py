"""How long a planned sweep will take, said before it runs (`dlperf run --dry-run`).

A cell measured before on this machine takes its earlier processes' median life (`from_earlier`). Any other cell is
estimated from a pilot: one untimed process per workload, framework, device and mode (at the most threads the plan
gives them) that builds the step, runs it once to warm up and once more to time it, and nothing else. A cell's process
then costs

    its fixed part (the pilot's life beyond its two steps, compiling included)
    + the warm-up and the timed steps the timer will take at that step time
    + once per cell and its thread-count siblings, the untimed extras (FLOPs, the memory of a step, the loss check)

where the FLOPs and the memory of a step are not kept from an earlier run (`runner/kept.py`: the process skips them)
and, for a resumed run (`--resume --dry-run`), none of the extras its cell's sibling group has stored already.
A cell measured before takes its earlier processes' lives less the extras they ran (their stored phases), plus
those this process will run, each as long as it took them.

The step time at t threads is the pilot's scaled by (pilot threads / t): linear scaling, which errs long where a
sweep spends most of its time (one thread). A pilot that fails or times out costs its cells what it cost itself.
A user once got "2.7 min" for a sweep that took 31: a fixed guess per cell knew nothing of a 12x slower bf16 step.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from dlperf import envinfo
from dlperf.measure.timer import TimerConfig
from dlperf.modes import Mode, mode_components
from dlperf.plan import Plan
from dlperf.protocol import Cell, CellTask
from dlperf.runner import collect, kept, warm
from dlperf.runner.launch import launch
from dlperf.runner.sweep import interpreter_for, siblings
from dlperf.runner.tasks import Task, processes
from dlperf.store import Store
from dlperf.store.records import CellRecord
from dlperf.vocab import Status

PILOT_TIMER = TimerConfig(min_steps=1, min_time=0.0, max_time=0.001, max_warmup=1)  # one step each, whatever it takes
PILOT_TIMEOUT_S = 300.0
# the untimed extras, in steps of the cell (benchmarks/cell_cost.py: the FLOP count is one step under a dispatch
# mode, the memory figures one such step and one plain step, the loss check two short trainings of a smaller batch)
EXTRA_STEPS = {"flops": 1.0, "memory": 2.0, "loss_check": 2.5}
EXTRA_PHASES = {"flops": "flops_s", "memory": "memory_s", "loss_check": "loss_check_s"}  # `collect.phases`
DDP_EXTRA_S = 5.0  # torchrun and its rendezvous, beyond one process's life


@dataclass(frozen=True)
class Pilot:
    step_s: float | None  # None: the pilot timed no step (failed, unsupported, timed out)
    fixed_s: float  # its life beyond the warm-up and timed steps (interpreter, import, build, compile, exit)
    threads: int
    duration_s: float  # its whole life
    unsupported: str | None = None  # why the pilot's cell is unsupported here, as the run would record it


@dataclass(frozen=True)
class Estimate:
    seconds: float  # the likely time
    at_most_s: float  # if every warm-up and timed loop runs to --max-time (each process capped by --timeout)
    pilots: int  # pilot processes run for it
    pilot_s: float  # their wall time
    known: int  # processes estimated from earlier runs on this machine
    unsupported: dict[tuple, str] = field(default_factory=dict)  # pilot key -> why its cells will be unsupported


@dataclass(frozen=True)
class Earlier:
    """One earlier process of a cell on this machine: its whole life, and the untimed extras it ran, by their seconds
    (its stored phases: `collect.phases`)."""

    duration_s: float
    extras_s: dict[str, float] = field(default_factory=dict)  # EXTRA_PHASES' names

    @classmethod
    def of(cls, duration_s: float, phases: dict[str, float]) -> Earlier:
        ran = {name: phases[phase] for name, phase in EXTRA_PHASES.items() if phases.get(phase) is not None}
        return cls(duration_s, ran)


def from_earlier(earlier: list[Earlier], extras: list[str]) -> tuple[float, float]:
    """(likely, at most) seconds of a process from its cell's earlier ones here: their lives less the extras each
    ran, plus the `extras` this one will run, each as long as it took them (nothing where none of them ran it). A
    cell's first process that counted the FLOPs and the memory step is no guide to one that takes them kept."""
    bare = [max(0.0, e.duration_s - sum(e.extras_s.values())) for e in earlier]
    runs = [[e.extras_s[name] for e in earlier if name in e.extras_s] for name in extras]
    extra = sum(statistics.median(found) for found in runs if found)
    return statistics.median(bare) + extra, max(bare) + extra


def pilot_key(cell: Cell) -> tuple:
    return cell.workload, cell.framework, cell.device, cell.mode


def pilot_cells(cells: list[Cell], cores: int) -> dict[tuple, Cell]:
    """One pilot per workload, framework, device and mode, at the most threads any of its cells uses (at most the
    cores): the fastest step, so the pilot is short."""
    found: dict[tuple, Cell] = {}
    for c in cells:
        key, threads = pilot_key(c), min(c.threads, cores)
        if key not in found or found[key].threads < threads:
            found[key] = Cell(c.workload, c.framework, c.device, threads, c.mode)
    return found


def run_pilot(cell: Cell, workload: dict, python: str, timeout: float) -> Pilot:
    task = CellTask(cell, 0, workload, PILOT_TIMER, count_flops=False, measure_memory=False, loss_check=False)
    launched = launch(task, python, cell.threads, timeout)
    m = collect.measurement(launched.main, launched.child, timeout)
    steps = list(m.detail.warmup_times or []) + list(m.samples)
    step_s = m.samples[0] if m.samples else None
    life = launched.child.duration_s
    why = (m.error or "not supported") if m.status is Status.UNSUPPORTED else None
    return Pilot(step_s, max(0.0, life - sum(steps)), cell.threads, life, why)


def steps_s(step_s: float, timer: TimerConfig) -> tuple[float, float]:
    """(likely, at most) seconds of the warm-up and the timed steps at this step time. Warm-up: until the last
    `warmup_window` steps agree with the ones before (2 windows at least), within --max-warmup steps and --max-time;
    timed: --min-steps and --min-time, then until the median is tight, at most --max-time. Each loop may overrun its
    time limit by one step."""
    warm_steps = min(timer.max_warmup, 2 * timer.warmup_window)
    warm = min(warm_steps * step_s, timer.max_time + step_s)
    warm_most = min(timer.max_warmup * step_s, timer.max_time + step_s)
    timed = min(max(timer.min_steps * step_s, timer.min_time), timer.max_time + step_s)
    timed_most = timer.max_time + step_s
    return warm + timed, warm_most + timed_most


def process_s(task: Task, pilot: Pilot, timer: TimerConfig, extras: list[str], timeout: float) -> tuple[float, float]:
    """(likely, at most) seconds of one process of `task`'s cell, from its pilot."""
    if pilot.step_s is None:
        return pilot.fixed_s, pilot.fixed_s
    step = pilot.step_s * pilot.threads / max(1, task.cell.threads) if task.cell.device == "cpu" else pilot.step_s
    likely, most = steps_s(step, timer)
    extra = pilot.fixed_s + sum(EXTRA_STEPS[e] for e in extras) * step + (DDP_EXTRA_S if task.cell.nproc else 0.0)
    return min(timeout, likely + extra), min(timeout, most + extra)


def extras_of(task: Task, seen: set[tuple], loss_check: bool,
              kept_of: Callable[[Cell], tuple[str, ...]] = lambda cell: ()) -> list[str]:  # fmt: skip
    """The untimed extras this process will run: the first process of a cell and its thread-count siblings counts
    the FLOPs and measures the memory, those not kept from an earlier run (`kept_of`: `kept.has`, and what a resumed
    run has stored: `stored_in`); a cell's first process checks the loss of a mode other than fp32, unless stored."""
    cell = task.cell
    group = (*pilot_key(cell), cell.nproc, cell.scaling, cell.parallel, cell.microbatches)  # `sweep.siblings`
    if group in seen:
        return []
    seen.add(group)
    found = kept_of(task.cell)
    extras = [name for name in ("flops", "memory") if name not in found]
    if loss_check and task.repeat == 0 and mode_components(task.cell.mode) != [Mode.FP32] and "loss_check" not in found:
        extras.append("loss_check")
    return extras


def stored_in(cells: list[CellRecord]) -> Callable[[Cell], tuple[str, ...]]:
    """Which extras a cell's sibling group has stored in the run being resumed (`cells`: its cells): "flops",
    "memory", "loss_check" (a verdict), which its processes left do not run again (`sweep.child_task`)."""

    def found(cell: Cell) -> tuple[str, ...]:
        group = siblings(cell, cells)
        has = {"flops": any(c.flops_per_step is not None for c in group),
               "memory": any(c.peak_mem_bytes is not None for c in group),
               "loss_check": any(c.loss_check is not None and c.loss_check.ok is not None for c in group)}  # fmt: skip
        return tuple(name for name, stored in has.items() if stored)

    return found


def first_process_s(earlier: list[Earlier] | None, cell: Cell, workload: dict) -> float | None:
    """About how long a cell's first process in a new run takes (no loss check), from its earlier ones here: the
    FLOPs and the memory step counted unless kept; None where none ran here."""
    if not earlier:
        return None
    return from_earlier(earlier, extras_of(Task(cell, 0), set(), False, lambda c: kept.has(c, workload)))[0]


def estimate(
    tasks: list[Task],
    workloads: dict[str, dict],
    known: dict[str, list[Earlier]],
    *,
    timer: TimerConfig,
    timeout: float,
    loss_check: bool,
    cores: int,
    python_for: Callable[[str], str],
    on_pilot: Callable[[Cell], None] = lambda cell: None,
    memory_limit: int | None = None,
    stored: Callable[[Cell], tuple[str, ...]] = lambda cell: (),
) -> Estimate:
    """The sweep's time: `known` (cell key -> its earlier processes here) where there is one, a pilot's model
    otherwise; each cell's first process without the figures kept from an earlier run (`kept.has`) or stored in the
    run being resumed (`stored`: `stored_in`). `workloads`: cell key -> workload JSON. The pilots start as the run's
    processes will: forked from a warm parent where the run would start one (`warm.prepare`), else cold."""
    unknown = [t for t in tasks if not known.get(t.cell.key) and t.unsupported is None]  # such a task costs nothing
    if unknown:
        warm.prepare(processes(tasks), memory_limit, {})
    pilots: dict[tuple, Pilot] = {}
    pilot_s = 0.0
    for key, cell in pilot_cells([t.cell for t in unknown], cores).items():
        on_pilot(cell)
        source = next(t.cell.key for t in unknown if pilot_key(t.cell) == key)
        pilots[key] = run_pilot(cell, workloads[source], python_for(cell.framework), min(timeout, PILOT_TIMEOUT_S))
        pilot_s += pilots[key].duration_s
    likely = most = 0.0
    seen: set[tuple] = set()
    for task in tasks:
        if task.unsupported is not None:  # known before it starts: no process
            continue
        extras = extras_of(task, seen, loss_check, lambda cell: (*kept.has(cell, workloads[cell.key]), *stored(cell)))
        if known.get(task.cell.key):
            one, bound = from_earlier(known[task.cell.key], extras)
        else:
            one, bound = process_s(task, pilots[pilot_key(task.cell)], timer, extras, timeout)
        likely, most = likely + one, most + bound
    unsupported = {key: p.unsupported for key, p in pilots.items() if p.unsupported}
    unsupported |= {pilot_key(t.cell): t.unsupported for t in tasks if t.unsupported is not None}
    known_here = sum(1 for t in tasks if known.get(t.cell.key) and t.unsupported is None)
    return Estimate(likely, max(likely, most), len(pilots), pilot_s, known_here, unsupported)


def for_plan(plan: Plan, db: str, on_pilot: Callable[[Cell], None] = lambda cell: None,
             tasks: list[Task] | None = None, stored: list[CellRecord] = ()) -> Estimate:  # fmt: skip
    """How long the plan (or `tasks` of it: what a resumed run has left, `stored` its cells) will take: each cell's
    earlier processes on this machine where the store has them, a pilot step's model otherwise; the extras a resumed
    run's cells stored are not run again."""
    spec = plan.spec
    return estimate(
        plan.tasks if tasks is None else tasks, plan.workloads, known_durations(db, envinfo.fingerprint(plan.env)),
        timer=spec.timer, timeout=spec.timeout, loss_check=spec.loss_check, cores=plan.cores,
        python_for=interpreter_for, on_pilot=on_pilot, memory_limit=spec.max_memory, stored=stored_in(list(stored)),
    )  # fmt: skip


def known_durations(db: str, fingerprint: dict) -> dict[str, list[Earlier]]:
    """Cell key -> its processes in earlier runs on this machine, each its life and the extras it ran."""
    if not os.path.exists(db):
        return {}
    store = Store.open(db, create=False)
    try:
        runs = [r.id for r in store.runs() if envinfo.alike(r.fingerprint, fingerprint)]
        return {key: [Earlier.of(*life) for life in lives] for key, lives in store.lives(runs).items()}
    finally:
        store.close()
