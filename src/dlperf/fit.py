"""`dlperf fit`: the largest batch that trains without running out of memory on this device, measured.

Each try is one cell of one run (so `dlperf table`, `report` and `export` see them): the workload at a batch, named
as a variant of its own (`tiny-fcn-r@b8`, as `dlperf crossover` names its batches), measured in its own child
process with short timers. The search starts at the workload's batch and doubles it until a try runs out of memory,
then bisects between the last batch that fit and the first that did not, so the answer N is the true boundary: N
was measured, N+1 was tried and ran out of memory. From the second batch that fits, the tries' peak memory says
where the limit would be reached, and the search tries there rather than doubling step by step (`fit_search.py`),
never making more tries than the doubling and bisection could, which it says before the first (`Search.outline`)
and counts down in the progress (`[3/≤19]`). An out-of-memory error fails only its try, stored as `failed` with the
reason "out of memory at batch N ..."; any other failure stops the search of that mode, said as such.

On the CPU the limit is the child's data segment (RLIMIT_DATA, set before the framework is imported:
`worker/cell.py`), `--max-memory` or, without it, the memory available when fit starts; on a GPU it is the GPU's
own memory (CUDA's OutOfMemoryError). A limit below what a process needs to start (measured by a probe child: the
framework loaded, its threads started) is refused before anything runs.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from dlperf.errors import UsageError
from dlperf.fit_search import SLACK, Line, cost, line_of, next_batch, worst
from dlperf.measure.timer import TimerConfig
from dlperf.measure.units import plural
from dlperf.protocol import Cell
from dlperf.report.fit import NO_KERNEL  # oneDNN's refusal, as the report reads it too
from dlperf.report.format import duration
from dlperf.spec import FIT_MAX_BATCH, FIT_TIMER, RunSpec, make_spec
from dlperf.store.records import CellRecord
from dlperf.vocab import KILLED_OUT_OF_MEMORY, LOAD_UNREAD, OUT_OF_MEMORY, ExitCode, Status

DEVICE = re.compile(r"^(cpu|mps|cuda(:[0-9]+)?)$", re.ASCII)


@dataclass
class Options:
    workload: str
    device: str = "cpu"
    modes: tuple[str, ...] = ("fp32",)
    max_memory: int | None = None  # bytes, CPU only; None: the memory available when fit starts
    max_batch: int = FIT_MAX_BATCH
    threads: int | None = None  # None: the largest of the default thread counts (the cores)
    timeout: float = 300.0  # seconds per try
    timer: TimerConfig = FIT_TIMER
    flags: bool = False  # errors and notes name the command's flags (`dlperf fit`), else these fields (`said_to`)


FLAGS = {"device": "--device", "modes": "--modes", "max_memory": "--max-memory", "max_batch": "--max-batch",
         "threads": "--threads", "timeout": "--timeout"}  # fmt: skip


@dataclass(frozen=True)
class Try:
    """One batch tried: fits (measured), ran out of memory, or failed otherwise (the search stops there)."""

    batch: int
    status: str  # the cell's status: ok, failed, timeout
    out_of_memory: bool
    peak_mem_bytes: int | None
    peak_mem_kind: str | None
    samples_per_s: float | None
    reason: str | None
    steps: int = 0  # timed steps behind samples_per_s
    duration_s: float | None = None  # the try's process, start to end
    warmup_steps: int = 0  # the steps before the timed ones
    median_s: float | None = None  # the median timed step, of `steps`: samples_per_s is batch / median_s
    timing: tuple[str, ...] = ()  # what dlperf run notes of the steps' timing (other processes' load, noisy, ...)
    faults_per_step: float | None = None  # a CPU try's page faults a timed step (the limit lifted by then)
    stepping_s: float | None = None  # the process's time in steps, measured (`stepping`); None: not known
    data_peak_bytes: int | None = None  # a CPU try's: the most its data segment held under the limit (what it counts)

    @classmethod
    def of(cls, cell: CellRecord, batch: int, duration_s: float | None = None, phases: dict | None = None) -> Try:
        from dlperf.report.fit import fitted, out_of_memory
        from dlperf.report.table import note_kind

        oom = out_of_memory(cell)
        rate = batch / cell.median_s if fitted(cell) and cell.median_s else None
        # and a loss that was not finite: the batch fits, but the steps timed did not train (optimize's NaN model)
        # not a load left unread (a --min-time below `FIT_TIMING`'s, on one CPU): a try's rate is an aside here
        said = tuple(w for w in cell.warnings if (note_kind(w) == "noise" and not w.startswith(LOAD_UNREAD))
                     or w.startswith("loss not finite:"))  # fmt: skip
        timing = said if rate else ()
        faults = cell.minor_faults_per_step if rate and cell.device == "cpu" else None
        data = cell.memory_figures.get("data_peak_bytes") if cell.ok else None
        return cls(batch, cell.status.value, oom, cell.peak_mem_bytes, cell.peak_mem_kind, rate, cell.error,
                   cell.n if rate else 0, duration_s, cell.warmup_steps or 0, cell.median_s if rate else None,
                   timing, faults, stepping(phases), data)  # fmt: skip

    @property
    def fitted(self) -> bool:
        """Its batch fits: measured, or its timed steps kept before --timeout stopped it (`report.fit.fitted`)."""
        return self.status == Status.OK or (self.status == Status.TIMEOUT and self.steps > 0)

    @property
    def disturbed(self) -> list[str]:
        """What says the rate is not the batch's own speed: other processes or another machine took the CPUs while
        its steps were timed, or the steps varied widely (run's notes; a rate of few steps is marked on its own)."""
        return [w for w in self.timing if w.startswith(UNSTEADY)]


def stepping(phases: dict[str, float | None] | None) -> float | None:
    """A try's time in steps from its process's phases (`collect.phases`): the first step of a compiled mode, then
    from there to the warm-up's end, which holds a CPU try's verdict (`worker/cell.fit_verdict`: its steps under the
    limit, slower than the timed ones, and neither warm-up nor timed steps), then the timed steps. None without them."""
    if not phases or phases.get("warmup_s") is None:
        return None
    return sum(phases.get(name) or 0.0 for name in ("compile_s", "warmup_s", "timed_s"))


def as_fit_reads(tried: Try, fits: dict[int, bool], limit: int | None = None) -> Try:
    """A try as fit reads it: a process a signal ended where the launcher says it ran out of memory (`said_killed`),
    or a refusal or loss that was the batch not fitting (`no_kernel_is_memory`), as out of memory; else as stored."""
    if tried.status == Status.FAILED and KILLED_OUT_OF_MEMORY.match(tried.reason or ""):
        return said_killed(tried, limit)
    return no_kernel_is_memory(tried, fits, limit)


def no_kernel_is_memory(tried: Try, fits: dict[int, bool], limit: int | None = None) -> Try:
    """oneDNN says "could not create a primitive" where it has no kernel for a dtype (`unsupported`, naming the mode's
    precision: frameworks/torch/step.py), and also where the limit leaves no memory to create one. A mode that fitted
    at a smaller batch has its kernels: at a larger batch that refusal is the batch not fitting (seen: bf16 at batch 16
    under the limit, after batch 8 fitted), said as the worker says a try out of memory (`worker/cell.oom_reason`),
    with oneDNN's own words. So, under a CPU limit, are that refusal raised as a plain error (in a backward pass,
    which the step does not name: tiny-resnet-56 at batch 2,370 under 400 MiB, where 2,343 fits), a call that failed
    without an error (`LOST`) and a process that aborted (`ABORTED`). `limit`: the try's, in bytes."""
    reason, failed = tried.reason or "", limit is not None and tried.status == Status.FAILED
    refused = NO_KERNEL in reason and (tried.status == Status.UNSUPPORTED or failed)
    lost = failed and reason.startswith((LOST, ABORTED))
    if not (refused or lost) or not (ran := [b for b, ok in fits.items() if ok and b < tried.batch]):
        return tried
    under = "" if limit is None else f" under --max-memory {limit / 2**20:,.0f} MiB"
    said = re.search(rf"\(({NO_KERNEL}[^)]*)\)", reason)
    why = "oneDNN refused" if refused else "the process aborted" if reason.startswith(ABORTED) else LOST_WHY
    return replace(tried, status=Status.FAILED.value, out_of_memory=True,
                   reason=f"{OUT_OF_MEMORY} at batch {tried.batch}{under}: {why} under the limit, where batch "
                          f"{max(ran)} of this mode ran ({said.group(1) if said else tried.reason})")  # fmt: skip


def said_killed(tried: Try, limit: int | None) -> Try:
    """A try whose process a signal ended where the launcher's words say it ran out of memory
    (`launch.signal_reason`: the kernel's out-of-memory killer counted a kill, an allocation failed and it aborted):
    the batch not fitting, with or without a limit, as the cell says it; any other signal stays a crash, which ends
    the search (an abort under the limit above a batch that fitted aside: `no_kernel_is_memory`)."""
    under = "" if limit is None else f" under --max-memory {limit / 2**20:,.0f} MiB"
    said = f"{OUT_OF_MEMORY} at batch {tried.batch}{under}: {tried.reason}"
    return replace(tried, out_of_memory=True, reason=said)


# CPython's words for a C call that returned an error without setting one: under the limit, a failed allocation (seen:
# importing torch._dynamo while building tiny-fcn-r at batch 41,339 under --max-memory 400MiB, where 26,456 fits)
LOST = "SystemError: error return without exception set"
LOST_WHY = "a call failed without an error"
# the launcher's words for a child that aborted: under the limit, an allocation failed where C++ could not raise it
# (seen: pybind11's 'Invalid clear_patients() call' at tiny-fcn-r batch 55,875 under 400MiB, where 1,818 fits)
ABORTED = "worker killed by SIGABRT"


UNSTEADY = ("other processes", "CPU steal", "noisy")  # run's notes that a rate is not the batch's own: report/table.py


UNSUPPORTED = "unsupported"  # a mode that cannot run here (tf32 on a CPU): its first try says why; no failure
NOT_TRIED = "not tried"  # a search ended by --timeout before its try: a limit reached, as --max-batch is


def too_long(tries: list[Try], batch: int, timeout: float) -> str | None:
    """Why `batch` is not tried: a smaller batch's try fitted and ran past --timeout, or its process, its steps at
    the time per sample of the largest batch that fitted, would outlast --timeout; None to try it (`paced`)."""
    if slow := [b for b in ran_past(tries) if b < batch]:
        return (f"batch {batch} {NOT_TRIED}: batch {min(slow)} fits, yet its try ran past --timeout "
                f"{duration(timeout)} (a longer --timeout tries larger batches)")  # fmt: skip
    if (pace := paced(tries, batch)) is None:
        return None
    last, start_s, stepping_s = pace
    expected = start_s + stepping_s * batch / last.batch
    if expected <= timeout:
        return None
    disturbed = f"; its steps timed while disturbed: {'; '.join(last.disturbed)}" if last.disturbed else ""
    pace_said = f"at batch {last.batch}'s pace ({duration(last.duration_s)} a try{disturbed})"
    return (f"batch {batch} {NOT_TRIED}: {pace_said} it would take about {duration(expected)}, past --timeout "
            f"{duration(timeout)} (a longer --timeout tries it)")  # fmt: skip


def ran_past(tries: list[Try]) -> list[int]:
    """The batches that fit yet whose try ran past --timeout: no larger batch is tried (`too_long`, `longest`)."""
    return [t.batch for t in tries if t.fitted and t.status == Status.TIMEOUT]


def longest(tries: list[Try], timeout: float) -> int | None:
    """The largest batch whose try `too_long` would start; None where no pace is known yet, or its steps took no
    time."""
    if slow := ran_past(tries):
        return min(slow)
    if (pace := paced(tries)) is None or not pace[2]:
        return None
    last, start_s, stepping_s = pace
    return max(0, math.floor(last.batch * (timeout - start_s) / stepping_s))


def paced(tries: list[Try], batch: int | None = None) -> tuple[Try, float, float] | None:
    """The largest batch that fitted (below `batch`), the part of its try's time that does not grow with the batch,
    and its time in steps, which does; None before one fitted. Only the time in steps grows with the batch: the
    process's start (the framework's import, the model's build) does not, and a try of fast steps is as long at any
    batch (its timer stops at --max-time). The time in steps is the one measured (`Try.stepping_s`: a CPU try's
    verdict steps under the limit too, which its counts of warm-up and timed steps leave out), else those counts at
    the timed pace."""
    fitted = [t for t in tries if t.fitted and t.duration_s and (batch is None or t.batch < batch)]
    if not fitted:
        return None
    last = max(fitted, key=lambda t: t.batch)
    step_s = last.batch / last.samples_per_s if last.samples_per_s else last.duration_s
    counted = (last.warmup_steps + last.steps) * step_s
    stepping_s = min(last.duration_s, counted if last.stepping_s is None else last.stepping_s)
    return last, last.duration_s - stepping_s, stepping_s


@dataclass
class ModeAnswer:
    """One mode's search: every try in the order made, the largest batch that fits (0: none), and why it ended."""

    mode: str
    tries: list[Try] = field(default_factory=list)
    largest: int = 0
    ended: str = ""
    trying: int | None = None  # the batch of the try under way; an interrupt leaves it: the try it cut short
    at_most: int = 0  # the most tries the search makes, as said before the try under way (`Search.search`)

    def to_json(self) -> dict:
        cut = {"interrupted_try": self.trying} if self.ended == "interrupted" else {}
        return {
            "mode": self.mode,
            "largest": self.largest,
            "ended": self.ended,
            "tries": [asdict(t) for t in self.tries],
            **cut,
        }


@dataclass
class Result:
    run_id: int | None
    answers: dict[str, ModeAnswer]
    exit_code: int
    limit: str  # what bounded the tries, in words
    notes: list[str] = field(default_factory=list)


DATA_MARGIN = 1 / 64  # of the limit: how far off a line through a try's data peak may be (MARGIN: the tensors')


def reach(tries: list[Try], budget: int | None, limit: int | None = None) -> Line | None:
    """The line of the peak memory of the tries that fitted against their batches (`line_of`). On the CPU, where the
    largest of them said the most its data segment held (what the limit counts), the line goes through that against
    the `limit` itself, at the steeper of the tensors' slope and the data peaks' (tiny-resnet-56's data grew 59 KiB a
    sample, its tensors 42): the live tensors' peak against the limit less a process's start (`budget`) leaves out
    what the process takes beyond its tensors once its model is built (tiny-fcn-r under 400 MiB: 257 MiB of data at
    batch 1,819, its tensors' peak 6.6 MiB and a start 180 MiB; the line leapt to 59,866 where 42,873 fits)."""
    fitted = [t for t in tries if t.status == Status.OK and t.peak_mem_bytes]
    line = line_of([(t.batch, t.peak_mem_bytes) for t in fitted], budget)
    top = max(fitted, key=lambda t: t.batch, default=None)
    if line is None or limit is None or top is None or not top.data_peak_bytes:
        return line
    data = line_of([(t.batch, t.data_peak_bytes) for t in fitted if t.data_peak_bytes], limit)
    slope = max(line.per_sample, data.per_sample if data else 0.0)
    return Line(top.batch, top.data_peak_bytes, slope, limit, DATA_MARGIN, exact=True)


def check(opts: Options) -> None:
    """What the flags allow, before anything runs: a bad value is one line. A Python caller's numbers are checked
    as the command line's parser checks the flags' (`threads=0` is no default: the command refuses --threads 0)."""
    from dlperf.flagtext import batch_number, whole_number
    from dlperf.spec import parse_modes, parse_workload
    from dlperf.workloads.base import split_variant

    if "," in opts.workload:
        raise UsageError(
            f"unknown workload {opts.workload!r}: one built-in name (dlperf list) or a user's file.py:factory"
        )
    base, batch = split_variant(opts.workload)
    if batch is not None:  # fit has no batch to give it with: it searches the batch
        raise UsageError(f"workload {opts.workload!r}: fit searches the batch itself, from the workload's own up to "
                         f"--max-batch; name {base}")  # fmt: skip
    parse_workload(opts.workload, None)
    parse_modes(",".join(opts.modes))
    if not DEVICE.match(opts.device):
        raise UsageError(f"--device {opts.device!r}: expected cpu, cuda, cuda:N or mps")
    batch_number(str(opts.max_batch), "--max-batch")
    if opts.threads is not None:
        whole_number(str(opts.threads), "--threads", 1)
    if opts.max_memory is not None and opts.device != "cpu":
        raise UsageError(f"--max-memory limits a CPU process's memory; on {opts.device} the GPU's own memory is the "
                         "limit: give no --max-memory")  # fmt: skip
    if opts.max_memory is not None and not _size(opts.max_memory):  # before the probe that measures a start
        raise UsageError(f"--max-memory {str(opts.max_memory)!r}: expected a size above 0, a whole number of bytes "
                         "below 8 EiB")  # fmt: skip


def _size(value: object) -> bool:
    """A memory size a Python caller gave: a whole number of bytes (not a bool) above 0 and below 8 EiB."""
    from dlperf.spec import INT64_MAX

    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= INT64_MAX


def start_bytes(framework: str, threads: int) -> int:
    """The data segment a process holds with `framework` loaded and `threads` started, measured in a probe child:
    below it, no try could start."""
    from dlperf.answers import StartRequest
    from dlperf.runner.probe import ask
    from dlperf.runner.sweep import interpreter_for

    return ask(framework, StartRequest(threads), interpreter_for(framework), threads=threads).data_bytes


def memory_limit(opts: Options, framework: str, threads: int) -> tuple[int | None, str, int | None]:
    """Each try's data limit in bytes (None on a GPU), the limit in words, and what a process needs of it to start
    (None on a GPU); a `--max-memory` below that is refused."""
    from dlperf.measure import system

    if opts.device != "cpu":
        return None, f"the memory of {opts.device}", None
    needed = start_bytes(framework, threads)
    if opts.max_memory is None:
        available = system.memory_available_bytes() or system.memory_total_bytes()
        return available, f"the memory available when fit started ({mib(available)})", needed
    if opts.max_memory <= needed:
        raise UsageError(f"--max-memory {mib(opts.max_memory)}: below what a training process needs to start here "
                         f"({mib(needed)}: Python and {framework} loaded at {plural(threads, 'thread')}, no model "
                         "yet)")  # fmt: skip
    left = mib(opts.max_memory - needed)  # what the model, its batch and the step may take (256 MiB left 21)
    total = system.memory_total_bytes()
    over = (f"; above the {mib(total)} this machine has, so the kernel's out-of-memory killer or swap, not the limit, "
            "would stop a try that needs more") if total and opts.max_memory > total else ""  # fmt: skip
    return (
        opts.max_memory,
        f"--max-memory {mib(opts.max_memory)} (a start needs {mib(needed)}, leaving {left}{over})",
        needed,
    )


def budget(device: str, limit: int | None, needed: int | None, env: dict) -> int | None:
    """The memory a step's peak may take, which a guess of the boundary aims by (`Line`): on the CPU the limit less
    what a process needs to start; on a GPU its memory, as the devices' probe gave it; None where not known."""
    if device == "cpu":
        return None if limit is None or needed is None else limit - needed
    devices = (d for fw in env.get("frameworks", {}).values() for d in fw.get("devices", []))
    return next((d.get("memory_bytes") for d in devices if d.get("name") == device), None)


def mib(size: int | None) -> str:
    """Whole MiB (`report.format.mib`), as the report says a fit run's limit too."""
    from dlperf.report.format import mib

    return mib(size)


def fit(opts: Options, db: str | None = None, *, argv: list[str] | None = None,
        progress_factory: Callable | None = None, warn: Callable[[str], None] | None = None,
        announce: Callable[[str], None] | None = None) -> Result:  # fmt: skip
    """Search each mode's largest batch, every try a cell of one stored run; the answers. Its errors and notes name
    the command's flags (`Options.flags`), else a Python caller's arguments (`max_batch`, `db='PATH'`). `announce`:
    where the line that says the search's bounds goes before the first try (`Search.outline`); without it, to
    stderr with the progress where fit shows its own, else nowhere."""
    from dlperf.store.location import said_to

    shown = announce or (_stderr if progress_factory is None else None)
    with said_to(opts, FLAGS) as say:
        result = _fit(opts, db, argv, progress_factory, warn, lambda line: shown and shown(say(line)))
    result.limit, result.notes = say(result.limit), [say(n) for n in result.notes]
    for answer in result.answers.values():
        answer.ended = say(answer.ended)
    return result


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _fit(opts: Options, db: str | None, argv, progress_factory, warn, announce) -> Result:
    from dlperf.api import beside_since, warn_stderr
    from dlperf.plan import make_plan
    from dlperf.store import Store
    from dlperf.store.location import given_db
    from dlperf.workloads.base import Workload

    check(opts)
    beside = beside_since(given_db(db))
    plan = make_plan(_spec(opts, opts.threads), devices_flag="--device")  # its threads: said if past the cores
    threads = opts.threads or max(c.threads for c in plan.cells)
    limit, said, needed = memory_limit(opts, plan.spec.frameworks[0], threads)
    for warning in plan.warnings:  # once the request is whole: bad input stays one line
        (warn or warn_stderr)(warning)
    workload = Workload.from_json(plan.workloads[plan.cells[0].key])
    spec = replace(_spec(opts, threads), max_memory=limit if opts.device == "cpu" else None)
    store = Store.open(given_db(db), create=True)
    try:
        limit_from = "--max-memory" if opts.max_memory is not None else "available" if opts.device == "cpu" else None
        search = Search(store, spec, plan, workload, threads, progress_factory or _progress(), argv, limit_from)
        beside(store, search.session.run_id, warn or warn_stderr)
        search.budget = budget(plan.cells[0].device, limit, needed, plan.env)
        search.limit = spec.max_memory
        announce(search.outline(opts, said))
        code = search.run(opts)
        return Result(search.session.run_id, search.answers, code, said, search.notes(opts, limit))
    finally:
        store.close()


def _spec(opts: Options, threads: int | None) -> RunSpec:
    """The run: the workload on the device, each mode, at `threads` (None: the default counts, to plan with where
    the caller gave none)."""
    return make_spec(
        [opts.workload],
        devices=[opts.device],
        threads=None if threads is None else [threads],
        modes=list(opts.modes),
        timeout=opts.timeout,
        loss_check=False,
        timer=opts.timer,
        predict=False,
    )


class Search:
    """The tries of every mode, each a cell of one session, each batch chosen from the tries before it."""

    budget: int | None = None  # the memory a step's peak may take (`budget`); None: no guess, the plain search
    limit: int | None = None  # a CPU try's data limit, which the tries' data peaks are set against (`reach`)
    later = 0  # the most tries of the modes still to search after this one
    progress_factory: Callable | None = None

    def __init__(self, store, spec: RunSpec, plan, workload, threads: int, progress_factory, argv,
                 limit_from: str | None = None) -> None:  # fmt: skip
        """`limit_from`: what set a CPU try's limit, "--max-memory" or the memory "available" at the start, kept with
        the run's environment (`fit_limit`) for the report to say as fit does (`report.fit.limit_from`)."""
        from dlperf.runner.session import Session

        env = {**plan.env, "fit_limit": limit_from} if limit_from else plan.env
        self.session = Session.create(store, spec, env, plan.cores, argv or ["dlperf", *sys.argv[1:]], made_by="fit")
        self.workload, self.threads, self.progress_factory = workload, threads, progress_factory
        self.answers: dict[str, ModeAnswer] = {}
        self.fits: dict[int, bool] = {}  # the batches of the mode being searched tried so far: fitted or not

    def run(self, opts: Options) -> int:
        """Every mode searched in turn; the exit code: 0 when each found its answer, 1 when a try failed otherwise
        than out of memory, 130 on an interrupt (the tries made are kept)."""
        from dlperf.runner import lifeline
        from dlperf.runner.sweep import Interrupted

        start, modes = min(self.workload.batch, opts.max_batch), self.session.spec.modes
        try:
            for i, mode in enumerate(modes):
                self.later = (len(modes) - i - 1) * worst({}, start, opts.max_batch)
                self.answers[mode] = self.search(mode, start, opts.max_batch)
            # held, as the sweep holds a measurement's write: an interrupt inside it undid it, leaving the run
            # running under a dead process's lease and only "dlperf: interrupted" said; now it comes once it is stored
            with lifeline.held():
                self.session.complete()
        except (Interrupted, KeyboardInterrupt):  # KeyboardInterrupt: a Ctrl-C between two tries, outside a sweep
            self.session.interrupted()
            self.settle()
            for mode in self.session.spec.modes:  # a mode not started yet is said so, not left out
                answer = self.answers.setdefault(mode, ModeAnswer(mode))
                answer.ended = answer.ended or "interrupted"
            return ExitCode.INTERRUPTED
        ended_well = all(a.ended in ("boundary", "max-batch", "nothing fits") or NOT_TRIED in a.ended
                         or a.ended.startswith(UNSUPPORTED) for a in self.answers.values())  # fmt: skip
        return ExitCode.OK if ended_well else ExitCode.CELLS_FAILED

    def search(self, mode: str, start: int, max_batch: int) -> ModeAnswer:
        """One mode's tries to its answer, at most as many as the plain search could make (`worst`), which the
        progress says (`[3/≤19]`): a guess of the boundary is tried only where it keeps within that whatever it
        turns out, and may cost at most `SLACK` tries more than bisecting from where the search stands."""
        answer = ModeAnswer(mode, at_most=worst({}, start, max_batch))
        self.answers[mode] = answer  # an interrupt keeps the tries made
        fits = self.fits = {}  # this mode's, which `try_batch` reads a refusal by
        while (batch := self.choose(answer, start, max_batch)) is not None:
            if why := too_long(answer.tries, batch, self.session.spec.timeout):
                answer.ended = why
                break
            answer.trying = batch
            answer.at_most = min(answer.at_most, len(answer.tries) + cost(fits, batch, start, max_batch) + SLACK)
            self.count()
            tried = self.try_batch(mode, batch)
            answer.tries.append(tried)
            answer.trying = None
            if tried.status == Status.UNSUPPORTED:  # the mode, not the batch: said, as run says it, and no failure
                answer.ended = f"{UNSUPPORTED}: {tried.reason}"
                break
            if not tried.fitted and not tried.out_of_memory:
                answer.ended = f"batch {batch} {tried.status}: {tried.reason}"
                break
            fits[batch] = tried.fitted
            answer.largest = max((b for b, ok in fits.items() if ok), default=0)  # so far: an interrupt says it
            answer.at_most = min(answer.at_most, len(answer.tries) + worst(fits, start, max_batch) + SLACK)
        else:
            answer.ended = "max-batch" if fits.get(max_batch) else "boundary"
        if answer.ended == "boundary" and not answer.largest:
            answer.ended = "nothing fits"
        return answer

    def choose(self, answer: ModeAnswer, start: int, max_batch: int) -> int | None:
        """The mode's next batch (`next_batch`), from its tries so far and the line of their peaks."""
        tries = answer.tries
        guess = reach(tries, self.budget, self.limit)
        return next_batch(self.fits, start, max_batch, guess, answer.at_most - len(tries),
                          longest(tries, self.session.spec.timeout))  # fmt: skip

    def count(self) -> None:
        """The progress's count of tries, at most: those of the modes searched, the most of the one under way and of
        those still to come."""
        from dlperf.progress import Running

        if isinstance(self.progress_factory, Running):
            self.progress_factory.total = self.later + sum(len(a.tries) if a.ended else a.at_most
                                                           for a in self.answers.values())  # fmt: skip

    def outline(self, opts: Options, limit: str) -> str:
        """The search's bounds in one line, before its first try: the batches, the limit, the most tries, the time
        each may take."""
        start, modes = min(self.workload.batch, opts.max_batch), self.session.spec.modes
        most = worst({}, start, opts.max_batch)
        each = f" per mode, {most * len(modes)} in all" if len(modes) > 1 else ""
        return (
            f"{', '.join(modes)}: from batch {start} up to --max-batch {opts.max_batch:,} under {limit}: at most "
            f"{most} {'try' if most == 1 else 'tries'}{each}, each up to --timeout {duration(opts.timeout)}"
        )

    def try_batch(self, mode: str, batch: int) -> Try:
        """The workload at `batch` in `mode`: a new cell of the run, measured in its own child; a refusal that was
        the batch not fitting (`as_fit_reads`, from the mode's tries so far) stored as such."""
        from dlperf.runner.tasks import schedule

        cell = self.cell_of(mode, batch)
        if cell.key not in self.session.workloads:
            self.session.add([cell], replace(self.workload, name=cell.workload, batch=batch).to_json())
        self.session.measure(schedule([cell], 1), self.progress_factory, last=False)
        return self.read_try(cell, batch)

    def cell_of(self, mode: str, batch: int) -> Cell:
        from dlperf.report.crossover import variant_name

        spec = self.session.spec
        return Cell(variant_name(self.workload.name, batch), spec.frameworks[0], spec.devices[0], self.threads, mode)

    def read_try(self, cell: Cell, batch: int) -> Try:
        """The try of `cell` as stored, and as fit reads it: a refusal that was the batch not fitting stored so."""
        done = self.session.store.measurements(self.session.run_id, cell.key)[-1:]  # one process: this try's
        duration, phases = (done[0].duration_s, done[0].detail.phases) if done else (None, None)
        seen = Try.of(self.session.cell(cell.key), batch, duration, phases)
        tried = as_fit_reads(seen, self.fits, self.session.spec.max_memory)
        if tried is not seen:  # the table, the report and list --runs read it as fit does
            self.session.restate(cell.key, Status.FAILED, tried.reason)
        return tried

    def settle(self) -> None:
        """The try an interrupt cut short, read as fit reads it where it was stored: the interrupt that comes while
        the sweep stores a try is raised once it is (`lifeline.held`), before `try_batch` could restate a refusal
        under the limit (which stayed 'unsupported: no fp32 kernel' in every view), or it rolled the restating back."""
        for answer in self.answers.values():
            cell = None if answer.trying is None else self.cell_of(answer.mode, answer.trying)
            if cell is not None and cell.key in self.session.workloads:  # added: it may have been stored
                self.read_try(cell, answer.trying)

    def notes(self, opts: Options, limit: int | None) -> list[str]:
        notes = [f"stored as run {self.session.run_id}: each try a cell named {self.workload.name}@bN"]
        if opts.device == "cpu" and opts.max_memory is None:
            notes.append(f"no --max-memory: each try could take the memory available at the start ({mib(limit)})")
        if opts.device == "cpu":
            notes.append("peak memory: live tensors at the step's peak; the limit counts the whole process's data "
                         "(Python, the framework, its threads, the allocator's slack)")  # fmt: skip
        return notes


def _progress():
    """One count over every try of every mode, of at most as many tries as the search can still make
    (`Search.count`)."""
    from dlperf.progress import Running

    return Running(at_most=True)
