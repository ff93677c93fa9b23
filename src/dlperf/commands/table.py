"""`dlperf table`: the Table-7 view of a run (`report/table.py`), or with --best the fastest mode per workload."""

from __future__ import annotations

import argparse

from dlperf.commands.common import add_format, db_path, print_rich, warn_unreadable
from dlperf.errors import UsageError
from dlperf.frameworks.common import capabilities
from dlperf.vocab import ExitCode

HELP = "the Table-7 view of a run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=one_run, help="run id (default: the latest, the one measured last)")
    add_format(p, "text", "md", "csv", "json")
    p.add_argument("--modes", help="only these modes, e.g. fp32,bf16+channels_last (default: every mode)")
    p.add_argument("--best", action="store_true", help="per workload, the fastest mode and its speed-up over its "
                   f"framework's fp32 step ({capabilities.fp32_steps()})")  # fmt: skip
    p.add_argument(
        "--explain", action="store_true", help="a verdict column: what bounds each profiled cell (dlperf profile)"
    )
    p.add_argument("--paper", action="store_true", help="each cell of the paper's networks beside Shi et al.'s Table "
                   "7: its framework's tool there (Torch, TF, MXNet) at the same thread count on the paper's desktop "
                   "and server CPUs, or on its GTX 1080, and the fastest of its five tools")  # fmt: skip
    add_campaign(p)


def add_campaign(p: argparse.ArgumentParser) -> None:
    """The fleet view's flags: a campaign by name, or its runs listed."""
    fleet = p.add_mutually_exclusive_group()
    fleet.add_argument("--campaign", metavar="NAME", help="the machines of a campaign side by side (the runs made "
                       "with dlperf run --campaign NAME, merged here or measured here)")  # fmt: skip
    fleet.add_argument("--runs", metavar="LIST", help="... or the machines of the runs listed, e.g. 3,4,7 (a "
                       "machine's runs share its column: each cell as its latest run measured it)")  # fmt: skip


def one_run(text: str) -> int:
    """`--run`: one run id; a list or `all` is refused with the views that take several runs."""
    from dlperf.flagtext import whole_number

    if "," in text or text.strip() == "all":
        raise UsageError(f"--run {text!r}: the table shows one run; `dlperf report --run {text}` shows several in one "
                         f"report, `dlperf compare A B` tests two cell by cell, `--runs LIST` sets machines side by "
                         "side")  # fmt: skip
    return whole_number(text, "--run", least=1)


one_run.number = "whole"  # tests/test_cli.py tries every bad number on it


def run(args) -> int:
    if args.best and args.explain:
        raise UsageError("--explain: the verdict column is the run's table's; --best shows no verdicts (give one)")
    if args.paper:
        return print_paper(args)
    if args.campaign is not None or args.runs is not None:
        return print_fleet(args)
    faults = print_table(db_path(args), args.run, args.format, args.modes, args.best, args.explain)
    return warn_unreadable(faults, "the table") or ExitCode.OK


