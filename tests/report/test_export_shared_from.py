"""`dlperf export` says where a figure a cell's processes did not measure came from (`shared_from`): another thread
count's cell of the run, or an earlier run's count kept in DATA_DIR/cache/figures (runner/kept.py), as the timing page
says; empty where the cell measured every figure itself."""

from conftest import make_cell
from dlperf.report import export

KEPT = {"flops": "cached from run 3 of /home/me/a.db", "memory": "fcn-r|torch|cpu|2|fp32"}


def test_a_record_names_where_each_figure_it_did_not_measure_came_from():
    rec = export.record(make_cell("fcn-r", median_s=1.0, flops_per_step=840, shared_from=KEPT))
    assert rec["shared_from"] == KEPT
    assert export.csv_field(rec["shared_from"]).startswith('{"flops": "cached from run 3')
    assert export.record(make_cell("fcn-r", median_s=1.0))["shared_from"] is None
