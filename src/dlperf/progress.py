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


class Progress:
    def __init__(self, total: int, console: Console | None = None) -> None:
        self.total = total
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self._done_durations: list[float] = []
        self._current = ""
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
            (f"cell {min(done + 1, self.total)} of {self.total}: ", "bold"),
            (self._current, "cyan"),
            f"  {duration(elapsed)} so far · {done} done",
            f" · about {duration(eta)} left" if eta is not None else "",
        )

    def start(self, index: int, task) -> None:
        self._current = terminal(task.cell.label) + (f" (repeat {task.repeat + 1})" if task.repeat else "")
        self._started = time.monotonic()
        if not self.live:
            print(f"[{index + 1}/{self.total}] {self._current} ...", file=sys.stderr, flush=True)
        self.refresh()

    def refresh(self) -> None:
        if self._display is not None:
            self._display.update(self._render())

    def finish(self, index: int, task, measurement: dict, figures: dict) -> None:
        self._done_durations.append(measurement.get("duration_s") or 0.0)
        status = measurement["status"]
        median, n = figures.get("median_s"), figures.get("n")
        outcome = f"median {seconds(median)}" if status == "ok" and median else f"{status}: {measurement['error']}"
        outcome = terminal(outcome)  # the error comes from the user's model
        if status == "ok" and median and n is not None:
            outcome += f", n={n}" + (" (few samples)" if n < FEW_SAMPLES else "")
        line = f"[{index + 1}/{self.total}] {self._current}: {outcome}"
        if self.live:
            self.console.print(line, highlight=False, markup=False)
        else:
            print(line, file=sys.stderr, flush=True)
        self.refresh()
