"""`dlperf run --resume --dry-run`: a resumed run's processes left do not count the FLOPs, measure the memory step or
check the loss where their cell's sibling group stored them before the interrupt (`runner/sweep.child_task`), so
the estimate charges none of them. Fakes only: stated phases, no process run."""

from types import SimpleNamespace

import pytest

from dlperf.plan import estimate as est
from dlperf.protocol import Cell
from dlperf.runner.tasks import Task
from dlperf.store.records import LossCheckRecord

CELL = Cell("fcn-r", "torch", "cpu", 1, "bf16")
SIBLING = Cell("fcn-r", "torch", "cpu", 2, "bf16")
WORKLOAD = {"name": "fcn-r", "batch": 64}
# fcn-r at 1 thread (load 9): a first process of 34.1 s, 4.7 s of it the FLOP count, 4.5 s the memory step
FIRST = est.Earlier(34.1, {"flops": 4.7, "memory": 4.5, "loss_check": 3.0})
TIMER = SimpleNamespace(min_steps=1, min_time=0.0, max_time=0.001, max_warmup=1, warmup_window=1)


def _stored(flops=8e9, memory=2000, loss_ok=True):
    return SimpleNamespace(workload="fcn-r", framework="torch", device="cpu", mode="bf16", nproc=0, scaling="",
                           parallel="", microbatches=0, flops_per_step=flops, peak_mem_bytes=memory,
                           loss_check=LossCheckRecord(loss_ok))  # fmt: skip


def estimated(tasks, stored):
    workloads = {c.key: WORKLOAD for c in (CELL, SIBLING)}
    return est.estimate(tasks, workloads, {CELL.key: [FIRST]}, timer=TIMER, timeout=600, loss_check=True, cores=2,
                        python_for=lambda fw: "python", stored=est.stored_in(stored))  # fmt: skip


@pytest.fixture(autouse=True)
def nothing_kept(monkeypatch):
    monkeypatch.setattr(est.kept, "has", lambda cell, workload: ())


def test_a_resumed_cells_repeat_is_charged_none_of_the_extras_it_stored():
    """The interrupted run measured repeat 0 (extras and all); repeat 1 is left: 24.4 s of 34.1, not 34.1."""
    left = [Task(CELL, 1)]
    assert estimated(left, []).seconds == pytest.approx(34.1 - 3.0)  # a new run: FLOPs and memory counted
    assert estimated(left, [_stored()]).seconds == pytest.approx(34.1 - 4.7 - 4.5 - 3.0)


def test_only_what_was_stored_is_left_out():
    assert est.stored_in([_stored(flops=None, loss_ok=None)])(SIBLING) == ("memory",)  # a sibling's memory step
    assert est.stored_in([_stored()])(Cell("fcn-s", "torch", "cpu", 1, "bf16")) == ()  # another workload's
    first = [Task(SIBLING, 0)]  # the sibling's first process: its loss check unless the group has a verdict
    assert est.extras_of(first[0], set(), True, est.stored_in([_stored(loss_ok=None)])) == ["loss_check"]
    assert est.extras_of(first[0], set(), True, est.stored_in([_stored()])) == []


@pytest.mark.slow
def test_resume_dry_run_leaves_out_the_extras_its_run_stored(tmp_path, monkeypatch):
    """End to end through `api.resume(dry_run=True)`: an interrupted run whose first process counted the FLOPs and
    measured the memory step (4.7 s and 4.5 s of 34.1 s) has its repeat left estimated without them."""
    from conftest import require
    from dlperf import api
    from dlperf.plan import make_plan
    from dlperf.runner.session import Session
    from dlperf.spec import make_spec
    from dlperf.store import Store
    from dlperf.store.process import ProcessDetail, ProcessMeasurement
    from dlperf.store.records import CellFigures
    from dlperf.vocab import Status

    require("torch")
    db = str(tmp_path / "r.db")
    plan = make_plan(make_spec(["tiny-fcn-r"], frameworks=["torch"], threads=[1], repeats=2))
    store = Store.open(db, create=True)
    session = Session.create(store, plan.spec, plan.env, plan.cores, ["dlperf", "run"], plan.cells, plan.workloads)
    [cell] = plan.cells
    phases = {"flops_s": 4.7, "memory_s": 4.5, "timed_s": 5.0}
    m = ProcessMeasurement(status=Status.OK, samples=[0.01], duration_s=34.1, detail=ProcessDetail(phases=phases))
    store.record(session.run_id, cell.key, 0, m, CellFigures(status=Status.OK, median_s=0.01, n=1,
                                                             flops_per_step=10**6, peak_mem_bytes=2000))  # fmt: skip
    store.set_run_status(session.run_id, "interrupted")
    store.close()
    got = api.resume(db, dry_run=True)
    assert [t.repeat for t in got.tasks] == [1]
    assert got.estimate.seconds == pytest.approx(34.1 - 4.7 - 4.5)  # not 34.1: both are stored


def test_cells_of_two_strategies_each_run_their_extras():
    """The run counts the FLOPs and memory of each strategy's cells apart (`sweep.siblings`: its group has the
    strategy and micro-batches); the estimate charged them to the first strategy's cell alone."""
    ddp, fsdp = (
        Cell("fcn-r", "torch", "cpu", 1, "fp32", nproc=2, scaling="strong", parallel=p) for p in ("ddp", "fsdp")
    )
    seen: set[tuple] = set()
    assert [est.extras_of(Task(c, 0), seen, False) for c in (ddp, fsdp)] == [["flops", "memory"]] * 2
