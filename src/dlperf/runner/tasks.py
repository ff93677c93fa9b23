"""Cells into the child processes that measure them: a task is one process of one cell."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlperf.protocol import Cell, StopRule


@dataclass(frozen=True)
class Task:
    """One child process: a cell's `repeat`-th measurement, with what a search asks of it (`dlperf optimize`)."""

    cell: Cell
    repeat: int
    check_if_faster_than_s: float | None = None  # run the loss check only when the step is faster than this
    stop: StopRule | None = None  # skip the untimed extras of a cell far slower than it could win with
    unsupported: str | None = None  # why the cell is known unsupported before a child starts (`plan/unsupported.py`):
    # stored as its child would have said it, and no child is started


def schedule(cells: list[Cell], repeats: int) -> list[Task]:
    """Repeats interleaved with the other cells: processes of one cell are spread over the run, not back to back,
    so a slow spell of a shared machine does not land on one cell."""
    return [Task(cell, r) for r in range(repeats) for cell in cells]


def processes(tasks: Sequence[Task], *, profile: bool = False, to_profile: Sequence[Cell] = ()) -> dict[tuple, Cell]:
    """The child processes a sweep of `tasks` starts, each by its identity: a task's measurement, and with `profile`
    each cell's untimed profile after them (`to_profile`: cells whose profile an interrupt cut off, profiled first)."""
    profiled = [*to_profile, *(t.cell for t in tasks)] if profile else list(to_profile)
    return {
        **{("measure", t.cell.key, t.repeat): t.cell for t in tasks},
        **{("profile", cell.key): cell for cell in profiled},
    }
