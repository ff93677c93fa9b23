"""The `dlperf` subcommands: one module each, holding its parser and its handler.

A command module has `HELP` (one line for `dlperf --help`), optionally `DESCRIPTION` and `TAKES_DB = False` (it
reads no store: no --db), `add_arguments(parser)` and `run(args) -> exit code`. Every module is imported to build
`dlperf --help`, so each keeps its module-level imports light (the standard library, `errors`, `vocab`, `modes`,
`defaults`, `commands.common`) and imports the rest inside its handler: `dlperf --help` never imports a framework,
rich, numpy or matplotlib. What a parser quotes (a default, a bound) it reads from `defaults.py`, and its flags' values
through `flagtext.py`, not from the code behind the command (`spec`, `predict`, `advise`: tests/test_cli.py). Adding a
command: a module here and its name in `NAMES`. `build_parser` is the command line's one parser, over them all: `cli.py`
dispatches by it, and a resumed run's stored command line is read by it (`commands.run.stored_command`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from dlperf.commands.common import Parser
from dlperf.version import VERSION

# in the order `dlperf --help` lists them
NAMES = (
    "run", "profile", "table", "export", "list", "optimize", "peak", "report", "plot", "compare", "merge", "comm",
    "env", "data", "predict", "crossover", "fit", "advise",
)  # fmt: skip


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
    # none: `main` prints the help; COMMAND: the usage line listed all 18 names, 114 columns
    sub = parser.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND")
    for name in NAMES:
        module = command(name)
        parents = [common] if getattr(module, "TAKES_DB", True) else []
        p = sub.add_parser(name, parents=parents, help=module.HELP, description=getattr(module, "DESCRIPTION", None))
        module.add_arguments(p)
    return parser
