"""The `dlperf` command: one dispatcher, one small function per subcommand.

Importing this module imports no framework (a test checks it): `dlperf --help` stays fast, and every check that needs
a framework runs in a child process.
"""

from __future__ import annotations

import argparse
import json
import sys

from dlperf import __version__
from dlperf.errors import UsageError
from dlperf.vocab import ExitCode


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr and exit code 2, like every other bad input."""

    def error(self, message: str):
        raise UsageError(message)


def _run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workloads",
        help="comma list of built-in names, or path/file.py:factory, or module:factory "
        "(default: the seven networks of Shi et al. 2016)",
    )
    p.add_argument("--frameworks", default="torch", help="comma list (default: torch)")
    p.add_argument("--devices", help="comma list of cpu, cuda, cuda:N, mps (default: cpu and every visible GPU)")
    p.add_argument("--threads", help="CPU thread counts, e.g. 1,2,8 (default: 1, 2, 4, ... up to the cores)")
    p.add_argument(
        "--modes",
        default="fp32",
        help="comma list of modes, each components joined by '+': precision fp32, bf16, fp16 (autocast), tf32 (CUDA); "
        "channels_last; optimizer foreach or fused; checkpoint; compile; cuda_graphs (CUDA). "
        "E.g. fp32,bf16+channels_last,bf16+compile (default: fp32)",
    )
    p.add_argument("--repeats", type=int, default=1, help="fresh processes per cell, interleaved (default: 1)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per cell process (default: 600)")
    p.add_argument(
        "--compile-timeout",
        type=float,
        help="seconds a compiled cell may spend compiling (its first step) before it is stopped as a timeout "
        "(default: only --timeout)",
    )
    p.add_argument("--pin", action="store_true", help="pin each cell to as many cores as it has threads")
    p.add_argument("--min-steps", type=int, default=10, help="timed steps at least (default: 10)")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds of timed steps at least (default: 1)")
    p.add_argument("--max-time", type=float, default=60.0, help="seconds of timed steps at most (default: 60)")
    p.add_argument("--max-warmup", type=int, default=30, help="warm-up steps at most (default: 30)")
    p.add_argument("--resume", action="store_true", help="continue the latest unfinished run")
    p.add_argument("--dry-run", action="store_true", help="print the planned cells and a time estimate")


def build_parser() -> Parser:
    parser = Parser(
        prog="dlperf",
        description="Measure deep-learning training speed: the Shi et al. (2016) "
        "benchmark on your machine, and your own models.",
    )
    parser.add_argument("--version", action="version", version=f"dlperf {__version__}")
    common = Parser(add_help=False)
    common.add_argument("--db", help="SQLite store (default: $DLPERF_DB or ./dlperf.db)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    _run_flags(sub.add_parser("run", parents=[common], help="measure a sweep and print the table"))
    table = sub.add_parser("table", parents=[common], help="the Table-7 view of a run")
    table.add_argument("--run", type=int, help="run id (default: the latest)")
    table.add_argument("--format", default="text", help="text, md, csv or json")
    export = sub.add_parser("export", parents=[common], help="one record per cell")
    export.add_argument("--run", type=int, help="run id (default: the latest)")
    export.add_argument("--format", default="jsonl", help="jsonl or csv")
    export.add_argument("--samples", action="store_true", help="include every raw sample")
    lst = sub.add_parser("list", help="the workloads")
    lst.add_argument("--format", default="text", help="text or json")
    lst.add_argument("--all", action="store_true", help="include the tiny test variants")
    env = sub.add_parser("env", parents=[common], help="the stored environment of a run")
    env.add_argument("--run", type=int, help="run id (default: the latest)")
    env.add_argument("--format", default="text", help="text or json")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"dlperf: error: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except KeyboardInterrupt:
        print("dlperf: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.OK


def _db(args) -> str:
    from dlperf.api import default_db

    return args.db or default_db()


def cmd_run(args) -> int:
    from dlperf import api
    from dlperf.measure.timer import TimerConfig
    from dlperf.report.format import seconds

    if args.resume:
        outcome = api.resume(_db(args))
    else:
        try:
            timer = TimerConfig(
                min_steps=args.min_steps, min_time=args.min_time, max_time=args.max_time, max_warmup=args.max_warmup
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        outcome = api.run(
            args.workloads,
            db=_db(args),
            dry_run=args.dry_run,
            argv=["dlperf", *sys.argv[1:]],
            frameworks=args.frameworks,
            devices=args.devices,
            threads=args.threads,
            modes=args.modes,
            repeats=args.repeats,
            timeout=args.timeout,
            compile_timeout=args.compile_timeout,
            pin=args.pin,
            timer=timer,
        )
    if args.dry_run:
        for cell in outcome.plan.cells:
            print(cell.label)
        print(f"{len(outcome.plan.tasks)} cell processes, estimated {seconds(outcome.estimate_s)}")
        return ExitCode.OK
    if outcome.exit_code == ExitCode.INTERRUPTED:
        print(
            f"dlperf: interrupted; finished cells are stored in run {outcome.run_id}. "
            f"Continue with: dlperf run --resume",
            file=sys.stderr,
        )
        return outcome.exit_code
    _print_table(_db(args), outcome.run_id, "text")
    return outcome.exit_code


def _open(args):
    from dlperf.store import Store

    return Store.open(_db(args), create=False)


def _print_table(db: str, run_id: int | None, fmt: str) -> None:
    from dlperf.report import table
    from dlperf.store import Store

    renderers = {"md": table.render_markdown, "csv": table.render_csv, "json": table.render_json}
    if fmt not in (*renderers, "text"):
        raise UsageError(f"--format {fmt!r}: expected text, md, csv or json")
    store = Store.open(db, create=False)
    try:
        run = store.run(run_id)
        view = table.build(run["id"], store.cell_dicts(run["id"]))
    finally:
        store.close()
    if fmt == "text":
        from rich.console import Console

        console = Console()
        console.print(table.render_rich(view))
        console.print(table.LEGEND, highlight=False, markup=False)
        for note in view.notes:
            console.print(f"  note: {note}", highlight=False, markup=False)
    else:
        print(renderers[fmt](view), end="" if fmt == "csv" else "\n")


def cmd_table(args) -> int:
    _print_table(_db(args), args.run, args.format)
    return ExitCode.OK


def cmd_export(args) -> int:
    from dlperf.report import export

    if args.format not in export.FORMATS:
        raise UsageError(f"--format {args.format!r}: expected {' or '.join(export.FORMATS)}")
    store = _open(args)
    try:
        run_id = store.run(args.run)["id"]
        records = [
            export.record(c, store.samples(run_id, c["key"]) if args.samples else None)
            for c in store.cell_dicts(run_id)
        ]
    finally:
        store.close()
    sys.stdout.write(export.render(records, args.format))
    return ExitCode.OK


def cmd_list(args) -> int:
    from dlperf.report.format import count
    from dlperf.workloads import BUILTIN

    if args.format not in ("text", "json"):
        raise UsageError(f"--format {args.format!r}: expected text or json")
    workloads = [w for w in BUILTIN.values() if args.all or not w.hidden]
    if args.format == "json":
        print(
            json.dumps(
                [
                    {
                        "name": w.name,
                        "params": w.params,
                        "batch": w.batch,
                        "data": w.data,
                        "input": list(w.input.shape),
                        "outputs": w.outputs,
                        "paper": w.paper,
                    }
                    for w in workloads
                ],
                indent=2,
            )
        )
        return ExitCode.OK
    print(f"{'workload':<16}{'batch':>7}  {'data':<14}{'input':<14}{'outputs':>8}{'parameters':>14}")
    for w in workloads:
        shape = "x".join(map(str, w.input.shape))
        print(f"{w.name:<16}{w.batch:>7}  {w.data:<14}{shape:<14}{w.outputs:>8}{count(w.params):>14}")
    return ExitCode.OK


def cmd_env(args) -> int:
    store = _open(args)
    try:
        run = store.run(args.run)
    finally:
        store.close()
    env = json.loads(run["env_json"])
    if args.format == "json":
        print(json.dumps(env, indent=2))
        return ExitCode.OK
    if args.format != "text":
        raise UsageError(f"--format {args.format!r}: expected text or json")
    print(f"run {run['id']}  started {run['started_at']}  status {run['status']}")
    _print_env(env)
    return ExitCode.OK


def _print_env(env: dict, indent: str = "") -> None:
    for key, value in env.items():
        if key == "cpu":
            value = {**value, "flags": f"{len(value.get('flags', []))} flags (see --format json)"}
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            _print_env(value, indent + "  ")
        else:
            print(f"{indent}{key}: {value}")


COMMANDS = {"run": cmd_run, "table": cmd_table, "export": cmd_export, "list": cmd_list, "env": cmd_env}
