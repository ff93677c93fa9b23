"""The `dlperf` subcommands: one module each, holding its parser and its handler.

A command module has `HELP` (one line for `dlperf --help`), optionally `DESCRIPTION` and `TAKES_DB = False` (it
reads no store: no --db), `add_arguments(parser)` and `run(args) -> exit code`. Every module is imported to build
`dlperf --help`, so each keeps its module-level imports light (the standard library, `errors`, `vocab`, `modes`,
`defaults`, `commands.common`) and imports the rest inside its handler: `dlperf --help` never imports a framework,
rich, numpy or matplotlib. What a parser quotes (a default, a bound) it reads from `defaults.py`, and its flags' values
through `flagtext.py`, not from the code behind the command (`spec`, `predict`, `advise`: tests/test_cli.py). Adding a
command: a module here and its name in `NAMES`.
"""

# in the order `dlperf --help` lists them
NAMES = (
    "run", "profile", "table", "export", "list", "optimize", "peak", "report", "plot", "compare", "merge", "comm",
    "env", "data", "predict", "crossover", "fit", "advise",
)  # fmt: skip
