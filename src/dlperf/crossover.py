"""`dlperf crossover`: from which batch a GPU is predicted faster than this CPU, measured.

The CPU side is measured and stored as a normal run (so `dlperf table`, `report` and `merge` see it): the workload at
each batch, one cell per batch, all at the CPU's best thread count. Unless `--threads` names it, the best count is
found first by measuring the user's batch at the default thread counts. Cells are keyed by workload name, so each
batch is a variant of its own name (`tiny-fcn-r@b8`); the cells table keeps its batch.

The GPU side is predicted (`predict/roofline.py`, the batch crossing the host link every step) for each GPU at each
batch, and stored beside the CPU cell of that batch; a CUDA cell of the same workload and batch in the store (a GPU
machine's run merged in) is used instead, labelled measured (`report/crossover.py`). The predictions are stored before
the batches are measured: a crossover interrupted after its thread search is finished by `dlperf run --resume`, which
prints the crossover (`commands/run.show_resumed`).

Before anything is measured, the step's memory is checked (a batch this machine cannot hold is refused in seconds,
with the largest batch that fits), then the operators are counted: a workload the counter cannot take fails, and no
run is stored for it. The warm parent its cells fork from is started before the count, its imports overlapping it.

Errors and notes name `dlperf crossover`'s flags where the command asks (`Options.flags`), a Python caller's own
arguments (`max_batch=8`) otherwise.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dlperf.api import beside_since, warn_stderr
from dlperf.defaults import BRACKET
from dlperf.errors import UsageError
from dlperf.loaders import DATA_SYNTHETIC
from dlperf.measure.timer import TimerConfig
from dlperf.measure.units import plural
from dlperf.plan import Plan, make_plan
from dlperf.plan.estimate import Earlier, first_process_s, known_durations
from dlperf.predict import roofline
from dlperf.protocol import Cell
from dlperf.report import crossover as view
from dlperf.report.charts import disturbances
from dlperf.report.fastest import tie, told_apart
from dlperf.runner import warm
from dlperf.runner.session import Session
from dlperf.runner.sweep import Deadline, Interrupted
from dlperf.runner.tasks import processes, schedule
from dlperf.spec import CROSSOVER_TIMER, RunSpec, make_spec
from dlperf.store import Store
from dlperf.store.location import given_db, said_to
from dlperf.store.records import Prediction
from dlperf.vocab import ExitCode, Status
from dlperf.workloads.base import Workload

MODES = ("fp32", "bf16", "fp16")  # a CPU mode that is also a GPU precision the predictor knows
SMALL_BATCHES = f"at small batches a GPU's step is mostly a fixed cost, {roofline.HOST_ISSUING}"
LEAST_LIMIT = 256  # the default batches go up to the workload's batch or this, whichever is larger
FLAGS = {"gpus": "--gpu", "batches": "--batches", "max_batch": "--max-batch", "batch": "--batch", "mode": "--mode",
         "repeats": "--repeats", "timeout": "--timeout", "threads": "--threads"}  # fmt: skip


@dataclass
class Options:
    workload: str
    gpus: tuple[str, ...] = BRACKET  # a data-centre GPU of today and a T4-class cloud GPU: why, in `defaults.BRACKET`
    batches: tuple[int, ...] | None = None  # None: powers of two up to max(the workload's batch, 256)
    max_batch: int | None = None
    batch: int | None = None  # the user's batch (None: the workload's)
    threads: int | None = None  # None: the fastest of the default thread counts at the user's batch
    mode: str = "fp32"
    repeats: int = 1
    timeout: float = 600.0  # seconds per process: each cell's, and the operator count's
    timer: TimerConfig = CROSSOVER_TIMER
    deadline: float | None = None  # time.monotonic() past which the thread search stops (`CpuSide.best_threads`)
    # with a deadline: told, just before the first thread count's process (which the deadline does not stop), about
    # how long it takes: from its cell's earlier processes on this machine, the FLOP count and the memory step left
    # out where kept (`estimate.first_process_s`; None: none ran here)
    first: Callable[[float | None], None] | None = None
    flags: bool = False  # errors and notes name the command's flags (`dlperf crossover`, `advise`), else these fields
    # `dlperf advise --data DIR`: the folder a factory that takes `data_dir` is built with; its steps are still on
    # synthetic data here (no loader setting measured: the mode search measures those)
    data: str = DATA_SYNTHETIC

    def named(self, field_name: str) -> str:
        """How the caller gave a field: its flag on the command line (`--max-batch`), else its own name."""
        return FLAGS[field_name] if self.flags else field_name

    def said(self, field_name: str, value) -> str:
        """A field's value as the caller gave it: `--max-batch 8` on the command line, `max_batch=8` in Python."""
        return f"{FLAGS[field_name]} {value!r}" if self.flags else f"{field_name}={value!r}"


