"""The predictions table (schema version 10): a cell's step predicted on GPUs, read back typed, replaced by a later
prediction for the same GPU, copied by merge with its run."""

import pytest
from test_profiles import KEY, measured_run

from dlperf.errors import UsageError
from dlperf.store import Store, merge
from dlperf.store.records import Prediction


def row(gpu="T4", step_s=0.02, bound="compute"):
    return Prediction(KEY, gpu, "fp32", 1024, step_s, step_s - 0.001, 0.001, bound, {"kernels": 12})


def test_predictions_are_stored_per_cell_and_gpu_and_a_later_one_replaces_an_earlier(tmp_path):
    store, run_id = measured_run(tmp_path / "d.db")
    store.record_predictions(run_id, [row("T4"), row("H100-SXM5-80GB", 0.004, "launch")])
    store.record_predictions(run_id, [row("T4", 0.03)])
    [(key, found)] = store.predictions(run_id).items()
    assert key == KEY and [p.gpu for p in found] == ["H100-SXM5-80GB", "T4"]
    t4 = found[1]
    assert (t4.step_s, t4.device_s, t4.transfer_s, t4.bound, t4.batch) == (0.03, 0.03 - 0.001, 0.001, "compute", 1024)
    assert t4.detail == {"kernels": 12} and found[0].bound == "launch"
    assert store.predictions(run_id + 1) == {}


def test_a_bound_outside_the_three_is_refused_by_the_store(tmp_path):
    store, run_id = measured_run(tmp_path / "d.db")
    with pytest.raises(UsageError):
        store.record_predictions(run_id, [row(bound="io")])


def test_merge_copies_a_runs_predictions_with_it(tmp_path):
    store, run_id = measured_run(tmp_path / "a.db")
    store.record_predictions(run_id, [row("T4")])
    store.close()
    target = tmp_path / "all.db"
    store, _ = measured_run(target, argv=("dlperf", "run"))
    store.close()
    [copied] = merge.merge([str(tmp_path / "a.db")], str(target))
    store = Store.open(target, create=False)
    assert copied.target_run == 2 and store.predictions(1) == {}
    [p] = store.predictions(2)[KEY]
    assert p.gpu == "T4" and p.step_s == 0.02 and p.run_id == 2
