"""The memory trace's cache (predict/memory.py, predict/cache.py), on the parent's side: the probe child is replaced
by a fake that answers made-up traces (a refusal in the backend's own words), and every question it is asked is kept.
dlperf's refusal of a mode for a model (checkpoint on a model without an nn.Sequential of 3 or more modules) is kept as
the traces are, so a second `predict --memory` starts no child for it; a failure of this machine (out of its memory, a
crash, a timeout) is asked again."""

import pytest

from conftest import require
from dlperf import envs
from dlperf.answers import MemoryAnswer, MemoryTrace
from dlperf.errors import UsageError
from dlperf.predict import cache, count, memory
from dlperf.runner import probe
from dlperf.workloads import BUILTIN

W = BUILTIN["tiny-fcn-r"]


def refusal(name: str) -> str:
    """The probe child's refusal of checkpoint for the built-in network `name`, which has no nn.Sequential and no
    nn.ModuleList of blocks: the backend's own words (`frameworks/torch/memcount.py` answers its
    NotImplementedError's text), not a copy of them."""
    require("torch")
    from dlperf.frameworks.torch.recompute import refusal as refused

    return refused(name, None, user=False)


class FakeProbe:
    """What `probe.ask` would answer: a checkpoint mode refused (marked so), fp32 traced, bf16 out of memory."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []  # every (mode, batch) a child was asked
        self.fail: Exception | None = None

    def __call__(self, counter, request, python, timeout, timeout_flag=None, stopped=None):
        if self.fail is not None:
            raise self.fail
        traces = []
        for ask in request.requests:
            for b in ask.batches:
                self.asked.append((ask.mode, b))
                traces.append(self.trace(ask.workload["name"], ask.mode, b))
        return MemoryAnswer(traces)

    def trace(self, name: str, mode: str, batch: int) -> MemoryTrace:
        if "checkpoint" in mode:
            return MemoryTrace(batch, error=refusal(name), refused=True)
        if mode == "bf16":
            return MemoryTrace(batch, error="MemoryError: this machine ran out of memory building the model")
        return MemoryTrace(batch, peak=100 * batch + 1000, params=1000, optimizer=0, data=10 * batch, grads=0,
                           activations=90 * batch)  # fmt: skip


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(cache.BYPASS, raising=False)
    monkeypatch.setattr(envs, "interpreter_for", lambda counter: "python")
    monkeypatch.setattr(count, "torch_version", lambda counter, python: "2.13.0")
    child = FakeProbe()
    monkeypatch.setattr(probe, "ask", child)
    return child


def test_a_refused_mode_is_kept_so_the_second_trace_starts_no_child(fake):
    first = memory.lines([(W, "checkpoint"), (W, "fp32")], 60.0)
    assert first[0] == refusal(W.name) and isinstance(first[1], memory.Line)
    b = W.batch
    assert sorted(fake.asked) == [("checkpoint", b), ("checkpoint", 2 * b), ("fp32", b), ("fp32", 2 * b)]
    again = memory.lines([(W, "checkpoint"), (W, "fp32")], 60.0)
    assert len(fake.asked) == 4  # no child the second time: the refusal read back as the traces are
    assert again == first


def test_out_of_memory_here_is_not_kept_and_is_asked_again(fake):
    assert memory.peaks(W, ["bf16"], 60.0) == {}
    assert memory.peaks(W, ["bf16"], 60.0) == {}
    assert fake.asked == [("bf16", W.batch), ("bf16", W.batch)]


def test_a_child_that_failed_keeps_nothing(fake):
    fake.fail = UsageError("tracing the step's memory took longer than --timeout 60 s")
    with pytest.raises(UsageError):
        memory.peaks(W, ["checkpoint"], 60.0)
    fake.fail = None
    memory.peaks(W, ["checkpoint"], 60.0)
    assert fake.asked == [("checkpoint", W.batch)]


def test_the_refusal_is_kept_under_the_models_key_only(fake):
    memory.peaks(W, ["checkpoint"], 60.0)
    memory.peaks(BUILTIN["tiny-fcn-s"], ["checkpoint"], 60.0)  # another model: its own refusal, asked of a child
    memory.peaks(W, ["checkpoint"], 60.0)
    assert len(fake.asked) == 2
