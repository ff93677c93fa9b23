"""`dlperf run --ray`'s side of the command (the sweep itself: `fleet.py`): its nodes' runs shown side by side, or,
interrupted, what they keep and how to go on, each as the store has it."""

from __future__ import annotations

import sys

from dlperf.errors import UsageError
from dlperf.vocab import ExitCode


def run_fleet(args, db: str) -> int:
    """`--ray`: the sweep on the cluster's nodes (`fleet.py`), then their runs side by side (one node's: its table)."""
    import shlex

    from dlperf import fleet
    from dlperf.commands.table import print_table, show_fleet

    fleet.check_flags(args)
    try:
        code, runs = fleet.run(args, sys.argv[1:], db)
    except KeyboardInterrupt:  # before the nodes began (Ray connecting, the nodes' kinds asked): the runs as they were
        code, runs = ExitCode.INTERRUPTED, _resumable_runs(db) if args.resume else _sweep_runs(db, args)
    if code == ExitCode.INTERRUPTED:
        say_fleet_interrupted(args, db, runs)
        return code
    if len(runs) < 2:
        for run_id in runs:
            print_table(db, run_id, "text")
        return code
    from dlperf.report.fleet import read

    view = read(db, None, runs)  # this sweep's runs, named by their campaign (a resumed sweep's: the runs' own)
    campaign = args.campaign or _campaign(db, runs)
    if campaign:
        view.name = f"campaign {campaign} ({view.name})"
    show_fleet(view)
    again = f"; all of campaign {campaign}: dlperf table --campaign {shlex.quote(campaign)}" if campaign else ""
    print(f"dlperf: a run per node: {', '.join(map(str, runs))} (dlperf table --run N){again}", file=sys.stderr)
    return code


def say_fleet_interrupted(args, db: str, runs: list[int]) -> None:
    """A `--ray` sweep interrupted: what its `runs` keep and how to go on, each as the store has it: "nothing is
    stored" only where nothing of the sweep is, the resume only where it has something left to measure (a sweep
    whose runs were complete was told to resume, which then said it had no unfinished run)."""
    from dlperf.measure.units import agreeing, named
    from dlperf.store.location import ray_resume_command

    again = ray_resume_command(args.ray, db)
    if not runs:
        stored = "nothing more was measured" if args.resume else "nothing is stored"
        then = "run the same command to start again"
        if args.resume:
            then = f"continue with: {again}" if _resumable_runs(db) else "nothing is left to measure"
        print(f"dlperf: interrupted before any node's plan arrived: {stored}; {then}", file=sys.stderr)
        return
    done = _complete(db, runs)
    if left := [r for r in runs if r not in done]:
        print(f"dlperf: interrupted; {named('run', left)} {agreeing(len(left), 'keeps', 'keep')} the processes that "
              f"finished (dlperf list --runs says what each has left). Continue with: {again}",
              file=sys.stderr)  # fmt: skip
        return
    print(f"dlperf: interrupted as the sweep ended: {named('run', runs)} {agreeing(len(runs), 'is', 'are')} "
          "complete, nothing is left to measure (dlperf table --run N)", file=sys.stderr)  # fmt: skip


def _resumable_runs(db: str) -> list[int]:
    """The runs of Ray sweeps `--resume --ray` would take up in `db` (`fleet.fleet_runs`); none where it cannot be
    read."""
    from dlperf import fleet

    store = _opened(db)
    if store is None:
        return []
    try:
        return [r.id for r in fleet.fleet_runs(store)]
    finally:
        store.close()


def _sweep_runs(db: str, args) -> list[int]:
    """The runs a new sweep stored (its nodes' runs of its campaign, `fleet.run` names it), finished or not; none
    where the store cannot be read."""
    from dlperf import fleet

    campaign, store = getattr(args, "campaign", None), _opened(db)
    if store is None or campaign is None:
        return []
    try:
        return [r.id for r in store.runs() if r.spec.get("campaign") == campaign and fleet.node_of(r)]
    finally:
        store.close()


def _complete(db: str, runs: list[int]) -> set[int]:
    """Those of `runs` the store holds complete; none where it cannot be read."""
    store = _opened(db)
    if store is None:
        return set()
    try:
        return {r.id for r in store.runs() if r.id in runs and r.status == "complete"}
    finally:
        store.close()


def _opened(db: str):
    """The store at `db`, or None where there is none to read."""
    from dlperf.store import Store

    try:
        return Store.open(db, create=False)
    except UsageError:
        return None


def _campaign(db: str, runs: list[int]) -> str | None:
    """The campaign `runs` name (stored in their spec), when they name one and the same."""
    from dlperf.report.load import campaign_of
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        return campaign_of([r for r in store.runs() if r.id in runs])
    finally:
        store.close()
