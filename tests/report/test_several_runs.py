"""Issue 31, item 11: `dlperf report --run all` keeps what was measured together together.

It had put cpu:1 from run 1 (5.3 s) beside cpu:2 from run 6 (13.6 s), and its thread-scaling chart said 2 threads
were 2.5x slower; its fastest-mode table held one run's channels_last against another run's fp32; a later,
unprofiled run of a cell dropped the cell's profile; it repeated a 30-row environment table for each of 11 runs; its
utilization chart was hairline bars under rotated labels; an unsupported cell drew an empty chart. Figures are made up
for the views to lay out."""

import copy

import pytest

from dlperf.envinfo import fingerprint
from dlperf.protocol import Cell, Profiled
from dlperf.report import charts, figures, html, load
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell, ProfileOutcome
from dlperf.vocab import Status
from report.synthetic import ENV


def write(store, cells, env=ENV, profile=()):
    """A complete run of `cells` ((workload, threads, mode, median seconds or a status), ...), the keys in `profile`
    profiled."""
    plan = [PlannedCell(Cell(w, "torch", "cpu", t, m), {"batch": 64}) for w, t, m, _ in cells]
    run_id = store.create_run({}, env, fingerprint(env), ["dlperf", "run"], plan)
    for p, (_, _, _, value) in zip(plan, cells, strict=True):
        if isinstance(value, str):
            m = ProcessMeasurement(status=Status(value), error="no Conv2d")
            store.record(run_id, p.cell.key, 0, m, CellFigures(status=Status(value), error="no Conv2d"))
            continue
        steps = [value * (1 + i / 100) for i in range(-5, 6)]
        figures = CellFigures(status=Status.OK, median_s=value, n=len(steps), flops_by_dtype={"fp32": int(value * 1e9)})
        store.record(run_id, p.cell.key, 0, ProcessMeasurement(status=Status.OK, samples=steps), figures)
        if p.cell.key in profile:
            profiled = Profiled(steps=5, step_s=value, categories={"matmul": 0.8 * value, "host": 0.2 * value})
            store.record_profile(run_id, p.cell.key, ProfileOutcome(Status.OK, None, 3.0, profiled))
    store.set_run_status(run_id, "complete")
    return run_id


@pytest.fixture
def runs_db(tmp_path):
    """Run 1: fcn-r at 1 and 2 threads, fp32 and channels_last, profiled at 2 threads; run 2, on a busy machine: fcn-r
    channels_last and fp32 at 2 threads again, not profiled; lstm measured in run 1 only."""
    path = tmp_path / "runs.db"
    store = Store.open(path, create=True)
    first, later = {**ENV, "python": "3.11.7"}, {**copy.deepcopy(ENV), "python": "3.11.9"}
    measured = [("fcn-r", 1, "fp32", 5.3), ("fcn-r", 2, "fp32", 2.9), ("fcn-r", 2, "channels_last", 2.6),
                ("lstm", 1, "fp32", 0.4), ("lstm", 2, "fp32", 0.3)]  # fmt: skip
    write(store, measured, env=first, profile=("fcn-r|torch|cpu|2|fp32",))
    write(store, [("fcn-r", 2, "fp32", 13.6), ("fcn-r", 2, "channels_last", 12.1)], env=later)
    store.close()
    return path


def test_each_workload_comes_from_one_run_and_the_report_says_which(runs_db):
    data = load.load(str(runs_db), "all")
    by_workload = {}
    for c in data.cells:
        by_workload.setdefault(c.workload, set()).add(c.run_id)
    assert by_workload == {"fcn-r": {2}, "lstm": {1}}  # never run 1's cpu:1 beside run 2's cpu:2
    assert [c.key for c in data.cells if c.workload == "fcn-r"] == ["fcn-r|torch|cpu|2|fp32",
                                                                     "fcn-r|torch|cpu|2|channels_last"]  # fmt: skip
    assert not [c for c in charts.scaling(data.cells) if "fcn-r" in c.id]  # one thread count: no scaling chart
    [note] = [n for n in data.notes if n.startswith("fcn-r")]
    assert "run 2" in note and "cpu:1 fp32 of run 1" in note and "--run 1" in note
    page = html.render(data)
    assert "fcn-r from run 2, lstm from run 1" in page


def test_a_profile_is_kept_when_a_later_run_measured_the_cell_without_one(runs_db):
    data = load.load(str(runs_db), "all")
    record = data.profiles["fcn-r|torch|cpu|2|fp32"]
    assert record.run_id == 1 and "fcn-r|torch|cpu|2|fp32" in data.verdicts
    assert "profiled in run 1" in html.render(data)


def test_the_environment_is_shown_once_with_what_differs(runs_db):
    page = html.render(load.load(str(runs_db), "all"))
    env = page[page.index('<section id="environment">') :]
    assert env.count("cpu.model") == 1 and env.count('class="env"') == 1
    assert "python" in env and "3.11.7" in env and "3.11.9" in env


def test_the_utilization_chart_is_one_lying_bar_per_cell():
    from conftest import make_cell

    cells = [make_cell("fcn-r", threads=t, mode=m, median_s=1.0, utilization=u)
             for t in (1, 2) for m, u in (("fp32", 0.2), ("bf16", 0.05), ("channels_last", 0.3))]  # fmt: skip
    chart = charts.utilization(cells)
    assert chart.kind == "hbars" and len(set(chart.categories)) == 6  # six bars, not three groups of hairlines
    svg, tagged = figures.svg(chart, figures.palette([chart]), "u")
    assert tagged == 6 and "rotate(-30" not in svg  # level labels, not tilted by 30 degrees


def test_an_unsupported_cell_draws_no_empty_chart(tmp_path):
    store = Store.open(tmp_path / "u.db", create=True)
    plan = [PlannedCell(Cell("fcn-r", "torch", "cpu", 1, "fp32"), {"batch": 64}),
            PlannedCell(Cell("fcn-r", "torch", "cpu", 1, "fp32", loader="w2"), {"batch": 64})]  # fmt: skip
    run_id = store.create_run({}, ENV, fingerprint(ENV), ["dlperf", "run"], plan)
    store.record(run_id, plan[0].cell.key, 0, ProcessMeasurement(status=Status.OK, samples=[1.0, 1.1]),
                 CellFigures(status=Status.OK, median_s=1.05, n=2))  # fmt: skip
    gone = ProcessMeasurement(status=Status.UNSUPPORTED, error="reads no real data")
    store.record(run_id, plan[1].cell.key, 0, gone, CellFigures(status=Status.UNSUPPORTED, error="reads no real data"))
    store.set_run_status(run_id, "complete")
    store.close()
    page = html.render(load.load(str(tmp_path / "u.db")))
    assert "Input pipeline" in page and 'data-chart="input-' not in page  # its table says unsupported; no empty chart
