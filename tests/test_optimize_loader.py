"""`dlperf optimize --data DIR`: the loader searched for the best mode, smallest setting first, until one is enough."""

import json
from dataclasses import replace

import pytest

from conftest import dlperf, make_cell, one_line_error
from dlperf import optimize as opt
from dlperf import optimize_loader as ol
from dlperf.commands import optimize as opt_cmd
from dlperf.figures import LoaderFigures
from dlperf.store.process import ProcessDetail, ProcessMeasurement
from dlperf.store.records import LoaderRecord, LossCheckRecord
from dlperf.vocab import ExitCode, Status
from test_optimize import _Quiet, steps


def test_settings_are_tried_smallest_first_and_the_variants_add_prefetch_and_persistent_workers():
    assert ol.candidates(2, gpu=False) == ["w0", "w1", "w2"]
    assert ol.candidates(1, gpu=True) == ["w0", "w0+pin", "w1", "w1+pin"]
    assert ol.candidates(8, gpu=False, given=("w4+pin", "w2", "w0")) == ["w0", "w2", "w4+pin"]
    assert ol.variants("w2+pin") == ["w2+pin+persist", "w2+pin+pf4", "w2+pin+pf4+persist"]
    assert ol.variants("w0") == []  # prefetching and persistence need workers


def loader_cell(setting, median, wait_share, status="ok"):
    data = LoaderRecord(setting, wait_share=wait_share) if status == "ok" else None
    return replace(make_cell(status=status, median_s=median, data=data), loader=setting)


def test_a_setting_is_enough_under_5_percent_data_wait_or_at_95_percent_of_the_synthetic_throughput():
    assert ol.trial_of(loader_cell("w1", 1.5, 0.04), 1.0).enough  # slower, yet hardly waits: the loader is not it
    assert ol.trial_of(loader_cell("w1", 1.04, 0.08), 1.0).enough  # 96% of synthetic
    slow = ol.trial_of(loader_cell("w0", 1.3, 0.25), 1.0)
    assert not slow.enough and slow.verdict is None and slow.of_synthetic == pytest.approx(1 / 1.3)
    assert not ol.trial_of(loader_cell("w0", None, None, status="unsupported"), 1.0).enough


def test_a_high_wait_or_a_disturbed_synthetic_step_is_never_enough_on_throughput():
    """As the view (`report.data.enough`): a step waiting 20% of it for data or more is input-bound, highly, whatever
    its throughput against the synthetic step; a disturbed synthetic step (`judged` False) leaves the wait alone."""
    assert not ol.trial_of(loader_cell("w1", 1.02, 0.25), 1.0).enough  # 98% of synthetic, yet waits 25%
    assert ol.trial_of(loader_cell("w1", 1.02, 0.19), 1.0).enough
    assert not ol.trial_of(loader_cell("w1", 1.02, 0.19), 1.0, judged=False).enough
    assert ol.trial_of(loader_cell("w1", 1.5, 0.04), 1.0, judged=False).enough


def test_a_bursty_setting_is_held_against_the_synthetic_step_on_its_mean_step():
    """Most steps find a batch ready, some wait for the worker: at its median (1.02 s) the setting reached 98% of the
    synthetic step's throughput, enough, and was the fastest; a long run pays its mean, 1.5 s: 67%, not enough."""
    bursty = replace(loader_cell("w1", 1.02, 0.30), mean_s=1.5)
    t = ol.trial_of(bursty, 1.0)
    assert not t.enough and t.mean_s == 1.5 and t.of_synthetic == pytest.approx(1 / 1.5)
    steady = ol.trial_of(replace(loader_cell("w0", 1.2, 0.15), mean_s=1.21), 1.0)
    assert ol.best_of([t, steady]) is steady


# ----------------------------------------------------------------------------------------------------------------------
# The search, its children faked


