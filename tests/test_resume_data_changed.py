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


def test_a_folder_moved_since_the_run_began_is_said_gone_as_a_fresh_run_says_it(monkeypatch, tmp_path):
    """--resume after the --data folder was moved said "run 1's --data: DIR: no imagenet/train folder ...", as if
    the folder were there without its images; a fresh run says "no such directory"."""
    from dlperf.protocol import Cell
    from dlperf.runner.tasks import Task

    monkeypatch.setattr(api, "check_data_of", lambda spec, workloads: {})  # a probe would read the folder
    gone = tmp_path / "photos"
    cell = Cell("tiny-alexnet-s", "torch", "cpu", 1, "fp32", loader="w0")
    with pytest.raises(UsageError) as refused:
        api._check_data_again(1, RunSpec(("tiny-alexnet-s",), data=str(gone)), [Task(cell, 0)], {cell.key: {}}, [])
    assert str(refused.value) == (f"--resume: run 1's --data {gone}: no such directory (moved or removed since the "
                                  "run began): put it back to resume the run, or start a new run")  # fmt: skip
    gone.mkdir()
    api._check_data_again(1, RunSpec(("tiny-alexnet-s",), data=str(gone)), [Task(cell, 0)], {cell.key: {}}, [])
