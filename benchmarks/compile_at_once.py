"""Compiled cells one at a time against `--compile-at-once`: the run's wall time, and each cell's compile, wait and
step, from the store.

    python benchmarks/compile_at_once.py [--workloads resnet-56,fcn-r] [--mode compile] [--device cpu]
                                         [--threads 1] [--pairs 2]

Runs the same compiled cells with `dlperf run --compile-at-once 1` (the default: each compiles, then is timed, one
after the other) and with `--compile-at-once N` (N: the number of cells: all compile side by side, each is timed
alone), alternated pair by pair (one at a time first in even pairs), each run into a fresh store in a temporary
folder, with a short timer (0.5-2 s of timed steps) and no loss check. Prints each run's wall time and, per cell,
its compile time, its wait to be timed alone, its median step and its process's life (all from the store).
The steps of both ways are timed alone, so their medians should agree within the machine's noise; the compile times
of the cells compiled at once are not lone ones (they shared the cores).
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMER = ["--min-time", "0.5", "--max-time", "2", "--max-warmup", "5", "--no-loss-check"]


def one_run(workloads: str, mode: str, device: str, threads: str, at_once: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "c.db"
        cmd = [sys.executable, "-m", "dlperf", "run", "--db", str(db), "--workloads", workloads, "--modes", mode,
               "--devices", device, "--threads", threads, "--compile-at-once", str(at_once), *TIMER]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        start = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.monotonic() - start
        if done.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT cell_key, duration_s, samples_json, detail_json FROM measurements").fetchall()
    cells = {}
    for key, life, samples, detail in rows:
        phases = json.loads(detail).get("phases") or {}
        cells[key.split("|")[0]] = {"compile_s": phases.get("compile_s"), "wait_s": phases.get("gate_s") or 0.0,
                                    "median_s": statistics.median(json.loads(samples)), "life_s": life}  # fmt: skip
    return {"wall_s": wall, "cells": cells}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="resnet-56,fcn-r")
    parser.add_argument("--mode", default="compile")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--pairs", type=int, default=2)
    opts = parser.parse_args()
    n = len(opts.workloads.split(","))
    print(f"{os.cpu_count()} CPUs; {opts.workloads}, {opts.mode}, {opts.device}, {opts.threads} thread(s)")
    for pair in range(opts.pairs):
        ways = (1, n) if pair % 2 == 0 else (n, 1)
        for at_once in ways:
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            run = one_run(opts.workloads, opts.mode, opts.device, opts.threads, at_once)
            each = "; ".join(f"{w}: compile {c['compile_s']:.1f} s, waited {c['wait_s']:.1f} s, step "
                             f"{c['median_s'] * 1e3:.2f} ms, process {c['life_s']:.1f} s"
                             for w, c in run["cells"].items())  # fmt: skip
            print(f"pair {pair + 1} at once {at_once}: wall {run['wall_s']:.1f} s (load {load}); {each}")


if __name__ == "__main__":
    main()
