"""The roofline: one operator bound by compute, memory or its launch; a step by its sum, or by the host."""

import pytest

from dlperf.frameworks.common.ops import Count, Op
from dlperf.predict import roofline
from dlperf.predict.gpus import lookup

EFF = roofline.EFFICIENCY
H100, T4 = lookup("H100-SXM5-80GB"), lookup("T4")


def count(*ops, mode="fp32", input_bytes=0, batch=8):
    return Count("w", mode, batch, tuple(ops), input_bytes, 1000)


def gemm(n, dtype="fp32", **kw):
    size = {"fp32": 4, "bf16": 2, "fp16": 2}[dtype]
    return Op("matmul", dtype, 2 * n**3, 3 * n * n * size, **kw)


def test_a_large_gemm_runs_at_peak_times_efficiency():
    p = roofline.predict(count(gemm(8192)), H100)
    assert p.bound == "compute"
    # peak x efficiency, plus the one kernel's fixed cost
    assert p.device_s == pytest.approx(2 * 8192**3 / (H100.fp32 * EFF.fp32) + EFF.kernel_s)
    tf32 = roofline.predict(count(gemm(8192), mode="tf32"), H100)
    assert tf32.device_s == pytest.approx(2 * 8192**3 / (H100.tf32 * EFF.tensor) + EFF.kernel_s)
    half = roofline.predict(count(gemm(8192, "bf16"), mode="bf16"), H100)
    assert half.device_s == pytest.approx(2 * 8192**3 / (H100.bf16 * EFF.tensor) + EFF.kernel_s)
    assert half.device_s == pytest.approx(2 * 8192**3 / (H100.bf16 * EFF.tensor), rel=0.02)  # close to peak x eff


def test_a_convolution_reaches_a_fraction_of_a_product_of_the_same_work():
    conv = Op("conv", "fp32", 2 * 8192**3, 3 * 8192 * 8192 * 4)
    ratio = roofline.predict(count(conv), H100).device_s / roofline.predict(count(gemm(8192)), H100).device_s
    assert ratio == pytest.approx(1 / EFF.conv, rel=0.02)


def test_an_elementwise_kernel_over_a_large_tensor_is_memory_bound():
    op = Op("memory", "fp32", 0, 2 * 2**30)
    p = roofline.predict(count(op), H100)
    assert p.bound == "memory"
    assert p.device_s == pytest.approx(2 * 2**30 / (H100.memory_bw * EFF.memory) + EFF.kernel_s)


def test_a_tiny_model_is_launch_bound_and_takes_its_issuing_time():
    ops = (gemm(16, calls=30), Op("memory", "fp32", 0, 1024, calls=70))
    p = roofline.predict(count(*ops), H100)
    assert p.bound == "launch" and p.kernels == 100
    assert p.device_s == pytest.approx(100 * max(EFF.host_s, EFF.kernel_s), rel=0.05)


def test_an_op_fused_into_the_kernel_before_it_costs_nothing_of_its_own():
    fused = Op("memory", "fp32", 0, 2**30, launches=0, calls=64)
    alone, with_fused = roofline.predict(count(gemm(2048)), H100), roofline.predict(count(gemm(2048), fused), H100)
    assert with_fused.kernels == alone.kernels == 1 and with_fused.device_s == alone.device_s


def test_the_batch_crosses_the_host_link_unless_it_is_made_on_the_gpu():
    c = count(gemm(1024), input_bytes=10**9)
    p = roofline.predict(c, T4)
    assert p.transfer_s == pytest.approx(1e9 / (T4.host_link_bw * EFF.link))
    assert p.step_s == pytest.approx(p.device_s + p.transfer_s)
    assert roofline.predict(c, T4, transfer=False).transfer_s == 0


def test_phases_leave_the_optimizer_out_and_a_slower_gpu_is_slower():
    ops = (gemm(4096), gemm(4096, phase="backward", calls=2), Op("memory", "fp32", 0, 10**9, phase="optimizer"))
    whole = roofline.predict(count(*ops), T4)
    fwd_bwd = roofline.predict(count(*ops), T4, phases=("forward", "backward"))
    assert fwd_bwd.device_s < whole.device_s
    assert roofline.predict(count(*ops), H100).device_s < whole.device_s / 5


def test_an_op_of_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind"):
        Op("gemm", "fp32", 1, 1)
