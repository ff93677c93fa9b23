"""Errors a user can cause. The CLI prints them as one line on stderr and exits 2."""


class UsageError(Exception):
    """Bad input: nothing ran, nothing was written."""


class MissingDependency(UsageError):
    """An optional dependency is absent; the message says what to install."""


class StoreFault(UsageError):
    """The store's file could not be read or written (permissions, a full disk, a damaged row): one line, exit 2."""


class UnreadableRow(StoreFault):
    """A stored row that no longer decodes (a damaged data page): names its run and cell, so a view can leave the
    cell out and say so, or stop."""

    def __init__(self, run_id: int, key: str, what: str, reason: str) -> None:
        super().__init__(f"run {run_id}, cell {key}: its stored {what} cannot be read ({reason})")
        self.run_id, self.key = run_id, key
