"""`dlperf advise`'s CPU side read back from the runs it stored (`advise.py` measures, this reads): the mode
search's best cell (`best_cell`), the loader measured alone (`Feed`) and on the user's data at the setting the search
recommends (`Pipeline`), and `dlperf table`'s notes on the cells the answer quotes (`quoted_notes`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dlperf.measure.units import seconds
from dlperf.modes import PRECISIONS, mode_components
from dlperf.vocab import Status


@dataclass(frozen=True)
class Feed:
    """The input pipeline as this CPU ran it: the loader alone at the setting whose loading processes each prepared
    the most (`w0` loads in the training process: one process), stored in run `run_id`."""

    setting: str
    samples_per_s: float  # the loader alone, at `setting`
    per_process: float  # samples/s each loading process prepared
    run_id: int

    def processes_for(self, samples_per_s: float) -> int:
        """About how many loading processes keep a step of `samples_per_s` fed (at least one)."""
        return max(1, math.ceil(samples_per_s / self.per_process))


@dataclass(frozen=True)
class Pipeline:
    """This CPU's step on the user's data (`--data`): the best mode at the loader setting the search recommends
    (`report.data.recommend`: `why`), against the same mode's step on synthetic data; `enough` says why the loader
    keeps up with it (`report.data.enough`), None where it holds the step back."""

    setting: str
    step_s: float  # the mean step with that loader, its waits for data included (`fastest.long_run_s`)
    synthetic_s: float | None  # the same mode's mean step on synthetic data, in the same run
    wait_share: float | None  # of the step, waiting for data
    of_synthetic: float | None  # its samples/s over the synthetic step's, as the view has them (`data.throughput`)
    why: str
    enough: str | None


def fastest_feed(db: str, run_id: int) -> tuple[Feed | None, str | None]:
    """The run's loader cells measured alone: the setting whose loading processes each prepared the most; and where
    settings failed, how many and the first one's error (`report.data.unmeasured`), else None."""
    from dlperf.loaders import setting
    from dlperf.report.data import NOT_MEASURED, unmeasured
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        loaded = [c for c in store.cells(run_id) if c.loader]
    finally:
        store.close()
    cells = [c for c in loaded if c.ok and c.data and c.data.alone_samples_per_s]
    feeds = [Feed(c.loader, c.data.alone_samples_per_s, c.data.alone_samples_per_s / max(1, setting(c.loader).workers),
                  run_id) for c in cells]  # fmt: skip
    failed = unmeasured(loaded).removeprefix(NOT_MEASURED).removeprefix(": ")
    return max(feeds, key=lambda f: f.per_process, default=None), failed or None


def unread_data(db: str, run_id: int) -> str:
    """Why this CPU has no time for the data, where no loader cell of the search measured and one failed (a folder
    of truncated JPEGs), else "": an epoch was said at the synthetic step, of data that could not be read, exit 0."""
    from dlperf.store import Store
    from dlperf.vocab import Status

    store = Store.open(db, create=False)
    try:
        loaded = [c for c in store.cells(run_id) if c.loader]
    finally:
        store.close()
    failed = [c for c in loaded if c.status == Status.FAILED]
    if not failed or any(c.ok for c in loaded):
        return ""
    return f"not measured: your data could not be read ({failed[0].loader}: {failed[0].error})"


def recommended_pipeline(db: str, search) -> tuple[Pipeline | None, object | None]:
    """With --data DIR: the loader setting the search recommends for its best mode (`report.data.recommend`, as
    `dlperf table` and optimize's loader search choose it) and its stored cell, held against the same mode's step on
    synthetic data, each at its mean step (`fastest.long_run_s`: a loader's waits come in bursts the median leaves
    out, and an epoch pays them); (None, None) where no setting was measured."""
    from dlperf.loaders import setting
    from dlperf.report.data import measured, recommend, throughput
    from dlperf.report.fastest import long_run_s
    from dlperf.store import Store

    if search.loader is None:
        return None, None
    store = Store.open(db, create=False)
    try:
        cells = [c for c in store.cells(search.run_id) if c.mode == search.loader.mode]
    finally:
        store.close()
    synthetic = next((c for c in cells if not c.loader and measured(c)), None)
    loaded = sorted((c for c in cells if c.loader), key=lambda c: setting(c.loader).cost)
    chosen = recommend(synthetic, loaded)
    cell = next((c for c in loaded if c.loader == chosen.setting and measured(c)), None)
    if cell is None:
        return None, None
    wait = cell.data.wait_share if cell.data else None
    ours, theirs = throughput(cell), throughput(synthetic)
    of_synthetic = ours / theirs if ours and theirs else None
    synthetic_s = long_run_s(synthetic) if synthetic else None  # a step as a long run pays it, waits included
    return Pipeline(cell.loader, long_run_s(cell), synthetic_s, wait, of_synthetic, chosen.why, chosen.enough), cell


