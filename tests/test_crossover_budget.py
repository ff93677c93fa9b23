"""The thread search within a deadline (`crossover.CpuSide.best_threads`, `dlperf advise`'s --budget): the largest
count first and always measured whole (the answer's one CPU step), the others stopped at the deadline or not
started past it, and a cell the deadline cut is no failure. No process runs: the session is a stand-in."""

from types import SimpleNamespace

from dlperf import crossover
from dlperf.plan.estimate import Earlier
from dlperf.runner.sweep import Deadline
from dlperf.vocab import Status
from dlperf.workloads import BUILTIN

DEADLINE = 1234.5


class Session:
    """Measures a cell as told: `steps` (threads -> seconds a step); past the deadline, after `within` processes,
    the first process is stopped by it and the rest stay pending, as `runner/sweep.py` does."""

    def __init__(self, steps: dict[int, float], within: int, warnings: dict[int, list[str]] | None = None,
                 failing: dict[int, str] | None = None) -> None:  # fmt: skip
        self.warnings = warnings or {}  # threads -> the cell's warnings
        self.failing = failing or {}  # threads -> the error its cell fails with
        self.spec = SimpleNamespace(frameworks=["torch"], modes=["fp32"], repeats=1)
        self.steps, self.within = steps, within
        self.workloads: dict[str, dict] = {}
        self.records: dict[str, SimpleNamespace] = {}
        self.deadline = None
        self.started: list[tuple[int, float | None]] = []  # (threads, the deadline it ran under)

    def add(self, cells, workload: dict) -> None:
        for c in cells:
            self.workloads[c.key] = workload
            self.records[c.key] = SimpleNamespace(key=c.key, status=Status.PENDING, error=None, ok=False, median_s=None,
                                                  n=5, iqr_s=0.001, ci_low_s=None, ci_high_s=None)  # fmt: skip

    def measure(self, tasks, progress_factory, *, last: bool) -> None:
        for task in tasks:
            record = self.records[task.cell.key]
            if self.deadline is not None and len(self.started) > self.within:
                return  # past the deadline: not started
            self.started.append((task.cell.threads, self.deadline))
            if self.deadline is not None and len(self.started) > self.within:
                record.status, record.error = Status.FAILED, f"stopped: {Deadline.REASON}"
                continue
            if task.cell.threads in self.failing:
                record.status, record.error = Status.FAILED, self.failing[task.cell.threads]
                continue
            record.status, record.ok, record.median_s = Status.OK, True, self.steps[task.cell.threads]
            record.warnings = self.warnings.get(task.cell.threads, [])

    def cells(self):
        return list(self.records.values())


def side(session: Session, deadline: float | None) -> crossover.CpuSide:
    return crossover.CpuSide(session, BUILTIN["fcn-r"], lambda n: None, deadline)


def test_with_a_deadline_the_largest_count_goes_first_whole_and_the_others_within_it():
    session, notes = Session({1: 0.3, 2: 0.2, 4: 0.1}, within=1), []
    threads = side(session, DEADLINE).best_threads([1, 2, 4], 64, [64], None, notes)
    # 4 threads with no deadline (the answer's step), 2 under it and stopped by it, 1 not started
    assert session.started == [(4, None), (2, DEADLINE)]
    assert threads == 4 and session.deadline is None  # the session is left as it was
    assert notes == ["threads: 4 was the only count measured at batch 64; 2 and 1 not measured: the budget ran out "
                     "(raise --budget)"]  # fmt: skip
    cut = [c for c in session.cells() if crossover.budget_cut(c)]
    assert len(cut) == 2  # stopped and not started: neither is a failed cell (the exit code stays 0)
    assert not crossover.budget_cut(SimpleNamespace(status=Status.FAILED, error="out of memory"))


def test_the_first_count_runs_whole_even_when_the_budget_is_spent_before_it():
    session, notes = Session({1: 0.3, 2: 0.2}, within=0), []
    assert side(session, DEADLINE).best_threads([1, 2], 64, [64], None, notes) == 2
    assert session.started[0] == (2, None)
    assert notes[0].startswith("threads: 2 was the only count measured at batch 64; 1 not measured: the budget ran out")


def test_without_a_deadline_every_count_is_measured_in_order_as_dlperf_crossover_does():
    session, notes = Session({1: 0.3, 2: 0.1, 4: 0.2}, within=0), []
    assert side(session, None).best_threads([1, 2, 4], 64, [64], None, notes) == 2
    assert session.started == [(1, None), (2, None), (4, None)]
    assert notes == ["threads: 2 was fastest of 1, 2 and 4 at batch 64"]


def test_a_fastest_count_not_told_apart_from_another_is_taken_but_said_to_tie_as_the_table_says():
    # medians of 5 steps, no 95% interval: 2% apart is within the noise (`fastest.told_apart`), 33% is not
    session, notes = Session({1: 0.3, 2: 0.2, 4: 0.196}, within=0), []
    assert side(session, None).best_threads([1, 2, 4], 64, [64], None, notes) == 4
    assert notes == ["threads: 4 was fastest of 1, 2 and 4 at batch 64, within the noise of 2: their medians within 5% "
                     "or an IQR of each other, without 95% intervals to judge them by"]  # fmt: skip


