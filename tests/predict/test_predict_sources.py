"""`dlperf predict`'s kept answers (the model's description, its operator counts, its memory traces: predict/cache.py)
are of the user's files the child imported, not of the model's file alone, as a run's kept figures are
(runner/kept.py, worker/sources.py): model.py importing layers.py beside it, layers.py's hidden layer applied 4 times
instead of once (the same size, the same parameters), and the next predict took the first one's count. A neighbour
edited or gone is asked again; one only touched, or unchanged, is taken; an answer that does not say what its child
imported, or one of whose files was written after the child was asked, is not kept."""

import os
import sys
import time
from types import SimpleNamespace

import pytest

from conftest import dlperf, require
from dlperf import envs
from dlperf.answers import MemoryAnswer, MemoryTrace, OpCount, OpsAnswer, OpsRequest, WorkloadAnswer
from dlperf.predict import cache, count, memory, workload
from dlperf.worker import probe as probe_child
from dlperf.worker import sources
from dlperf.workloads import BUILTIN

W = BUILTIN["tiny-fcn-r"]


class Child:
    """What the probe child answers (a description, a count, a trace), saying it imported `imported` (None: it did
    not say); every request it is asked is kept."""

    def __init__(self, files) -> None:
        self.files, self.asked = files, []
        self.imported = lambda: {str(p): sources.described(str(p)) for p in self.files}

    def __call__(self, framework, request, python, timeout, timeout_flag=None, stopped=None):
        self.asked.append(type(request).__name__)
        said = self.imported() if self.imported is not None else None
        if isinstance(request, OpsRequest):
            return OpsAnswer([OpCount("mine", r.mode, r.batch, ops=[], input_bytes=8, params=90)
                              for r in request.requests], said)  # fmt: skip
        if hasattr(request, "requests"):
            return MemoryAnswer([MemoryTrace(b, peak=100, params=10, optimizer=0, data=10, grads=0, activations=80)
                                 for a in request.requests for b in a.batches], said)  # fmt: skip
        return WorkloadAnswer("mine", "torch", 90, 4, None, [6], "float32", sources=said)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A data folder of the test's own, the cache on, a model file importing layers.py beside it (both written a
    while ago), and the probe child replaced by `Child`."""
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(cache.BYPASS, raising=False)
    monkeypatch.setattr(count, "torch_version", lambda counter, python: "2.13.0")
    monkeypatch.setattr(envs, "interpreter_for", lambda framework: "python")
    monkeypatch.setattr(count, "interpreter_for", lambda framework: "python")
    files = {"model.py": "from layers import Block\n\ndef make(): ...\n", "layers.py": "DEPTH = 1\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        os.utime(tmp_path / name, ns=(time.time_ns() - 60 * 10**9,) * 2)  # written a while ago
    model, layers = tmp_path / "model.py", tmp_path / "layers.py"
    child = Child([model, layers])
    monkeypatch.setattr(count.probe, "ask", child)
    source = f"{model}:make"
    mine = type(W)(**{**W.__dict__, "name": "mine", "arch": "user", "source": source})
    return SimpleNamespace(layers=layers, child=child, source=source, mine=mine)


def predicted(project) -> list[str]:
    """What a predict asks its children for: the description, the count, the memory trace."""
    before = len(project.child.asked)
    workload.resolve(project.source, 60.0)
    count.counts([(project.mine, "fp32")])
    memory.traces([(project.mine, "fp32", 8)], 60.0)
    return project.child.asked[before:]


ALL = ["WorkloadRequest", "OpsRequest", "MemoryRequest"]


def test_a_neighbour_module_edited_is_asked_again(project):
    assert predicted(project) == ALL
    assert predicted(project) == []  # warm: no child
    project.layers.write_text("DEPTH = 4\n")  # the same size: its time moved, and its bytes differ
    assert predicted(project) == ALL
    assert predicted(project) == []


def test_a_neighbour_touched_but_unchanged_is_taken(project):
    predicted(project)
    os.utime(project.layers)  # saved again as it was: its digest says it is the same
    assert predicted(project) == []


def test_a_neighbour_gone_is_asked_again(project):
    predicted(project)
    project.layers.unlink()
    assert predicted(project) == ALL


def test_an_answer_that_does_not_say_what_it_imported_is_not_kept(project):
    project.child.imported = None
    predicted(project)
    assert predicted(project) == ALL
    assert not list(cache.directory().glob("*.json"))


def test_a_neighbour_written_after_the_child_was_asked_is_not_kept(project):
    """layers.py edited while the child ran: what it imported may not be what its digest says."""
    os.utime(project.layers, ns=(time.time_ns() + 5 * 10**9,) * 2)
    predicted(project)
    assert predicted(project) == ALL


def test_a_built_in_workloads_count_is_kept_without_files(project):
    project.child.imported = lambda: {}
    count.counts([(count.at(W, 8), "fp32")])
    count.counts([(count.at(W, 8), "fp32")])
    assert project.child.asked == ["OpsRequest"]


def test_the_probe_child_says_which_of_the_users_files_it_imported(tmp_path, monkeypatch):
    """worker/probe.py: a count, a trace, a description carry `sources.imported()`; other answers do not."""
    (tmp_path / "h127_layers.py").write_text("DEPTH = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "h127_layers", raising=False)
    import h127_layers  # noqa: F401

    fake = SimpleNamespace(probe=lambda request: {"counts": []})
    monkeypatch.setattr("dlperf.frameworks.backend", lambda framework: fake)
    found = probe_child.respond("torch", OpsRequest([]))
    assert found.sources[str(tmp_path / "h127_layers.py")] == sources.described(str(tmp_path / "h127_layers.py"))


@pytest.mark.slow
def test_a_predict_after_its_models_layers_changed_counts_them_again(tmp_path):
    """End to end: model.py imports layers.py beside it; a predict with layers.py's hidden layer applied four times
    (the same parameters) counts four times the hidden layer's FLOPs, where it took the first predict's before."""
    require("torch")
    from runner.test_kept_sources import LAYERS, MODEL

    (tmp_path / "model.py").write_text(MODEL)
    env = {"DLPERF_DATA_DIR": str(tmp_path / "data"), cache.BYPASS: "", "COLUMNS": "200"}
    said = []
    for depth in (1, 1, 4):
        (tmp_path / "layers.py").write_text(LAYERS.replace("DEPTH = 1", f"DEPTH = {depth}"))
        done = dlperf("predict", f"{tmp_path / 'model.py'}:make", "--gpu", "T4", "--modes", "fp32", env=env)
        assert done.returncode == 0, done.stderr
        said.append(next(line for line in done.stdout.splitlines() if "GFLOP" in line))
    assert said[0] == said[1] and said[2] != said[0]