@dataclass
class Result:
    run_id: int | None
    answer: view.Crossover | None
    exit_code: int
    notes: list[str] = field(default_factory=list)
    resumable: bool = False  # interrupted with every batch's cell in the run: `dlperf run --resume` measures the rest
    first_s: float | None = None  # with a deadline: the first thread count's process, measured whole (its seconds)
    threads_cut: tuple[int, ...] = ()  # the thread counts the deadline left unmeasured (`CpuSide.cut`)


def batches_for(user_batch: int, batches: tuple[int, ...] | None, max_batch: int | None, opts: Options | None = None
                ) -> list[int]:  # fmt: skip
    """The batches measured, ascending: those asked for, or the powers of two up to max(user's batch, 256), and the
    user's batch (the answer's own line: the thread search measures it anyway); at most `max_batch` (`opts`: how the
    caller named it; the command line's flag by default)."""
    if batches is None:
        top = max(user_batch, LEAST_LIMIT)
        batches = tuple(2**k for k in range(top.bit_length()) if 2**k <= top)
    chosen = sorted({b for b in (*batches, user_batch) if max_batch is None or b <= max_batch})
    if not chosen:
        said = (opts or Options("", flags=True)).said("max_batch", max_batch)
        raise UsageError(f"{said}: below every batch asked for ({min(batches)} and up)")
    return chosen


def search_batch(user_batch: int, batches: list[int], max_batch: int | None) -> int:
    """The batch the thread count is searched at: the user's, unless `--max-batch` is below it (no batch above it is
    measured), then the largest batch measured."""
    return user_batch if max_batch is None or user_batch <= max_batch else max(batches)


def check(opts: Options) -> tuple:
    """The GPUs looked up, the workload and the mode checked, before anything runs: a bad name is one line."""
    from dlperf.predict import gpus
    from dlperf.spec import parse_workload

    name = opts.workload
    if "," in name:
        raise UsageError(f"unknown workload {name!r}: one built-in name (dlperf list) or a user's file.py:factory")
    parse_workload(name, None)  # a misspelt name, or a file named without its factory, is one line naming the choices
    if opts.mode not in MODES:
        raise UsageError(f"{opts.said('mode', opts.mode)}: expected {', '.join(MODES)} (a CPU mode the GPU predictor "
                         "knows)")  # fmt: skip
    if opts.repeats < 1:
        raise UsageError(f"{opts.named('repeats')} must be at least 1")
    asked = {"batches": opts.batches or (), "max_batch": [opts.max_batch], "batch": [opts.batch]}
    for name, values in asked.items():  # as the command line's parser says it, a Python caller's value named so
        for b in values:
            if b is not None:
                _batch_checked(opts, name, b)
    _batches_agree(opts)
    return gpus.parse_gpus(",".join(opts.gpus), opts.named("gpus"))


def _batches_agree(opts: Options) -> None:
    """The batch fields that contradict each other, refused rather than one of them dropped: a batch named one by
    one above the cap (beside them, the cap keeps out the workload's own batch), and a batch of the user's (measured,
    for the speed-up there) outside them."""
    batches, most, mine = opts.named("batches"), opts.named("max_batch"), opts.named("batch")
    if opts.batches and opts.max_batch is not None and (over := [b for b in opts.batches if b > opts.max_batch]):
        raise UsageError(f"{batches} {','.join(map(str, opts.batches))} names {','.join(map(str, over))}, above "
                         f"{opts.said('max_batch', opts.max_batch)}: give the batches up to it, or a larger "
                         f"{most}")  # fmt: skip
    if opts.batch is None:
        return
    if opts.batches and opts.batch not in opts.batches:
        listed = ",".join(map(str, opts.batches))
        raise UsageError(f"{opts.said('batch', opts.batch)} is not among {batches} {listed}: your batch is measured, "
                         f"for the speed-up there; add it to {batches}")  # fmt: skip
    if opts.max_batch is not None and opts.batch > opts.max_batch:
        raise UsageError(f"{opts.said('batch', opts.batch)} is above {opts.said('max_batch', opts.max_batch)}: your "
                         f"batch is measured, for the speed-up there; give a {most} from {opts.batch}, or a smaller "
                         f"{mine}")  # fmt: skip


