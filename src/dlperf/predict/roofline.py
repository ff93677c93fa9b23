"""A training step's time on a GPU from its counted operators and the GPU's published figures.

The method, per operator call (one `Op`):
- its compute time: FLOPs / (the peak of the unit it runs on x that kind's efficiency): FP32 products on the CUDA
  cores, TF32 and half products on the tensor cores (`GPU.peak`), each unit with its own fitted efficiency, and
  convolutions a fitted fraction of what a matrix product of the same work reaches;
- its memory time: bytes read and written / (memory bandwidth x a fitted efficiency);
- the call takes the larger of the two (a roofline), plus a fixed cost per kernel (launch latency, the tail of a
  kernel too small to fill the GPU): small operators are bound by it; an element-wise op fused into the kernel
  before it (`launches == 0`: a cuDNN RNN step's gate math) costs nothing of its own;
- the host issues kernels asynchronously, at a fitted cost per kernel: when issuing takes longer than the GPU's work
  the step is launch-bound and takes the issuing time;
- the batch's inputs and targets cross the host link (pinned, at a fitted fraction of its bandwidth) once a step.

The efficiencies are general, never per model or per GPU: `benchmarks/predict_fit.py` fits them on the published
measurements dlperf ships (dlperf/data/gpu_dev.csv) and prints the validation figures written in `FIT` below.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlperf.frameworks.common.ops import Count, Op
from dlperf.predict.gpus import GPU

MODES = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class Efficiency:
    """The fitted constants: fractions of the published peaks reached, and fixed costs in seconds."""

    fp32: float  # a large FP32 matrix product on the CUDA cores
    tensor: float  # a large TF32/FP16/BF16 matrix product on the tensor cores
    conv: float  # a convolution, relative to a matrix product of the same work on the same unit
    memory: float  # a memory-bound kernel, of the memory bandwidth
    kernel_s: float  # per kernel on the GPU: launch latency and a kernel's ramp and tail
    host_s: float  # per kernel on the host: the framework's dispatch, eager PyTorch
    link: float  # the batch's copy, of the host link's bandwidth


# Fitted by benchmarks/predict_fit.py on dlperf/data/gpu_dev.csv (see BENCHMARKS.md); the validation figures
# beside them are that fit's, and give the uncertainty every prediction prints.
# A convolution's efficiency above 1 is real: cuDNN's Winograd and FFT algorithms do fewer multiplications than the
# direct convolution's FLOPs counted here. The fixed costs trade off against each other (the fit is flat between a
# GPU-side and a host-side cost per kernel); bounded to physical ranges, the GPU side takes it.
EFFICIENCY = Efficiency(fp32=0.644, tensor=0.799, conv=1.441, memory=0.420, kernel_s=2.0e-5, host_s=2.0e-6, link=1.0)
FIT = {"rows": 209, "median_abs_pct": 20.1, "p80_abs_pct": 43.3}


@dataclass(frozen=True)
class Prediction:
    """One step on one GPU: the device's time (what dlperf's synthetic-data step measures), the batch's copy over
    the host link, and what bounds the step."""

    gpu: str
    workload: str
    mode: str
    batch: int
    device_s: float  # the step on the GPU, inputs already there: max(GPU work, host issuing)
    transfer_s: float  # the batch's inputs and targets, host to device
    bound: str  # compute | memory | launch
    parts: dict[str, float] = field(default_factory=dict)  # compute, memory, kernel (GPU time by what bounds it), host
    kernels: int = 0

    @property
    def step_s(self) -> float:
        return self.device_s + self.transfer_s

    @property
    def samples_per_s(self) -> float:
        return self.batch / self.step_s


def op_time(op: Op, gpu: GPU, mode: str, eff: Efficiency = EFFICIENCY) -> tuple[float, float, float]:
    """One call of `op`: its compute time, its memory time, and its fixed kernel cost."""
    compute = 0.0
    if op.flops:
        peak, unit = gpu.peak(op.dtype, tensor=mode == "tf32")
        fraction = eff.tensor if "tensor" in unit else eff.fp32
        if op.kind == "conv":
            fraction *= eff.conv
        compute = op.flops / (peak * fraction)
    memory = op.bytes / (gpu.memory_bw * eff.memory)
    return compute, memory, op.launches * eff.kernel_s


def predict(
    count: Count, gpu: GPU, *, phases: tuple[str, ...] | None = None, eff: Efficiency = EFFICIENCY,
    transfer: bool = True,
) -> Prediction:  # fmt: skip
    """The step of `count` on `gpu`. `phases`: only these (e.g. forward and backward, for a figure that leaves the
    optimizer out); `transfer`: whether the batch crosses the host link each step (False: data made on the GPU)."""
    parts = {"compute": 0.0, "memory": 0.0, "kernel": 0.0}
    kernels = 0
    for op in count.ops:
        if phases is not None and op.phase not in phases:
            continue
        if op.launches == 0:
            continue  # fused into the kernel before it (a cuDNN RNN step's gate math): its traffic stays on chip
        compute, memory, fixed = op_time(op, gpu, count.mode, eff)
        parts["compute" if compute >= memory else "memory"] += op.calls * max(compute, memory)
        parts["kernel"] += op.calls * fixed
        kernels += op.calls * op.launches
    parts["host"] = kernels * eff.host_s
    gpu_s = parts["compute"] + parts["memory"] + parts["kernel"]
    device_s = max(gpu_s, parts["host"])
    if parts["host"] >= gpu_s or parts["kernel"] > max(parts["compute"], parts["memory"]):
        bound = "launch"
    else:
        bound = "compute" if parts["compute"] >= parts["memory"] else "memory"
    transfer_s = count.input_bytes / (gpu.host_link_bw * eff.link) if transfer else 0.0
    return Prediction(gpu.name, count.workload, count.mode, count.batch, device_s, transfer_s, bound, parts, kernels)


def uncertainty() -> str:
    """The error a prediction carries, from the validation: "" before any fit."""
    if FIT["median_abs_pct"] is None:
        return ""
    return f"±{FIT['median_abs_pct']:.0f}% (median error on {FIT['rows']} published measurements)"