def test_a_fastest_count_beside_a_disturbed_cell_is_taken_but_said_unstarred_as_the_table_says():
    # advise's "threads: 1, the fastest of 2, 1" beside the table's note that no count was starred: busy CPUs
    busy = "other processes used 82% of the CPUs while this cell was timed"
    session, notes = Session({1: 0.1, 2: 0.3}, within=0, warnings={1: [busy]}), []
    assert side(session, None).best_threads([1, 2], 16, [16], None, notes) == 1
    assert notes == ["threads: 1 was fastest of 1 and 2 at batch 16, not starred: a compared cell was disturbed (its "
                     "note says how)"]  # fmt: skip


def test_a_count_that_failed_is_named_failed_not_compared():
    """With 2 threads out of memory advise said "threads: 1 was fastest of 1 and 2 at batch 64", the table starring
    nothing (one cell measured)."""
    session, notes = Session({1: 0.3, 2: 0.2}, within=0, failing={2: "out of memory"}), []
    assert side(session, None).best_threads([1, 2], 64, [64], None, notes) == 1
    assert notes == ["threads: 1 was the only count measured at batch 64; 2 failed"]
    session, notes = Session({1: 0.3, 2: 0.2, 4: 0.1}, within=0, failing={4: "out of memory"}), []
    assert side(session, None).best_threads([1, 2, 4], 64, [64], None, notes) == 2
    assert notes == ["threads: 2 was fastest of 1 and 2 at batch 64; 4 failed"]


def test_the_first_process_is_announced_with_its_earlier_ones_here_and_timed(monkeypatch):
    """`Options.first` (advise's line before it) is told, just before the first count's process, the median of that
    cell's earlier processes on this machine (None where none ran), and `first_s` is how long it took; without a
    deadline (`dlperf crossover`) nothing is told or timed."""
    clock = {"now": 500.0}
    monkeypatch.setattr(crossover, "time", SimpleNamespace(monotonic=lambda: clock["now"]))
    told: list = []

    class Timed(Session):
        def measure(self, tasks, progress_factory, *, last):
            told.append("measured")
            clock["now"] += 99.5 if self.deadline is None else 1.0
            super().measure(tasks, progress_factory, last=last)

    opts = crossover.Options("fcn-r", first=told.append, flags=True)
    key = crossover.cpu_cell(Timed({}, 0).spec, BUILTIN["fcn-r"], 64, 2).key
    cpu = crossover.CpuSide(Timed({1: 0.3, 2: 0.2}, within=0), BUILTIN["fcn-r"], lambda n: None, DEADLINE, opts,
                            {key: [Earlier(90.0), Earlier(110.0), Earlier(99.4)]})  # fmt: skip
    assert cpu.best_threads([1, 2], 64, [64], None, []) == 2
    assert told[:2] == [99.4, "measured"] and cpu.first_s == 99.5
    told.clear()
    cpu = crossover.CpuSide(Timed({1: 0.3, 2: 0.2}, within=0), BUILTIN["fcn-r"], lambda n: None, DEADLINE, opts)
    cpu.best_threads([1, 2], 64, [64], None, [])
    assert told[0] is None  # no earlier process of its cell here
    told.clear()
    cpu = crossover.CpuSide(Timed({1: 0.3, 2: 0.2}, within=0), BUILTIN["fcn-r"], lambda n: None, None, opts)
    cpu.best_threads([1, 2], 64, [64], None, [])
    assert None not in told and cpu.first_s is None


def test_a_crossover_cell_has_enough_steps_for_a_95_percent_interval_by_default():
    """Its default of 5 steps gave no 95% interval of the median (FEW_SAMPLES is 6): every slow cell was marked 'few
    samples' and its thread counts were told apart on medians alone."""
    from dlperf.measure.stats import FEW_SAMPLES
    from dlperf.spec import CROSSOVER_TIMER

    assert crossover.Options("tiny-fcn-r").timer == CROSSOVER_TIMER and CROSSOVER_TIMER.min_steps >= FEW_SAMPLES


def test_a_default_batch_whose_step_cannot_be_counted_is_left_out_saying_why(monkeypatch):
    """A model of BatchNorm1d cannot train at batch 1 ('Expected more than 1 value per channel'): crossover refused
    the whole request at a batch the user never asked for. A default batch is left out, said; one asked for with
    --batches, or the user's own, is still refused in one line."""
    import pytest

    from dlperf.errors import UsageError
    from dlperf.predict import count

    why = "ValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 64])"
    monkeypatch.setattr(count, "counts", lambda requests, *a: [why if w.batch == 1 else SimpleNamespace(batch=w.batch)
                                                               for w, _ in requests])  # fmt: skip
    workload, said = BUILTIN["tiny-fcn-r"], []
    found, kept = crossover.countable(workload, [1, 2, 4, 16], 16, crossover.Options("tiny-fcn-r"), said.append)
    assert kept == [2, 4, 16] and [c.batch for c in found] == [2, 4, 16]
    assert said == [f"batch 1 left out of the batches measured: tiny-fcn-r's step cannot be counted there ({why})"]
    with pytest.raises(UsageError, match=r"^tiny-fcn-r \(fp32, batch 1\): its operators cannot be counted: "):
        crossover.countable(workload, [1, 2], 2, crossover.Options("tiny-fcn-r", batches=(1, 2)), said.append)
    with pytest.raises(UsageError, match=r"batch 1\): its operators cannot be counted"):
        crossover.countable(workload, [1, 2], 1, crossover.Options("tiny-fcn-r"), said.append)  # the user's own
