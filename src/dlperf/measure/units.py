"""Numbers for a person: durations and rates to three significant figures, never in scientific notation. Here,
below every folder, so that the parent's side (runner/) and the views (report/) format alike."""

from __future__ import annotations

import math
from collections.abc import Callable


def significant(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant figures, trailing zeros kept: 2.10, 21.0, 210."""
    if value == 0 or not math.isfinite(value):
        return f"{value:.{digits - 1}f}"
    value = rounded(value, digits)  # 99.96 is 100, not 100.0: the figures counted after rounding
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def rounded(value: float, digits: int = 3) -> float:
    """`value` rounded to `digits` significant figures."""
    return float(f"{value:.{digits - 1}e}") if math.isfinite(value) else value


def figure(value: float) -> str:
    """A rate or a ratio to three significant figures, trailing zeros dropped, never in scientific notation: 40 GB/s,
    2.5 FLOP/byte, 14600 GFLOP/s (`:.3g` writes 1.46e+04)."""
    if value == 0 or not math.isfinite(value) or 1e-3 <= abs(value) < 1e3:
        return f"{value:.3g}"
    if abs(value) >= 1e3:
        return f"{round(value, 2 - math.floor(math.log10(abs(value)))):.0f}"
    text = significant(value)
    return text.rstrip("0").rstrip(".")


def times(value: float) -> str:
    """A speed-up factor: two decimals (1.07x), and below 0.1 two significant figures, where two decimals read 0.00x
    for a mode 400 times slower (0.0025x)."""
    return f"{value:.2f}x" if not 0 < abs(value) < 0.1 else f"{significant(value, 2)}x"


def short_time(value: float, digits: int = 3) -> str:
    """A time under 0.1 s in the unit it reads in: 21.0 ms, 850 µs, 8.13 ns (three significant figures; 999.96 µs is
    1.00 ms). Under a microsecond in ns: a batch of one crossing a host link in 8.13 ns read "0.00813 µs"."""
    if rounded(value, digits) >= 1e-3:
        return f"{significant(value * 1e3, digits)} ms"
    if rounded(value, digits) >= 1e-6 or value <= 0:  # 0 and a negative figure as before
        return f"{significant(value * 1e6, digits)} µs"
    return f"{significant(value * 1e9, digits)} ns"


def seconds(value: float | None, digits: int = 3) -> str:
    """Seconds with three significant figures, in the unit a person reads fastest: 14.6 s, 0.500 s, 21.0 ms, 850 µs,
    and from 1000 s on 24.3 min. Every duration a view prints goes through here (or `table_seconds`), never `:.3g`,
    which writes a 14.6 s step as 1.46e+04 ms."""
    if value is None:
        return "-"
    if rounded(value, digits) >= 1000:
        return f"{significant(value / 60, digits)} min"
    if rounded(value, digits) >= 0.1:
        return f"{significant(value, digits)} s"
    return short_time(value, digits)


def interval(low: float, high: float, unit: Callable[[float, int], str] = seconds, sep: str = "-") -> str:
    """An interval's two ends with as many significant figures as tell them apart (3 to 5): a step's 95% interval
    over thousands of steps is often narrower than three figures, and "189 µs-189 µs" reads as a mistake where
    "188.9 µs-189.3 µs" does not. Ends that are the same to five figures are one figure, to three."""
    for digits in range(3, 6):
        a, b = unit(low, digits), unit(high, digits)
        if a != b:
            return f"{a}{sep}{b}"
    return unit(low, 3)


def plural(n: int, word: str, suffix: str = "s") -> str:
    """A count and its noun, singular for one: "1 thread", "2 threads", "3 processes" (suffix "es")."""
    return f"{n:,} {word}{suffix * (n != 1)}"


def named(word: str, ids) -> str:
    """Things named by their numbers, the noun singular for one: "run 3", "runs 1, 2"."""
    ids = list(ids)
    return f"{word}{'s' * (len(ids) != 1)} {', '.join(map(str, ids))}"


def agreeing(n: int, one: str, many: str) -> str:
    """The verb (or words) that agree with `n` things: `one` for one, `many` for none or several ("keeps", "keep")."""
    return one if n == 1 else many