def unfinished_note(store, state, db: str) -> list[str]:
    """A run not finished says so (`store/state.py`: stopped where its process is gone), with what is left (cells,
    the processes and profiles of measured cells) and how it goes on: still measured by a live process, merged here
    while it ran, a search to run again, or resumable (the resume command takes this machine's latest unfinished run:
    named only where that is this one; another machine's goes on there)."""
    import shlex
    from dataclasses import replace

    from dlperf import envinfo
    from dlperf.api import latest_resumable, searched_by
    from dlperf.measure.units import plural
    from dlperf.report.fleet import measured_elsewhere
    from dlperf.report.run_list import continued_by, ray_resume
    from dlperf.store import spill
    from dlperf.store.location import resume_command
    from dlperf.workloads.user import changed_sources

    run = state.run
    if not state.unfinished:
        return []
    if state.holder is not None:
        return [state.summary()]
    if state.state == "copied":
        return [f"{state.summary()}; merging its file again brings this copy up to date"]
    if said := ray_resume(state, continued_by(store.runs()).get(run.id), db):  # a Ray node's: over the cluster
        return [said]
    if search := searched_by(store, run):  # a search decides its processes as it goes: only its cells are counted
        state = replace(state, left=replace(state.left, processes=0, profiles=0))
        return [
            f"{state.summary()}; it is the run of a `dlperf {search}` search, which `dlperf run --resume` "
            f"would not go on with: to search again, run it again (it starts over): `{shlex.join(run.argv)}`"
        ]
    here = envinfo.capture()
    latest = latest_resumable(store, here)
    if latest and latest.id == run.id and (edited := changed_sources(run.env.get("sources") or {})):
        return [f"{state.summary()}; its model: {'; '.join(edited)} since it began, so `--resume` would train another "
                "model and refuses it: start a new run"]  # fmt: skip
    if latest and latest.id == run.id:
        does = "measures them" if state.left else "marks it complete"
        if kept := spill.runs_kept(db).get(run.id):  # measured, the store refused them: --resume stores them
            where = ", ".join(map(str, spill.holding(db, run.id)))
            them = "it" if kept == 1 else "them"
            does = f"stores the {plural(kept, 'measurement')} kept in {where} when the store refused {them}, and {does}"
        return [f"{state.summary()}; `{resume_command(db)}` {does}"]
    if elsewhere := measured_elsewhere(run, here):  # merged in: it goes on on its own machine
        return [f"{state.summary()}; it {elsewhere.removeprefix(f'run {run.id} ')}: `dlperf run --resume` on that "
                "machine, with this store, measures what it left"]  # fmt: skip
    return [f"{state.summary()}; --resume takes the latest unfinished run of this machine, {latest.id}"]


def campaign_note(store, run) -> list[str]:
    """A run of a campaign of several (`dlperf run --campaign`, a --ray sweep's run per node) says the others exist,
    and which view shows the machines side by side: the table shows one run, the latest by default."""
    import shlex

    name = run.spec.get("campaign")
    if not name:
        return []
    others = [r.id for r in store.runs() if r.spec.get("campaign") == name and r.id != run.id]
    if not others:
        return []
    return [f"run {run.id} is one of campaign {name}'s {len(others) + 1} runs (also {', '.join(map(str, others))}): "
            f"`dlperf table --campaign {shlex.quote(name)}` shows its machines side by side"]  # fmt: skip


def machines_note(store, run) -> list[str]:
    """A store holding runs of several machines (`dlperf merge`) says so, and which view sets them side by side: the
    table shows one run, one machine's."""
    from dlperf.report.fleet import group

    runs = store.runs()
    hosts = {m.host for m in group(runs)}
    if len(hosts) < 2:
        return []
    ids = ",".join(str(r.id) for r in runs)
    return [f"run {run.id} is one machine's: this store holds runs of {len(hosts)} machines (`dlperf list --runs`); "
            f"`dlperf table --runs {ids}` sets them side by side"]  # fmt: skip


def sessions_note(state, cells: list) -> list[str]:
    """A run measured in more than one session (resumed after an interrupt or a crash) says so: its cells, or one
    cell's processes, may have met different states of the machine, hours apart."""
    from dlperf.report.table import cell_label

    sessions = state.sessions
    if sessions is None or sessions.count < 2:
        return []
    spanning = [cell_label(c) for c in cells if c.key in sessions.spanning]
    within = f"; the processes of {', '.join(spanning)} span sessions" if spanning else ""
    return [
        f"run {state.run.id} was measured in {sessions.count} sessions (resumed after it stopped): cells of "
        f"different sessions, a row's thread counts among them, may have met different states of the machine"
        f"{within}"
    ]


