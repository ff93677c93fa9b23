"""A user model whose weights and gradients alone outgrow this machine's memory is refused on the CPU in one line
before anything runs: its processes built it for real (a 100-billion-parameter model), until out of memory."""

from dataclasses import replace

import pytest

from dlperf.errors import UsageError
from dlperf.measure import system
from dlperf.plan.workloads import check_room
from dlperf.workloads import BUILTIN

GIB = 2**30


def test_a_model_too_large_for_this_machine_is_refused_naming_what_it_needs(monkeypatch):
    monkeypatch.setattr(system, "memory_total_bytes", lambda: 24 * GIB)
    huge = replace(BUILTIN["fcn-r"], name="huge", source="/m/zoo.py:make_huge", params=100_002_000_000)
    with pytest.raises(UsageError) as caught:
        check_room({"zoo.py:make_huge": huge}, ["cpu"])
    assert str(caught.value) == (
        "huge: its 100,002,000,000 parameters need 745.1 GiB for their fp32 weights and gradients alone, more than "
        "this machine's 24.0 GiB: it cannot train on this CPU (dlperf predict /m/zoo.py:make_huge --memory --gpu "
        "H200-SXM-141GB says whether a GPU holds it)"
    )
    check_room({"zoo.py:make_huge": huge}, ["cuda:0"])  # a GPU's own memory: not this check's
    check_room({"fcn-r": replace(BUILTIN["fcn-r"], params=10**12)}, ["cpu"])  # a built-in is known to fit
    check_room({"m": replace(huge, params=2 * 10**9)}, ["cpu"])  # 14.9 GiB: left to the cells


def test_a_model_of_bf16_parameters_is_counted_at_their_size_not_fp32s(monkeypatch):
    """The check took every parameter for fp32: a bf16 model of 1.6 billion (6 GiB of weights and gradients) was
    refused on a machine of 10 GiB as needing 11.9 GiB."""
    monkeypatch.setattr(system, "memory_total_bytes", lambda: 10 * GIB)
    bf16 = replace(BUILTIN["fcn-r"], name="half", source="/m/h.py:make", params=1_600_000_000,
                   extra={"param_bytes": 3_200_000_000})  # fmt: skip
    check_room({"h.py:make": bf16}, ["cpu"])  # 5.96 GiB
    with pytest.raises(UsageError, match=r"need 11\.9 GiB for their weights and gradients alone"):
        check_room({"h.py:make": replace(bf16, extra={"param_bytes": 6_400_000_000})}, ["cpu"])  # fp32 weights