def countable(workload: Workload, batches: list[int], user_batch: int, opts: Options, warn) -> tuple[list, list[int]]:
    """Each batch's operator count, and the batches kept: a default batch whose step cannot be counted (a model of
    BatchNorm at batch 1: 'Expected more than 1 value per channel') is left out, said, where the user's own batch
    and another can be; a batch asked for (--batches), or the user's, that cannot be is refused in one line."""
    from dlperf.predict import count

    requests = [(count.at(workload, b), opts.mode) for b in batches]
    found = count.counts(requests, opts.timeout, opts.named("timeout"))
    failed = {b: why for b, why in zip(batches, found, strict=True) if isinstance(why, str)}
    if failed and (opts.batches or user_batch in failed):
        b = user_batch if user_batch in failed else next(iter(failed))
        raise count.refused(count.at(workload, b), opts.mode, failed[b], "its operators cannot be counted",
                            "the counter's")  # fmt: skip
    for b, why in failed.items():
        warn(f"batch {b} left out of the batches measured: {workload.name}'s step cannot be counted there ({why})")
    return [c for c in found if not isinstance(c, str)], [b for b in batches if b not in failed]


def _batch_checked(opts: Options, name: str, b) -> None:
    """`flagtext.batch_number`'s check of a batch field: its error names the flag and the text typed, or a Python
    caller's argument and value (`max_batch=0`)."""
    from dlperf.flagtext import batch_number

    try:
        batch_number(str(b), FLAGS[name])
    except UsageError as exc:
        if not opts.flags:
            exc.args = (str(exc).replace(f"{FLAGS[name]} {str(b)!r}", opts.said(name, b), 1),)
        raise


def crossover(
    opts: Options,
    db: str | None = None,
    *,
    argv: list[str] | None = None,
    progress_factory: Callable | None = None,
    warn: Callable[[str], None] | None = None,
    made_by: str = "crossover",
) -> Result:
    """Measure the CPU at each batch, predict each GPU there, store both as one run, and answer. `made_by`: the
    command whose run it is (`dlperf advise` measures through this one). What the search's checks say beyond its
    own lines (a thread count, the store) names a Python caller's arguments too (`said_to`)."""
    # the plan's warnings too (`--threads 64 exceeds the cores`); its probes and cells forked from one warm parent
    with said_to(opts, FLAGS) as say, warm.probes_share():
        result = _crossover(opts, db, argv, progress_factory, lambda line: (warn or warn_stderr)(say(line)), made_by)
    result.notes = [say(n) for n in result.notes]
    return result


def _crossover(opts: Options, db: str | None, argv, progress_factory, warn, made_by: str) -> Result:
    db = given_db(db)
    gpus = check(opts)
    beside = beside_since(db)
    plan = make_plan(_spec(opts))
    workload = Workload.from_json(plan.workloads[plan.cells[0].key])
    user_batch = opts.batch or workload.batch
    batches = batches_for(user_batch, opts.batches, opts.max_batch, opts)
    check_room(workload, batches, opts)  # first: a step this machine cannot hold is refused in seconds
    forkable = warm_up(plan, workload, batches, opts)
    counted, batches = countable(workload, batches, user_batch, opts, warn or warn_stderr)
    for warning in plan.warnings:  # once the request is whole: bad input stays one line
        (warn or warn_stderr)(warning)
    store = Store.open(db, create=True)
    try:
        session = Session.create(
            store, plan.spec, plan.env, plan.cores, argv or ["dlperf", *sys.argv[1:]], made_by=made_by
        )
        session.forkable = forkable  # the processes its warm parent was started for
        beside(store, session.run_id, warn)
        counts = [opts.threads] if opts.threads else [c.threads for c in plan.cells]
        searched = 0 if opts.threads else len(counts) - 1  # the search batch at the other thread counts
        cpu = CpuSide(session, workload, progress_factory or _progress((len(batches) + searched) * opts.repeats),
                      opts.deadline, opts, _earlier(db, plan) if opts.first else {})  # fmt: skip
        notes: list[str] = []
        threads = opts.threads
        try:
            threads = threads or cpu.best_threads(counts, user_batch, batches, opts.max_batch, notes)
            left = cpu.add([(b, threads) for b in batches if not cpu.added(b, threads)])
            # each batch's GPU steps beside its cell before it is measured: a run cut short keeps them, and
            # `dlperf run --resume` measuring the cells left makes the crossover whole
            store.record_predictions(session.run_id, [
                _prediction(n, gpu, cpu.cell(n.batch, threads).key, user_batch) for n in counted for gpu in gpus
            ])  # fmt: skip
            cpu.measure(left, last=True)
        except Interrupted as stop:
            notes += stop.notes()
            return replace(_interrupted(session, threads is not None, notes), first_s=cpu.first_s)
        except NoCpuStep as exc:
            session.complete()
            return Result(session.run_id, None, ExitCode.CELLS_FAILED, [str(exc)], first_s=cpu.first_s)
        failed = any(not c.ok and not budget_cut(c) for c in session.cells())
        notes += _notes(opts, gpus, user_batch, batches) + cell_notes(store, session.run_id)
        code = ExitCode.CELLS_FAILED if failed else ExitCode.OK
        return Result(session.run_id, _answer(session), code, notes, first_s=cpu.first_s, threads_cut=cpu.cut)
    finally:
        store.close()


