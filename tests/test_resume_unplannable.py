"""--resume of a run that can no longer be measured as planned (its framework's environment removed since): one line
naming the run, and the run left as it was, not taken over first (a "taken over" warning, a lease written, then the
error, which named --frameworks though the user typed only --resume)."""

from __future__ import annotations

import pytest

from dlperf import api
from dlperf.errors import UsageError
from dlperf.spec import make_spec
from dlperf.store import Store


def test_a_run_whose_framework_is_gone_is_refused_in_one_line_and_left_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))  # no environment installed: jax is gone
    db = tmp_path / "r.db"
    store = Store.open(db, create=True)
    store.create_run(make_spec(["tiny-fcn-r"], frameworks="jax", threads=[1]).to_json(), {}, {}, ["dlperf", "run"], [])
    store.close()  # released: as a killed dlperf's run once taken over
    before, said = db.read_bytes(), []
    with pytest.raises(UsageError) as refused:
        api.resume(str(db), warn=said.append)
    assert str(refused.value).startswith("resume: run 1's frameworks jax: ")
    assert said == [] and db.read_bytes() == before
