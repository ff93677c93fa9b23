"""An interrupted `dlperf advise` ends as the other commands do: its note on stdout is part of the answer, and its
last line on stderr says 'dlperf: interrupted; ...' (what is stored, what to do), exit 130. It had no such line; and a
Ctrl-C while the answer was printed said only 'dlperf: interrupted' though its runs were stored."""

import pytest

from dlperf import advise, cli
from dlperf.predict import cost
from dlperf.protocol import Cell
from dlperf.report import advise as view
from dlperf.runner.session import Session
from dlperf.spec import RunSpec
from dlperf.store import Store
from dlperf.vocab import ExitCode


def answer(runs, code=ExitCode.INTERRUPTED):
    costs = cost.Costs("tiny-fcn-r", 16, 60_000, cost.Work("one epoch"), [])
    note = "interrupted during the thread search, before the batches were measured: no answer"
    return advise.Advice("tiny-fcn-r", 16, costs, None, None, runs, "", [note], code)


def planned(db) -> int:
    """A run of `db` that holds its plan alone, as an interrupt before its first cell leaves it."""
    cell = Cell("tiny-fcn-r@b16", "torch", "cpu", 1, "fp32")
    store = Store.open(db, create=True)
    try:
        spec = RunSpec(("tiny-fcn-r@b16",), threads=(1,))
        return Session.create(store, spec, {"cores": {"cores": 2}}, 2, ["dlperf", "advise"], [cell],
                              {cell.key: {"batch": 16}}).run_id  # fmt: skip
    finally:
        store.close()


@pytest.mark.parametrize("form", ["text", "json"])
@pytest.mark.parametrize(
    ("runs", "said"),
    # its run held no measured cell (interrupted as the thread search's first process ran): 'what it measured is
    # stored as run 1'
    [([1], "dlperf: interrupted; no cell was measured yet: run 1 holds its plan of 1 cell. For the whole advice, run "
           "it again"),
     ([], "dlperf: interrupted; nothing is stored. For the whole advice, run it again")],
)  # fmt: skip
def test_an_interrupted_advice_ends_with_its_line_on_stderr(tmp_path, monkeypatch, capfd, form, runs, said):
    assert [planned(tmp_path / "a.db") for _ in runs] == runs
    monkeypatch.setattr(advise, "advise", lambda *a, **k: answer(runs))
    code = cli.dispatch(["advise", "tiny-fcn-r", "--gpu", "T4", "--format", form, "--db", str(tmp_path / "a.db")])
    out, err = capfd.readouterr()
    assert code == ExitCode.INTERRUPTED
    assert "interrupted during the thread search" in out  # the answer's own note stays
    assert out.strip() and not out.startswith("\n")  # the answer began with an empty line
    assert err.strip().splitlines()[-1].startswith(said), err


def test_a_ctrl_c_while_the_advice_is_printed_says_its_runs_are_stored(tmp_path, monkeypatch, capfd):
    def cut(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(advise, "advise", lambda *a, **k: answer([1, 2], ExitCode.OK))
    monkeypatch.setattr(view, "lines", cut)
    code = cli.dispatch(["advise", "tiny-fcn-r", "--gpu", "T4", "--db", str(tmp_path / "a.db")])
    err = capfd.readouterr().err.strip().splitlines()
    assert code == ExitCode.INTERRUPTED
    assert err[-1].startswith("dlperf: interrupted; the advice is complete; what it measured is stored as runs 1"), err
