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
those this process will run, each as long as it took them. With --profile each cell has one more process after its
timed ones: as long as its earlier profiles here, or its pilot's fixed part and the warm-up and profiled steps.

A process's start depends on how it starts (`runner/warm.py`): forked from a warm parent (a fraction of a second), or
cold (the interpreter and the framework's imports), and a run's first forked process waits for its warm parent's
imports, once a run and framework. Each process's start (an earlier one's, a pilot's) is taken out of its life, the
wait told apart (`told_apart`), and each new process is charged the start this machine's processes took its way
(`Starts`), the parent's once. Charging every process the life of one that waited (a cell's one earlier process, the
first pilot) put 59 s on a sweep that took 20.

The step time at t threads is the pilot's scaled by (pilot threads / t): linear scaling, which errs long where a
sweep spends most of its time (one thread). A pilot that fails or times out costs its cells what it cost itself.
A user once got "2.7 min" for a sweep that took 31: a fixed guess per cell knew nothing of a 12x slower bf16 step.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace

from dlperf import envinfo
from dlperf.measure.timer import TimerConfig
from dlperf.modes import changes_arithmetic
from dlperf.plan import Plan
from dlperf.protocol import Cell, CellTask
from dlperf.runner import collect, kept, warm
from dlperf.runner.launch import launch
from dlperf.runner.profile import fitted_steps
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
    start_s: float | None = None  # its own start, part of fixed_s (`Earlier.start_s`); None: not told
    waited_s: float = 0.0  # the warm parent's start it waited for, part of fixed_s (the dry run's first forked pilot)
    started: str | None = None  # "warm" or "cold", as the run's process will
    phases: dict = field(default_factory=dict, compare=False)  # its time by phase (`collect.phases`)
    failed: str | None = None  # the pilot failed or timed out: why, as the run's cell would be said to


@dataclass(frozen=True)
class Estimate:
    seconds: float  # the likely time
    at_most_s: float  # if every warm-up and timed loop runs to --max-time (each process capped by --timeout)
    pilots: int  # pilot processes run for it
    pilot_s: float  # their wall time
    known: int  # processes estimated from earlier runs on this machine
    unsupported: dict[tuple, str] = field(default_factory=dict)  # pilot key -> why its cells will be unsupported
    profiles: int = 0  # profile processes counted (`run --profile`: one a cell, after its timed ones)
    profiles_known: int = 0  # of them, estimated from earlier profiles of the cell here
    failed: dict[tuple, str] = field(default_factory=dict)  # pilot key -> why its pilot failed or timed out


@dataclass(frozen=True)
class Earlier:
    """One earlier process of a cell on this machine: its whole life, the untimed extras it ran, by their seconds
    (its stored phases: `collect.phases`), and its start: its own (the interpreter or the fork, dlperf's and the
    framework's imports) and the wait for the warm parent it forked from, with how it started."""

    duration_s: float
    extras_s: dict[str, float] = field(default_factory=dict)  # EXTRA_PHASES' names
    start_s: float | None = None  # its own start, the wait left out; None: its phases do not say
    waited_s: float = 0.0  # the warm parent's start it waited for (a run's first forked process: `told_apart`)
    started: str | None = None  # "warm" (forked) or "cold"; None where not recorded

    @classmethod
    def of(cls, duration_s: float, phases: dict[str, float], started: str | None = None,
           start: tuple[float | None, float] = (None, 0.0)) -> Earlier:  # fmt: skip
        ran = {name: phases[phase] for name, phase in EXTRA_PHASES.items() if phases.get(phase) is not None}
        return cls(duration_s, ran, *start, started)


def from_earlier(earlier: list[Earlier], extras: list[str], start_s: float | None = None) -> tuple[float, float]:
    """(likely, at most) seconds of a process from its cell's earlier ones here: their lives less the extras each
    ran, plus the `extras` this one will run, each as long as it took them (nothing where none of them ran it). A
    cell's first process that counted the FLOPs and the memory step is no guide to one that takes them kept.
    `start_s`: this process's start (`Starts`), in place of each one's own and its wait for a warm parent, which a run
    waits once (`estimate` charges it so); None: each one's start as it was."""
    swap = start_s is not None and all(e.start_s is not None for e in earlier)
    bare = [max(0.0, e.duration_s - sum(e.extras_s.values()) - (e.start_s + e.waited_s if swap else 0.0))
            for e in earlier]  # fmt: skip
    runs = [[e.extras_s[name] for e in earlier if name in e.extras_s] for name in extras]
    extra = sum(statistics.median(found) for found in runs if found) + (start_s if swap else 0.0)
    return statistics.median(bare) + extra, max(bare) + extra


