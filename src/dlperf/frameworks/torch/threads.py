"""PyTorch's thread pools and the device a step runs on, as the settings recorded with every cell.

Part of the PyTorch backend (`backend.py`), imported only in child processes whose thread variables are fixed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import torch


def version() -> str:
    return torch.__version__


def configure_threads(threads: int) -> dict[str, Any]:
    """Size both of PyTorch's CPU pools; call before building anything. Returns the settings in effect."""
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        pass  # the inter-op pool can be sized once, before first use; the value in effect is reported below
    return thread_settings()


def pool_threads() -> int:
    """The threads PyTorch's intra-op pool has now: a model's `torch.set_num_threads` changes them under the cell."""
    return torch.get_num_threads()


def matmul(size: int) -> Callable[[], None]:
    """One size x size fp32 matrix product on the CPU, finished when the call returns (the thread test)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    out = torch.empty(size, size)

    def product() -> None:
        torch.mm(a, b, out=out)

    return product


def thread_settings() -> dict[str, Any]:
    return {
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the ATen kernels picked: default, avx2, avx512
        "mkldnn_enabled": torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
        **_parallel_info(),
    }


# What the OpenMP and MKL runtimes themselves report: a library that ignored our settings shows here.
_PARALLEL_KEYS = {
    "ATen parallel backend": "parallel_backend",
    "omp_get_max_threads()": "omp_max_threads",
    "mkl_get_max_threads()": "mkl_max_threads",
}


def _parallel_info() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for line in torch.__config__.parallel_info().splitlines():
        match = re.match(r"\s*(.+?)\s*:\s+(\S.*)$", line)  # "key : value"; skips the "::" inside "at::..."
        if match and match[1] in _PARALLEL_KEYS:
            value = match[2].strip()
            found[_PARALLEL_KEYS[match[1]]] = int(value) if value.isdigit() else value
    return found


def describe_device(device: torch.device) -> dict[str, Any]:
    if device.type != "cuda":
        return {"name": device.type}
    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return {
        "name": f"cuda:{index}",
        "model": props.name,
        "memory_bytes": props.total_memory,
        "capability": f"{props.major}.{props.minor}",
    }


def kernel_settings(device: torch.device) -> dict[str, Any]:
    if device.type != "cuda":
        return {}
    return {
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
    }
