"""The plan's probe of a user's workload builds the model on the meta device, where its factory runs so: a
1.3B-parameter LM's real build (5 GB of weights allocated and initialized, 12 to 17 s here) came before the memory
check that refuses it, so `dlperf crossover` of a model this machine cannot hold took about 22 s to say so. A factory
that cannot run on the meta device is built for real, as before, and its own error is still the user's."""

import pytest

from conftest import dlperf as command
from conftest import one_line_error, require

torch = require("torch")

from dlperf.errors import UsageError  # noqa: E402
from dlperf.frameworks.torch.user import probe_workload  # noqa: E402

MODELS = """
import os

import torch
from torch import nn
from torch._subclasses.fake_tensor import is_fake
import dlperf

REAL = os.environ.get("DLPERF_TEST_REAL_BUILDS")  # a file each real build appends a line to


def real_build():
    probe = torch.empty(0)
    if probe.is_meta or is_fake(probe):
        return False
    if REAL:
        with open(REAL, "a") as f:
            f.write("built for real\\n")
    return True


class Huge(nn.Module):
    # 16 layers of 16384 x 16384: 4.3B parameters, 16 GiB of fp32 weights; refuses to be built for real
    def __init__(self, layers=16, width=16384):
        super().__init__()
        if real_build():
            raise RuntimeError("Huge was built for real")
        self.layers = nn.Sequential(*(nn.Linear(width, width, bias=False) for _ in range(layers)))

    def forward(self, x):
        return self.layers(x)


def make_batch(n, device):
    return torch.randn(n, 16384, device=device), torch.randn(n, 16384, device=device)


def huge():
    return dlperf.user_workload("huge", Huge(), make_batch, nn.functional.mse_loss, batch_size=4)


class Reads(nn.Module):
    # reads a value as it is built: no meta tensor holds one
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, int(torch.ones(3).sum().item()))
        real_build()


def batch_of_8_to_3(n, device):
    return torch.randn(n, 8, device=device), torch.randn(n, 3, device=device)


def reads():
    return dlperf.user_workload("reads", Reads(), batch_of_8_to_3, nn.functional.mse_loss, batch_size=2)


def moved_batch(n, device):
    return torch.randn(n, 8).to(device), torch.randint(0, 3, (n,)).to(device)  # made, then moved


def moved():
    return dlperf.user_workload("moved", nn.Linear(8, 3), moved_batch, nn.functional.cross_entropy, batch_size=2)


def broken():
    raise ValueError("no such checkpoint")
"""


@pytest.fixture
def models(tmp_path, monkeypatch):
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    monkeypatch.setenv("DLPERF_TEST_REAL_BUILDS", str(tmp_path / "real.txt"))
    return path


def real_builds(models) -> int:
    found = models.parent / "real.txt"
    return len(found.read_text().splitlines()) if found.exists() else 0


def test_a_model_too_large_to_build_is_described_without_its_weights(models):
    a = probe_workload(f"{models}:huge")
    assert (a["name"], a["params"], a["batch"]) == ("huge", 16 * 16384 * 16384, 4)
    assert (a["input_shape"], a["input_dtype"]) == ([16384], "float32") and "batch_error" not in a
    assert real_builds(models) == 0


def test_a_factory_the_meta_device_cannot_run_is_built_for_real(models):
    a = probe_workload(f"{models}:reads")
    assert (a["name"], a["params"], a["input_shape"]) == ("reads", 8 * 3 + 3, [8])
    assert real_builds(models) == 1


def test_a_batch_made_then_moved_is_described_as_made_for_real(models):
    """torch.randn(n, 8).to(device) is a meta tensor moved to the CPU under the meta device, which torch refuses:
    the batch's error would have been reported; built again for real, the batch is described."""
    a = probe_workload(f"{models}:moved")
    assert (a["input_shape"], a["input_dtype"]) == ([8], "float32") and "batch_error" not in a


def test_the_factorys_own_error_is_the_users(models):
    with pytest.raises(UsageError) as caught:
        probe_workload(f"{models}:broken")
    said = str(caught.value)
    assert said.startswith(f"workload '{models}:broken': the factory raised ValueError: no such checkpoint")


@pytest.mark.slow
def test_crossover_refuses_a_model_this_machine_cannot_hold_without_building_it(models, tmp_path):
    """End to end, through the probe child and the memory trace's: one line with both figures, the model never built
    for real (its real construction raises), no store written."""
    db = tmp_path / "x.db"
    proc = command("crossover", f"{models}:huge", "--gpu", "T4", db=db, env={"DLPERF_NO_COUNT_CACHE": "1"})
    one_line_error(proc, "huge: not measured: the fp32 step at batch 1 needs about", "GiB (predicted), more than")
    assert real_builds(models) == 0 and not db.exists()
