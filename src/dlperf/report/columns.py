"""The columns of every view: `cpu:1`, `cpu:2`, ... for CPU thread counts, then accelerators, then `ddp:NxT`."""

from __future__ import annotations

import re

from dlperf.protocol import column_name


def column_of(cell: dict) -> str:
    return column_name(cell["device"], cell["threads"], cell.get("nproc") or 0)


def column_order(column: str) -> tuple:
    """cpu:1, cpu:2, ... first, then accelerators, then ddp:1x2, ddp:2x1, ... by their numbers."""
    kind, _, index = column.partition(":")
    numbers = tuple(int(n) for n in re.findall(r"\d+", index))
    return (kind != "cpu", kind == "ddp", kind, numbers or (-1,), index)
