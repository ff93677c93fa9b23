"""python benchmarks/data_suite.py --db data_suite.db --data data_suite.data

The input pipeline of the seven workloads of Shi et al. (2016) on real-format data (issue 17), each as a user would
run it on this machine's CPU, at its cores' threads:

    python -m dlperf data synth DIR --size paper        (unless DIR holds the datasets already)
    python -m dlperf run --workloads ... --threads T --data DIR --db DB

`--data DIR` measures every cell on the paper's synthetic batch and then with each default loader setting (w0 up to
the cores). Then a markdown table per workload of what the store holds: the synthetic cell's samples/s and the
fastest loader setting's, each a long run's (`report.data.throughput`: the batch over the mean step, the steps that
wait for a batch included, as the input-pipeline view says it), the loader alone in samples/s (at w0 and at its
best), the data-wait share at w0 and at the recommended setting (`report.data.recommend`: the smallest not
measurably slower than the fastest), and the verdict: whether that setting is enough (waits under 5% of the step, or
reaches 95% of the synthetic step's throughput while it waits under 20%, that step steady). fcn-s has no dataset in
the paper: its loader cells are unsupported.

Run it on an otherwise idle machine: loader workers and the step's threads share the cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

WORKLOADS = ("fcn-s", "alexnet-s", "resnet-50", "fcn-r", "alexnet-r", "resnet-56", "lstm")
HEADER = (
    "| workload | threads | synthetic (samples/s) | fastest real data (samples/s) | its loader "
    "| loader alone w0 (samples/s) | loader alone best (samples/s) | data wait w0 | recommended | data wait there "
    "| verdict |"
)


def dlperf(*args: str) -> int:
    """`python -m dlperf ARGS`, its output passed through to stderr; exit code 2 (bad input) stops the script."""
    cmd = [sys.executable, "-m", "dlperf", *args]
    done = subprocess.run(cmd, text=True, capture_output=True)
    print(done.stdout + done.stderr, end="", file=sys.stderr)
    if done.returncode not in (0, 1):  # 1: some cells failed; their rows say why
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.returncode


def synthesize(directory: Path) -> None:
    """`dlperf data synth --size paper` for each dataset not yet in `directory`."""
    from dlperf.workloads.datasets import synth

    missing = [d for d in synth.DATASETS if not synth.existing(directory, d)]
    if missing:
        dlperf("data", "synth", str(directory), "--size", "paper", "--only", ",".join(missing))


def share(value: float | None) -> str:
    return f"{100 * value:.1f}%" if value is not None else "-"


def rate(value: float | None) -> str:
    return "-" if not value else f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def recommended(synthetic, loaded: list):
    """The recommended loader setting's cell (`report.data.recommend`: the smallest not measurably slower than the
    fastest) and whether it is enough (data wait under 5% of the step, or 95% of the synthetic step's throughput)."""
    from dlperf.loaders import setting
    from dlperf.report.data import recommend

    chosen = recommend(synthetic, sorted(loaded, key=lambda c: setting(c.loader).cost))
    return next((c for c in loaded if c.loader == chosen.setting), None), chosen.enough is not None


def verdict(w0, enough, best) -> str:  # enough: the recommended setting where it is enough, else None
    """Input-bound or not at w0, and whether a setting measured here cures it."""
    if w0 is None or w0.data is None or w0.data.wait_share is None:
        return "w0 not measured"
    if w0.data.verdict is None:
        return f"not input-bound (w0 waits {share(w0.data.wait_share)})"
    if enough is not None:
        return f"input-bound at w0 ({w0.data.verdict}); {enough.loader} is enough"
    return f"input-bound at every setting measured ({best.data.verdict or 'below 5%'} at {best.loader}, the best)"


def row(cells: list) -> str:
    """One markdown row of a workload's cells at one (device, threads, mode): the synthetic cell and its loaders."""
    from dlperf.report.data import throughput

    synthetic = next((c for c in cells if not c.loader), None)
    first = synthetic or cells[0]
    head = f"| {first.workload} | {first.threads} | {rate(throughput(synthetic))} "
    loaded = [c for c in cells if c.loader and c.status == "ok" and c.median_s]
    if not loaded:
        why = next((c.error or c.status for c in cells if c.loader), "no loader cell")
        return head + f"| - | - | - | - | - | - | - | {why} |"
    best = max(loaded, key=throughput)  # a long run's fastest, as the view ranks them
    w0 = next((c for c in loaded if c.loader == "w0"), None)
    alone = [c for c in loaded if c.data and c.data.alone_samples_per_s]
    fastest = max(alone, key=lambda c: c.data.alone_samples_per_s, default=None)
    chosen, is_enough = recommended(synthetic, loaded)
    enough = chosen if is_enough else None
    return head + (
        f"| {rate(throughput(best))} | {best.loader} | {rate(w0.data.alone_samples_per_s if w0 and w0.data else None)} "
        f"| {rate(fastest.data.alone_samples_per_s) + f' ({fastest.loader})' if fastest else '-'} "
        f"| {share(w0.data.wait_share if w0 and w0.data else None)} | {chosen.loader if chosen else 'none'} "
        f"| {share(chosen.data.wait_share if chosen and chosen.data else None)} | {verdict(w0, enough, best)} |"
    )


def table(cells: list) -> list[str]:
    """The markdown table of a run's cells: a row per (workload, device, threads, mode), in plan order."""
    groups: dict[tuple, list] = defaultdict(list)
    for cell in cells:
        groups[cell.workload, cell.device, cell.threads, cell.mode].append(cell)
    return [HEADER, "|---" * HEADER.count(" | ") + "|---|", *(row(group) for group in groups.values())]


def main() -> int:
    from dlperf.measure.system import usable_cores

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--threads", type=int, default=usable_cores()["cores"], help="default: the usable cores")
    p.add_argument("--data", default="data_suite.data", help="the datasets (written there first where missing)")
    p.add_argument("--db", default="data_suite.db")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--loaders", help="dlperf run --loaders (default: its own, w0 up to the cores)")
    p.add_argument("--min-time", type=float, default=2.0, help="timed seconds per process at least (default: 2)")
    p.add_argument("--max-time", type=float, default=10.0, help="timed seconds per process at most (default: 10)")
    p.add_argument("--repeats", type=int, default=1, help="processes per cell (default: 1)")
    args = p.parse_args()
    if os.path.exists(args.db):
        raise SystemExit(f"{args.db} exists: name a new --db, so the table holds this run's cells only")
    data = Path(args.data).absolute()
    start = time.monotonic()
    synthesize(data)
    wrote = time.monotonic() - start
    timer = ["--min-time", str(args.min_time), "--max-time", str(args.max_time), "--repeats", str(args.repeats)]
    run = ["run", "--workloads", args.workloads, "--threads", str(args.threads), "--data", str(data), *timer]
    dlperf(*run, "--db", args.db, *(["--loaders", args.loaders] if args.loaders else []))
    from dlperf.store import Store

    store = Store.open(args.db, create=False)
    try:
        print("\n".join(table(store.cells(store.runs()[-1].id))))
    finally:
        store.close()
    took = time.monotonic() - start
    print(f"\ndatasets {wrote / 60:.1f} min, measuring {(took - wrote) / 60:.0f} min, at {args.threads} threads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
