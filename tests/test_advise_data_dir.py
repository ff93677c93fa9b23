"""`dlperf advise FILE:make --data DIR` for a factory that takes `data_dir` (data.md's own JPEG example): advise built
the workload without DIR, in its operator count and in its thread search, and refused it ('make takes data_dir ...
pass it with --data DIR') though --data DIR was given. The thread search measures the step on synthetic data with the
factory given DIR, and no loader setting: the mode search measures those."""

from __future__ import annotations

from dlperf import advise, crossover
from dlperf.loaders import DATA_SYNTHETIC
from dlperf.measure.timer import TimerConfig
from dlperf.plan.cells import loaders_of
from dlperf.spec import RunSpec, make_spec
from dlperf.vocab import Status
from test_optimize_data_dir_recipe import FACTORY  # a factory that takes data_dir, and a dataset of 8 rows


def written(tmp_path):
    (tmp_path / "mine.py").write_text(FACTORY)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "width.txt").write_text("abcdef")
    return f"{tmp_path}/mine.py:make", str(tmp_path / "data")


def test_a_spec_of_real_data_and_no_loader_setting_plans_the_synthetic_step_alone(tmp_path):
    spec = make_spec(["tiny-fcn-r"], data=str(tmp_path), loaders=[])
    assert spec.loaders == () and loaders_of(spec, "cpu", 2) == ("",)  # the synthetic step alone
    assert RunSpec.from_json(spec.to_json()).loaders == ()  # a resumed run is checked as it was planned
    assert len(loaders_of(make_spec(["tiny-fcn-r"], data=str(tmp_path)), "cpu", 2)) > 1  # None: the defaults


def test_advise_builds_a_factory_that_takes_data_dir_with_the_folder_given(tmp_path):
    workload, data = written(tmp_path)
    found, samples, batches = advise._resolved(advise.Options(workload, data=data, timeout=120))
    assert (found.name, found.batch, samples, batches) == ("rows", 4, 8, 2)
    quick = TimerConfig(min_steps=3, min_time=0, max_time=0.5, max_warmup=3)
    side = crossover.crossover(
        crossover.Options(workload, gpus=("T4",), batches=(4,), threads=1, timeout=120, timer=quick, data=data),
        str(tmp_path / "x.db"),
    )
    cpu = side.answer.rows[0].cpu
    assert cpu.status == Status.OK and cpu.median_s > 0 and not cpu.loader  # the step on synthetic data
    assert crossover.Options(workload).data == DATA_SYNTHETIC
