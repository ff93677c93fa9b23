"""`dlperf run --dry-run`: the plan's cells (a resumed run's: those it has left), each one's pilot step unsupported
or failed where it was, and what measuring them would take (`plan/estimate.py`)."""

from __future__ import annotations


def print_estimate(outcome, db: str | None = None) -> None:
    """`--dry-run`: the plan's cells (a resumed run's: those it has left, its profiles cut off included), and what
    measuring them would take."""
    from dlperf.measure.units import plural
    from dlperf.report.format import duration, terminal
    from dlperf.runner.sweep import may_compile_at_once

    tasks, resumed = outcome.tasks, outcome.run_id is not None  # a new run's dry run stores no run
    cells = dict.fromkeys(t.cell for t in tasks) if resumed else outcome.plan.cells
    from dlperf.plan.estimate import pilot_key

    e = outcome.estimate
    for cell in cells:
        why, failed = e.unsupported.get(pilot_key(cell)), e.failed.get(pilot_key(cell))
        said = f"  (unsupported here: {why})" if why else f"  (its pilot step {failed})" if failed else ""
        print(terminal(cell.label + said))
    if resumed:
        print(resume_left(outcome, db))
    sources = [f"{e.known} from earlier runs on this machine"] if e.known else []
    if e.profiles_known:
        sources.append(f"{plural(e.profiles_known, 'profile')} from earlier profiles here")
    if refused := sum(t.unsupported is not None for t in tasks):  # plan/unsupported.py
        sources.append(f"{refused} known to be unsupported (no process is started)")
    if e.pilots:
        others = "the others" if sources else "all"
        sources.append(f"{others} from {plural(e.pilots, 'pilot step')} that took {duration(e.pilot_s)}")
    profiles = f" and {plural(e.profiles, 'profile process', 'es')}" if e.profiles else ""
    # "at most 10 min" after a run of 11.5 min on a busier machine: the bound is at the speed measured so far
    print(f"{plural(len(tasks), 'cell process', 'es')}{profiles}, estimated {duration(e.seconds)} (at most "
          f"{duration(e.at_most_s)} if every cell runs to --max-time, at the speed measured so far: a busier machine "
          f"takes longer): {', '.join(sources)}")  # fmt: skip
    if e.failed:  # its pilot timed no step: the cells will fail as it did, and the estimate counts only its life
        print(f"{plural(len(e.failed), 'pilot step')} failed or timed out (above): the run's cells of "
              f"{'it' if len(e.failed) == 1 else 'them'} will likely do the same; the estimate counts each as long as "
              "its pilot took")  # fmt: skip
    at_once = outcome.plan.spec.compile_at_once
    if at_once > 1 and any(may_compile_at_once(t.cell) for t in tasks):
        print(f"--compile-at-once {at_once}: the estimate counts the compiled cells' processes one after another, "
              "as if none overlapped, so it errs long")  # fmt: skip


def resume_left(outcome, db: str | None) -> str:
    """What `--resume` would measure of a run: its cell processes left, and the profiles an interrupt cut off
    (`store/state.py` counts them as `sweep.unprofiled` does)."""
    from dlperf.store import Store, default_db
    from dlperf.store.state import run_state

    store = Store.open(db or default_db(), create=False)
    try:
        profiles = run_state(store, store.run(outcome.run_id)).left.profiles
    finally:
        store.close()
    also = f", and {'1 cell' if profiles == 1 else f'{profiles} cells'} to profile" if profiles else ""
    return (f"run {outcome.run_id}: {len(outcome.tasks)} of its {len(outcome.plan.tasks)} cell processes are left to "
            f"measure{also} (a dry run: it measured nothing)")  # fmt: skip
