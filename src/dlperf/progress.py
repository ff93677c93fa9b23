"""Live progress of a sweep: the current cell, cells done of total, and an ETA.

A rich live display on a terminal; plain lines (one per finished cell) when stderr is not a terminal, as in CI logs.
A display whose stream fails (its terminal closed, a full disk) ends there, and the sweep goes on without it.
A search (`dlperf fit`, `optimize`, `crossover`) measures in several calls, a display each: `Running` numbers them on
from one count, against a total the search may not know in advance (`[3/?]`).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
from rich.text import Text

from dlperf.measure.stats import few
from dlperf.report.format import duration, seconds, terminal
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, ProfileOutcome
from dlperf.vocab import Status


class Progress:
    def __init__(self, total: int | None, console: Console | None = None, first: int = 0) -> None:
        """`total`: the items of the whole sweep or search, None where a search does not know it yet (shown as `?`);
        `first`: the items an earlier display of the same search counted (`Running`)."""
        self.total, self.first = total, first
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self._done = 0  # items done
        self._done_durations: list[float] = []  # of the items whose process ran: the ETA's average
        self._instant = 0  # items still to come known unsupported before any child starts: no time left for them
        self._current = ""
        self._index = 0  # the item shown: a task, or a profile of its own (a resumed run's)
        self._started = time.monotonic()
        self._display: Live | None = None
        self.lost = False  # its stream failed: nothing more is shown

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
        take no time, so the time left counts none for them."""
        self._instant = sum(getattr(t, "unsupported", None) is not None for t in tasks)

    def eta_s(self, done: int) -> float | None:
        """Seconds left when this display has `done` items done: the items left whose process will run, at the
        average of those whose process ran (a cell known unsupported before any child starts takes no time, and says
        nothing of a measurement's); None before one has, or with no total."""
        if not self._done_durations or self.total is None:
            return None
        per_task = sum(self._done_durations) / len(self._done_durations)
        return per_task * max(0, self.total - self.first - done - self._instant)

    def _number(self, index: int) -> int:
        return self.first + index + 1

    def _out_of(self) -> str:
        return "?" if self.total is None else str(self.total)

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
            f" · about {duration(eta)} left" if eta is not None else "",
        )

    def start(self, index: int, task) -> None:
        """A task's process starts. A cell known unsupported before any child starts (`Task.unsupported`) ends at
        once: its one line is `finish`'s, with no `...` line before it."""
        self._begin(index, label(task), f"{self._number(index)}", said=getattr(task, "unsupported", None) is None)

    def start_together(self, index: int, tasks: list) -> None:
        """Cells that compile at once (`run --compile-at-once`), items index to index + len(tasks) - 1."""
        current = f"{', '.join(map(label, tasks))} (compiling at once, each timed alone)"
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
        if own_item or not self._done_durations:
            self._done_durations.append(spent)
        else:
            self._done_durations[-1] += spent
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
        if getattr(task, "unsupported", None) is None:  # a cell known unsupported: no child, no time to average
            self._done_durations.append(measurement.duration_s or 0.0)
        else:
            self._instant = max(0, self._instant - 1)
        self._say(f"{self._item(index)} {label(task)}: {outcome(measurement, figures)}")


class Running:
    """The displays of one search numbered on from one count (`[4/?]` after `[3/?]`), where each of its `measure`
    calls opens a display of its own (`Session.measure`): `total`, the search's items when it knows them."""

    def __init__(self, total: int | None = None) -> None:
        self.total, self.counted = total, 0

    def __call__(self, items: int) -> Progress:
        progress = Progress(self.total, first=self.counted)
        self.counted += items
        return progress


def outcome(measurement: ProcessMeasurement, figures: CellFigures) -> str:
    """A finished process as its line says it: the cell's median; after a repeat, this process's own beside the
    cell's so far (the median of its processes' medians, over their steps pooled); or why it did not measure."""
    if not (measurement.ok and figures.median_s):
        return terminal(f"{measurement.status.value}: {measurement.error}")  # the error comes from the user's model
    cell = _median(figures.median_s, figures.n)
    processes = len(figures.per_process_medians)
    if processes < 2 or not measurement.samples:
        return cell
    own = _median(statistics.median(measurement.samples), len(measurement.samples))
    return f"this process: {own}; the cell so far ({processes} processes): {cell}"


def _median(median: float, n: int | None) -> str:
    if n is None:
        return f"median {seconds(median)}"
    return f"median {seconds(median)}, n={n}" + (" (few samples)" if few(n) else "")


def label(task) -> str:
    """A task's cell as the progress names it, with its repeat after the first."""
    return terminal(task.cell.label) + (f" (repeat {task.repeat + 1})" if task.repeat else "")