def cell_notes(store: Store, run_id: int) -> list[str]:
    """`dlperf table`'s notes on the run's CPU cells (other processes' load, noise, few timed steps, a warm-up that
    did not settle): the steps each speed-up is set against, said where they are not to rely on."""
    from dlperf.report import table

    return table.build(run_id, store.cells(run_id, unreadable=lambda fault: None)).notes


def _earlier(db: str, plan: Plan) -> dict[str, list[Earlier]]:
    """Cell key -> its earlier processes on this machine (`plan.estimate`), for `CpuSide.known`."""
    from dlperf import envinfo

    return known_durations(db, envinfo.fingerprint(plan.env), plan.spec.timer)


def _interrupted(session: Session, planned: bool, notes: list[str]) -> Result:
    """What an interrupt left: the answer from the batches measured; `planned`: the thread search had ended and
    every batch's cell was in the run, for `dlperf run --resume` to measure those left."""
    answer = _answer(session)
    done = sum(1 for r in answer.rows if r.cpu) if answer else 0
    if not planned:
        notes.append("interrupted during the thread search, before the batches were measured: no answer")
    elif not done:
        notes.append("interrupted before a batch was measured: no answer")
    else:
        notes.append(f"interrupted: the answer is from the {done} of {plural(len(answer.rows), 'batch', 'es')} "
                     "measured before the interrupt")  # fmt: skip
    return Result(session.run_id, answer if done else None, ExitCode.INTERRUPTED, notes, resumable=planned)


def warm_up(plan: Plan, workload: Workload, batches: list[int], opts: Options) -> dict:
    """Start the warm parent the cells measured will fork from (the thread counts at the search batch, then the other
    batches at the count found; or each batch at --threads) before the operators are counted, so that its imports
    overlap the count's; the processes counted for it (`warm.prepare`), which the session goes on from."""
    if opts.threads is None:
        at = search_batch(opts.batch or workload.batch, batches, opts.max_batch)
        first = [cpu_cell(plan.spec, workload, at, c.threads) for c in plan.cells]
        threads = plan.cells[0].threads  # one of the counts: which the search finds is not known yet
        first += [cpu_cell(plan.spec, workload, b, threads) for b in batches if b != at]
    else:
        first = [cpu_cell(plan.spec, workload, b, opts.threads) for b in batches]
    forkable: dict = {}
    warm.prepare(processes(schedule(first, plan.spec.repeats)), plan.spec.max_memory, forkable)
    return forkable


def check_room(workload: Workload, batches: list[int], opts: Options) -> None:
    """A batch whose step this machine's memory cannot hold (its peak predicted, as `dlperf advise` checks its own:
    `memory.no_room_here`) is refused in one line before anything is started, measured or stored: the smallest batch,
    else the largest (every batch is measured), then with the largest batch that fits, searched as `predict --memory`
    searches a GPU's (`memory.largest_here`); a step that cannot be traced is measured as before."""
    from dlperf.predict import count, memory

    asked = [count.at(workload, b) for b in sorted({min(batches), max(batches)})]
    traced = memory.traces([(w, opts.mode, w.batch) for w in asked], opts.timeout, opts.named("timeout"))
    for w, peak in zip(asked, traced, strict=True):
        # batch 1 refused: no batch fits
        why = memory.no_room_here(
            w, None if isinstance(peak, str) else peak.total, opts.mode, 0 if w.batch == 1 else None
        )
        if why and w.batch > min(batches):
            known = {w.batch: p.total for w, p in zip(asked, traced, strict=True) if not isinstance(p, str)}
            most = memory.largest_here(workload, opts.mode, known, opts.timeout, opts.named("timeout"))
            why += f"; {_fitting(opts, most)} measures the batches that fit ({most}: the largest predicted to)"
        if why:
            raise UsageError(f"{workload.name}: {why}")