def own_start(phases: dict[str, float | None] | None) -> float | None:
    """A process's start by its phases: to its first event (the interpreter, or the fork and any wait for the warm
    parent, and dlperf's imports), then the framework's import; None where not stored."""
    startup, framework = (phases or {}).get("startup_s"), (phases or {}).get("framework_s")
    return None if startup is None or framework is None else startup + framework


def told_apart(rows: list[tuple[Hashable, str | None, dict]]) -> list[tuple[float | None, float]]:
    """(its own start, its wait for a warm parent's start) of each process of `rows` ((its run and framework, how it
    started, its phases), each run's in the order they started). A run's first process forked from its framework's
    warm parent waits for that parent's imports (`runner/warm.py`); its start beyond a forked process's usual one
    (the median of the others forked) is that wait. The dry run's pilots are such a run."""
    first: dict[Hashable, int] = {}
    for i, (group, how, _) in enumerate(rows):
        if how == "warm":
            first.setdefault(group, i)
    waiting = set(first.values())
    forks = [s for i, (_, how, phases) in enumerate(rows) if how == "warm" and i not in waiting
             and (s := own_start(phases)) is not None]  # fmt: skip
    usual = statistics.median(forks) if forks else 0.0
    found = []
    for i, (_, _, phases) in enumerate(rows):
        start = own_start(phases)
        waited = max(0.0, start - usual) if i in waiting and start is not None else 0.0
        found.append((None if start is None else start - waited, waited))
    return found


@dataclass(frozen=True)
class Starts:
    """How long a process's start takes here (a framework's): forked from a warm parent, cold, and the warm parent's
    own start, which a run's first forked process waits for; None where no process here said."""

    warm_s: float | None = None
    cold_s: float | None = None
    parent_s: float | None = None

    @classmethod
    def of(cls, earlier: list[Earlier]) -> Starts:
        def median(values: list[float]) -> float | None:
            return statistics.median(values) if values else None

        own = [(e.started, e.start_s) for e in earlier if e.start_s is not None]
        return cls(median([s for how, s in own if how == "warm"]), median([s for how, s in own if how == "cold"]),
                   median([e.waited_s for e in earlier if e.waited_s > 0]))  # fmt: skip

    def of_process(self, forks: bool) -> float | None:
        return self.warm_s if forks else self.cold_s


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
    failed = f"{m.status}: {m.error}" if m.status in (Status.FAILED, Status.TIMEOUT) else None
    return Pilot(step_s, max(0.0, life - sum(steps)), cell.threads, life, why, own_start(m.detail.phases), 0.0,
                 launched.child.started, m.detail.phases or {}, failed)  # fmt: skip


def run_pilots(cells: list[Cell], workloads: dict[str, dict], cores: int, python_for: Callable[[str], str],
               timeout: float, on_pilot: Callable[[Cell], None]) -> dict[tuple, Pilot]:  # fmt: skip
    """The pilots of `cells` (`pilot_cells`), one after another, each its start told from its wait (`told_pilots`)."""
    pilots: dict[tuple, Pilot] = {}
    for key, cell in pilot_cells(cells, cores).items():
        on_pilot(cell)
        source = next(c.key for c in cells if pilot_key(c) == key)
        pilots[key] = run_pilot(cell, workloads[source], python_for(cell.framework), timeout)
    return told_pilots(pilots)


def told_pilots(pilots: dict[tuple, Pilot]) -> dict[tuple, Pilot]:
    """The pilots, in the order they ran, each its own start told from its wait for a warm parent (`told_apart`):
    they start as a run's processes do, the first forked one waiting for its framework's parent."""
    told = told_apart([(key[1], p.started, p.phases) for key, p in pilots.items()])
    pairs = zip(pilots.items(), told, strict=True)
    return {key: replace(p, start_s=own, waited_s=waited) for (key, p), (own, waited) in pairs}


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


def process_s(task: Task, pilot: Pilot, timer: TimerConfig, extras: list[str], timeout: float,
              start_s: float | None = None) -> tuple[float, float]:  # fmt: skip
    """(likely, at most) seconds of one process of `task`'s cell, from its pilot; `start_s`: this process's start
    (`Starts`), in place of the pilot's own and its wait for a warm parent (None: the pilot's as it was)."""
    if pilot.step_s is None:
        return pilot.fixed_s, pilot.fixed_s
    step, fixed = scaled(pilot, task.cell, start_s)
    likely, most = steps_s(step, timer)
    extra = fixed + sum(EXTRA_STEPS[e] for e in extras) * step + (DDP_EXTRA_S if task.cell.nproc else 0.0)
    return min(timeout, likely + extra), min(timeout, most + extra)


