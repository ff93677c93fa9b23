"""The run being measured (`Session`), and the time a search may spend on it (`Budget`).

A `Session` is one run of the store while it is measured: its spec, each cell's workload, the cores. It is made by
creating a run (`dlperf run`: the plan's cells; a search: none yet) or by taking a stored one up again (`--resume`);
it adds cells, measures tasks through the sweep (`sweep.execute`), reads its own cells back, and ends. `dlperf run`,
`dlperf optimize`'s searches and `dlperf crossover` all measure through one; they keep only their policy.

A `Budget` is a search's clock, started when the search began, and its estimate of what the next processes cost,
from the processes the session has measured so far; `budget_check`, what `optimize`'s default budget gives each of its
candidates.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dlperf import envinfo
from dlperf.measure.stats import FEW_SAMPLES
from dlperf.measure.units import plural
from dlperf.measure.units import seconds as in_seconds
from dlperf.modes import Mode, compiles, mode_components
from dlperf.protocol import Cell
from dlperf.runner import sweep
from dlperf.runner.tasks import Task
from dlperf.spec import RunSpec
from dlperf.store import Store, spill
from dlperf.store.process import UNTIMED_EXTRAS, untimed_extras
from dlperf.store.records import CellRecord, PlannedCell, ProfileRecord
from dlperf.vocab import Status

COMPILE_GUESS_S = 90.0  # budget kept for a compiled process's compilation before a compiled one has run
FIRST_PROCESS_S = 60.0  # a process's guess before any has run


@dataclass
class Session:
    store: Store
    run_id: int
    spec: RunSpec
    workloads: dict[str, dict]  # cell key -> workload JSON
    cores: int
    deadline: float | None = None  # time.monotonic() at which a search's --budget runs out: no child outlives it
    forkable: dict = field(default_factory=dict)  # its processes that may fork: identity -> framework (`warm.prepare`)

    @classmethod
    def create(
        cls, store: Store, spec: RunSpec, env: dict, cores: int, argv: list[str],
        cells: list[Cell] = (), workloads: dict[str, dict] | None = None, made_by: str = "run",
    ) -> Session:  # fmt: skip
        """A new run leased to this process, `cells` pending (`workloads`: cell key -> workload JSON); a search
        starts with none and adds them as it goes. `made_by`: the command whose run it is (`run`, or a search's),
        kept with its environment for `api.searched_by`: the argv stored is a script's own where the API made it."""
        workloads = dict(workloads or {})
        env = {**env, "made_by": made_by}
        fingerprint = envinfo.fingerprint(env)
        run_id = store.create_run(spec.to_json(), env, fingerprint, argv, _pending(cells, workloads))
        return cls(store, run_id, spec, workloads, cores)

    @classmethod
    def resume(cls, store: Store, run_id: int, spec: RunSpec, cores: int) -> Session:
        """A stored run taken up again (its lease acquired by the caller), each cell training what it was planned to."""
        return cls(store, run_id, spec, {c.key: c.workload_spec for c in store.cells(run_id)}, cores)

    def add(self, cells: list[Cell], workload: dict) -> None:
        """More pending cells, each training `workload`: a search decides its cells as it goes."""
        chosen = {c.key: workload for c in cells}
        self.store.add_cells(self.run_id, _pending(cells, chosen))
        self.workloads.update(chosen)

    def measure(
        self, tasks: list[Task], progress_factory: Callable, *, last: bool = True,
        compile_timeout: float | None = None, to_profile: list[Cell] = (),
    ) -> list[Status]:  # fmt: skip
        """Measure `tasks` in a progress display of `progress_factory(items)`; their statuses. `last`: the run is
        complete after them, else it stays open for more. `compile_timeout`: these tasks' own --compile-timeout.
        `to_profile`: measured cells profiled first (`sweep.unprofiled`). Raises sweep.Interrupted."""
        if not (tasks or to_profile or last):
            return []
        run = self
        if compile_timeout is not None:  # a view of this session: its spec is not changed in place
            run = replace(self, spec=replace(self.spec, compile_timeout=compile_timeout))
        progress = progress_factory(len(to_profile) + len(tasks))
        with progress:
            return sweep.execute(run, tasks, progress, last=last, to_profile=to_profile)

    def warm_up(self, tasks: list[Task]) -> None:
        """Start now the warm parents `tasks` will fork from (none where fewer than two may fork): their imports
        overlap what comes before the first process (`dlperf run`'s predictions). Else `measure` starts them."""
        sweep.warm_up(self, tasks)

    def take_up_kept(self) -> int:
        """Store what a refusing store kept beside it for this run (`store/spill.py`); how many."""
        return sweep.take_up_kept(self)

    def remaining(self) -> list[Task]:
        """The processes of a resumed run not measured yet, in the order the plan gave them: neither stored nor kept
        beside a store that refused them (`take_up_kept` stores those)."""
        kept = {(k.key, k.repeat) for k in spill.kept(self.store.path, self.run_id, self.store.mark(self.run_id))}
        return sweep.remaining(
            [c.cell for c in self.cells()], self.spec.repeats, self.store.done_repeats(self.run_id) | kept
        )

    def unprofiled(self, tasks: list[Task]) -> list[Cell]:
        return sweep.unprofiled(self, tasks)

    def restate(self, key: str, status: Status, reason: str) -> None:
        """A measured cell stored again as its search reads it (`Store.restate`)."""
        self.store.restate(self.run_id, key, status, reason)

    # --- the store's reads of this run ------------------------------------------------------------------------------
    def cells(self) -> list[CellRecord]:
        return self.store.cells(self.run_id)

    def cell(self, key: str) -> CellRecord:
        return next(c for c in self.cells() if c.key == key)

    def samples(self, key: str) -> list[list[float]]:
        return self.store.samples(self.run_id, key)

    def durations(self) -> dict[str, list[float]]:
        """Cell key -> the seconds of each of its finished processes."""
        return self.store.durations([self.run_id])

    def lives(self) -> dict[str, list[tuple[float, dict[str, float]]]]:
        """Cell key -> the seconds of each of its finished processes and their time by phase (`Store.lives`)."""
        return self.store.lives([self.run_id])

    def profiles(self) -> dict[str, ProfileRecord]:
        return self.store.profiles(self.run_id)

    # --- its status --------------------------------------------------------------------------------------------------
    def reopen(self) -> None:
        """A resumed run is running again."""
        self.store.set_run_status(self.run_id, "running")

    def complete(self) -> None:
        self.store.set_run_status(self.run_id, "complete")

    def interrupted(self) -> str | None:
        """The run marked interrupted; why it could not be, where the store refused it (`sweep.mark_interrupted`)."""
        return sweep.mark_interrupted(self.store, self.run_id)


def _pending(cells: list[Cell], workloads: dict[str, dict]) -> list[PlannedCell]:
    """The store's pending cells, each with its workload."""
    return [PlannedCell(c, workloads[c.key]) for c in cells]


@dataclass
class Budget:
    """A search's time: `seconds` in all, counted from `started`; the cost of its next processes from the
    session's own so far."""

    seconds: float
    session: Session
    started: float = field(default_factory=time.monotonic)

    def spent(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.seconds - self.spent()

    def covers(self, seconds: float) -> bool:
        return seconds <= self.left()

    def text(self) -> str:
        """The budget as a person reads it, whatever unit --budget was given in: 60 s, 15 min, 2.5 min."""
        if self.seconds < 120:
            return f"{self.seconds:.3g} s"
        return f"{self.seconds / 60:.3g} min"

    def per_process(self, mode: str | None = None) -> float:
        """Seconds one more process of this search takes: the median of its processes so far that ran none of the
        untimed extras (where none has, of those that did, less them: `later`), `mode`'s own where the session has
        measured it (a loader setting of the best mode, the fp32 baseline's profile), else all of them."""
        lives = self.mode_lives()
        usual = usual_start([life for ls in lives.values() for life in ls])
        mine = lives.get(mode) or [life for ls in lives.values() for life in ls]
        return statistics.median(later(mine, usual)) if mine else FIRST_PROCESS_S

    def mode_lives(self) -> dict[str, list[tuple[float, dict[str, float]]]]:
        """Mode -> the lives (seconds, phases) of this session's processes of its cells, in the order stored."""
        mode_of = {c.key: c.mode for c in self.session.cells()}
        found: dict[str, list[tuple[float, dict[str, float]]]] = {}
        for key, lives in self.session.lives().items():
            found.setdefault(mode_of.get(key, Mode.FP32.value), []).extend(lives)
        return found

    def modes_s(self, modes: list[str], repeats: int) -> float:
        """Seconds to measure `modes` in `repeats` processes each, plus the baseline's extra process (`estimate_s`),
        each mode's processes as long as its own or those of the mode it builds on (`process_s`), each mode's first
        process its untimed extras as long as this search's took them (`extras_s`)."""
        lives = self.mode_lives()
        everyone = [life for ls in lives.values() for life in ls]
        usual = usual_start(everyone)
        return estimate_s(modes, {mode: later(ls, usual) for mode, ls in lives.items()}, repeats, extras_s(everyone))


def usual_start(lives: list[tuple[float, dict[str, float]]]) -> float:
    """The median start of these processes (phases' startup_s): a forked process's usual one, which the wait for a
    warm parent's import comes on top of (`later`)."""
    starts = [start for _, phases in lives if (start := phases.get("startup_s")) is not None]
    return statistics.median(starts) if starts else 0.0


def later(lives: list[tuple[float, dict[str, float]]], usual: float | None = None) -> list[float]:
    """The seconds of these processes (life, phases) that ran none of the untimed extras (a sibling group's later
    ones); where none did, of all of them less their extras. Each less a start longer than theirs usually is (`usual`,
    of the whole search where given: one mode's few processes do not say it): the wait for a warm parent's import of
    the framework, once a run (`runner/warm.py`). A first process's FLOP count and memory step (2-3 s of a fcn-r
    process at 1 thread) taken as every process's over-estimated the rest, as did the process that waited 15.4 s for
    the warm parent (0.1-0.2 s the others)."""
    usual = usual_start(lives) if usual is None else usual

    def bare(life: float, phases: dict[str, float]) -> float:
        waited = max(0.0, (phases.get("startup_s") or 0.0) - usual)
        return max(0.0, life - sum(untimed_extras(phases).values()) - waited)

    plain = [bare(life, phases) for life, phases in lives if not untimed_extras(phases)]
    return plain or [bare(life, phases) for life, phases in lives]


def extras_s(lives: list[tuple[float, dict[str, float]]]) -> float:
    """Seconds of the untimed extras a new cell's first process runs: each as long as these processes that ran it
    took it (the median); nothing for one none of them ran (kept from an earlier run, or never asked)."""
    ran = [untimed_extras(phases) for _, phases in lives]
    found = [[r[name] for r in ran if name in r] for name in UNTIMED_EXTRAS]
    return sum(statistics.median(seconds) for seconds in found if seconds)


def estimate_s(modes: list[str], durations: dict[str, list[float]], repeats: int, extras: float = 0.0) -> float:
    """Seconds to measure `modes` in `repeats` processes each, plus the baseline's extra process (fp32's), from the
    process durations measured so far (mode -> seconds: `process_s`), and `extras` once for each mode (its first
    process's untimed extras)."""
    total = process_s(Mode.FP32.value, durations)  # the baseline's extra process
    for mode in modes:
        total += repeats * process_s(mode, durations) + extras
    return total


def process_s(mode: str, durations: dict[str, list[float]]) -> float:
    """Seconds of one process of `mode`, from the durations of this search's processes so far (mode -> seconds): its
    own where measured; else those of the measured mode it builds on (the most of its components: bf16 for
    bf16+channels_last, else the fp32 baseline), where its step is (every mode was charged the eager processes'
    median, fp32's mostly: a slow-stepping best mode's candidates were charged a fast one's). A compiled mode takes
    what this search's compiled processes took, once there are some; before, the mode it builds on's plus
    COMPILE_GUESS_S. (Guessing on after compile was measured kept a search whose first round chose compile from every
    later round: 9.5 min wanted for two candidates whose processes took 30 s.)"""
    if durations.get(mode):
        return statistics.median(durations[mode])
    compiled = [d for m, ds in durations.items() if compiles(m) for d in ds]
    if compiles(mode) and compiled:
        return statistics.median(compiled)
    parts = set(mode_components(mode))
    bases = [m for m, ds in durations.items() if ds and not compiles(m) and set(mode_components(m)) <= parts]
    base = max(bases, key=lambda m: len(mode_components(m)), default=Mode.FP32.value)
    eager_ones = [d for m, ds in durations.items() if not compiles(m) for d in ds]
    found = durations.get(base) or eager_ones or compiled
    eager = statistics.median(found) if found else FIRST_PROCESS_S
    return eager + (COMPILE_GUESS_S if compiles(mode) else 0.0)


def budget_check(budget_s: float, step_s: float, candidates: int, repeats: int, process_s: float, flags: bool = True
                 ) -> str | None:  # fmt: skip
    """What the default budget gives each candidate at `step_s` per step, and the budget that gives FEW_SAMPLES
    timed steps each, when it gives fewer; None when it gives enough. Each of the candidates and the baseline takes
    `repeats` processes of `process_s` (start, build, warm-up) plus its timed steps. Said as `dlperf optimize`'s
    --budget in minutes (`flags`), else as a Python caller's budget_s in seconds."""
    each = repeats * process_s
    steps = max(0, int((budget_s / (candidates + 1) - each) / step_s))
    if steps >= FEW_SAMPLES:
        return None
    needed_min = math.ceil((candidates + 1) * (each + FEW_SAMPLES * step_s) / 60)
    each_text = f"{plural(candidates, 'candidate')}, {plural(repeats, 'process', 'es')} each"
    given, needed = (f"--budget {budget_s / 60:g}", f"--budget {needed_min}") if flags else \
        (f"budget_s={budget_s:g}", f"budget_s={needed_min * 60}")  # fmt: skip
    return (f"the default {given} gives about {steps} timed steps per candidate at {in_seconds(step_s)} per step "
            f"({each_text}): {needed} gives {FEW_SAMPLES}")  # fmt: skip
