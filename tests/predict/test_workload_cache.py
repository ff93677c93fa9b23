"""A warm `dlperf predict FILE.py:FACTORY` started the probe child that describes the user's model every time (its
name, batch, input shape, parameters), though the description of an unchanged file is the same: it is kept in the
count's cache under the file's bytes and the factory's name (`predict/workload.py`), so a warm predict starts no
child. A factory that fails is asked again, and so is a changed file, another factory, a module path or --no-cache."""

import textwrap

import pytest

from dlperf.answers import WorkloadAnswer
from dlperf.errors import UsageError
from dlperf.predict import cache, count, workload
from dlperf.worker import sources
from dlperf.workloads import BUILTIN

MODEL = textwrap.dedent(
    """
    import torch
    from torch import nn

    import dlperf


    def make_batch(batch_size, device):
        return torch.randn(batch_size, 6, device=device), torch.randint(0, 2, (batch_size,), device=device)


    def make():
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
        return dlperf.user_workload("two-layers", model, make_batch, nn.functional.cross_entropy, batch_size=4)


    def other():
        return dlperf.user_workload("other-two", nn.Linear(6, 2), make_batch, nn.functional.cross_entropy, batch_size=4)
    """
)


class Describing:
    """What `probe.ask` would answer for a user's workload; every request it is asked is kept."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, framework, request, python, timeout, timeout_flag=None, stopped=None):
        self.asked.append(request.source)
        if request.source.endswith(":broken"):
            raise UsageError(f"workload {request.source!r}: no function 'broken' in it")
        name = "other-two" if request.source.endswith(":other") else "two-layers"
        path = request.source.rpartition(":")[0]  # the user's file the child imported, as `worker/sources.py` says
        imported = {path: sources.described(path)} if path.endswith(".py") else {}
        return WorkloadAnswer(name, "torch", 90, 4, None, [6], "float32", sources=imported)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A data folder of the test's own, the cache on, the probe `Describing`, and the model's file written."""
    (tmp_path / "model.py").write_text(MODEL)
    probe = Describing()
    monkeypatch.setattr(workload.probe, "ask", probe)
    monkeypatch.setattr(count, "torch_version", lambda counter, python: "2.13.0")
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(cache.BYPASS, raising=False)
    return probe


def test_an_unchanged_file_is_described_once(fake, tmp_path):
    source = f"{tmp_path / 'model.py'}:make"
    first = workload.resolve(source, 60.0)
    assert first.name == "two-layers" and first.params == 90 and first.input.shape == (6,) and first.source == source
    assert workload.resolve(source, 60.0) == first and fake.asked == [source]  # warm: no child
    assert workload.resolve(f"{source}@b32", 60.0).batch == 32 and fake.asked == [source]  # a batch variant too


def test_another_factory_or_a_changed_file_is_described_again(fake, tmp_path):
    path = tmp_path / "model.py"
    workload.resolve(f"{path}:make", 60.0)
    assert workload.resolve(f"{path}:other", 60.0).name == "other-two"  # the factory's name is in the key
    path.write_text(MODEL + "\n# changed\n")
    workload.resolve(f"{path}:make", 60.0)
    assert fake.asked == [f"{path}:make", f"{path}:other", f"{path}:make"]


def test_a_failed_factory_a_module_path_and_no_cache_are_asked_every_time(fake, tmp_path, monkeypatch):
    broken = f"{tmp_path / 'model.py'}:broken"
    for _ in range(2):
        with pytest.raises(UsageError, match="no function 'broken'"):
            workload.resolve(broken, 60.0)
    workload.resolve("my_package.model:make", 60.0)  # its source is not read without importing it
    workload.resolve("my_package.model:make", 60.0)
    monkeypatch.setenv(cache.BYPASS, "1")
    made = f"{tmp_path / 'model.py'}:make"
    workload.resolve(made, 60.0)
    workload.resolve(made, 60.0)
    assert fake.asked == [broken, broken, "my_package.model:make", "my_package.model:make", made, made]
    assert not cache.directory().exists() or not list(cache.directory().iterdir())  # nothing kept


def test_a_damaged_entry_is_asked_again_and_written_over(fake, tmp_path):
    source = f"{tmp_path / 'model.py'}:make"
    workload.resolve(source, 60.0)
    (entry,) = cache.directory().glob("*.workload.json")
    entry.write_text(entry.read_text().replace('"params"', '"parameters"'))
    assert workload.resolve(source, 60.0).params == 90 and len(fake.asked) == 2
    assert workload.resolve(source, 60.0).params == 90 and len(fake.asked) == 2  # written over


def test_a_built_in_workload_starts_nothing(fake):
    assert workload.resolve("tiny-fcn-r", 60.0) is BUILTIN["tiny-fcn-r"] and fake.asked == []


@pytest.mark.slow
def test_a_warm_predict_of_a_users_file_starts_no_child(tmp_path, monkeypatch, capsys):
    """The real command, its launcher counting the children it starts: cold, the description, the count and the
    memory trace; warm, none, and the same table."""
    from dlperf.cli import main
    from dlperf.runner import launch

    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(cache.BYPASS, raising=False)
    (tmp_path / "model.py").write_text(MODEL)
    started, real = [], launch.launch
    monkeypatch.setattr(launch, "launch", lambda task, *a, **k: started.append(task) or real(task, *a, **k))
    printed = []
    for _ in range(2):
        assert main(["predict", f"{tmp_path / 'model.py'}:make", "--gpu", "T4", "--modes", "fp32"]) == 0
        printed.append(capsys.readouterr().out)
    kinds = [type(t.request).__name__ for t in started]
    assert kinds == ["WorkloadRequest", "OpsRequest", "MemoryRequest"], kinds  # all from the cold run
    assert printed[0] == printed[1] and "two-layers at batch 4" in printed[0]
