"""What one device can really do, measured with PyTorch: matrix-multiply throughput per dtype, memory bandwidth, the
host time to dispatch one tiny operator (what a step of many small operators pays per operator), and copies over a
sweep of sizes: host memory to host memory, and on CUDA host to device and back, pageable and pinned.

The child side of `dlperf peak`, imported only by `dlperf.worker.peak` after the parent fixed the thread
variables. A training step's utilization is later held against these figures, so they are measured like a step is:
the one timer (`dlperf.measure.timer`), warm-up until steady, the device synchronized on both sides of every timed
call, the median of the samples. Vendor datasheet peaks are not used: what a CPU reaches depends on the kernels the
framework picks (bf16 through AMX or AVX512-BF16, fp16 often through a slow fallback), and only a measurement says.

Imports the standard library, torch and dlperf's standard-library-only modules, nothing else.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from dlperf.frameworks.torch.threads import configure_threads
from dlperf.measure import system
from dlperf.measure.stats import summarize
from dlperf.measure.timer import TimerConfig, sample, timed_step, warm_up

__all__ = ["DTYPES", "configure_threads", "measure_peaks"]  # configure_threads: the peak worker sizes the pools

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
TF32 = "tf32"  # fp32 products on TensorFloat-32 tensor cores: CUDA's only
LADDER_START = 128  # small products, doubled up to the first size: does the dtype work, and how fast?
SLOW_CALL_FACTOR = 4  # a size whose one product would take longer than this many max_times is skipped
MIN_STEP_S = 1e-3  # fast calls are timed several to a step, so the clock and the syncs stay below ~1% of a step
FP32_BYTES = 4
CHAIN = 1000  # tiny operators per timed call of the dispatch figure: the clock and the sync well below 1% of it
DISPATCH_IN_PROFILE_S = 0.25  # the dispatch cost's sampling in a profiled process (`backend.profile`): 0.3-0.5 s


def timer_config(max_time: float) -> TimerConfig:
    """Warm-up and sampling each capped at `max_time`: a peak is one figure among a dozen, wanted in seconds."""
    return TimerConfig(min_steps=5, min_time=min(0.2, max_time), max_time=max_time, max_warmup=20)


def sync_for(device: torch.device) -> Callable[[], None]:
    """Wait for the device's queued work; CPU kernels are done when they return."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    if device.type == "mps":
        return torch.mps.synchronize
    return lambda: None


def measure_peaks(
    device: str,
    dtypes: list[str],
    sizes: list[int],
    bandwidth_bytes: int,
    max_time: float,
    copy_sizes: list[int] | None = None,
) -> dict:
    """Matmul peak per dtype over square sizes, STREAM copy/triad bandwidth on fp32 arrays of `bandwidth_bytes`, and
    the copy sweep over `copy_sizes` bytes (`copy_peaks`; none when empty).

    `max_time` caps the warm-up and the sampling of each figure; a size whose single product would take more than
    SLOW_CALL_FACTOR times that (predicted from the size before) is skipped, with the reason. Returns JSON-ready
    values, including the share of the CPUs other processes used meanwhile: a busy machine lowers every peak, and
    utilizations held against them then come out high.
    """
    dev = torch.device(device)
    sync, cfg = sync_for(dev), timer_config(max_time)
    before, own_before, wall_before = system.cpu_times(), _own_cpu_s(), time.perf_counter()
    matmul = {name: matmul_peak(dev, name, sorted(set(sizes)), cfg, sync) for name in dtypes}
    bandwidth = bandwidth_peak(dev, bandwidth_bytes, cfg, sync)
    dispatch = dispatch_cost(dev, cfg, sync)
    copies = copy_peaks(dev, sorted(set(copy_sizes or ())), max_time, sync)
    wall, after = time.perf_counter() - wall_before, system.cpu_times()
    return {
        "framework": "torch",
        "framework_version": torch.__version__,
        "device": device,
        "matmul": matmul,
        "bandwidth": bandwidth,
        "dispatch": dispatch,
        "copies": copies,
        "duration_s": wall,
        "others_cpu_share": system.others_cpu_share(before, after, _own_cpu_s() - own_before, wall),
        "steal_fraction": system.steal_fraction(before, after),
    }


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


