"""`dlperf.results`: a run's cells as Python dicts, every figure `dlperf export` gives, for a script or a notebook.

    import dlperf
    outcome = dlperf.run("tiny-fcn-r", threads=[1], db="api.db")
    for cell in dlperf.results(db="api.db", run=outcome.run_id):
        print(cell["key"], cell["median_s"], cell["ci_low_s"], cell["ci_high_s"], cell["hostname"])

A view of the store, as the commands' views are: it reads, never measures. Loads no framework.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from dlperf.errors import UsageError
from dlperf.store.location import db_said_as, given_db


@db_said_as("db")
def results(db: str | os.PathLike[str] | None = None, *, run: int | Sequence[int] | str | None = None,
            samples: bool = False, warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One dict per cell of the run, with the columns of `dlperf export` (docs/reference/export.md): the median step
    and its 95% interval, the machine that measured it, its warnings, predictions and profile.

    `db`: the store (None: $DLPERF_DB, else ./dlperf.db). `run`: a run id, a list of them, "all", or None for the
    latest run; each dict says its `run_id`. `samples`: with every raw step time, one list per process. A cell whose
    stored rows no longer decode is left out, said to `warn` (default: a Python warning). Bad input (no such store,
    no such run) raises UsageError."""
    from dlperf.report.export import chosen_runs, run_records
    from dlperf.store import Store

    chosen = _runs(run)
    store = Store.open(given_db(db), create=False)
    faults: list[Exception] = []
    try:  # no such run: said as the caller's argument, run=9 (`said_as`), not the command's --run 9
        records = [r for one in chosen_runs(store, chosen) for r in run_records(store, one, samples, faults.append)]
    finally:
        store.close()
    for fault in faults:
        (warn or _warn)(f"{fault}: left out of dlperf.results")
    return records


def _runs(run: int | Sequence[int] | str | None) -> list[int] | str | None:
    """`run` as the export's --run reads it: None, "all", or a list of ids."""
    if run is None or run == "all":
        return run
    listed = [run] if isinstance(run, int) else run
    if not isinstance(listed, (list, tuple)) or not all(_an_id(i) for i in listed):
        raise UsageError(f"run={run!r}: expected a run id (a whole number from 1), a list of them, 'all', or None "
                         "for the latest run")  # fmt: skip
    return list(listed)


def _an_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _warn(message: str) -> None:
    warnings.warn(message, stacklevel=3)
