"""The answer of a `dlperf fit` run in the report: per workload, framework and mode, the largest batch that fits, its
peak memory, the first batch tried above it that did not fit, and every try in the order made, as `dlperf fit` printed
them. A try that ran out of memory is stored `failed` with the reason "out of memory at batch N ..."
(`worker/cell.oom_reason`): in a fit run it is the answer's evidence, read here as a try, not a failure. Pure
functions over the stored runs and cells."""

from __future__ import annotations

from dataclasses import dataclass, field

from dlperf.report.format import mib, nbytes, seconds
from dlperf.store.records import CellRecord, RunRecord
from dlperf.store.state import command_of
from dlperf.vocab import OUT_OF_MEMORY, Status, ran_out_of_memory
from dlperf.workloads.base import split_variant

HEAD = ["batch", "fits", "peak memory", "median step", "n"]
FITTED_TIMEOUT = "yes, then timeout"  # `fitted`: its timed steps ran, the steps after them ran past --timeout


def fits_said(ok: bool, fitted: bool, out_of_memory: bool, status: str) -> str:
    """A try's "fits" column: yes, yes then timeout (`fitted`), out of memory, or the status of another failure."""
    return "yes" if ok else FITTED_TIMEOUT if fitted else OUT_OF_MEMORY if out_of_memory else status


def out_of_memory(cell: CellRecord) -> bool:
    """A cell that failed by running out of memory at its batch: raised as such, or its process killed for it."""
    return cell.status is Status.FAILED and ran_out_of_memory(cell.error)


def fitted(cell: CellRecord) -> bool:
    """A try whose batch fits: measured, or stopped by --timeout once it had kept timed steps, which only come after
    its steps ran under the limit (`worker/cell.fit_verdict`, before the warm-up): at the largest batches the steps
    after them (the step's memory) ran a try past --timeout (alexnet-r at batch 39,762 on 2 threads: 41 s a step,
    one kept), and fit stopped there, 'batch 39762 timeout', its answer the batch tried before, 2,048."""
    return cell.ok or (cell.status is Status.TIMEOUT and bool(cell.n))


NO_KERNEL = "could not create a primitive"  # oneDNN's refusal (frameworks/torch/step.py `_no_kernel`)


def refused(cell: CellRecord) -> bool:
    """A try oneDNN refused, stored unsupported: no kernel for its dtype, or, after a smaller batch of its mode
    fitted, no memory left under the limit to create one (`fit.no_kernel_is_memory`; stored so before b66fd96)."""
    return cell.status is Status.UNSUPPORTED and NO_KERNEL in (cell.error or "")


def is_fit_run(run: RunRecord) -> bool:
    return run.env.get("made_by") == "fit"


