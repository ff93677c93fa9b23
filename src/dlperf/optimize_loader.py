"""`dlperf optimize --data DIR`: after the mode search, the loader setting to feed the best mode with.

A loader setting is enough when the step waits less than INPUT_BOUND_MODERATE of its time for data, or when the step
with it reaches ENOUGH_OF_SYNTHETIC of the throughput of the same mode on synthetic data (measured in the same run:
the mode search's cell) while it waits under INPUT_BOUND_HIGH, that cell not disturbed (`report.data.enough`).
Settings are measured in order of `LoaderSetting.cost` (w0, w1, ... up to the cores, each +pin on a GPU; or those of
`--loaders`), and the search stops at the first that is enough: workers take cores and memory from the step. When
none is, and `--loaders` did not fix the list, the best of them with workers is tried with more prefetching and
persistent workers. The one chosen is what the view recommends of those measured
(`report.data.recommend`): the smallest whose step is not measurably slower than the fastest's, which the first
enough need not be (waiting less for data, its workers can slow the step more on a CPU's shared cores). Each setting
is a cell of the search's run, measured in `repeats` processes through the same launcher and store; it stops when the
budget left does not cover the next one, and says so. `recipe` is the script a recommendation prints: the workload's
parts, the loader setting chosen, the mode's lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dlperf.loaders import default_loaders, enough, setting
from dlperf.modes import preamble as mode_preamble
from dlperf.modes import recipe as mode_recipe
from dlperf.protocol import Cell
from dlperf.report.data import ENOUGH_RULE, baseline_doubts, dominates, recommend
from dlperf.report.fastest import long_run_s
from dlperf.runner.session import Budget, Session
from dlperf.runner.tasks import Task
from dlperf.spec import device_kind
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
    # its long run's throughput over the synthetic step's: their mean steps' ratio (`fastest.long_run_s`)
    of_synthetic: float | None = None
    verdict: str | None = None  # the input-bound verdict: "high", "moderate" or None
    enough: bool = False
    mean_s: float | None = None  # the mean step, what a long run pays (each wait for data): settings compare on it

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class LoaderChoice:
    """The loader search's answer: of the settings measured, the one `report.data.recommend` takes (`enough`: whether
    its loader keeps up with the step)."""

    mode: str
    synthetic_s: float | None  # the synthetic step's mean (`fastest.long_run_s`), as the trials' are held against it
    trials: list[LoaderTrial] = field(default_factory=list)
    chosen: LoaderTrial | None = None  # None: no setting measured

    @property
    def enough(self) -> bool:
        return bool(self.chosen and self.chosen.enough)

    @property
    def unread(self) -> LoaderTrial | None:
        """The first setting's failure where none tried measured and one failed (a folder of truncated JPEGs): the
        data was not read, and the search exits 1 saying why, as `run` does, not 0 with only the modes' answer."""
        failed = [t for t in self.trials if t.status == Status.FAILED]
        return failed[0] if failed and not any(t.status == Status.OK for t in self.trials) else None

    def to_json(self) -> dict[str, Any]:
        c = self.chosen
        return {
            "mode": self.mode,
            "synthetic_s": self.synthetic_s,
            "setting": c and c.setting,
            "enough": self.enough,
            "kwargs": setting(c.setting).torch_kwargs() if c else None,
            "median_s": c and c.median_s,
            "mean_s": c and c.mean_s,
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


def trial_of(cell: CellRecord, synthetic_s: float | None, judged: bool = True) -> LoaderTrial:
    """A measured loader cell held against the synthetic step (`synthetic_s`, its mean): is it enough? On the mean
    steps, a long run's: a bursty loader's median step leaves out the steps that wait for it. `judged` False: the
    synthetic step was disturbed (`report.data.baseline_doubts`), and only the wait says whether it is enough."""
    t = LoaderTrial(cell.loader, cell.status.value, cell.error, cell.median_s)
    if not cell.ok or not cell.median_s:
        return t
    t.mean_s = long_run_s(cell)
    t.wait_share = cell.data.wait_share if cell.data else None
    t.verdict = cell.data.verdict if cell.data else None
    t.of_synthetic = synthetic_s / t.mean_s if synthetic_s else None
    t.enough = enough(t.wait_share, t.mean_s, synthetic_s if judged else None)
    return t


def best_of(trials: list[LoaderTrial], with_workers: bool = False) -> LoaderTrial | None:
    """The fastest trial over a long run (its mean step) that measured (optionally only those with workers), None if
    none did: one the budget or its timeout stopped keeps the steps it took, but never waited for its data a whole
    step."""
    timed = [t for t in trials if t.status == "ok" and t.mean_s and (not with_workers or setting(t.setting).workers)]
    return min(timed, key=lambda t: t.mean_s, default=None)


@dataclass
class LoaderSearch:
    """The loader dimension of one search, for its best mode: each setting a cell of the search's session, measured
    while its budget covers one more."""

    session: Session
    budget: Budget
    synthetic: Cell  # the best mode's cell on synthetic data: what a setting is held against
    workload: dict  # its workload JSON, each loader cell's too
    repeats: int  # processes per setting
    loaders: tuple[str, ...] | None  # --loaders: the only settings tried; None: w0 up to the cores, then variants
    progress_factory: Callable
    notes: list[str]  # the search's notes, said in order
    trials: list[LoaderTrial] = field(default_factory=list)

    @property
    def mode(self) -> str:
        return self.synthetic.mode

    def run(self) -> LoaderChoice:
        synthetic = self.session.cell(self.synthetic.key)
        choice = LoaderChoice(self.mode, long_run_s(synthetic) if synthetic.ok else None, self.trials)
        if choice.synthetic_s is None:
            self.notes.append(f"loader: not searched: {self.mode} did not measure on synthetic data")
            return choice
        gpu = self.synthetic.device.split(":")[0] == DeviceKind.CUDA
        found = self._until_enough(candidates(self.session.cores, gpu, self.loaders), choice.synthetic_s)
        if found is None and self.loaders is None and (base := best_of(self.trials, with_workers=True)):
            found = self._until_enough(variants(base.setting), choice.synthetic_s)
        choice.chosen = self._recommended()
        self._note(choice)
        return choice

    def _until_enough(self, names: list[str], synthetic_s: float) -> LoaderTrial | None:
        """Measure `names` in order; the first that is enough, or None (all measured, or the budget ran out)."""
        for name in names:
            if any(t.setting == name for t in self.trials):
                continue
            needed = self.repeats * self.budget.per_process(self.mode)  # as long as its mode's processes so far
            if not self.budget.covers(needed):
                left = max(0.0, self.budget.left())
                self.notes.append(f"loader: {name} and after not measured: {needed_and_left(needed, left)} (raise "
                                  "--budget)")  # fmt: skip
                return None
            trial = self._measure(name, synthetic_s)
            self.trials.append(trial)
            if trial.status != Status.OK:
                self.notes.append(f"loader: {name} {trial.status}: {trial.error}")
            elif trial.enough:
                return trial
        return None

    def _measure(self, name: str, synthetic_s: float) -> LoaderTrial:
        """One loader cell of the best mode, in `repeats` processes: its trial."""
        cell = replace(self.synthetic, loader=name)
        self.session.add([cell], self.workload)
        self.session.measure([Task(cell, n) for n in range(self.repeats)], self.progress_factory, last=False)
        return trial_of(self.session.cell(cell.key), synthetic_s, not self._doubts())

    def _doubts(self) -> list[str]:
        """Why the synthetic step judges no setting by throughput (`report.data.baseline_doubts`), as the view."""
        return baseline_doubts(self.session.cell(self.synthetic.key))

    def _note(self, choice: LoaderChoice) -> None:
        c = choice.chosen
        if c is None:
            why = "none of those tried measured" if self.trials else "none tried"
            self.notes.append(f"loader: no setting recommended: {why}")
        elif not c.enough and (fed := [t.setting for t in self.trials if t.enough]):
            self.notes.append(self._not_taken(c, fed))
        elif not c.enough:
            wait = f"{100 * c.wait_share:.0f}%" if c.wait_share is not None else "unknown"
            doubts = self._doubts()
            disturbed = f"; the synthetic step was disturbed ({', '.join(doubts)})" if doubts else ""
            self.notes.append(
                f"loader: no setting measured was enough ({ENOUGH_RULE}{disturbed}); the one recommended, "
                f"{c.setting}, still waits {wait} of its step for data"
            )
            self.notes += [f"loader: {advice}" for advice in self._dominates()]

    def _not_taken(self, chosen: LoaderTrial, fed: list[str]) -> str:
        """Why the settings that were enough are not the one recommended: they waited less for data but stepped
        slower (on a CPU, their workers on the step's cores), or were not told apart from it (the smaller taken)."""
        slower = [name for name in recommend(*self._cells()).slower if name in fed]  # those not enough said apart
        said = [f"{name} waited less but stepped slower" for name in slower]
        said += [
            f"{name}, enough, was not told apart from it (the smaller is taken)" for name in fed if name not in slower
        ]
        wait = f"{100 * chosen.wait_share:.0f}%" if chosen.wait_share is not None else "an unmeasured share"
        return f"loader: {chosen.setting} recommended though it waits {wait} of its step for data: {'; '.join(said)}"

    def _recommended(self) -> LoaderTrial | None:
        """The trial the view would recommend (`report.data.recommend`): of those measured, the smallest whose step
        is not measurably slower than the fastest's. The search stops at the first enough, and that one, waiting
        less for data, can step slower than a smaller one measured before it (its workers on the step's cores)."""
        rec = recommend(*self._cells())
        return next((t for t in self.trials if t.setting == rec.setting), None)

    def _dominates(self) -> list[str]:
        """The view's word on it (`report.data.dominates`): data preparation dominates when even the fastest loader
        alone is slower than the synthetic step, with what would change it."""
        return dominates(*self._cells())

    def _cells(self) -> tuple[CellRecord | None, list[CellRecord]]:
        """The best mode's synthetic cell and its loader cells, smallest setting first, as the view groups them."""
        cells = [c for c in self.session.cells() if c.mode == self.mode]
        loaded = sorted((c for c in cells if c.loader), key=lambda c: setting(c.loader).cost)
        return next((c for c in cells if not c.loader), None), loaded


def faster_not_taken(chosen, results) -> list[str]:
    """Each mode the search timed faster than `chosen` (the answer's candidate) but could not recommend, and why: its
    loss check did not finish (the budget ran out), it no longer trains, or its interval does not exclude fp32's step.
    Without this, advise's answer read 'fp32' with no word of a bf16 timed at half its step. An interval that holds 1x
    is the reason before a loss check not run: optimize of small-convnet read 'did not take it: no loss check passed
    (not checked: 0.200 s per step is not faster than 0.158 s)' of a bf16 whose interval was 0.78-1.32x."""
    from dlperf.measure.units import seconds

    if not chosen.median_s:
        return []
    notes = []
    for c in results:
        if c.mode == chosen.mode or c.status != Status.OK or not c.median_s or c.median_s >= chosen.median_s:
            continue
        interval = c.ci_low is not None and c.ci_high is not None
        unsure = c.ci_low <= 1.0 if interval else c.told_apart is False  # not told apart: a check would not change it
        if c.loss_ok is False:
            why = f"it no longer trains ({c.loss_reason})" if c.loss_reason else "it no longer trains"
        elif c.loss_ok is None and not unsure:
            why = f"no loss check passed ({c.loss_reason})" if c.loss_reason else "its loss was not checked"
        elif interval:
            why = f"not reliably faster than fp32 eager (95% interval of the speed-up {c.ci_low:.2f}-{c.ci_high:.2f}x)"
        else:
            why = "not reliably faster than fp32 eager"
        notes.append(f"the mode search timed {c.mode} at {seconds(c.median_s)} a step, under {chosen.mode}'s "
                     f"{seconds(chosen.median_s)}, and did not take it: {why}")  # fmt: skip
    return notes


def needed_and_left(needed_s: float, left_s: float) -> str:
    """What a search's next cells need against the budget left: 'about 1.7 min needed, 0.3 min of the budget left',
    under a minute in seconds ('about 2 s needed, 1 s ...'), where '0.0 min needed' read as needing nothing. Two
    figures that round alike get a decimal more: '25 s needed, 25 s left' read as if it fitted."""
    left_s = max(0.0, left_s)

    def said(s: float, more: int) -> str:
        return f"{s / 60:.{1 + more}f} min" if s >= 60 else f"{s:.{more}f} s"

    need, left = next(((said(needed_s, d), said(left_s, d)) for d in range(3) if said(needed_s, d) != said(left_s, d)),
                      (said(needed_s, 0), said(left_s, 0)))  # fmt: skip
    return f"about {need} needed, {left} of the budget left"


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


def recipe(mode: str, device: str, workload: str, loader: LoaderChoice | None = None, data_dir: str | None = None,
           named: bool = False, threads: int | None = None) -> list[str]:  # fmt: skip
    """A runnable script that trains `workload` in `mode`: dlperf's own model, optimizer, loss and batch for it
    (`training_parts`: the user's factory, for a user workload, given `data_dir`, --data DIR, where the search had
    it), the loader setting chosen (`--data`), then the modes table's lines for `mode` (`named`: a dict of inputs,
    passed by name). `threads`: the CPU threads the search measured at, set as it set them (torch's default is
    every core)."""
    chosen = loader.chosen if loader else None
    folder = f", data_dir={data_dir!r}" if data_dir else ""
    threads_line = [f"torch.set_num_threads({threads})  # as dlperf measured it"] if threads else []
    return [
        *mode_preamble(mode),
        "import torch",
        *threads_line,
        "from dlperf import training_parts",
        "",
        "# the fp32 eager setting dlperf measured; in your own code, your model, optimizer, loss function and batch",
        "torch.manual_seed(0)  # the weights of dlperf's cells",
        f"model, optimizer, loss_fn, x, y = training_parts({workload!r}, {device!r}{folder})",
        "steps = 100",
        *(recipe_lines(chosen.setting, chosen.enough) if chosen else []),
        *mode_recipe(mode, device_kind(device), named=named),
    ]