# ----------------------------------------------------------------------------------------------------------------------
# Matrix multiply


def matmul_peak(dev: torch.device, name: str, sizes: list[int], cfg: TimerConfig, sync) -> dict[str, Any]:
    """The best median throughput of `torch.mm(a, b, out=c)` over `sizes` (ascending), every size's figures kept.

    An entry `{"unsupported": reason}` when the device cannot multiply this dtype. `tf32`: fp32 operands on CUDA with
    TensorFloat-32 allowed; every other dtype with it refused, whatever the process had set."""
    if name == TF32 and dev.type != "cuda":
        return {"unsupported": f"tf32 is CUDA's (fp32 products on TensorFloat-32 tensor cores), not {dev.type}'s"}
    with tensor_float32(dev, name == TF32):
        return _matmul_peak(dev, name, sizes, cfg, sync)


@contextlib.contextmanager
def tensor_float32(dev: torch.device, allowed: bool):
    """cuBLAS's TensorFloat-32 for fp32 products on `dev` set to `allowed` for the block, then restored."""
    if dev.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _matmul_peak(dev: torch.device, name: str, sizes: list[int], cfg: TimerConfig, sync) -> dict[str, Any]:
    dtype = DTYPES[name]
    longest = SLOW_CALL_FACTOR * cfg.max_time
    try:
        last_n, last_s = ladder(dev, dtype, sizes[0], longest, sync)
    except torch.OutOfMemoryError:
        raise
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        return {"unsupported": f"torch.mm in {name} on {dev.type}: {_first_line(exc)}"}
    figures = []
    for n in sizes:
        # Multiply-adds grow as n^3. A fast kernel's throughput grows with n too, so this errs long; a fallback
        # kernel's (fp16 on most CPUs) falls, and a product may then take up to a few times the prediction.
        predicted = last_s * (n / last_n) ** 3
        if predicted > longest:
            figures.append({"n": n, "skipped": too_slow(predicted, longest)})
            continue
        figure = time_matmul(dev, dtype, n, predicted, cfg, sync)
        figures.append(figure)
        last_n, last_s = n, figure["median_s"]
    measured = [f for f in figures if "flops_per_s" in f]
    if not measured:
        return {"peak_flops_per_s": None, "best_n": None, "sizes": figures}
    best = max(measured, key=lambda f: f["flops_per_s"])
    return {"peak_flops_per_s": best["flops_per_s"], "best_n": best["n"], "sizes": figures}


def too_slow(predicted_s: float, longest_s: float) -> str:
    """Why a size is skipped: fp16 on a CPU without fp16 arithmetic runs at a few GFLOP/s and slower as n grows, so a
    4096 product would take minutes and the worker's timeout would lose every other figure with it. A product a few
    times --max-time long is still measured: one warm-up call and one timed call give its figure."""
    return (
        f"one product would take about {predicted_s:.3g} s, more than {SLOW_CALL_FACTOR} x --max-time ({longest_s:g} s)"
    )


