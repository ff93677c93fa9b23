"""The `dlperf` command: one dispatcher over `dlperf.commands`, one module per subcommand (parser and handler).

Importing this module imports no framework (a test checks it): `dlperf --help` stays fast, and every check that needs
a framework runs in a child process.
"""

from __future__ import annotations

import argparse
import codecs
import errno
import itertools
import os
import sys

from dlperf.commands import build_parser, command
from dlperf.commands.common import ONCE, Parser, chosen, takes_list, unrecognized
from dlperf.commands.output import settle, settled
from dlperf.errors import LEFT_OUT, OutputFailed, ProbeFailed, UsageError, out_of_memory_here
from dlperf.vocab import ExitCode

# "·" is "-", not "?": "?" marks a doubtful median
PLAIN = {"µ": "u", "→": "->", "×": "x", "±": "+/-", "≤": "<=", "≥": ">=", "≈": "~", "—": "-", "–": "-", "…": "...",
         "│": "|", "─": "-", "·": "-"}  # fmt: skip


def plain(exc: UnicodeError) -> tuple[str, int]:
    """What a character a stream's encoding lacks (PYTHONIOENCODING=ascii) is written as: its ASCII look-alike ("µs" as
    "us"), else "?" as `errors="replace"` would; never a traceback in the middle of a table."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text = exc.object[exc.start : exc.end]
    return "".join(PLAIN.get(ch, "?") for ch in text), exc.end


codecs.register_error("dlperf.plain", plain)


def encodable(stream) -> None:
    """`stream` writes what its encoding lacks as `plain` does (Latin-1 keeps "µ", only "→" becomes "->"); a stream
    that can write both (UTF-8) and would refuse a name that is not UTF-8 (`lat\xe9n.db`, kept as a lone surrogate)
    writes its bytes as they were typed, so a command it prints names the file (`dlperf list --runs` of such a store
    was a traceback under a UTF-8 locale; a document written, `output.write_file`, takes the escape `\udce9`)."""
    try:
        "µ→".encode(stream.encoding or "utf-8")
    except UnicodeEncodeError:
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="dlperf.plain")
    except (LookupError, AttributeError):
        pass
    else:
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="surrogateescape")


def main(argv: list[str] | None = None) -> int:
    """The command's exit code. `argv` None: this process's command line, as the `dlperf` script and `python -m
    dlperf` call it, the process ending after it: once interrupted, it ignores more interrupts to its exit (its
    cleanup, the interpreter's end). Given `argv` (a test, a program embedding the CLI), the caller's handlers of
    SIGINT, SIGTERM and SIGHUP are its own again when it returns, interrupted or not."""
    ends, argv = argv is None, sys.argv[1:] if argv is None else argv
    descriptors_open()
    unsized = sizes_sane()
    out, err = sys.stdout or Closed(), sys.stderr or Closed()  # `>&-`, `2>&-`: Python's stream is None
    encodable(out)
    encodable(err)
    sys.stdout, sys.stderr = Stream(out, fails=True), Stream(err, fails=False)
    try:
        try:
            return finish(dispatch(argv, ends))
        except SystemExit:  # --help, --version: what argparse printed must have been written too
            finish(ExitCode.OK)
            raise
    except OutputFailed as exc:
        if exc.errno == errno.EPIPE:  # the reader went away (`| head`): not a fault, and not the outcome's change
            return settled()
        print(f"dlperf: error: {exc.strerror}", file=sys.stderr)
        return ExitCode.OUTPUT_FAILED
    finally:
        sys.stdout, sys.stderr = out, err
        if not ends:  # a program embedding the CLI keeps its environment as it was
            os.environ.update(unsized)


def dispatch(argv: list[str], ends: bool = False) -> int:
    """The command's exit code: a bad input is one line and 2; an interrupt one line and 130. `ends`: the process
    ends after it (`main`)."""
    LEFT_OUT.clear()  # of this command's store alone: a program calling `main` twice
    settle(ExitCode.OK)
    args = parser = None
    try:
        parser = build_parser()
        args = db_first(parse(parser, argv))
        args.options_typed = typed_options(argv)
        if args.command is None:  # `dlperf` alone: what it can do, where argparse would say "command" is required
            parser.print_help(sys.stderr)
            raise UsageError("no command given: name one of those above (dlperf COMMAND --help for its flags)")
        from dlperf.runner.lifeline import sigterm_as_interrupt  # after parsing: `--help` loads no runner code
        from dlperf.store.location import working_directory

        working_directory()

        with sigterm_as_interrupt(to_the_end=ends):  # in every command, planning included; a second one is dropped
            try:
                code = command(args.command).run(args)
                return finish(ExitCode.CELLS_FAILED if code == ExitCode.OK and LEFT_OUT else code)  # a run left out
            except KeyboardInterrupt:  # before anything was stored: a command that kept a run says what it kept,
                print("dlperf: interrupted", file=sys.stderr)  # its printing included (`commands.run.printed`)
                return ExitCode.INTERRUPTED
            except MemoryError as exc:  # in this process, not a child's: no input was wrong, exit 1 as a probe's
                return said_failed(out_of_memory_here(args.command, exc), args, argv)
            except Exception as exc:  # a store damaged, or cut short under the command: one line, not SQLite's trace
                from dlperf.store.location import unreadable

                if why := out_of_room(exc):  # a limit of this user's: no input was wrong, exit 1 as a probe's
                    return said_failed(f"dlperf {args.command}: {why}", args, argv)

                if (why := unreadable(exc, store_of(args))) is None:
                    raise
                raise UsageError(why) from None
    except KeyboardInterrupt:  # while the parser was built or read, before the handler above: nothing ran yet
        print("dlperf: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except UsageError as exc:
        from dlperf.report.format import terminal  # the message may quote the user's input or their model's error

        said = own_flags(str(exc), argv)
        code = ExitCode.CELLS_FAILED if isinstance(exc, ProbeFailed) else ExitCode.BAD_INPUT  # a probe killed: exit 1
        print(f"dlperf: error: {terminal(said)}", file=sys.stderr)
        if fmt := asked_format(args, argv, parser):  # a script reading stdout gets a document, not nothing: a CI gate
            document_error(said, code, fmt)
        return code
    except BrokenPipeError:
        return settled()


LIMITS = {errno.EAGAIN: "this user's processes or threads (ulimit -u)",
          errno.EMFILE: "a process's open files (ulimit -n)", errno.ENFILE: "the system's open files"}  # fmt: skip


def out_of_room(exc: BaseException) -> str | None:
    """A process, thread or file this process could not have, in one line naming the limit it met (`ulimit -u 3`:
    BlockingIOError from the fork of a cell's process; `ulimit -n 8`: EMFILE), where it was a traceback; None for
    any other error. What the command stored stays stored (a run: interrupted, `dlperf run --resume` goes on)."""
    number = getattr(exc, "errno", None)
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        number = errno.EAGAIN
    if not isinstance(exc, OSError | RuntimeError) or number not in LIMITS:
        return None
    return (f"the limit of {LIMITS[number]} was reached ({os.strerror(number)}), so dlperf could not start what it "
            "needed: raise the limit, or run fewer things at once")  # fmt: skip


def said_failed(said: str, args, argv: list[str]) -> int:
    """A failure of dlperf's own process (out of memory, a limit of processes or files) in one line, exit 1, and as
    a JSON document too where one was asked for."""
    print(f"dlperf: error: {said}", file=sys.stderr)
    if fmt := asked_format(args, argv):
        document_error(said, ExitCode.CELLS_FAILED, fmt)
    return ExitCode.CELLS_FAILED


def document_error(said: str, code: int, fmt: str) -> None:
    """The error as a JSON document on standard output, or a Markdown line (`compare --format md >>
    $GITHUB_STEP_SUMMARY` wrote nothing of it); one that cannot be written (a reader gone, stdout closed) leaves the
    error's own exit code, said on stderr already (it was 0 through `| true`, 74 with `>&-`)."""
    import json

    from dlperf.report.format import terminal  # the line may quote the user's input: no escape reaches a terminal

    settle(code)
    shown = (
        json.dumps({"error": said, "exit_code": int(code)}, indent=2)
        if fmt == "json"
        else f"**dlperf: error** (exit code {int(code)}): {terminal(said)}"
    )
    try:
        print(shown, flush=True)
    except (OSError, OutputFailed):
        pass
    if isinstance(sys.stdout, Stream):
        sys.stdout.failed = None  # its failure is no output failure of this command's: exit `code`


def typed_options(argv: list[str]) -> frozenset[str]:
    """The options typed (`--repeats`, of `--repeats 1` or `--repeats=1`), before a `--`: a flag given at its default
    value is told from one not given (`commands.common.given_flags`)."""
    typed = argv[: argv.index("--")] if "--" in argv else argv
    return frozenset(w.partition("=")[0] for w in typed if w.startswith("-") and len(w) > 1 and not w[1].isdigit())


def asked_format(args, argv: list[str], parser: Parser | None = None) -> str | None:
    """ "json" or "md" where the command was asked for `--format` of a document: as parsed, or, where parsing
    failed, as typed, and one the command writes (`parser`'s: `predict --format md` printed a Markdown error for a
    format predict refuses); None otherwise, and where the document goes to a file (`-o FILE`): standard output is
    then no reader's (`export --format json -o x.json` printed a JSON error there)."""
    if args is not None:
        fmt = getattr(args, "format", None)
        return fmt if fmt in DOCUMENTS and getattr(args, "output", None) in (None, "-") else None
    typed = argv[: argv.index("--")] if "--" in argv else argv
    pairs = list(itertools.pairwise([*typed, ""]))
    given = [b if a == "--format" else a.removeprefix("--format=") for a, b in pairs
             if a == "--format" or a.startswith("--format=")]  # fmt: skip
    files = [b if a in ("-o", "--output") else a.split("=", 1)[1] for a, b in pairs
             if a in ("-o", "--output") or a.startswith("--output=")]  # fmt: skip
    if files and files[-1] != "-":
        return None
    if not given or given[-1] not in DOCUMENTS:
        return None
    return given[-1] if parser is None or given[-1] in formats_of(parser, typed) else None  # the last, as typed


def formats_of(parser: Parser, typed: list[str]) -> tuple[str, ...]:
    """The --format choices of the command `typed` names (its first word that is one, past the global --db's value);
    none for no command, or one without --format."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    words = [w for before, w in itertools.pairwise(["", *typed]) if before != "--db"]
    name = next((w for w in words if w in sub.choices), None)
    if name is None:
        return ()
    flag = next((a for a in sub.choices[name]._actions if "--format" in a.option_strings), None)
    return tuple(getattr(flag.type, "choices", None) or flag.choices or ()) if flag is not None else ()


DOCUMENTS = ("json", "md")  # the formats whose reader gets the error as output too


def finish(code: int) -> int:
    """`code`, once standard output is written: OutputFailed where any of it could not be (said once, even where
    the writer caught the error, as argparse's help does)."""
    sys.stdout.flush()
    if isinstance(sys.stdout, Stream) and sys.stdout.failed is not None:
        raise sys.stdout.failed
    return code


class Stream:
    """A standard stream whose failing write (a full disk, a closed terminal, a reader gone) fails once: its file
    descriptor is /dev/null's from then on, so nothing written later, nor the interpreter's last flush, fails again.
    Standard output's failure is raised, as OutputFailed (`fails`): the command's output is cut short, and it says
    so. Standard error's is not: warnings and the progress display degrade to nothing, and the measurement goes on
    (whose terminal was closed mid-run)."""

    def __init__(self, stream, fails: bool) -> None:
        self.stream, self.fails = stream, fails
        self.failed: OutputFailed | None = None

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as exc:
            self._lost(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            self._lost(exc)

    def _lost(self, exc: OSError) -> None:
        if self.failed is not None:
            return
        why = exc.strerror or str(exc)
        self.failed = OutputFailed(exc.errno, f"could not write to standard output ({why}): the output is cut short")
        to_devnull(self.stream)
        if self.fails:
            raise self.failed from None

    def __getattr__(self, name: str):  # isatty, fileno, encoding, ...: the stream's own
        return getattr(self.stream, name)


def descriptors_open() -> None:
    """Standard input, output and error each open: one closed (`>&-`) is given /dev/null, so the next file this
    process opens (the store) is never descriptor 1 or 2, written to by whatever writes there (a child's output)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def sizes_sane() -> dict[str, str]:
    """$COLUMNS and $LINES that say no size (0, -5, "wide") are left out, and returned: rich took COLUMNS=0 for a
    terminal of no columns and printed nothing at all, exit 0. The terminal's own size, or a log's width, is used
    instead."""
    left = {}
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and not (value.strip().isdigit() and int(value) > 0):
            left[name] = os.environ.pop(name)
    return left


class Closed:
    """A standard stream the command was started without (`>&-`): a write fails as on a closed descriptor, so
    standard output's is said once (exit 74, what was stored kept) and standard error's is dropped (`Stream`); it was
    a traceback, or, of standard error, a run stopped with no word at all."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it is closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "it is closed")


def to_devnull(stream) -> None:
    """Point `stream`'s file descriptor at /dev/null; nothing where it has none (a test's captured stream)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def parse(parser: Parser, argv: list[str]):
    """The parsed flags; where an unrecognized argument follows a flag that takes a comma list (`--threads 1 2`),
    the error says how that flag takes several."""
    parsed, extras = parser.parse_known_args(argv)
    if extras:
        own = chosen(parser, parsed)
        if (again := intermixed(own, argv, parsed)) is not None:
            return again
        raise UsageError(comma_list(argv, extras, own) or unrecognized(extras, own, "--" in argv))
    return parsed


def intermixed(own: argparse.ArgumentParser, argv: list[str], parsed: argparse.Namespace):
    """The command's words read again with its options between its positionals (`env install --force mxnet`, which
    argparse alone reads as `env install` and an unrecognized `mxnet`); None where that leaves words over too."""
    command = getattr(parsed, "command", None)
    if own is None or command not in argv or "--" in argv:
        return None
    mine = {a.dest for a in own._actions}  # read again from its words, none kept from the first reading
    known = argparse.Namespace(**{k: v for k, v in vars(parsed).items() if k not in mine and k != ONCE})
    try:
        again, extras = own.parse_known_intermixed_args(argv[argv.index(command) + 1 :], known)
    except (TypeError, UsageError):  # a parser intermixing cannot read, or words it refuses: argparse's first error
        return None
    return None if extras else again


def comma_list(argv: list[str], extras: list[str], parser: argparse.ArgumentParser) -> str | None:
    """`--threads takes a comma list: --threads 1,2` for `--threads 1 2`, where the flag's help says it takes a
    comma list (or shows one, e.g. 1,2,8); None otherwise."""
    takes = {o: a for a in parser._actions for o in a.option_strings if a.nargs is None and takes_list(a.help or "")}
    for i, word in enumerate(argv[1:], 1):
        if word not in extras or word.startswith("-"):
            continue
        j = i - 1  # back over the values the flag was given, to the flag
        while j > 0 and not argv[j].startswith("-"):
            j -= 1
        flag, _, first = argv[j].partition("=")
        if flag in takes and (first or j + 1 < i):
            end = i + 1  # and the unrecognized values after it
            while end < len(argv) and argv[end] in extras and not argv[end].startswith("-"):
                end += 1
            values = [first] * bool(first) + argv[j + 1 : end]
            return f"{flag} takes a comma list: {flag} {','.join(values)}"
    return None


def db_first(args):
    """`dlperf --db X table` as `dlperf table --db X`: where a store is named before the command, the command's own."""
    first = vars(args).pop("db_first")
    if first is None or args.command is None:
        return args
    if not hasattr(args, "db"):
        raise UsageError(f"--db: dlperf {args.command} reads and writes no store")
    if args.db not in (None, first):
        raise UsageError(f"--db given twice, before and after {args.command}: {first!r} and {args.db!r}")
    args.db = first
    return args


def store_of(args) -> str | None:
    """The store a command opened, where --db (or its default) is its only one; None for merge's and compare's."""
    if not hasattr(args, "db") or args.command in ("merge", "compare"):
        return None
    from dlperf.commands.common import db_path

    return db_path(args)


def own_flags(message: str, argv: list[str]) -> str:
    """A message of the code `run` shares that names run's plural flag, said with the command's own where it has the
    singular one instead (`optimize --device`, `profile --framework`): the flag the user typed."""
    for plural, own in (("--devices", "--device"), ("--frameworks", "--framework")):
        typed = any(a == own or a.startswith(own + "=") for a in argv) and plural not in argv
        if typed and message.startswith(plural):
            return own + message[len(plural) :]
    return message
