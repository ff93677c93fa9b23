"""python benchmarks/optimize_suite.py --threads 2 --budget 15 --db optimize_suite.db --out optimize_suite.json

`dlperf optimize` over the seven workloads of Shi et al. (2016), one after the other, each as a user would run it,
after `dlperf peak` has measured this machine's peaks into the same store (unless --no-peak), so that utilization is
shown and a precision whose matrix multiply is far slower than fp32's here is not spent budget on:

    python -m dlperf peak --threads T --db DB
    python -m dlperf optimize W --threads T --budget B --format json --db DB

and a markdown table of what it found: per workload the fp32 eager baseline, the recommended mode, its speed-up over
that baseline with the 95% interval, and the floor the issue set, measured beforehand by hand with plain PyTorch on a
2-core CPU. Every figure comes from the store `optimize` wrote (`--db`), so `dlperf table --best --db DB` and
`dlperf export --db DB` show the same numbers with every sample behind them.

Run it on an otherwise idle machine: it takes about --budget minutes per workload (the search stops a dimension that
would not fit), and anything else running shares the cores with every candidate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

WORKLOADS = ("fcn-s", "alexnet-s", "resnet-50", "fcn-r", "alexnet-r", "resnet-56", "lstm")
# best speed-up over fp32 eager at 2 threads, measured by hand with PyTorch 2.13 before dlperf had `optimize`
FLOORS = {
    "resnet-50": 3.3, "alexnet-r": 3.1, "fcn-r": 2.6, "resnet-56": 2.1, "alexnet-s": 1.7, "lstm": 1.4, "fcn-s": 1.0,
}  # fmt: skip


def optimize(workload: str, args) -> dict:
    cmd = [
        sys.executable, "-m", "dlperf", "optimize", workload, "--threads", str(args.threads),
        "--budget", str(args.budget), "--repeats", str(args.repeats), "--format", "json", "--db", args.db,
    ]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        return {"workload": workload, "error": proc.stderr.strip().splitlines()[-1:] or ["no output"]}
    out = json.loads(proc.stdout)
    out["wall_s"] = time.monotonic() - start
    return out


def row(result: dict) -> str:
    w = result["workload"]
    if "error" in result:
        return f"| {w} | - | - | - | - | {FLOORS[w]:.1f}x | - | error: {result['error'][0]} |"
    base, best = result["baseline"], result["best"]
    chosen = next((r for r in result["results"] if r["mode"] == best["mode"]), {})
    interval = f" [{chosen['ci_low']:.2f}-{chosen['ci_high']:.2f}]" if chosen.get("ci_low") is not None else ""
    speed = f"{best['speedup']:.2f}x{interval}" if best["mode"] != "fp32" else "1.00x (keep fp32)"
    skipped = [n for n in result["notes"] if "not measured" in n]
    note = "; ".join(n.split(":")[0] + " skipped (budget)" for n in skipped) or ""
    return (
        f"| {w} | {base['median_s']:.3f} | {best['mode']} | {best['median_s']:.3f} | {speed} | "
        f"{FLOORS[w]:.1f}x | {result['wall_s'] / 60:.0f} min | {note} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--budget", type=float, default=15.0, help="minutes per workload")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--db", default="optimize_suite.db")
    p.add_argument("--out", default="optimize_suite.json")
    p.add_argument("--no-peak", action="store_true", help="do not measure the peaks first")
    args = p.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}", file=sys.stderr)
    if not args.no_peak:
        peak = [sys.executable, "-m", "dlperf", "peak", "--threads", str(args.threads), "--db", args.db]
        subprocess.run(peak, check=True, stdout=sys.stderr)
    results = []
    for workload in args.workloads.split(","):
        print(f"optimize {workload} ...", file=sys.stderr, flush=True)
        results.append(optimize(workload, args))
        with open(args.out, "w") as f:  # kept after every workload: an interrupted suite keeps what it found
            json.dump({"threads": args.threads, "budget_min": args.budget, "results": results}, f, indent=2)
    print(f"load average at end: {os.getloadavg()}", file=sys.stderr)
    print("| workload | fp32 (s) | best mode | best (s) | speed-up [95% CI] | floor | took | notes |")
    print("|---|---|---|---|---|---|---|---|")
    for result in results:
        print(row(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