def scaled(pilot: Pilot, cell: Cell, start_s: float | None) -> tuple[float, float]:
    """(step, fixed) seconds of a process of `cell` from its pilot: the pilot's step at the cell's threads, and its
    fixed part with `start_s` in place of the pilot's own start and its wait for a warm parent (None: as it was)."""
    assert pilot.step_s is not None
    step = pilot.step_s * pilot.threads / max(1, cell.threads) if cell.device == "cpu" else pilot.step_s
    fixed = pilot.fixed_s
    if start_s is not None and pilot.start_s is not None:
        fixed = max(0.0, fixed - pilot.start_s - pilot.waited_s) + start_s
    return step, fixed


def profile_process_s(cell: Cell, pilot: Pilot, timer: TimerConfig, profile_steps: int, timeout: float,
                      start_s: float | None = None) -> float:  # fmt: skip
    """Seconds of `cell`'s profile process from its pilot: the pilot's fixed part (building, compiling), then the
    warm-up and profiled steps fitted to --max-time at the pilot's step (`runner/profile.fitted_steps`). What the
    profiler adds to each step and the trace's writing are not known before a profile here; an estimate after one
    takes its stored life (`known_profiles`)."""
    if pilot.step_s is None:
        return pilot.fixed_s
    step, fixed = scaled(pilot, cell, start_s)
    warmup, steps = fitted_steps(profile_steps, timer.max_time, step)
    return min(timeout, fixed + (warmup + steps) * step)


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
    if loss_check and task.repeat == 0 and changes_arithmetic(task.cell.mode) and "loss_check" not in found:
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
    profiles: Sequence[Cell] = (),
    profile_steps: int = 5,
    profiled: dict[str, list[float]] | None = None,
) -> Estimate:
    """The sweep's time: `known` (cell key -> its earlier processes here) where there is one, a pilot's model
    otherwise; each cell's first process without the figures kept from an earlier run (`kept.has`) or stored in the
    run being resumed (`stored`: `stored_in`). `workloads`: cell key -> workload JSON. `profiles`: the cells the run
    profiles, one more process each (`profiled`: cell key -> its earlier profile processes' lives here; else
    `profile_process_s`). The pilots start as the run's processes will: forked where the run's are (`warm.prepare`)."""
    profiled, live = profiled or {}, [t.cell for t in tasks if t.unsupported is None]  # an unsupported task: no cost
    unknown = [c for c in live if not known.get(c.key)] + [c for c in profiles if not profiled.get(c.key)]
    if unknown:
        warm.prepare(processes(tasks, to_profile=profiles), memory_limit, {})
    pilots = run_pilots(unknown, workloads, cores, python_for, min(timeout, PILOT_TIMEOUT_S), on_pilot)
    starts, forks, waited = starts_here(known, pilots), forking([*live, *profiles], memory_limit), set()
    likely = most = 0.0
    seen: set[tuple] = set()
    for task in tasks:
        if task.unsupported is not None:  # known before it starts: no process
            continue
        extras = extras_of(task, seen, loss_check, lambda cell: (*kept.has(cell, workloads[cell.key]), *stored(cell)))
        framework = task.cell.framework
        fork = framework in forks and warm.why_cell_cold(task.cell, memory_limit) is None
        start = starts.get(framework, Starts()).of_process(fork)
        if known.get(task.cell.key):
            one, bound = from_earlier(known[task.cell.key], extras, start)
        else:
            one, bound = process_s(task, pilots[pilot_key(task.cell)], timer, extras, timeout, start)
        if fork and start is not None and framework not in waited:  # its first forked process waits for the parent
            waited.add(framework)
            parent = starts[framework].parent_s or 0.0
            one, bound = one + parent, bound + parent
        likely, most = likely + one, most + bound
    for cell in profiles:  # each after its cell's timed processes: the parent's start is waited for by then
        if earlier := profiled.get(cell.key):
            likely, most = likely + statistics.median(earlier), most + max(earlier)
        elif not (pilot := pilots[pilot_key(cell)]).unsupported:  # an unsupported cell is not measured, so not profiled
            fork = cell.framework in forks and warm.why_cell_cold(cell, memory_limit) is None
            one = profile_process_s(cell, pilot, timer, profile_steps, timeout, starts[cell.framework].of_process(fork))
            likely, most = likely + one, most + one
    unsupported = {key: p.unsupported for key, p in pilots.items() if p.unsupported}
    pilot_s = sum(p.duration_s for p in pilots.values())
    unsupported |= {pilot_key(t.cell): t.unsupported for t in tasks if t.unsupported is not None}
    known_here = sum(1 for t in tasks if known.get(t.cell.key) and t.unsupported is None)
    profiles_known = sum(1 for cell in profiles if profiled.get(cell.key))
    return Estimate(likely, max(likely, most), len(pilots), pilot_s, known_here, unsupported, len(profiles),
                    profiles_known, {key: p.failed for key, p in pilots.items() if p.failed})  # fmt: skip


