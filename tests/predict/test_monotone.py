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


def test_tf32_is_never_predicted_slower_than_fp32_on_the_same_gpu(steps):
    """tf32 allows TF32 and forbids none of FP32's kernels. Before, a GPU whose dense TF32 peak is its FP32 peak (RTX
    3090, A10G, L40: 7 of the table) ran tf32 at the tensor efficiency, below FP32's: resnet-50 on an RTX 3090 was
    predicted 46.5 ms in fp32 and 49.0 ms in tf32, beside a note that a TF32 run can be faster."""
    by_mode = {c.mode: c for c in steps if c.workload == "resnet-56"}
    for g in gpus.builtin():
        fp32, tf32 = (roofline.predict(by_mode[m], g).step_s for m in ("fp32", "tf32"))
        assert tf32 <= fp32, g.name
        if g.tf32 is None or g.tf32 <= g.fp32:
            assert tf32 == pytest.approx(fp32), g.name  # no faster unit: the same step
