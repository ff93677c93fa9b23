"""The operator count's cache keeps a limit of the count (the child's `refused`: a model whose step reads a tensor's
value, an operator without a fake kernel), as it keeps counts, so a warm `dlperf predict` of such a model starts no
child; the model's own error and a failure of this machine (out of its memory, a crash, a timeout) are asked again.
The probe child is replaced by a fake, and every request it is asked is kept."""

import json

import pytest

from dlperf.answers import OpCount, OpsAnswer
from dlperf.errors import UsageError
from dlperf.predict import cache, count
from dlperf.workloads import BUILTIN

W = BUILTIN["tiny-fcn-r"]

VALUE_READ = "its step reads a tensor's value (.item(), float(), a Python `if` on a tensor), which fake tensors lack"
OUT_OF_MEMORY = "MemoryError: this machine ran out of memory"


class Refusing:
    """What `probe.ask` would answer: bf16 refused (a limit of the count), fp16 out of this machine's memory, fp32
    counted (one made-up kernel)."""

    def __init__(self) -> None:
        self.asked: list = []  # every OpRequest, in order

    def __call__(self, counter, request, python, timeout, timeout_flag=None, stopped=None):
        self.asked.extend(request.requests)
        return OpsAnswer([self.answer(r) for r in request.requests])

    def answer(self, r) -> OpCount:
        name = r.workload["name"]
        if r.mode == "bf16":
            return OpCount(name, r.mode, r.batch, error=VALUE_READ, refused=True)
        if r.mode == "fp16":
            return OpCount(name, r.mode, r.batch, error=OUT_OF_MEMORY)
        op = {"kind": "memory", "dtype": "fp32", "flops": 0, "bytes": 8 * r.batch, "launches": 1, "phase": "forward"}
        return OpCount(name, r.mode, r.batch, ops=[op], input_bytes=4 * r.batch, params=100)


def at(*batches, mode="fp32", workload=W):
    return [(count.at(workload, b), mode) for b in batches]


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(cache.BYPASS, raising=False)
    monkeypatch.setattr(count, "torch_version", lambda counter, python: "2.13.0")
    monkeypatch.setattr(count, "children", lambda requests, params: 1)
    probe = Refusing()
    monkeypatch.setattr(count.probe, "ask", probe)
    return probe


def test_a_refusal_is_kept_so_the_second_count_starts_no_child(fake):
    first = count.counts(at(8, mode="bf16") + at(8))
    assert first[0] == VALUE_READ and not isinstance(first[1], str) and len(fake.asked) == 2
    again = count.counts(at(8, mode="bf16") + at(8))
    assert len(fake.asked) == 2 and again == first  # no child the second time
    with pytest.raises(UsageError, match="its operators cannot be counted: its step reads a tensor's value"):
        count.counted(at(8, mode="bf16"))  # predict, crossover, advise: the same one line, from the cache
    assert len(fake.asked) == 2


def test_a_refused_fit_keeps_each_batch_it_asked(fake):
    """Many batches: the fit refused, then each batch it left (also refused); all read back the second time."""
    first = count.counts(at(2, 4, 8, 16, mode="bf16"))
    assert first == [VALUE_READ] * 4
    asked = len(fake.asked)
    assert count.counts(at(2, 4, 8, 16, mode="bf16")) == first and len(fake.asked) == asked


def test_out_of_memory_here_is_not_kept_and_is_asked_again(fake):
    assert count.counts(at(8, mode="fp16")) == [OUT_OF_MEMORY]
    assert count.counts(at(8, mode="fp16")) == [OUT_OF_MEMORY]
    assert [(r.mode, r.batch) for r in fake.asked] == [("fp16", 8), ("fp16", 8)]


def test_a_child_that_failed_keeps_nothing(fake, monkeypatch):
    def crashed(*args, **kwargs):
        raise UsageError("counting the step's operators took longer than --timeout 60 s")

    monkeypatch.setattr(count.probe, "ask", crashed)
    with pytest.raises(UsageError):
        count.counts(at(8, mode="bf16"))
    monkeypatch.setattr(count.probe, "ask", fake)
    count.counts(at(8, mode="bf16"))
    assert len(fake.asked) == 1


def test_a_refusal_kept_for_another_batch_or_model_is_not_taken(fake):
    count.counts(at(8, mode="bf16"))
    count.counts(at(4, mode="bf16"))  # another batch: asked
    other = type(at(8)[0][0])(**{**at(8)[0][0].__dict__, "name": "other", "config": {"hidden": 3}})
    count.counts([(other, "bf16")])  # another model: its own key
    assert [r.batch for r in fake.asked] == [8, 4, 8]


@pytest.mark.parametrize("value", [{"refused": True}, {"error": VALUE_READ}, {"error": 3, "refused": True},
                                   {"error": VALUE_READ, "refused": True, "batch": 4}])  # fmt: skip
def test_a_damaged_or_unmarked_refusal_is_asked_again(fake, value):
    count.counts(at(8, mode="bf16"))
    (entry,) = cache.directory().glob("*.json")
    payload = json.loads(entry.read_text())
    payload["value"] = {"workload": "tiny-fcn-r", "mode": "bf16", "batch": 8, **value}
    entry.write_text(json.dumps(payload))
    assert count.counts(at(8, mode="bf16")) == [VALUE_READ] and len(fake.asked) == 2
    assert json.loads(entry.read_text())["value"]["refused"] is True  # written over
