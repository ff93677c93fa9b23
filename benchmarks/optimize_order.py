"""python benchmarks/optimize_order.py fcn-r resnet-56 --threads 2 --budget 5 --dir optimize_order

Does ordering `dlperf optimize`'s search by the fp32 baseline's verdict reach the same best mode in fewer cells? Per
workload, the same search twice, each into its own store, with the same budget:

    python -m dlperf optimize W --threads T --budget B --order fixed --format json --db DIR/fixed.db
    python -m dlperf optimize W --threads T --budget B --order verdict --format json --db DIR/verdict.db

after `dlperf peak --threads T` measured this machine's peaks into the first store, copied to the second, so that both
searches prune the same precisions and read the same peaks. Prints per workload the verdict, both best modes, the
candidate cells measured when the best mode was first measured ("cells to best") and in all, and the wall time. The
claim is about cell counts and the best mode; the times are of a shared machine and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ORDERS = ("fixed", "verdict")


def dlperf(*args: str, timeout: float) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "dlperf", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def search(workload: str, order: str, args) -> dict:
    db = os.path.join(args.dir, f"{order}.db")
    start = time.monotonic()
    done = dlperf("optimize", workload, "--threads", str(args.threads), "--budget", str(args.budget),
                  "--repeats", str(args.repeats), "--order", order,
                  "--format", "json", "--db", db, timeout=args.budget * 60 * 3 + 600)  # fmt: skip
    wall = time.monotonic() - start
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1], "wall_s": wall}
    return {**json.loads(done.stdout), "wall_s": wall}


def row(workload: str, results: dict[str, dict]) -> str:
    fixed, verdict = results["fixed"], results["verdict"]
    v = (verdict.get("order") or {}).get("verdict")
    said = f"{v['bound']}-bound ({v['level']}): {v['figure']}" if v else (verdict.get("error") or "none")
    cells = [f"{r['best']['mode']} | {r['cells_to_best']} of {r['cells']} | {r['wall_s'] / 60:.1f} min"
             if "best" in r else f"error: {r['error']} | | " for r in (fixed, verdict)]  # fmt: skip
    groups = ", ".join((verdict.get("order") or {}).get("groups", []))
    return f"| {workload} | {said} | {groups} | {cells[0]} | {cells[1]} |"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workloads", nargs="+")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--budget", type=float, default=5.0, help="minutes per search")
    p.add_argument("--repeats", type=int, default=2, help="processes per candidate (optimize's --repeats)")
    p.add_argument("--dir", default="optimize_order", help="where the stores and the JSON results go")
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    peak = dlperf("peak", "--threads", str(args.threads), "--db", os.path.join(args.dir, "fixed.db"), timeout=1800)
    if peak.returncode != 0:
        print(f"dlperf peak failed: {peak.stderr.strip()[-500:]}", file=sys.stderr)
        return 1
    shutil.copyfile(os.path.join(args.dir, "fixed.db"), os.path.join(args.dir, "verdict.db"))
    lines = [
        "| workload | fp32 verdict | verdict order | fixed: best mode | cells to best | took "
        "| verdict: best mode | cells to best | took |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    everything = {}
    for workload in args.workloads:
        results = {order: search(workload, order, args) for order in ORDERS}
        everything[workload] = results
        lines.append(row(workload, results))
        print(lines[-1], flush=True)
    with open(os.path.join(args.dir, "results.json"), "w") as f:
        json.dump(everything, f, indent=2)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