def _fitting(opts: Options, most: int) -> str:
    """The batch fields that measure no batch above `most`, as `_batches_agree` takes them: --max-batch, or --batches
    up to it where the batches were named (and a --batch of the user's above it brought down to it)."""
    fix = f"{opts.named('batches')} up to {most}" if opts.batches else opts.said("max_batch", most)
    if opts.batch is not None and opts.batch > most:
        fix += f" with {opts.named('batch')} up to {most}"
    return fix


def cpu_cell(spec: RunSpec, workload: Workload, batch: int, threads: int) -> Cell:
    """The CPU's cell of `workload` at `batch` and `threads`: a variant of its own name per batch."""
    return Cell(view.variant_name(workload.name, batch), spec.frameworks[0], "cpu", threads, spec.modes[0])


def _spec(opts: Options) -> RunSpec:
    """The CPU's run: the workload at the user's batch at each default thread count (or `--threads`); each batch's
    cell is added as it is measured."""
    return make_spec(
        [opts.workload],
        devices=["cpu"],
        threads=None if opts.threads is None else [opts.threads],
        modes=[opts.mode],
        repeats=opts.repeats,
        timeout=opts.timeout,
        loss_check=False,
        timer=opts.timer,
        data=opts.data,
        loaders=None if opts.data == DATA_SYNTHETIC else (),
    )


def _prediction(n, gpu, cell_key: str, user_batch: int) -> Prediction:
    """A GPU's step at a batch (the batch copied over the host link each step), the store's row beside the CPU cell."""
    from dlperf.predict import roofline

    p = roofline.predict(n, gpu, transfer=True)
    detail = {view.KIND: {"user_batch": user_batch}, "kernels": p.kernels, "parts": p.parts}
    return Prediction(cell_key, gpu.name, p.mode, p.batch, p.step_s, p.device_s, p.transfer_s, p.bound, detail)


def _notes(opts: Options, gpus, user_batch: int, batches: list[int]) -> list[str]:
    notes = []
    for gpu in gpus:
        _, unit = gpu.peak(opts.mode, tensor=False)
        if opts.mode != "fp32" and not unit.startswith(opts.mode):
            notes.append(f"{gpu.name} has no {opts.mode} unit: its {opts.mode} steps are predicted at the {unit} rate")
    if user_batch not in batches:
        notes.append(f"your batch {user_batch} was not measured: it is above {opts.said('max_batch', opts.max_batch)}")
    notes.append(SMALL_BATCHES)
    return notes


def budget_cut(cell) -> bool:
    """A cell the thread search's deadline stopped or left unstarted (`dlperf advise`'s --budget): not a failure."""
    return cell.status == Status.PENDING or Deadline.REASON in (cell.error or "")


class NoCpuStep(Exception):
    """The user's batch measured at no thread count: there is nothing to choose the others' count from."""


