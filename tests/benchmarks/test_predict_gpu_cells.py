"""benchmarks/predict_gpu_cells.py without counting: every recorded GPU session read, each cell once (a row two calls'
stores both hold counted once), no loader or CPU cell, and the table's errors against given predictions."""

import pytest

from conftest import benchmark

benchmark("predict_h100")  # the script imports its neighbour
cells = benchmark("predict_gpu_cells")


def test_every_session_is_read_each_cell_once_without_loader_or_cpu_cells():
    found = {s.name: cells.cells(s) for s in cells.SESSIONS}
    assert {name: len(c) for name, c in found.items()} == {
        "H100 e7d4373": 18, "H200 e87f12b": 18, "H200 10ba3bb": 18, "H200 10eb4c4": 20}  # fmt: skip
    third = cells.SESSIONS[-1]
    assert cells.read_jsonl(third.files) == cells.read_jsonl(third.files[1:])  # call2's store holds call1's runs
    for c in (c for got in found.values() for c in got):
        assert "@" not in c.workload, c  # the crossover's CPU cells
    fcn_r = [c for c in found["H200 10eb4c4"] if (c.framework, c.workload) == ("torch", "fcn-r")]
    assert [(c.runs, round(c.median_s * 1e3, 2)) for c in fcn_r] == [(2, 2.09)]  # runs 1 and 4, not its loader cells


def test_the_table_holds_each_prediction_against_its_cell():
    now = [[c.median_s * 1.5 for c in cells.cells(s)] for s in cells.SESSIONS]
    old = [[c.median_s for c in cells.cells(s)] for s in cells.SESSIONS]
    lines = cells.table(now, old)
    assert len(lines) == 2 + sum(len(p) for p in now)
    assert all(line.endswith("| +0% | " + line.split("|")[-3].strip() + " | +50% |") for line in lines[2:])
    said = cells.summary(now, old)
    assert said[-1] == "all sessions: 74 cells, median absolute error before 0%, now 50%"


def test_the_band_is_the_signed_errors_deciles_over_every_cell():
    now = [[c.median_s * (1.5 if i % 2 else 0.9) for i, c in enumerate(cells.cells(s))] for s in cells.SESSIONS]
    got = cells.band(now)
    assert got["cells"] == 74 and got["median_abs_pct"] == 30.0  # 37 cells at 10%, 37 at 50%
    assert (got["p10_pct"], got["p90_pct"]) == (-10.0, 50.0)


@pytest.mark.slow
def test_the_measured_gpu_band_the_deadline_weighs_is_the_predictors_today():
    """roofline.MEASURED_GPU is a copy of this script's figures: a change to the predictor that moves them fails
    here until the copy is refreshed (counts every cell's operators on this CPU: seconds, once cached)."""
    from dlperf.predict import roofline

    assert cells.band(cells.predictions()) == pytest.approx(roofline.MEASURED_GPU, abs=0.15)
