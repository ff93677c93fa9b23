"""`dlperf run --resume` beside other flags (`commands/run.py`): the run goes on as it was planned, so a flag that
would change what it measures is refused, naming it, and one asking for what the run began with is taken."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from dlperf.commands.common import given_flags
from dlperf.errors import UsageError

RESUME_TAKES = frozenset({"resume", "dry_run", "ray", "nodes", "gpu_specs"})  # and --db; --gpu-specs says its own


def check_resume_flags(args, db: str, add_arguments: Callable[[argparse.ArgumentParser], None]) -> None:
    """`--resume` continues the stored run as it was planned: a flag that would change what it measures is refused,
    naming it, rather than ignored. A flag of the value the run's own command gave it is taken: the command run
    again with --resume added (the shell's last line) was refused for every flag it had. `add_arguments`: dlperf
    run's flags (`commands.run`)."""
    if not args.resume:
        return
    began = None
    given = given_flags(args, add_arguments, RESUME_TAKES)
    if given and not (args.ray or args.nodes):  # nothing of this machine's to resume: why, not the flags (a Ray
        _resumable(db)  # sweep's runs are its nodes': `run_fleet` says)
    if given and (found := _began_with(db, add_arguments)) is not None:
        began, planned = found
        parser = argparse.ArgumentParser(add_help=False)
        add_arguments(parser)
        dests = {max(a.option_strings, key=len): a.dest for a in parser._actions if a.option_strings}
        given = [f for f in given if not _same_value(dests[f], getattr(args, dests[f]), getattr(began, dests[f], None),
                                                     planned)]  # fmt: skip
    if given:
        other = " at other values than the run was planned with" if began is not None else ""
        raise UsageError(f"--resume continues the latest unfinished run as it was planned, so {', '.join(given)} "
                         f"cannot be given with it{other}; without --resume they start a new run")  # fmt: skip


def _resumable(db: str) -> None:
    """Nothing: where `db` holds no run --resume would take up, the UsageError saying why (`api.latest_unfinished`:
    "every run in base.db is complete; nothing to resume", where the flags beside --resume were named as if they
    were refused for differing from a run that does not exist)."""
    from dlperf import api
    from dlperf.store import Store

    store = Store.open(db, create=False)  # a store that is missing or unreadable: its own line
    try:
        api.latest_unfinished(store, db)
    finally:
        store.close()


# the flags naming a sweep's axes: a list in any order, and where the command that began the run gave none, what it
# planned (its cells' values: `--devices cpu` on a run of this CPU-only machine begun without --devices)
AXES = {"workloads": "workload", "frameworks": "framework", "devices": "device", "threads": "threads", "modes": "mode"}


def _same_value(dest: str, given, began, planned: dict[str, set]) -> bool:
    """Whether a flag given with --resume asks for what the run began with."""
    if dest not in AXES:
        return given == began
    listed = {str(v).strip() for v in (given.split(",") if isinstance(given, str) else given or ())}
    if began is None:
        return listed == planned[dest]
    return listed == {str(v).strip() for v in (began.split(",") if isinstance(began, str) else began)}


def _began_with(db: str, add_arguments: Callable) -> tuple[argparse.Namespace, dict[str, set]] | None:
    """The flags of the `dlperf run` that began the run --resume continues, as they were parsed, and the values its
    cells have on each of the `AXES` (the threads of its CPU cells); None where there is none, or its command was
    another (a run begun from Python, a node's of a Ray sweep)."""
    from dlperf import api, envinfo
    from dlperf.store import Store

    try:
        store = Store.open(db, create=False)
    except (UsageError, OSError):  # said again, as it is, by --resume itself
        return None
    try:
        run = api.latest_resumable(store, envinfo.capture())
        cells = store.cells(run.id) if run is not None else []
    finally:
        store.close()
    planned = {dest: {str(getattr(c, name)) for c in cells if dest != "threads" or c.device == "cpu"}
               for dest, name in AXES.items()}  # fmt: skip
    words = run.argv[1:] if run is not None else []
    if "run" not in words:
        return None
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    add_arguments(parser)
    parser.add_argument("--db")
    try:
        began, unknown = parser.parse_known_args(words[words.index("run") + 1 :])  # dlperf's own flags before it
    except (argparse.ArgumentError, SystemExit):
        return None
    return None if unknown else (began, planned)
