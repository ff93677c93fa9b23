"""A flag's text read as a value: a whole or decimal number, a duration, a batch, a size, a comma list; a Python
caller's value in a flag's place (one value for a list, a path); and the names closest to a misspelt one. Bad input
is a UsageError naming the flag, in one line.

Standard library only, and none of dlperf's but `errors` and `defaults`: every command's argparse types read their
flags through these (`commands/common.py`), so a bad number's one-line error loads no more than the parsers do;
`spec.py` reads the request's lists through them too.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Iterable

from dlperf.defaults import FIT_MAX_BATCH, INT64_MAX, MAX_SECONDS
from dlperf.errors import UsageError

# ASCII digits only: int() and float() also take '٣', '３', '1_000', 'nan' and 'inf', none of which a flag means
_WHOLE = re.compile(r"[+-]?[0-9]+", re.ASCII)
GROUPED = re.compile(r"[1-9][0-9]{0,2}(,[0-9]{3})+", re.ASCII)  # 1,281,167: a count as dlperf prints it
DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


def as_listed(values: object) -> object:
    """A list argument as `make_spec` takes it: one value that is not a list in a list of its own (`threads=1`, one
    factory function as in `dlperf.run(make)`; an int workload is then said in one line by `source_of`, not a
    TypeError from deep inside); None, text (a comma list) and a list as they are."""
    if values is None or isinstance(values, str) or (isinstance(values, Iterable) and not callable(values)):
        return values
    return [values]


def split_list(text: str, flag: str) -> list[str]:
    if not isinstance(text, str):  # a Python caller's None or int, where a flag always gives text
        raise UsageError(f"{flag} {text!r}: expected a comma-separated list, not {type_of(text)}")
    items = [part.strip() for part in text.split(",")]
    if not text.strip():
        raise UsageError(f"{flag} {text!r}: expected a comma-separated list, got nothing")
    if "" in items:
        where = "a trailing" if items[-1] == "" else "a leading" if items[0] == "" else "a doubled"
        raise UsageError(f"{flag} {text!r}: an empty item ({where} comma)")
    return items


SAID_UP_TO = 10**6  # an upper bound beyond this (a sanity cap, no setting's) is named only to a value above it


def whole_number(text: str, flag: str, least: int = 0, most: int = INT64_MAX, grouped: bool = False) -> int:
    """A whole number in ASCII digits from `least` to `most`; anything else is a UsageError naming the flag.
    `grouped`: a count, which may be written in groups of three as dlperf prints it (`--samples 1,281,167`)."""
    digits = text.replace(",", "") if grouped and GROUPED.fullmatch(text.strip()) else text
    value, wanted = _whole_within(digits, least, most)
    if value is None:
        raise UsageError(f"{flag} {text!r}: expected {wanted}")
    return value


def _whole_within(text: str, least: int, most: int) -> tuple[int | None, str]:
    """The whole number `text` holds from `least` to `most`, or None and what was expected, in words."""
    value = int(text) if _WHOLE.fullmatch(text.strip()) else None
    if value is not None and least <= value <= most:
        return value, ""
    if value is not None and value > most == INT64_MAX:
        return None, f"a whole number at most {most} (SQLite's largest integer)"
    shown = most < SAID_UP_TO or (value is not None and value > most)
    return None, f"a whole number {f'from {least} to {most}' if shown else f'of at least {least}'}{_digits(text)}"


def real_number(text: str, flag: str, least: float = 0.0, most: float = MAX_SECONDS, above: bool = True) -> float:
    """A finite decimal number in ASCII digits, above `least` (or from it, when not `above`) and at most `most`;
    seconds when `most` is the platform's longest wait."""
    value = float(text) if DECIMAL.fullmatch(text.strip()) else math.nan
    if math.isfinite(value) and (value > least if above else value >= least) and value <= most:
        return value
    bounds = f"{'above' if above else 'of at least'} {least:g}"
    if most == MAX_SECONDS and value > most:  # 1e400 too: inf
        bounds += f" and at most {most:.0f} (the longest wait the platform can make)"
    elif most < SAID_UP_TO or value > most:
        bounds += f" and at most {most:g}"
    what = "a number of seconds" if most == MAX_SECONDS else "a number"
    raise UsageError(f"{flag} {text!r}: expected {what} {bounds}{_digits(text)}")


DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(s|sec|m|min|h|d)", re.ASCII | re.IGNORECASE)  # `١٥m` too
UNIT_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str, flag: str, bare_s: float | None, most_s: float = MAX_SECONDS) -> float:
    """`--budget 15m` -> 900.0: a number and its unit (s, m, h, d) or several (1h30m), above zero and at most
    `most_s`; a bare number counts `bare_s` seconds a unit (None: a unit is required)."""
    compact = text.strip().replace(" ", "")
    units = "s, m, h or d: 90s, 15m, 2h, 1h30m"
    if compact.startswith("-"):
        raise UsageError(f"{flag} {text!r}: expected a duration above zero ({units})")
    if bare_s is not None and DECIMAL.fullmatch(compact):
        seconds = float(compact) * bare_s
    else:
        parts = DURATION_PART.findall(compact)
        if not parts or "".join(n + u for n, u in parts).lower() != compact.lower():
            bare = f"a number of {'seconds' if bare_s == 1 else 'minutes'}, or " if bare_s in (1, 60) else ""
            raise UsageError(f"{flag} {text!r}: expected {bare}a duration with its unit ({units}){_digits(text)}")
        sizes = [UNIT_SECONDS[u.lower()] for _, u in parts]
        if sizes != sorted(set(sizes), reverse=True):  # 1m1h or 30m30m: a typo read as 61 or 60 minutes
            raise UsageError(f"{flag} {text!r}: expected each unit once, the largest first ({units})")
        seconds = sum(float(n) * size for (n, _), size in zip(parts, sizes, strict=True))
    if not (math.isfinite(seconds) and 0 < seconds <= most_s):
        limit = f" and at most {most_s:g} s" if seconds > most_s else ""
        raise UsageError(f"{flag} {text!r}: expected a duration above zero{limit} ({units})")
    return seconds


def _digits(text: str) -> str:
    """What a number typed in other digits ('٣', '３') lacks: int() and float() take them, a flag does not."""
    return "" if text.isascii() else " in ASCII digits"


def batch_number(text: str, flag: str, most: int = FIT_MAX_BATCH) -> int:
    """A batch flag's value (--batch, --max-batch, each of --batches), one parser for every command: a whole number
    from 1 to `most`, the range said whatever was typed. `most`: FIT_MAX_BATCH where the batch is measured here (as
    NAME@bN is); the predictor's larger MAX_BATCH where it is only counted on fake tensors (`dlperf predict`)."""
    value = int(text) if _WHOLE.fullmatch(text.strip()) else None
    if value is None or not 1 <= value <= most:
        raise UsageError(f"{flag} {text!r}: expected a batch, a whole number from 1 to {most:,}{_digits(text)}")
    return value


def batch_numbers(text: str, flag: str) -> tuple[int, ...]:
    """A comma list of batches (`batch_number` each), in order, without repeats."""
    return tuple(dict.fromkeys(batch_number(item, flag) for item in split_list(text, flag)))


def positive_ints(text: str, flag: str) -> list[int]:
    items = split_list(text, flag)
    values = []
    for item in items:
        value, wanted = _whole_within(item, 1, INT64_MAX)
        if value is None:
            said = f"expected {wanted}" if len(items) == 1 else f"{item!r} is not {wanted}"
            raise UsageError(f"{flag} {text!r}: {said}")
        values.append(value)
    return values


_SIZE = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)\s*([KMGT]?)(I?B?)", re.ASCII | re.IGNORECASE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def parse_size(text: str, flag: str) -> int:
    """A memory size in bytes: 2GiB, 512M, 1.5G (K ... T, KiB ... TiB: 1024s), 500MB (KB ... TB: 1000s), or bytes.
    `flag`: a command's (`--max-memory`), or a Python argument's name (`max_memory`, said as `max_memory='2X'`)."""
    found = _SIZE.fullmatch(text.strip())
    given = f"{flag}={text!r}" if flag.isidentifier() else f"{flag} {text!r}"
    if found is None or found[3].upper() == "I" or (found[3].upper() == "IB" and not found[2]):
        raise UsageError(f"{given}: expected a size such as 512MiB, 2GiB or 1.5G (K, M, G, T: powers of 1024; "
                         "KB, MB, GB, TB: of 1000)")  # fmt: skip
    number, prefix, suffix = float(found[1]), found[2].upper(), found[3].upper()
    base = 1000 if suffix == "B" and prefix else 1024
    size = int(number * base ** _POWERS[prefix])
    if not 0 < size <= INT64_MAX:
        raise UsageError(f"{given}: a size above 0 bytes and below 8 EiB")
    return size


def size_text(nbytes: int) -> str:
    """A size in bytes as a flag takes it, parse_size's inverse: 4096 -> '4K', 3 GiB -> '3G', 1000 -> '1000'."""
    for unit, power in (("G", 3), ("M", 2), ("K", 1)):
        if nbytes % 1024**power == 0:
            return f"{nbytes // 1024**power}{unit}"
    return str(nbytes)


def type_of(value: object) -> str:
    """`value`'s Python type in words: 'a str', 'an int', 'None'."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


def path_text(value: object, flag: str, wanted: str = "a path") -> str:
    """A path a Python caller gave as text or a pathlib.Path; anything else is a UsageError naming the flag (an int
    was a TypeError from inside os.path)."""
    if isinstance(value, str | os.PathLike):
        return os.fspath(value)
    raise UsageError(f"{flag} {value!r}: expected {wanted} (a str or a pathlib.Path), not {type_of(value)}")


def suggest(word: str, choices) -> str:
    """' (did you mean ...?)' for the closest names, ignoring case and punctuation."""

    def squash(s: str) -> str:
        return re.sub(r"[^a-z0-9]", "", s.lower())

    by_squashed = {squash(c): c for c in choices}
    close = difflib.get_close_matches(squash(word), list(by_squashed), n=3, cutoff=0.6)
    names = [repr(str(by_squashed[c])) for c in close]  # an enum's member as its value, not <CommBackend.NCCL: 'nccl'>
    return f" (did you mean {' or '.join(names)}?)" if close else ""
