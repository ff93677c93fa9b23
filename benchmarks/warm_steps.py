"""Does forking a cell from a warm parent change its timed steps? (issue 34)

    python benchmarks/warm_steps.py [--pairs 2] [--workloads fcn-s,...] [--threads 1,2] [--max-time 3] [--src SRC]

A forked child shares its pages with the warm parent copy-on-write: its first write to each page faults. If that
reached the timed steps, a forked cell would time more page faults (and maybe a slower step) than a cold one. This
runs the same sweep (the seven networks of Shi et al. at the given thread counts, fp32, no loss check) with every
cell started cold (DLPERF_NO_WARM=1) and forked, alternated pair by pair (cold first in even pairs), and compares
per cell: the median step (warm over cold, each pair's ratio, then the median over pairs) and the minor page faults
per timed step (`minor_faults_per_step`, both ways), and the cores the step kept busy (`cpu_utilization`, both
ways: a forked child that sized its thread pools after the fork keeps as many busy as a cold one). Step times are
noisy on a shared machine: the ratio's range over the pairs is printed beside it, and nothing is judged from one pair.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEVEN = "fcn-s,alexnet-s,resnet-50,fcn-r,alexnet-r,resnet-56,lstm"


def sweep(src: Path, db: Path, args: argparse.Namespace, cold: bool) -> None:
    cmd = [sys.executable, "-m", "dlperf", "run", "--workloads", args.workloads, "--threads", args.threads,
           "--max-time", str(args.max_time), "--no-loss-check", "--db", str(db)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("DLPERF_NO_WARM", None)
    if cold:
        env["DLPERF_NO_WARM"] = "1"
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    if done.returncode not in (0, 1):
        sys.exit(f"dlperf run failed ({done.returncode}):\n{done.stderr[-3000:]}")


def cells(db: Path) -> dict[str, dict]:
    """Cell label -> its median step, faults per step and how its process started."""
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT c.workload, c.threads, c.median_s, m.detail_json FROM cells c JOIN measurements m "
        "ON c.run_id = m.run_id AND c.key = m.cell_key WHERE c.status = 'ok'"
    ).fetchall()
    conn.close()
    out = {}
    for workload, threads, median_s, detail in rows:
        d = json.loads(detail)
        out[f"{workload} t{threads}"] = {
            "median_s": median_s, "faults": d.get("minor_faults_per_step"), "started": d.get("started", "cold"),
            "cpu": d.get("cpu_utilization"),
        }  # fmt: skip
    return out


def spread(values: list[float]) -> str:
    """The median and, over several runs, the range."""
    text = f"{statistics.median(values):,.0f}"
    return text if len(values) == 1 else f"{text} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=REPO / "src")
    parser.add_argument("--workloads", default=SEVEN)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--max-time", type=float, default=3.0)
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            for way in ("cold", "warm") if pair % 2 == 0 else ("warm", "cold"):
                db = Path(tmp) / f"{way}-{pair}.db"
                sweep(args.src.resolve(), db, args, way == "cold")
                runs[way].append(cells(db))
                print(f"pair {pair + 1}: {way} done", flush=True)
    labels = [k for k in runs["cold"][0] if all(k in r for rs in runs.values() for r in rs)]
    print(
        "\n| cell | cold step (s) | warm / cold step, median (range) | faults per step, cold | warm | "
        "cores busy (cpu_utilization), cold | warm |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label in labels:
        ratios = [w[label]["median_s"] / c[label]["median_s"] for c, w in zip(runs["cold"], runs["warm"], strict=True)]
        cold_faults = spread([r[label]["faults"] for r in runs["cold"]])
        warm_faults = spread([r[label]["faults"] for r in runs["warm"]])
        assert all(r[label]["started"] == "warm" for r in runs["warm"]), "a cell of the warm runs started cold"
        cold_step = statistics.median(r[label]["median_s"] for r in runs["cold"])
        ratio = f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        cpu = [statistics.median(r[label]["cpu"] for r in runs[way]) for way in ("cold", "warm")]
        print(f"| {label} | {cold_step:.4g} | {ratio} | {cold_faults} | {warm_faults} | {cpu[0]:.2f} | {cpu[1]:.2f} |")


if __name__ == "__main__":
    main()
