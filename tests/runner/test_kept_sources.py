"""A cell's kept figures are of the user's files its process imported, not of the model's file alone
(runner/kept.py, worker/sources.py): a module the model imports from beside it (layers.py) edited, or gone, is
counted afresh; one only touched, or not changed at all, is taken; a process that did not say what it imported, or
one of whose files was written after it started, keeps nothing."""

import json
import os
import sys
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from conftest import FAST, dlperf, require
from dlperf import envs
from dlperf.protocol import Cell
from dlperf.runner import kept, probe_cache
from dlperf.runner.sweep import child_task
from dlperf.runner.tasks import Task
from dlperf.store import Store
from dlperf.store.process import ProcessDetail
from dlperf.worker import sources

CELL = Cell("mine", "torch", "cpu", 1, "fp32")
COUNTED = ProcessDetail(flops_per_step=840, flops_by_dtype={"fp32": 840}, memory={"live_tensor_peak_bytes": 2000})


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A DATA_DIR of the test's own, the cache on, and a model file that imports layers.py beside it, as its process
    imported them a while ago."""
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(kept.BYPASS, raising=False)
    monkeypatch.setattr(probe_cache, "framework_version", lambda framework, python: "2.13.0")
    monkeypatch.setattr(envs, "interpreter_for", lambda framework: "python")
    model, layers = tmp_path / "model.py", tmp_path / "layers.py"
    model.write_text("from layers import Block\n\ndef make(): ...\n")
    layers.write_text("DEPTH = 1\n")
    for path in (model, layers):
        os.utime(path, ns=(time.time_ns() - 60 * 10**9,) * 2)
    workload = {"name": "mine", "batch": 8, "source": f"{model}:make"}
    return SimpleNamespace(model=model, layers=layers, workload=workload, entry=kept.key(CELL, workload))


def keep(project, **changes) -> None:
    imported = {str(p): sources.described(str(p)) for p in (project.model, project.layers)}
    kept.keep(project.entry, replace(COUNTED, sources=imported, started_at=time.time(), **changes), "run 1 of a.db")


def asked(project) -> tuple[bool, bool]:
    spec = SimpleNamespace(loss_check=False, timer=None, nvtx=False, data=None, pin=False, max_memory=None)
    ctx = SimpleNamespace(store=SimpleNamespace(cells=lambda run_id: []), run_id=1, spec=spec,
                          workloads={CELL.key: dict(project.workload)})  # fmt: skip
    task = child_task(Task(CELL, 0), ctx)
    return task.count_flops, task.measure_memory


def test_a_neighbour_module_edited_is_counted_afresh(project):
    keep(project)
    assert asked(project) == (False, False)
    project.layers.write_text("DEPTH = 4\n")  # the same size: its time moved, and its bytes differ
    assert asked(project) == (True, True)
    assert kept.extras(project.entry) == (None, None)


def test_unchanged_neighbours_are_taken_even_touched(project):
    keep(project)
    assert asked(project) == (False, False)
    os.utime(project.layers)  # saved again as it was: its digest says it is the same
    assert asked(project) == (False, False)
    flops, memory = kept.extras(project.entry)
    assert flops["flops_per_step"] == 840 and memory["figures"] == {"live_tensor_peak_bytes": 2000}


def test_a_neighbour_module_gone_is_counted_afresh(project):
    keep(project)
    project.layers.unlink()
    assert asked(project) == (True, True)


def test_nothing_is_kept_without_the_files_the_process_imported(project):
    """An entry written by a process that did not say (too many files, or it died before), or one written before
    the files were kept with it, is no figure of this model."""
    kept.keep(project.entry, replace(COUNTED, sources=None, started_at=time.time()), "run 1 of a.db")
    assert kept.extras(project.entry) == (None, None)
    kept.write(kept.directory(), project.entry, "flops", {"flops_per_step": 840, "from": "run 1 of a.db"})
    assert kept.extras(project.entry) == (None, None)


def test_a_neighbour_written_after_its_process_started_is_not_kept(project):
    """layers.py edited while the process ran: what the process read of it may not be what it imported."""
    os.utime(project.layers, ns=(time.time_ns() + 5 * 10**9,) * 2)
    keep(project)
    assert kept.extras(project.entry) == (None, None)


def test_the_worker_names_the_users_modules_not_the_installed_ones(tmp_path, monkeypatch):
    (tmp_path / "h122_layers.py").write_text("WIDTH = 3\n")
    (tmp_path / "h122_pkg").mkdir()
    (tmp_path / "h122_pkg" / "__init__.py").write_text("")
    (tmp_path / "h122_pkg" / "blocks.py").write_text("DEPTH = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("h122_layers", "h122_pkg", "h122_pkg.blocks"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import h122_layers  # noqa: F401
    import h122_pkg.blocks  # noqa: F401

    found = sources.imported()
    mine = {str(tmp_path / n) for n in ("h122_layers.py", "h122_pkg/__init__.py", "h122_pkg/blocks.py")}
    assert mine <= set(found)
    size, mtime_ns, digest = found[str(tmp_path / "h122_layers.py")]
    assert (size, mtime_ns) == (10, os.stat(tmp_path / "h122_layers.py").st_mtime_ns) and len(digest) == 64
    assert json.__file__ not in found  # the standard library's
    assert pytest.__file__ not in found  # an installed package's
    assert kept.__file__ not in found  # dlperf's own


def test_a_lazily_imported_module_is_named_without_importing_it(tmp_path, monkeypatch):
    """A module in sys.modules under importlib's LazyLoader (the lazy_loader package of scikit-image and others puts
    them there) runs its import at any attribute asked: the worker's getattr(module, "__file__") ran it, and one whose
    import fails (an optional dependency missing) failed the cell once its steps were timed, or the predictor's probe.
    Its file is named, its import left for when the model asks."""
    import importlib.util

    ran = tmp_path / "ran"
    (tmp_path / "h142_lazy.py").write_text(f"open({str(ran)!r}, 'w').close()\nraise ImportError('pooch missing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.find_spec("h142_lazy")
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "h142_lazy", module)
    spec.loader.exec_module(module)  # as lazy_loader.load does: nothing runs until an attribute is asked

    assert str(tmp_path / "h142_lazy.py") in sources.imported()
    assert not ran.exists()


def test_past_so_many_files_the_worker_says_none(monkeypatch):
    monkeypatch.setattr(sources, "MAX_FILES", 0)
    monkeypatch.setitem(sys.modules, "h122_fake", SimpleNamespace(__file__=__file__))
    assert sources.imported() is None


@pytest.mark.slow
def test_a_run_after_its_models_layers_changed_counts_them_again(tmp_path):
    """End to end: model.py imports layers.py beside it; a second run with layers.py's hidden layer applied four
    times (the same parameters) counts four times the hidden layer's FLOPs, where it took the first run's before."""
    require("torch")
    (tmp_path / "layers.py").write_text(LAYERS)
    (tmp_path / "model.py").write_text(MODEL)
    env = {"DLPERF_DATA_DIR": str(tmp_path / "data"), kept.BYPASS: ""}
    db, source = tmp_path / "a.db", f"{tmp_path / 'model.py'}:make"
    for depth in (1, 1, 4):
        (tmp_path / "layers.py").write_text(LAYERS.replace("DEPTH = 1", f"DEPTH = {depth}"))
        done = dlperf("run", "--workloads", source, "--threads", "1", *FAST, db=db, env=env)
        assert done.returncode == 0, done.stderr
    store = Store.open(db, create=False)
    first, again, deeper = [store.cells(r.id)[0] for r in sorted(store.runs(), key=lambda r: r.id)]
    assert again.shared_from == {"flops": f"cached from run 1 of {db}", "memory": f"cached from run 1 of {db}"}
    assert again.flops_per_step == first.flops_per_step
    assert deeper.shared_from == {} and deeper.flops_per_step > first.flops_per_step


LAYERS = """import torch

DEPTH = 1


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.a, self.h, self.b = torch.nn.Linear(d, 64), torch.nn.Linear(64, 64), torch.nn.Linear(64, d)

    def forward(self, x):
        x = torch.relu(self.a(x))
        for _ in range(DEPTH):
            x = torch.relu(self.h(x))
        return self.b(x)
"""
MODEL = """import torch
import dlperf
from layers import Block


def make_batch(batch_size, device):
    return torch.randn(batch_size, 16, device=device), torch.randint(0, 10, (batch_size,), device=device)


def make():
    model = torch.nn.Sequential(Block(16), torch.nn.Linear(16, 10))
    return dlperf.user_workload("h122-net", model, make_batch, torch.nn.functional.cross_entropy, batch_size=8)
"""
