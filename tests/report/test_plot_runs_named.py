"""`dlperf plot` of several runs with nothing to draw said "nothing to draw in run 1, 2": the noun is plural for
several (`units.named`), as `dlperf report`'s closing line has it."""

from conftest import dlperf, one_line_error
from dlperf.store import Store
from report.synthetic import fill


def test_nothing_to_draw_in_several_runs_names_them_in_the_plural(tmp_path, report_db):
    store = Store.open(report_db, create=False)
    fill(store, seed=1)
    store.close()
    svg = tmp_path / "x.svg"
    done = dlperf("plot", "paper", "--workloads", "lstm", "--run", "1,2", "-o", str(svg), db=report_db)
    # of several runs, a cell is its latest run's: runs that measured two thread counts, a later one one, said
    # "no workload was measured at two or more CPU thread counts" of them all
    one_line_error(done, "plot paper: nothing to draw in runs 1, 2:", "(each cell its latest run's: --run N draws")
    alone = dlperf("plot", "paper", "--workloads", "lstm", "-o", str(svg), db=report_db)  # the latest run
    one_line_error(alone, "nothing to draw in run 2:")
    assert "latest run's" not in alone.stderr
    assert not svg.exists()
