"""The MultiWorkerMirroredStrategy worker: one worker of a TensorFlow multi-process cell (a `MultiWorkerTask`),
started with its TF_CONFIG by dlperf's spawner (`worker/spawn.py`).

    python -m dlperf.worker.spawn ... -m dlperf.worker.multiworker TASK.json EVENTS.jsonl

Measured as a DDP process is (`worker/ddp.py`): the same number of steps on every worker, each step's time the
slowest worker's, every worker's own steps kept, its memory and its exposed communication; TensorFlow's collectives
(`frameworks/tensorflow/multiworker.py`) instead of torch.distributed's.
"""

from __future__ import annotations

import sys
from types import ModuleType

from dlperf.protocol import MultiWorkerTask, Reporter
from dlperf.worker import ddp
from dlperf.worker.child import exit_now, serve


def tensorflow_engine() -> ModuleType:
    from dlperf.frameworks.tensorflow import multiworker

    return multiworker


def run_process(task: MultiWorkerTask, emit: Reporter) -> None:
    ddp.run_process(task, emit, tensorflow_engine)  # imported once the allocator's mode is applied


def main(argv: list[str]) -> int:
    return serve(argv, run_process)


if __name__ == "__main__":
    exit_now(main(sys.argv))  # every event is on disk: the spawner sees this worker end
