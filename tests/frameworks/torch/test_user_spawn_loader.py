"""A user's DataLoader whose workers start by `spawn` (`multiprocessing_context="spawn"`, macOS's default) reads the
user's Dataset in its workers: the file is imported under a name the workers import again (`workloads/userfiles`).
It failed as 'DataLoader worker (pid(s) N) exited unexpectedly', the worker's 'No module named dlperf_user_123' only
in its log."""

import dataclasses
import sys

import pytest

from conftest import require

torch = require("torch")

from dlperf.frameworks.torch import data  # noqa: E402
from dlperf.loaders import LoaderSetting  # noqa: E402
from dlperf.workloads.shi2016 import BUILTIN  # noqa: E402
from dlperf.workloads.user import build_user_workload  # noqa: E402

FACTORY = """
import torch
from torch.utils.data import DataLoader, Dataset

import dlperf


class Points(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        return torch.full((8,), float(i)), i % 2


def make_loader(batch_size, **kwargs):
    spawn = "spawn" if kwargs["num_workers"] else None
    return DataLoader(Points(), batch_size=batch_size, multiprocessing_context=spawn, **kwargs)


def make():
    return dlperf.user_workload("points", torch.nn.Linear(8, 2), None, torch.nn.functional.cross_entropy,
                                batch_size=4, loader=make_loader)
"""


@pytest.mark.slow  # a spawned worker imports torch
def test_a_users_loader_with_spawned_workers_reads_the_users_dataset(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "points.py").write_text(FACTORY)
    user = build_user_workload(f"{tmp_path / 'points.py'}:make")
    workload = dataclasses.replace(BUILTIN["tiny-fcn-r"], batch=4)
    loader = data.loader(workload, "dataset", LoaderSetting(1), torch.device("cpu"), user)
    inputs, targets = next(iter(loader))
    assert inputs.shape == (4, 8) and targets.tolist() == [0, 1, 0, 1]