def for_plan(plan: Plan, db: str, on_pilot: Callable[[Cell], None] = lambda cell: None, tasks: list[Task] | None = None,
             stored: list[CellRecord] = (), to_profile: list[Cell] = ()) -> Estimate:  # fmt: skip
    """How long the plan (or `tasks` of it: what a resumed run has left, `stored` its cells, `to_profile` the
    profiles an interrupt cut off) will take: each cell's earlier processes on this machine where the store has them,
    a pilot step's model otherwise; the extras a resumed run's cells stored are not run again."""
    spec, tasks = plan.spec, plan.tasks if tasks is None else tasks
    fingerprint = envinfo.fingerprint(plan.env)
    profiles = [*to_profile, *(t.cell for t in tasks if spec.profile and t.unsupported is None
                               and t.repeat == spec.repeats - 1)]  # fmt: skip
    return estimate(
        tasks, plan.workloads, known_durations(db, fingerprint, spec.timer), timer=spec.timer, timeout=spec.timeout,
        loss_check=spec.loss_check, cores=plan.cores, python_for=interpreter_for, on_pilot=on_pilot,
        memory_limit=spec.max_memory, stored=stored_in(list(stored)), profiles=profiles,
        profile_steps=spec.profile_steps, profiled=known_profiles(db, fingerprint) if profiles else {},
    )  # fmt: skip


def known_durations(db: str, fingerprint: dict, timer: TimerConfig) -> dict[str, list[Earlier]]:
    """Cell key -> its processes in earlier runs on this machine that timed their steps as `timer` does (a run of
    `--min-time 20` is no guide to one of `--max-time 1`), each its life, the extras it ran and its start (its own,
    and its wait for a warm parent: `told_apart`)."""
    if not os.path.exists(db):
        return {}
    store = Store.open(db, create=False)
    try:
        runs = [r.id for r in store.runs() if envinfo.alike(r.fingerprint, fingerprint) and timed_alike(r.spec, timer)]
        rows = store.started_lives(runs)
    finally:
        store.close()
    told = told_apart([((run, framework_of(key)), how, phases) for run, key, _, phases, how in rows])
    found: dict[str, list[Earlier]] = {}
    for (_, key, duration, phases, how), start in zip(rows, told, strict=True):
        found.setdefault(key, []).append(Earlier.of(duration, phases, how, start))
    return found


def timed_alike(spec: dict, timer: TimerConfig) -> bool:
    """Whether a stored run's spec timed its steps with `timer`'s settings (a setting it does not record, as an older
    dlperf stored it, taken as `timer`'s)."""
    stored = spec.get("timer") or {}
    return all(stored.get(name, value) == value for name, value in asdict(timer).items())


def known_profiles(db: str, fingerprint: dict) -> dict[str, list[float]]:
    """Cell key -> the lives of its profile processes in earlier runs on this machine (those that profiled it)."""
    if not os.path.exists(db):
        return {}
    store = Store.open(db, create=False)
    try:
        found: dict[str, list[float]] = {}
        for run in (r for r in store.runs() if envinfo.alike(r.fingerprint, fingerprint)):
            for key, p in store.profiles(run.id).items():
                if p.status is Status.OK and p.duration_s is not None:
                    found.setdefault(key, []).append(p.duration_s)
        return found
    finally:
        store.close()


def framework_of(key: str) -> str:
    """The framework of a cell by its key (`protocol.Cell.key`: workload|framework|device|threads|mode...)."""
    return key.split("|")[1] if key.count("|") >= 1 else ""


def forking(cells: Iterable[Cell], memory_limit: int | None) -> set[str]:
    """The frameworks whose processes (`cells`: each one's cell) fork from a warm parent: two or more that may
    (`warm.prepare`)."""
    may = Counter(cell.framework for cell in cells if warm.why_cell_cold(cell, memory_limit) is None)
    return {framework for framework, n in may.items() if n >= 2}


def starts_here(known: dict[str, list[Earlier]], pilots: dict[tuple, Pilot]) -> dict[str, Starts]:
    """Each framework's starts on this machine, from every earlier process here and the pilots just run."""
    by: dict[str, list[Earlier]] = {}
    for key, earlier in known.items():
        by.setdefault(framework_of(key), []).extend(earlier)
    for key, p in pilots.items():
        by.setdefault(key[1], []).append(Earlier(p.duration_s, {}, p.start_s, p.waited_s, p.started))
    return {framework: Starts.of(earlier) for framework, earlier in by.items()}
