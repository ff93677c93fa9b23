"""The parent side of `dlperf peak`: one child process per (device, thread count) runs `runner/peak_worker.py`, with
the thread variables fixed before the framework loads, as a sweep's cells are; each child's result becomes store
records. Nothing here imports a framework.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.vocab import DeviceKind, Status

if TYPE_CHECKING:
    from dlperf.runner.launch import ChildResult

Progress = Callable[[int, int, str, int, dict | None], None]


def is_cpu(device: str) -> bool:
    return device.split(":")[0] == DeviceKind.CPU


def worker_command(python: str, task_file: str, result_file: str) -> list[str]:
    return [python, "-m", "dlperf.runner.peak_worker", task_file, result_file]


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
) -> list[dict]:
    """One row per (device, threads): {"framework", "device", "threads", "status", "error", "duration_s", "result"}.

    A child that fails or times out gives a row with that status and the reason, never an exception; an interrupt
    (Ctrl-C) stops the running child's process tree and propagates. `progress(done, total, device, threads, row)` is
    called before each child (row None) and after it (with its row)."""
    request = {"dtypes": dtypes, "sizes": sizes, "bandwidth_bytes": bandwidth_bytes, "max_time": max_time}
    todo = jobs(devices, threads_list)
    rows = []
    for i, (device, threads) in enumerate(todo):
        if progress:
            progress(i, len(todo), device, threads, None)
        rows.append(measure_one(framework, device, threads, request, timeout))
        if progress:
            progress(i + 1, len(todo), device, threads, rows[-1])
    return rows


def measure_one(framework: str, device: str, threads: int, request: dict, timeout: float) -> dict:
    """One child, in a temporary directory of its own that holds its task, its result and its logs."""
    from dlperf.errors import MissingDependency
    from dlperf.runner.launch import child_env, run_child
    from dlperf.runner.sweep import interpreter_for

    try:
        python = interpreter_for(framework)
    except MissingDependency as exc:  # no child to start: the row says why
        row = {"framework": framework, "device": device, "threads": threads, "duration_s": 0.0}
        return {**row, "status": Status.FAILED.value, "error": str(exc), "result": None}
    task = {"framework": framework, "device": device, "threads": threads, **request}
    with tempfile.TemporaryDirectory(prefix="dlperf-peak-") as tmp:
        tmpdir = Path(tmp)
        (tmpdir / "task.json").write_text(json.dumps(task))
        cmd = worker_command(python, str(tmpdir / "task.json"), str(tmpdir / "result.json"))
        child = run_child(cmd, child_env(os.environ, threads, python), timeout, tmpdir)
        answer = read_answer(tmpdir / "result.json")
    return row_of(framework, device, threads, child, answer, timeout)


def read_answer(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def row_of(framework: str, device: str, threads: int, child: ChildResult, answer: dict | None, timeout: float) -> dict:
    """The row of one child: its result, or why there is none."""
    row = {"framework": framework, "device": device, "threads": threads, "duration_s": child.duration_s}
    if answer is not None and answer.get("status") == Status.OK and not child.timed_out:
        return {**row, "status": Status.OK.value, "error": None, "result": answer["result"]}
    if child.timed_out:
        status, error = Status.TIMEOUT, f"exceeded --timeout {timeout:g} s"
    elif answer is not None and answer.get("error"):
        status, error = Status.FAILED, answer["error"]
    else:
        last = (child.stderr_tail.strip().splitlines() or [""])[-1]
        why = child.crashed_reason or "worker ended without a result"
        status, error = Status.FAILED, f"{why}{': ' + last if last else ''}"
    return {**row, "status": status.value, "error": error, "result": None}


def peak_records(row: dict) -> list[dict[str, Any]]:
    """A measured row as store records: one per dtype (kind matmul, FLOP/s) and one for bandwidth (bytes/s).

    A dtype the device cannot do, or whose every size was too slow to time, is kept with value None and the reason."""
    result = row["result"]
    common = {
        "framework": row["framework"],
        "framework_version": result.get("framework_version"),
        "device": row["device"],
        "threads": row["threads"],
    }
    context = {k: result.get(k) for k in ("settings", "others_cpu_share", "duration_s")}
    records = [
        {**common, "kind": "matmul", "dtype": dtype, "value": entry.get("peak_flops_per_s"), "detail": entry}
        for dtype, entry in result["matmul"].items()
    ]
    bandwidth = result["bandwidth"]
    records.append(
        {**common, "kind": "bandwidth", "dtype": None, "value": bandwidth["peak_bytes_per_s"], "detail": bandwidth}
    )
    for record in records:
        record["detail"] = {**record["detail"], **context}
    return records
