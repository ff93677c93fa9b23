"""The comm worker: what torchrun starts in every process of a `dlperf comm` job (a `CommTask`).

    python -m dlperf.worker.comm TASK.json EVENTS.jsonl

Every rank reports on its own file, EVENTS.jsonl.rankR. Every rank ends with the same figures, so only the first
process of each node (LOCAL_RANK 0) gives the `Answer` (an `answers.CommAnswer`); before it, an `AnswerPart` as each
size is measured (the answer of that size alone), which the parent keeps of a job interrupted or failed later; it also
reports `Joined` once the processes have met, so a job that timed out says whether its nodes ever did. A rank that
fails reports an `Error` stamped with the time: the first failure is the cause, the ones after it are its peers losing
their connection. Standard library only here; torch is imported through `dlperf.frameworks.torch.comm`.
"""

from __future__ import annotations

import os
import sys

from dlperf.answers import CommAnswer
from dlperf.protocol import Answer, AnswerPart, CommTask, Joined, Reporter
from dlperf.worker.child import exit_now, serve


def measure(task: CommTask, emit: Reporter) -> None:
    from dlperf.frameworks.torch import comm as torch_comm

    first_here = int(os.environ.get("LOCAL_RANK", 0)) == 0

    def joined() -> None:
        if first_here:
            emit(Joined())

    def measured(part: dict) -> None:  # one size, flushed as it ends: kept of a job stopped later
        if first_here:
            emit(AnswerPart(CommAnswer.from_json(part).to_json()))

    result = torch_comm.run(task, joined, measured)
    if first_here:
        emit(Answer(CommAnswer.from_json(result).to_json()))


def main(argv: list[str]) -> int:
    return serve(argv, measure)


if __name__ == "__main__":
    exit_now(main(sys.argv))  # the result is on disk: skip the teardown that can abort under gloo