def _fake(monkeypatch, loaders: dict[str, tuple[float, float] | str], duration_s=1.0, clock=None, alone=None):
    """Timed children faked: a mode's step takes 1 s on synthetic data; a loader cell's is `loaders[setting]`:
    (step seconds, data-wait share) or the reason it is unsupported. Returns the loader settings measured, in
    order (one entry per process). `clock`: a list whose first item grows by each loader process's duration;
    `alone`: the loader's samples/s with no step."""
    from dlperf import plan
    from dlperf.runner import sweep

    measured = []

    def run_task(task, ctx, poll):
        name = task.cell.loader
        checked = LossCheckRecord(True, None)
        if not name:
            return ProcessMeasurement(status=Status.OK, samples=steps(1.0, 1)[0], duration_s=duration_s,
                                      detail=ProcessDetail(loss_check=checked))  # fmt: skip
        measured.append(name)
        if clock is not None:
            clock[0] += duration_s
        if isinstance(loaders[name], str):  # "failed: why" failed, any other reason is unsupported
            failed = loaders[name].startswith("failed: ")
            status, error = (Status.FAILED, loaders[name][8:]) if failed else (Status.UNSUPPORTED, loaders[name])
            return ProcessMeasurement(status=status, error=error, duration_s=duration_s)
        center, wait = loaders[name]
        samples = steps(center, 1)[0]
        figures = LoaderFigures(setting=name, workers=ol.setting(name).workers, wait_s=[wait * t for t in samples],
                                alone_samples_per_s=alone)  # fmt: skip
        return ProcessMeasurement(status=Status.OK, samples=samples, duration_s=duration_s,
                                  detail=ProcessDetail(loss_check=checked, loader=figures))  # fmt: skip

    monkeypatch.setattr(sweep, "run_task", run_task)
    # the data itself is not read here (tmp_path holds none): its check by a probe child is tested in test_feed.py
    monkeypatch.setattr(plan, "check_data", lambda spec, workloads: {})  # no dataset read: nothing to warn of
    return measured


def _search(tmp_path, budget_s=900.0, loaders=None):
    opts = opt.Options("tiny-fcn-r", threads=1, repeats=1, budget_s=budget_s, order="fixed", data=str(tmp_path),
                       loaders=loaders)  # fmt: skip
    search = opt.optimize(opts, str(tmp_path / "o.db"), progress_factory=lambda n: _Quiet(), warn=lambda w: None)
    store = opt.Store.open(tmp_path / "o.db", create=False)
    try:
        cores = store.runs()[0].env["cores"]["cores"]
    finally:
        store.close()
    return search, json.loads(opt_cmd.render_json(search)), cores


def test_the_search_stops_at_the_first_enough_setting_and_recommends_it(tmp_path, monkeypatch, capsys):
    measured = _fake(monkeypatch, {"w0": (1.5, 0.3), "w1": (1.02, 0.02), "w2": (1.0, 0.01)})
    search, out, _ = _search(tmp_path)
    assert measured == ["w0", "w1"]  # w2 would be faster still, but w1 is enough: workers cost cores
    loader = out["loader"]
    assert (loader["mode"], loader["setting"], loader["enough"]) == ("fp32", "w1", True)
    assert loader["kwargs"] == {"num_workers": 1, "pin_memory": False, "persistent_workers": False}
    assert loader["wait_share"] == pytest.approx(0.02) and loader["synthetic_s"] == pytest.approx(1.0, rel=0.05)
    assert [(t["setting"], t["enough"]) for t in loader["tried"]] == [("w0", False), ("w1", True)]
    assert loader["tried"][0]["verdict"] == "high"
    assert all(r["mode"] != "fp32" or r["median_s"] == pytest.approx(1.0, rel=0.05) for r in out["results"])
    assert len([r for r in out["results"] if r["mode"] == "fp32"]) == 1  # the loader cells are not modes
    recipe = "\n".join(out["recipe"])
    assert "DataLoader(dataset, batch_size=..., shuffle=True, num_workers=1, pin_memory=False" in recipe
    opt_cmd.print_text(search)
    text = capsys.readouterr().out
    assert "w0: " in text and "(input-bound: high)" in text and "w1: " in text and ": enough" in text
    assert "Loader: w1 (enough): DataLoader(num_workers=1, pin_memory=False, persistent_workers=False)" in text


def test_the_first_enough_setting_is_not_recommended_when_a_smaller_one_measured_steps_faster(
    tmp_path, monkeypatch, capsys
):
    # helper 124's CNN on 2 cores: w0 waits 17% of its step, w1 4.9% (enough) but its worker takes the step's cores
    measured = _fake(monkeypatch, {"w0": (1.07, 0.17), "w1": (1.77, 0.049), "w2": (2.0, 0.02)})
    search, out, _ = _search(tmp_path)
    assert measured == ["w0", "w1"]  # the search still stops at the first enough
    loader = out["loader"]
    assert (loader["setting"], loader["enough"]) == ("w0", False)  # not w1, 1.65x slower to train with
    [note] = [n for n in out["notes"] if n.startswith("loader: w0 recommended")]
    assert note.endswith("waits 17% of its step for data: w1 waited less but stepped slower")
    assert not any(n.startswith("loader: no setting measured was enough") for n in out["notes"])  # w1 was
    assert "num_workers=0" in "\n".join(out["recipe"])
    opt_cmd.print_text(search)
    assert "Loader: w0 (the best measured, not enough): DataLoader(num_workers=0" in capsys.readouterr().out


