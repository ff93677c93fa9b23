"""Live progress of a sweep: the current cell, cells done of total, and an ETA.

A rich live display on a terminal; plain lines (one per finished cell) when stderr is not a terminal, as in CI logs.
A display whose stream fails (its terminal closed, a full disk) ends there, and the sweep goes on without it.
A search (`dlperf fit`, `optimize`, `crossover`) measures in several calls, a display each: `Running` numbers them on
from one count, against a total the search may not know in advance (`[3/?]`).

The time left is the items left at the time of a process without the untimed extras (the FLOP count, the memory
step, the loss check: only the first process of a cell and its thread-count siblings runs them, `runner/sweep.py`)
and without the warm parent's start (its framework's import, which the first process forked from it waits for once),
from those that ran neither where there are any; plus, for each sibling group still to start, the extras as long as
the processes that ran them took them. Averaging a first process into every one over-estimated the rest: fcn-r at 1
thread, 4 repeats, said 102 s left after a first process of 34 s (12.6 s startup, 9.2 s of extras); the rest took 28.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.text import Text

from dlperf.measure.stats import few
from dlperf.report.format import duration, seconds, terminal
from dlperf.report.table import LOSS_MARK
from dlperf.store.process import ProcessMeasurement, untimed_extras
from dlperf.store.records import CellFigures, ProfileOutcome
from dlperf.vocab import Status, ran_out_of_memory

GROUP = ("workload", "framework", "device", "mode", "nproc", "scaling", "parallel", "microbatches")  # `sweep.siblings`


@dataclass
class Life:
    """An item's time: its process's less what it ran once for the whole sweep (`bare_s`); the untimed extras its
    sibling group's first process runs (`extras_s`); the warm parent's start its framework's first forked process
    waits for (`once_s`: its startup, the framework's import, `runner/warm.py`)."""

    bare_s: float
    extras_s: float = 0.0
    once_s: float = 0.0

    @classmethod
    def of(cls, measurement: ProcessMeasurement, first_warm: bool = False) -> Life:
        """`first_warm`: its framework's first process forked from a warm parent in this display."""
        duration = measurement.duration_s or 0.0
        extras = min(duration, sum(untimed_extras(measurement.detail.phases).values()))
        once = ((measurement.detail.phases or {}).get("startup_s") or 0.0) if first_warm else 0.0
        once = min(once, duration - extras)
        return cls(duration - extras - once, extras, once)


def group_of(task) -> tuple:
    """The sibling group of `task`'s cell: its cells differ at most in their thread count, and the group's first
    process runs the untimed extras for all of them (`sweep.siblings`)."""
    return tuple(getattr(task.cell, name, None) for name in GROUP)


class Progress:
    def __init__(
        self, total: int | None, console: Console | None = None, first: int = 0, at_most: bool = False,
        quiet: bool = False,
    ) -> None:  # fmt: skip
        """`total`: the items of the whole sweep or search, None where a search does not know it yet (shown as `?`);
        `first`: the items an earlier display of the same search counted (`Running`); `at_most`: `total` is the most
        a search can still take (shown as `≤19`), and the time left the most too; `quiet`: nothing shown (a Python
        caller's `progress=False`)."""
        self.total, self.first, self.at_most = total, first, at_most
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal and not quiet
        self._done = 0  # items done
        self._lives: list[Life] = []  # of the items whose process ran: the ETA's
        self._groups: set[tuple] = set()  # sibling groups whose first process is still to start (`ahead`)
        self._warm: set[str] = set()  # the frameworks whose first process forked from a warm parent has ended
        self._instant = 0  # items still to come known unsupported before any child starts: no time left for them
        self._current = ""
        self._index = 0  # the item shown: a task, or a profile of its own (a resumed run's)
        self._started = time.monotonic()
        self._display: Live | None = None
        self.lost = quiet  # its stream failed (or `quiet`): nothing more is shown

    def __enter__(self) -> Progress:
        if self.live:
            self._display = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
            self._shown(lambda: self._display.start(refresh=True))
        return self

    def __exit__(self, *exc) -> None:
        if self._display is not None:
            self._shown(self._display.stop)

    def _shown(self, write: Callable[[], object]) -> None:
        """`write` to the display's stream; where it fails, the display ends for good (its auto-refresh stopped
        first, by `Live.stop`) and the sweep goes on: a progress display never stops a measurement."""
        if self.lost:
            return
        try:
            write()
        except OSError:
            self.lost, display, self._display = True, self._display, None
            if display is not None:
                try:
                    display.stop()
                except OSError:
                    pass

    def ahead(self, tasks: list) -> None:
        """The tasks this display will show: those known unsupported before any child starts (`Task.unsupported`)
        take no time, so the time left counts none for them; each sibling group's first process runs the extras."""
        self._instant = sum(getattr(t, "unsupported", None) is not None for t in tasks)
        self._groups = {group_of(t) for t in tasks if getattr(t, "unsupported", None) is None}

    def eta_s(self, done: int) -> float | None:
        """Seconds left when this display has `done` items done: the items left whose process will run, each at the
        average of the processes that ran no untimed extras and waited for no warm parent (where none has, of those
        that did, less both), plus the extras' average once for each sibling group still to start (a cell known
        unsupported before any child starts takes no time, and says nothing of a measurement's); None before one
        has, or with no total."""
        if not self._lives or self.total is None:
            return None
        plain = [life.bare_s for life in self._lives if not (life.extras_s or life.once_s)]
        plain = plain or [life.bare_s for life in self._lives]
        extras = [life.extras_s for life in self._lives if life.extras_s]
        left = max(0, self.total - self.first - done - self._instant)
        extra = statistics.fmean(extras) * min(left, len(self._groups)) if extras else 0.0
        return statistics.fmean(plain) * left + extra

    def _number(self, index: int) -> int:
        return self.first + index + 1

    def _out_of(self) -> str:
        return "?" if self.total is None else f"{'≤' if self.at_most else ''}{self.total}"

    def _of(self, items: str) -> str:
        """`[3/9]`, or `[3/?]` for a search whose total is not known."""
        return f"[{items}/{self._out_of()}]"

    def _item(self, index: int) -> str:
        return self._of(str(self._number(index)))

    def _render(self) -> Text:
        done = self._done
        eta = self.eta_s(done)
        elapsed = time.monotonic() - self._started
        shown = min(self._number(self._index), self.total or self._number(self._index))
        return Text.assemble(
            (f"cell {shown} of {self._out_of()}: ", "bold"),
            (self._current, "cyan"),
            f"  {duration(elapsed)} so far · {self.first + done} done",
            f" · {'up to ' if self.at_most else ''}about {duration(eta)} left" if eta is not None else "",
        )

    def start(self, index: int, task) -> None:
        """A task's process starts. A cell known unsupported before any child starts (`Task.unsupported`) ends at
        once: its one line is `finish`'s, with no `...` line before it."""
        self._groups.discard(group_of(task))
        self._begin(index, label(task), f"{self._number(index)}", said=getattr(task, "unsupported", None) is None)

    def start_together(self, index: int, tasks: list) -> None:
        """Cells that compile at once (`run --compile-at-once`), items index to index + len(tasks) - 1."""
        current = f"{', '.join(map(label, tasks))} (compiling at once, each timed alone)"
        self._groups.difference_update(map(group_of, tasks))
        self._begin(index, current, f"{self._number(index)}-{self._number(index + len(tasks) - 1)}")

    def _begin(self, index: int, current: str, items: str, *, said: bool = True) -> None:
        self._index, self._current, self._started = index, current, time.monotonic()
        if said and not self.live:
            self._shown(lambda: print(f"{self._of(items)} {self._current} ...", file=sys.stderr, flush=True))
        self.refresh()

    def profiling(self, index: int, cell) -> None:
        """A cell's untimed profiled process starts (`run --profile`): after the cell's last timed process, or as an
        item of its own when a resumed run profiles a cell it had measured."""
        self._begin(index, f"profiling {terminal(cell.label)}", f"{self._number(index)}")

    def profiled(self, index: int, cell, profile: ProfileOutcome, *, own_item: bool = False) -> None:
        """The profile is stored (`runner.profile.row_of`). Its process's time joins its cell's item, so the ETA
        counts the profiles still to come; `own_item`: it was an item of its own."""
        spent = profile.duration_s or 0.0
        self._done += own_item
        if own_item or not self._lives:
            self._lives.append(Life(spent))
        else:
            self._lives[-1].bare_s += spent
        trace = profile.profiled.trace if profile.profiled else None
        if profile.status is Status.OK:
            said = f"profiled in {duration(spent)}" + (f", trace {trace}" if trace else "")
        else:
            said = f"profile {profile.status.value}: {profile.error}"
        self._say(f"{self._item(index)} {terminal(cell.label)}: {terminal(said)}")

    def _say(self, line: str) -> None:
        if self.live:
            self._shown(lambda: self.console.print(line, highlight=False, markup=False))
        else:
            self._shown(lambda: print(line, file=sys.stderr, flush=True))
        self.refresh()

    def refresh(self) -> None:
        if self._display is not None:
            self._display.update(self._render())

    def finish(self, index: int, task, measurement: ProcessMeasurement, figures: CellFigures) -> None:
        self._done += 1
        self._groups.discard(group_of(task))
        if getattr(task, "unsupported", None) is None:  # a cell known unsupported: no child, no time to average
            warm = measurement.detail.started == "warm" and task.cell.framework not in self._warm
            self._lives.append(Life.of(measurement, first_warm=warm))
            if measurement.detail.started == "warm":
                self._warm.add(task.cell.framework)
        else:
            self._instant = max(0, self._instant - 1)
        self._say(f"{self._item(index)} {label(task)}: {outcome(measurement, figures)}")


class Running:
    """The displays of one search numbered on from one count (`[4/?]` after `[3/?]`), where each of its `measure`
    calls opens a display of its own (`Session.measure`): `total`, the search's items when it knows them, or the most
    it can still take (`at_most`: `[4/≤19]`), which the search sets before each display."""

    def __init__(self, total: int | None = None, at_most: bool = False) -> None:
        self.total, self.counted, self.at_most = total, 0, at_most

    def __call__(self, items: int) -> Progress:
        progress = Progress(self.total, first=self.counted, at_most=self.at_most)
        self.counted += items
        return progress


def outcome(measurement: ProcessMeasurement, figures: CellFigures) -> str:
    """A finished process as its line says it: the cell's median; after a repeat, this process's own beside the
    cell's so far (the median of its processes' medians, over their steps pooled); or why it did not measure."""
    if not (measurement.ok and figures.median_s):
        if measurement.status is Status.FAILED and ran_out_of_memory(measurement.error):
            return terminal(measurement.error)  # "out of memory at batch N ...", as the table says it (a fit's try)
        return terminal(f"{measurement.status.value}: {measurement.error}")  # the error comes from the user's model
    cell = _median(figures.median_s, figures.n)
    processes = len(figures.per_process_medians)
    if processes < 2 or not measurement.samples:
        return cell + not_training(figures)
    own = _median(statistics.median(measurement.samples), len(measurement.samples))
    return f"this process: {own}; the cell so far ({processes} processes): {cell}" + not_training(figures)


def not_training(figures: CellFigures) -> str:
    """What marks the cell `!` in the table (`charts.trains`), said on its line: a long run's watcher read bf16's
    "median 610 µs, n=1572" as a setting like any other, where it had failed its loss check."""
    if figures.loss_finite is False:
        return f"; {LOSS_MARK} its loss was not finite: it did not train"
    if figures.loss_check is not None and figures.loss_check.ok is False:
        return f"; {LOSS_MARK} it failed its loss check: it does not train as fp32 does (the table's notes say why)"
    return ""


def _median(median: float, n: int | None) -> str:
    if n is None:
        return f"median {seconds(median)}"
    return f"median {seconds(median)}, n={n}" + (" (few samples)" if few(n) else "")


def label(task) -> str:
    """A task's cell as the progress names it, with its repeat after the first."""
    return terminal(task.cell.label) + (f" (repeat {task.repeat + 1})" if task.repeat else "")