def quoted_notes(db: str, threads_run: int | None, cell, with_ci: bool, searched=()) -> list[str]:
    """`dlperf table`'s notes (`report/table.py`) on what the answer quotes: the thread search's cells (their load,
    noise, the fastest thread count it does not star) and the quoted cell's own; and, where the quoted step's 95%
    interval comes from one process, that it is over that process's steps alone. `searched`: the mode search's
    results, which answer a note's "try --modes" (`tried`)."""
    from dlperf.measure.stats import counted
    from dlperf.report import table
    from dlperf.report.notes import grouped
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        compared = store.cells(threads_run, unreadable=lambda fault: None) if threads_run is not None else []
        processes = len(counted(store.samples(cell.run_id, cell.key)))  # those its interval is of (`stats.counted`)
    finally:
        store.close()
    found = table.build(threads_run, compared).notes if compared else []
    if cell.run_id != threads_run:
        found += grouped([(label, text) for label, _, text in table.cell_notes([cell])])
    if with_ci and processes == 1:
        found.append("the CPU step's 95% interval is over the steps of one process: another process may differ more "
                     "(dlperf run --repeats 3 measures several)")  # fmt: skip
    return [tried(run_flags(note), searched) for note in found]


TRIED = re.compile(r"--modes ([a-z0-9_+]+)")  # a mode a table note says to try (`table.kernel_note`'s malloc_keep)


def tried(note: str, searched) -> str:
    """A note that says to try a mode (--modes bf16+malloc_keep), where the mode search has measured a mode of its
    options already: the fastest such mode it measured, said after it (advise of small-convnet said to try malloc_keep
    under an answer whose search had timed bf16+channels_last+foreach+malloc_keep, no faster than without it)."""
    wanted = [set(mode_components(m)) - set(PRECISIONS) for m in TRIED.findall(note) if _a_mode(m)]
    ran = [r for r in searched if r.status == Status.OK and r.median_s
           and any(w <= set(mode_components(r.mode)) for w in wanted)]  # fmt: skip
    if not ran:
        return note
    fastest = min(ran, key=lambda r: r.median_s)
    return f"{note}; measured by the mode search: {fastest.mode} at {seconds(fastest.median_s)} a step"


def _a_mode(text: str) -> bool:
    try:
        mode_components(text)
    except ValueError:
        return False
    return True


# a cell's notes name the timer's flags, which advise does not take (it times within --budget): named as dlperf run's
RUN_TIMER_FLAGS = {
    "within --max-warmup steps or --max-time": "within the warm-up advise gave it (dlperf run --max-warmup and "
    "--max-time give more)",
    "raise --max-time or --min-steps for a figure to rely on": "dlperf run --max-time or --min-steps times more, for "
    "a figure to rely on",
}


def run_flags(note: str) -> str:
    for said, meant in RUN_TIMER_FLAGS.items():
        note = note.replace(said, meant)
    return note


def best_cell(db: str, search):
    """The stored cell of the search's recommended mode (fp32 eager when none is)."""
    from dlperf.store import Store

    mode = (search.best or search.baseline).mode
    store = Store.open(db, create=False)
    try:
        return next((c for c in store.cells(search.run_id) if c.mode == mode and not c.loader and c.ok and c.median_s),
                    None)  # fmt: skip
    finally:
        store.close()
