"""`--resume` of a `--data DIR` run after the folder was refilled (a smaller MNIST put in its place): the folder still
read, so the run went on; its table set `w0` over 1,000 samples beside `w1` over 16 and recommended `w0`. A dataset
whose number of samples differs from what the run's loader cells read is one line now, before anything is measured."""

from __future__ import annotations

import pytest

from conftest import make_cell
from dlperf import api
from dlperf.answers import DataCheck
from dlperf.errors import UsageError
from dlperf.report.table import cell_label
from dlperf.spec import RunSpec
from dlperf.store.records import LoaderRecord

SPEC = RunSpec(("tiny-fcn-r",), threads=(1,))
READ = make_cell("tiny-fcn-r", data=LoaderRecord("w0", dataset="MNIST", samples=1000))


def check(monkeypatch, samples: int) -> None:
    monkeypatch.setattr(api, "check_data_of", lambda spec, workloads: {"tiny-fcn-r": DataCheck(samples)})
    api._check_data_again(1, SPEC, [], {}, [READ, make_cell("tiny-fcn-r")])


def test_a_dataset_refilled_since_the_run_read_it_is_one_line(monkeypatch):
    with pytest.raises(UsageError) as refused:
        check(monkeypatch, 16)
    assert str(refused.value) == (
        "--resume: run 1's --data synthetic: the MNIST dataset of tiny-fcn-r holds 16 samples, 1,000 when its cell "
        f"{cell_label(READ)} read it: the folder changed since, so what is left would read another dataset; start a "
        "new run instead"
    )
    check(monkeypatch, 1000)  # the same dataset: it goes on
