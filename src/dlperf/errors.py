"""Errors a user can cause. The CLI prints them as one line on stderr and exits 2."""


class UsageError(Exception):
    """Bad input: nothing ran, nothing was written."""


class MissingDependency(UsageError):
    """An optional dependency is absent; the message says what to install."""
