"""What the commands share: the parser that turns a bad flag into one line and exit code 2, closed-choice and numeric
flags, the database path, and printing a rich table with the lines under it."""

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


def whole(flag: str, least: int = 0, **most: int) -> Callable[[str], int]:
    """An argparse `type` for a whole number from `least` (`most=`: an upper bound below SQLite's integer)."""

    def parse(text: str) -> int:
        from dlperf.spec import whole_number

        return whole_number(text, flag, least, **most)

    parse.number = "whole"  # marks a numeric flag: tests/test_cli.py tries every bad number on each
    return parse


def real(flag: str, least: float = 0.0, above: bool = True, **most: float) -> Callable[[str], float]:
    """An argparse `type` for a finite number above `least` (from it, when not `above`); seconds by default, so
    at most the longest wait the platform can make (`most=`: another bound)."""

    def parse(text: str) -> float:
        from dlperf.spec import real_number

        return real_number(text, flag, least, above=above, **most)

    parse.number = "real"
    return parse


def whole_list(flag: str) -> Callable[[str], tuple[int, ...]]:
    """An argparse `type` for a comma list of positive whole numbers (1,2,8), in order, without repeats."""

    def parse(text: str) -> tuple[int, ...]:
        from dlperf.spec import positive_ints

        return tuple(dict.fromkeys(positive_ints(text, flag)))

    parse.number = "whole list"
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
    from dlperf.report.format import terminal

    print(f"dlperf: warning: {terminal(message)}", file=sys.stderr, flush=True)


def print_rich(renderable: Any, lines: Sequence[str] = (), notes: Sequence[str] = (), width: int | None = None) -> None:
    """A rich table, then plain lines and notes (never read as markup, control characters escaped: they hold names
    and errors from the store)."""
    from rich.console import Console

    from dlperf.report.format import terminal

    console = Console(width=width)
    console.print(renderable)
    for line in lines:
        console.print(terminal(line), highlight=False, markup=False)
    for note in notes:
        console.print(f"  note: {terminal(note)}", highlight=False, markup=False)
