"""`dlperf list`: the workloads, or with --frameworks every framework of the paper and today's, measurable here or
why not."""

from __future__ import annotations

import argparse
import json

from dlperf.commands.common import add_format
from dlperf.vocab import ExitCode

HELP = "the workloads, or with --frameworks the frameworks"
TAKES_DB = False  # reads no store


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_format(p, "text", "json")
    p.add_argument("--all", action="store_true", help="include the tiny test variants")
    p.add_argument(
        "--frameworks", action="store_true", help="every framework of the paper and today: measurable here or why not"
    )


def run(args) -> int:
    from dlperf.workloads import BUILTIN, PUBLISHED

    if args.frameworks:
        return list_frameworks(args.format)
    published = {w.name for w in PUBLISHED}
    workloads = [w for w in BUILTIN.values() if args.all or not w.hidden]
    if args.format == "json":
        rows = [
            {"name": w.name, "params": w.params, "batch": w.batch, "data": w.data, "input": list(w.input.shape),
             "outputs": w.outputs, "paper": w.paper, "published": w.name in published}
            for w in workloads
        ]  # fmt: skip
        print(json.dumps(rows, indent=2))
        return ExitCode.OK
    print(f"{'workload':<18}{'batch':>7}  {'data':<14}{'input':<14}{'outputs':>8}{'parameters':>14}")
    _print_rows(w for w in workloads if w.name not in published)
    print(f"\n{PUBLISHED_HEADING}")
    _print_rows(w for w in workloads if w.name in published)
    return ExitCode.OK


PUBLISHED_HEADING = "published networks (for dlperf predict --validate)"


def _print_rows(workloads) -> None:
    from dlperf.report.format import count

    for w in workloads:
        shape = "x".join(map(str, w.input.shape))
        print(f"{w.name:<18}{w.batch:>7}  {w.data:<14}{shape:<14}{w.outputs:>8}{count(w.params):>14}")


def list_frameworks(fmt: str) -> int:
    from dlperf.envs import KNOWN_FRAMEWORKS, framework_status

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
