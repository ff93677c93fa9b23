"""`dlperf optimize --data DIR`: after the mode search, the smallest loader setting that feeds the best mode enough.

A loader setting is enough when the step waits less than INPUT_BOUND_MODERATE of its time for data, or when the step
with it reaches ENOUGH_OF_SYNTHETIC of the throughput of the same mode on synthetic data (measured in the same run:
the mode search's cell). Settings are measured in order of `LoaderSetting.cost` (w0, w1, ... up to the cores, each
+pin on a GPU; or those of `--loaders`), and the search stops at the first that is enough: workers take cores and
memory from the step, so the smallest is what to recommend. When none is, and `--loaders` did not fix the list, the
best of them with workers is tried with more prefetching and persistent workers. Each setting is a cell of the
search's run, measured in `repeats` processes through the same launcher and store; it stops when the budget left
does not cover the next one, and says so.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dlperf.loaders import ENOUGH_OF_SYNTHETIC, INPUT_BOUND_MODERATE, default_loaders, enough, setting
from dlperf.report.data import dominates
from dlperf.runner.tasks import Task
from dlperf.store.records import PlannedCell
from dlperf.vocab import DeviceKind, Status

if TYPE_CHECKING:
    from dlperf.store.records import CellRecord

VARIANT_PREFETCH = 4  # batches per worker of the prefetch variants: twice torch's default


@dataclass
class LoaderTrial:
    """One loader setting measured for the best mode."""

    setting: str
    status: str
    error: str | None = None
    median_s: float | None = None
    wait_share: float | None = None  # of the step, waiting for data
    of_synthetic: float | None = None  # its throughput over the synthetic step's: synthetic median / this median
    verdict: str | None = None  # the input-bound verdict: "high", "moderate" or None
    enough: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class LoaderChoice:
    """The loader search's answer: the first setting that was enough, else the best measured (`enough` False)."""

    mode: str
    synthetic_s: float | None
    trials: list[LoaderTrial] = field(default_factory=list)
    chosen: LoaderTrial | None = None  # None: no setting measured

    @property
    def enough(self) -> bool:
        return bool(self.chosen and self.chosen.enough)

    def to_json(self) -> dict[str, Any]:
        c = self.chosen
        return {
            "mode": self.mode,
            "synthetic_s": self.synthetic_s,
            "setting": c and c.setting,
            "enough": self.enough,
            "kwargs": setting(c.setting).torch_kwargs() if c else None,
            "median_s": c and c.median_s,
            "wait_share": c and c.wait_share,
            "of_synthetic": c and c.of_synthetic,
            "tried": [t.to_json() for t in self.trials],
        }


def candidates(cores: int, gpu: bool, given: tuple[str, ...] | None = None) -> list[str]:
    """The settings to try, smallest first: those of `--loaders`, or w0 up to the cores (each +pin on a GPU)."""
    names = given if given is not None else default_loaders(cores, gpu)
    return [s.name for s in sorted((setting(n) for n in names), key=lambda s: s.cost)]


def variants(name: str) -> list[str]:
    """More prefetching and persistent workers on top of `name`, smallest first; none without workers."""
    s = setting(name)
    if s.workers == 0:
        return []
    out = [
        replace(s, prefetch=VARIANT_PREFETCH),
        replace(s, persistent=True),
        replace(s, prefetch=VARIANT_PREFETCH, persistent=True),
    ]
    return [v.name for v in sorted(out, key=lambda v: v.cost) if v != s]


def trial_of(cell: CellRecord, synthetic_s: float | None) -> LoaderTrial:
    """A measured loader cell held against the synthetic step: is it enough?"""
    t = LoaderTrial(cell.loader, cell.status.value, cell.error, cell.median_s)
    if not cell.ok or not cell.median_s:
        return t
    t.wait_share = cell.data.wait_share if cell.data else None
    t.verdict = cell.data.verdict if cell.data else None
    t.of_synthetic = synthetic_s / cell.median_s if synthetic_s else None
    t.enough = enough(t.wait_share, cell.median_s, synthetic_s)
    return t


def best_of(trials: list[LoaderTrial], with_workers: bool = False) -> LoaderTrial | None:
    """The fastest measured trial (optionally only those with workers), None if none measured."""
    timed = [t for t in trials if t.median_s and (not with_workers or setting(t.setting).workers)]
    return min(timed, key=lambda t: t.median_s, default=None)


