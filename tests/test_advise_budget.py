"""`dlperf advise --budget` says where its time went: the predictions and checks, and the thread search's first
process (measured whole), are not cut by the budget. `--budget 10s` on resnet-50 at batch 64 took 100 s here (a step
of 17.7 s: that first process's warm-up, timed, FLOP-count and memory steps) and said nothing of it. Now a line says
so before that process where its earlier processes here show it will overrun the budget, and the answer says how
long the command took against the budget, and why, where it overran it by more than a fifth. No process runs: the
parts are stood in for on a clock of the test's own."""

from types import SimpleNamespace

import pytest

from dlperf import advise, crossover
from dlperf.advise import FIRST, HERE, PREDICTIONS, Clock
from dlperf.vocab import ExitCode

BEFORE = ("the predictions and checks (0.300 s) and this CPU's first thread count, measured whole (about 99.4 s, from "
          "its earlier processes here), take about 99.7 s, past --budget (10.0 s), which does not cut them: the other "
          "thread counts and the mode search get what is left, if anything")  # fmt: skip


def test_said_before_the_first_process_where_its_earlier_ones_overrun_the_budget():
    assert Clock(10.0, 1000.0).ahead(1000.3, 99.4) == BEFORE
    assert Clock(150.0, 1000.0).ahead(1005.0, 40.0) is None  # within the budget: nothing said
    assert Clock(10.0, 1000.0).ahead(1000.3, None) is None  # no earlier process here: not known, not said
    assert Clock(30.0, 1000.0).ahead(1045.0, None) == (  # the predictions alone overran it (a cold count)
        "the predictions and checks took 45.0 s, past --budget (30.0 s), which does not cut them: this CPU's first "
        "thread count is measured whole after them, the other thread counts and the mode search skipped"
    )


def test_the_answer_says_how_long_it_took_against_the_budget_and_why():
    clock = Clock(10.0, 1000.0, {PREDICTIONS: 0.3, FIRST: 99.5})
    assert clock.overrun(1100.1) == (
        "advise took 100 s against --budget (10.0 s): the predictions and checks 0.300 s and this CPU's first thread "
        "count 99.5 s, which it does not cut"
    )
    assert clock.overrun(1011.9) is None  # within a fifth of it: nothing said
    assert Clock(10.0, 1000.0).overrun(1100.0) is None  # nothing measured of it (refused before): nothing said
    # the searches ran to the deadline (1030) and stopped the process under way 11 s later
    late = Clock(30.0, 1000.0, {PREDICTIONS: 2.0, FIRST: 15.0})
    assert late.overrun(1041.0) == (
        "advise took 41.0 s against --budget (30.0 s): the predictions and checks 2.00 s and this CPU's first thread "
        "count 15.0 s, which it does not cut; the rest 24.0 s, ending 11.0 s past the budget (a process under way is "
        "stopped)"
    )
    # a 1.3B-parameter LM: predicted (a cold count, 219 s) and not measured, its step too large for this machine
    assert Clock(30.0, 1000.0, {PREDICTIONS: 219.0}).overrun(1219.2) == (
        "advise took 219 s against --budget (30.0 s): the predictions and checks 219 s, which it does not cut"
    )
    # its step too large here, the largest batch this machine holds searched (traced) after: no process stopped
    assert Clock(15.0, 1000.0, {PREDICTIONS: 8.0, HERE: 20.9}).overrun(1028.9) == (
        "advise took 28.9 s against --budget (15.0 s): the predictions and checks 8.00 s and the largest batch this "
        "machine holds 20.9 s, which it does not cut"
    )


def stood_in(monkeypatch, predictions_s: float, first_s: float, earlier: float | None) -> dict:
    """advise's parts on a clock of the test's own: the predictions take `predictions_s`, the thread search tells
    `Options.first` about `earlier` and then takes `first_s` for its first process; what was said, in order."""
    from dlperf.predict import cost

    seen: dict = {"now": 1000.0, "said": []}
    monkeypatch.setattr(advise, "time", SimpleNamespace(monotonic=lambda: seen["now"]))

    def predicted(workload, *args):
        seen["now"] += predictions_s
        return SimpleNamespace(), {}, [], {}

    def threads(opts, db, **kw):
        opts.first(earlier)
        seen["said"].append("measuring")
        seen["now"] += first_s
        cpu = SimpleNamespace(threads=2, ci_low_s=None, ci_high_s=None, n=30, warnings=[])
        return crossover.Result(1, SimpleNamespace(rows=[SimpleNamespace(cpu=cpu)]), ExitCode.OK, [], first_s=first_s)

    monkeypatch.setattr(advise, "predicted", predicted)
    monkeypatch.setattr(crossover, "crossover", threads)
    monkeypatch.setattr(cost, "cpu_cost", lambda *a: None)
    monkeypatch.setattr(advise, "quoted_notes", lambda *a: [])
    return seen


