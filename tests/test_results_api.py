"""`dlperf.results`: a run's cells as dicts in a script or notebook, the records `dlperf export` writes (a script
read them back by running `dlperf export` in a subprocess and parsing its lines)."""

import json
import re

import pytest

import dlperf
from conftest import dlperf as command
from report.runs import BASE, SLOWER, make_db, processes
from store.test_faults import damaged_samples


@pytest.fixture
def two_runs(tmp_path):
    db = tmp_path / "two.db"
    make_db(db, BASE, SLOWER)
    return db


def exported(db, *flags):
    done = command("export", *flags, db=db)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_records_are_the_exports_run_by_run(two_runs):
    assert dlperf.results(db=str(two_runs)) == exported(two_runs)  # the latest run
    every = dlperf.results(db=two_runs, run="all", samples=True)
    assert every == exported(two_runs, "--run", "all", "--samples")
    assert [(r["run_id"], r["workload"]) for r in every] == [(1, "fcn-r"), (1, "alexnet-r"), (2, "fcn-r"),
                                                               (2, "alexnet-r")]  # fmt: skip
    assert dlperf.results(db=two_runs, run=[2, 1]) == dlperf.results(db=two_runs, run="all")
    assert {r["run_id"] for r in dlperf.results(db=two_runs, run=1)} == {1}
    assert every[0]["median_s"] < 0.11 < 0.12 < every[2]["median_s"] and len(every[0]["samples"]) == 3


@pytest.mark.parametrize("run", [0, -1, True, "1", [1, "x"], 1.0])
def test_a_run_that_is_no_run_id_is_refused_naming_the_argument(two_runs, run):
    with pytest.raises(dlperf.UsageError, match=rf"^{re.escape(f'run={run!r}')}: expected a run id \(a whole"):
        dlperf.results(db=two_runs, run=run)


def test_a_missing_run_or_store_is_said_as_the_callers_argument(two_runs, tmp_path):
    with pytest.raises(dlperf.UsageError, match=r"^run=3: no such run in "):
        dlperf.results(db=two_runs, run=[1, 3])
    with pytest.raises(dlperf.UsageError, match=r"^db='.*none\.db': no such database"):
        dlperf.results(db=tmp_path / "none.db")


def test_a_damaged_cell_is_left_out_and_said(tmp_path):
    db = tmp_path / "short.db"  # samples short enough to sit whole in one page, where damage() finds them
    make_db(db, {w: processes(seed, 3, 0.1, steps=12) for seed, w in enumerate(("fcn-r", "alexnet-r", "lstm"))})
    row = damaged_samples(db)
    said = []
    records = dlperf.results(db=db, samples=True, warn=said.append)
    assert row["key"] not in [r["key"] for r in records] and len(records) == 2
    [line] = said
    assert line.startswith(f"run {row['run_id']}, cell {row['key']}: its stored samples cannot be read (")
    assert line.endswith(": left out of dlperf.results")
    with pytest.warns(UserWarning, match=f"run {row['run_id']}, cell "):
        dlperf.results(db=db, samples=True)
