"""A user's model file that sets PyTorch's threads itself (`torch.set_num_threads(2)` at import, a habit of training
scripts, or in its forward) ran a `--threads 1` cell at 2 threads, labelled cpu:1, with nothing said: the worker sets
them back after the build and says so, and a cell whose threads were changed while it trained is said to have run at
that many. And a `foward` typo (torch's Module answers it with a NotImplementedError) was `unsupported`, exit 0: it is
the model failing, exit 1, in its plain fp32 cell."""

import json

import pytest

from conftest import dlperf, require

require("torch")

MODEL = """
import torch
import dlperf

torch.set_num_threads(2)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(x)


class SetsInForward(Net):
    def forward(self, x):
        torch.set_num_threads(2)
        return self.lin(x)


class Typo(Net):
    forward = torch.nn.Module.forward  # as a class whose `forward` is misspelt `foward`


def data(b, d):
    return torch.randn(b, 16, device=d), torch.randn(b, 16, device=d)


def make():
    return dlperf.user_workload("at-import", Net(), data, torch.nn.functional.mse_loss, batch_size=8)


def make_forward():
    return dlperf.user_workload("in-forward", SetsInForward(), data, torch.nn.functional.mse_loss, batch_size=8)


def make_typo():
    return dlperf.user_workload("typo", Typo(), data, torch.nn.functional.mse_loss, batch_size=8)
"""


@pytest.mark.slow
def test_threads_a_model_sets_are_set_back_or_said_and_a_missing_forward_fails(tmp_path):
    (tmp_path / "thr.py").write_text(MODEL)
    workloads = ",".join(f"{tmp_path / 'thr.py'}:{f}" for f in ("make", "make_forward", "make_typo"))
    done = dlperf("run", "--workloads", workloads, "--threads", "1", "--max-time", "0.3", "--min-time", "0.1",
                  "--no-predict", db=tmp_path / "t.db", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr  # the typo's cell failed
    exported = dlperf("export", "--format", "jsonl", db=tmp_path / "t.db")
    cells = {r["workload"]: r for r in map(json.loads, exported.stdout.splitlines())}
    built = "the model's own code set the framework's threads to 2 as it was built: set back to 1"
    assert built in cells["at-import"]["warnings"] and not any(
        "while it trained" in w for w in cells["at-import"]["warnings"]
    )
    assert any(w.startswith("the model's own code set the framework's threads to 2 while it trained")
               and w.endswith("it ran at that many, not 1") for w in cells["in-forward"]["warnings"])  # fmt: skip
    assert cells["typo"]["status"] == "failed" and "NotImplementedError" in cells["typo"]["error"]
