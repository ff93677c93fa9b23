"""The peak worker: one child process measures the peaks of one device at one thread count (a `PeakTask`).

    python -m dlperf.worker.peak TASK.json EVENTS.jsonl

It answers once: an `Answer` event with the peaks (an `answers.PeakAnswer`), or an `Error`. The thread variables
were set by the parent before this interpreter started; the framework is imported here, through its `peak` module,
and nothing else outside the standard library.
"""

from __future__ import annotations

import importlib
import sys

from dlperf.answers import PeakAnswer
from dlperf.protocol import Answer, PeakTask, Reporter
from dlperf.worker.child import exit_now, serve


def measure(task: PeakTask, emit: Reporter) -> None:
    """Size the framework's thread pools, then measure; the settings in effect are returned with the peaks, as a
    `PeakAnswer` (a figure the framework's module did not give is an error naming it)."""
    module = importlib.import_module(f"dlperf.frameworks.{task.framework}.peak")
    settings = module.configure_threads(task.threads)
    result = module.measure_peaks(
        task.device, task.dtypes, task.sizes, task.bandwidth_bytes, task.max_time, list(task.copy_sizes)
    )
    answer = PeakAnswer.from_json({**result, "threads": task.threads, "settings": settings})
    emit(Answer(answer.to_json()))


def main(argv: list[str]) -> int:
    return serve(argv, measure)


if __name__ == "__main__":
    exit_now(main(sys.argv))  # every event is on disk: skip the interpreter's teardown
