"""A run's state as every view says it (`dlperf list --runs`, `table`, the report, `merge`), decided in one place.

The status a run was stored with is what its process last wrote: a dlperf killed (SIGKILL, SIGHUP, a lost terminal)
leaves "running" behind. The state corrects it with what the store knows now: a "running" run that no live process
holds (`store/lease.py`) is stopped; a copy merged from another file while it was running says so. What is left of
an unfinished run counts, as `--resume` measures them: cells never measured, the processes a measured cell still
lacks (`--repeats`), and the profiles an interrupt cut off (`--profile`). And the sessions: a run resumed after an
interrupt was measured by more than one command, hours apart perhaps, and its cells may have met different states of
the machine (`measurements.session`, kept since schema version 12).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

from dlperf.measure.units import plural
from dlperf.store import lease
from dlperf.store.records import RunRecord
from dlperf.store.schema import LEASES, SESSIONS
from dlperf.vocab import Status

if TYPE_CHECKING:
    from dlperf.store import Store

RAY_ORIGIN = "ray:"  # a run a Ray node measured, streamed into this file and leased here (`dlperf run --ray`)
RAY_DRIVER = "ray driver"  # in a Ray node's own file: the run the sweep's driver gave it to resume (`NodeSweep`)
CONTINUES = "continues"  # in a Ray node's run's env: the lost node's run whose cells left it measured (--resume)


@contextmanager
def snapshot(store: Store) -> Iterator[None]:
    """The store's reads inside see one state of the file: one read transaction (BEGIN, then the reads, then its
    end), which a writer's commit waits out (the sweep's, for SQLite's timeout). Read one statement at a time, a run
    being measured gave a record of both states: a cell pending, with a process's samples stored after its row was
    read. Inside a transaction already (a caller's, an outer snapshot), that one."""
    conn = store.conn
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:  # nothing written in it: its end only lets writers on
            conn.rollback()


@dataclass(frozen=True)
class Left:
    """What `--resume` would still measure of a run."""

    cells: int  # planned
    pending: int  # never measured
    processes: int  # timed processes that measured cells still lack (`--repeats`)
    short: int  # the measured cells that lack them
    profiles: int  # measured cells whose profile is missing (`--profile`)
    repeats: int = 1  # timed processes per cell
    partial: int = 0  # the measured cells that lack them and are ok so far (`dlperf list --runs`: partly measured)
    partly: dict[str, int] = field(default_factory=dict, compare=False)  # those cells' keys: processes done of each

    def __bool__(self) -> bool:
        return bool(self.pending or self.processes or self.profiles)

    @property
    def done(self) -> tuple[int, int]:
        """(done, planned): the run's timed processes, `repeats` per cell."""
        planned = self.cells * self.repeats
        return planned - self.pending * self.repeats - self.processes, planned

    def remaining(self) -> str:
        """What is left, plainly: "9 left, in 3 cells, 2 profiles left"; "" where nothing is."""
        done, planned = self.done
        cells = self.pending + (self.short if self.processes else 0)
        parts = [f"{planned - done} left, in {plural(cells, 'cell')}"] if planned > done else []
        if self.profiles:
            parts.append(f"{plural(self.profiles, 'profile')} left")
        return ", ".join(parts)

    def text(self) -> str:
        """What is done and what is left, as every view says it (the table's note, `dlperf list --runs`, the report,
        merge's warning): "3 of 12 processes done; 9 left, in 3 cells"; "...; nothing left"."""
        done, planned = self.done
        return f"{done} of {plural(planned, 'process', 'es')} done; {self.remaining() or 'nothing left'}"


@dataclass(frozen=True)
class Sessions:
    """The sessions that measured a run's processes: the command that created it, and each `--resume` after."""

    count: int
    cells: dict[str, int] = field(default_factory=dict)  # cell key -> the sessions its own processes came from

    @property
    def spanning(self) -> list[str]:
        """The cells whose processes came from more than one session."""
        return [key for key, n in self.cells.items() if n > 1]


@dataclass(frozen=True)
class RunState:
    run: RunRecord
    state: str  # complete | running | stopped | interrupted | copied (from a file measuring it: merged, or `cp`)
    holder: lease.Holder | None  # the live process measuring it now
    left: Left
    sessions: Sessions | None  # None: measured before the store kept sessions, it cannot tell

    @property
    def unfinished(self) -> bool:
        return self.state != "complete"

    @property
    def label(self) -> str:
        """The status as `dlperf list --runs` shows it: "stopped (its process is gone)"."""
        return {"running": f"running ({self.holder.describe()})" if self.holder else "running",
                "stopped": "stopped (its process is gone)", "copied": "running when copied"}.get(
                    self.state, self.state)  # fmt: skip

    @property
    def why(self) -> str:
        """Why it is unfinished, as a sentence says it: "interrupted", "stopped: its process is gone"."""
        origin = self.run.origin
        if self.state == "copied" and origin is not None:
            return f"running in {origin.db} (run {origin.run_id}) when it was copied here"
        if self.state == "copied":  # a `cp` of the file: its lease names the process measuring the original
            return "running in the file this one was copied from, whose process measures it still"
        return {"stopped": "stopped: its process is gone", "running": "running"}.get(self.state, self.state)

    def summary(self) -> str:
        """An unfinished run in a sentence, what is done and left included (`Left.text`): "run 1 is unfinished
        (stopped: its process is gone): 1 of 3 processes done; 2 left, in 2 cells"; "run 1 is being measured by pid 12
        on alpha: ..."."""
        left = self.left.text()
        if self.holder is not None:
            return f"run {self.run.id} is being measured by {self.holder.describe()}: {left}"
        return f"run {self.run.id} is unfinished ({self.why}): {left}"

    @property
    def resumed(self) -> bool:
        """Whether its processes came from more than one session (False where the store cannot tell)."""
        return self.sessions is not None and self.sessions.count > 1


SEARCHES = ("optimize", "fit", "crossover", "advise")  # each picks its cells from those before: resumed, it starts over


def command_of(argv: list[str]) -> str | None:
    """The dlperf command that made a run, from its stored argv: its first word after the program's that is not an
    option (`dlperf --db X optimize`: the store's path is never taken for it); None for an argv without one. Only
    for runs stored before their environment kept `made_by`: a script calling the API stores its own argv."""
    words = [a for before, a in pairwise(argv) if not a.startswith("-") and before != "--db"]
    return words[0] if words else None


def made_by(run: RunRecord) -> str | None:
    """The dlperf command whose run `run` is: as its environment keeps it (`Session.create`), else from its argv."""
    return run.env.get("made_by") or command_of(run.argv)


def search_of(run: RunRecord, predicted: Callable[[], bool]) -> str | None:
    """The search command (SEARCHES) whose run `run` is, where `dlperf run --resume` would not finish what it began;
    None for any other run, and for a crossover whose thread search ended (`predicted()`: its GPU steps are stored
    beside every batch's cell: resumed, the crossover is whole, as its interrupt said)."""
    command = made_by(run)
    if command not in SEARCHES or (command == "crossover" and predicted()):
        return None
    return command


def run_state(store: Store, run: RunRecord) -> RunState:
    """The one place a run's state is decided; every view asks it."""
    holder = store.measured_by(run.id)
    return RunState(run, _state(store, run, holder), holder, _left(store, run), _sessions(store, run.id))


def run_states(store: Store) -> dict[int, RunState]:
    return {run.id: run_state(store, run) for run in store.runs()}


def measured_here(store: Store) -> dict[int, lease.Holder]:
    """Run id -> the live process of this host measuring it now: a sweep started beside one shares its CPU."""
    if store.version < LEASES:
        return {}
    here = socket.gethostname()
    return {run_id: h for run_id, h in lease.holders(store.conn).items() if h.host == here and lease.alive(h)}


def _state(store: Store, run: RunRecord, holder: lease.Holder | None) -> str:
    if run.status != "running":
        return run.status
    if holder is not None or store.version < LEASES:  # an old file that could not be upgraded cannot tell
        return "running"
    origin = run.origin
    if origin is not None and not str(origin.db).startswith(RAY_ORIGIN):  # a merge copies no lease: what it saw
        return "stopped" if origin.stopped else "copied"
    return "copied" if store.measured_by(run.id, copied=True) else "stopped"  # `cp` of a file being measured, or not


def _left(store: Store, run: RunRecord) -> Left:
    """What an unfinished run lacks (a complete one lacks nothing: a search may leave cells pending by design)."""
    cells = store.cells(run.id, unreadable=lambda fault: None)
    repeats = int(run.spec.get("repeats") or 1)
    if run.status == "complete":
        return Left(len(cells), 0, 0, 0, 0, repeats)
    done = store.done_repeats(run.id)
    measured = [c for c in cells if c.status is not Status.PENDING]
    lacking = {c.key: sum((c.key, r) not in done for r in range(repeats)) for c in measured}
    profiled = store.profiles(run.id) if run.spec.get("profile") else None
    unprofiled = [c for c in measured if profiled is not None and c.status is Status.OK and not lacking[c.key]
                  and c.key not in profiled]  # fmt: skip
    short = sum(n > 0 for n in lacking.values())
    partly = {c.key: repeats - lacking[c.key] for c in measured if c.status is Status.OK and lacking[c.key] > 0}
    return Left(len(cells), len(cells) - len(measured), sum(lacking.values()), short, len(unprofiled), repeats,
                len(partly), partly)  # fmt: skip


def _sessions(store: Store, run_id: int) -> Sessions | None:
    """The sessions of the run's processes; None where none was stored with one (measured before schema version
    12). Processes stored before, beside later ones, count as one session of their own."""
    if store.version < SESSIONS:
        return None
    found = store.conn.execute("SELECT cell_key, session FROM measurements WHERE run_id = ?", (run_id,)).fetchall()
    if found and all(session is None for _, session in found):
        return None
    per_cell: dict[str, set[int | None]] = {}
    for key, session in found:
        per_cell.setdefault(key, set()).add(session)
    every = set().union(*per_cell.values())
    return Sessions(len(every), {key: len(s) for key, s in per_cell.items()})
