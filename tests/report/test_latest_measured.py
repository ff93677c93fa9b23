""" "The latest run" is the run measured last, by its start, not the highest id. A user merged day 2's store and then
day 1's into one (`dlperf merge day2.db day1.db`): day 1's run got id 2, and every "latest" (the campaign table's
cells, the default run of table, report and export, `compare FILE`, the campaign report's run, `--resume`'s run)
showed day 1's measurement as the latest. Stores written through the Store API (tests/report/campaign.py); the
figures are made up."""

from __future__ import annotations

import pytest

from conftest import dlperf
from dlperf import api
from dlperf.protocol import Cell
from dlperf.report import compare_side, fleet, load
from dlperf.store import Store, merge
from report.campaign import ALPHA, write

FCN = Cell("fcn-r", "torch", "cpu", 1, "fp32")
DAY1, DAY2 = "2026-12-07T09:31:24+00:00", "2026-12-08T09:31:30+00:00"


def measured(path, started: str, median: float, monkeypatch, status: str = "complete") -> None:
    """A run of campaign "days" that began at `started`, its one cell measured at `median`."""
    monkeypatch.setattr("dlperf.store.now", lambda: started)
    store = Store.open(path, create=True)
    try:
        run_id = write(store, ALPHA, [(FCN, median, (median * 0.99, median * 1.01))], "days")
        if status != "running":
            store.set_run_status(run_id, status)
    finally:
        store.close()
    monkeypatch.undo()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """Day 2 merged first (run 1), day 1 after (run 2): the higher id is the older measurement."""
    measured(tmp_path / "day1.db", DAY1, 0.440, monkeypatch)
    measured(tmp_path / "day2.db", DAY2, 0.464, monkeypatch)
    merge.merge([str(tmp_path / "day2.db"), str(tmp_path / "day1.db")], str(tmp_path / "hub.db"))
    store = Store.open(tmp_path / "hub.db", create=False)
    try:
        assert [(r.id, r.started_at) for r in store.runs()] == [(1, DAY2), (2, DAY1)]
    finally:
        store.close()
    return tmp_path / "hub.db"


def test_the_default_run_is_the_one_measured_last_not_the_highest_id(hub):
    store = Store.open(hub, create=False)
    try:
        assert store.run().id == 1
    finally:
        store.close()
    assert dlperf("table", db=hub).stdout.lstrip().startswith("Run 1:")


def test_the_campaign_shows_each_cell_from_the_run_measured_last_and_reports_that_run(hub):
    view = fleet.read(str(hub), campaign="days")
    [row] = view.rows
    [entry] = row.cpu.values()
    assert (entry.cell.median_s, entry.cell.run_id) == (0.464, 1)
    assert view.latest_run == 1  # the campaign report's run


def test_a_report_of_several_runs_takes_each_workload_from_the_run_measured_last(hub):
    data = load.load(str(hub), [1, 2])
    assert [r.id for r in data.runs] == [2, 1]  # in the order they were measured: the latest last
    assert data.sources == {"fcn-r": 1}
    assert [c.median_s for c in data.cells] == [0.464]


def test_compare_of_a_file_takes_its_run_measured_last(hub):
    side = compare_side.load(str(hub), "B", str(hub))
    assert (side.run_id, side.started_at) == (1, DAY2)


def test_resume_takes_the_unfinished_run_measured_last(tmp_path, monkeypatch):
    measured(tmp_path / "old.db", DAY1, 0.440, monkeypatch, status="interrupted")
    measured(tmp_path / "new.db", DAY2, 0.464, monkeypatch, status="interrupted")
    merge.merge([str(tmp_path / "new.db"), str(tmp_path / "old.db")], str(tmp_path / "m.db"))
    store = Store.open(tmp_path / "m.db", create=False)
    try:
        assert store.latest_unfinished_run().id == 1
        assert api.latest_resumable(store).id == 1
    finally:
        store.close()


def test_the_earlier_run_a_sweep_names_is_one_measured_before_it(tmp_path, monkeypatch):
    """A run merged in while a sweep measured holds a higher id, yet was measured before it; one merged in after it
    that was measured after it is not "earlier"."""
    for name, started in (("a.db", "2026-12-07T09:00:00+00:00"), ("b.db", "2026-12-07T10:00:00+00:00"),
                          ("c.db", "2026-12-07T11:00:00+00:00")):  # fmt: skip
        measured(tmp_path / name, started, 0.4, monkeypatch)
    merge.merge([str(tmp_path / n) for n in ("b.db", "c.db", "a.db")], str(tmp_path / "m.db"))  # b 1, c 2, a 3
    store = Store.open(tmp_path / "m.db", create=False)
    try:
        assert compare_side.measured_before(store, 1) == (3, 1)  # a, measured before b, id 3
        assert compare_side.measured_before(store, 2) == (1, 1)  # b, the latest before c
        assert compare_side.measured_before(store, 3) is None  # nothing was measured before a
    finally:
        store.close()
