"""Cells into the child processes that measure them: a task is one process of one cell."""

from __future__ import annotations

from dataclasses import dataclass

from dlperf.protocol import Cell, StopRule


@dataclass(frozen=True)
class Task:
    """One child process: a cell's `repeat`-th measurement, with what a search asks of it (`dlperf optimize`)."""

    cell: Cell
    repeat: int
    check_if_faster_than_s: float | None = None  # run the loss check only when the step is faster than this
    stop: StopRule | None = None  # skip the untimed extras of a cell far slower than it could win with


def schedule(cells: list[Cell], repeats: int) -> list[Task]:
    """Repeats interleaved with the other cells: processes of one cell are spread over the run, not back to back,
    so a slow spell of a shared machine does not land on one cell."""
    return [Task(cell, r) for r in range(repeats) for cell in cells]
