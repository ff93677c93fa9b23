"""The runs of a store as `dlperf list --runs` shows them: each run's state, what of it is done and what is left in
plain words, the command that made it, and the machine that measured it (a Ray node by its id: two nodes of one host
are two machines, as in the fleet view).

A run of a lost Ray node whose cells left another node measured (`dlperf run --resume --ray`) names that run: its
own processes stay its own, and nothing is left of it to resume."""

from __future__ import annotations

import shlex

from dlperf.measure.units import plural
from dlperf.report.fleet import machine_label, ray_node
from dlperf.store.location import ray_resume_command
from dlperf.store.records import RunRecord
from dlperf.store.state import CONTINUES, RAY_ORIGIN, RunState
from dlperf.vocab import OUT_OF_MEMORY, Status


def continued_by(runs: list[RunRecord]) -> dict[int, RunRecord]:
    """Run id -> the run that measured what it left on another Ray node. The link names a run of the driver's store,
    always older than the run that went on with it: in the node's own store, where that run is copied to measure
    what was left (as run 1, say), the same number names no run of it, or itself, and is no link."""
    found = {}
    for run in runs:
        if isinstance(lost := run.env.get(CONTINUES), int) and lost < run.id:
            found[lost] = run
    return found


def machine(run: RunRecord, cores: bool = False) -> str:
    """ "vm · AMD EPYC", a Ray node's "vm · AMD EPYC (Ray node 8df37c2f)"; `cores`: "vm · AMD EPYC, 2 cores"."""
    node = ray_node(run)
    return machine_label(run.fingerprint, cores) + (f" (Ray node {node[:8]})" if node else "")


def merged_from(run: RunRecord) -> str | None:
    """Where `dlperf merge` copied the run from ("FILE:RUN"); None for a run measured here, a Ray node's included."""
    origin = run.origin
    if origin is None or str(origin.db).startswith(RAY_ORIGIN):
        return None
    return f"{origin.db}:{origin.run_id}"


def progress(state: RunState, later: RunRecord | None = None) -> str:
    """What is done and what is left, as the table's note says it (`Left.text`): "3 of 12 processes done; 9 left, in
    3 cells"; "...; the rest measured by run 4 (Ray node 4b380b56)"; a complete run's: ""."""
    if not state.unfinished:
        return ""
    if later is None:
        return state.left.text()
    done, planned = state.left.done
    node = ray_node(later)
    return (f"{done} of {plural(planned, 'process', 'es')} done; the rest measured by run {later.id}"
            + (f" (Ray node {node[:8]})" if node else ""))  # fmt: skip


PARTLY = "partly measured"  # an unfinished run's ok cell short of its processes (`--repeats`): --resume adds them


def cells_text(row: dict) -> str:
    """ "6 ok, 4 out of memory": the cells by status, those that ran out of memory as such, not among the failed;
    "1 ok, 2 partly measured": an unfinished run's ok cells with some of their processes, not among the ok."""
    counts: dict[str, int] = {}
    for status, n in row["cells"].items():
        counts[status] = n
        if status == Status.OK.value and (partial := row.get("partial")):
            counts[status], counts[PARTLY] = n - partial, partial
    if oom := row.get("out_of_memory"):
        counts[Status.FAILED.value] -= oom
        counts[OUT_OF_MEMORY] = oom
    return ", ".join(f"{n} {status}" for status, n in counts.items() if n) or "none"


def status_text(row: dict) -> str:
    """ "interrupted: 3 of 12 processes done; 9 left, in 3 cells"; "complete, measured in 2 sessions"."""
    label = row.get("state_label")
    done = f": {row['progress']}" if row.get("progress") else ""
    sessions = row.get("sessions")
    return f"{label}{done}" + (f", measured in {sessions} sessions" if sessions and sessions > 1 else "")


def run_row(state: RunState, cells: dict[str, int], later: RunRecord | None = None, out_of_memory: int = 0) -> dict:
    """The JSON row of a run: `status` is its state (running, stopped, interrupted, complete, copied), `progress` its
    processes done and left in words (`processes`: the counts), `left` what --resume would measure of it (null:
    nothing), `continued_by` the run that measured what it left on another Ray node, `sessions` how many
    measured it (null: cannot tell); `cells` its cells by stored status, `out_of_memory` how many of the failed ran
    out of memory (a fit's tries that did not fit), `partial` how many of the ok lack processes (`--repeats`) an
    unfinished run has yet to measure."""
    run = state.run
    done, planned = state.left.done
    return {"run": run.id, "started": run.started_at, "status": state.state, "state_label": state.label,
            "measured_by": state.holder and state.holder.describe(), "left": state.left.remaining() or None,
            "progress": progress(state, later), "processes": {"done": done, "planned": planned},
            "continued_by": later and later.id, "sessions": state.sessions and state.sessions.count,
            "cells": dict(sorted(cells.items())), "out_of_memory": out_of_memory,
            "partial": state.left.partial, "command": shlex.join(run.argv or []),
            "machine": machine(run, cores=True), "ray_node": ray_node(run),
            "merged_from": merged_from(run)}  # fmt: skip


def ray_resume(state: RunState, later: RunRecord | None, db: str) -> str | None:
    """How a Ray node's unfinished run goes on, as the table and the report say it: over the cluster, its cells on a
    node of its kind (a plain `--resume` would measure them on this machine into the node's run); or, where another
    node measured what it left (`later`), which run did. None for any other run, and while a process measures it."""
    node = ray_node(state.run)
    if node is None or state.holder is not None:
        return None
    if later is not None:
        on = ray_node(later)
        return (f"run {state.run.id} is unfinished ({state.why}): Ray node {node[:8]} was lost; run {later.id}"
                + (f" (Ray node {on[:8]})" if on else "") + " measured what it left")  # fmt: skip
    command = ray_resume_command(ray_address(state.run.argv), db)
    return f"{state.summary()}; `{command}` measures them on a live Ray node of its kind"


def ray_address(argv: list[str]) -> str:
    """The cluster a `--ray` sweep was given (its stored command); ADDRESS where it cannot be read."""
    for flag, value in zip(argv, [*argv[1:], ""], strict=True):
        if flag == "--ray" and value:
            return value
        if flag.startswith("--ray="):
            return flag.removeprefix("--ray=")
    return "ADDRESS"


def partial_note(state: RunState, cells: list) -> list[str]:
    """An unfinished run's cells measured in fewer processes than its --repeats, named with how many: their figures
    are not final (an interrupt at 6 of 12 processes left one cell at 1 of 3, shown like any other). The table's,
    `table --best`'s and the report's."""
    from dlperf.report.table import cell_label

    if not state.unfinished or not state.left.partly:
        return []
    named = [f"{cell_label(c)} ({state.left.partly[c.key]} of {state.left.repeats})" for c in cells
             if c.key in state.left.partly]  # fmt: skip
    if not named:
        return []
    return [f"measured so far in fewer processes than --repeats {state.left.repeats}, so their figures are not "
            f"final: {', '.join(named)}"]  # fmt: skip
