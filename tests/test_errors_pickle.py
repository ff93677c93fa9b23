"""dlperf's errors cross a process pool (a script running dlperf in a ProcessPoolExecutor worker) and copy.copy as
they were raised. An exception is pickled as its class and `args`, the message alone: one whose __init__ takes more
(UnreadableRow, StoreGone, RunInterrupted) failed to unpickle ('missing 3 required positional arguments'), and the
pool said 'BrokenProcessPool: A process in the process pool was terminated abruptly' in its place."""

import copy
import pickle
from pathlib import Path

import pytest

from dlperf.errors import RunInterrupted, UnreadableRow
from dlperf.store.location import StoreGone


@pytest.mark.parametrize(
    ("error", "fields"),
    [
        (UnreadableRow(3, "tiny-fcn-r@b64", "figures", "bad JSON"), ("run_id", "key", "what", "reason")),
        (StoreGone("the store moved", Path("/tmp/moved.db")), ("now_at",)),
        (StoreGone("the store moved", None), ("now_at",)),
        (RunInterrupted(2, "/tmp/r.db"), ("run_id", "db")),
        (RunInterrupted(2, "/tmp/r.db", "r.db: could not store its status (disk full)"), ("run_id", "db", "unstored")),
    ],
)
def test_an_error_pickles_and_copies_as_it_was_raised(error, fields):
    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(again) is type(error) and str(again) == str(error)
        assert all(getattr(again, f) == getattr(error, f) for f in fields)


def test_a_usage_error_shows_in_a_notebook_as_its_one_line():
    """IPython calls `_render_traceback_` in place of printing the traceback: a bad argument in a notebook showed
    dlperf's frames, 60 lines, above the one line."""
    from dlperf.errors import StoreFault, UsageError

    assert UsageError("threads 0: expected 1 or more")._render_traceback_() == [
        "UsageError: threads 0: expected 1 or more"
    ]
    assert StoreFault("x.db: read-only")._render_traceback_() == ["StoreFault: x.db: read-only"]
