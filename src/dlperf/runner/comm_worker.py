"""The comm worker: what torchrun starts in every process of a `dlperf comm` job.

    python -m dlperf.runner.comm_worker TASK.json RESULT.json

TASK.json: backend, threads, sizes, iters, warmup, timeout. Every rank ends with the same figures, so the first
process of each node (LOCAL_RANK 0) writes them to its node's RESULT.json: {"status": "ok", "result": ...}, whole or
not at all. A rank that fails writes {"status": "failed", "error": ..., "rank": ...} unless a failure is there already:
the first failure is the cause, the ones after it are its peers losing their connection. RESULT.json.joined appears
once the processes have met, so a job that timed out says whether its nodes ever did. Standard library only here;
torch is imported through `dlperf.frameworks.torch.comm`.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from dlperf.runner.peak_worker import describe, write_atomically


def joined_marker(result_file: str) -> Path:
    return Path(f"{result_file}.joined")


def write_first(path: str, payload: dict, rank: int) -> None:
    """Write `payload` to `path` whole, unless `path` exists (`os.link` refuses to replace it)."""
    tmp = f"{path}.{rank}.partial"
    with open(tmp, "w") as f:
        json.dump(payload, f)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        task = json.load(f)
    rank, local_rank = int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))
    first_here = local_rank == 0
    try:
        from dlperf.frameworks.torch import comm as torch_comm

        result = torch_comm.run(task, lambda: joined_marker(argv[2]).touch() if first_here else None)
    except Exception as exc:  # the parent reports it as the job's failure
        answer = {"status": "failed", "error": describe(exc), "rank": rank, "traceback": traceback.format_exc()}
        write_first(argv[2], answer, rank)
        return 1
    if first_here:
        write_atomically(argv[2], {"status": "ok", "result": result})
    return 0


if __name__ == "__main__":
    from dlperf.runner.distributed import exit_now

    exit_now(main(sys.argv))  # the result is written: skip the teardown that can abort under gloo