class LoaderSearch:
    """The loader dimension of one search, for its best `mode`; measures through the searcher's run and store (an
    `optimize.Searcher`: its options, base cell, workload, context, notes and process runner)."""

    def __init__(self, searcher: Any, mode: str, start: float) -> None:
        self.s, self.mode, self.start = searcher, mode, start
        self.trials: list[LoaderTrial] = []

    def run(self) -> LoaderChoice:
        synthetic = next(c for c in self.s.store.cells(self.s.run_id) if c.mode == self.mode and not c.loader)
        choice = LoaderChoice(self.mode, synthetic.median_s if synthetic.ok else None, self.trials)
        if choice.synthetic_s is None:
            self.s.notes.append(f"loader: not searched: {self.mode} did not measure on synthetic data")
            return choice
        device = self.s.base_cell.device
        gpu = device.split(":")[0] == DeviceKind.CUDA
        first = candidates(self.s.ctx.cores, gpu, self.s.opts.loaders)
        found = self._until_enough(first, choice.synthetic_s)
        if found is None and self.s.opts.loaders is None and (base := best_of(self.trials, with_workers=True)):
            found = self._until_enough(variants(base.setting), choice.synthetic_s)
        choice.chosen = found or best_of(self.trials)
        self._note(choice)
        return choice

    def _until_enough(self, names: list[str], synthetic_s: float) -> LoaderTrial | None:
        """Measure `names` in order; the first that is enough, or None (all measured, or the budget ran out)."""
        for name in names:
            if any(t.setting == name for t in self.trials):
                continue
            needed, left = self._per_setting(), self.s.opts.budget_s - (time.monotonic() - self.start)
            if needed > left:
                self.s.notes.append(f"loader: {name} and after not measured: about {needed / 60:.1f} min needed, "
                                    f"{max(0.0, left) / 60:.1f} min of the budget left (raise --budget)")  # fmt: skip
                return None
            trial = self._measure(name, synthetic_s)
            self.trials.append(trial)
            if trial.status != Status.OK:
                self.s.notes.append(f"loader: {name} {trial.status}: {trial.error}")
            elif trial.enough:
                return trial
        return None

    def _measure(self, name: str, synthetic_s: float) -> LoaderTrial:
        """One loader cell of the best mode, in `repeats` processes: its trial."""
        cell = replace(self.s.base_cell, mode=self.mode, loader=name)
        self.s.store.add_cells(self.s.run_id, [PlannedCell(cell, self.s.workload)])
        self.s.ctx.workloads[cell.key] = self.s.workload
        self.s._execute([Task(cell, n) for n in range(self.s.opts.repeats)])
        record = next(c for c in self.s.store.cells(self.s.run_id) if c.key == cell.key)
        return trial_of(record, synthetic_s)

    def _per_setting(self) -> float:
        """Seconds one loader setting takes: `repeats` processes as long as this search's so far."""
        durations = [d for ds in self.s.store.durations([self.s.run_id]).values() for d in ds]
        return self.s.opts.repeats * (statistics.median(durations) if durations else 60.0)

    def _note(self, choice: LoaderChoice) -> None:
        c = choice.chosen
        if c is None:
            why = "none of those tried measured" if self.trials else "none tried"
            self.s.notes.append(f"loader: no setting recommended: {why}")
        elif not c.enough:
            wait = f"{100 * c.wait_share:.0f}%" if c.wait_share is not None else "unknown"
            self.s.notes.append(
                f"loader: no setting measured was enough (data wait under {100 * INPUT_BOUND_MODERATE:.0f}% of the "
                f"step, or {100 * ENOUGH_OF_SYNTHETIC:.0f}% of the synthetic step's throughput); the best, "
                f"{c.setting}, still waits {wait} of its step for data"
            )
            self.s.notes += [f"loader: {advice}" for advice in self._dominates()]

    def _dominates(self) -> list[str]:
        """The view's word on it (`report.data.dominates`): data preparation dominates when even the fastest loader
        alone is slower than the synthetic step, with what would change it."""
        cells = [c for c in self.s.store.cells(self.s.run_id) if c.mode == self.mode]
        loaded = [c for c in cells if c.loader]
        return dominates(next((c for c in cells if not c.loader), None), loaded)


def recipe_lines(name: str, enough: bool) -> list[str]:
    """The loader setting as comment lines of a recipe (the recipe trains on one batch; a user's loop takes x, y
    from this loader each step, and with pinned memory moves them with `x.to(device, non_blocking=True)`)."""
    s = setting(name)
    kwargs = dataloader_call(name).removeprefix("DataLoader(").removesuffix(")")
    which = "enough" if enough else "the best measured, not enough"
    return [
        f"# the input pipeline dlperf measured ({name}: {which}); take x, y from it each step"
        + (", moved with x.to(device, non_blocking=True)" if s.pin else ""),
        f"# loader = torch.utils.data.DataLoader(dataset, batch_size=..., shuffle=True, {kwargs})",
    ]


def dataloader_call(name: str) -> str:
    """`DataLoader(num_workers=2, pin_memory=True)`: the setting as the call a user writes."""
    return f"DataLoader({', '.join(f'{k}={v!r}' for k, v in setting(name).torch_kwargs().items())})"
