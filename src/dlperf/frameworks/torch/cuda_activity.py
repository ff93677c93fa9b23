"""A CUDA profile's device work, each kernel, copy and memset with the operator it is attributed to: what
`profiler.breakdown_cuda` sorts into categories, and `profiler.top_ops` into operators.

Torch links a kernel to its operator through CUPTI's external correlation; where that is missing (cuDNN 9's and
cuBLAS's kernels, launched through the driver API), the kernel goes to the innermost operator open on the launching
thread when its launch call started, and where kineto kept no launch call at all (it keeps only some driver API
calls), to the operator that launched the calls numbered just before and after it. What is left has no operator: it
is `other`, and a note names its largest kernels.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from dlperf.vocab import Category


def note_attribution(activity: CudaActivity, steps: int, notes: list[str]) -> None:
    """How much device work torch did not link to an operator and dlperf gave to one, by its launch's time or its
    place among the launches; how much has none, why, and its largest kernels (what to look for in the trace)."""
    if activity.by_launch_ns:
        notes.append(f"{activity.by_launch_ns / 1e6 / steps:.3g} ms per step of device work torch did not link to "
                     "its operator is under the operator open on the launching thread at its launch")  # fmt: skip
    if activity.by_order_ns:
        notes.append(f"{activity.by_order_ns / 1e6 / steps:.3g} ms per step of device work with no launch call "
                     "in the trace is under the operator that launched the work just before and just after "
                     "it")  # fmt: skip
    unowned: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for (start, stop, name, corr, _), owner in zip(activity.device, activity.owners, strict=True):
        if owner is None and memcpy_kind(name) is None:
            why = UNLAUNCHED if corr not in activity.launches else NO_OPERATOR
            unowned[why][_short_kernel(name)] += stop - start
    for why, kernels in unowned.items():
        top = sorted(kernels.items(), key=lambda kv: -kv[1])[:3]
        named = ", ".join(f"{kernel} {ns / 1e6 / steps:.3g} ms" for kernel, ns in top)
        notes.append(f"{sum(kernels.values()) / 1e6 / steps:.3g} ms per step of device work {why} is under other; "
                     f"the largest: {named}")  # fmt: skip


# why device work has no operator: its launch call ran outside every operator, or the trace has no launch call for it
NO_OPERATOR = "launched with no operator open (CUDA graph replay, work issued outside ATen operators)"
UNLAUNCHED = "with no launch call in the trace, between launches of different operators"


def _short_kernel(name: str) -> str:
    """A kernel's name without its template arguments and parameters: `void cudnn::bn_bw_1C11_kernel_new<...>(...)`
    is cudnn::bn_bw_1C11_kernel_new."""
    head = name.removeprefix("void ").split("(", 1)[0].split("<", 1)[0].strip()
    return head[:80] or name[:80]


def memcpy_kind(name: str) -> Category | None:
    if name.startswith("Memcpy HtoD"):
        return Category.COPY_H2D
    if name.startswith("Memcpy DtoH"):
        return Category.COPY_D2H
    if name.startswith(("Memcpy", "Memset")):
        return Category.COPY
    return None


# kineto's activity types (`activity_type()` of torch's kineto events): the device's work, and the host's calls that
# issue it. Not work: "gpu_user_annotation", a record_function label's span over its kernels on a stream (counted, it
# doubled the labelled kernels' time, the copy under other), nor "cuda_sync" (a wait, when enabled).
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_APIS = ("cuda_runtime", "cuda_driver")
# the record_function labels a profiled step runs under: dlperf's own (profiler.LOSS, OPTIMIZER, FORWARD) and torch's
LABELS = ("dlperf.", "Optimizer.", "ProfilerStep#")


@dataclass
class CudaActivity:
    """CUPTI's activity over the profiled steps, each kernel, copy and memset with the operator it is attributed to."""

    # (start ns, end ns, name, correlation id, the operator's id kineto linked it to or 0), by start
    device: list[tuple[int, int, str, int, int]] = field(default_factory=list)
    launches: dict[int, int] = field(default_factory=dict)  # correlation id -> start ns of its launch call
    threads: dict[int, int] = field(default_factory=dict)  # correlation id -> the launching thread (system id)
    kernels: int = 0  # not copies or memsets
    owners: list = field(default_factory=list)  # per `device` entry: its operator (a FunctionEvent), or None
    by_launch_ns: int = 0  # device time torch did not link, given to an operator by its launch's time
    by_order_ns: int = 0  # device time with no launch call in the trace, given by its neighbours' (`_between`)


def attribute(prof, operators: list) -> CudaActivity:
    """The device work, each with its operator: the one torch linked it to (the operator's `kernels`), else the
    innermost operator open on the launching thread when its launch call (runtime or driver API) started. Torch links
    through CUPTI's external correlation; where that is missing (seen with cuDNN 9's kernels in an eager step), the
    kernel is a top-level event of its own, and would be under `other` with no launching operator. Work whose launch
    call is not in the trace either goes to the operator of the launches around it (`_between`)."""
    results = prof.profiler.kineto_results
    activity = _device_activity(results.events())
    linked = {e.id: e for e in operators}  # an operator's id is the correlation id kineto links its kernels to
    running = _Running(operators)
    order = sorted(activity.launches)  # CUPTI numbers every API call in the order they were made

    def launched_by(corr: int):
        launched_us = (activity.launches[corr] - results.trace_start_ns()) / 1e3  # FunctionEvents' clock
        return running.innermost(launched_us, activity.threads.get(corr))

    for start, stop, _, corr, link in activity.device:
        owner = linked.get(link) if link else None
        if owner is None and corr in activity.launches:
            owner = launched_by(corr)
            activity.by_launch_ns += 0 if owner is None else stop - start
        elif owner is None:
            owner = _between(order, corr, launched_by)
            activity.by_order_ns += 0 if owner is None else stop - start
        activity.owners.append(owner)
    return activity


