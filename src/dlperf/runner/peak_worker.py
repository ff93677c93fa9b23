"""The peak worker: one child process measures the peaks of one device at one thread count.

    python -m dlperf.runner.peak_worker TASK.json RESULT.json

TASK.json: framework, device, threads, dtypes, sizes, bandwidth_bytes, max_time. RESULT.json: {"status": "ok",
"result": ...} or {"status": "failed", "error": ..., "traceback": ...}, written whole or not at all, so the parent
never reads half a result. The thread variables were set by the parent before this interpreter started; the framework
is imported here, through its `<framework>_peak` module, and nothing else outside the standard library.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback


def measure(task: dict) -> dict:
    """Size the framework's thread pools, then measure; the settings in effect are returned with the peaks."""
    module = importlib.import_module(f"dlperf.frameworks.{task['framework']}.peak")
    settings = module.configure_threads(task["threads"])
    result = module.measure_peaks(
        task["device"], task["dtypes"], task["sizes"], task["bandwidth_bytes"], task["max_time"]
    )
    return {**result, "threads": task["threads"], "settings": settings}


def write_atomically(path: str, payload: dict) -> None:
    tmp = f"{path}.partial"
    with open(tmp, "w") as f:
        json.dump(payload, f)
    os.replace(tmp, path)


def describe(exc: BaseException) -> str:
    return (f"{type(exc).__name__}: {exc}".strip().splitlines() or [type(exc).__name__])[0][:500]


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        task = json.load(f)
    try:
        answer, code = {"status": "ok", "result": measure(task)}, 0
    except Exception as exc:  # MemoryError included: the parent reports it as this device's failure
        answer, code = {"status": "failed", "error": describe(exc), "traceback": traceback.format_exc()}, 1
    write_atomically(argv[2], answer)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
