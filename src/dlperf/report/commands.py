"""`dlperf report` (the HTML report) and `dlperf plot` (one chart kind as PNG, SVG or PDF)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlperf.errors import UsageError
from dlperf.vocab import ExitCode

# plot kind -> chart id prefix (see report/charts.py), and what a missing chart means
KINDS = {
    "scaling": ("scaling-", "no workload was measured at two or more CPU thread counts"),
    "variants": ("variants-", "no workload was measured with more than one framework or mode"),
    "ddp": ("ddp-", "no workload was measured with DDP at two or more process counts"),
    "gpu": ("gpu-speedup", "no GPU was measured"),
    "utilization": ("utilization", "no utilization: measure the peaks with dlperf peak first"),
    "paper": ("paper", "no fp32 cell of the paper's networks at the paper's batch"),
}
RUN_HELP = "run id, a comma list of ids, or all (default: the latest run); a later run's cell replaces an earlier one"


def add_parsers(subparsers, common: argparse.ArgumentParser) -> None:
    report = subparsers.add_parser(
        "report", parents=[common], help="a self-contained HTML report of a run (charts, paper comparison, warnings)"
    )
    report.add_argument("--run", help=RUN_HELP)
    report.add_argument("-o", "--output", default="dlperf-report.html", help="HTML file (default: dlperf-report.html)")
    plot = subparsers.add_parser("plot", parents=[common], help="one kind of chart as a PNG, SVG or PDF file")
    plot.add_argument("kind", choices=list(KINDS), help="which charts")
    plot.add_argument("-o", "--output", required=True, help="file.png, file.svg or file.pdf (format from the suffix)")
    plot.add_argument("--run", help=RUN_HELP)
    plot.add_argument("--workloads", help="comma list: only these workloads (default: every workload of the run)")
    plot.add_argument("--dpi", type=int, default=150, help="PNG resolution (default: 150)")


def _db(args) -> str:
    from dlperf.api import default_db

    return args.db or default_db()


def _writable(path: str) -> Path:
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"-o {path!r} is a directory")
    if not out.parent.exists():
        raise UsageError(f"-o {path!r}: directory {str(out.parent)!r} does not exist")
    return out


def cmd_report(args) -> int:
    from dlperf.report import html, load

    out = _writable(args.output)
    data = load.load(_db(args), load.parse_runs(args.run))
    text = html.render(data)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)  # a report is written whole or not at all
    print(f"wrote {out} ({len(text) / 1024:.0f} KiB, {len(data.cells)} cells of run {_ids(data)})")
    return ExitCode.OK


def cmd_plot(args) -> int:
    from dlperf.report import charts, figures, load, paper

    out = _writable(args.output)
    if out.suffix.lstrip(".").lower() not in figures.FORMATS:
        raise UsageError(f"-o {args.output!r}: expected a .png, .svg or .pdf file")
    if args.dpi < 10:
        raise UsageError("--dpi must be at least 10")
    data = load.load(_db(args), load.parse_runs(args.run))
    cells = _only(data.cells, args.workloads)
    prefix, why_none = KINDS[args.kind]
    chosen = [c for c in charts.all_charts(cells, paper.compare(cells)[0]) if c.id.startswith(prefix)]
    if not chosen:
        raise UsageError(f"plot {args.kind}: nothing to draw in run {_ids(data)}: {why_none}")
    figures.save(chosen, out, dpi=args.dpi)
    print(f"wrote {out} ({len(chosen)} chart{'s' if len(chosen) > 1 else ''})", file=sys.stdout)
    return ExitCode.OK


def _only(cells: list[dict], workloads: str | None) -> list[dict]:
    if not workloads:
        return cells
    wanted = [w.strip() for w in workloads.split(",") if w.strip()]
    known = list(dict.fromkeys(c["workload"] for c in cells))
    missing = [w for w in wanted if w not in known]
    if missing:
        raise UsageError(f"--workloads {','.join(missing)}: not in the run (it has {', '.join(known)})")
    return [c for c in cells if c["workload"] in wanted]


def _ids(data) -> str:
    return ", ".join(str(r["id"]) for r in data.runs)
