"""What the PyTorch backend measures a step with, beside the timer: the live tensor bytes of a CPU step, the FLOPs of
a step by dtype, and CUDA events as the timer's device clock.

Part of the PyTorch backend (`backend.py`), imported only in child processes.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from functools import partial

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dlperf.frameworks.torch.opcount import dtype_name, first_floating_dtype, op_flops, tensors_in

# ----------------------------------------------------------------------------------------------------------------------
# Live tensor memory on CPU


class LiveTensorBytes(TorchDispatchMode):
    """Peak bytes of live tensor storages while active: parameters, gradients, optimizer state, data, activations.

    CPU has no caching allocator whose peak we could read, so this counts what the tensors themselves hold. Every op
    result passes through `__torch_dispatch__` (backward ops too: on CPU autograd runs them in this thread with this
    mode active); each storage is counted once, however many views share it, and subtracted when it dies. PyTorch
    keeps one Python object per live storage (`untyped_storage()` returns the same object while the C++ storage
    lives), so a weakref callback on it fires exactly when the memory is released. A storage can also shrink or grow
    without an op returning it (FSDP2 frees an all-gathered layer with `untyped_storage().resize_(0)` and allocates
    it again the same way), so before each op every live storage's size is read again. Tensors that exist before the
    mode is entered are passed in. Not counted: kernel scratch space and allocator overhead, which no op returns.
    """

    def __init__(self, existing: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self._live: dict[int, tuple[weakref.ref, int]] = {}  # id(storage) -> (weakref with release callback, bytes)
        self.now = self.peak = 0
        for t in existing:
            self._see(t)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._resized()
        out = func(*args, **(kwargs or {}))
        for t in tensors_in(out):
            self._see(t)
        return out

    def _resized(self) -> None:
        """Storages resized in place since the last op (no op returned them): their sizes as they are now."""
        for key, (ref, size) in list(self._live.items()):
            storage = ref()
            if storage is not None and (now := storage.nbytes()) != size:
                self._live[key] = (ref, now)
                self.now += now - size

    def _see(self, t: torch.Tensor) -> None:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # layouts without one plain storage (sparse, mkldnn)
            return
        key, size = id(storage), storage.nbytes()
        ref, old = self._live.get(key, (None, 0))
        if ref is None:  # the key stays unique: the callback drops it before the id can be reused
            ref = weakref.ref(storage, partial(self._released, key))
        self._live[key] = (ref, size)  # a storage seen again may have been resized (resize_, out= ops)
        self.now += size - old
        self.peak = max(self.peak, self.now)

    def _released(self, key: int, _ref: weakref.ref) -> None:
        self.now -= self._live.pop(key)[1]


# ----------------------------------------------------------------------------------------------------------------------
# FLOPs by dtype


class DtypeFlopCounter(TorchDispatchMode):
    """FLOPs of one pass, per dtype the products ran in.

    Uses the formulas of PyTorch's own FLOP counter (`torch.utils.flop_counter.flop_registry`: matrix products,
    convolutions and attention, with their backward ops), so totals equal FlopCounterMode's (which counts the CPU's
    attention as zero, this does not: `opcount.op_flops`); each op's FLOPs go to
    the dtype of its first floating-point input, which under autocast is the dtype it was cast to."""

    def __init__(self) -> None:
        super().__init__()
        self.by_dtype: dict[str, int] = {}

    @property
    def total(self) -> int:
        return sum(self.by_dtype.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        flops = op_flops(func, args, kwargs, out)
        if flops is not None:
            name = dtype_name(first_floating_dtype(args))
            self.by_dtype[name] = self.by_dtype.get(name, 0) + flops
        return out


# ----------------------------------------------------------------------------------------------------------------------
# The device clock


class CudaEvents:
    """`dlperf.measure.timer.DeviceClock` for a CUDA device: timing events recorded on its current stream."""

    HOW = "pipelined: CUDA events at the ends of consecutive steps"

    def __init__(self, device: torch.device) -> None:
        self.stream = torch.cuda.current_stream(device)

    def mark(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record(self.stream)
        return event

    def seconds(self, start: torch.cuda.Event, end: torch.cuda.Event) -> float:
        end.synchronize()
        return start.elapsed_time(end) / 1000.0  # elapsed_time is in milliseconds
