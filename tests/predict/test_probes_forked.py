"""A command that asks the predictor imports PyTorch once (`runner/warm.py`'s `probes_share`): its probe children (a
user's model described, the step's operators counted, its memory traced) are forked from one warm parent, where a
cold `predict tiny-fcn-r --cost` started two children, each importing PyTorch and what its count imports. A user's
files are imported in the forked child only, so each answer records its own model's files and no other's."""

import sys

import pytest

from conftest import gone, require
from dlperf import cli
from dlperf.answers import WorkloadRequest
from dlperf.predict import cache
from dlperf.runner import launch, probe, probe_cache, warm
from dlperf.worker import sources


@pytest.fixture
def started(tmp_path, monkeypatch):
    """What starts an interpreter that imports a framework: each cold child (its worker module) and each warm parent
    (its framework); the parents closed after the test."""
    require("torch")
    monkeypatch.delenv(warm.OFF_VAR, raising=False)  # a suite timed cold (DLPERF_NO_WARM=1) must not turn this off
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(cache.BYPASS, "1")  # nothing kept: every answer is asked of a child
    monkeypatch.setenv(probe_cache.BYPASS, "1")
    monkeypatch.setattr(warm, "_parents", {})
    found: list[str] = []
    cold, parent = launch.start_cold, warm.WarmParent.__init__

    def start_cold(cmd, env, log_dir):
        found.append(f"cold {cmd[cmd.index('-m') + 1]}")
        return cold(cmd, env, log_dir)

    def warm_parent(self, python, framework, key):
        found.append(f"warm parent {framework}")
        parent(self, python, framework, key)

    monkeypatch.setattr(launch, "start_cold", start_cold)
    monkeypatch.setattr(warm.WarmParent, "__init__", warm_parent)
    try:
        yield found
    finally:
        warm.close_all()


def test_a_cold_predict_with_its_cost_imports_pytorch_once(started, capsys, monkeypatch):
    """The operator count and the memory trace (which --cost checks the fit with) are two probes: two cold children
    before, one warm parent's forks now; the parent ends with the command, as a program calling the CLI returns (it
    lived, holding PyTorch, until the caller's interpreter ended)."""
    parents, begin = [], warm.WarmParent.__init__
    monkeypatch.setattr(warm.WarmParent, "__init__", lambda self, *a: parents.append(self) or begin(self, *a))
    argv = ["predict", "tiny-fcn-r", "--cost", "--samples", "1000", "--gpu", "T4", "--modes", "fp32"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert "T4" in capsys.readouterr().out
    assert started == ["warm parent torch"]
    assert warm._parents == {} and gone([parents[0].proc.pid], within_s=1.0)


MODEL = """import torch
import dlperf
from {layers} import WIDTH


def make_batch(batch_size, device):
    return torch.randn(batch_size, 4, device=device), torch.randint(0, WIDTH, (batch_size,), device=device)


def make():
    model = torch.nn.Linear(4, WIDTH)
    return dlperf.user_workload("{name}", model, make_batch, torch.nn.functional.cross_entropy, batch_size=2)
"""


def test_forked_probes_record_their_own_models_files_and_no_other(started, tmp_path):
    """Two users' models described in one command, each from a fork of the same parent: each answer lists its model's
    file and the module beside it that it imports, and neither of the other model's."""
    files = {}
    for name in ("one", "two"):
        (tmp_path / f"{name}_layers.py").write_text("WIDTH = 3\n")
        (tmp_path / f"{name}.py").write_text(MODEL.format(layers=f"{name}_layers", name=name))
        files[name] = {str(tmp_path / f"{name}.py"), str(tmp_path / f"{name}_layers.py")}
    python = sys.executable
    with warm.probes_share():
        said = {n: probe.ask("torch", WorkloadRequest(f"{tmp_path / n}.py:make"), python).sources for n in files}
    assert started == ["warm parent torch"]
    for name, mine in files.items():
        assert set(said[name]) == mine, said[name]
        assert all(said[name][p] == sources.described(p) for p in mine)
