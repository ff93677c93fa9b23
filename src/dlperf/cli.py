"""The `dlperf` command: one dispatcher, one small function per subcommand.

Importing this module imports no framework (a test checks it): `dlperf --help` stays fast, and every check that needs
a framework runs in a child process.
"""

from __future__ import annotations

import argparse
import json
import sys

from dlperf import __version__, comm, merge, peak
from dlperf.errors import UsageError
from dlperf.report import commands, compare
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
        "channels_last; optimizer foreach or fused; checkpoint; compile; cuda_graphs (CUDA); "
        "dataparallel (CUDA, 2+ GPUs). "
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
    p.add_argument(
        "--no-loss-check",
        action="store_true",
        help="skip the short check that each mode other than fp32 still trains like fp32 (untimed; on by default)",
    )
    p.add_argument("--min-steps", type=int, default=10, help="timed steps at least (default: 10)")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds of timed steps at least (default: 1)")
    p.add_argument("--max-time", type=float, default=60.0, help="seconds of timed steps at most (default: 60)")
    p.add_argument("--max-warmup", type=int, default=30, help="warm-up steps at most (default: 30)")
    ddp = p.add_argument_group("data-parallel cells (PyTorch DistributedDataParallel through torchrun)")
    ddp.add_argument(
        "--nproc",
        help="processes per node, e.g. 1,2: each cell becomes a DDP job (gloo on the CPU, NCCL with one GPU per "
        "process); --threads is then per process (default: the cores shared evenly)",
    )
    ddp.add_argument(
        "--scaling",
        default="strong",
        help="strong: the total batch fixed and split over the processes (the paper's multi-GPU protocol: FCN-R "
        "4096, AlexNet-R 1024, ResNet-56 128); weak: each process trains the workload's batch (default: strong)",
    )
    ddp.add_argument("--nnodes", type=int, default=1, help="machines in each DDP job (default: 1)")
    ddp.add_argument("--node-rank", type=int, default=0, help="this machine's rank among --nnodes (default: 0)")
    ddp.add_argument("--rdzv-endpoint", help="host:port of the c10d rendezvous, the same on every node")
    p.add_argument("--resume", action="store_true", help="continue the latest unfinished run")
    p.add_argument("--dry-run", action="store_true", help="print the planned cells and a time estimate")


def _optimize_flags(p: argparse.ArgumentParser) -> None:
    from dlperf.optimize import DEFAULT_BUDGET_MIN, DEFAULT_TIMER

    p.add_argument("workload", help="a built-in name or path/file.py:factory")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps (default: cpu)")
    p.add_argument("--threads", type=int, help="CPU threads (default: every usable core)")
    p.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_MIN,
        help=f"minutes the search may take; dimensions that do not fit are skipped, and said so "
        f"(default: {DEFAULT_BUDGET_MIN:g})",
    )
    p.add_argument("--repeats", type=int, default=2, help="fresh processes per candidate mode (default: 2)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per cell process (default: 900)")
    p.add_argument(
        "--compile-timeout", type=float, default=600.0, help="seconds a compiled mode may compile (default: 600)"
    )
    p.add_argument("--min-steps", type=int, default=DEFAULT_TIMER.min_steps, help="timed steps at least")
    p.add_argument("--min-time", type=float, default=DEFAULT_TIMER.min_time, help="seconds of timed steps at least")
    p.add_argument("--max-time", type=float, default=DEFAULT_TIMER.max_time, help="seconds of timed steps at most")
    p.add_argument("--max-warmup", type=int, default=DEFAULT_TIMER.max_warmup, help="warm-up steps at most")
    p.add_argument("--format", default="text", help="text or json")


