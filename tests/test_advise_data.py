"""`dlperf advise --data DIR`: the answer is this CPU training on the user's data. Walked through (helper 164):
tiny-alexnet-s over 24 images on 2 cores quoted its step on synthetic data (8.16 ms) where the loader cell w0 stepped
33.3 ms (waiting 74% of it for data), costed 1,000,000 samples "(no epoch: synthetic data)" though the data's size was
read, and said nothing of whether the loader held the step back. The figures are those of that run, stored here
through the Store API; the command's parts that measure or predict are stood in for: nothing is measured."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dlperf import advise
from dlperf.answers import DataCheck
from dlperf.loaders import input_bound, oversubscribed, setting
from dlperf.predict import cost
from dlperf.protocol import Cell
from dlperf.report import advise as view
from dlperf.store.records import CellFigures, LoaderRecord, PlannedCell
from dlperf.vocab import ExitCode, Status
from dlperf.workloads import BUILTIN

WORKLOAD = BUILTIN["tiny-alexnet-s"]  # batch 4
SYNTHETIC_S = 0.00816
GPU_S = 0.012  # a GPU's predicted step: slower than this CPU's computing, faster than its loader-bound step
# (loader, median step, data wait, the loader alone's samples/s): helper 164's cells
LOADED = [("w0", 0.0333, 0.74, 170.0), ("w1", 0.0395, 0.81, 136.0)]
SEARCH_NOTES = [
    "loader: w2 and after not measured: about 10 s needed, 0 s of the budget left (raise --budget)",
    "loader: data preparation dominates: the loader alone gives at best 170 samples/s (w0), ...",
]


def stored_search(db, bursty: float = 0.0, error: str | None = None) -> int:
    """The mode search's run: fp32 on synthetic data, then its loader cells, as optimize stores them; `bursty`: a
    loader cell's mean step that much above its median (a tenth of its steps wait for a batch); `error`: each loader
    cell failed with it."""
    from dlperf.envinfo import fingerprint
    from dlperf.store import Store
    from dlperf.store.process import ProcessMeasurement
    from report.synthetic import ENV

    spec = {"name": WORKLOAD.name, "batch": WORKLOAD.batch}
    cells = [(Cell(WORKLOAD.name, "torch", "cpu", 1, "fp32"), SYNTHETIC_S, None)]
    for name, median, wait, alone in LOADED:
        workers = setting(name).workers
        data = LoaderRecord(name, workers, 1, 2, oversubscribed(workers, 1, 2), "photos", 24, alone, wait, None,
                            input_bound(wait), batches=6)  # fmt: skip
        cells.append((Cell(WORKLOAD.name, "torch", "cpu", 1, "fp32", loader=name), median, data))
    store = Store.open(db, create=True)
    try:
        planned = [PlannedCell(c, spec) for c, _, _ in cells]
        run_id = store.create_run({"workloads": WORKLOAD.name}, ENV, fingerprint(ENV), ["dlperf", "advise"], planned)
        for cell, median, data in cells:
            if cell.loader and error:
                failed = ProcessMeasurement(status=Status.FAILED, error=error)
                store.record(run_id, cell.key, 0, failed, CellFigures(status=Status.FAILED, error=error))
                continue
            slow = median * (1 + 10 * bursty) if cell.loader else median  # 5 of 50 steps: the mean 1 + bursty
            samples = [median] * 45 + [slow] * 5
            mean = median * (1 + bursty) if cell.loader else median
            figures = CellFigures(status=Status.OK, median_s=median, mean_s=mean, n=50, data=data)
            store.record(run_id, cell.key, 0, ProcessMeasurement(status=Status.OK, samples=samples), figures)
    finally:
        store.close()
    return run_id


def stand_ins(monkeypatch, db, size: int | None = 24, bursty: float = 0.0, batches: int | None = 6,
              error: str | None = None) -> dict:  # fmt: skip
    """advise's parts that probe, predict or measure, stood in for: the data read holds `size` samples, `batches`
    an epoch as its loader counts them; what the predictions were asked for is kept in the dict returned."""
    from dlperf import crossover, optimize
    from dlperf.plan import workloads

    seen: dict = {}
    run_id = stored_search(db, bursty, error)

    def predicted(workload, chosen, samples, what, deadline, timeout, steps=None):
        seen.update(samples=samples, what=what, steps=steps)
        prediction = SimpleNamespace(gpu="T4", mode="fp16", step_s=GPU_S, samples_per_s=4 / GPU_S, batch=4)
        x = cost.costs(workload, [prediction], samples, what, {}, **({"steps": steps} if steps else {}))
        return x, {}, [], {}

    threads = SimpleNamespace(threads=1, run_id=None, key="", median_s=0.009, ci_low_s=None, ci_high_s=None)
    baseline = SimpleNamespace(mode="fp32", status="ok", error=None, median_s=SYNTHETIC_S)
    search = SimpleNamespace(run_id=run_id, baseline=baseline, best=baseline, notes=SEARCH_NOTES, results=[],
                             exit_code=ExitCode.OK, loader=SimpleNamespace(mode="fp32"))  # fmt: skip
    monkeypatch.setattr(workloads, "resolve_workload", lambda *a, **k: WORKLOAD)
    check = DataCheck(size, batches=batches)  # the loader's own count at the batch checked
    monkeypatch.setattr(workloads, "check_data", lambda spec, found: {found[0].name: check})
    monkeypatch.setattr(advise, "predicted", predicted)
    row = SimpleNamespace(cpu=threads, batch=4, gpus={"T4": SimpleNamespace(step_s=GPU_S)})
    answer = SimpleNamespace(rows=[row], user_batch=4, gpus=["T4"], mode="fp32")
    monkeypatch.setattr(crossover, "crossover", lambda *a, **k: crossover.Result(None, answer, ExitCode.OK, []))
    monkeypatch.setattr(optimize, "optimize", lambda *a, **k: search)
    return seen


def test_with_data_the_cpu_line_is_the_step_on_that_data_its_epoch_and_whether_the_loader_holds_it_back(
    monkeypatch, tmp_path
):
    db = tmp_path / "a.db"
    seen = stand_ins(monkeypatch, db)
    a = advise.advise(advise.Options(WORKLOAD.name, gpus="T4", data=str(tmp_path), flags=True), str(db), [])
    # the work: an epoch of the data read (24 samples), for the GPUs and this CPU alike, not 1,000,000
    assert (seen["samples"], seen["what"]) == (24, cost.Work("one epoch of your data (24 samples, --data)"))
    assert not any("no epoch" in n for n in a.notes)
    # the step quoted: w0's on the data (the setting the loader search recommends), not 8.16 ms on synthetic data
    c = a.costs.cpu
    assert (c.step_s, c.time_s) == (0.0333, pytest.approx(6 * 0.0333)) and a.pipeline.setting == "w0"
    line = view.lines(a)[0]
    assert line.startswith("On this CPU (measured): 0.200 s for one epoch of your data (24 samples, --data) at its "
                           "best settings (1 thread, fp32, loader w0; 33.3 ms a step at batch 4 on your data, waiting "
                           "for it included; ")  # fmt: skip
    assert ("; the loader holds the step back: it waits 74% of its time for data (input bound: high) and runs at 25% "
            "of the samples/s it takes on synthetic data (8.16 ms a step); the setting to use: w0 (the fastest "
            "measured, 120 samples/s") in line  # fmt: skip
    assert "not enough (enough: a wait under 5%, or 95% of the synthetic step's samples/s" in line
    assert all(n in a.notes for n in SEARCH_NOTES), a.notes  # what would change it: the loader search's own word
    # the GPUs' predicted steps wait for no data: they are set against this CPU's fed as well, its synthetic step (a
    # GPU set against the loader-bound step 'pays', where more cores to load on would)
    (fastest,) = [x for x in view.lines(a) if x.startswith("Fastest GPU")]
    assert fastest.endswith(", 1.5 times slower than this CPU on synthetic data, each fed as fast as it computes (2.8 "
                            "times faster than this CPU with its loader w0, above)")  # fmt: skip
    (crossover,) = [x for x in view.lines(a) if x.startswith("Crossover")]
    assert ("no GPU is predicted faster in fp32 than this CPU's step on synthetic data (fp32, 8.16 ms; 33.3 ms with "
            "its loader w0, above) at your batch 4: the closest, T4, is 1.5 times slower") in crossover  # fmt: skip
    assert view.to_json(a)["crossover"]["cpu_step_s"] == SYNTHETIC_S
    here = view.to_json(a)["loader_here"]
    assert here["setting"] == "w0" and here["input_bound"] == "high" and here["enough"] is False
    assert (here["step_s"], here["synthetic_step_s"], here["wait_share"]) == (0.0333, SYNTHETIC_S, 0.74)


def test_a_loader_whose_waits_come_in_bursts_is_quoted_at_its_mean_step_as_an_epoch_pays_it(monkeypatch, tmp_path):
    """A tenth of the loader's steps wait for a batch: the median step leaves them out, an epoch pays them (the view
    ranks and rates loader cells at their mean step since 66b31be; advise quoted the median)."""
    db = tmp_path / "a.db"
    stand_ins(monkeypatch, db, bursty=0.5)
    a = advise.advise(advise.Options(WORKLOAD.name, gpus="T4", data=str(tmp_path), flags=True), str(db), [])
    mean = 0.0333 * 1.5
    assert a.pipeline.setting == "w0" and a.pipeline.step_s == pytest.approx(mean)
    assert a.costs.cpu.step_s == pytest.approx(mean) and a.costs.cpu.time_s == pytest.approx(6 * mean)
    assert a.pipeline.synthetic_s == pytest.approx(SYNTHETIC_S)  # steady: its mean is its median
    assert "50.0 ms a step at batch 4 on your data, waiting for it included" in view.lines(a)[0]


def test_epochs_of_the_data_read_are_the_work_and_a_dataset_of_no_length_keeps_synthetic_datas_rule(tmp_path):
    """--epochs on a workload of synthetic data was refused ("which has no epoch") though --data gave it one."""
    opts = advise.Options(WORKLOAD.name, data=str(tmp_path), epochs=2.5)
    said = cost.Work("2.5 epochs of your data (24 samples, --data): 60 samples")
    assert advise._work(WORKLOAD, opts, 24) == (60, said, 15)
    assert advise._work(WORKLOAD, advise.Options(WORKLOAD.name, samples=1000), 24)[0] == 1000  # --samples wins
    with pytest.raises(advise.UsageError, match="--epochs: tiny-alexnet-s trains on synthetic data"):
        advise._work(WORKLOAD, opts, None)


def test_a_loader_that_keeps_up_and_one_not_measured_are_said_so():
    """Enough (`report.data.enough`): said with why; --data with no loader setting measured: the step quoted is
    said to be on synthetic data, not passed off as the data's."""
    steps = -(-24 // 4)
    x = cost.Costs(WORKLOAD.name, 4, 24, cost.Work("one epoch of your data (24 samples, --data)"), [])
    x.cpu = cost.Cpu(0.0083, 4, 1, "fp32", 2, steps * 0.0083, 100.0, 0.15)
    fed = advise.Pipeline("w1", 0.0083, SYNTHETIC_S, 0.012, SYNTHETIC_S / 0.0083, "the fastest measured, 482 "
                          "samples/s", "data wait 1.2% of the step")  # fmt: skip
    a = advise.Advice(WORKLOAD.name, 4, x, None, None, [2], "", searched=True, pipeline=fed, data=True)
    assert view.lines(a)[0].endswith(
        "; the loader keeps up: it waits 1.2% of its time for data and runs at 98% of the samples/s it takes on "
        "synthetic data (8.16 ms a step); the setting to use: w1 (the fastest measured, 482 samples/s; enough: data "
        "wait 1.2% of the step)"
    )
    a.pipeline = None
    line = view.lines(a)[0]
    assert "8.30 ms a step at batch 4 on synthetic data: no loader setting was measured (see the notes)" in line
    assert "loader" not in line.split("(see the notes)")[1]


def test_an_epoch_is_the_steps_the_loader_trains_its_last_partial_batch_dropped(monkeypatch, tmp_path):
    """dlperf's DataLoaders drop a partial last batch (drop_last): 25 samples at batch 4 train in 6 steps, where
    advise costed ceil(25 / 4) = 7, this CPU's and every GPU's time a seventh too long; a loader that counts its last
    partial batch (a user's loader=: len(loader) 7) is costed in its own 7 steps."""
    db = tmp_path / "a.db"
    seen = stand_ins(monkeypatch, db, size=25, batches=None)
    a = advise.advise(advise.Options(WORKLOAD.name, gpus="T4", data=str(tmp_path), flags=True), str(db), [])
    assert a.costs.cpu.time_s == pytest.approx(6 * 0.0333) and a.costs.rows[0].time_s == pytest.approx(6 * GPU_S)
    said = "one epoch of your data (25 samples, --data: 6 steps of batch 4, the last 1 sample left out as the loader "
    assert seen["what"].full == said + "drops a partial batch)" and view.lines(a)[0].startswith(
        f"On this CPU (measured): 0.200 s for {said}"
    )
    opts = advise.Options(WORKLOAD.name, data=str(tmp_path), epochs=2.5)
    assert advise._work(WORKLOAD, opts, 25)[2] == 15  # 6 steps an epoch, not 2.5 x 25 / 4 = 15.6 rounded up
    said = cost.Work("2.5 epochs of your data (25 samples, --data): 62 samples")
    assert advise._work(WORKLOAD, opts, 25, batches=7) == (62, said, 18)
    # 6 steps of 4 leave 1 of 25 out: the title says the work, a note the sample left out (not parsed from the words)
    more = advise._work(WORKLOAD, opts, 25)[1]
    assert more.full == ("2.5 epochs of your data (25 samples, --data: 6 steps of batch 4, the last 1 sample left out "
                         "as the loader drops a partial batch): 62 samples")  # fmt: skip
    assert (more.titled(), more.left_out) == ("2.5 epochs of your data (25 samples, --data): 62 samples",
                                              "an epoch: 6 steps of batch 4, the last 1 sample left out as the loader "
                                              "drops a partial batch")  # fmt: skip


def test_with_every_loader_setting_failed_the_answer_says_so_not_that_the_budget_ran_out(monkeypatch, tmp_path):
    """A Dataset whose samples after the first raise: w0, w1 and w2 failed alike, and the note read 'no loader
    setting was measured alone within the budget (raise --budget)', which more budget would not change."""
    db = tmp_path / "a.db"
    stand_ins(monkeypatch, db, error="OSError: image 5: truncated file (at bad.py:15, in __getitem__)")
    a = advise.advise(advise.Options(WORKLOAD.name, gpus="T4", data=str(tmp_path), flags=True), str(db), [])
    assert a.pipeline is None and a.costs.cpu is None and a.exit_code == ExitCode.CELLS_FAILED
    # no epoch of data that could not be read (it was said at the synthetic step, exit 0)
    assert view._cpu_line(a) == ("On this CPU: not measured: your data could not be read (w0: OSError: image 5: "
                                "truncated file (at bad.py:15, in __getitem__))")  # fmt: skip
    assert [n for n in a.notes if n.startswith("input pipeline")] == [
        "input pipeline: not measured: 2 of 2 failed; w0: OSError: image 5: truncated file (at bad.py:15, in "
        "__getitem__)"
    ]
