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
    without an op returning it: an op that writes an argument it does not return (`inductor.resize_storage_bytes_`),
    whose written arguments are read again after it, and `UntypedStorage.resize_` called from Python (FSDP2 frees an
    all-gathered layer with `untyped_storage().resize_(0)` and allocates it again the same way), which is watched
    while a tracker is active (`_watching_resizes`). No live storage is read again otherwise: reading every one before
    each op made a traced step quadratic (a 49M-parameter LM's took 2.8 times a plain step). Tensors that exist
    before the mode is entered are passed in. Not counted: kernel scratch space and allocator overhead, which no op
    returns.
    """

    def __init__(self, existing: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self._live: dict[int, tuple[weakref.ref, int]] = {}  # id(storage) -> (weakref with release callback, bytes)
        self.now = self.peak = 0
        for t in existing:
            self._see(t)

    def __enter__(self):
        entered = super().__enter__()  # first: a mode that cannot be entered leaves no watch installed
        _ACTIVE.append(self)
        _watching_resizes(True)
        return entered

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            _ACTIVE.remove(self)
            _watching_resizes(bool(_ACTIVE))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tensors_in(out):
            self._see(t)
        for t in _written(func, args, kwargs):  # resized in place by the op, perhaps not returned
            if (storage := _storage(t)) is not None:
                self.resized(storage)
        return out

    def resized(self, storage: torch.UntypedStorage) -> None:
        """`storage` perhaps resized in place: its size as it is now, if it is one counted."""
        ref, size = self._live.get(id(storage), (None, 0))
        if ref is not None and ref() is storage:
            self._count(id(storage), ref, storage.nbytes(), size)

    def _see(self, t: torch.Tensor) -> None:
        if (storage := _storage(t)) is None:
            return
        key = id(storage)
        ref, old = self._live.get(key, (None, 0))
        if ref is None:  # the key stays unique: the callback drops it before the id can be reused
            ref = weakref.ref(storage, partial(self._released, key))
        self._count(key, ref, storage.nbytes(), old)  # a storage seen again may have been resized (resize_, out=)

    def _count(self, key: int, ref: weakref.ref, size: int, old: int) -> None:
        self._live[key] = (ref, size)
        self.now += size - old
        if self.now > self.peak:
            self.peak = self.now
            self._peaked()

    def _peaked(self) -> None:
        """Called each time the peak rises, for a subclass that records what is alive then."""

    def _released(self, key: int, _ref: weakref.ref) -> None:
        self.now -= self._live.pop(key)[1]


_ACTIVE: list[LiveTensorBytes] = []  # the trackers entered and not yet left, in this process
_WRITTEN: dict = {}  # an op -> the positions and names of the arguments it may write


def _storage(t: torch.Tensor) -> torch.UntypedStorage | None:
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # layouts without one plain storage (sparse, mkldnn)
        return None


def _written(func, args: tuple, kwargs: dict | None) -> Iterable[torch.Tensor]:
    """The tensors `func` may have written in place: the arguments its schema marks written (`Tensor(a!)`), and every
    argument of an op that returns nothing (`inductor.resize_storage_bytes_` marks none); most ops: none. Each op's
    schema is read once."""
    at = _WRITTEN.get(func)
    if at is None:
        schema = func._schema
        arguments, none_returned = list(enumerate(schema.arguments)), not schema.returns
        writes = [(i, a.name) for i, a in arguments if none_returned or (a.alias_info and a.alias_info.is_write)]
        at = _WRITTEN[func] = tuple(writes)
    for i, name in at:
        yield from tensors_in(args[i] if i < len(args) else (kwargs or {}).get(name))


def _resize(storage: torch.UntypedStorage, size: int):
    """`UntypedStorage.resize_` while a tracker is active: the storage resized, then read again by each tracker."""
    done = torch._C.StorageBase.resize_(storage, size)
    for tracker in _ACTIVE:
        tracker.resized(storage)
    return done


def _watching_resizes(on: bool) -> None:
    """Route `UntypedStorage.resize_` through `_resize` (on), or back to PyTorch's own (off)."""
    if on:
        torch.UntypedStorage.resize_ = _resize  # type: ignore[method-assign]
    elif vars(torch.UntypedStorage).get("resize_") is _resize:
        del torch.UntypedStorage.resize_


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
