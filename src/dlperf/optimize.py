"""`dlperf optimize`: the fastest training mode for one workload on one device, found by measuring.

The mode space (precision x memory format x optimizer implementation x compilation x checkpointing; on CUDA also
TF32 and CUDA graphs) is too large to measure whole, many combinations compiled. So it is searched greedily, one
dimension at a time: each round measures the best mode so far plus each option of the next dimension, and an option
is kept only when it is reliably faster than the best so far. Options that cannot apply are pruned before anything
runs (channels_last without an image input, CUDA-only options on a CPU); the rest are measured, and a mode that turns
out not to apply is recorded as unsupported, never as an error.

Every candidate is a cell of one run, measured through the same plan, launch and store as `dlperf run`, each in
`repeats` fresh processes. The fp32 eager baseline gets one more process every round, so its spread covers the whole
search and every speed-up is over a baseline measured in the same run. A speed-up counts only when it is told apart
(`report.fastest.faster`, the views' rule: its 95% interval excludes 1; a side of too few steps for one is judged on the
medians) and the gain is at least MIN_GAIN, and only for a mode whose loss check passed: a faster mode that no
longer learns is rejected with the reason.

The order of the rounds follows what bounds the step (`--order verdict`, the default): the fp32 baseline is profiled
once, in an untimed child after its first timed process (stored in the run's profiles table, as `run --profile`
does), and the groups holding a mode that addresses its verdict's bound go first (`search_order`). A profile that
could not be taken falls back to SEARCH_ORDER, said in the notes; `--order fixed` keeps SEARCH_ORDER without profiling.
The budget bounds the whole search, planning and profile included: no process runs past it (`Session.deadline`);
beyond it, BUDGET_ALLOWANCE_S: stopping the process under way, then storing, ranking and printing the results. With
real data (`--data DIR`), the loader dimension is searched last, for the best mode; the recipe a recommendation prints
is `optimize_loader.recipe`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from dlperf import envinfo
from dlperf import modes as mode_table
from dlperf.api import beside_since, warn_stderr
from dlperf.defaults import OPTIMIZE_BUDGET_MIN
from dlperf.errors import UsageError
from dlperf.frameworks.common import heap
from dlperf.loaders import DATA_SYNTHETIC
from dlperf.measure import system
from dlperf.measure.timer import TimerConfig
from dlperf.modes import ROW, SEARCH_ORDER, Fit, Mode, left_out, options_of
from dlperf.optimize_loader import LoaderChoice, LoaderSearch, faster_not_taken, needed_and_left
from dlperf.optimize_loader import recipe as recipe  # re-exported: the API and the tests read it here
from dlperf.optimize_results import (  # re-exported: the command, the API and advise read them here
    BASELINE,
    MIN_GAIN,
    NOT_FINITE,
    Candidate,
    Search,
    candidates_of,
    loss_of,
    ranked,
    recommend,
)
from dlperf.optimize_results import (
    SAME_ARITHMETIC as SAME_ARITHMETIC,
)
from dlperf.optimize_results import (
    eligible as eligible,
)
from dlperf.plan import make_plan
from dlperf.protocol import Cell, StopRule
from dlperf.report.fastest import faster, speedup_interval
from dlperf.report.format import seconds
from dlperf.report.profile import Verdict, verdicts
from dlperf.runner.session import Budget, Session, budget_check
from dlperf.runner.sweep import Deadline, Interrupted
from dlperf.runner.tasks import Task
from dlperf.spec import OPTIMIZE_TIMER, RunSpec, canonical_mode, device_kind, make_spec
from dlperf.store import Store
from dlperf.store.location import given_db
from dlperf.vocab import ExitCode, Status

SLOW_FACTOR = 2.0  # a candidate this many times slower than the mode it would replace stops after its timed steps
ORDERS = ("verdict", "fixed")  # --order: by the baseline's profiled bound, or SEARCH_ORDER
NO_ROOM = "too little budget left for it and a mode after it"  # the baseline's profile, where it would fit alone
BUDGET_ALLOWANCE_S = 10.0  # beyond --budget: the process under way stopped (SIGTERM, a grace, SIGKILL), results out


def search_order(v: Verdict | None) -> tuple[str, ...]:
    """The groups in the order to search them: those holding a mode that addresses the verdict's bound on the device
    first, in the order of its modes (launch-bound: compilation; memory-bound: precision, memory format, optimizer
    implementation), then the rest in SEARCH_ORDER. Checkpointing trades time for memory, never a speed-up: last."""
    addressing = [ROW[Mode(m)].group for m in (v.modes if v else ())]
    first = [g for g in dict.fromkeys(addressing) if g in SEARCH_ORDER[:-1]]
    return (*first, *(g for g in SEARCH_ORDER if g not in first))


def with_option(mode: str, option: str) -> str:
    """`mode` plus `option`, replacing a component of the same exclusive group (bf16 replaces fp32)."""
    return canonical_mode("+".join(c.value for c in mode_table.with_option(mode, option)))


def not_applicable(option: str, fit: Fit) -> str | None:
    """Why `option` cannot pay off for this workload on this device, known before measuring; None if it may: as
    `modes.left_out` says (`dlperf profile`'s advice and `table --explain` use it too; fp16 on a CPU without fp16
    units, say, at about 1 GFLOP/s), or a malloc to preload that is not installed here (`heap.not_installed`)."""
    return left_out(option, fit) or heap.not_installed(option)


# ----------------------------------------------------------------------------------------------------------------------
# The search


@dataclass
class Options:
    workload: str
    device: str = "cpu"
    threads: int | None = None  # None: every usable core
    budget_s: float = OPTIMIZE_BUDGET_MIN * 60
    repeats: int = 2
    timer: TimerConfig = OPTIMIZE_TIMER
    timeout: float = 900.0
    compile_timeout: float | None = 600.0
    order: str = "verdict"  # ORDERS
    data: str = DATA_SYNTHETIC  # --data: a directory (or "dataset") also searches the loader for the best mode
    loaders: tuple[str, ...] | None = None  # --loaders: the loader settings to try (None: w0 up to the cores)
    budget_default: bool = False  # --budget not given: checked against the baseline's step (`budget_check`)
    flags: bool = False  # errors and notes name the command's flags (`dlperf optimize`), else these fields (`said_to`)


FLAGS = {"device": "--device", "threads": "--threads", "budget_s": "--budget", "repeats": "--repeats",
         "timeout": "--timeout", "compile_timeout": "--compile-timeout", "order": "--order", "data": "--data",
         "loaders": "--loaders", "timer.min_time": "--min-time", "workload": "--workloads"}  # fmt: skip


class Searcher:
    """The greedy search's policy: the order of its rounds, the modes each measures, which one wins, its notes and
    its result. It measures through a `Session` (the run), within a `Budget` (its time)."""

    def __init__(self, opts: Options, db: str, progress_factory: Callable, warn: Callable[[str], None]) -> None:
        self.opts, self.db, self.progress_factory, self.warn = opts, db, progress_factory, warn
        self.notes: list[str] = []
        self.repeat_of: dict[str, int] = {}  # mode -> processes started
        self.dimension_of: dict[str, str | None] = {}  # mode -> the dimension whose round measured it
        self.order, self.groups, self.verdict = "fixed", SEARCH_ORDER, None
        self.loader: LoaderChoice | None = None
        self.env: dict = {}  # the plan's environment: the probe's precision speeds
        self.under_way, self.reached = "the fp32 baseline", []  # what an interrupt would cut short; the rounds begun
        self.interrupted: str | None = None
        self.path = [BASELINE]  # the modes the rounds took, each built on the one before
        self.off_path: str | None = None  # a mode the final figures set faster that no round took (`_on_path`)
        self.made_by = "optimize"  # the command whose run it is (`Session.create`)

    def run(self) -> Search:
        start, beside = time.monotonic(), beside_since(self.db)  # planning counts in the budget
        plan = make_plan(self._spec(), devices_flag="--device")
        for warning in plan.warnings:
            self.warn(warning)
        synthetic = [c for c in plan.cells if not c.loader]  # the loader cells come after the mode search
        if len(synthetic) != 1:
            devices = ", ".join(c.device for c in synthetic)
            raise UsageError(f"--device {self.opts.device!r} means {devices}: optimize searches one device, name it")
        self.base_cell = synthetic[0]
        self.workload = plan.workloads[self.base_cell.key]
        self.env = plan.env
        store = Store.open(self.db, create=True)
        try:
            argv = ["dlperf", *sys.argv[1:]]
            self.session = Session.create(store, plan.spec, plan.env, plan.cores, argv, made_by=self.made_by)
            beside(store, self.session.run_id, self.warn)
            self.budget = Budget(self.opts.budget_s, self.session, started=start)
            self.session.deadline = start + self.opts.budget_s  # no process outlives the budget (`runner/sweep.py`)
            self.fingerprint = envinfo.fingerprint(plan.env)
            self.peaks = self._peaks()
            return self._search()
        finally:
            store.close()

    def _spec(self) -> RunSpec:
        """The run's spec: the workload on the device, fp32 first; the search adds the other modes' cells."""
        return make_spec(
            [self.opts.workload],
            devices=[self.opts.device],
            threads=[system.usable_cores()["cores"] if self.opts.threads is None else self.opts.threads],
            modes=[BASELINE],
            repeats=self.opts.repeats,
            timeout=self.opts.timeout,
            compile_timeout=self.opts.compile_timeout,
            timer=self.opts.timer,
            trace_dir=f"{self.db}.traces",  # the baseline's profile trace, beside the database as for run --profile
            data=self.opts.data,
            loaders=self.opts.loaders,
        )

    def _search(self) -> Search:
        exit_code = ExitCode.OK
        try:
            self._round([BASELINE], dimension=None)
            if not next(c for c in self.session.cells() if c.mode == BASELINE).ok:
                self.session.complete()  # nothing to compare a candidate against: not one is started
                self._budget_notes()
                result = self._result()  # measured nothing: exit 1 whether it failed, the budget stopped it or
                result.elapsed_s, result.exit_code = self.budget.spent(), ExitCode.CELLS_FAILED  # left it unstarted
                return result
            self._check_budget()
            if self.opts.order == "verdict":
                self.under_way = "the fp32 baseline's profile"
                self._order_by_verdict()
            best = BASELINE
            for group in self.groups:
                self.under_way = f"the {group} round"
                self.reached.append(group)
                best = self._dimension(group, best)
                self.path += [best] if best != self.path[-1] else []
            if self.opts.data != DATA_SYNTHETIC:
                self.under_way = "the loader search"
                self.loader = self._loader_search(best).run()
                exit_code = ExitCode.CELLS_FAILED if self.loader.unread else exit_code  # as run's failed cells
            self.session.complete()
        except (Interrupted, KeyboardInterrupt) as stop:  # KeyboardInterrupt: a Ctrl-C between rounds, outside a sweep
            # as a sweep sets it: the run was interrupted, not left running (where the store refused that, said)
            self.notes += (stop if isinstance(stop, Interrupted) else Interrupted(self.session.interrupted())).notes()
            self.interrupted = self.under_way
            pending = [c.mode for c in self.session.cells() if c.status == Status.PENDING]  # cut short, or after
            left = f"; {', '.join(pending)} not measured" if pending else ""
            self.notes.append(f"interrupted during {self.under_way}: the results are what was measured before it{left}")
            exit_code = ExitCode.INTERRUPTED
        self._budget_notes()
        result = self._result()
        result.elapsed_s, result.exit_code = self.budget.spent(), exit_code
        return result

    def _budget_notes(self) -> None:
        """What the budget cut short or left unstarted, and how far past it the search ran, if it did."""
        cut = [c.mode for c in self.session.cells() if Deadline.REASON in (c.error or "")]
        unstarted = [] if self.interrupted else [c.mode for c in self.session.cells() if c.status == Status.PENDING]
        profile = self.session.profiles().get(self.base_cell.key)
        cut += ["the fp32 baseline's profile"] if profile and Deadline.REASON in (profile.error or "") else []
        said = [f"{', '.join(modes)} {what}" for modes, what in ((cut, "stopped"), (unstarted, "not started")) if modes]
        if said:
            self.notes.append(f"--budget {self.budget.text()} ran out: {'; '.join(said)}")
        if (over := self.budget.spent() - self.budget.seconds) > 0:
            self.notes.append(f"ended {over:.1f} s past --budget, stopping what ran (allowed {BUDGET_ALLOWANCE_S:g} s)")

    def _check_budget(self) -> None:
        """The default budget against the baseline's step: say, before the search, when it gives a candidate fewer
        than FEW_SAMPLES timed steps, and the budget that would give that many."""
        base = next(c for c in self.session.cells() if c.mode == BASELINE)
        if not self.opts.budget_default or not base.ok or not base.median_s:
            return
        budget, opts = self.budget, self.opts
        if why := budget_check(budget.seconds, base.median_s, len(self._applicable()), opts.repeats,
                               budget.per_process(), opts.flags):  # fmt: skip
            self.warn(why)
            self.notes.append(why)

    def _order_by_verdict(self) -> None:
        """Profile the fp32 baseline once and order the rounds by its verdict; SEARCH_ORDER, said why, where the
        profile cannot be taken or the budget left does not cover it and one mode in one process after it (`advise
        resnet-56 --budget 90` profiled 21 s, leaving 11 s for modes of 30 s: the fixed order would measure one)."""
        fixed = f"searched in the fixed order ({', '.join(SEARCH_ORDER)})"
        base = next(c for c in self.session.cells() if c.mode == BASELINE)
        one = min((self.budget.modes_s([with_option(BASELINE, o)], 1) for o in self._applicable()), default=0.0)
        if not base.ok or not self.budget.covers(self.budget.per_process(BASELINE) + one):
            why = f"it did not measure ({base.status.value})" if not base.ok else NO_ROOM
            self.notes.append(f"order: the fp32 baseline was not profiled: {why}; {fixed}")
            return
        self.session.measure([], self.progress_factory, last=False, to_profile=[self.base_cell])  # stored, untimed
        profile = self.session.profiles().get(base.key)
        self.verdict = verdicts(self.session.store, self.fingerprint, [base]).get(base.key)
        if self.verdict is None:
            why = f"{profile.status.value}: {profile.error}" if profile and not profile.ok else "no verdict"
            self.notes.append(f"order: the fp32 baseline's profile gave no verdict ({why}); {fixed}")
            return
        self.order, self.groups = "verdict", search_order(self.verdict)
        v = self.verdict
        self.notes.append(f"order: fp32 is {v.label}: {v.figure}; searched {', '.join(self.groups)}")

    def _applicable(self) -> list[str]:
        fit, kind = self._fit(), device_kind(self.opts.device)
        return [o for g in SEARCH_ORDER for o in options_of(g, kind) if not_applicable(o, fit) is None]

    def _dimension(self, group: str, best: str) -> str:
        """One round: the best mode so far with each option of `group` (the modes table's searched components).
        Options that compile go last, against the best of the others: when capturing the eager step in a CUDA graph
        already wins, compiling is not tried (on an H100, bf16+compile of ResNet-56 took most of a 170 s cell to run
        slower than eager fp32, and bf16+compile+cuda_graphs did not finish), and compiling may spend at most the
        budget left."""
        modes = self._options(group, best)
        eager = [m for m in modes if not mode_table.compiles(m)]
        compiled = [m for m in modes if mode_table.compiles(m)]
        if eager:
            best = self._measure(group, best, eager)
        if compiled and mode_table.captured_eagerly(best):
            why = "already captures the eager step in a CUDA graph and wins without compiling"
            self.notes.append(f"{group}: {', '.join(compiled)} not tried: {best} {why} (dlperf run --modes measures "
                              "them)")  # fmt: skip
            return best
        if compiled:
            left = self.budget.left()
            limit = max(1.0, min(self.session.spec.compile_timeout or left, left))  # what is left, no more
            best = self._measure(group, best, compiled, compile_timeout=limit)
        return best

    def _options(self, group: str, best: str) -> list[str]:
        """The modes of `group`'s round: `best` with each of its options that may apply, not measured before."""
        modes = []
        fit = self._fit()
        for option in options_of(group, device_kind(self.opts.device)):
            if why := not_applicable(option, fit):
                self.notes.append(f"{group}: {option} not tried: {why}")
                continue
            mode = with_option(best, option)
            if mode not in self.repeat_of and mode not in modes:
                modes.append(mode)
        return modes

    def _measure(self, group: str, best: str, modes: list[str], compile_timeout: float | None = None) -> str:
        """Measure `modes` against `best` if the budget left covers them; the better of them and `best`."""
        needed, repeats = self.budget.modes_s(modes, self.opts.repeats), self.opts.repeats
        if not self.budget.covers(needed) and repeats > 1 and self.budget.covers(self.budget.modes_s(modes, 1)):
            # one process each still decides: against the baseline's processes, a prediction from their spread
            self.notes.append(f"{group}: {', '.join(modes)} measured in one process each: the {repeats} asked for "
                              f"(about {needed / 60:.1f} min) did not fit the budget left")  # fmt: skip
            needed, repeats = self.budget.modes_s(modes, 1), 1
        if not self.budget.covers(needed):
            short = needed_and_left(needed, self.budget.left())
            self.notes.append(f"{group}: {', '.join(modes)} not measured: {short} (raise --budget)")
            return best
        self._round(modes, dimension=group, bar=best, compile_timeout=compile_timeout, repeats=repeats)
        return self._choose(best, modes, group)

    def _round(
        self, modes: list[str], dimension: str | None, bar: str | None = None, compile_timeout: float | None = None,
        repeats: int | None = None,
    ) -> None:  # fmt: skip
        """Measure `modes`; the loss check runs only for those faster than the `bar` mode's median (a slower mode is
        never chosen, and a slow mode's check is slow too: fp16 on a CPU without fp16 units takes minutes)."""
        cells = [replace(self.base_cell, mode=m) for m in modes]
        bar_s = None
        if bar is not None:
            bar_s = next(c for c in self.session.cells() if c.mode == bar).median_s
        new = [c for c in cells if c.mode not in self.repeat_of]
        self.session.add(new, self.workload)
        for c in new:
            self.dimension_of[c.mode] = dimension
        first = []
        if BASELINE in self.repeat_of:  # one more baseline process per round, first, so the baseline spans the run
            first.append(self._task(replace(self.base_cell, mode=BASELINE)))
        first += [self._task(c, bar_s) for c in cells]
        self.session.measure(first, self.progress_factory, last=False, compile_timeout=compile_timeout)
        # the other processes only for modes that may win: one process already shows a mode slower than the bar
        medians = {c.mode: c.median_s for c in self.session.cells() if c.ok}  # a stopped one's steps: no time
        promising = [c for c in cells if medians.get(c.mode) and (bar_s is None or medians[c.mode] < bar_s)]
        for c in cells:
            if c not in promising and medians.get(c.mode):
                self.notes.append(f"{c.mode}: measured in one process only: {seconds(medians[c.mode])} per step is not "
                                  f"faster than {bar} as timed before it ({seconds(bar_s)})")  # fmt: skip
        more = [self._task(c) for _ in range((repeats or self.opts.repeats) - 1) for c in promising]
        self.session.measure(more, self.progress_factory, last=False, compile_timeout=compile_timeout)

    def _task(self, cell: Cell, bar_s: float | None = None) -> Task:
        """The next process of `cell`. A candidate's first process, measured against a bar (the best mode's step),
        checks its loss only when it is faster than the bar (a slower mode is never chosen, and a slow mode's check
        is slow too), and skips its untimed extras when it is SLOW_FACTOR times slower."""
        n = self.repeat_of.get(cell.mode, 0)
        self.repeat_of[cell.mode] = n + 1
        if bar_s is None or n > 0 or cell.mode == BASELINE:
            return Task(cell, n)
        stop = StopRule(bar_s, SLOW_FACTOR, "the mode it would replace")
        return Task(cell, n, check_if_faster_than_s=bar_s, stop=stop)

    def _choose(self, best: str, modes: list[str], dim_name: str) -> str:
        """The candidate reliably faster than `best` (`fastest.faster`, gain >= MIN_GAIN) that still trains."""
        cells = {c.mode: c for c in self.session.cells()}
        current = self.session.samples(cells[best].key)
        winner, winner_ratio = best, 1.0
        for mode in modes:
            cell = cells[mode]
            if not cell.ok or not cell.median_s:
                continue
            trains, why = loss_of(cell)
            if trains is False:
                self.notes.append(f"{dim_name}: {mode} rejected: it no longer trains ({why})")
                continue
            s = speedup_interval(cells[best], cell, current, self.session.samples(cell.key))
            ratio = s.ratio if s else cells[best].median_s / cell.median_s
            if faster(cells[best], cell, s) and ratio >= 1 + MIN_GAIN and ratio > winner_ratio:
                winner, winner_ratio = mode, ratio
        return winner

    def _loader_search(self, best: str) -> LoaderSearch:
        """With --data DIR: the loader settings for the best mode, in this search's run and budget."""
        synthetic = replace(self.base_cell, mode=best)
        return LoaderSearch(self.session, self.budget, synthetic, self.workload, self.opts.repeats, self.opts.loaders,
                            self.progress_factory, self.notes)  # fmt: skip

    def _result(self) -> Search:
        cells = [c for c in self.session.cells() if not c.loader]  # the modes, on synthetic data
        samples = {c.key: self.session.samples(c.key) for c in cells}
        peaks = self.peaks
        if not peaks:
            self.notes.append("utilization: no measured peak for this machine, device and thread count (`dlperf peak`)")
        from dlperf.report.utilization import busy_notes

        self.notes += busy_notes(peaks, self.base_cell.column)
        cands = candidates_of(cells, samples, peaks)
        for c in cands:
            c.dimension = self.dimension_of.get(c.mode)
        by_mode = {c.mode: c for c in cands}
        base = by_mode.get(BASELINE) or Candidate(BASELINE, Status.PENDING.value)
        if base.status != Status.OK:
            self.notes.append(f"the fp32 baseline was not measured ({self._unmeasured(base)}): no candidate was "
                              "searched, nothing to compare it against")  # fmt: skip
        best = self._on_path(cands)
        if base.loss_reason == NOT_FINITE:  # no mode is measured against a model that does not train
            best = None
            self.notes.append(f"fp32 eager: {NOT_FINITE}: no mode is recommended for a model that does not "
                              "train as it stands (a NaN or infinite loss: look at its data, loss and learning "
                              "rate)")  # fmt: skip
        measured = {c.mode for c in cells if c.status != Status.PENDING}
        tried = [m for m in self.repeat_of if m != BASELINE and m in measured]  # in the order their first process ran
        if not tried and not self.interrupted:  # an interrupt's own note says why none was
            self.notes.append("not searched: no mode other than fp32 was measured (the notes above say why)")
        elif tried and best is None and base.status == Status.OK and base.loss_reason != NOT_FINITE:
            so_far, keep = (" measured before the interrupt", "") if self.interrupted else ("", ": keep fp32 eager")
            self.notes.append(f"no mode{so_far} was reliably at least {100 * MIN_GAIN:.0f}% faster than fp32 eager "
                              f"and still trained{keep}")  # fmt: skip
        others = [c for c in cands if c.mode != self.off_path]  # the mode off the path: said apart (`_on_path`)
        self.notes += faster_not_taken(best or base, others) if base.status == Status.OK else []
        return Search(
            self.opts.workload, self.base_cell.device, self.base_cell.threads, self.session.run_id, base,
            ranked(cands), best, self.notes, order=self.order, groups=self.groups, verdict=self.verdict,
            cells=len(tried), cells_to_best=tried.index(best.mode) + 1 if best else 0, loader=self.loader,
            interrupted=self.interrupted, reached=tuple(self.reached),
            data_dir=(self.workload.get("extra") or {}).get("data_dir"),  # --data DIR, absolute, as the plan gave it
            named=bool((self.workload.get("extra") or {}).get("input_names")),
        )  # fmt: skip

    def _on_path(self, cands: list[Candidate]) -> Candidate | None:
        """The fastest mode that may be recommended among those the rounds took (`path`): each round built on the
        one before, and the loader search on the last. A mode off the path that the final figures (against every
        fp32 process) set faster was not taken in its round: it is said, not recommended over what was built on
        (channels_last recommended, at 1.69x, where foreach's round and the loader search ran on fp32's)."""
        taken = set(self.path)
        if self.interrupted and self.reached:  # the round cut short took none yet: its modes, built on the path's last
            taken |= {m for m, d in self.dimension_of.items() if d == self.reached[-1]}
        best = recommend([c for c in cands if c.mode in taken])
        if (off := recommend(cands)) is not None and off.mode not in taken:
            self.off_path = off.mode
            went_on = f"went on from {self.path[-1]}" if len(self.path) > 1 else "kept fp32"
            pair = f"{off.mode},{best.mode if best else BASELINE}"
            self.notes.append(f"{off.mode}: {off.speedup:.2f}x against every fp32 process at the end, yet its round "
                              f"did not take it (not told apart from the mode it would have replaced, on the "
                              f"processes measured by then), so the search {went_on}: `dlperf run --modes {pair} "
                              "--repeats 3` sets the two apart")  # fmt: skip
        return best

    def _unmeasured(self, c: Candidate) -> str:
        """Why a candidate has no time, in words: stopped or not started by the budget or an interrupt, or failed."""
        if Deadline.REASON in (c.error or ""):
            return f"stopped: {Deadline.REASON}"
        if c.status != Status.PENDING:
            return f"{c.status}: {c.error}" if c.error else c.status
        if self.interrupted:  # under way when it came, or after: no process of it finished
            return "not measured: interrupted"
        return f"not started: --budget {self.budget.text()} ran out" if self.budget.left() <= 0 else "not started"

    def _fit(self) -> Fit:
        """What the workload and the device allow: the same `modes.Fit` `dlperf profile` advises from."""
        frameworks = (self.env.get("frameworks") or {}).values()
        speeds = next((fw["precision_speed"] for fw in frameworks if fw.get("precision_speed")), {})
        probe_speed = speeds.get(self.opts.device) or speeds.get(self.opts.device.split(":")[0])
        return Fit.of(self.opts.device, self.workload, self.peaks, probe_speed)

    def _peaks(self) -> dict[str, float]:
        from dlperf.report.utilization import peak_lookup

        return peak_lookup(self.session.store, self.fingerprint, self.base_cell.device, self.base_cell.threads)


def optimize(
    opts: Options, db: str | None = None, *, progress_factory=None, warn=None, made_by: str = "optimize"
) -> Search:
    """Search the modes for `opts.workload`; returns the ranked results and the recommendation. `made_by`: the
    command whose search it is, kept with its run (`dlperf advise` searches through this one). Its errors and notes
    name the command's flags (`Options.flags`), else a Python caller's arguments (`budget_s`, `db='PATH'`)."""
    from dlperf.progress import Running  # one count over the search's processes, whose total it does not know
    from dlperf.spec import parse_devices
    from dlperf.store.location import said_to

    with said_to(opts, FLAGS) as say:
        parse_devices(opts.device, "--device")  # make_spec's says the flag of `dlperf run`
        if not opts.budget_s > 0:  # nan too
            raise UsageError("--budget must be positive")
        if opts.repeats < 1:
            raise UsageError("--repeats must be at least 1")
        if opts.budget_s < (least := opts.repeats * opts.timer.min_time):  # the baseline's processes, timed so long
            raise UsageError(f"--budget {opts.budget_s:g} s: below the {least:g} s the fp32 baseline alone is timed "
                             f"at the least (--repeats {opts.repeats} processes of --min-time {opts.timer.min_time:g} "
                             f"s each): give at least {least:g}s")  # fmt: skip
        if opts.order not in ORDERS:
            raise UsageError(f"--order must be {' or '.join(ORDERS)}, not {opts.order!r}")
        told = warn or warn_stderr  # the plan's warnings and the budget's, said as the caller gave them too
        searcher = Searcher(opts, given_db(db), progress_factory or Running(), lambda line: told(say(line)))
        searcher.made_by = made_by
        search = searcher.run()
    search.notes = [say(n) for n in search.notes]
    return search
