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
    ],
)
def test_an_error_pickles_and_copies_as_it_was_raised(error, fields):
    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(again) is type(error) and str(again) == str(error)
        assert all(getattr(again, f) == getattr(error, f) for f in fields)