def _timer(args):
    from dlperf.measure.timer import TimerConfig

    try:
        return TimerConfig(
            min_steps=args.min_steps, min_time=args.min_time, max_time=args.max_time, max_warmup=args.max_warmup
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


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
    table.add_argument("--modes", help="only these modes, e.g. fp32,bf16+channels_last (default: every mode)")
    table.add_argument(
        "--best", action="store_true", help="per workload, the fastest mode and its speed-up over fp32 eager"
    )
    export = sub.add_parser("export", parents=[common], help="one record per cell")
    export.add_argument("--run", type=int, help="run id (default: the latest)")
    export.add_argument("--format", default="jsonl", help="jsonl or csv")
    export.add_argument("--samples", action="store_true", help="include every raw sample")
    lst = sub.add_parser("list", help="the workloads, or with --frameworks the frameworks")
    lst.add_argument("--format", default="text", help="text or json")
    lst.add_argument("--all", action="store_true", help="include the tiny test variants")
    lst.add_argument(
        "--frameworks", action="store_true", help="every framework of the paper and today: measurable here or why not"
    )
    _optimize_flags(sub.add_parser("optimize", parents=[common], help="find the fastest training mode for a workload"))
    peak.add_parser(sub, common)
    compare.add_parser(sub, common)
    merge.add_parser(sub, common)
    commands.add_parsers(sub, common)
    comm.add_parser(sub, common)
    env = sub.add_parser(
        "env",
        parents=[common],
        help="a run's stored environment (show), or the frameworks' own environments (list, install)",
        description="show: the environment a run was measured in. list: each framework's dedicated environment. "
        "install NAME...: create one (jax, tensorflow, mxnet) under $DLPERF_DATA_DIR (default "
        "~/.local/share/dlperf), install the versions of its committed constraints file, verify with one step.",
    )
    env.add_argument("action", nargs="?", default="show", choices=["show", "list", "install"])
    env.add_argument("names", nargs="*", help="frameworks to install (install only)")
    env.add_argument("--force", action="store_true", help="install: re-create the environment from scratch")
    env.add_argument("--run", type=int, help="show: run id (default: the latest)")
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
    from dlperf.report.format import seconds

    if args.resume:
        outcome = api.resume(_db(args))
    else:
        timer = _timer(args)
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
            loss_check=not args.no_loss_check,
            timer=timer,
            nprocs=args.nproc,
            scaling=args.scaling,
            nnodes=args.nnodes,
            node_rank=args.node_rank,
            rdzv_endpoint=args.rdzv_endpoint,
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


def _print_table(db: str, run_id: int | None, fmt: str, modes: str | None = None, best: bool = False) -> None:
    from dlperf.report import table
    from dlperf.spec import parse_modes
    from dlperf.store import Store

    renderers = {"md": table.render_markdown, "csv": table.render_csv, "json": table.render_json}
    if fmt not in (*renderers, "text"):
        raise UsageError(f"--format {fmt!r}: expected text, md, csv or json")
    wanted = parse_modes(modes) if modes else None
    store = Store.open(db, create=False)
    try:
        run = store.run(run_id)
        cells = [c for c in store.cell_dicts(run["id"]) if wanted is None or c["mode"] in wanted]
        if wanted and not cells:
            raise UsageError(f"--modes {modes!r}: run {run['id']} has no cells in these modes")
        samples = {c["key"]: store.samples(run["id"], c["key"]) for c in cells} if best else {}
        peak.attach_utilization(store, json.loads(run["fingerprint_json"]), cells)
    finally:
        store.close()
    if best:
        _print_best(run["id"], cells, samples, fmt)
        return
    view = table.build(run["id"], cells)
    if fmt == "text":
        _print_rich(table.render_rich(view), [table.LEGEND], view.notes)
    else:
        print(renderers[fmt](view), end="" if fmt == "csv" else "\n")


def _print_best(run_id: int, cells: list[dict], samples: dict, fmt: str) -> None:
    from dlperf.report import best

    rows = best.build(cells, samples)
    if fmt == "json":
        print(best.render_json(rows))
    elif fmt == "md":
        print(best.render_markdown(rows))
    elif fmt == "text":
        _print_rich(best.render_rich(rows, run_id), [], best.notes(rows))
    else:
        raise UsageError("--best: --format must be text, md or json")


def _print_rich(renderable, lines: list[str], notes: list[str]) -> None:
    from rich.console import Console

    console = Console()
    console.print(renderable)
    for line in lines:
        console.print(line, highlight=False, markup=False)
    for note in notes:
        console.print(f"  note: {note}", highlight=False, markup=False)


def cmd_table(args) -> int:
    _print_table(_db(args), args.run, args.format, args.modes, args.best)
    return ExitCode.OK


def cmd_export(args) -> int:
    from dlperf.report import export

    if args.format not in export.FORMATS:
        raise UsageError(f"--format {args.format!r}: expected {' or '.join(export.FORMATS)}")
    store = _open(args)
    try:
        run = store.run(args.run)
        cells = store.cell_dicts(run["id"])
        peak.attach_utilization(store, json.loads(run["fingerprint_json"]), cells)
        records = [export.record(c, store.samples(run["id"], c["key"]) if args.samples else None) for c in cells]
    finally:
        store.close()
    sys.stdout.write(export.render(records, args.format))
    return ExitCode.OK


def cmd_list(args) -> int:
    from dlperf.report.format import count
    from dlperf.workloads import BUILTIN

    if args.format not in ("text", "json"):
        raise UsageError(f"--format {args.format!r}: expected text or json")
    if args.frameworks:
        return _list_frameworks(args.format)
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


def cmd_optimize(args) -> int:
    from dlperf import optimize
    from dlperf.spec import parse_devices, parse_workloads

    if args.format not in ("text", "json"):
        raise UsageError(f"--format {args.format!r}: expected text or json")
    if args.threads is not None and args.threads < 1:
        raise UsageError("--threads must be at least 1")
    if args.compile_timeout <= 0:
        raise UsageError("--compile-timeout must be positive")
    [workload] = parse_workloads(args.workload)
    [device] = parse_devices(args.device)
    opts = optimize.Options(
        workload=workload,
        device=device,
        threads=args.threads,
        budget_s=args.budget * 60,
        repeats=args.repeats,
        timer=_timer(args),
        timeout=args.timeout,
        compile_timeout=args.compile_timeout,
    )
    search = optimize.optimize(opts, _db(args))
    if args.format == "json":
        print(optimize.render_json(search))
    else:
        optimize.print_text(search)
    if search.exit_code == ExitCode.INTERRUPTED:
        print(f"dlperf: interrupted; what was measured is stored in run {search.run_id}", file=sys.stderr)
    return search.exit_code


def _list_frameworks(fmt: str) -> int:
    from dlperf.frameworks import KNOWN_FRAMEWORKS, framework_status

    rows = [framework_status(name) for name in KNOWN_FRAMEWORKS]
    if fmt == "json":
        print(json.dumps(rows, indent=2))
        return ExitCode.OK
    print(f"{'framework':<12}{'in the paper':<14}{'here':<12}version and environment / why not")
    for r in rows:
        here = "available" if r["available"] else "no"
        where = f"{r['version'] or '?'} ({r['environment']} environment)" if r["available"] else r["reason"]
        print(f"{r['name']:<12}{'yes' if r['paper'] else '':<14}{here:<12}{where}")
    return ExitCode.OK


def cmd_env(args) -> int:
    if args.action == "list":
        return _env_list(args.format)
    if args.action == "install":
        return _env_install(args.names, args.force)
    if args.names:
        raise UsageError(f"dlperf env show takes no names (got {' '.join(args.names)}); did you mean install?")
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


def _env_list(fmt: str) -> int:
    from dlperf.frameworks import envs

    rows = envs.listing()
    if fmt == "json":
        print(json.dumps(rows, indent=2))
        return ExitCode.OK
    print(f"data directory: {envs.data_dir()}")
    for r in rows:
        if r["used"] == "current environment":
            print(f"  {r['framework']:<11} importable in this environment: used directly")
        elif r["installed"]:
            versions = ", ".join(f"{k} {v}" for k, v in (r["versions"] or {}).items() if v)
            print(f"  {r['framework']:<11} {r['path']}  ({versions}; verified {r['verified_at']})")
        else:
            print(f"  {r['framework']:<11} {r['reason']}")
    return ExitCode.OK


def _env_install(names: list[str], force: bool) -> int:
    from dlperf.frameworks import envs

    if not names:
        raise UsageError(f"dlperf env install: name one or more of {', '.join(envs.PACKAGES)}")
    for name in names:
        if name not in envs.PACKAGES:
            raise UsageError(f"dlperf env install {name}: {envs.install_refusal(name)}")
    failed = 0
    for name in names:
        try:
            rec = envs.install(name, force=force, log=lambda line, n=name: print(f"{n}: {line}", flush=True))
        except (envs.InstallError, UsageError) as exc:
            print(f"dlperf: error: {name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        versions = ", ".join(f"{k} {v}" for k, v in (rec["versions"] or {}).items() if v)
        print(f"{name}: ready in {envs.env_dir(name)} ({versions}); verified in {rec['install_s']} s")
    return ExitCode.CELLS_FAILED if failed else ExitCode.OK


def _print_env(env: dict, indent: str = "") -> None:
    for key, value in env.items():
        if key == "cpu":
            value = {**value, "flags": f"{len(value.get('flags', []))} flags (see --format json)"}
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            _print_env(value, indent + "  ")
        else:
            print(f"{indent}{key}: {value}")


COMMANDS = {
    "run": cmd_run,
    "table": cmd_table,
    "export": cmd_export,
    "list": cmd_list,
    "env": cmd_env,
    "optimize": cmd_optimize,
    "peak": peak.cmd_peak,
    "report": commands.cmd_report,
    "plot": commands.cmd_plot,
    "compare": compare.cmd_compare,
    "merge": merge.cmd_merge,
    "comm": comm.cmd_comm,
}
