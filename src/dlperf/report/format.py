"""Number formatting shared by the views, and what makes a user's text safe to show on a terminal."""

from __future__ import annotations

import re

from dlperf.measure.units import figure, interval, seconds, short_time, significant  # noqa: F401 - the views' formatters

# C0 and C1 controls (ESC, CSI as \x9b, BEL, backspace, carriage return, ...), DEL and the bidirectional overrides:
# a workload name or an error from the user's model holding them could recolour, move the cursor, retitle the window
# or reorder what is shown
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal(text: str, newlines: bool = False) -> str:
    """`text` with every control character shown escaped (ESC as `\\x1b`), ordinary Unicode kept; with `newlines`,
    line breaks are kept (a multi-line document), else escaped too (one line stays one line)."""
    pattern = _CONTROL_BUT_NEWLINE if newlines else _CONTROL
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def markup(text: str) -> str:
    """`text` for a rich markup string: terminal-safe, and `[bold]` or `[link=...]` in it printed as typed."""
    from rich.markup import escape

    return escape(terminal(text))


def table_seconds(value: float, digits: int = 3) -> str:
    """The Table-7 figure: seconds per mini-batch with the paper's three decimals from 0.1 s up, its unit said (a bare
    0.130 beside 10.9 ms in one column read as ms); a shorter step (a GPU's, a tiny network's) in ms or µs with three
    significant figures, where 0.0021 would show two. `digits` above 3: as many more decimals, or significant figures
    (an interval's ends told apart)."""
    return f"{value:.{digits}f} s" if value >= 0.1 else short_time(value, digits)


def duration(value: float | None) -> str:
    """A wall-clock span for a person: 45 s, 12 min, 1 h 05 min."""
    if value is None:
        return "-"
    if 0 < value < 0.95:
        return f"{value:.1f} s"  # never "0 s" for a span that took time
    if value < 90:
        return f"{value:.0f} s"
    if value < 5400:
        return f"{value / 60:.0f} min"
    return f"{int(value // 3600)} h {int(value % 3600 // 60):02d} min"


def count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def nbytes(value: int | None) -> str:
    """A memory size in binary units: 512 KiB, 3.4 GiB."""
    if value is None:
        return "-"
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    size, i = float(value), 0
    while size >= 1024 and i < len(units) - 1:
        size /= 1024
        i += 1
    return f"{size:.0f} {units[i]}" if i == 0 or size >= 100 else f"{size:.3g} {units[i]}"


def mib(size: int | None) -> str:
    """Whole MiB, as `dlperf fit` says its limit; under half a MiB in KiB or bytes (`--max-memory 1KB` was echoed as
    "0 MiB")."""
    if size is None:
        return "?"
    return f"{size / 2**20:,.0f} MiB" if size >= 2**19 else nbytes(size)