def test_advise_says_it_before_measuring_and_in_the_answer(monkeypatch, tmp_path):
    seen = stood_in(monkeypatch, 0.3, 99.5, 99.4)
    opts = advise.Options("tiny-fcn-r", gpus="T4", budget_s=10.0, flags=True)
    answer = advise.advise(opts, str(tmp_path / "a.db"), [], warn=seen["said"].append)
    assert seen["said"] == [BEFORE, "measuring"]  # said before the process, not after it
    assert answer.notes[-1] == (
        "advise took 99.8 s against --budget (10.0 s): the predictions and checks 0.300 s and this CPU's first thread "
        "count 99.5 s, which it does not cut"
    )
    assert "the mode search skipped: 0 s of the budget left (raise --budget)" in answer.notes


def test_within_the_budget_nothing_more_is_said_and_a_python_caller_reads_its_argument(monkeypatch, tmp_path):
    seen = stood_in(monkeypatch, 0.3, 20.0, None)
    opts = advise.Options("tiny-fcn-r", gpus="T4", budget_s=150.0)
    monkeypatch.setattr(advise, "_search", lambda *a: (_ for _ in ()).throw(AssertionError("a search")))
    monkeypatch.setattr(Clock, "search_s", lambda self, now: None)  # the mode search skipped, as above
    answer = advise.advise(opts, str(tmp_path / "a.db"), [], warn=seen["said"].append)
    assert seen["said"] == ["measuring"] and not any("advise took" in n for n in answer.notes)
    seen = stood_in(monkeypatch, 0.3, 99.5, None)  # a Python caller: its budget_s, not the command's flag
    answer = advise.advise(advise.Options("tiny-fcn-r", gpus="T4", budget_s=10.0), str(tmp_path / "a.db"), [])
    assert answer.notes[-1].startswith("advise took 99.8 s against budget_s (10.0 s): ")


def test_a_plan_warning_both_searches_give_is_said_once(monkeypatch, tmp_path):
    """The thread search and the mode search plan alike, and `dlperf advise` said each of the plan's warnings (an
    inherited OPENBLAS_CORETYPE) once for each: both now say through advise's own warn, which says a line once."""
    seen = stood_in(monkeypatch, 0.3, 1.0, None)
    inherited = "inherited OPENBLAS_CORETYPE=Haswell changes threading or kernels; recorded with every cell"
    stood = crossover.crossover

    def threads(opts, db, **kw):
        kw["warn"](inherited)
        return stood(opts, db, **kw)

    def search(opts, threads, clock, db, warn):
        warn(inherited)
        raise LookupError("stood in: the search ends the test")

    monkeypatch.setattr(crossover, "crossover", threads)
    monkeypatch.setattr(advise, "_search", search)
    monkeypatch.setattr(Clock, "search_s", lambda self, now: 60.0)
    opts = advise.Options("tiny-fcn-r", gpus="T4", budget_s=600.0, flags=True)
    with pytest.raises(LookupError):
        advise.advise(opts, str(tmp_path / "a.db"), [], warn=seen["said"].append)
    assert seen["said"] == [inherited, "measuring"]


def test_the_search_for_the_largest_batch_held_here_is_named_where_the_time_went(monkeypatch, tmp_path):
    """A step too large for this machine: the traces of the largest batch it holds took 20.9 s, said as "the rest
    20.9 s, ending 13.5 s past the budget (a process under way is stopped)", where no process had run."""
    from dlperf.predict import memory

    seen = stood_in(monkeypatch, 8.0, 0.0, None)
    monkeypatch.setattr(advise, "predicted", lambda *a: (seen.update(now=seen["now"] + 8.0) or SimpleNamespace(),
                                                          {}, [], {"fp32": 2**40}))  # fmt: skip
    monkeypatch.setattr(memory, "no_room_here", lambda *a, **kw: "does not fit this machine")
    monkeypatch.setattr(memory, "largest_here", lambda *a: seen.update(now=seen["now"] + 20.9) or 0)
    answer = advise.advise(advise.Options("tiny-fcn-r", gpus="T4", budget_s=15.0, flags=True), str(tmp_path / "a.db"),
                           [])  # fmt: skip
    assert answer.cpu_why == "does not fit this machine"
    assert answer.notes[-1] == (
        "advise took 28.9 s against --budget (15.0 s): the predictions and checks 8.00 s and the largest batch this "
        "machine holds 20.9 s, which it does not cut"
    )
