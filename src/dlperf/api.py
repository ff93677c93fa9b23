"""The Python API; the CLI calls the same functions.

    import dlperf
    outcome = dlperf.run(["fcn-r", "resnet-56"], threads=[1, 2], db="dlperf.db")
    outcome = dlperf.run([my_factory])   # a module-level function returning dlperf.user_workload(...)

The flow is one-way: spec (`spec.py`: parsed, and checked by RunSpec) -> plan (`plan/`: the cells) -> a session
(`runner/session.py`: a child per task, each result stored) -> views.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dlperf import envinfo
from dlperf.api_arguments import (
    RESUME_FLAGS,
    RUN_FLAGS,
    checked_arguments,
    checked_own,
    checked_progress,
    in_callers_terms,
)
from dlperf.errors import RunInterrupted, UsageError
from dlperf.loaders import DATA_DATASET, DATA_SYNTHETIC
from dlperf.measure.units import agreeing
from dlperf.plan import Plan, framework_info, make_plan
from dlperf.plan.estimate import Estimate, for_plan
from dlperf.plan.unsupported import marked
from dlperf.plan.workloads import check_data_of, check_room
from dlperf.predict import cells as gpu_predictions
from dlperf.protocol import Cell
from dlperf.report.format import terminal
from dlperf.runner import lifeline, warm
from dlperf.runner.session import Session
from dlperf.runner.sweep import Interrupted
from dlperf.runner.tasks import Task, processes
from dlperf.spec import RunSpec, make_spec, probe_trace_dir
from dlperf.store import Store, lease, now, spill
from dlperf.store.location import as_called, check_path, db_said_as, given_db, resume_command
from dlperf.store.merge import source_refusal
from dlperf.store.records import CellRecord, RunRecord, in_measured_order
from dlperf.store.state import RAY_DRIVER, made_by, measured_here, run_state, search_of
from dlperf.vocab import ExitCode, Status
from dlperf.workloads.base import Workload
from dlperf.workloads.user import changed_sources


@dataclass
class Outcome:
    """What `run` and `resume` did: `exit_code` as `dlperf run`'s, 0 when every cell measured, 1 when some failed or
    timed out (`statuses`: each task's); `run_id`, the run's in the store (None for a new run's dry run); `plan`, its
    cells; a dry run's `estimate`, and `tasks`. An interrupt raises RunInterrupted instead, bad input UsageError."""

    exit_code: int
    run_id: int | None = None
    plan: Plan | None = None
    statuses: list[Status] = field(default_factory=list)
    estimate: Estimate | None = None
    tasks: list[Task] | None = None  # a dry run's processes: the plan's, or those a resumed run has left

    def __repr__(self) -> str:
        """A line a notebook shows (the plan's whole environment, every CPU flag, was 3,300 characters)."""
        cells = len(self.plan.cells) if self.plan is not None else 0
        said = [f"exit_code={self.exit_code}", f"run_id={self.run_id}", f"cells={cells}"]
        if self.statuses:
            counted = Counter(s.value for s in self.statuses)
            said.append("statuses={" + ", ".join(f"{k}: {n}" for k, n in counted.items()) + "}")
        if self.estimate is not None:
            said.append(f"estimate='{self.estimate.seconds:.0f} s, at most {self.estimate.at_most_s:.0f} s'")
        return f"Outcome({', '.join(said)})"


@db_said_as("db")
def run(
    workloads: Sequence[str | Callable] | str | None = None,
    *,
    db: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    progress: Any = None,
    argv: list[str] | tuple[str, ...] | None = None,
    warn: Callable[[str], None] | None = None,
    **spec_kwargs: Any,
) -> Outcome:
    """Plan, measure and store a sweep, as `dlperf run` does. Returns the outcome; `outcome.exit_code` follows the
    CLI's convention (0, or 1 where a cell failed). Ctrl-C (SIGTERM, SIGHUP while cells run; before, the caller's
    handlers) raises KeyboardInterrupt once what had finished is stored and every child stopped: RunInterrupted (its
    `run_id`; uncaught, exit 1 not 130: it says why) once the run is stored, for `resume`; before, a plain one.

    Warnings about the plan (oversubscription, inherited thread variables) go to `warn` before anything runs;
    by default to stderr. They name the arguments (`threads 8 exceeds the 2 usable cores`), `dlperf run`'s its flags.

    Args:
        workloads: built-in names, `file.py:factory` strings or factory functions (a list, or one comma list as
            `--workloads` takes it; `NAME@bN` at a batch of its own); None: the seven networks of Shi et al. (2016).
        db: the SQLite store (default: $DLPERF_DB or ./dlperf.db).
        dry_run: plan and estimate only (`outcome.tasks`, `outcome.estimate`); nothing is measured or stored.
        progress: a progress display in place of the default one; False: none.
        argv: the command line stored with the run, a list of str (default: this process's).
        warn: called with each warning about the plan.
        **spec_kwargs: `dlperf run`'s flags, each a list, its comma text or one value (None: the default):
            `frameworks`, `devices`, `threads` (`[1, 2]`, `"1,2"`, `1`), `modes`, `nprocs`, `scaling`, `parallel`,
            `microbatches`, `loaders`; the paths `data`, `trace_dir`; `timer=dlperf.TimerConfig(max_time=2)`;
            and as they are `repeats`, `timeout`, `compile_timeout`, `compile_at_once`, `campaign`, the True or
            False of `pin`, `loss_check`, `profile`, `predict`; `max_memory` in bytes or as text (`"512MiB"`). A
            bad value raises UsageError naming the argument (`threads='two'`), before anything runs.
    """
    argv = checked_own(dry_run, warn, argv)
    db, warn, began, progress = given_db(db), warn or warn_stderr, now(), checked_progress(progress)
    measured = measured_ids(db)  # before planning: a run begun in the same second as `began` is not one beside it
    lifeline.remove_stale_dirs()  # what the children of a killed dlperf left
    with in_callers_terms(RUN_FLAGS, {**spec_kwargs, "workloads": workloads}):  # `threads='two'`, not `--threads`
        spec = make_spec(workloads, **checked_arguments(spec_kwargs))
        check_path(db, create=True)  # one that cannot be opened is the one-line error, before any probe child plans;
        # a dry run's too, as the run it stands for would meet it (a missing folder, a link to one)
        spec = traces_tried(spec, db)
        plan = planned(spec, dry_run)
    store = None if dry_run else Store.open(db, create=True)
    said = [*kept_measurements(db, store), *left_alike(db, store, spec, plan.env),
            *began_beside(db, store, began, measured)]  # fmt: skip
    tell(plan, said, warn)
    if store is None:
        estimate = for_plan(plan, db, say_pilot)
        return Outcome(dry_run_code(estimate), plan=plan, estimate=estimate, tasks=plan.tasks)
    try:
        session = Session.create(store, spec, plan.env, plan.cores, argv or sys.argv, plan.cells, plan.workloads)
        for line in began_beside(db, store, began, measured | {session.run_id}):  # two that planned together: each
            if line not in said:  # looked before the other held its lease, and neither was warned (3 times in 5)
                warn(line)
        if spec.predict:
            predict_first(session, plan, warn, db)
        return _execute(session, plan.tasks, plan, progress, db)
    finally:
        store.close()


def dry_run_code(estimate: Estimate | None) -> ExitCode:
    """A dry run's exit code: 1 where a pilot step failed (a model that cannot train: the run's cells would fail
    too; a dry run said 0 of it, its estimate from the pilot's life), else 0. A pilot that timed out is none: the
    run's processes have their own --timeout."""
    failed = estimate is not None and any(why.startswith(Status.FAILED.value) for why in estimate.failed.values())
    return ExitCode.CELLS_FAILED if failed else ExitCode.OK


def planned(spec: RunSpec, dry_run: bool) -> Plan:
    """The run's plan; interrupted, a plain KeyboardInterrupt saying so (a probe child's own,
    `launch.ChildInterrupted`, said nothing). A user model this machine cannot hold is refused (`check_room`; a
    search's own checks, crossover's and advise's, say more)."""
    try:
        plan = make_plan(spec) if dry_run else make_plan(spec, before_data=start_warm_parents)
    except KeyboardInterrupt:
        raise KeyboardInterrupt("dlperf.run was interrupted while it planned: nothing was stored") from None
    check_room({k: Workload.from_json(w) for k, w in plan.workloads.items()}, [c.device for c in plan.cells])
    return plan


def traces_tried(spec: RunSpec, db: str) -> RunSpec:
    """A profiled run's spec with its traces' folder (--trace-dir, else beside the database), tried as the first
    trace will be written, before planning (`spec.probe_trace_dir`: its folder left as it was)."""
    if not spec.profile:
        return spec
    if spec.trace_dir is None:
        spec = replace(spec, trace_dir=os.path.abspath(f"{db}.traces"))
    probe_trace_dir(spec.trace_dir)
    return spec


def start_warm_parents(plan: Plan) -> None:
    """The warm parents the plan's processes will fork from, started while its real data is opened in a probe
    child (`make_plan`'s last check): their imports overlap the probe's (on the H200, about 9 s each)."""
    warm.prepare(processes(plan.tasks), plan.spec.max_memory, {})


def predict_first(session: Session, plan: Plan, warn: Callable[[str], None], db: str) -> None:
    """The GPU cells' predictions, the warm parents started meanwhile: their imports overlap the predictions'
    operator count (issue 27: ~9 s). Interrupted, the run is stored: resumable, and the command says how."""
    try:
        session.warm_up(plan.tasks)
        predict(session, plan, warn)
    except KeyboardInterrupt:
        raise RunInterrupted(session.run_id, db, session.interrupted()) from None


def predict(session: Session, plan: Plan, warn: Callable[[str], None]) -> None:
    """The plan's GPU cells predicted for their GPU (a probe child counts their operators), stored before any cell
    runs: what a crash mid-run leaves still has them. `--no-predict` skips this."""
    rows, notes = gpu_predictions.predictions(plan.cells, plan.workloads, plan.env)
    for note in notes:
        warn(note)
    if rows:
        session.store.record_predictions(session.run_id, rows)


def tell(plan: Plan, said: list[str], warn: Callable[[str], None]) -> None:
    """What a run says before it measures: the plan's warnings and `said` to `warn`, then its notes (the folder of
    images each workload reads), which are no warnings, to stderr; each naming the arguments as they were given."""
    for warning in [*(as_called(w, RUN_FLAGS, plan.spec) for w in plan.warnings), *said]:
        warn(warning)
    for note in plan.notes:
        print(f"dlperf: {terminal(as_called(note, RUN_FLAGS, plan.spec))}", file=sys.stderr, flush=True)


def say_pilot(cell: Cell) -> None:
    print(f"estimating: one untimed step of {terminal(cell.label)}", file=sys.stderr, flush=True)


def kept_measurements(db: str, store: Store | None = None) -> list[str]:
    """A reminder of the measurements a failing store left beside it (`store/spill.py`), until --resume takes them;
    given the store, those of no run in it (a store deleted and made again at the path) are told apart."""
    kept = spill.runs_kept(db)
    if not kept:
        return []
    runs = ", ".join(f"run {run_id}: {n}" for run_id, n in sorted(kept.items()))
    where = spill.holding(db)
    keep = agreeing(len(where), "keeps", "keep")
    but = ""
    if store is not None and (gone := _of_no_run(db, store)):
        but = f", not the {gone} of runs no longer in it (a store made before at this path), which it leaves"
    return [f"{', '.join(map(str, where))} {keep} measurements the store refused ({runs}); "
            f"`{resume_command(db)}` stores those of the latest unfinished run{but}"]  # fmt: skip


def began_beside(db: str, store: Store | None, began: str, before: frozenset[int] = frozenset()) -> list[str]:
    """The runs another process of this host began measuring in `db` while this one was planned (since `began`, and
    not among `before`, those measured when it started): the check before planning
    (`commands.common.warn_if_measured`) could not see them, so two sweeps started together each timed the other's
    load unwarned. A lease's start is kept to the second, so `before` tells apart one begun in `began`'s second."""
    if store is None:
        return []
    return [f"run {run_id} of {db} began beside this one while it was planned ({holder.describe()}): the two runs "
            "share the CPU, and their timings disturb each other"
            for run_id, holder in measured_here(store).items()
            if holder.since >= began and run_id not in before]  # fmt: skip


def beside_since(db: str) -> Callable[[Store, int, Callable[[str], None]], None]:
    """Taken as a search (optimize, fit, crossover) starts: once its own run `run_id` is stored, each run another
    process of this host began in `db` meanwhile is said to `warn` (`began_beside`). A search looked only before it
    planned, so two started together (a `dlperf run` and a `dlperf optimize` of one store) each timed the other's load
    unwarned."""
    began, before = now(), measured_ids(db)

    def said(store: Store, run_id: int, warn: Callable[[str], None]) -> None:
        for line in began_beside(db, store, began, before | {run_id}):
            warn(line)

    return said


def measured_ids(db: str) -> frozenset[int]:
    """The runs of `db` a live process of this host measures now."""
    return _read(db, lambda store: frozenset(measured_here(store)), frozenset())


def _read(db: str, read: Callable[[Store], Any], none: Any) -> Any:
    """`read` of the store at `db`, opened as it is and closed; `none` where there is no store yet, or one the run
    itself will refuse in its own words."""
    if not os.path.isfile(db):
        return none
    try:
        store = Store.open(db, create=False)
    except UsageError:
        return none
    try:
        return read(store)
    finally:
        store.close()


def left_alike(db: str, store: Store | None, spec: RunSpec, env: dict) -> list[str]:
    """The same sweep run again where --resume would finish it: the run it takes up is unfinished, its process gone,
    its spec this one, on this machine. --resume measures only what that run left; this starts a run of its own and
    measures every cell again (a rerun after Ctrl-C, or a crash, was silently measured whole). Without `store` (a
    dry run's) the file at `db` is read: its estimate of every cell said nothing of the run --resume would finish."""
    if store is None:
        return _read(db, lambda store: left_alike(db, store, spec, env), [])
    run = latest_resumable(store, env)
    if run is None or envinfo.resume_diff(run.fingerprint, run.env, env):
        return []
    try:
        alike = RunSpec.from_json(run.spec) == spec
    except (UsageError, TypeError):  # a spec an older dlperf stored
        alike = False
    state = run_state(store, run)
    if not alike or state.holder is not None:  # one being measured: `warn_if_measured` says so
        return []
    return [f"{state.summary()}; it is this same sweep: `{resume_command(db)}` measures only what it left, while this "
            "command starts a new run and measures every cell again"]  # fmt: skip


def _of_no_run(db: str, store: Store) -> int:
    ids = {r.id for r in store.runs()}
    return spill.of_no_run(db, lambda run_id: store.mark(run_id) if run_id in ids else None)


def warn_stderr(message: str) -> None:
    print(f"dlperf: warning: {terminal(message)}", file=sys.stderr, flush=True)


@db_said_as("db")
def resume(db: str | os.PathLike[str] | None = None, progress: Any = None, warn: Callable[[str], None] | None = None,
           dry_run: bool = False) -> Outcome:  # fmt: skip
    """Continue the latest unfinished run without re-measuring what it finished. A run another live process still
    measures is refused (LeaseHeld, a UsageError); one whose process died is taken over, with a warning to `warn`
    saying whose it was. Its stored spec is checked as the flags were (its `--data` read again), and the machine must
    be the one that measured it. `dry_run`: what is left and its estimate (`Outcome.tasks`, `estimate`), nothing
    measured or taken over. Interrupted, it raises KeyboardInterrupt as `run` does (RunInterrupted once it measured,
    the run resumable again); bad input raises UsageError."""
    with in_callers_terms(RESUME_FLAGS):  # `resume: every run in x.db is complete`, not `--resume: ...`
        return _resume(db, progress, warn, dry_run)


def _resume(db: str | os.PathLike[str] | None, progress: Any, warn: Callable[[str], None] | None,
            dry_run: bool) -> Outcome:  # fmt: skip
    checked_own(dry_run, warn)
    db, warn, progress = given_db(db), warn or warn_stderr, checked_progress(progress)
    lifeline.remove_stale_dirs()  # what the children of a killed dlperf left
    store = Store.open(db, create=False)
    try:
        run = latest_unfinished(store, db)
        apart = _resumed_apart(store, run, db)
        spec, env = _resumable(run)
        if not dry_run:
            if spec.profile and spec.trace_dir is not None:  # the traces' folder may be unwritable since
                probe_trace_dir(spec.trace_dir)
            _take_over(store, run, warn)
        elif (holder := store.measured_by(run.id)) is not None:  # its pilot steps would time beside that process
            raise lease.held(run.id, holder)
        elif (holder := store.measured_by(run.id, copied=True)) is not None:  # or the file it was copied from
            raise lease.held(run.id, holder, copy=True)
        if apart:
            warn(apart)
        session = Session.resume(store, run.id, spec, env["cores"]["cores"])
        plan = Plan(spec, [c.cell for c in session.cells()], dict(session.workloads), env, session.cores)
        tasks = marked(session.remaining(), session.workloads)  # those known to be unsupported start no child
        if not dry_run and any(t.cell.loader for t in tasks):
            session.warm_up(tasks)  # its imports overlap the data's probe
        _check_data_again(run.id, spec, tasks, session.workloads, store.cells(run.id))
        if dry_run:
            cut = session.unprofiled(tasks)  # the profiles an interrupt cut off, taken first
            estimate = for_plan(plan, db, say_pilot, tasks, session.cells(), cut)  # extras its cells stored: not again
            return Outcome(dry_run_code(estimate), run.id, plan, estimate=estimate, tasks=tasks)
        where = ", ".join(map(str, spill.holding(db, run.id, store.mark(run.id))))
        if kept := session.take_up_kept():  # none of `tasks`: what was kept is measured (`Session.remaining`)
            warn(f"stored {kept} measurement{'s' * (kept != 1)} kept in {where} when the store refused them")
        if aside := spill.aside(db, run.id, store.mark(run.id)):
            warn(_left_aside(run, aside, store.mark(run.id)))
        session.reopen()
        before = len(store.done_repeats(run.id))  # its items are numbered on: `[4/4]` after `[3/4]` was interrupted
        done = _execute(session, tasks, plan, progress, db, session.unprofiled(tasks), before)
        # a cell that failed before the interrupt (or among the measurements kept aside, taken up above) is the run's
        # failure still: a resumed run read 0 beside its `failed` cell, where the same sweep uninterrupted reads 1
        if any(c.status.is_failure for c in store.cells(run.id)):
            done = replace(done, exit_code=ExitCode.CELLS_FAILED)
        return done
    finally:
        store.close()


def _left_aside(run: RunRecord, aside: dict[Path, list[spill.Kept]], mark: dict[str, str]) -> str:
    """One line on the lines kept under the run's id that --resume did not take up: another run's of that id (a
    store deleted and made again at the path), or an earlier dlperf's unmarked line (`spill.belongs`): never a run
    with a token's (`mark`: its dlperf marks every line it keeps), and a run without one's only where its process
    started after the run did."""
    n = sum(map(len, aside.values()))
    theirs = sorted({k.run["started_at"] for lines in aside.values() for k in lines if k.run})
    whose = [f"another run {run.id}'s, started {', '.join(theirs)}"] if theirs else []
    unmarked = [k for lines in aside.values() for k in lines if k.run is None]
    if unmarked and "token" in mark:
        whose.append("an earlier dlperf's, unmarked (every line this run keeps carries its mark)")
    elif unmarked:
        untimed = any(not isinstance(k.measurement.detail.started_at, int | float) for k in unmarked)
        unknown = " (or does not say when)" if untimed else ""
        whose.append(f"an earlier dlperf's, whose process did not start after this run did{unknown}")
    return (
        f"left {n} measurement{'s' * (n != 1)} kept for a run {run.id} in {', '.join(map(str, aside))} where "
        f"{agreeing(n, 'it is', 'they are')}: not this run's (started {run.started_at}) but {' and '.join(whose)}"
    )


def _resumed_apart(store: Store, run: RunRecord, db: str) -> str | None:
    """A run merged in from another file (`dlperf merge`) is refused where it goes on there (`merge.source_refusal`).
    Otherwise it is resumed here apart from it: the warning that says so. A Ray node's own copy, which `dlperf run
    --resume --ray` gave it (`RAY_DRIVER`), is the sweep's: no copy the user made, not said."""
    if run.origin is None or run.origin.db == RAY_DRIVER:
        return None
    if refused := source_refusal(store, run, db):
        raise UsageError(f"--resume: {refused}")
    return (f"run {run.id} was copied from {run.origin.db} (its run {run.origin.run_id}), where no process measures "
            "it now: it is resumed here apart from it, and a later merge of that file keeps this copy's own "
            "measurements")  # fmt: skip


def _resumable(run: RunRecord) -> tuple[RunSpec, dict]:
    """The run's spec, and this machine's environment where what the run has left can be measured as it was planned:
    its frameworks still here (one removed since is one line naming the run), the same machine and software, its model
    files unedited. Checked before the run is taken over: a run refused stays as it was."""
    spec = RunSpec.from_json(run.spec)
    try:
        env = envinfo.capture(framework_info(spec.frameworks))
    except UsageError as exc:
        raise type(exc)(f"--resume: run {run.id}'s {exc}") from None  # a probe killed stays one (exit 1)
    changes = envinfo.resume_diff(run.fingerprint, run.env, env)
    if changes:
        raise UsageError(
            f"--resume: run {run.id} was measured on a different machine or software "
            f"({'; '.join(changes)}); start a new run instead"
        )
    if edited := changed_sources(run.env.get("sources", {})):
        raise UsageError(f"--resume: run {run.id}'s model: {'; '.join(edited)} since the run began, so what is "
                         "left would train another model; start a new run instead")  # fmt: skip
    return spec, env


def _check_data_again(run_id: int, spec: RunSpec, tasks: list[Task], workloads: dict[str, dict],
                      measured: list[CellRecord]) -> None:  # fmt: skip
    """The real data the loader cells left to measure read, as when the run was planned: a folder gone or changed
    since is one line before anything is measured, not a failed cell; so is one whose dataset holds another number of
    samples than the loader cells `measured` read (refilled: the cells left would read another dataset, the table
    set them beside the first's, and the advice chose between them)."""
    from dlperf.report.table import cell_label

    left = {json.dumps(workloads[t.cell.key], sort_keys=True): workloads[t.cell.key] for t in tasks if t.cell.loader}
    if left and (gone := _folder_gone(spec.data)):  # as a fresh run says it, not 'no imagenet/train folder' in it
        raise UsageError(f"--resume: run {run_id}'s --data {spec.data}: {gone} (moved or removed since the run "
                         "began): put it back to resume the run, or start a new run")  # fmt: skip
    try:
        checks = check_data_of(spec, list(left.values()))
    except UsageError as exc:
        raise type(exc)(f"--resume: run {run_id}'s --data: {exc}") from None  # a probe killed stays one (exit 1)
    for cell in measured:
        now = checks.get(cell.workload)
        if cell.data and cell.data.samples and now and now.samples and now.samples != cell.data.samples:
            raise UsageError(f"--resume: run {run_id}'s --data {spec.data}: the {cell.data.dataset} dataset of "
                             f"{cell.workload} holds {now.samples:,} samples, {cell.data.samples:,} when its cell "
                             f"{cell_label(cell)} read it: the folder changed since, so what is left would read "
                             "another dataset; start a new run instead")  # fmt: skip


def _folder_gone(data: str) -> str:
    """Why the folder a run's --data named is no folder now ("no such directory", as `spec.parse_data` says it);
    "" for one there, or a keyword."""
    if data in (DATA_SYNTHETIC, DATA_DATASET):
        return ""
    path = Path(data)
    return "" if path.is_dir() else "not a directory" if path.exists() else "no such directory"


def latest_unfinished(store: Store, db: str) -> RunRecord:
    """The run `--resume` takes up (`latest_resumable` of this machine); none is a UsageError saying why (no run,
    every run complete, another machine's or a search's, a Ray node's)."""
    here = envinfo.capture()
    run = latest_resumable(store, here)
    if run is None and not store.runs():
        raise UsageError(f"--resume: {db} holds no run to resume (dlperf run starts one)")
    if run is None and (theirs := latest_resumable(store)):  # merged in from another machine: it goes on there
        from dlperf.report.fleet import measured_elsewhere

        _not_a_ray_nodes(store, theirs, db)
        raise UsageError(f"--resume: {db} holds no unfinished run of this machine: {measured_elsewhere(theirs, here)}, "
                         "and a run is one machine's: `dlperf run --resume` on that machine, with this store, measures "
                         "what it left; start a new run here instead")  # fmt: skip
    if run is None and (search := store.latest_unfinished_run()):
        _not_continued(store, search, db)
        raise UsageError(f"--resume: {db}'s unfinished runs are searches' (the latest, run {search.id}, of dlperf "
                         f"{made_by(search)}), which --resume cannot go on with: run the search again (it starts "
                         "over)")  # fmt: skip
    if run is None:
        raise UsageError(f"--resume: every run in {db} is complete; nothing to resume{_failed_in_latest(store)}")
    _not_a_ray_nodes(store, run, db)
    return run


def _failed_in_latest(store: Store) -> str:
    """The cells the latest run finished as failed or timed out, which --resume does not measure again (a worker
    killed by hand, the out-of-memory killer): what measures them again; "" where it has none."""
    from dlperf.report.table import cell_label

    latest = store.run()
    failed = [cell_label(c) for c in store.cells(latest.id, unreadable=lambda fault: None) if c.status.is_failure]
    if not failed:
        return ""
    again = "it measures it" if len(failed) == 1 else "them measures them"
    return (f" (run {latest.id}'s {', '.join(failed)} failed or timed out, which --resume does not measure again: a "
            f"new `dlperf run` of {again} again; `dlperf table` says why)")  # fmt: skip


def _not_a_ray_nodes(store: Store, run: RunRecord, db: str) -> None:
    """A Ray node's run is resumed over the cluster (`--resume --ray`): here, this machine's processes would go into
    the node's run."""
    from dlperf.report.fleet import ray_node
    from dlperf.report.run_list import ray_address
    from dlperf.store.location import ray_resume_command

    if (node := ray_node(run)) is None:
        return
    mine = f"--resume: run {run.id}, the latest unfinished, is Ray node {node[:8]}'s (a --ray sweep)"
    raise UsageError(f"{mine}: `{ray_resume_command(ray_address(run.argv), db)}` measures what it left on a node of "
                     "its kind, not on this machine")  # fmt: skip


def latest_resumable(store: Store, here: dict | None = None) -> RunRecord | None:
    """The run `--resume` finishes: the latest unfinished one (measured last, by its start: not the highest id, which
    `dlperf merge` gives in its own order) that is not a search's (`searched_by`), nor a lost Ray node's whose cells
    another run measured (nothing is left of it: an older unfinished run is the one to finish).
    `here`: this machine's environment (`envinfo.capture`), whose runs alone are taken (`envinfo.machine_diff`): a
    store `dlperf merge` gave another machine's unfinished run goes on with this machine's own, older or not; None:
    any machine's."""
    from dlperf.report.run_list import continued_by

    runs = store.runs()
    elsewhere = continued_by(runs)
    return next((r for r in reversed(in_measured_order(runs)) if r.status != "complete" and r.id not in elsewhere
                 and (here is None or not envinfo.machine_diff(r.fingerprint, r.env, here))
                 and not searched_by(store, r)), None)  # fmt: skip


def _not_continued(store: Store, run: RunRecord, db: str) -> None:
    """Nothing to resume where the latest unfinished run is a lost Ray node's that another node's run went on with."""
    from dlperf.report.run_list import continued_by

    if later := continued_by(store.runs()).get(run.id):
        raise UsageError(f"--resume: nothing to resume in {db}: run {run.id}, the latest unfinished, was a lost Ray "
                         f"node's, and run {later.id} measured what it left")  # fmt: skip


def searched_by(store: Store, run: RunRecord) -> str | None:
    """The search command whose run `run` is, where `dlperf run --resume` would not finish what it began
    (`store/state.search_of`); None for any other run."""
    from dlperf.report import predicted

    return search_of(run, lambda: bool(predicted.read(store, run.id, lambda fault: None)))


def _take_over(store: Store, run: RunRecord, warn: Callable[[str], None]) -> None:
    """Lease the run to this process (LeaseHeld while another live one measures it), saying whose it was."""
    if dead := store.acquire(run.id):
        warn(f"run {run.id} was left running by {dead.describe()}, last seen {dead.seen}, which is gone: taken over")


def _execute(session: Session, tasks: list[Task], plan: Plan, progress, db: str, to_profile: list[Cell] = (),
             before: int = 0) -> Outcome:  # fmt: skip
    """`to_profile`: measured cells a resumed run profiles first (`sweep.unprofiled`); `before`: the processes it had
    measured, which the default display counts first. Interrupted: RunInterrupted, raised once the sweep stored what
    had finished and marked the run interrupted."""
    from dlperf.progress import Progress

    def display(total: int):
        return progress or Progress(before + total, first=before, quiet=progress is False)

    try:
        statuses = session.measure(tasks, display, to_profile=to_profile)
    except Interrupted as stopped:
        raise RunInterrupted(session.run_id, db, stopped.unstored) from None
    except Exception:  # a fault of dlperf's or the caller's display: resumable, not "stopped" with its process alive
        with contextlib.suppress(Exception):  # where the store is what failed, its own error is the one to say
            session.interrupted()
        raise
    failed = any(s.is_failure for s in statuses)
    return Outcome(ExitCode.CELLS_FAILED if failed else ExitCode.OK, session.run_id, plan, statuses)


def training_parts(workload: str, device: str = "cpu", data_dir: str | None = None) -> tuple:
    """(model, optimizer, loss_fn, x, y): what dlperf trains for `workload` (a built-in name, or a factory
    `file.py:make` or `package.module:make`) in fp32 eager on `device`, the factory's own optimizer included, with
    one synthetic batch already on the device; `data_dir`: the folder a factory that takes `data_dir` is given, as
    `--data DIR`. `dlperf optimize`'s recipe starts from these (`from dlperf import training_parts`), so it runs as
    printed; in your own code, your own objects take their place. The weights are drawn from torch's generator as
    you left it, as a model you build is: `torch.manual_seed(0)` first gives those of dlperf's cells, and in a
    factory dlperf calls, each cell's seed gives its own (the loss check compares seeds). PyTorch is imported on the
    first call, not before.
    A workload or device `dlperf run` would refuse is refused in its words, naming the argument, before anything is
    built."""
    from dlperf.frameworks import backend
    from dlperf.spec import parse_devices, parse_workload

    if not isinstance(workload, str):
        raise UsageError(f"workload={workload!r}: expected a built-in name or a factory (file.py:make), as text")
    workload = parse_workload(workload, "workload", variant=True)  # at a batch of its own, from 1 to 65,536
    text = str(device) if type(device).__name__ == "device" else device  # a torch.device, by its name
    if not isinstance(text, str) or len(chosen := parse_devices(text, "device")) != 1:
        raise UsageError(f"device={device!r}: expected one device, cpu, cuda, cuda:N or mps")
    return backend("torch").training_parts(workload, chosen[0], data_dir)
