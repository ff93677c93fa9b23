"""What the commands share: the parser that turns a bad flag into one line and exit code 2, closed-choice flags,
the database path, and printing a rich table with the lines under it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from dlperf.errors import UsageError

if TYPE_CHECKING:
    from dlperf.store import Store


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr and exit code 2, like every other bad input."""

    def error(self, message: str):
        raise UsageError(message)


def either(options: Sequence[str]) -> str:
    """ "a or b", "a, b or c"."""
    return " or ".join(options) if len(options) < 3 else f"{', '.join(options[:-1])} or {options[-1]}"


def choice(flag: str, options: Sequence[str]) -> Callable[[str], str]:
    """An argparse `type` for a closed set: anything else is a UsageError naming the flag and what it expects."""

    def parse(text: str) -> str:
        if text not in options:
            raise UsageError(f"{flag} {text!r}: expected {either(options)}")
        return text

    return parse


def add_format(p: argparse.ArgumentParser, *options: str, help: str | None = None) -> None:
    """`--format`, the first option the default."""
    p.add_argument("--format", default=options[0], type=choice("--format", options), help=help or either(options))


def db_path(args: argparse.Namespace) -> str:
    """--db, else $DLPERF_DB, else ./dlperf.db."""
    from dlperf.store import default_db

    return getattr(args, "db", None) or default_db()


def open_store(args: argparse.Namespace, *, create: bool = False) -> Store:
    from dlperf.store import Store

    return Store.open(db_path(args), create=create)


def warn(message: str) -> None:
    print(f"dlperf: warning: {message}", file=sys.stderr, flush=True)


def print_rich(renderable: Any, lines: Sequence[str] = (), notes: Sequence[str] = (), width: int | None = None) -> None:
    """A rich table, then plain lines and notes (never read as markup: they hold names from the store)."""
    from rich.console import Console

    console = Console(width=width)
    console.print(renderable)
    for line in lines:
        console.print(line, highlight=False, markup=False)
    for note in notes:
        console.print(f"  note: {note}", highlight=False, markup=False)
