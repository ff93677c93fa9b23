"""Typed records that travel as JSON between a child and its parent: the answers of `answers.py`.

A `Wire` dataclass's JSON object has its fields' names as keys, in their order, so a producer that wrote a dict
before writes the same object now. Two markers cover the shapes such dicts take: a field whose metadata is `ABSENT`
is left out of the JSON when it is None (a key its producer writes only sometimes), and one whose metadata is `FLAT`
spreads a nested record's keys into its parent's object (one set of figures shared by several records). `from_json`
builds the record back, nested records and lists and dicts of them included, and says which keys are missing rather
than failing on the first read.

Standard library only: every child imports this.
"""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import MISSING, Field, fields
from typing import Any, Self

MARK = "dlperf.wire"  # the metadata key of a field's marker
ABSENT = {MARK: "absent"}  # `field(default=None, metadata=ABSENT)`: left out of the JSON when None
FLAT = {MARK: "flat"}  # `field(metadata=FLAT)`: a nested record whose keys are its parent's (None: none of them)


def _is(f: Field, marker: dict[str, str]) -> bool:
    return f.metadata.get(MARK) == marker[MARK]


class Wire:
    """A dataclass that is a JSON object with its fields as keys (see the module's docstring)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and (_is(f, ABSENT) or _is(f, FLAT)):
                continue
            if _is(f, FLAT):
                out.update(value.to_json())
            else:
                out[f.name] = plain(value)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Self:
        """The record of a JSON object; keys it does not know are left out. A missing key is a ValueError naming it."""
        if not isinstance(d, dict):
            raise ValueError(f"{cls.__name__}: expected a JSON object, got {type(d).__name__}")
        missing = [f.name for f in fields(cls) if _required(f) and not _is(f, FLAT) and f.name not in d]
        if missing:
            raise ValueError(f"{cls.__name__}: no {', '.join(map(repr, missing))} in {sorted(d)}")
        hints, values = _hints(cls), {}
        for f in fields(cls):
            if _is(f, FLAT):
                values[f.name] = _flat(f, hints[f.name], d)
            elif f.name in d:
                values[f.name] = decode(hints[f.name], d[f.name])
        return cls(**values)


def plain(value: Any) -> Any:
    """A value as JSON: records as their objects, lists and dicts of them too."""
    if isinstance(value, Wire):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def decode(hint: Any, value: Any) -> Any:
    """`value` read from JSON as the type `hint` says: records, lists and dicts of them; anything else as it is."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if value is None:
        return None
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return decode(inner[0], value) if len(inner) == 1 else value
    if isinstance(hint, type) and issubclass(hint, Wire):
        return hint.from_json(value)
    if origin is list:
        return [decode(args[0], v) for v in value]
    if origin is dict:
        return {k: decode(args[1], v) for k, v in value.items()}
    return value


def _flat(f: Field, hint: Any, d: dict[str, Any]) -> Any:
    """A flat field's record, read from its parent's object; an optional one is None when none of its keys is there."""
    kind = next(a for a in (hint, *typing.get_args(hint)) if isinstance(a, type) and issubclass(a, Wire))
    return kind.from_json(d) if _required(f) or any(g.name in d for g in fields(kind)) else None


def _required(f: Field) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)
