"""What a run says of its real data before it measures: the image folder each workload reads in `--data DIR`, with
its images and classes (a note, once a folder), and `--data dataset` or `synthetic` where a folder of that name is in
the current directory (the keyword is read; the line says how to name the folder)."""

import pytest

from conftest import dlperf, require, write_datasets
from dlperf.answers import DataAnswer, DataCheck
from dlperf.errors import UsageError
from dlperf.plan.warnings import data_notes, keyword_warnings
from dlperf.spec import make_spec


def test_each_image_folder_read_is_said_once_with_its_images_and_classes():
    checks = {
        "tiny-resnet-50": DataCheck(32, folder="/d/imagenet/train", classes=4),
        "tiny-alexnet-s": DataCheck(32, folder="/d/imagenet/train", classes=4),
        "tiny-fcn-r": DataCheck(1000),  # MNIST's files: no folder to say
        "one": DataCheck(1, folder="/e", classes=1),
    }
    assert data_notes(checks) == [
        "--data: one reads the image folder /e: 1 image in 1 class",
        "--data: tiny-alexnet-s, tiny-resnet-50 read the image folder /d/imagenet/train: 32 images in 4 classes",
    ]
    assert data_notes({"tiny-fcn-r": DataCheck(1000)}) == data_notes({}) == []


def test_files_of_the_folder_not_read_are_said_with_it():
    """A .gif or a notes.txt among the class folders was left out silently: the note says how many, and why."""
    skipped = "2 files skipped, not of a type read (.gif 1, .txt 1)"
    assert data_notes({"w": DataCheck(8, folder="/p", classes=2, skipped=skipped)}) == [
        f"--data: w reads the image folder /p: 8 images in 2 classes; {skipped}"
    ]


def test_the_folder_and_its_classes_cross_the_wire():
    answer = DataAnswer({"w": DataCheck(9, [3, 8, 8], folder="/d/imagenet/train", classes=3), "v": DataCheck(5)})
    assert DataAnswer.from_json(answer.to_json()) == answer
    assert "folder" not in answer.to_json()["v"]  # absent where there is none, as before


def test_a_dataset_folder_here_is_named_where_the_keyword_is_explained(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert keyword_warnings("dataset") == keyword_warnings("synthetic") == []
    (tmp_path / "dataset").mkdir()
    (tmp_path / "synthetic").mkdir()
    assert keyword_warnings("dataset") == [
        "--data dataset: the keyword, each user workload's own Dataset and no folder (a built-in workload's loader "
        "cells are unsupported); ./dataset is a folder here: --data ./dataset reads it"
    ]
    assert keyword_warnings("synthetic") == []  # also the default: a ./synthetic is no reason to warn every run
    assert keyword_warnings(str(tmp_path / "dataset")) == []  # a folder named as one


def test_loaders_refused_under_synthetic_name_a_synthetic_folder_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as caught:
        make_spec("tiny-alexnet-s", data="synthetic", loaders="w0")
    assert str(caught.value) == "--loaders: loader settings read real data; name it with --data DIR"
    (tmp_path / "synthetic").mkdir()
    with pytest.raises(UsageError) as caught:
        make_spec("tiny-alexnet-s", data="synthetic", loaders="w0")
    assert str(caught.value) == ("--loaders: loader settings read real data; name it with --data DIR; ./synthetic "
                                 "is a folder here: --data ./synthetic reads it")  # fmt: skip


def test_a_run_says_which_image_folder_it_reads_before_it_measures(tmp_path):
    """`dlperf run --data DIR` read DIR/imagenet/train, DIR/train or DIR itself and said none of it: the folder and
    its counts are one line on stderr, once, before the cells (a dry run plans, and checks the data, alike)."""
    require("torch")
    data = write_datasets(tmp_path / "data")
    proc = dlperf("run", "--workloads", "tiny-alexnet-s", "--data", str(data), "--loaders", "w0", "--threads", "1",
                  "--dry-run", db=tmp_path / "d.db")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    line = f"dlperf: --data: tiny-alexnet-s reads the image folder {data / 'imagenet' / 'train'}: 9 images in 3 classes"
    assert proc.stderr.splitlines().count(line) == 1, proc.stderr
    assert proc.stderr.index(line) < proc.stderr.index("estimating:")