@dataclass
class CpuSide:
    """The CPU side of a crossover: the workload at a batch and a thread count is a cell of the session."""

    session: Session
    workload: Workload
    progress_factory: Callable
    deadline: float | None = None  # `Options.deadline`
    opts: Options | None = None  # how the caller named its options (the command line's flags by default)
    known: dict[str, list[Earlier]] = field(default_factory=dict)  # cell key -> its earlier processes here
    first_s: float | None = None  # the first thread count's process under a deadline, as long as it took
    cut: tuple[int, ...] = ()  # the thread counts the deadline left unmeasured

    def cell(self, batch: int, threads: int) -> Cell:
        return cpu_cell(self.session.spec, self.workload, batch, threads)

    def added(self, batch: int, threads: int) -> bool:
        return self.cell(batch, threads).key in self.session.workloads

    def add(self, pairs: list[tuple[int, int]]) -> list[Cell]:
        """Each (batch, threads) a new cell of the run, pending; those cells."""
        new = [self.cell(b, threads) for b, threads in pairs]
        for cell, (b, _) in zip(new, pairs, strict=True):
            self.session.add([cell], replace(self.workload, name=cell.workload, batch=b).to_json())
        return new

    def measure(self, cells: list[Cell], *, last: bool) -> None:
        """`cells` measured, each in --repeats processes; `last`: the run is complete after them."""
        self.session.measure(schedule(cells, self.session.spec.repeats), self.progress_factory, last=last)

    def best_threads(self, counts: list[int], user_batch: int, batches: list[int], max_batch: int | None,
                     notes: list[str]) -> int:  # fmt: skip
        """Measure the search batch (`search_batch`) at each thread count; the fastest count, said in `notes`. With
        a deadline the largest count goes first, always measured whole (the answer's one CPU step: `first_s`, its
        time, announced to `Options.first` as its earlier processes here say it: `estimate.first_process_s`, the
        FLOP count and the memory step left out where kept), and the others within the
        deadline: stopped at it, or not started past it."""
        batch = search_batch(user_batch, batches, max_batch)
        order = sorted(counts, reverse=True) if self.deadline is not None else counts
        cells = self.add([(batch, t) for t in order])
        if self.deadline is not None and self.opts is not None and self.opts.first is not None:
            first = cells[0]
            self.opts.first(first_process_s(self.known.get(first.key), first, self.session.workloads[first.key]))
        began = time.monotonic()
        self.measure(cells[:1], last=False)
        self.first_s = time.monotonic() - began if self.deadline is not None else None
        self.session.deadline = self.deadline  # the others: no process outlives it (`runner/sweep.py`)
        try:
            self.measure(cells[1:], last=False)
        finally:
            self.session.deadline = None
        keys = {self.cell(batch, t).key: t for t in order}
        mine = [c for c in self.session.cells() if c.key in keys]
        measured = [c for c in mine if c.ok and c.median_s]
        if not measured:
            errors = "; ".join(sorted({c.error or c.status.value for c in self.session.cells()}))
            raise NoCpuStep(f"the CPU measured batch {batch} at no thread count ({errors}): no crossover")
        fastest = min(measured, key=lambda c: c.median_s)
        opts = self.opts or Options("", flags=True)
        above = (
            f" (your batch {user_batch} is above {opts.said('max_batch', max_batch)})" if batch != user_batch else ""
        )
        self.cut = tuple(keys[c.key] for c in mine if budget_cut(c))
        more = "raise --budget" if opts.flags else "a later deadline"
        left = f"; {_listed(self.cut)} not measured: the budget ran out ({more})" if self.cut else ""
        tried = sorted(keys[c.key] for c in measured)  # a count that failed was compared with none (none starred)
        failed = sorted(t for t in order if t not in tried and t not in self.cut)
        left += f"; {_listed(failed)} failed" if failed else ""
        where = f" at batch {batch}{above}"
        notes.append(f"threads: {keys[fastest.key]} {_fastest_of(fastest, measured, tried, keys, where)}{left}")
        return keys[fastest.key]


def _fastest_of(fastest, measured: list, tried: list[int], keys: dict, where: str) -> str:
    """How the count taken stands among those measured, judged as `dlperf table` stars one
    (`report.table.Row.best_cpu_column`): its lead beside a disturbed cell, or within the noise, is taken still but
    not claimed (said "the fastest of 2, 1" where the table's note said no count was starred)."""
    if len(tried) < 2:
        return f"was the only count measured{where}"
    said = f"was fastest of {_listed(tried)}{where}"
    if any(disturbances(c) for c in measured):
        return f"{said}, not starred: a compared cell was disturbed (its note says how)"
    tied = [c for c in measured if c is not fastest and not told_apart(fastest, c)]
    if tied:
        return f"{said}, within the noise of {_listed([keys[c.key] for c in tied])}: {tie([fastest, *tied])}"
    return said


def _listed(items) -> str:
    """1, 2 and 4."""
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _progress(items: int):
    """One count over the thread search's processes and the batches': `[3/9]` on from the search's `[2/9]`."""
    from dlperf.progress import Running

    return Running(items)


def _answer(session: Session) -> view.Crossover | None:
    found = view.read(session.store, [session.run_id])
    return found[0] if found else None


def paper(timeout: float = 1800.0) -> list[view.PaperRow]:
    """The paper's seven networks at their batch, predicted on its GTX 1080 in fp32 with no copy (its synthetic data
    was made on the GPU), beside its own GTX 1080 figures. No CPU run."""
    from dlperf.predict import count, gpus, roofline
    from dlperf.workloads import SUITE

    gpu = gpus.own(view.PAPER_GPU)
    counted = count.counted([(w, "fp32") for w in SUITE], timeout)
    predicted = [roofline.predict(n, gpu, transfer=False) for n in counted]
    return view.paper_rows(
        [(w.name, w.paper, w.batch, p.step_s, p.bound) for w, p in zip(SUITE, predicted, strict=True)]
    )
