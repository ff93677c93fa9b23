"""What the commands share: the parser that turns a bad flag into one line and exit code 2, closed-choice and numeric
flags, the database path, and printing a rich table with the lines under it."""

from __future__ import annotations

import argparse
import functools
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from dlperf.errors import UsageError

if TYPE_CHECKING:
    from dlperf.store import Store


class WholeWords(argparse.HelpFormatter):
    """argparse's help, its lines broken between words: textwrap's default broke a token too long for the line
    ("e.g. fp3" over "2,bf16+channels_last", "src/d" over "lperf/...") or at its hyphen ("built-" over "in"). A
    token longer than the line is broken after a ',' or '/' in it (a list of modes, a path), never inside a name."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return _TokenWrapper(width, break_long_words=False, break_on_hyphens=False).wrap(" ".join(text.split()))

    def format_help(self) -> str:
        # the usage's groups (`list`'s [--all | ... | --comm]) and the sections' titles argparse never breaks
        return "\n".join(part for line in super().format_help().split("\n") for part in _folded(line, self._width))

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return _TokenWrapper(width, initial_indent=indent, subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False).fill(" ".join(text.split()))  # fmt: skip


def _folded(line: str, width: int) -> list[str]:
    """`line` in lines of `width` at most, each broken before a space or after a ',' or '|', the rest as indented as
    it was: as it is where it has no such place."""
    lines, indent = [], " " * (len(line) - len(line.lstrip()))
    while len(line) > width:
        at = max((i for i in range(len(indent) + 1, width + 1) if line[i - 1] in ",|" or line[i] == " "), default=0)
        if not at:
            break
        lines.append(line[:at].rstrip())
        line = indent + line[at:].lstrip()
    return [*lines, line]


class _TokenWrapper(textwrap.TextWrapper):
    """textwrap, a word longer than the line cut into pieces ending at each ',' or '/': textwrap puts as many as fit on
    a line with nothing between them (`predict --help` at 60 columns had a 61-character line of modes)."""

    def _split(self, text: str) -> list[str]:
        import re

        room = self.width - len(self.subsequent_indent)
        return [piece for chunk in super()._split(text)
                for piece in (re.findall(r"[^,/]*[,/]|[^,/]+", chunk) if len(chunk) > room else [chunk])]  # fmt: skip


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr and exit code 2, like every other bad input, said in the
    user's words: a misspelt command, choice or option is named with the closest one there is. An option is taken
    only as spelt in full: argparse's own would take `--thread 2` for `--threads 2`, so a typo passed unseen, and an
    abbreviation a user's script relies on would break, or change its meaning, the day a longer option begins so."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{"allow_abbrev": False, "formatter_class": WholeWords, **kwargs})
        self.register("action", None, StoreOnce)  # a flag of a value given twice (`--threads 1 --threads 2`)
        self.register("action", "store", StoreOnce)
        self.typed: list[str] = []  # the words of the value argparse is taking now, as typed (`_get_values`)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        self.typed = list(arg_strings)
        return super()._get_values(action, arg_strings)

    def error(self, message: str):
        missing = "the following arguments are required: "
        if message.startswith(missing):  # argparse's words, naming positionals by their destination
            names = [n if n.startswith("-") else n.upper() for n in message.removeprefix(missing).split(", ")]
            both = " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"
            message = f"{self.prog} needs {both} (see {self.prog} --help)"
        raise UsageError(plain_argparse(message))

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's own says "argument action: invalid choice", naming the destination, not what was typed
        if action.choices is not None and value not in action.choices:
            raise UsageError(unknown_choice(self, action, value))

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            dashes = "--" in (sys.argv[1:] if args is None else args)
            raise UsageError(unrecognized(extras, chosen(self, parsed), dashes))
        return parsed


class StoreOnce(argparse._StoreAction):
    """argparse's `store`, but an option given twice with two values (`--workloads a --workloads b`, `-o a.db
    --output b.db`) is one line naming both as typed, where argparse kept the last and dropped the first unsaid; the
    same value twice is that value."""

    def __call__(self, parser, namespace, values, option_string=None):
        typed = " ".join(getattr(parser, "typed", []))
        seen = vars(namespace).setdefault(ONCE, {})
        if self.option_strings and self.dest in seen and seen[self.dest][2] != values:
            flag, before, _ = seen[self.dest]
            shown = [repr(text) if text else "no value" for text in (before, typed)]
            if option_string == flag:
                said = f"{flag} given twice, {shown[0]} and {shown[1]}"
            else:  # `-o a.db --output b.db`: each as typed
                said = f"{flag} {shown[0]} and {option_string} {shown[1]} are one flag given twice"
            listed = f" ({flag} takes a comma list: {flag} {before},{typed})" if before and typed and \
                takes_list(self.help or "") else ""  # fmt: skip
            raise UsageError(f"{said}: give it once{listed}")
        if self.option_strings:
            seen[self.dest] = (option_string, typed, values)
        setattr(namespace, self.dest, values)


ONCE = "_given_once"  # the namespace's record of the options given so far: {dest: (flag as typed, text, value)}


def takes_list(help_text: str) -> bool:
    """Whether an option's help says it takes a comma list, or shows one (e.g. 1,2,8)."""
    import re

    return "comma list" in help_text or re.search(r"e\.g\. \S*\w,\w", help_text) is not None


def plain_argparse(message: str) -> str:
    """argparse's "argument -o/--output: expected one argument", said with the flag as typed and what to do: a value
    that starts with '-' (`--max-memory -1G`) is read as another flag, so it goes after '='."""
    import re

    if not (found := re.fullmatch(r"argument (\S+): (.*)", message)):
        return message
    flag, said = max(found[1].split("/"), key=len), found[2]
    if said == "expected one argument":
        return f"{flag} needs a value (one that starts with '-' is written {flag}=VALUE)"
    if said.startswith("expected at least one argument"):
        return f"{flag} needs at least one value"
    if (given := re.fullmatch(r"ignored explicit argument (.*)", said)) is not None:
        return f"{flag} takes no value (got {given[1]})"
    if (other := re.fullmatch(r"not allowed with argument (\S+)", said)) is not None:
        return f"{flag} and {max(other[1].split('/'), key=len)} cannot be given together"
    return f"{flag}: {said}"


def unknown_choice(parser: argparse.ArgumentParser, action: argparse.Action, value: Any) -> str:
    """A value outside an argparse `choices`: a command, a positional (`dlperf env lsit`) or an option."""
    from dlperf.flagtext import suggest

    options = [str(c) for c in action.choices]
    close = suggest(str(value), options)
    if isinstance(action, argparse._SubParsersAction):
        return f"unknown command {value!r}{close or ' (dlperf --help lists them)'}"
    if action.option_strings:
        return expected(max(action.option_strings, key=len), str(value), options)
    noun = " ".join([*parser.prog.split()[1:], (action.metavar or action.dest).lower().replace("_", " ")])
    return f"unknown {noun} {value!r}{close} (known: {either(options)})"


def expected(flag: str, text: str, options: Sequence[str]) -> str:
    """`--format 'jsn': expected text or json (did you mean 'json'?)`."""
    from dlperf.flagtext import suggest

    return f"{flag} {text!r}: expected {either(options)}{suggest(text, options)}"


def chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command that `parsed` went through: whose options an unrecognized flag missed."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(parsed, action.dest, None) in action.choices:
            return chosen(action.choices[getattr(parsed, action.dest)], parsed)
    return parser


def unrecognized(extras: Sequence[str], parser: argparse.ArgumentParser, dashes: bool = False) -> str:
    """argparse's "unrecognized arguments", with the command's closest option to each misspelt one (`--devices`:
    did you mean --device?), else where its options are listed. `dashes`: the command line holds `--`, after which
    an option of the command's own is a value (`compare -- -1 1 --db x.db` had "did you mean --db?")."""
    import difflib

    known = {o.lstrip("-"): o for a in parser._actions for o in a.option_strings if o.startswith("--")}
    said = f"unrecognized arguments: {' '.join(extras)}"
    exact = [e.split("=", 1)[0] for e in extras if e.split("=", 1)[0] in known.values()]
    if exact and dashes:
        return f"{said} ({exact[0]} comes after `--`, which makes it a value: put it before `--`)"
    hints = {}
    for flag in (e.split("=", 1)[0] for e in extras if e.startswith("--") and e.split("=", 1)[0] not in exact):
        typed = flag.lstrip("-")
        starting = [name for name in known if name.startswith(typed)] if typed else []
        if len(starting) == 1:  # an abbreviation (argparse's own would have taken it): the one option it begins
            hints[flag] = known[starting[0]]
        elif SYNONYMS.get(typed) in known:  # another word for it: `make run RUN_ARGS="--networks fcn-r"`
            hints[flag] = known[SYNONYMS[typed]]
        elif close := difflib.get_close_matches(typed, list(known), n=1, cutoff=0.7):
            hints[flag] = known[close[0]]
    if len(hints) == 1:
        return f"{said} (did you mean {next(iter(hints.values()))}?)"
    if hints:
        return f"{said} (did you mean {', '.join(f'{own} for {typed}' for typed, own in hints.items())}?)"
    return f"{said} ({parser.prog} --help lists its options)" if any(e.startswith("-") for e in extras) else said


# other words a user types for an option (the paper says networks; other tools say models)
SYNONYMS = {"networks": "workloads", "network": "workloads", "models": "workloads", "model": "workloads",
            "nets": "workloads", "net": "workloads"}  # fmt: skip


def either(options: Sequence[str]) -> str:
    """ "a or b", "a, b or c"."""
    return " or ".join(options) if len(options) < 3 else f"{', '.join(options[:-1])} or {options[-1]}"


def picked(text: str, flag: str, known: Sequence[str], noun: str) -> tuple[str, ...]:
    """A comma list of names from a closed set, lower-cased, each once, in the order given; a name outside it is a
    UsageError naming the flag, the nearest name and the set."""
    from dlperf.flagtext import split_list, suggest

    names = tuple(dict.fromkeys(item.lower() for item in split_list(text, flag)))
    for name in names:
        if name not in known:
            raise UsageError(f"{flag}: unknown {noun} {name!r}{suggest(name, known)} (known: {either(known)})")
    return names


def choice(flag: str, options: Sequence[str]) -> Callable[[str], str]:
    """An argparse `type` for a closed set: anything else is a UsageError naming the flag and what it expects."""

    def parse(text: str) -> str:
        if text not in options:
            raise UsageError(expected(flag, text, options))
        return text

    parse.choices = tuple(options)  # the reference (docs/hooks/generated.py) lists them, as argparse's own choices
    return parse


def given(flag: str, what: str) -> Callable[[str], str]:
    """An argparse `type` for a flag that names something (a file, a folder, an address): an empty or blank value
    (`--gpu-specs "$SPECS"` with $SPECS unset) is a UsageError, where it would be taken as not given, or as `.`."""

    def parse(text: str) -> str:
        if not text.strip():
            raise UsageError(f"{flag} {text!r}: expected {what}, got nothing")
        return text

    return parse


def whole(flag: str, least: int = 0, **most: int) -> Callable[[str], int]:
    """An argparse `type` for a whole number from `least` (`most=`: an upper bound below SQLite's integer;
    `grouped=True`: a count that may be written as dlperf prints it, 1,281,167)."""

    def parse(text: str) -> int:
        from dlperf.flagtext import whole_number

        return whole_number(text, flag, least, **most)

    parse.number = "whole"  # marks a numeric flag: tests/test_cli.py tries every bad number on each
    return parse


def duration(flag: str, per: float, most_s: float) -> Callable[[str], float]:
    """An argparse `type` for a duration in units of `per` seconds (1: seconds, 60: minutes): a bare number in that
    unit, or a number and its own unit (90s, 15m, 2h, 1h30m), above zero; the value returned is in `per` units."""

    def parse(text: str) -> float:
        from dlperf.flagtext import duration_seconds

        return duration_seconds(text, flag, bare_s=per, most_s=most_s) / per

    parse.number = "real"
    return parse


def real(flag: str, least: float = 0.0, above: bool = True, **most: float) -> Callable[[str], float]:
    """An argparse `type` for a finite number above `least` (from it, when not `above`); seconds by default, so
    at most the longest wait the platform can make (`most=`: another bound)."""

    def parse(text: str) -> float:
        from dlperf.flagtext import real_number

        return real_number(text, flag, least, above=above, **most)

    parse.number = "real"
    return parse


def whole_list(flag: str) -> Callable[[str], tuple[int, ...]]:
    """An argparse `type` for a comma list of positive whole numbers (1,2,8), in order, without repeats."""

    def parse(text: str) -> tuple[int, ...]:
        from dlperf.flagtext import positive_ints

        return tuple(dict.fromkeys(positive_ints(text, flag)))

    parse.number = "whole list"
    return parse


def batch(flag: str, most: int | None = None) -> Callable[[str], int]:
    """An argparse `type` for a batch flag, every command's (`flagtext.batch_number`: 1 to 65,536 unless `most`)."""

    def parse(text: str) -> int:
        from dlperf.flagtext import batch_number

        return batch_number(text, flag) if most is None else batch_number(text, flag, most)

    parse.number = "whole"
    return parse


def batch_list(flag: str) -> Callable[[str], tuple[int, ...]]:
    """An argparse `type` for a comma list of batches (`flagtext.batch_numbers`)."""

    def parse(text: str) -> tuple[int, ...]:
        from dlperf.flagtext import batch_numbers

        return batch_numbers(text, flag)

    parse.number = "whole list"
    return parse


def add_format(p: argparse.ArgumentParser, *options: str, help: str | None = None) -> None:
    """`--format`, the first option the default."""
    p.add_argument("--format", default=options[0], type=choice("--format", options), help=help or either(options))


def db_path(args: argparse.Namespace) -> str:
    """--db, else $DLPERF_DB, else ./dlperf.db; an empty --db names no file, and is refused rather than read as the
    default (`--db "$OUT"` with $OUT unset)."""
    from dlperf.store import default_db

    given = getattr(args, "db", None)
    if given == "":
        raise UsageError("--db '': an empty path names no database; give a file, or leave --db out for "
                         "$DLPERF_DB or ./dlperf.db")  # fmt: skip
    return given or default_db()


def warn_if_measured(db: str, resuming: bool = False) -> None:
    """A command about to measure into `db` while another process of this host measures a run of it goes on, but
    says so in one line first: the two share the CPU, each timing the other's load, and the views then default to the
    later run. `resuming`: the run --resume takes is left to its own refusal (`store.lease.LeaseHeld`)."""
    from dlperf.report.format import terminal
    from dlperf.store import Store
    from dlperf.store.state import measured_here

    if not os.path.isfile(db):  # False, never an error, where a directory on the way cannot be entered
        return
    try:
        store = Store.open(db, create=False)
    except UsageError:  # the command itself says what stops it
        return
    try:
        busy = measured_here(store)
        if resuming and busy:
            from dlperf.api import latest_resumable

            taken = latest_resumable(store)
            busy.pop(taken.id if taken else 0, None)
    finally:
        store.close()
    for run_id, holder in busy.items():
        print(terminal(f"dlperf: warning: run {run_id} of {db} is being measured by pid {holder.pid}: the two runs "
                       "share the CPU, and their timings disturb each other"), file=sys.stderr, flush=True)  # fmt: skip


def open_store(args: argparse.Namespace, *, create: bool = False) -> Store:
    from dlperf.store import Store

    return Store.open(db_path(args), create=create)


def command_with(flags: dict[str, str | None]) -> str:
    """This command line with `flags` given anew: each one's words as typed (`--sizes 8K`, `--sizes=8K`) left out,
    then those with a value added (`{"--sizes": "16K,32K", "--factor": None}`): the command that measures what an
    interrupt left (`peak`, `comm`)."""

    words, skip = [], False
    for word in sys.argv[1:]:
        if skip or word.split("=", 1)[0] in flags:
            skip = not skip and "=" not in word
            continue
        words.append(word)
    given = [part for flag, value in flags.items() if value is not None for part in (flag, value)]
    return as_typed(["dlperf", *words, *given])


def as_typed(words: list[str]) -> str:
    """A command line to run again, quoted for a shell; with the `DLPERF_DB=...` that named its store where no --db
    does (`peak`'s and `comm`'s "To measure the rest", run as printed, stored into ./dlperf.db)."""
    import shlex

    line = shlex.join(words)
    named = any(w == "--db" or w.startswith("--db=") for w in words)
    return f"DLPERF_DB={shlex.quote(os.environ['DLPERF_DB'])} {line}" if os.environ.get("DLPERF_DB") and not named \
        else line  # fmt: skip


def warn_unreadable(faults: Sequence[Exception], where: str) -> int:
    """Cells a view left out because their stored rows no longer decode: one warning each; exit code 1 if any (a
    cell-level fault: the rest is shown)."""
    for fault in faults:
        warn(f"{fault}: left out of {where}")
    return 1 if faults else 0


def warn(message: str) -> None:
    from dlperf.report.format import terminal

    print(f"dlperf: warning: {terminal(message)}", file=sys.stderr, flush=True)


LOG_WIDTH = 160  # characters of a text table written to a file, a pipe or a CI log


def console(width: int | None = None, at_least: int = 0):
    """A rich console for standard output: on a terminal as wide as it is; in a file, a pipe or a CI log (where rich
    would take 80 columns and cut figures short with an ellipsis) LOG_WIDTH wide, unless $COLUMNS or `width` says;
    `at_least` columns there whatever $COLUMNS says (a table of ten columns that must not fold: `compare`, `optimize`;
    pytest-xdist's workers set COLUMNS=80)."""
    made = _whole_console()(width=width)
    if width is None and not made.is_terminal:
        wide = made.width if os.environ.get("COLUMNS", "").strip().isdigit() else LOG_WIDTH
        made = _whole_console()(width=max(wide, at_least))
    return made


@functools.cache
def _whole_console() -> type:
    """rich's Console, but every table it prints is printed `Whole`, inside a Group too."""
    from rich.console import Console, Group
    from rich.table import Table

    from dlperf.commands.whole import Whole

    def whole(renderable: Any) -> Any:
        if isinstance(renderable, Table):
            return Whole(renderable)
        if isinstance(renderable, Group):
            return Group(*(whole(r) for r in renderable.renderables), fit=renderable.fit)
        return renderable

    class WholeConsole(Console):
        def print(self, *objects: Any, **kwargs: Any) -> None:
            kwargs.setdefault("crop", False)  # a table wider than the screen (`_Wider`) is printed whole, not cut
            super().print(*(whole(o) for o in objects), **kwargs)

    return WholeConsole


def print_rich(renderable: Any, lines: Sequence[str] = (), notes: Sequence[str] = (), width: int | None = None) -> None:
    """A rich table (None: none), then plain lines and notes (never read as markup, control characters escaped: they
    hold names and errors from the store); in a file, a pipe or a CI log each line whole, not folded at the log's
    width (a resume command folded there was `run --resume --db` to grep, its path on the next line), unless $COLUMNS
    or `width` asks for a width."""
    from dlperf.report.format import terminal

    out = console(width)
    whole = not out.is_terminal and width is None and not os.environ.get("COLUMNS", "").strip()
    if whole and getattr(renderable, "one_row_a_line", False):
        _print_rows(renderable)
    elif renderable is not None:  # "" is an empty line, after a table; None: no table (advise's answer began with one)
        out.print(renderable)
    for line in lines:
        out.print(terminal(line), highlight=False, markup=False, soft_wrap=whole)
    for note in notes:
        text = f"  note: {terminal(note)}"
        if whole:
            out.print(text, highlight=False, markup=False, soft_wrap=True)
            continue
        # rich folds at column 0, a space left at each line's end: the note's lines kept under it; a word (a path)
        # the indent pushes past the width starts its line at column 0, whole; one wider than the width rich folds
        for line in textwrap.wrap(text, out.width, subsequent_indent=" " * 8, break_long_words=False,
                                  break_on_hyphens=False, drop_whitespace=True):  # fmt: skip
            out.print(line if len(line) <= out.width else line.lstrip(), highlight=False, markup=False)


def _print_rows(table: Any) -> None:
    """A list's table (`list.columns`) in a file or a pipe: each row one line, however long, every column unwrapped
    (at LOG_WIDTH horovod's reason in `list --frameworks` took 3 lines), without the spaces rich pads a row's last
    cell with (`dlperf list --frameworks | grep 'fp32$'` found none)."""
    import copy
    import dataclasses

    rows = copy.copy(table)
    rows.columns = [dataclasses.replace(c, no_wrap=True) for c in table.columns]
    wide = console(1 << 16)  # only as wide as its rows: rich pads a table to its own width, not the console's
    with wide.capture() as printed:
        wide.print(rows)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in printed.get().splitlines()))


def given_flags(args: argparse.Namespace, add_arguments: Callable[[argparse.ArgumentParser], None],
                allowed: frozenset[str] = frozenset()) -> list[str]:  # fmt: skip
    """The options of a command's parser (`add_arguments`) given a value other than their default, or typed at it
    (`args.options_typed`, `cli.typed_options`: `--repeats 1` on a `--resume` of a run of 2 went on at 2, said
    nothing), each by its long name, but for the destinations `allowed`: what a mode of the command that takes none
    of them would ignore."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    typed = getattr(args, "options_typed", frozenset())
    chosen = [a for a in parser._actions if a.option_strings and a.dest not in allowed]
    return [max(a.option_strings, key=len) for a in chosen
            if getattr(args, a.dest, a.default) != a.default or typed & set(a.option_strings)]  # fmt: skip
