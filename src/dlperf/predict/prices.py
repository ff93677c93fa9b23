"""What a GPU-hour costs: the on-demand price table dlperf ships (`dlperf/data/gpu_prices.csv`: per GPU of the spec
table, the lowest and highest $/GPU-hour seen, the sources, region and the date they were read), and a user's own rows
(`--prices FILE.csv` or `$DLPERF_PRICES`: a negotiated rate, their own hardware's amortized cost) merged over it, a row
of the same GPU replacing the built-in one. A file is checked as `--gpu-specs` is: a wrong cell is one line naming the
file, the line and the column; a GPU the spec table lacks is one line too (add it with `--gpu-specs`)."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from dlperf.errors import UsageError
from dlperf.predict import gpus

ENV = "DLPERF_PRICES"
REQUIRED = ("gpu", "usd_per_hour_low", "usd_per_hour_high")
COLUMNS = (*REQUIRED, "region", "date", "sources")
DOLLARS = (0.001, 1000.0)  # the plausible range of one GPU-hour's price, US dollars: a tenth of a cent to a thousand
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)


@dataclass(frozen=True)
class Price:
    gpu: str  # the spec table's name
    low: float  # US dollars per GPU-hour
    high: float
    region: str = ""
    date: str = ""  # YYYY-MM-DD: when the price was read
    sources: str = ""
    user: bool = False  # from --prices / $DLPERF_PRICES

    @property
    def one_source(self) -> bool:
        return self.sources.startswith("one source")


@cache
def builtin() -> tuple[Price, ...]:
    text = resources.files("dlperf").joinpath("data/gpu_prices.csv").read_text()
    return parse(text, "dlperf/data/gpu_prices.csv")


_user: tuple[Price, ...] = ()


def use_prices(path: str | None) -> None:
    """Merge a user's price file over the built-in rows for this process: `path`, else $DLPERF_PRICES, else none.
    Read after `gpus.use_specs`, so a row may price a GPU the user's spec file adds."""
    global _user
    if path is not None and not path.strip():  # `--prices "$FILE"` with $FILE unset: not $DLPERF_PRICES or none
        raise UsageError(f"--prices {path!r}: expected a CSV file, got nothing")
    flag = "--prices" if path else ENV
    path = path or os.environ.get(ENV) or None
    if path is None:
        _user = ()
        return
    where = f"{flag} {path}"
    text = gpus.read_text(path, where)
    _user = tuple(Price(**{**p.__dict__, "user": True}) for p in parse(text, where))


def table() -> tuple[Price, ...]:
    """The built-in rows, a user's row of the same GPU in place of its built-in one, then the user's new rows."""
    mine = {p.gpu: p for p in _user}
    merged = [mine.pop(p.gpu, p) for p in builtin()]
    return (*merged, *mine.values())


def price(gpu: gpus.GPU) -> Price | None:
    return next((p for p in table() if p.gpu == gpu.name), None)


def priced() -> tuple[gpus.GPU, ...]:
    """Every GPU of the spec table with a price row: those the cost can rank, `dlperf advise`'s default GPUs (each
    command's default and why it differs: defaults.py, above `BRACKET`)."""
    have = {p.gpu for p in table()}
    return tuple(g for g in gpus.table() if g.name in have)


def parse(text: str, where: str) -> tuple[Price, ...]:
    """Rows of the table's format (lines starting with # are comments); a wrong one is a UsageError
    `where, line N, column C: what is wrong`."""
    found, seen = [], {}
    for line, cells in gpus.csv_rows(text, where, COLUMNS, REQUIRED):
        p = _row(cells, lambda column, line=line: f"{where}, line {line}, column {column}")
        if p.gpu in seen:
            raise UsageError(f"{where}, line {line}, column gpu: {p.gpu!r} is priced on line {seen[p.gpu]} already")
        seen[p.gpu] = line
        found.append(p)
    if not found:
        raise UsageError(f"{where}: no price rows (the header, then one row per GPU)")
    return tuple(found)


def _row(cells: dict[str, str], at) -> Price:
    if not cells["gpu"]:
        raise UsageError(f"{at('gpu')}: empty (every row names its GPU)")
    try:
        gpu = gpus.lookup(cells["gpu"], flag="").name
    except UsageError as e:
        raise UsageError(f"{at('gpu')}: {str(e).strip()} (a GPU of your own: add its row with --gpu-specs)") from None
    low, high = _dollars(cells, "usd_per_hour_low", at), _dollars(cells, "usd_per_hour_high", at)
    if high < low:
        raise UsageError(f"{at('usd_per_hour_high')}: {high:g} is below usd_per_hour_low {low:g}")
    date = cells.get("date", "")
    if date and not _real_date(date):
        what = "no day of the calendar" if _DATE.fullmatch(date) else "expected YYYY-MM-DD"
        raise UsageError(f"{at('date')}: {date!r}, {what} (the day the price was read)")
    return Price(gpu, low, high, cells.get("region", ""), date, cells.get("sources", ""))


def _real_date(text: str) -> bool:
    """YYYY-MM-DD, and a day of the calendar: 2026-13-01 and 2026-02-30 matched the pattern and were kept."""
    import datetime

    try:
        return bool(_DATE.fullmatch(text)) and bool(datetime.date.fromisoformat(text))
    except ValueError:
        return False


def _dollars(cells: dict[str, str], column: str, at) -> float:
    text = cells[column]
    if not text:
        raise UsageError(f"{at(column)}: empty (US dollars per GPU-hour)")
    try:
        value = float(text.removeprefix("$"))
    except ValueError:
        value = math.nan
    if not math.isfinite(value):  # float() takes "nan", "inf" and 1e400 too
        raise UsageError(f"{at(column)}: {text!r} is not a number (US dollars per GPU-hour)")
    if not value > 0:
        raise UsageError(f"{at(column)}: {text} (a price must be above 0)")
    least, most = DOLLARS
    if not least <= value <= most:  # 1e300 was taken, and every cost said in it
        raise UsageError(
            f"{at(column)}: {text} is outside ${least:g} to ${most:,g}, the range a GPU-hour's price "
            "can take here (a price per month, or a whole machine's? it is per GPU and per hour)"
        )
    return value
