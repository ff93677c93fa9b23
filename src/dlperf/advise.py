"""`dlperf advise WORKLOAD`: should I rent a GPU, and which one? One command that measures this machine briefly and
predicts the GPUs, through the commands that each answer a part:

1. the GPUs predicted first (`predict/`: the step counted on fake tensors, its time per GPU and mode by the roofline,
   its peak memory, the cost of the work at the price table's rates, `predict/cost.py`), so a workload the counter
   cannot take fails in seconds, before anything is measured or stored. Each GPU in fp32 and in the mixed precision
   it has a tensor unit for (`GPU.mixed`): bf16 autocast, or on a GPU without bf16 units (Volta, Turing) fp16
   autocast with gradient scaling, as people train there;
2. this CPU's best thread count, measured at the user's batch and stored as a run (`crossover.py`, at that one
   batch: its CPU step against each GPU's predicted step is the crossover at the user's batch);
3. the fastest mode at that thread count, by a short `optimize.py` search within what the budget has left, stored as
   a second run;
4. the answer (`Advice`): this CPU's time for the work at its best settings, measured; the fastest and the cheapest
   GPU (and the cheapest within the deadline), the GPUs the step does not fit, predicted, with the predictor's
   uncertainty (`roofline.uncertainty()`), this CPU's cells read back from the runs stored (`advise_cells.py`).
   The views (`report/advise.py`) print it.

With real data (`--data DIR`) the mode search also searches the loader (`optimize_loader.py`), and the answer is this
CPU training on that data (`Pipeline`): the work is an epoch of it (its size read when it is checked), the step is the
best mode's at the loader setting the search recommends (`report.data.recommend`), held against the same mode's step
on synthetic data, so it says whether the loader holds the step back and by how much. It also says how fast one
loading process prepares batches here, the loader alone (`Feed`), and so about how many loading processes each GPU
needs to be fed at its predicted rate: a GPU predicted 5,000 samples/s waits for data behind a loader of 300 samples/s
a process unless about 17 processes load beside it. A rented machine's cores and disks decide how many it can run;
the per-process rate is this machine's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dlperf.advise_cells import Feed, Pipeline, best_cell, fastest_feed, quoted_notes, recommended_pipeline, unread_data
from dlperf.defaults import BUDGET_S, CPU_WATTS, FIT_MAX_BATCH, KWH_PRICE, LEAST_BUDGET_S
from dlperf.errors import UsageError
from dlperf.loaders import DATA_SYNTHETIC
from dlperf.vocab import ExitCode

MIN_SEARCH_S = 20.0  # below this left of the budget, the mode search is skipped (fp32 eager, said so)
PRECISIONS = ("fp32", "bf16", "fp16")  # a GPU trains in fp32, or in its mixed precision (`GPU.mixed`)
NO_EPOCH_SAMPLES = 1_000_000  # the work when the data set has no epoch (synthetic data) and --samples is not given
OVERRUN = 1.2  # past this many times --budget, the answer says where the time went (`Clock.overrun`)
PREDICTIONS = "the predictions and checks"  # what --budget does not cut, named as the lines say it: what comes first,
FIRST = "this CPU's first thread count"  # ... then the thread search's first process (`crossover.Options.first`)
HERE = "the largest batch this machine holds"  # ... or, where its memory cannot hold the step, that search


@dataclass
class Clock:
    """--budget as one deadline over the whole command, counted from its start. The predictions count in it (they
    come first and are not stopped: a child counting the operators); the thread search measures within it, its first
    process excepted (the answer's one CPU step: `crossover.CpuSide.best_threads`); the mode search is given what is
    left, and skipped below MIN_SEARCH_S. A process under way at the deadline is stopped (SIGTERM, a grace, SIGKILL)
    and the results stored: advise ends within optimize's BUDGET_ALLOWANCE_S (10 s) past the budget, unless the
    predictions and that first process alone spent more than it. Those two are measured as they end (`uncut`), said
    before that process where they will overrun the budget (`ahead`), and in the answer where the command took more
    than OVERRUN times the budget (`overrun`): a --budget 10s that took 100 s says where they went."""

    budget_s: float
    started: float  # time.monotonic() at the command's start
    uncut: dict[str, float] = field(default_factory=dict)  # PREDICTIONS, FIRST -> the seconds each took

    @property
    def deadline(self) -> float:
        return self.started + self.budget_s

    def left(self, now: float) -> float:
        return self.deadline - now

    def search_s(self, now: float) -> float | None:
        """The mode search's budget at `now`: what is left, ending at the deadline; None: too little to search."""
        left = self.left(now)
        return left if left >= MIN_SEARCH_S else None

    def ahead(self, now: float, first_s: float | None) -> str | None:
        """Just before the first thread count's process, at `now`: one line where the parts the budget does not cut
        will overrun it, the predictions (measured) and that process (`first_s`: from its earlier ones here, less
        the FLOP count and the memory step it takes kept, `estimate.first_process_s`; None: none ran here, said only
        where the predictions alone overran); None where they will not."""
        from dlperf.measure.units import seconds

        spent = now - self.started
        if spent + (first_s or 0.0) <= self.budget_s:
            return None
        over = f"past --budget ({seconds(self.budget_s)}), which does not cut them"
        if first_s is None:
            return (f"{PREDICTIONS} took {seconds(spent)}, {over}: {FIRST} is measured whole after them, the other "
                    "thread counts and the mode search skipped")  # fmt: skip
        return (f"{PREDICTIONS} ({seconds(spent)}) and {FIRST}, measured whole (about {seconds(first_s)}, from its "
                f"earlier processes here), take about {seconds(spent + first_s)}, {over}: the other thread counts and "
                "the mode search get what is left, if anything")  # fmt: skip

    def overrun(self, now: float) -> str | None:
        """At the end, where the command took more than OVERRUN times the budget: how long, and where it went (the
        parts the budget does not cut, each as long as it took; then the rest, a second or more, and how far past the
        budget it ended where the searches ran past it, stopping the process under way)."""
        from dlperf.measure.units import seconds

        took = now - self.started
        if took <= OVERRUN * self.budget_s or not self.uncut:
            return None
        parts = " and ".join(f"{name} {seconds(s)}" for name, s in self.uncut.items())
        rest = took - sum(self.uncut.values())
        late = now - max(self.deadline, self.started + sum(self.uncut.values()))
        stopped = f", ending {seconds(late)} past the budget (a process under way is stopped)" if late >= 1.0 else ""
        rest_said = f"; the rest {seconds(rest)}{stopped}" if rest >= 1.0 else ""
        return (f"advise took {seconds(took)} against --budget ({seconds(self.budget_s)}): {parts}, which it does not "
                f"cut{rest_said}")  # fmt: skip


@dataclass
class Options:
    workload: str
    gpus: str | tuple[str, ...] | None = None  # comma list or names; None: every GPU with a price (`prices.priced`)
    budget_s: float = BUDGET_S
    deadline: str | None = None
    samples: int | None = None
    epochs: float | None = None
    timeout: float = 600.0  # seconds per measuring process, and the operator count's
    data: str = DATA_SYNTHETIC  # --data: a directory of datasets also measures the loader (`Feed`)
    loaders: str | tuple[str, ...] | None = None  # --loaders: the settings the loader search tries
    batch: int | None = None  # --batch: the user's batch, measured, searched and predicted at (None: the workload's)
    flags: bool = False  # a GPU name is said as the command's --gpu (`dlperf advise`), else as this `gpus` argument


@dataclass
class Advice:
    workload: str
    batch: int
    costs: object  # predict.cost.Costs: the GPUs predicted, the CPU measured (its `cpu`)
    cpu_ci: tuple[float, float] | None  # the measured step's 95% interval
    crossover: object | None  # report.crossover.Crossover at the user's batch
    runs: list[int]
    uncertainty: str
    notes: list[str] = field(default_factory=list)
    exit_code: int = ExitCode.OK
    largest: dict[tuple[str, str], int] = field(default_factory=dict)  # (GPU, mode) left out -> the largest batch
    asked: str = ""  # the workload as the user named it (a user's file.py:factory): the commands suggested name it so
    feed: Feed | None = None  # --data DIR: the loader measured alone on this CPU
    searched: bool = False  # this CPU's step is the mode search's best (else the thread search's fp32 step)
    cpu_why: str = ""  # why this CPU was not measured (its step does not fit this machine's memory)
    pipeline: Pipeline | None = None  # --data DIR: the CPU's step is the loader's, at the setting recommended
    data: bool = False  # --data DIR was given (the CPU's step is on synthetic data where `pipeline` is None)
    threads_cut: tuple[int, ...] = ()  # thread counts the budget left unmeasured: this CPU's step may be faster
    unread: str = ""  # --data DIR that no loader setting could read: why, in place of this CPU's time for its epoch
    doubt: str = ""  # what makes this CPU's step one not to rely on (`charts.doubt_of`: disturbed, few steps), or ""


FLAGS = {"batch": "--batch", "data": "--data", "loaders": "--loaders", "budget_s": "--budget", "samples": "--samples",
         "epochs": "--epochs", "timeout": "--timeout", "deadline": "--deadline"}  # fmt: skip
MOST_BUDGET_S = 24 * 3600.0  # the command's --budget bound
MOST_EPOCHS = 1e9  # the command's --epochs bound


def check(opts: Options) -> tuple[tuple, float | None]:
    """Everything the flags say, checked before any child starts (the spec and price files are read before, by the
    command): the workload's name, its batch, the GPUs (default: those with a price), the deadline, the work. An
    error names the command's flag (`--batch '0'`), or a Python caller's argument (`batch=0`: `Options.flags`)."""
    try:
        return _checked(opts)
    except UsageError as exc:
        if not opts.flags:
            from dlperf.store.location import as_arguments

            exc.args = (as_arguments(str(exc), FLAGS, opts),)  # its type kept (a BadValue a ValueError still)
        raise


def _checked(opts: Options) -> tuple[tuple, float | None]:
    from dlperf.flagtext import batch_number
    from dlperf.predict import cost, gpus, prices
    from dlperf.spec import make_spec, parse_workload

    if "," in opts.workload:
        raise UsageError(f"unknown workload {opts.workload!r}: one built-in name (dlperf list) or a file.py:factory")
    parse_workload(opts.workload, None)  # the positional's own error (NAME@bN: "with --batch"), before the spec's
    if opts.batch is not None:  # as the command line's parser says it (a Python caller's value)
        batch_number(str(opts.batch), "--batch")
        if not isinstance(opts.batch, int):  # "4": text, later predicted and measured as text
            kind = type(opts.batch).__name__
            raise UsageError(f"--batch {opts.batch!r}: expected a batch, a whole number, not {kind}")
    spec = make_spec(opts.workload, data=opts.data, loaders=opts.loaders)  # --data, --loaders as `dlperf run` checks
    opts.data, opts.loaders = spec.data, spec.loaders
    _check_numbers(opts)
    said = ("--gpu", "") if opts.flags else ("gpus", "gpus='H100-SXM5-80GB,T4'")
    names = opts.gpus if opts.gpus is None or isinstance(opts.gpus, str) else ",".join(opts.gpus)  # as crossover's
    chosen = gpus.parse_gpus(names, *said) if names is not None else prices.priced()  # --gpu '' is refused
    deadline = None if opts.deadline is None else cost.parse_deadline(str(opts.deadline))
    return chosen, deadline


def _check_numbers(opts: Options) -> None:
    """--budget, --samples, --epochs, --timeout within the command line's bounds (a Python caller's values are not
    parsed by it), each said as the command says it."""
    from dlperf.spec import MAX_SECONDS

    if not _number(opts.budget_s, above=0, most=MOST_BUDGET_S):
        raise UsageError(f"--budget {str(opts.budget_s)!r}: expected seconds above zero and at most {MOST_BUDGET_S:g}")
    if opts.budget_s < LEAST_BUDGET_S:  # said as typed: 1s (the command line's), budget_s=1 (a Python caller's)
        said, least = ((f"--budget {opts.budget_s:g}s", f"at least {LEAST_BUDGET_S:g}s") if opts.flags else
                       (f"--budget {str(opts.budget_s)!r}", f"budget_s={LEAST_BUDGET_S:g} or more"))  # fmt: skip
        raise UsageError(f"{said}: advise measures this CPU's first thread count whole, its steps timed for up to "
                         f"{LEAST_BUDGET_S:g} s, after the predictions: give {least}")  # fmt: skip
    if opts.samples is not None and not (_number(opts.samples, above=0) and isinstance(opts.samples, int)):
        raise UsageError(f"--samples {str(opts.samples)!r}: expected a whole number of at least 1")
    if opts.epochs is not None and not _number(opts.epochs, above=0, most=MOST_EPOCHS):
        raise UsageError(f"--epochs {str(opts.epochs)!r}: expected a number above 0 and at most {MOST_EPOCHS:g}")
    if opts.samples is not None and opts.epochs is not None:
        raise UsageError("--samples and --epochs: give one (the work is N samples, or E epochs of the data set)")
    if not _number(opts.timeout, above=0, most=MAX_SECONDS):
        raise UsageError(f"--timeout {str(opts.timeout)!r}: expected a number of seconds above 0")


def _number(value, above: float, most: float = math.inf) -> bool:
    """A finite int or float (not a bool, not text) above `above` and at most `most`."""
    real = isinstance(value, int | float) and not isinstance(value, bool)
    return real and math.isfinite(value) and above < value <= most


def advise(opts: Options, db: str, argv: list[str], warn=None) -> Advice:
    """Predict the GPUs, measure this CPU (threads, then modes), store both runs, answer. Its errors and notes name
    what the caller gave: the command's flags (`Options.flags`), else a Python caller's arguments (`said_to`); a
    line said while it runs (the budget overrun ahead: `Clock.ahead`) goes to `warn` (default: stderr)."""
    from dlperf.api import warn_stderr
    from dlperf.runner import warm
    from dlperf.store.location import said_to

    with said_to(opts, FLAGS) as say, warm.probes_share():  # its probes and cells: one warm parent's forks
        clock = Clock(opts.budget_s, time.monotonic())
        answer = _advise(opts, db, argv, clock, once(lambda line: (warn or warn_stderr)(say(line))))
    answer.notes = [say(n) for n in [*answer.notes, clock.overrun(time.monotonic())] if n]
    return answer


def _too_large_here(workload, peaks: dict, opts: Options, clock: Clock) -> str | None:
    """Why this machine's memory cannot hold the step, with the largest batch that does fit, or that none does (no
    batch of a 3.2B model with AdamW); None where it can. That search is timed as a part the budget does not cut: its
    traces were "the rest ..., a process under way is stopped", none having run."""
    from dlperf.predict import memory

    if not memory.no_room_here(workload, peaks.get("fp32")):
        return None
    began = time.monotonic()
    most = memory.largest_here(workload, "fp32", {workload.batch: peaks["fp32"]}, opts.timeout, "--timeout")
    clock.uncut[HERE] = time.monotonic() - began
    return memory.no_room_here(workload, peaks["fp32"], largest=most)


def _advise(opts: Options, db: str, argv: list[str], clock: Clock, warn) -> Advice:
    from dlperf import crossover
    from dlperf.predict import cost, roofline

    chosen, deadline = check(opts)
    workload, size, batches = _resolved(opts)
    samples, what, steps = _work(workload, opts, size, batches)
    costs, largest, notes, peaks = predicted(workload, chosen, samples, what, deadline, opts.timeout, steps)
    clock.uncut[PREDICTIONS] = time.monotonic() - clock.started
    notes += [NO_EPOCH_NOTE.format(workload.data)] if what.full == NO_EPOCH_WORK else []
    # measuring a step too large would only end in the kernel's out-of-memory killer, or in swap
    if too_large := _too_large_here(workload, peaks, opts, clock):
        return Advice(workload.name, workload.batch, costs, None, None, [], roofline.uncertainty(), notes,
                      ExitCode.OK, largest, opts.workload, cpu_why=too_large)  # fmt: skip

    side = crossover.crossover(
        crossover.Options(opts.workload, gpus=tuple(g.name for g in chosen), batches=(workload.batch,),
                          batch=workload.batch, timeout=opts.timeout, deadline=clock.deadline,
                          first=lambda first_s: _first(clock, first_s, warn), flags=True, data=opts.data),
        db, argv=argv, warn=warn, made_by="advise",
    )  # fmt: skip
    if side.first_s is not None:
        clock.uncut[FIRST] = side.first_s
    runs = [side.run_id] if side.run_id is not None else []
    if side.answer is None or not side.answer.rows or side.answer.rows[0].cpu is None:
        code = side.exit_code or ExitCode.CELLS_FAILED
        return Advice(workload.name, workload.batch, costs, None, None, runs, roofline.uncertainty(),
                      [*side.notes, *notes], code, largest, opts.workload)  # fmt: skip
    threads = side.answer.rows[0].cpu.threads
    cell = side.answer.rows[0].cpu
    exit_code, feed, searched, pipeline, tried, unread = side.exit_code, None, False, None, (), ""
    if exit_code == ExitCode.INTERRUPTED:
        notes.append("interrupted: the mode search was not started; the thread search's cells are stored")
    elif clock.search_s(time.monotonic()) is not None:
        search = _search(opts, threads, clock, db, warn)
        runs.append(search.run_id)
        tried = search.results  # what answers a note's "try --modes" (`advise_cells.tried`)
        exit_code = max(exit_code, _search_code(search))
        best = best_cell(db, search)
        cell, searched = best or cell, best is not None
        feed, found = _searched_notes(opts, db, search, best)
        notes += found
        pipeline, loaded = recommended_pipeline(db, search) if opts.data != DATA_SYNTHETIC else (None, None)
        cell = loaded or cell  # with --data: the step on the user's data, at the loader setting recommended
        if unread := unread_data(db, search.run_id) if opts.data != DATA_SYNTHETIC else "":
            exit_code = max(exit_code, ExitCode.CELLS_FAILED)  # as run's and optimize's failed loader cells
    else:
        left = clock.left(time.monotonic())
        notes.append(f"{NO_SEARCH} skipped: {max(left, 0):.0f} s of the budget left (raise --budget)")
        if opts.data != DATA_SYNTHETIC:
            notes.append("input pipeline: not measured: the loader is searched after the modes (raise --budget)")
    if not unread:  # no epoch of data that could not be read
        costs.cpu = cost.cpu_cost(cell, samples, CPU_WATTS, KWH_PRICE, pipeline.step_s if pipeline else None, steps)
    low, high = (cell.mean_ci_low_s, cell.mean_ci_high_s) if pipeline else (cell.ci_low_s, cell.ci_high_s)
    ci = (low, high) if low and high else None  # the interval of the step quoted: a loader cell's of its mean
    notes += [n for n in side.notes if n.startswith("threads:")]
    notes += quoted_notes(db, side.run_id, cell, ci is not None, tried)
    return Advice(workload.name, workload.batch, costs, ci, side.answer, runs, roofline.uncertainty(), notes,
                  exit_code, largest, opts.workload, feed, searched, pipeline=pipeline, threads_cut=side.threads_cut,
                  data=opts.data != DATA_SYNTHETIC, unread=unread, doubt=cpu_doubt(cell))  # fmt: skip


def cpu_doubt(cell) -> str:
    """What makes the CPU step quoted one not to rely on, in a chart's words (`charts.doubt_of`), or "": the screen
    marks it and each figure set against it `?`, as crossover's table does (a step timed beside a loop on 82% of the
    CPUs read "36.1 times faster than this CPU", unmarked)."""
    from dlperf.report.charts import doubt_of, doubtful

    return doubt_of([cell]) if doubtful(cell) else ""


def once(warn: Callable[[str], None]) -> Callable[[str], None]:
    """`warn`, each line said once: the thread search and the mode search plan alike, and each said the plan's
    warnings (an inherited OPENBLAS_CORETYPE, --threads beyond the cores) again."""
    said: set[str] = set()

    def told(line: str) -> None:
        if line not in said:
            said.add(line)
            warn(line)

    return told


def _first(clock: Clock, first_s: float | None, warn) -> None:
    """Just before the thread search's first process: what came before it is the predictions' and checks' (the
    memory check and operator count of crossover's, cached by advise's), said where the budget will be overrun."""
    now = time.monotonic()
    clock.uncut[PREDICTIONS] = now - clock.started
    if line := clock.ahead(now, first_s):
        warn(line)


NO_SEARCH = "the mode search"  # each note on a mode search that gave the answer nothing starts so


def _searched_notes(opts: Options, db: str, search, best) -> tuple[Feed | None, list[str]]:
    """After the mode search: the loader it measured (with real data), and the notes on what it did not measure:
    nothing at all (its baseline failed or ran out of budget), the loader, what a larger budget would add."""
    from dlperf.optimize_loader import faster_not_taken

    notes = []
    if best is None:
        b = search.baseline
        why = f"{b.status}: {b.error}" if b.error else b.status
        notes.append(f"{NO_SEARCH} measured nothing ({b.mode}: {why}): this CPU's figure is the thread search's "
                     f"{b.mode} step; what it stored is run {search.run_id} (raise --budget)")  # fmt: skip
    feed, failed = fastest_feed(db, search.run_id) if opts.data != DATA_SYNTHETIC else (None, None)
    if opts.data != DATA_SYNTHETIC and feed is None:  # the settings failed, else the budget ran out before them
        why = failed or "no loader setting was measured alone within the budget (raise --budget)"
        notes.append(f"input pipeline: not measured: {why}")
    # what a larger budget would measure, and the loader search's word on the settings it measured
    notes += [n for n in search.notes if "of the budget left" in n or n.startswith("loader:")]
    notes += faster_not_taken(search.best or search.baseline, search.results)
    if search.exit_code == ExitCode.INTERRUPTED:
        notes.append(f"interrupted: the mode search stopped; what it measured is stored in run {search.run_id}")
    return feed, notes


NO_EPOCH_NOTE = (
    f"{{}} data has no epoch: the work is {NO_EPOCH_SAMPLES:,} samples (--samples N gives your data set's size)"
)
NO_EPOCH_WORK = f"{NO_EPOCH_SAMPLES:,} samples (no epoch: synthetic data)"


def _resolved(opts: Options):
    """The workload built in a probe child (a user's file included), at --batch: its batch, its data set; with
    --data DIR that data read, as `dlperf run` reads it before anything runs (not after the thread search), and its
    size in samples (None: synthetic data, or a dataset of no length) and its batches an epoch at --batch, as the
    loader counts them (None where it cannot: then the samples' whole batches, `_work`)."""
    from dlperf.frameworks.common import capabilities
    from dlperf.plan.workloads import check_data, resolve_workload
    from dlperf.predict import count
    from dlperf.spec import make_spec, parse_workload

    workload = resolve_workload(parse_workload(opts.workload, None), capabilities.op_counter(), opts.timeout, opts.data)
    found = count.at(workload, opts.batch)  # with --data DIR: a factory that takes data_dir is given it
    if found.batch > FIT_MAX_BATCH:  # its own batch, which the CPU side measures: named, not the thread search's flag
        raise UsageError(f"{found.name}'s own batch, {found.batch:,}, is above the {FIT_MAX_BATCH:,} dlperf measures "
                         "on this CPU: give a smaller one with --batch")  # fmt: skip
    if opts.data == DATA_SYNTHETIC:
        return found, None, None
    spec = make_spec(opts.workload, data=opts.data, loaders=opts.loaders, timeout=opts.timeout)
    checked = check_data(spec, [found]).get(found.name)  # at --batch: its loader's batches are the epoch's steps
    ok = checked and not checked.unsupported
    return found, checked.samples if ok else None, checked.batches if ok else None


def searched(opts: Options) -> str:
    """The workload the mode search measures: at --batch, as a variant of its own name (`NAME@bN`, as `dlperf
    optimize` takes it and the thread search names its cells)."""
    return opts.workload if opts.batch is None else f"{opts.workload}@b{opts.batch}"


def _work(workload, opts: Options, size: int | None = None, batches: int | None = None):
    """`predict --cost`'s work and its steps, as a loader trains them (`cost.work`, `cost.epoch`: each epoch's whole
    batches, dlperf's DataLoaders dropping a partial last batch); with --data DIR of `size` samples, --epochs (1) of
    that data, its loader's own `batches` an epoch where known; synthetic data without --samples: NO_EPOCH_SAMPLES
    (steps None: its whole batches, `cost.costs`), and --epochs there refused (it has no epoch to count), before
    anything is predicted or measured."""
    from dlperf.predict import cost

    if opts.samples is None and size:
        epochs = 1.0 if opts.epochs is None else opts.epochs
        per_epoch, dropped = cost.epoch(size, workload.batch, batches)  # as `predict --cost` counts one
        total, steps = max(1, round(size * epochs)), max(1, round(per_epoch * epochs))
        said, end = ("one epoch", ")") if epochs == 1 else (f"{epochs:g} epochs", f"): {total:,} samples")
        return total, cost.parted(f"{said} of your data ({size:,} samples, --data", end, dropped, "an epoch"), steps
    if opts.samples is None and cost.epoch_samples(workload) is None:
        if opts.epochs is not None:
            raise UsageError(f"--epochs: {workload.name} trains on {workload.data} data, which has no epoch: give "
                             "the work with --samples N (e.g. your data set's size)")  # fmt: skip
        return NO_EPOCH_SAMPLES, cost.Work(NO_EPOCH_WORK), None
    return cost.work(workload, opts.samples, opts.epochs)


def gpu_modes(gpu) -> tuple[str, ...]:
    """What `gpu` is predicted in: fp32, and its mixed precision where it has a tensor unit for one."""
    return ("fp32", gpu.mixed()) if gpu.mixed() else ("fp32",)


def predicted(workload, chosen, samples: int, what, deadline: float | None, timeout: float,
              steps: int | None = None):  # fmt: skip
    """The GPUs' part of the answer: the work's time and cost on each GPU in its modes (`gpu_modes`; in `steps`
    where a loader counts them, `_work`), the largest batch that fits where the step does not, the notes that say
    which GPUs are predicted in what, and the step's predicted peak per mode (`memory.peaks`)."""
    from dlperf.predict import cost, count, memory, roofline, validate

    modes = [m for m in PRECISIONS if any(m in gpu_modes(g) for g in chosen)]
    found = count.counted([(workload, m) for m in modes], timeout, "--timeout")
    predictions = [roofline.predict(c, g) for g in chosen for c in found if c.mode in gpu_modes(g)]
    peaks = memory.peaks(workload, modes, timeout, "--timeout")
    costs = cost.costs(workload, predictions, samples, what, {}, deadline, peaks, steps)
    costs.largest = memory.largest_left_out(workload, costs.left_out, timeout)
    return costs, costs.largest, [*mode_notes(chosen), *validate.caveats(workload, chosen, modes, predictions)], peaks


def mode_notes(chosen) -> list[str]:
    """The GPUs not predicted in bf16, and why: fp16 where a GPU has no bf16 unit, fp32 alone where it has neither."""
    fp16 = [g.name for g in chosen if g.mixed() == "fp16"]
    fp32 = [g.name for g in chosen if g.mixed() is None]
    notes = []
    if fp16:
        notes.append(f"no bf16 unit: {', '.join(fp16)} predicted in fp32 and fp16 (float16 autocast with gradient "
                     "scaling, as they are trained), not bf16; each GPU above is named with the mode of its "
                     "figures")  # fmt: skip
    if fp32:
        notes.append(f"no half-precision tensor unit: {', '.join(fp32)} predicted in fp32 only")
    return notes


def _search_code(search) -> int:
    """The mode search's exit code, for advise's: one whose fp32 baseline the budget stopped or left unstarted
    (optimize's exit 1, nothing measured) is 0 here, as a search skipped for the budget is: the answer stands on the
    thread search's step, and a note says to raise --budget; a baseline that failed on its own is 1, and an
    interrupted search 130."""
    from dlperf.runner.sweep import Deadline
    from dlperf.vocab import Status

    b = search.baseline
    if search.exit_code == ExitCode.INTERRUPTED:  # Ctrl-C left the baseline pending: an interrupt, not the budget
        return search.exit_code
    if b.status == Status.PENDING or (b.status == Status.TIMEOUT and Deadline.REASON in (b.error or "")):
        return ExitCode.OK
    return search.exit_code


def _search(opts: Options, threads: int, clock: Clock, db: str, warn):
    from dlperf import optimize

    budget_s = clock.left(time.monotonic())  # taken last: the search's deadline is the command's
    return optimize.optimize(
        optimize.Options(searched(opts), threads=threads, budget_s=budget_s, repeats=1, timeout=opts.timeout,
                         compile_timeout=min(opts.timeout, budget_s), data=opts.data, loaders=opts.loaders,
                         flags=opts.flags),
        db, warn=warn, made_by="advise",
    )  # fmt: skip
