"""What a cell costs beyond its warm-up and timed steps: starting the interpreter, importing the framework,
building the step, counting FLOPs, the memory step, the loss check, the exit, and the parent's own work.

    python benchmarks/cell_cost.py --compare [--pairs 3] [--src SRC]
    python benchmarks/cell_cost.py [--src SRC] [--workloads tiny-fcn-r,fcn-r,resnet-56] [--threads 1,2]
                                   [--modes fp32,bf16] [--repeats 1] [--db DB] [--cold]

`--compare` (issue 34) measures cells started cold (DLPERF_NO_WARM=1) and forked from a warm parent side by side,
alternated pair by pair (cold first in even pairs), each pair two runs per way: a one-cell run as the issue gives it
(`--workloads tiny-fcn-r --threads 1 --max-time 1`) and a 12-cell sweep of tiny workloads (three workloads, threads 1
and 2, fp32 and bf16, the short timer below). A run's cost beyond its steps is its wall time minus the warm-up and
timed steps of all its processes (from the store); a further cell's is the sweep's cost minus the one-cell run's,
over 11. Medians over the pairs, against the issue's targets (2.5 s and 1.0 s).

Without `--compare`:

runs one `dlperf run` of the given cells with a short timer (3 timed steps at least, 0.5 s at most, 3 warm-up steps
at most), from the dlperf source tree SRC (default: this checkout's src/; another checkout's src/ measures another
commit the same way), with the figures kept between runs turned off (DLPERF_NO_COUNT_CACHE=1: every run counts its
FLOPs and memory step as a cell's first run does), then reads every process back from the store it wrote. Per
process, the fixed cost is its wall-clock life minus its warm-up and timed steps (the sums of the stored warm-up
times and samples), so the figure is the same for a commit that records phases and one that does not; where the
process recorded its phases (`detail["phases"]`), they are printed too. The run's own cost beyond its processes
(planning, the probe, storing, printing) is the run's wall time minus every process's. Figures are seconds, medians
over the cells.

Either way, each source tree's runs keep their data in a directory of their own (`data_dir`: the probe's answer is
kept under a key that holds PYTHONPATH, one entry per interpreter, so two trees alternated in one directory, or any
other dlperf run between them, would write over each other's entry and every run after a switch would probe again:
about 2 s of a one-cell run, which a user's second run does not pay), primed by one short run first; and the tree's
bytecode is written first (a fresh worktree under PYTHONDONTWRITEBYTECODE=1 would compile every dlperf module in every
process, the larger tree the longer). The cells are PyTorch's, in this interpreter.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
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
TIMER = ["--min-steps", "3", "--min-time", "0", "--max-time", "0.5", "--max-warmup", "3"]
PHASES = ("startup_s", "framework_s", "build_s", "compile_s", "flops_s", "memory_s", "loss_check_s", "exit_s")


SWEEP = ["--workloads", "tiny-fcn-r,tiny-resnet-56,tiny-alexnet-r", "--threads", "1,2", "--modes", "fp32,bf16"]
ONE_CELL = ["--workloads", "tiny-fcn-r", "--threads", "1", "--max-time", "1"]


def run(src: Path, db: Path, args: argparse.Namespace, cold: bool = False) -> float:
    """One `dlperf run` from `src`; its wall time."""
    flags = ["--workloads", args.workloads, "--threads", args.threads, "--modes", args.modes, *TIMER]
    return dlperf_run(src, db, [*flags, "--repeats", str(args.repeats)], cold)


def dlperf_run(src: Path, db: Path, flags: list[str], cold: bool) -> float:
    """`dlperf run FLAGS --db DB` from `src`, its cells started cold or forked; its wall time."""
    cmd = [sys.executable, "-m", "dlperf", "run", *flags, "--db", str(db)]
    env = {**os.environ, "PYTHONPATH": str(src), "DLPERF_DATA_DIR": str(data_dir(src))}
    env.pop("DLPERF_NO_WARM", None)
    env["DLPERF_NO_COUNT_CACHE"] = "1"  # every run pays its first process's extras, as a first run of a cell does
    if cold:
        env["DLPERF_NO_WARM"] = "1"
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"dlperf run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def data_dir(src: Path) -> Path:
    """The data directory of `src`'s runs: one per source tree, kept between invocations of this script."""
    return Path(tempfile.gettempdir()) / f"dlperf-cell-cost-{hashlib.sha256(str(src).encode()).hexdigest()[:12]}"


