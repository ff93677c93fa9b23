"""`dlperf export`: one record per cell with every figure, and with --samples every raw step time."""

from __future__ import annotations

import argparse
import sys

from dlperf.commands.common import add_format, open_store, whole
from dlperf.vocab import EXPORT_FORMATS, ExitCode

HELP = "one record per cell"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=whole("--run", 1), help="run id (default: the latest)")
    add_format(p, *EXPORT_FORMATS)
    p.add_argument("--samples", action="store_true", help="include every raw sample")


def run(args) -> int:
    from dlperf.report import export
    from dlperf.report.utilization import attach_utilization

    store = open_store(args)
    try:
        run = store.run(args.run)
        cells = store.cells(run.id)
        attach_utilization(store, run.fingerprint, cells)
        records = [export.record(c, store.samples(run.id, c.key) if args.samples else None) for c in cells]
    finally:
        store.close()
    sys.stdout.write(export.render(records, args.format))
    return ExitCode.OK
