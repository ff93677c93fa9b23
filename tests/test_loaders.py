"""Loader settings: their names, their order, the default sweep, the verdict; and the loader as a cell's dimension."""

import pytest

from dlperf.errors import UsageError
from dlperf.loaders import (
    LoaderSetting,
    default_loaders,
    input_bound,
    oversubscribed,
    parse_loader,
    parse_loaders,
)
from dlperf.protocol import Cell


def test_a_setting_has_one_name_whatever_the_order_of_its_parts():
    assert parse_loader("persist+PIN+w2+pf4").name == "w2+pin+pf4+persist"
    assert parse_loaders("w0, w2+pin,pin+w2") == ("w0", "w2+pin")
    assert parse_loader("w3").torch_kwargs() == {"num_workers": 3, "pin_memory": False, "persistent_workers": False}
    assert parse_loader("w0+pin").torch_kwargs() == {"num_workers": 0, "pin_memory": True}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("pin", "name the workers first"),
        ("w2+fast", "unknown part 'fast'"),
        ("w2+pin+pin", "given twice"),
        ("w0+persist", "need at least one worker"),
        ("w1+pf0", "pfN prefetches 1 to"),
        ("w999", "at most 256 workers"),
        ("w-1", "unknown part"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_flag(text, says):
    with pytest.raises(UsageError) as err:
        parse_loader(text)
    assert str(err.value).startswith(f"--loaders {text!r}") and says in str(err.value)
    assert "\n" not in str(err.value)


def test_the_default_sweep_is_every_worker_count_up_to_the_cores_pinned_only_on_a_gpu():
    assert default_loaders(2, gpu=False) == ("w0", "w1", "w2")
    assert default_loaders(1, gpu=True) == ("w0", "w0+pin", "w1", "w1+pin")


def test_smaller_settings_come_first():
    names = ["w2+pin+pf4+persist", "w2", "w1+pin", "w0", "w2+pin"]
    assert sorted(names, key=lambda n: parse_loader(n).cost) == ["w0", "w1+pin", "w2", "w2+pin", "w2+pin+pf4+persist"]


def test_the_input_bound_verdict_starts_at_5_and_20_percent():
    assert [input_bound(s) for s in (None, 0.0, 0.049, 0.05, 0.199, 0.2, 0.9)] == [
        None, None, None, "moderate", "moderate", "high", "high"
    ]  # fmt: skip


def test_workers_and_threads_beyond_the_cores_are_oversubscribed():
    assert not oversubscribed(1, 1, 2) and oversubscribed(2, 1, 2)
    assert LoaderSetting(2).name == "w2"


def test_the_loader_is_part_of_a_cells_key_only_when_there_is_one():
    plain = Cell("fcn-r", "torch", "cpu", 2, "fp32")
    loaded = Cell("fcn-r", "torch", "cpu", 2, "fp32", loader="w2+pin")
    assert plain.key == "fcn-r|torch|cpu|2|fp32"
    assert loaded.key == "fcn-r|torch|cpu|2|fp32|data:w2+pin" and loaded.label.endswith("data:w2+pin")
    assert Cell.from_json(loaded.to_json()) == loaded


def test_a_loader_cell_is_stored_with_its_setting_and_its_figures(tmp_path):
    from dlperf.figures import LoaderFigures
    from dlperf.runner.collect import cell_figures
    from dlperf.store import Store
    from dlperf.store.process import ProcessDetail, ProcessMeasurement
    from dlperf.store.records import PlannedCell
    from dlperf.vocab import Status

    cell = Cell("fcn-r", "torch", "cpu", 1, "fp32", loader="w2")
    store = Store.open(tmp_path / "d.db", create=True)
    run_id = store.create_run(
        {"spec": 1}, {"cpu": {}}, {"cpu_model": "x"}, ["dlperf"], [PlannedCell(cell, {"batch": 4})]
    )
    loader = LoaderFigures(setting="w2", workers=2, threads=1, cores=2, oversubscribed=True,
                           alone_samples_per_s=800.0, wait_s=[0.1, 0.3, 0.0])  # fmt: skip
    m = ProcessMeasurement(status=Status.OK, samples=[1.0, 1.0, 1.0, 1.0], detail=ProcessDetail(loader=loader))
    store.record(run_id, cell.key, 0, m, cell_figures([m], batch=4, threads=1, cores=2, device="cpu"))
    (stored,) = store.cells(run_id)
    assert stored.cell == cell and stored.loader == "w2"
    data = stored.data
    # the wait share pools the timed steps that have a wait: 0.4 s of 3 s; the fourth step has none
    assert data.wait_share == pytest.approx(0.4 / 3) and data.verdict == "moderate"
    assert data.alone_samples_per_s == 800.0 and data.wait_median_s == 0.1 and data.oversubscribed
    assert any("2 loader workers + 1 compute thread exceed the 2 cores" in w for w in stored.warnings)


def test_data_flags_are_checked_at_the_edge(tmp_path):
    from dlperf.api import make_spec

    with pytest.raises(UsageError, match="--loaders: loader settings read real data"):
        make_spec(["tiny-fcn-r"], loaders="w1")
    with pytest.raises(UsageError, match=r"--data '.*nowhere': no such directory"):
        make_spec(["tiny-fcn-r"], data=str(tmp_path / "nowhere"))
    with pytest.raises(UsageError, match="--data: data-parallel cells"):
        make_spec(["tiny-fcn-r"], data=str(tmp_path), nprocs=[1])
    spec = make_spec(["tiny-fcn-r"], data=str(tmp_path), loaders="w1+pin,w0")
    assert spec.data == str(tmp_path.resolve()) and spec.loaders == ("w1+pin", "w0")


@pytest.mark.parametrize(("setting", "samples", "warned"), [("w2", 32, True), ("w2+persist", 32, False),
                                                            ("w0", 32, False), ("w2", 4000, False)])  # fmt: skip
def test_workers_that_start_again_every_few_steps_are_named(setting, samples, warned):
    """The H200 check's ImageNet-style folder held 32 images, two batches of 16: w2+pin's workers started again every
    second step, and its step took 180 ms against w0's 75. The cell says so where the workers do not persist."""
    from dlperf.figures import LoaderFigures
    from dlperf.runner.collect import cell_figures
    from dlperf.store.process import ProcessDetail, ProcessMeasurement
    from dlperf.vocab import Status

    workers = int(setting.split("+")[0][1:])
    loader = LoaderFigures(setting=setting, workers=workers, threads=1, cores=16, samples=samples, wait_s=[0.1] * 4)
    m = ProcessMeasurement(status=Status.OK, samples=[1.0] * 4, detail=ProcessDetail(loader=loader))
    warnings = cell_figures([m], batch=16, threads=1, cores=16, device="cuda:0").warnings
    said = [w for w in warnings if w.startswith("short epochs")]
    assert bool(said) == warned, warnings
    if warned:
        assert said[0].startswith("short epochs: the dataset's 32 samples make 2 batches of 16, so the 2 workers "
                                  "start again every 2 steps (persistent_workers off)")  # fmt: skip


def test_a_short_epoch_counts_the_batches_the_loader_gives():
    """dlperf's DataLoaders drop the last partial batch: tiny-alexnet-s over 25 images at batch 4 said 'the dataset's
    25 samples make 7 batches of 4, so the 1 worker starts again every 7 steps' where it started every 6. An epoch is
    the loader's own count where the cell recorded it (a user's factory may keep its last batch), else whole
    batches; the plan's warning reads the same rule from its check."""
    from dlperf.answers import DataCheck
    from dlperf.figures import LoaderFigures
    from dlperf.plan.warnings import epoch_warnings
    from dlperf.protocol import Cell
    from dlperf.runner.collect import cell_figures
    from dlperf.store.process import ProcessDetail, ProcessMeasurement
    from dlperf.vocab import Status
    from dlperf.worker.feed import describe

    def said(**given):
        loader = LoaderFigures(setting="w1", workers=1, threads=1, cores=2, samples=25, wait_s=[0.1] * 4, **given)
        m = ProcessMeasurement(status=Status.OK, samples=[1.0] * 4, detail=ProcessDetail(loader=loader))
        return [w for w in cell_figures([m], batch=4, threads=1, cores=2, device="cpu").warnings if "epochs" in w]

    assert said()[0].startswith("short epochs: the dataset's 25 samples make 6 batches of 4, so the 1 worker starts "
                                "again every 6 steps")  # fmt: skip
    assert "make 7 batches of 4" in said(batches=7)[0]  # a factory's loader keeping its last partial batch

    class Loader:  # what the worker describes: a DataLoader over 25 samples at batch 4, drop_last
        dataset = tuple(range(25))

        def __len__(self):
            return 6

    assert describe(Loader(), parse_loader("w1"), 1).batches == 6
    cell = Cell("tiny-alexnet-s", "torch", "cpu", 1, "fp32", loader="w1")
    for check, every in ((DataCheck(samples=25), 6), (DataCheck(samples=25, batches=7), 7)):
        [warning] = epoch_warnings([cell], {"tiny-alexnet-s": 4}, {"tiny-alexnet-s": check})
        assert f"25 samples, {every} batches of 4 an epoch: w1 starts its workers again every {every} steps" in warning