def prepare(src: Path) -> None:
    """`src`'s bytecode written, and one short untimed run, so that every measured run finds the probe's answer kept."""
    compileall.compile_dir(src, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        dlperf_run(src, Path(tmp) / "prime.db", ["--workloads", "tiny-fcn-r", "--threads", "1", *TIMER], cold=True)


def processes(db: Path) -> list[dict]:
    """Every measured process: its cell, repeat, life, warm-up and timed seconds, and its phases if it kept them."""
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT cell_key, repeat, status, duration_s, samples_json, detail_json FROM measurements")
    out = []
    for key, repeat, status, duration, samples, detail in rows:
        detail = json.loads(detail)
        warmup = sum(detail.get("warmup_times") or [])
        timed = sum(json.loads(samples))
        fixed = duration - warmup - timed
        out.append({"key": key, "repeat": repeat, "status": status, "duration_s": duration, "warmup_s": warmup,
                    "timed_s": timed, "fixed_s": fixed, "phases": detail.get("phases"),
                    "started": detail.get("started", "cold")})  # fmt: skip
    conn.close()
    return out


def steps_s(procs: list[dict]) -> float:
    return sum(p["warmup_s"] + p["timed_s"] for p in procs)


def compare(src: Path, pairs: int) -> dict:
    """Cold and warm side by side, alternated; every figure, and the medians."""
    figures: dict[str, dict[str, list[float]]] = {w: {"one_cell_s": [], "further_cell_s": [], "sweep_s": []}
                                                  for w in ("cold", "warm")}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(pairs):
            for way in ("cold", "warm") if pair % 2 == 0 else ("warm", "cold"):
                one_db, sweep_db = Path(tmp) / f"one-{pair}-{way}.db", Path(tmp) / f"sweep-{pair}-{way}.db"
                one = dlperf_run(src, one_db, ONE_CELL, way == "cold") - steps_s(processes(one_db))
                sweep = dlperf_run(src, sweep_db, [*SWEEP, *TIMER], way == "cold")
                procs = processes(sweep_db)
                beyond = sweep - steps_s(procs)
                started = {p["started"] for p in procs}
                figures[way]["one_cell_s"].append(one)
                figures[way]["further_cell_s"].append((beyond - one) / (len(procs) - 1))
                figures[way]["sweep_s"].append(sweep)
                print(f"pair {pair + 1} {way}: one-cell run {one:.2f} s beyond its steps; 12-cell sweep {sweep:.1f} s, "
                      f"{(beyond - one) / (len(procs) - 1):.2f} s per further cell (processes started {started})",
                      flush=True)  # fmt: skip
    return figures


def compare_table(figures: dict) -> None:
    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    print()
    print("| | one-cell run beyond its steps (s) | each further cell of 12 beyond its steps (s) | 12-cell sweep (s) |")
    print("|---|---:|---:|---:|")
    for way in ("cold", "warm"):
        f = figures[way]
        print(f"| {way} | {cell(f['one_cell_s'])} | {cell(f['further_cell_s'])} | {cell(f['sweep_s'])} |")
    print("| target (issue 34) | 2.5 | 1.0 | |")
    print("\nmedian (min-max) over the pairs")


def median(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    return f"{statistics.median(present):.2f}" if present else "-"


def report(procs: list[dict], wall: float) -> None:
    print("| cell | process | life (s) | warm-up + timed (s) | fixed (s) | " + " | ".join(PHASES) + " |")
    print("|" + "---|" * (5 + len(PHASES)))
    for p in procs:
        phases = p["phases"] or {}
        cells = [f"{phases[k]:.2f}" if phases.get(k) is not None else "-" for k in PHASES]
        print(f"| {p['key']} | {p['repeat']} | {p['duration_s']:.2f} | {p['warmup_s'] + p['timed_s']:.2f} | "
              f"{p['fixed_s']:.2f} | " + " | ".join(cells) + " |")  # fmt: skip
    overhead = wall - sum(p["duration_s"] for p in procs)
    print()
    print(f"{len(procs)} processes; fixed cost per process: median {median([p['fixed_s'] for p in procs])} s "
          f"(first processes of a cell {median([p['fixed_s'] for p in procs if p['repeat'] == 0])} s); "
          f"the run's own cost beyond its processes: {overhead:.2f} s ({overhead / len(procs):.2f} s a process); "
          f"wall time {wall:.1f} s")  # fmt: skip
    for name in PHASES:
        values = [(p["phases"] or {}).get(name) for p in procs]
        if any(v is not None for v in values):
            print(f"  {name}: median {median(values)} s over the processes that had it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the dlperf source tree to measure")
    parser.add_argument("--workloads", default="tiny-fcn-r,fcn-r,resnet-56")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--modes", default="fp32,bf16")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--db", type=Path, help="keep the store here (default: a temporary file)")
    parser.add_argument("--cold", action="store_true", help="every cell started cold (DLPERF_NO_WARM=1)")
    parser.add_argument("--compare", action="store_true", help="cold against warm, side by side (issue 34)")
    parser.add_argument("--pairs", type=int, default=3, help="--compare: cold/warm pairs (default: 3)")
    args = parser.parse_args()
    prepare(args.src.resolve())
    if args.compare:
        compare_table(compare(args.src.resolve(), args.pairs))
        return
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "cost.db"
        wall = run(args.src.resolve(), db, args, args.cold)
        report(processes(db), wall)


if __name__ == "__main__":
    main()
