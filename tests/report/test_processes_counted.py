"""Where a view counts a cell's processes (the "rests on one process" notes, a chart's hover), it counts those the
cell's median and interval count (`stats.counted`): a process of under 6 timed steps beside one of more is left out
of both. `dlperf table --best --format json` read `"processes": 3` for a row whose cells each kept 1, without the
note that its interval holds one process's noise."""

import random

from conftest import make_cell
from dlperf.report import best, fastest, fleet
from dlperf.report.load import _enrich


def three_of_one(median: float, seed: int) -> list[list[float]]:
    """Three processes, of which the median counts one: 30 steps beside two of 1 and 2 disturbed steps."""
    rng = random.Random(seed)
    return [[median * rng.uniform(0.98, 1.02) for _ in range(30)], [median * 5], [median * 4, median * 4.1]]


def test_the_best_mode_counts_the_processes_its_interval_counts():
    timed = (("fp32", 0.02), ("channels_last", 0.01))
    cells = [make_cell("tiny-alexnet-s", mode=m, median_s=s, n=33, key=m) for m, s in timed]
    samples = {c.key: three_of_one(c.median_s, i) for i, c in enumerate(cells)}
    [row] = best.build(cells, samples)
    assert row.mode == "channels_last" and row.ci_low is not None and row.processes == 1 and row.steps_only
    assert best.notes([row])[-1] == f"tiny-alexnet-s torch cpu:1: channels_last's interval {best.ONE_PROCESS}"


def test_the_fastest_framework_counts_the_processes_its_interval_counts():
    timed = (("torch", 0.02), ("jax", 0.01))
    cells = [make_cell("tiny-alexnet-s", framework=f, median_s=s, n=33, key=f) for f, s in timed]
    samples = {c.key: three_of_one(c.median_s, i) for i, c in enumerate(cells)}
    found = fastest.build({("tiny-alexnet-s", "fp32", "cpu:1"): cells}, samples, lambda cell: False)
    assert found[0].interval is not None
    assert "each cell one process: its interval holds only that process's noise" in fastest.lines(found)[0]


def test_the_fleet_and_the_charts_count_the_processes_the_median_counts():
    class Steps:  # the store, as `fleet._processes` reads it
        def samples(self, run_id, key):
            return three_of_one(0.01, 0)

    assert fleet._processes(Steps(), 1, "k") == 1
    cell = _enrich(make_cell(median_s=0.01, n=33), three_of_one(0.01, 0))
    assert cell.processes == 1
    assert _enrich(make_cell(median_s=0.01, n=6), [[0.01, 0.01], [0.01] * 3, []]).processes == 2  # none of 6: all


def test_advises_note_on_an_interval_of_one_process_counts_the_processes_it_is_of(tmp_path):
    """`dlperf advise` says where the quoted CPU step's 95% interval is over one process's steps: of three processes
    whose median kept one, it said nothing."""
    from dlperf.advise_cells import quoted_notes
    from dlperf.protocol import Cell
    from dlperf.store import Store
    from dlperf.store.process import ProcessMeasurement
    from dlperf.store.records import CellFigures, PlannedCell
    from dlperf.vocab import Status

    store = Store.open(tmp_path / "a.db", create=True)
    try:
        cell = Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32")
        run_id = store.create_run({"spec": 1}, {}, {"hostname": "a"}, ["dlperf", "run"], [PlannedCell(cell, {})])
        figures = CellFigures(status=Status.OK, median_s=0.01, n=33, ci_low_s=0.0099, ci_high_s=0.0101)
        for repeat, steps in enumerate(three_of_one(0.01, 0)):
            store.record(run_id, cell.key, repeat, ProcessMeasurement(status=Status.OK, samples=steps), figures)
        [quoted] = store.cells(run_id)
    finally:
        store.close()
    notes = quoted_notes(str(tmp_path / "a.db"), None, quoted, with_ci=True)
    assert any(n.startswith("the CPU step's 95% interval is over the steps of one process") for n in notes)


def test_an_interval_of_the_steps_alone_is_said_whatever_the_processes():
    """Where the processes' medians agree to the last digit (a coarse timer), the interval falls to the bootstrap of
    the steps: it holds only their noise, yet `table --best` counted 3 processes a side and said nothing. And a
    fastest-framework line of one process a side among lines of more says so itself (only a head note for all)."""
    from dlperf.report.speedup import speedup

    agree = {m: [[s] * 10 + [s * 1.01] * 5 for _ in range(3)] for m, s in (("fp32", 2.0), ("fused", 1.9))}
    assert speedup(agree["fp32"], agree["fused"]).steps_only
    assert speedup([[1.0, 1.1] * 5], [[0.9, 1.0] * 5]).steps_only  # one process a side
    assert not speedup([[1.0] * 9, [1.1] * 9], [[0.9] * 9, [0.95] * 9]).steps_only
    cells = [make_cell("tiny-alexnet-s", mode=m, median_s=s, n=45, key=m) for m, s in (("fp32", 2.0), ("fused", 1.9))]
    [row] = best.build(cells, agree)
    assert row.processes == 3 and row.steps_only and best.notes([row])[-1].endswith(best.ONE_PROCESS)

    rng = random.Random(1)
    spread = {"net-a": 3, "net-b": 1}  # processes per cell
    cells = [make_cell(w, framework=f, median_s=s, n=90, key=f"{w}{f}")
             for w in spread for f, s in (("torch", 0.02), ("jax", 0.01))]  # fmt: skip
    samples = {c.key: [[c.median_s * rng.uniform(0.9, 1.1) for _ in range(30)] for _ in range(spread[c.workload])]
               for c in cells}  # fmt: skip
    groups = {(w, "fp32", "cpu:1"): [c for c in cells if c.workload == w] for w in spread}
    head, three, one = fastest.lines(fastest.build(groups, samples, lambda cell: False))
    assert "each cell one process" not in head
    assert one.endswith(", its interval only its one process a side's noise") and "noise" not in three
