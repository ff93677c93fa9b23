"""The parent side of `dlperf peak`: one child process per (device, thread count) runs `worker/peak.py`, with
the thread variables fixed before the framework loads, as a sweep's cells are; each child's result becomes store
records. Nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dlperf.answers import PeakAnswer
from dlperf.protocol import Answer, Event, PeakTask, first
from dlperf.runner.outcome import outcome
from dlperf.vocab import DeviceKind, Status

if TYPE_CHECKING:
    from dlperf.runner.launch import ChildResult
    from dlperf.store.machine import MeasuredPeak


@dataclass(frozen=True)
class PeakRow:
    """One child of `dlperf peak`: its answer, or its status and why there is none."""

    framework: str
    device: str
    threads: int
    duration_s: float  # the child's wall-clock life
    status: Status
    error: str | None = None
    answer: PeakAnswer | None = None  # when status is ok

    def failure(self) -> dict[str, Any]:
        """What `dlperf peak --format json` lists of a child that failed."""
        return {"device": self.device, "threads": self.threads, "status": self.status, "error": self.error}


Progress = Callable[[int, int, str, int, PeakRow | None], None]


def copy_sizes(smallest: int, largest: int) -> list[int]:
    """The copy sweep: `smallest` bytes, then four times that, ... up to `largest` (kept when it falls between)."""
    out, n = [], smallest
    while n < largest:
        out.append(n)
        n *= 4
    return [*out, largest]


def is_cpu(device: str) -> bool:
    return device.split(":")[0] == DeviceKind.CPU


def jobs(devices: list[str], threads_list: list[int]) -> list[tuple[str, int]]:
    """(device, threads) to measure: the CPU at every thread count; an accelerator once, with the most host threads
    (they do not change what the accelerator can do; `peak_lookup` ignores them there)."""
    out = []
    for device in devices:
        counts = threads_list if is_cpu(device) else [max(threads_list)]
        out += [(device, n) for n in counts]
    return out


def measure(
    framework: str,
    devices: list[str],
    threads_list: list[int],
    dtypes: list[str],
    sizes: list[int],
    bandwidth_bytes: int,
    max_time: float,
    timeout: float,
    progress: Progress | None = None,
    copy_sizes: list[int] | None = None,
) -> list[PeakRow]:
    """One row per (device, threads).

    A child that fails or times out gives a row with that status and the reason, never an exception; an interrupt
    (Ctrl-C) stops the running child's process tree and propagates. `progress(done, total, device, threads, row)` is
    called before each child (row None) and after it (with its row). `copy_sizes`: the bytes of each copy of the
    copy sweep (host memcpy; host<->device on a GPU); none by default."""
    request = {"dtypes": dtypes, "sizes": sizes, "bandwidth_bytes": bandwidth_bytes, "max_time": max_time,
               "copy_sizes": list(copy_sizes or ())}  # fmt: skip
    todo = jobs(devices, threads_list)
    rows = []
    for i, (device, threads) in enumerate(todo):
        if progress:
            progress(i, len(todo), device, threads, None)
        rows.append(measure_one(framework, device, threads, request, timeout))
        if progress:
            progress(i + 1, len(todo), device, threads, rows[-1])
    return rows


def measure_one(framework: str, device: str, threads: int, request: dict[str, Any], timeout: float) -> PeakRow:
    """One child through the launcher; its row."""
    from dlperf.errors import MissingDependency
    from dlperf.runner.launch import launch
    from dlperf.runner.sweep import interpreter_for

    try:
        python = interpreter_for(framework)
    except MissingDependency as exc:  # no child to start: the row says why
        return PeakRow(framework, device, threads, 0.0, Status.FAILED, str(exc))
    launched = launch(PeakTask(framework, device, threads, **request), python, threads, timeout)
    return row_of(framework, device, threads, launched.child, launched.main, timeout)


def row_of(
    framework: str, device: str, threads: int, child: ChildResult, events: list[Event], timeout: float
) -> PeakRow:
    """The row of one child: its answer, or why there is none (`runner/outcome.py`)."""
    answer = first(events, Answer)
    found = outcome(events, child, timeout, result=Answer, measured=answer is not None and not child.timed_out)
    if not found.ok:
        return PeakRow(framework, device, threads, child.duration_s, found.status, found.reason)
    return PeakRow(framework, device, threads, child.duration_s, Status.OK, answer=PeakAnswer.from_json(answer.result))


def peak_records(row: PeakRow) -> list[MeasuredPeak]:
    """A measured row as store records: one per dtype (kind matmul, FLOP/s), one for bandwidth (bytes/s), one for
    the dispatch of one tiny operator (kind dispatch, seconds per op) and one per copy of the copy sweep (kind
    memcpy, h2d or d2h, bytes/s; detail {"bytes", "pinned", ...}). Each record's detail is its figure's JSON and
    the settings, other processes' CPU share, the steal and the duration of the child that measured it.

    A dtype the device cannot do, or whose every size was too slow to time, is kept with value None and the reason."""
    from dlperf.store.machine import MeasuredPeak

    answer = row.answer
    assert answer is not None, "only a measured row has records"
    context = {
        "settings": answer.settings,
        "others_cpu_share": answer.others_cpu_share,
        "steal_fraction": answer.steal_fraction,
        "duration_s": answer.duration_s,
    }

    def record(kind: str, dtype: str | None, value: float | None, detail: dict[str, Any]) -> MeasuredPeak:
        return MeasuredPeak(
            framework=row.framework, framework_version=answer.framework_version, device=row.device,
            threads=row.threads, kind=kind, dtype=dtype, value=value, detail={**detail, **context},
        )  # fmt: skip

    records = [record("matmul", dtype, m.peak_flops_per_s, m.to_json()) for dtype, m in answer.matmul.items()]
    records.append(record("bandwidth", None, answer.bandwidth.peak_bytes_per_s, answer.bandwidth.to_json()))
    if answer.dispatch is not None:
        records.append(record("dispatch", None, answer.dispatch.timed.median_s, answer.dispatch.to_json()))
    for copy in answer.copies:
        detail = {k: v for k, v in copy.to_json().items() if k != "kind"}  # the kind is the record's own column
        records.append(record(copy.kind, None, copy.bytes_per_s, detail))
    return records
