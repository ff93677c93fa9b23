"""The plan's probe of a user's file runs the file once, for real; only its factory runs on the meta device. It ran
the file twice, the second time on the meta device: module-level code that computes a tensor and saves it (a cache
beside the data) wrote it without its values (torch.save of a meta tensor is no error), for every later run to read
back; a model built at module level is built for real (own-model.md says to build it in the factory)."""

from conftest import require

torch = require("torch")

from dlperf.frameworks.torch.user import probe_workload  # noqa: E402

FILE = """
import os

import torch
from torch import nn
import dlperf

TABLE = torch.arange(6.0)  # module-level code, as a user writes it: a tensor computed at import
with open(os.environ["DLPERF_TEST_RUNS"], "a") as f:
    f.write(f"{TABLE.device} {TABLE.sum().item() if not TABLE.is_meta else 'no values'}\\n")
MODEL = nn.Linear(6, 2)  # built at import time


def make_batch(n, device):
    return TABLE.to(device).expand(n, 6).clone(), torch.zeros(n, dtype=torch.long, device=device)


def make():
    return dlperf.user_workload("module-level", MODEL, make_batch, nn.functional.cross_entropy, batch_size=4)


def inside():
    return dlperf.user_workload("inside", nn.Linear(6, 3), make_batch, nn.functional.cross_entropy, batch_size=4)
"""


def probed(tmp_path, monkeypatch, factory: str):
    path, runs = tmp_path / "mine.py", tmp_path / "runs.txt"
    path.write_text(FILE)
    monkeypatch.setenv("DLPERF_TEST_RUNS", str(runs))
    return probe_workload(f"{path}:{factory}"), runs.read_text().splitlines()


def test_the_users_file_runs_once_for_real_never_on_the_meta_device(tmp_path, monkeypatch):
    described, runs = probed(tmp_path, monkeypatch, "make")
    assert runs == ["cpu 15.0"]
    assert (described["params"], described["input_shape"], described["input_dtype"]) == (6 * 2 + 2, [6], "float32")


def test_a_model_built_in_the_factory_is_still_described_from_the_meta_device(tmp_path, monkeypatch):
    described, runs = probed(tmp_path, monkeypatch, "inside")
    assert runs == ["cpu 15.0"] and described["params"] == 6 * 3 + 3 and "batch_error" not in described