def print_table(
    db: str, run_id: int | None, fmt: str, modes: str | None = None, best: bool = False, explain: bool = False
) -> list:
    """Print the view (`explain`: with each profiled cell's verdict); returns the cells left out because their stored
    rows no longer decode (UnreadableRow)."""
    from dlperf.report import predicted, profile, run_list, table
    from dlperf.report.format import terminal
    from dlperf.report.utilization import attach_utilization, cells_busy_notes
    from dlperf.spec import parse_modes
    from dlperf.store import Store
    from dlperf.store.state import made_by, run_state

    if best and fmt == "csv":
        raise UsageError("--best: --format must be text, md or json")
    wanted = parse_modes(modes) if modes is not None else None
    store = Store.open(db, create=False)
    faults: list = []
    try:
        run = store.run(run_id)
        cells = [c for c in store.cells(run.id, unreadable=faults.append) if wanted is None or c.mode in wanted]
        if wanted and not cells and not faults:
            raise UsageError(f"--modes {modes!r}: run {run.id} has no cells in these modes")
        samples = _samples(store, run.id, cells, faults) if best else _framework_samples(store, run.id, cells)
        attach_utilization(store, run.fingerprint, cells)
        busy = cells_busy_notes(store, run.fingerprint, cells)  # utilization held against a busy machine's peak
        verdicts = profile.verdicts(store, run.fingerprint, cells) if explain else None
        predictions = predicted.read(store, run.id, faults.append)
        state = run_state(store, run)
        unfinished = [*unfinished_note(store, state, db), *run_list.partial_note(state, cells),
                      *sessions_note(state, cells)]  # fmt: skip
        unfinished += campaign_note(store, run) or machines_note(store, run)
    finally:
        store.close()
    if best:
        print_best(run.id, cells, samples, fmt, run_list.machine(run, cores=True), made_by(run), unfinished)
        return faults
    left = state.unfinished and state.left.profiles > 0
    view = table.build(run.id, cells, verdicts, profiles_left=left, samples=samples)
    view.notes += busy + unfinished
    view.machine = run_list.machine(run, cores=True)
    if fmt == "text":
        print_rich(
            table.render_rich(view), [*table.legend(view), *view.fastest, *table.version_lines(view)], view.notes
        )
        print_pipeline(view.pipeline)
        if lines := predicted.lines(predicted.rows(cells, predictions)):
            print_rich("", lines)
        return faults
    renderers = {"md": table.render_markdown, "csv": table.render_csv, "json": table.render_json}
    text = renderers[fmt](view)
    print(terminal(text, newlines=True) if fmt == "md" else text, end="" if fmt == "csv" else "\n")
    return faults


def print_paper(args) -> int:
    """The run's fp32 cells of the paper's networks beside the paper's figures (`report/paper_table.py`)."""
    from dlperf.report import paper_table, run_list, table
    from dlperf.report.format import terminal
    from dlperf.store import Store

    flags = (("--best", args.best), ("--explain", args.explain), ("--modes", args.modes),
             ("--campaign", args.campaign is not None), ("--runs", args.runs is not None))  # fmt: skip
    taken = [flag for flag, given in flags if given]
    if taken:
        raise UsageError(f"--paper sets one run's fp32 cells beside the paper's: give no {', '.join(taken)}")
    store = Store.open(db_path(args), create=False)
    faults: list = []
    try:
        run = store.run(args.run)
        rows, notes = paper_table.build(store.cells(run.id, unreadable=faults.append))
    finally:
        store.close()
    if not rows:
        why = f" ({notes[-1]})" if notes else ""
        raise UsageError(f"--paper: run {run.id} has no fp32 cell of the paper's seven networks at its batch{why}: "
                         "`dlperf run` measures them (the default sweep)")  # fmt: skip
    view = table.build(run.id, [r.cell for r in rows])  # the machine and versions its cells were measured with
    view.machine = run_list.machine(run, cores=True)
    where = table.version_lines(view)
    if args.format == "text":
        print_rich(paper_table.render_rich(run.id, rows), [*paper_table.legend(rows), *where], notes)
    else:
        text = {"md": lambda: paper_table.render_markdown(rows, notes, run.id, where),
                "csv": lambda: paper_table.render_csv(rows, where),
                "json": lambda: paper_table.render_json(run.id, rows, notes, where)}[args.format]()  # fmt: skip
        print(terminal(text, newlines=True) if args.format == "md" else text, end="" if args.format == "csv" else "\n")
    return warn_unreadable(faults, "the table") or ExitCode.OK


