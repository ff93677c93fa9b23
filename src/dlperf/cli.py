"""The `dlperf` command: one dispatcher over `dlperf.commands`, one module per subcommand (parser and handler).

Importing this module imports no framework (a test checks it): `dlperf --help` stays fast, and every check that needs
a framework runs in a child process.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from dlperf.commands import NAMES
from dlperf.commands.common import Parser
from dlperf.errors import UsageError
from dlperf.version import VERSION
from dlperf.vocab import ExitCode


def command(name: str) -> ModuleType:
    return importlib.import_module(f"dlperf.commands.{name}")


def build_parser() -> Parser:
    parser = Parser(
        prog="dlperf",
        description="Measure deep-learning training speed: the Shi et al. (2016) "
        "benchmark on your machine, and your own models.",
    )
    parser.add_argument("--version", action="version", version=f"dlperf {VERSION}")
    parser.add_argument("--db", dest="db_first", metavar="DB", help="SQLite store: the command's own --db, put first")
    common = Parser(add_help=False)
    common.add_argument("--db", help="SQLite store (default: $DLPERF_DB or ./dlperf.db)")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)  # none: `main` prints the help
    for name in NAMES:
        module = command(name)
        parents = [common] if getattr(module, "TAKES_DB", True) else []
        p = sub.add_parser(name, parents=parents, help=module.HELP, description=getattr(module, "DESCRIPTION", None))
        module.add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser()
        args = db_first(parser.parse_args(argv))
        if args.command is None:  # `dlperf` alone: what it can do, where argparse would say "command" is required
            parser.print_help(sys.stderr)
            raise UsageError("no command given: name one of those above (dlperf COMMAND --help for its flags)")
        from dlperf.runner.lifeline import sigterm_as_interrupt  # after parsing: `--help` loads no runner code

        with sigterm_as_interrupt():  # in every command, planning included: as Ctrl-C
            return command(args.command).run(args)
    except UsageError as exc:
        from dlperf.report.format import terminal  # the message may quote the user's input or their model's error

        print(f"dlperf: error: {terminal(own_flags(str(exc), argv))}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except KeyboardInterrupt:
        print("dlperf: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.OK


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


def own_flags(message: str, argv: list[str]) -> str:
    """A message of the code `run` shares that names run's plural flag, said with the command's own where it has the
    singular one instead (`optimize --device`, `profile --framework`): the flag the user typed."""
    for plural, own in (("--devices", "--device"), ("--frameworks", "--framework")):
        typed = any(a == own or a.startswith(own + "=") for a in argv) and plural not in argv
        if typed and message.startswith(plural):
            return own + message[len(plural) :]
    return message
