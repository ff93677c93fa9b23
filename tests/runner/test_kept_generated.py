"""The modules a child writes and imports itself, in its own temporary folder (TensorFlow's AutoGraph converts each
traced function into a .py file there, TorchInductor its compiled code), are not the user's files its figures were
counted from (worker/sources.py): listed, each was written after the process started, so `kept.keep` kept nothing,
and no TensorFlow cell's, nor a compiled one's, FLOPs and step memory were ever taken by the next run."""

import importlib.util
import sys

import pytest

from conftest import FAST, dlperf, require
from dlperf.runner import kept
from dlperf.store import Store
from dlperf.worker import sources


def test_a_module_written_in_the_childs_own_folder_is_not_the_users(tmp_path, monkeypatch):
    scratch, mine = tmp_path / "dlperf-1-cell-x", tmp_path / "h131_layers.py"
    scratch.mkdir()
    generated = scratch / "__autograph_generated_file1.py"
    for path in (generated, mine):
        path.write_text("X = 1\n")
    for name, path in (("h131_generated", generated), ("h131_layers", mine)):  # as AutoGraph's loader imports
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        monkeypatch.setitem(sys.modules, name, module)

    found = sources.imported(str(scratch))
    assert str(mine) in found and str(generated) not in found
    assert str(generated) in sources.imported()  # outside a child's folder, a file of /tmp may be the user's


@pytest.mark.slow
def test_a_model_whose_step_writes_and_imports_code_has_its_figures_kept(tmp_path):
    """End to end: the model's first forward writes a module into its temporary folder and imports it (as AutoGraph
    does); the second run takes the first one's FLOPs and memory, where it counted them again."""
    require("torch")
    (tmp_path / "model.py").write_text(MODEL)
    env = {"DLPERF_DATA_DIR": str(tmp_path / "data"), kept.BYPASS: ""}
    db, source = tmp_path / "a.db", f"{tmp_path / 'model.py'}:make"
    for _ in range(2):
        done = dlperf("run", "--workloads", source, "--threads", "1", *FAST, db=db, env=env)
        assert done.returncode == 0, done.stderr
    store = Store.open(db, create=False)
    first, again = [store.cells(r.id)[0] for r in sorted(store.runs(), key=lambda r: r.id)]
    assert again.shared_from == {"flops": f"cached from run 1 of {db}", "memory": f"cached from run 1 of {db}"}
    assert again.flops_per_step == first.flops_per_step


MODEL = """import importlib.util
import os
import sys
import tempfile

import torch
import dlperf


class Generated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 10)

    def forward(self, x):
        if "h131_generated" not in sys.modules:
            path = os.path.join(tempfile.gettempdir(), "__autograph_generated_file_h131.py")
            with open(path, "w") as f:
                f.write("SCALE = 1.0\\n")
            spec = importlib.util.spec_from_file_location("h131_generated", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules["h131_generated"] = module
        return self.a(x) * sys.modules["h131_generated"].SCALE


def make_batch(batch_size, device):
    return torch.randn(batch_size, 16, device=device), torch.randint(0, 10, (batch_size,), device=device)


def make():
    return dlperf.user_workload("h131-net", Generated(), make_batch, torch.nn.functional.cross_entropy, batch_size=8)
"""
