"""`make test`'s pytest with cells forked from warm parents and started cold, one after the other (issue 34).

    python benchmarks/suite_warm.py [--pairs 1] [--workers 2] [--keep DIR]

Each pair runs the fast tests of `make test` (`-m "not slow and not serial" -n WORKERS`) twice from this checkout,
warm (as shipped) and cold (`DLPERF_NO_WARM=1`), the order alternating pair by pair, each run into a pytest basetemp
of its own. It reports each run's wall time, and what the warm parent could save at most: the cell processes the
tests' stores hold (every `*.db` under the basetemp), how each started, and the seconds their starts took
(interpreter, framework import, building the step: the phases a cold child pays and a forked one skips). A test that
measures nothing (most of them) gains nothing from a warm parent, so these seconds bound the gain.
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
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
START_PHASES = ("startup_s", "framework_s", "build_s")


def run_suite(way: str, workers: int, basetemp: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("DLPERF_NO_WARM", None)
    if way == "cold":
        env["DLPERF_NO_WARM"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow and not serial",
           "-n", str(workers), "--basetemp", str(basetemp)]  # fmt: skip
    began = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.monotonic() - began
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
    if proc.returncode not in (0, 1):  # 1: some test failed, still a timed run; else pytest did not run the suite
        raise SystemExit(f"{way}: pytest exited {proc.returncode}: {last}")
    print(f"{way}: {wall:.1f} s  ({last})", flush=True)
    return wall


def cell_starts(basetemp: Path) -> tuple[Counter, Counter]:
    """Per (started, would it fork): the stored cell processes, and the seconds their starts took."""
    count, seconds = Counter(), Counter()
    for db in basetemp.rglob("*.db"):
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            rows = conn.execute("SELECT detail_json FROM measurements").fetchall()
            conn.close()
        except sqlite3.Error:
            continue
        for (detail,) in rows:
            d = json.loads(detail or "{}")
            if not d.get("started"):
                continue  # a row a test wrote itself: no process behind it
            why = d.get("cold_because") or ""
            forkable = d["started"] == "warm" or why.startswith("DLPERF_NO_WARM") or why.startswith("the first cell")
            key = (d["started"], "could fork" if forkable else why[:50])
            count[key] += 1
            phases = d.get("phases") or {}
            seconds[key] += sum(phases.get(p) or 0.0 for p in START_PHASES)
    return count, seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--keep", help="keep the basetemps here (default: a temporary folder, removed)")
    args = p.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="suite-warm-"))
    root.mkdir(parents=True, exist_ok=True)
    walls: dict[str, list[float]] = {"warm": [], "cold": []}
    for pair in range(args.pairs):
        for way in ("warm", "cold") if pair % 2 == 0 else ("cold", "warm"):
            base = root / f"{way}{pair}"
            walls[way].append(run_suite(way, args.workers, base))
            count, seconds = cell_starts(base)
            for key in sorted(count, key=lambda k: -seconds[k]):
                print(f"    {count[key]:4d} cell processes {seconds[key]:6.1f} s of starts  {key[0]}, {key[1]}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    for way, values in walls.items():
        each = ", ".join(f"{v:.1f}" for v in values)
        print(f"{way}: median {statistics.median(values):.1f} s over {len(values)} ({each})")
    w, c = statistics.median(walls["warm"]), statistics.median(walls["cold"])
    print(f"warm against cold: {100 * (w - c) / c:+.1f}% (target: -25% or lower)")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(root)], check=False)


if __name__ == "__main__":
    main()
