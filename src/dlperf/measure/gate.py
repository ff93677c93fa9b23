"""The device gate of `dlperf run --compile-at-once N`: cells that compile at once, each timed alone.

The cells of a group share one lock file (`runner/sweep.py` makes it, for compiled cells on one device). Each
child holds it shared from its first instruction, before the framework is imported, through its build and its
compilation; exclusive from its warm-up to its last timed step; shared again for its untimed extras (FLOP count,
memory step, loss check) until it ends. So a timed step never runs beside another cell's import, build,
compilation or extras, while compilations, which take most of a compiled cell's time and mostly one thread each,
run side by side. The parent holds the lock shared as well until every child of the group holds its own, so a child
that starts late cannot find it free while another times. It is a `flock`: the kernel releases it when a process
ends, however it ends. Both sides use it (a child's `worker/cell.py`, the parent's `runner/sweep.py`): standard
library only.
"""

from __future__ import annotations

import fcntl
import os


class Gate:
    """One process's hold on its group's lock file; a cell with no group (`path` None) holds nothing."""

    def __init__(self, path: str | None) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600) if path else None

    def work(self) -> None:
        """Shared: beside the group's other work, never beside its timing."""
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_SH)

    def timing(self) -> None:
        """Exclusive, for the warm-up and the timed steps: waits while the group's other cells compile, build or
        check, or another is timed."""
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self) -> None:
        """No hold any longer (a process's end releases it too)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
