"""The memory trace marks dlperf's refusal of a mode for a model (`refused`: the parent keeps it, predict/memory.py),
never a failure of the step or of this machine, which the parent asks again."""

from conftest import require

torch = require("torch")

from dlperf.answers import MemoryTrace  # noqa: E402
from dlperf.frameworks.torch import memcount  # noqa: E402
from dlperf.workloads import BUILTIN  # noqa: E402


def test_checkpoint_without_a_sequential_trunk_is_a_refusal_marked_so():
    [a, b] = memcount.memory_count(BUILTIN["tiny-fcn-r"], "bf16+checkpoint", [2, 4])
    assert a["refused"] is True and b["refused"] is True
    assert a["error"].startswith("checkpoint needs an nn.Sequential of 3 or more modules")
    assert MemoryTrace.from_json(a).refused is True  # as the parent reads it back, from the child or the cache


def test_a_traced_step_and_a_step_that_fails_are_no_refusal(monkeypatch):
    [ok] = memcount.memory_count(BUILTIN["tiny-fcn-r"], "fp32", [2])
    assert "refused" not in ok and ok["peak"] > 0

    def out_of_memory(*args, **kwargs):
        raise MemoryError("this machine ran out of memory")

    monkeypatch.setattr(memcount, "_built", out_of_memory)
    [failed] = memcount.memory_count(BUILTIN["tiny-fcn-s"], "fp32", [2])
    assert "MemoryError" in failed["error"] and "refused" not in failed