def _between(order: list[int], corr: int, launched_by: Callable[[int], Any]):
    """The operator of work whose launch call the trace lacks (kineto keeps some API calls only): CUPTI numbers every
    call in order, so the call lay between the nearest launches numbered before and after it; where one operator
    launched both, it was open all along and launched this one too. Else None."""
    i = bisect_right(order, corr)
    if i == 0 or i == len(order):
        return None
    before, after = launched_by(order[i - 1]), launched_by(order[i])
    return before if before is not None and before is after else None


def _device_activity(kineto_events) -> CudaActivity:
    """Every kernel, copy and memset; the start and thread of each launch call by correlation id: the runtime API's
    (cudaLaunchKernel, cudaMemcpyAsync) or the driver API's (cuLaunchKernel, cuLaunchKernelEx: cuDNN 9, cuBLAS,
    Triton), the earliest where both carry one."""
    activity = CudaActivity()
    for e in kineto_events:
        kind = _kind(e)
        if _is_label(e, kind):
            continue
        if kind in DEVICE_WORK or (kind is None and e.device_type() == torch.autograd.DeviceType.CUDA):
            activity.device.append((e.start_ns(), e.end_ns(), e.name(), e.correlation_id(), e.linked_correlation_id()))
            activity.kernels += int(kind == "kernel" or (kind is None and memcpy_kind(e.name()) is None))
        elif _is_launch(e, kind) and e.start_ns() < activity.launches.get(e.correlation_id(), e.start_ns() + 1):
            activity.launches[e.correlation_id()] = e.start_ns()
            activity.threads[e.correlation_id()] = e.device_resource_id()
    activity.device.sort()
    return activity


def _kind(e) -> str | None:
    """kineto's activity type of an event ("kernel", "cuda_driver", ...); None where torch does not give it."""
    kind = getattr(e, "activity_type", None)
    return kind() if callable(kind) else None


def _is_label(e, kind: str | None) -> bool:
    """A record_function label's span (kineto's user_annotation, and gpu_user_annotation over its kernels on the
    device): no work of its own. Where torch gives no activity type its device-side span looks like a kernel: the H200
    check at 10ba3bb counted it so, and named dlperf.forward.stages the largest work under other. So a label is known
    by its type, by torch's flag where it has one, or by its name."""
    if kind is not None and kind.endswith("user_annotation"):
        return True
    flag = getattr(e, "is_user_annotation", None)
    return bool(callable(flag) and flag()) or e.name().startswith(LABELS)


def _is_launch(e, kind: str | None) -> bool:
    """A host-side runtime or driver API call with a correlation id (an operator's id is of another series)."""
    if e.device_type() != torch.autograd.DeviceType.CPU or not e.correlation_id():
        return False
    return kind in LAUNCH_APIS if kind is not None else e.name().startswith("cu") and "::" not in e.name()


class _Running:
    """The innermost operator open at a time on a thread (kineto's resource id: the system thread id of an operator
    and of a launch call alike). Per thread, the operators by start, an enclosing one before those it encloses, each
    with the index of the nearest one enclosing it: a query bisects to the last one started, then climbs to the
    first not yet ended."""

    def __init__(self, operators: list) -> None:
        by_thread: dict[Any, list] = defaultdict(list)
        for event in operators:
            by_thread[event.device_resource_id].append(event)
        self.threads = {thread: _nested(ops) for thread, ops in by_thread.items()}

    def innermost(self, at_us: float, thread: Any):
        """On `thread`; on every thread where no operator ran on it (a thread kineto named otherwise)."""
        nests = [self.threads[thread]] if thread in self.threads else list(self.threads.values())
        found = [op for op in (_open_at(nest, at_us) for nest in nests) if op is not None]
        return max(found, key=lambda e: e.time_range.start, default=None)


def _nested(ops: list) -> tuple[list[float], list, list[int]]:
    ops = sorted(ops, key=lambda e: (e.time_range.start, -e.time_range.end))
    parents: list[int] = []
    enclosing: list[int] = []
    for i, event in enumerate(ops):
        while enclosing and ops[enclosing[-1]].time_range.end < event.time_range.start:
            enclosing.pop()
        parents.append(enclosing[-1] if enclosing else -1)
        enclosing.append(i)
    return [e.time_range.start for e in ops], ops, parents


def _open_at(nest: tuple[list[float], list, list[int]], at_us: float):
    starts, ops, parents = nest
    i = bisect_right(starts, at_us) - 1
    while i >= 0 and ops[i].time_range.end < at_us:
        i = parents[i]
    return ops[i] if i >= 0 else None


def busy_and_gaps(device: list, launches: dict[int, int]) -> tuple[int, int, int, int]:
    """(busy ns: the union of device intervals, total ns of device events, ns of gaps the host caused, ns of all
    gaps) between the first and last device event: a gap is the host's when the work after it was launched after
    the device fell idle (as HTA's idle-time breakdown calls it "host wait")."""
    busy = total = host = gaps = 0
    end = None
    for start, stop, _, corr, *_ in device:
        total += stop - start
        if end is not None and start > end:
            gaps += start - end
            if launches.get(corr, start) >= end:
                host += start - end
        if end is None or stop > end:
            busy += stop - max(start, end if end is not None else start)
            end = stop
    return busy, total, host, gaps
