"""The order of every view's columns (a cell's `column`): `cpu:1`, `cpu:2`, ... for CPU thread counts, then
accelerators, then `ddp:NxT`."""

from __future__ import annotations

import re


def column_order(column: str) -> tuple:
    """cpu:1, cpu:2, ... first, then accelerators, then ddp:1x2, ddp:2x1, ... by their numbers."""
    kind, _, index = column.partition(":")
    numbers = tuple(int(n) for n in re.findall(r"\d+", index))
    return (kind != "cpu", kind == "ddp", kind, numbers or (-1,), index)
