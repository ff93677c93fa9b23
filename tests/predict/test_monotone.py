"""A GPU better on every figure is never predicted slower. Before, each SM streamed the GPU's bandwidth over its SM
count, so a batch norm of 16 channels took longer on a GPU with more SMs: the RTX 6000 Ada was predicted 23% slower
than the RTX 5080 on resnet-56 fp32, the L40S slower than the RTX 3080, 440 such pairs over the built-in workloads."""

from __future__ import annotations

import pytest

from dlperf.frameworks.common.ops import Count, Op
from dlperf.predict import gpus, roofline

EFF = roofline.EFFICIENCY
STEPS = (("resnet-56", ("fp32", "tf32", "bf16")), ("lstm", ("fp32", "bf16")), ("alexnet-s", ("fp32",)))


def figures(g: gpus.GPU) -> tuple[float, ...]:
    """Every figure of a GPU the model reads: each unit's peak per SM (what one SM computes: the clock times its
    lanes), the SMs (so each peak too), the memory bandwidth and the host link. A GPU with more SMs at the same peak
    has slower ones, and a kernel of fewer blocks than SMs runs at their rate: on a wave of few blocks such a GPU is
    slower, as it is on the chip (the B300's 75 TFLOP/s on more SMs than the B200's), so the peak per SM is a figure
    of its own here."""
    sms = roofline.sm_count(g)
    peaks = (g.peak("fp32", False)[0], g.peak("fp32", True)[0], g.peak("fp16", True)[0], g.peak("bf16", True)[0])
    return (*(p / sms for p in peaks), sms, g.memory_bw, g.host_link_bw)


def dominating() -> list[tuple[gpus.GPU, gpus.GPU]]:
    """(better, worse): each pair of the table's GPUs where the first is at least as good on every figure, and
    better on one."""
    table = {g.name: (g, figures(g)) for g in gpus.builtin()}
    return [(a, b) for a, fa in table.values() for b, fb in table.values()
            if fa != fb and all(x >= y for x, y in zip(fa, fb, strict=True))]  # fmt: skip


@pytest.fixture(scope="module")
def steps() -> list[Count]:
    from dlperf.predict import count as counting
    from dlperf.workloads import BUILTIN

    return counting.counted([(BUILTIN[w], m) for w, modes in STEPS for m in modes])


def test_no_gpu_better_on_every_figure_is_predicted_slower(steps):
    pairs = dominating()
    assert len(pairs) > 500  # the table's generations dominate each other widely
    names = {a.name for a, _ in pairs} | {b.name for _, b in pairs}
    assert {"L40S", "RTX 3080", "H200-SXM-141GB", "H100-SXM5-80GB"} <= names
    slower = []
    for count in steps:
        step = {g.name: roofline.predict(count, g).step_s for g in gpus.builtin()}
        slower += [f"{count.workload} {count.mode}: {a.name} {step[a.name]:.4g} s, {b.name} {step[b.name]:.4g} s"
                   for a, b in pairs if step[a.name] > step[b.name] * (1 + 1e-9)]  # fmt: skip
    assert not slower, f"{len(slower)} slower: {slower[:5]}"


def test_a_batch_norm_of_few_channels_is_no_slower_on_more_sms_or_more_bandwidth():
    """The QA's case in one kernel: the L40S as it is (142 SMs) and with the RTX 3080's 68, the same bandwidth."""
    l40s = gpus.lookup("L40S")
    fewer = gpus.GPU(**{**l40s.__dict__, "sm_count": 68})
    norm = Op("memory", "fp32", 0, 16 * 2**20, shape=(16, 2**18))
    time = lambda g: roofline.op_time(norm, g, "fp32")[1]  # noqa: E731
    assert time(l40s) == time(fewer)  # the SMs do not bound a memory kernel's blocks
    faster = gpus.GPU(**{**l40s.__dict__, "memory_bw": 10 * l40s.memory_bw})
    assert time(faster) <= time(l40s)
