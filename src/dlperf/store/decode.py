"""Stored rows decoded into records: a text that is not UTF-8 (a damaged page) or a row that no longer decodes is
named (its run, its cell) where SQLite's own decoding would stop the whole read without saying which row."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from dlperf.errors import StoreFault, UnreadableRow
from dlperf.store.records import RunRecord


class Undecodable:
    """A stored text whose bytes are not UTF-8 (a damaged page), read in its place (`text_factory`): the row it is in is
    then named and left out like any other damaged row, where SQLite's own decoding stopped the whole read ("Could not
    decode to UTF-8 column ...") and could not say which row."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def __repr__(self) -> str:
        return f"<{len(self.raw)} bytes that are not UTF-8>"


def text_factory(raw: bytes) -> str | Undecodable:
    """The connection's text factory: UTF-8, as SQLite's default, but a text that is not UTF-8 becomes an Undecodable
    (its row is refused where it is decoded: `whole`)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return Undecodable(raw)


def whole(row: dict[str, Any]) -> dict[str, Any]:
    """The row, when every text in it is UTF-8; a ValueError naming the first column that is not."""
    bad = next((column for column, value in row.items() if isinstance(value, Undecodable)), None)
    if bad is not None:
        raise ValueError(f"its column {bad!r} is not UTF-8 text")
    return row


def decoded(from_row: Callable, row: dict[str, Any], run_id: int, what: str):
    """A record from its row; a row whose text no longer decodes (a damaged page: `PRAGMA integrity_check` can
    still say ok), as JSON or as UTF-8, is an UnreadableRow naming its run and cell."""
    try:
        return from_row(whole(row))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # JSONDecodeError and a bad status are ValueErrors
        key = row.get("key") or row.get("cell_key")
        raise UnreadableRow(run_id, str(key), what, f"{type(exc).__name__}: {exc}") from None


def run_record(row: sqlite3.Row) -> RunRecord:
    """A run from its row; one that no longer decodes stops the command with one line naming the run (a run without
    its spec or environment cannot be shown in part)."""
    found = dict(row)
    try:
        return RunRecord.from_row(whole(found))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise StoreFault(f"run {found.get('id')}: its stored row cannot be read ({why})") from None