def read_fleet(args):
    """The campaign the flags name (`report/fleet.py`), or None when they name none."""
    from dlperf.report import fleet

    if args.campaign is None and args.runs is None:
        return None
    runs = None if args.runs is None else fleet.parse_runs(args.runs)
    return fleet.read(db_path(args), args.campaign, runs)


def print_fleet(args) -> int:
    flag = "--campaign" if args.campaign is not None else "--runs"
    taken = [f for f, on in (("--run", args.run), ("--best", args.best), ("--explain", args.explain),
                             ("--modes", args.modes)) if on]  # fmt: skip
    if taken:
        raise UsageError(f"{flag} shows the machines of its runs side by side: give no {', '.join(taken)}")
    return show_fleet(read_fleet(args), args.format)


def show_fleet(view, fmt: str = "text") -> int:
    """A campaign's machines side by side (`report/fleet.py`), printed as `fmt`."""
    from dlperf.report import fleet
    from dlperf.report.format import terminal

    if fmt == "text":
        print_rich(fleet.render_rich(view), [*fleet.verdicts(view), fleet.LEGEND], view.notes())
    else:
        renderers = {"md": fleet.render_markdown, "csv": fleet.render_csv, "json": fleet.render_json}
        text = renderers[fmt](view)
        print(terminal(text, newlines=True) if fmt == "md" else text, end="" if fmt == "csv" else "\n")
    return warn_unreadable(view.unreadable, "the table") or ExitCode.OK


def print_pipeline(groups: list) -> None:
    """The input pipeline of a run with loader cells: a table per group, then its recommendation and advice."""
    from dlperf.report import data

    for i, group in enumerate(groups):
        legend = [data.LEGEND] if i == len(groups) - 1 else []
        print_rich(data.render_rich(group), [*data.lines(group), *legend])


def _samples(store, run_id: int, cells: list, faults: list | None) -> dict[str, list[list[float]]]:
    """Each cell's raw steps. A cell whose samples no longer decode is dropped from `cells` and named in `faults`;
    with `faults` None it just has none and keeps its place (the fastest framework's interval goes without it)."""
    from dlperf.errors import UnreadableRow

    samples = {}
    for cell in list(cells):
        try:
            samples[cell.key] = store.samples(run_id, cell.key)
        except UnreadableRow as fault:
            if faults is not None:
                faults.append(fault)
                cells.remove(cell)
    return samples


def _framework_samples(store, run_id: int, cells: list) -> dict[str, list[list[float]]]:
    """Where the run measured several frameworks, each cell's steps, for the fastest framework's interval."""
    return _samples(store, run_id, cells, None) if len({c.framework for c in cells}) > 1 else {}


def print_best(run_id: int, cells: list, samples: dict, fmt: str, machine: str, by: str | None = None,
               unfinished: list[str] = ()) -> None:  # fmt: skip
    """`machine`: the machine that measured the run (`run_list.machine`), said under the text and md views; `by`:
    the command that made it (`store.state.made_by`); `unfinished`: the notes of a run not finished (what is left,
    the cells whose figures are not final), under the text and md views."""
    from dlperf.report import best
    from dlperf.report.format import terminal

    rows = best.build(cells, samples, {run_id: by})
    if fmt == "json":
        print(best.render_json(rows))
    elif fmt == "md":
        said = "".join(f"\nnote: {n}" for n in unfinished)
        print(terminal(f"{best.render_markdown(rows)}\n\nmeasured on: {machine}{said}", newlines=True))
    else:
        print_rich(best.render_rich(rows, run_id), [*best.legend(rows), f"measured on: {machine}"],
                   [*best.notes(rows), *unfinished])  # fmt: skip
