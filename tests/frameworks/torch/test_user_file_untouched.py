"""A user's file is run for real, never under a fake mode: the memory trace and the own-error check build the step
under FakeTensorMode (`memcount.py`), and ran the file there again, so module-level code computed fake tensors and
saved them. `torch.save` of a fake tensor writes a broken file (595 bytes, no data.pkl) before it raises: a cache saved
at import time, guarded as best effort, was left broken over the user's good one after `dlperf predict --memory`.
Only the factory runs under the fake mode (or on the meta device, the probe's): dlperf changes none of the user's
files."""

import pytest

from conftest import dlperf as command
from conftest import require

torch = require("torch")

from test_user_mistakes import user  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from dlperf.frameworks.torch import memcount  # noqa: E402
from dlperf.frameworks.torch.user import load_user, probe_workload  # noqa: E402

FILE = """
import os

import torch
from torch import nn
from torch._guards import detect_fake_mode
import dlperf

WEIGHTS = torch.arange(6.0).reshape(2, 3)  # module-level code, as a user writes it
with open(os.environ["DLPERF_TEST_RUNS"], "a") as f:
    f.write(f"{'fake' if detect_fake_mode() is not None else WEIGHTS.device}\\n")
try:  # a cache beside the model, best effort
    torch.save({"w": WEIGHTS}, os.environ["DLPERF_TEST_SAVED"])
except Exception:
    pass


def pair(n, device):
    return torch.randn(n, 3, device=device), torch.randint(0, 2, (n,), device=device)


def make():
    return dlperf.user_workload("saver", nn.Linear(3, 2), pair, nn.functional.cross_entropy, batch_size=4)
"""


@pytest.fixture
def mine(tmp_path, monkeypatch):
    """The user's file, run once by the user (its cache saved for real): its source, and what it left."""
    path, runs, saved = tmp_path / "mine.py", tmp_path / "runs.txt", tmp_path / "cache.pt"
    path.write_text(FILE)
    monkeypatch.setenv("DLPERF_TEST_RUNS", str(runs))
    monkeypatch.setenv("DLPERF_TEST_SAVED", str(saved))
    monkeypatch.chdir(tmp_path)
    probe_workload(f"{path}:make")
    return f"{path}:make", runs, saved, saved.read_bytes()


def untouched(runs, saved, before: bytes) -> bool:
    """Every run of the file was for real, and its cache is the user's, intact."""
    loaded = torch.load(saved)["w"]
    return set(runs.read_text().split()) == {"cpu"} and saved.read_bytes() == before and loaded.sum().item() == 15.0


def test_loading_the_workload_under_a_fake_mode_runs_the_file_for_real(mine):
    source, runs, saved, before = mine
    with FakeTensorMode():
        user = load_user(source)
        assert isinstance(user.model.weight, torch._subclasses.FakeTensor)  # the factory itself: under the mode
    with torch.device("meta"):
        assert load_user(source).model.weight.is_meta
    assert untouched(runs, saved, before) and len(runs.read_text().split()) == 3


def test_the_memory_trace_and_the_own_error_check_leave_the_users_file_alone(mine):
    source, runs, saved, before = mine
    w = user(source)
    [trace] = memcount.memory_count(w, "fp32", [4])
    assert trace["peak"] > 0
    assert memcount.own_error(w, "fp32") is None
    assert untouched(runs, saved, before)


@pytest.mark.slow
def test_predict_memory_leaves_the_users_file_alone(mine, tmp_path):
    source, runs, saved, before = mine
    done = command("predict", source, "--memory", "--gpu", "T4", "--modes", "fp32", "--no-cache", cwd=tmp_path,
                   env={"DLPERF_DATA_DIR": str(tmp_path / "data")})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert untouched(runs, saved, before)
