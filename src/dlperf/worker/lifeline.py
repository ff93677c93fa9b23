"""A child's side of the lifeline (the parent's is `runner/lifeline.py`): die with the parent.

The kernel kills a child when its parent ends (PR_SET_PDEATHSIG), even by SIGKILL, when nothing of dlperf runs to stop
it. dlperf's launcher arms it before exec (`runner/lifeline.before_exec`); a child calls `die_with_parent()` first all
the same, which arms what the launcher does not start: the workers of torchrun's agent (the agent itself is started
through `python -m dlperf.worker.lifeline`), which then die with the agent.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys

from dlperf.measure.system import prctl
from dlperf.protocol import PARENT_VAR

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Be killed when the parent named in DLPERF_PARENT_PID ends; end now if it already has. Then name this process
    the parent its own children expect (torchrun's workers). Nothing when the variable is unset (started by hand)."""
    expected = os.environ.get(PARENT_VAR)
    if not expected or expected == str(os.getpid()):  # unset, or armed already in this process
        return
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(expected):  # the parent died before the call: nobody would kill this process
        os._exit(1)
    os.environ[PARENT_VAR] = str(os.getpid())


def main(argv: list[str]) -> None:
    """`python -m dlperf.worker.lifeline MODULE ARGS...`: run MODULE as `python -m` would, dying with the parent."""
    die_with_parent()
    sys.argv = argv[1:]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv)
