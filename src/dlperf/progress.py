"""Live progress of a sweep: the current cell, cells done of total, and an ETA.

A rich live display on a terminal; plain lines (one per finished cell) when stderr is not a terminal, as in CI logs.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from dlperf.measure.stats import FEW_SAMPLES
from dlperf.report.format import duration, seconds, terminal
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, ProfileOutcome
from dlperf.vocab import Status


class Progress:
    def __init__(self, total: int, console: Console | None = None) -> None:
        self.total = total
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self._done_durations: list[float] = []
        self._current = ""
        self._index = 0  # the item shown: a task, or a profile of its own (a resumed run's)
        self._started = time.monotonic()
        self._display: Live | None = None

    def __enter__(self) -> Progress:
        if self.live:
            self._display = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
            self._display.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._display is not None:
            self._display.__exit__(*exc)

    def eta_s(self, done: int) -> float | None:
        if not self._done_durations:
            return None
        per_task = sum(self._done_durations) / len(self._done_durations)
        return per_task * (self.total - done)

    def _render(self) -> Text:
        done = len(self._done_durations)
        eta = self.eta_s(done)
        elapsed = time.monotonic() - self._started
        return Text.assemble(
            (f"cell {min(self._index + 1, self.total)} of {self.total}: ", "bold"),
            (self._current, "cyan"),
            f"  {duration(elapsed)} so far · {done} done",
            f" · about {duration(eta)} left" if eta is not None else "",
        )

    def start(self, index: int, task) -> None:
        self._begin(index, label(task), f"{index + 1}")

    def start_together(self, index: int, tasks: list) -> None:
        """Cells that compile at once (`run --compile-at-once`), items index to index + len(tasks) - 1."""
        current = f"{', '.join(map(label, tasks))} (compiling at once, each timed alone)"
        self._begin(index, current, f"{index + 1}-{index + len(tasks)}")

    def _begin(self, index: int, current: str, items: str) -> None:
        self._index, self._current, self._started = index, current, time.monotonic()
        if not self.live:
            print(f"[{items}/{self.total}] {self._current} ...", file=sys.stderr, flush=True)
        self.refresh()

    def profiling(self, index: int, cell) -> None:
        """A cell's untimed profiled process starts (`run --profile`): after the cell's last timed process, or as an
        item of its own when a resumed run profiles a cell it had measured."""
        self._begin(index, f"profiling {terminal(cell.label)}", f"{index + 1}")

    def profiled(self, index: int, cell, profile: ProfileOutcome, *, own_item: bool = False) -> None:
        """The profile is stored (`runner.profile.row_of`). Its process's time joins its cell's item, so the ETA
        counts the profiles still to come; `own_item`: it was an item of its own."""
        spent = profile.duration_s or 0.0
        if own_item or not self._done_durations:
            self._done_durations.append(spent)
        else:
            self._done_durations[-1] += spent
        trace = profile.profiled.trace if profile.profiled else None
        if profile.status is Status.OK:
            outcome = f"profiled in {duration(spent)}" + (f", trace {trace}" if trace else "")
        else:
            outcome = f"profile {profile.status.value}: {profile.error}"
        self._say(f"[{index + 1}/{self.total}] {terminal(cell.label)}: {terminal(outcome)}")

    def _say(self, line: str) -> None:
        if self.live:
            self.console.print(line, highlight=False, markup=False)
        else:
            print(line, file=sys.stderr, flush=True)
        self.refresh()

    def refresh(self) -> None:
        if self._display is not None:
            self._display.update(self._render())

    def finish(self, index: int, task, measurement: ProcessMeasurement, figures: CellFigures) -> None:
        self._done_durations.append(measurement.duration_s or 0.0)
        ok, median, n = measurement.ok, figures.median_s, figures.n
        outcome = f"median {seconds(median)}" if ok and median else f"{measurement.status.value}: {measurement.error}"
        outcome = terminal(outcome)  # the error comes from the user's model
        if ok and median and n is not None:
            outcome += f", n={n}" + (" (few samples)" if n < FEW_SAMPLES else "")
        self._say(f"[{index + 1}/{self.total}] {label(task)}: {outcome}")


def label(task) -> str:
    """A task's cell as the progress names it, with its repeat after the first."""
    return terminal(task.cell.label) + (f" (repeat {task.repeat + 1})" if task.repeat else "")