@dataclass
class Search:
    """One workload's search in one mode of a fit run: its tries (cells `name@bN`) in the order made."""

    run_id: int
    workload: str  # without its @bN
    framework: str
    column: str
    mode: str
    limit: int | None  # a CPU try's memory limit in bytes; None: the device's own memory
    tries: list[CellRecord] = field(default_factory=list)
    limit_from: str | None = None  # "--max-memory", the memory "available" when fit started, or None: not told

    @staticmethod
    def batch(cell: CellRecord) -> int:
        return split_variant(cell.workload)[1] or cell.batch or 0

    @property
    def largest(self) -> CellRecord | None:
        return max((c for c in self.tries if fitted(c)), key=self.batch, default=None)

    @property
    def first_out(self) -> CellRecord | None:
        """The smallest batch above the largest that fits which ran out of memory: stored so, or a try the search went
        on after that did not run (fit goes on only after a batch that did not fit: oneDNN's refusal of a primitive
        under the limit, stored unsupported, is one: `fit.no_kernel_is_memory`)."""
        floor = self.batch(self.largest) if self.largest else 0
        out = [c for c in self.tries[:-1] if not fitted(c)] + [c for c in self.tries[-1:] if self.did_not_fit(c)]
        return min((c for c in out if self.batch(c) > floor), key=self.batch, default=None)

    def did_not_fit(self, cell: CellRecord) -> bool:
        """Out of memory, or a refusal above a batch of the search that fitted, as fit reads it, last try or not."""
        return out_of_memory(cell) or (refused(cell) and any(fitted(c) and self.batch(c) < self.batch(cell)
                                                             for c in self.tries))  # fmt: skip

    @property
    def stopped(self) -> CellRecord | None:
        """The try that ended the search otherwise than by fitting or running out of memory (fit stops a mode's search
        at any other failure, a timeout, a refusal, and an interrupt leaves its try pending): its last, where so."""
        last = self.tries[-1] if self.tries else None
        return last if last is not None and not fitted(last) and not self.did_not_fit(last) else None

    @property
    def label(self) -> str:
        return f"{self.workload} {self.framework} {self.column} {self.mode}"

    def answer(self) -> str:
        """The answer in one line, in `dlperf fit`'s words, with the largest batch's peak memory."""
        largest, out = self.largest, self.first_out
        n = self.batch(largest) if largest else 0
        peak = f" (peak memory {nbytes(largest.peak_mem_bytes)})" if largest and largest.peak_mem_bytes else ""
        if (stop := self.stopped) is not None:  # as `dlperf fit` said it: the search stopped, and why
            b, reason = self.batch(stop), stop.error or "no reason stored"
            why = (f"interrupted during its try of batch {b}" if stop.status is Status.PENDING
                   else f"batch {b} {stop.status.value}: {reason}")  # fmt: skip
            found = f"the largest batch that fit so far is {n}{peak}" if largest else "no batch fit so far"
            return f"{self.label}: the search stopped, {why}; {found}"
        if largest is None:
            tried = f"batch {self.batch(out)} runs out of memory" if out else "no try ran"
            return f"{self.label}: no batch tried fits: {tried}"
        if out is None:
            return f"{self.label}: every batch tried fits; the largest tried is {n}{peak}"
        beyond = f"batch {n + 1}" if self.batch(out) == n + 1 else f"the next batch tried, {self.batch(out)},"
        return f"{self.label}: the largest batch that fits is {n}{peak}; {beyond} runs out of memory"

    def rows(self) -> list[list[str]]:
        """Each try, in order: batch, fits (yes, out of memory, or the status of another failure), peak, median."""
        return [
            [
                str(self.batch(c)),
                fits_said(c.ok, fitted(c), out_of_memory(c), c.status.value),
                nbytes(c.peak_mem_bytes) if c.ok else "-",
                seconds(c.median_s) if fitted(c) and c.median_s else "-",
                str(c.n) if fitted(c) and c.n is not None else "-",
            ]
            for c in self.tries
        ]

    def limit_line(self) -> str:
        """The limit as `dlperf fit` said it: a flag only where the user gave it (the memory available when fit
        started was said to be `--max-memory 21.9 GiB`); a run that does not tell which, its size alone."""
        if not self.limit:
            return "limit: the device's own memory"
        if self.limit_from == "available":
            return f"limit: the memory available when fit started ({mib(self.limit)})"
        if self.limit_from == "--max-memory":
            return f"limit: --max-memory {mib(self.limit)}"
        return f"limit: {mib(self.limit)} of memory per try"


def searches(runs: list[RunRecord], cells: list[CellRecord]) -> list[Search]:
    """The searches of the fit runs among `runs`, each with its tries in the order made."""
    fits = {r.id: r for r in runs if is_fit_run(r)}
    found: dict[tuple, Search] = {}
    for c in sorted((c for c in cells if c.run_id in fits), key=lambda c: (c.run_id, c.position)):
        workload = split_variant(c.workload)[0]
        run = fits[c.run_id]
        search = found.setdefault((c.run_id, workload, c.framework, c.column, c.mode),
                                  Search(c.run_id, workload, c.framework, c.column, c.mode, run.spec.get("max_memory"),
                                         limit_from=limit_from(run)))  # fmt: skip
        search.tries.append(c)
    return list(found.values())


def limit_from(run: RunRecord) -> str | None:
    """What set a fit run's CPU limit: as the run kept it (`fit_limit`: "--max-memory" or "available"), else, for a run
    an older dlperf stored, as its `dlperf fit` command line says; None where neither tells (a script's argv)."""
    if (kept := run.env.get("fit_limit")) in ("--max-memory", "available"):
        return kept
    if command_of(run.argv) != "fit":
        return None
    given = any(a == "--max-memory" or a.startswith("--max-memory=") for a in run.argv)
    return "--max-memory" if given else "available"


def tries_of(found: list[Search]) -> set[str]:
    """The keys of the tries that ran out of memory: the answers' evidence, not failures."""
    return {c.key for s in found for c in s.tries if out_of_memory(c)}