def _operands(dev: torch.device, dtype: torch.dtype, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """a, b random (made in fp32, then cast: random generators lack some dtypes on some devices); c the output."""
    a = torch.randn(n, n, device=dev).to(dtype)
    b = torch.randn(n, n, device=dev).to(dtype)
    return a, b, torch.empty(n, n, device=dev, dtype=dtype)


def ladder(dev: torch.device, dtype: torch.dtype, first: int, longest: float, sync) -> tuple[int, float]:
    """(n, seconds of one product) for the largest of LADDER_START, twice that, ... below `first` (or `first` itself
    when it is smaller) that is quick enough to try; raises if the device cannot multiply this dtype.

    Small steps, because a small product's time is partly fixed cost (a thread-pool wake-up, a kernel launch, a
    descheduled thread on a busy machine), which the n^3 extrapolation to a size 64 times the work would multiply."""
    n = min(LADDER_START, first)
    seconds = _quick_call_s(dev, dtype, n, sync)
    while 2 * n < first and seconds * 8 <= longest:
        n, seconds = 2 * n, _quick_call_s(dev, dtype, 2 * n, sync)
    return n, seconds


def _quick_call_s(dev: torch.device, dtype: torch.dtype, n: int, sync) -> float:
    """The faster of two timed n x n products after an untimed one (kernel selection, JIT): one preempted call
    must not make a fast dtype look slow."""
    a, b, c = _operands(dev, dtype, n)
    torch.mm(a, b, out=c)
    sync()
    return min(timed_step(lambda: torch.mm(a, b, out=c), sync) for _ in range(2))


def time_matmul(dev: torch.device, dtype: torch.dtype, n: int, call_s: float, cfg: TimerConfig, sync) -> dict:
    """Figures of the n x n product, timed `calls` to a step (from the predicted `call_s`) after a warm-up."""
    a, b, c = _operands(dev, dtype, n)
    calls = calls_per_step(call_s)

    def step() -> None:
        for _ in range(calls):
            torch.mm(a, b, out=c)

    flops = 2 * n**3 * calls  # n^2 outputs, n multiply-adds each
    return {"n": n, **_timed(step, sync, cfg, calls, flops, "flops")}


def calls_per_step(call_s: float) -> int:
    return max(1, math.ceil(MIN_STEP_S / max(call_s, 1e-9)))


def fastest_call_s(call: Callable[[], Any], sync) -> float:
    """One call's time to size a step by: the fastest of three, so that a call preempted on a busy machine (a 4 KiB
    copy timed at 20 us) does not make the step too short to time (it was 24 calls, against 32 for a 1 MiB copy)."""
    return min(timed_step(call, sync) for _ in range(3))


def _timed(step: Callable[[], None], sync, cfg: TimerConfig, calls: int, work: float, unit: str) -> dict[str, Any]:
    """Warm up, sample and summarize one step that does `work` (FLOPs or bytes) in `calls` calls.

    `median_s` and `iqr_s` are per call: the step's, divided by its calls."""

    def run() -> float:
        return timed_step(step, sync)

    warm = warm_up(run, cfg)
    s = summarize(sample(run, cfg))
    return {
        f"{unit}_per_s": work / s.median,
        "median_s": s.median / calls,
        "iqr_s": s.iqr / calls,
        "samples": s.n,
        "calls_per_step": calls,
        "warmup_steps": warm.steps,
        "warmup_steady": warm.steady,
    }


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


# ----------------------------------------------------------------------------------------------------------------------
# Memory bandwidth


def bandwidth_peak(dev: torch.device, array_bytes: int, cfg: TimerConfig, sync) -> dict[str, Any]:
    """STREAM copy (c = a: 2 bytes moved per array byte) and triad (a = b + 3c: 3) on fp32 arrays.

    The arrays are filled before timing, so every page is mapped and the first touch is not what is measured; they
    must be well above the last-level cache, or this measures the cache."""
    n = max(1, array_bytes // FP32_BYTES)
    a, b, c = (torch.rand(n, device=dev) for _ in range(3))
    nbytes = n * FP32_BYTES
    kernels = {
        "copy": (lambda: c.copy_(a), 2 * nbytes),
        "triad": (lambda: torch.add(b, c, alpha=3.0, out=a), 3 * nbytes),
    }
    figures = {name: time_kernel(call, moved, cfg, sync) for name, (call, moved) in kernels.items()}
    best = max(figures, key=lambda k: figures[k]["bytes_per_s"])
    return {
        "array_bytes": nbytes,
        "kernels": figures,
        "peak_bytes_per_s": figures[best]["bytes_per_s"],
        "best_kernel": best,
    }


def time_kernel(call: Callable[[], Any], moved: int, cfg: TimerConfig, sync) -> dict[str, Any]:
    """Figures of one bandwidth kernel moving `moved` bytes a call."""
    call()
    calls = calls_per_step(fastest_call_s(call, sync))

    def step() -> None:
        for _ in range(calls):
            call()

    return {"bytes_per_call": moved, **_timed(step, sync, cfg, calls, moved * calls, "bytes")}


# ----------------------------------------------------------------------------------------------------------------------
# Dispatch: the cost of one tiny operator


def dispatch_cost(dev: torch.device, cfg: TimerConfig, sync) -> dict[str, Any]:
    """Seconds per operator of a chain of dependent in-place adds on a one-element tensor: work that takes no time,
    so what is timed is the framework's dispatch (Python, the dispatcher, the kernel's call; on CUDA the launch, the
    chain synchronized only at its end, as a step's kernels are). Kernels per step times this is the step's floor
    when it is bound by launching (`report/profile.dispatch_floor`)."""
    x = torch.zeros(1, device=dev)
    return {"ops_per_call": CHAIN, **_timed(lambda: chain(x, CHAIN), sync, cfg, CHAIN, CHAIN, "ops")}


def chain(x: torch.Tensor, n: int) -> None:
    """`n` dependent in-place adds on `x`, queued without a sync."""
    for _ in range(n):
        x.add_(1.0)


# ----------------------------------------------------------------------------------------------------------------------
# Copies: host memcpy, and host<->device on CUDA

COPY_REPEATS = 5  # timed steps per size at most; the fastest is the figure (slower ones met other traffic)
TRANSFERS = (("h2d", False), ("h2d", True), ("d2h", False), ("d2h", True))  # (kind, pinned host memory)


def copy_peaks(dev: torch.device, sizes: list[int], max_time: float, sync) -> list[dict[str, Any]]:
    """One figure per size and kind: on the CPU `memcpy` (host buffer to host buffer); on CUDA `h2d` and `d2h`, each
    from pageable and from pinned host memory. Each size may spend its share of `max_time` (a series of sizes is one
    figure, as a matmul dtype is), and times at least one step. Other devices: none (MPS shares the host's memory)."""
    budget = max_time / max(1, len(sizes))
    if dev.type == "cpu":
        return [host_copy(n, budget) for n in sizes]
    if dev.type != "cuda":
        return []
    return [transfer(dev, kind, pinned, n, budget, sync) for kind, pinned in TRANSFERS for n in sizes]


def host_copy(nbytes: int, budget_s: float) -> dict[str, Any]:
    """`dst.copy_(src)` between two host buffers of `nbytes`. The figure is bytes copied per second: each byte is read
    once and written once, so STREAM's copy, which counts both, would say twice this (`stream_bytes_per_s`)."""
    src, dst = torch.ones(nbytes, dtype=torch.uint8), torch.zeros(nbytes, dtype=torch.uint8)  # every page mapped
    figure = best_copy(lambda: dst.copy_(src), nbytes, budget_s, lambda: None)
    return {"kind": "memcpy", "pinned": False, **figure, "stream_bytes_per_s": 2 * figure["bytes_per_s"]}


def transfer(dev: torch.device, kind: str, pinned: bool, nbytes: int, budget_s: float, sync) -> dict[str, Any]:
    """One copy of `nbytes` between host memory (pinned or pageable) and `dev`, by the book: from pinned memory the
    copy is queued asynchronously (non_blocking) and the step ends with the device synchronized; from pageable
    memory the driver stages it through a pinned buffer of its own, which is what makes it slower."""
    host = torch.ones(nbytes, dtype=torch.uint8, pin_memory=pinned)
    device = torch.zeros(nbytes, dtype=torch.uint8, device=dev)
    src, dst = (host, device) if kind == "h2d" else (device, host)
    figure = best_copy(lambda: dst.copy_(src, non_blocking=pinned), nbytes, budget_s, sync)
    return {"kind": kind, "pinned": pinned, **figure}


def best_copy(call: Callable[[], Any], nbytes: int, budget_s: float, sync) -> dict[str, Any]:
    """The fastest of up to COPY_REPEATS timed steps of `call` (after an untimed one), until `budget_s` is spent;
    small copies are timed several to a step, so the clock and the sync stay below ~1% of it."""
    call()
    calls = calls_per_step(fastest_call_s(call, sync))

    def step() -> None:
        for _ in range(calls):
            call()

    times, spent = [], 0.0
    while len(times) < COPY_REPEATS and (not times or spent < budget_s):
        times.append(timed_step(step, sync))
        spent += times[-1]
    best = min(times) / calls
    return {"bytes": nbytes, "bytes_per_s": nbytes / best, "best_s": best, "steps": len(times), "calls_per_step": calls}
