"""`dlperf plot KIND`: one kind of chart of the report as a PNG, SVG or PDF file, for a paper or slides."""

from __future__ import annotations

import argparse

from dlperf.commands.common import db_path, real, warn_unreadable, whole
from dlperf.commands.output import replacing, wrote
from dlperf.commands.report import RUN_HELP, runs, writable
from dlperf.errors import UsageError
from dlperf.vocab import ExitCode

MAX_DPI = 1200  # print quality; far beyond it a figure's pixels no longer fit in memory
# plot kind -> chart id prefix (see report/charts.py), and what a missing chart means
KINDS = {
    "scaling": ("scaling-", "no workload was measured at two or more CPU thread counts"),
    "variants": ("variants-", "no workload was measured with more than one framework or mode"),
    "ddp": ("ddp-", "no workload was measured with DDP at two or more process counts"),
    "gpu": ("gpu-speedup", "no GPU was measured"),
    "utilization": ("utilization", "no utilization: measure the peaks with dlperf peak first"),
    "paper": ("paper", "no fp32 cell of the paper's networks at the paper's batch"),
    "profile": ("profile", "no cell was profiled: dlperf profile, or dlperf run --profile"),
}


HELP = "one kind of chart as a PNG, SVG or PDF file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=list(KINDS), help="which charts")
    p.add_argument("-o", "--output", required=True, help="file.png, file.svg or file.pdf (format from the suffix)")
    p.add_argument("--run", type=runs, help=RUN_HELP)
    p.add_argument("--workloads", type=workload_list,
                   help="comma list: only these workloads (default: every workload of the run)")  # fmt: skip
    p.add_argument(
        "--dpi",
        type=whole("--dpi", 10, most=MAX_DPI),
        default=150,
        help=f"PNG resolution, 10 to {MAX_DPI} (default: 150)",
    )
    p.add_argument(
        "--width",
        type=real("--width", 3.0, above=False, most=40.0),
        help="the figure's width in inches, 3 to 40, fonts at their size (a paper's column: 3.5; its page: 7): one "
        "chart a row below 10, a legend that does not fit beside its chart under its title, long names folded "
        "(default: each chart as wide as it needs)",
    )


def run(args) -> int:
    from dlperf.measure.units import named, plural
    from dlperf.report import charts, figures, load, paper, profile

    out = writable(args.output, db=db_path(args))
    if out.suffix.lstrip(".").lower() not in figures.FORMATS:
        raise UsageError(f"-o {args.output!r}: expected a .png, .svg or .pdf file")
    data = load.load(db_path(args), args.run)
    cells = only(data.cells, args.workloads)
    prefix, why_none = KINDS[args.kind]
    rows = paper.compare(cells)[0]
    breakdown = profile.breakdown(cells, data.profiles, data.verdicts)
    drawn = [*charts.all_charts(cells), *([paper.chart(rows)] if rows else []), *([breakdown] if breakdown else [])]
    chosen = [c for c in drawn if c.id.startswith(prefix)]
    if not chosen:  # the cells left out said first: they may be why nothing is left to draw
        left = warn_unreadable(data.unreadable, "the charts") and f" ({plural(len(data.unreadable), 'cell')} left out)"
        latest = " (each cell its latest run's: --run N draws one run's own)" if len(data.runs) > 1 else ""
        why_none = charts.none_timed(cells) or why_none
        raise UsageError(f"plot {args.kind}: nothing to draw in {named('run', (r.id for r in data.runs))}: "
                         f"{why_none}{latest}{left or ''}")  # fmt: skip
    with replacing(out) as tmp:  # the suffix stays: matplotlib reads the format from it
        figures.save(chosen, tmp, dpi=args.dpi, where=where(data.runs), width=args.width)
    wrote(out, f"wrote {out} ({len(chosen)} chart{'s' if len(chosen) > 1 else ''})")
    return warn_unreadable(data.unreadable, "the charts") or ExitCode.OK


def where(runs: list) -> str:
    """The file's heading: "run 3 on vm · AMD EPYC", each machine of the runs once, for a figure shown on its own."""
    from dlperf.measure.units import named
    from dlperf.report.run_list import machine

    machines = "; ".join(dict.fromkeys(machine(r) for r in runs))
    return f"{named('run', (r.id for r in runs))} on {machines}"


def workload_list(text: str) -> list[str]:
    """--workloads, checked before the store is read: a blank item is refused, not read past."""
    from dlperf.flagtext import split_list

    return split_list(text, "--workloads")


def only(cells: list, wanted: list[str] | None) -> list:
    if wanted is None:
        return cells
    known = list(dict.fromkeys(c.workload for c in cells))
    missing = [w for w in wanted if w not in known]
    if missing:
        raise UsageError(f"--workloads {','.join(missing)}: not in the run (it has {', '.join(known)})")
    return [c for c in cells if c.workload in wanted]