def test_an_unsupported_setting_is_skipped_and_said(tmp_path, monkeypatch):
    measured = _fake(monkeypatch, {"w0": "no dataset for this workload", "w1": (1.0, 0.01)})
    _, out, _ = _search(tmp_path)
    assert measured == ["w0", "w1"] and out["loader"]["setting"] == "w1"
    assert "loader: w0 unsupported: no dataset for this workload" in out["notes"]
    measured = _fake(monkeypatch, dict.fromkeys(["w0", "w1"], "no dataset for this workload"))
    _, out, _ = _search(tmp_path, loaders=("w0", "w1"))
    assert measured == ["w0", "w1"] and out["loader"]["setting"] is None
    assert "loader: no setting recommended: none of those tried measured" in out["notes"]


def test_every_setting_failed_exits_1_saying_the_data_was_not_read(tmp_path, monkeypatch, capsys):
    """A folder of truncated JPEGs: w0 and w1 failed, and optimize exited 0, 'Recommended: keep fp32 eager', where
    `run` exits 1 for the same cells. It exits 1 now, the last loader line saying why."""
    truncated = "failed: photos/c1/0.jpg: not an image Pillow can decode (OSError: image file is truncated)"
    _fake(monkeypatch, dict.fromkeys(["w0", "w1"], truncated))
    search, out, _ = _search(tmp_path, loaders=("w0", "w1"))
    assert search.exit_code == ExitCode.CELLS_FAILED and out["loader"]["setting"] is None
    opt_cmd.print_text(search)
    assert ("Loader: none: every setting tried failed, the data was not read (w0: photos/c1/0.jpg: not an image "
            "Pillow can decode" in " ".join(capsys.readouterr().out.split()))  # fmt: skip
    _fake(monkeypatch, {"w0": truncated, "w1": "no dataset for this workload"})
    assert _search(tmp_path, loaders=("w0", "w1"))[0].exit_code == ExitCode.CELLS_FAILED  # none read the data
    _fake(monkeypatch, {"w0": truncated, "w1": (1.0, 0.01)})
    assert _search(tmp_path, loaders=("w0", "w1"))[0].exit_code == ExitCode.OK  # w1 read it


def test_when_none_is_enough_the_best_with_workers_gets_prefetch_and_persistent_variants_then_it_says_so(
    tmp_path, monkeypatch
):
    slow = {name: (2.0 - 0.1 * ol.setting(name).workers, 0.4) for name in ol.candidates(64, gpu=False)}
    variants = {v: (1.5, 0.3) for name in slow for v in ol.variants(name)}
    # the loader alone gives 10 samples/s, under the 16 of the synthetic step (a batch of 16 a second)
    measured = _fake(monkeypatch, {**slow, **variants}, alone=10.0)
    _, out, cores = _search(tmp_path)
    first = ol.candidates(cores, gpu=False)
    assert measured == first + ol.variants(first[-1])  # the most workers were the fastest
    loader = out["loader"]
    assert loader["enough"] is False and loader["setting"] == ol.variants(first[-1])[0]  # the fastest measured
    assert any(n.startswith("loader: no setting measured was enough") for n in out["notes"])
    [note] = [n for n in out["notes"] if "data preparation dominates" in n]
    assert "What would change it" in note and "NVIDIA DALI" not in note  # a dataset of no known kind: no image advice
    _fake(monkeypatch, {**slow, **variants}, alone=1000.0)  # a loader that could feed the step: not data preparation
    (tmp_path / "fast").mkdir()
    _, out, _ = _search(tmp_path / "fast")
    assert not any("data preparation dominates" in n for n in out["notes"])
    assert "not enough" in "\n".join(out["recipe"])


def test_loaders_given_are_the_only_ones_tried(tmp_path, monkeypatch):
    measured = _fake(monkeypatch, {"w0": (1.5, 0.3), "w2+pin": (1.4, 0.25)})
    _, out, _ = _search(tmp_path, loaders=("w2+pin", "w0"))
    assert measured == ["w0", "w2+pin"] and out["loader"]["setting"] == "w2+pin"  # no variants of a given list


def test_the_loader_search_stops_when_the_budget_left_does_not_cover_the_next_setting(tmp_path, monkeypatch):
    import time

    clock = [0.0]
    from dlperf.runner import session

    # the search's budget reads this clock: it runs 100 s ahead per loader process
    ahead = type("Clock", (), {"monotonic": staticmethod(lambda: time.monotonic() + clock[0])})
    monkeypatch.setattr(session, "time", ahead)
    measured = _fake(monkeypatch, {"w0": (1.5, 0.3), "w1": (1.4, 0.3), "w2": (1.3, 0.3)}, duration_s=100.0,
                     clock=clock)  # fmt: skip
    _, out, _ = _search(tmp_path, budget_s=250.0)  # 100 s a process: w0 and w1 fit, then 50 s are left
    assert measured == ["w0", "w1"]
    assert any(n.startswith("loader: w2 and after not measured: about 1.7 min needed") for n in out["notes"])
    assert out["loader"]["setting"] == "w1" and out["loader"]["enough"] is False


