"""A search (`dlperf optimize`, `fit`, `crossover`) started together with another command on one store looked for a
run being measured only before it planned, when the other had stored nothing yet: a `dlperf run` and a `dlperf
optimize` started together each timed the other's load, and neither said so. A run another process began while the
search was planned is said once the search's own run is stored. The children are faked (`sweep.run_task`)."""

from __future__ import annotations

import pytest

from dlperf.runner.session import Session
from report.runs import MACHINE, cell
from test_interrupted_searches import _children, _main


@pytest.mark.parametrize(
    "args",
    [["optimize", "tiny-fcn-r", "--threads", "1"], ["fit", "tiny-fcn-r", "--threads", "1", "--max-batch", "16"],
     ["crossover", "tiny-fcn-r", "--gpu", "T4", "--threads", "1", "--batches", "16"]],
)  # fmt: skip
def test_a_run_begun_while_a_search_was_planned_is_said(tmp_path, monkeypatch, capsys, args):
    db = tmp_path / "s.db"
    create, other = Session.create, []

    def beside_then_own(store, *a, **k):  # another command stores its run as this one finishes planning
        other.append(store.create_run({}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], [cell()]))
        return create(store, *a, **k)

    monkeypatch.setattr(Session, "create", staticmethod(beside_then_own))
    _children(monkeypatch, interrupt_at=1)
    _, _, err = _main(monkeypatch, capsys, *args, "--db", str(db))
    said = [line for line in err.splitlines() if "began beside" in line]
    assert other == [1] and len(said) == 1, err
    assert said[0].startswith(f"dlperf: warning: run 1 of {db} began beside this one while it was planned (pid ")
