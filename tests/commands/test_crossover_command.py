"""`dlperf crossover` through the command line: a tiny workload measured at two batches and stored with its GPU
predictions, the answer printed; the paper's check; bad input as one line before anything runs."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from conftest import dlperf, one_line_error, rows
from dlperf.report import crossover
from dlperf.store import Store
from dlperf.workloads import BUILTIN
from report.pictures import assert_png_draws


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["tiny-fcn-r", "--gpu", "Z9000"], "unknown GPU"),
        (["tiny-fcn-r", "--gpu", "T4,H100-SXM9"], "H100-SXM9"),
        (["tiny-fcn-r", "--batches", "0"], "--batches"),
        (["no-such-net"], "unknown workload 'no-such-net'"),
        (["tiny-fcn-r", "--mode", "tf32"], "--mode"),
        (["tiny-fcn-r", "--paper"], "--paper"),
        (["tiny-fcn-r", "--plot", "x.gif"], "--plot"),
        ([], "WORKLOAD"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(tmp_path, capsys, args, fragment):
    from dlperf.cli import main

    db = tmp_path / "d.db"
    code = main(["crossover", *args, "--db", str(db)])
    one_line_error(SimpleNamespace(returncode=code, stderr=capsys.readouterr().err), fragment)
    assert not db.exists()


@pytest.mark.slow  # an end-to-end run of the command: with the sweeps (make test-slow), keeping make test short
def test_a_crossover_is_measured_stored_and_answered(tmp_path):
    db, png = tmp_path / "d.db", tmp_path / "x.png"
    proc = dlperf("crossover", "tiny-fcn-r", "--batches", "1,8", "--threads", "1", "--gpu", "T4", "--plot", str(png),
                  "--min-steps", "3", "--min-time", "0.1", "--max-time", "2", db=db, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    store = Store.open(db, create=False)
    [run] = store.runs()
    cells = store.cells(run.id)
    assert sorted((c.workload, c.batch, c.threads) for c in cells) == [("tiny-fcn-r@b1", 1, 1), ("tiny-fcn-r@b8", 8, 1)]
    assert all(c.ok and c.median_s for c in cells)
    predictions = store.predictions(run.id)
    assert sorted(p.batch for ps in predictions.values() for p in ps) == [1, 8]
    gpu = {p.batch: p for ps in predictions.values() for p in ps}
    assert all(p.gpu == "T4" and p.step_s == pytest.approx(p.device_s + p.transfer_s) for p in gpu.values())
    assert 0 < gpu[1].transfer_s < gpu[8].transfer_s <= 8 * gpu[1].transfer_s  # 8x the bytes over the same link
    [x] = crossover.read(store, [run.id])
    assert [r.batch for r in x.rows] == [1, 8] and x.gpus == ["T4"]
    # the answer, from the stored steps: the GPU pays from the smallest batch after which it is always faster
    cpu = {r["batch"]: r["median_s"] for r in rows(db, "SELECT batch, median_s FROM cells")}
    faster = tuple(b for b in (1, 8) if gpu[b].step_s < cpu[b])
    answer = {
        (1, 8): "the GPU pays from batch 1",
        (8,): "the GPU pays from batch 8",
        (1,): "the GPU does not pay at batch 8, the largest measured (it did at 1)",
        (): "the GPU never pays up to batch 8",
    }[faster]
    assert [line for line in proc.stdout.splitlines() if line.startswith("T4: ")] == [f"T4: {answer}"], (cpu, gpu)
    out = " ".join(proc.stdout.split())
    assert f"your batch {BUILTIN['tiny-fcn-r'].batch} was not measured" in out  # not among --batches
    assert_png_draws(png, 1, colours=["#1f77b4", "#ff7f0e"])  # the CPU measured, T4 predicted
    table = dlperf("table", db=db, timeout=60)
    assert table.returncode == 0 and "tiny-fcn-r@b8" in table.stdout, table.stderr


@pytest.mark.slow  # an end-to-end run of the command: with the sweeps (make test-slow), keeping make test short
def test_the_paper_check_sets_seven_predictions_beside_the_papers_gtx_1080(tmp_path):
    proc = dlperf("crossover", "--paper", timeout=300, cwd=tmp_path, env={"COLUMNS": "200"})  # a row a line
    assert proc.returncode == 0, proc.stderr
    networks = ("FCN-S", "AlexNet-S", "ResNet-50", "FCN-R", "AlexNet-R", "ResNet-56", "LSTM")
    rows = {w[1]: line for line in proc.stdout.splitlines() if (w := line.split())[1:2] and w[1] in networks}
    assert list(rows) == list(networks), proc.stdout
    for line in rows.values():  # the prediction, the paper's best and its range's two ends
        assert len(re.findall(r"\d (?:ms|s|µs)\b", line)) == 4, line
    assert "CUDA 8, cuDNN 5.1" in " ".join(proc.stdout.split())
    assert not list(tmp_path.iterdir())  # no store: nothing was measured