def test_without_data_nothing_changes(tmp_path, monkeypatch):
    measured = _fake(monkeypatch, {})
    opts = opt.Options("tiny-fcn-r", threads=1, repeats=1, budget_s=900.0, order="fixed")
    search = opt.optimize(opts, str(tmp_path / "o.db"), progress_factory=lambda n: _Quiet(), warn=lambda w: None)
    out = json.loads(opt_cmd.render_json(search))
    assert measured == [] and search.loader is None and "loader" not in out
    assert not any("DataLoader" in line for line in out["recipe"])


def test_loaders_without_data_is_a_usage_error():
    one_line_error(dlperf("optimize", "tiny-fcn-r", "--loaders", "w1"), "--loaders", "name it with --data DIR")
    one_line_error(dlperf("optimize", "tiny-fcn-r", "--data", "/no/such/dir"), "--data", "no such directory")
    one_line_error(dlperf("optimize", "tiny-fcn-r", "--data", "synthetic", "--loaders", "w1+x"), "unknown part 'x'")


def test_data_that_is_a_file_or_an_empty_directory_is_one_line_before_anything_runs(tmp_path):
    """optimize --data is checked as run --data is: a file is not a directory; an empty one lacks the workload's
    dataset, named by its first missing file. Nothing is written."""
    db, file, empty = tmp_path / "d.db", tmp_path / "file", tmp_path / "empty"
    file.write_text("")
    empty.mkdir()
    one_line_error(dlperf("optimize", "tiny-fcn-r", "--data", str(file), db=db), "--data", "not a directory")
    one_line_error(dlperf("optimize", "tiny-fcn-r", "--data", str(empty), db=db), f"{empty}/mnist", "no train-images")
    assert not db.exists() and not list(empty.iterdir())


def test_advise_reads_its_data_before_it_measures_and_a_missing_dataset_names_the_flag(tmp_path):
    """`advise tiny-fcn-r --data EMPTY` measured the CPU at two thread counts and stored them, then said
    "dlperf: error: EMPTY: no train-images-idx3-ubyte ..." (exit 2: "nothing ran or was written"); run's line named
    the folder, not the flag."""
    db, empty = tmp_path / "d.db", tmp_path / "empty"
    empty.mkdir()
    one_line_error(dlperf("advise", "tiny-fcn-r", "--data", str(empty), "--budget", "30s", db=db), f"--data {empty}:")
    assert not db.exists()
    one_line_error(dlperf("run", "--workloads", "tiny-fcn-r", "--data", str(empty), db=db), f"--data {empty}: no ")


def test_a_setting_stopped_before_it_measured_is_never_the_best():
    """A trial the budget stopped keeps the median of the steps it took but no data wait: it was recommended, with
    "still waits unknown of its step"."""
    cut = ol.LoaderTrial("w0", "timeout", "the search's --budget ran out", median_s=0.001, mean_s=0.001)
    slower = ol.LoaderTrial("w1", "ok", median_s=0.002, wait_share=0.3, mean_s=0.002)
    assert ol.best_of([cut, slower]) is slower and ol.best_of([cut]) is None


def test_a_chosen_setting_that_is_not_the_fastest_measured_is_not_called_the_best():
    """optimize tiny-alexnet-s --data (24 images, 2 cores): w2+pf4+persist stepped in 22.4 ms, w2+persist in 25.5
    (their steps not told apart), and the answer read 'Loader: w2+persist (the best measured, not enough)'."""
    tried = [ol.LoaderTrial("w2+persist", "ok", median_s=0.0250, wait_share=0.70, mean_s=0.0255),
             ol.LoaderTrial("w2+pf4+persist", "ok", median_s=0.0220, wait_share=0.68, mean_s=0.0224)]  # fmt: skip
    choice = ol.LoaderChoice("channels_last", 0.00255, tried, chosen=tried[0])
    said = opt_cmd.chosen_said(choice)
    assert "the best" not in said and said.startswith("not enough; w2+pf4+persist stepped faster, 22.4 ms against "
                                                      "25.5 ms a mean step, but not measurably so")  # fmt: skip
    assert opt_cmd.chosen_said(replace(choice, chosen=tried[1])) == "the best measured, not enough"
