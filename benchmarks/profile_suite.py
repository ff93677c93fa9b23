"""python benchmarks/profile_suite.py --threads 2 --db profile_suite.db --trace-dir profile_suite.traces

Where the time goes in the seven workloads of Shi et al. (2016), at fp32 and at the best mode `dlperf optimize` found
for each on a 2-core CPU (BENCHMARKS.md, "The fastest training mode per workload"), each as a user would run it:

    python -m dlperf peak --threads T --db DB        (unless --no-peak: the roofline's and the floor's peaks)
    python -m dlperf profile W --threads T --modes fp32,BEST --db DB --trace-dir DIR

and a markdown table of what the store then holds: per cell the timed median, the profiled step over it (the
profiler's overhead), the largest shares of the timed step, the verdict with its figure and the modes it suggests.
Every figure comes from the store, so `dlperf table --explain --db DB` shows the same verdicts.

Run it on an otherwise idle machine: the profiler's overhead and the host share are what other processes change most.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

WORKLOADS = ("fcn-s", "alexnet-s", "resnet-50", "fcn-r", "alexnet-r", "resnet-56", "lstm")
# the best mode per workload of benchmarks/optimize_suite.py (2 threads, commit 0011f3b)
BEST = {
    "fcn-s": "bf16+compile", "alexnet-s": "bf16+foreach", "resnet-50": "bf16+channels_last+foreach",
    "fcn-r": "bf16+fused", "alexnet-r": "bf16+channels_last", "resnet-56": "bf16+foreach", "lstm": "bf16+fused",
}  # fmt: skip
SHOWN = 4  # the largest shares printed per cell


def profile(workload: str, args) -> float:
    modes = ",".join(dict.fromkeys(("fp32", BEST.get(workload, "fp32"))))
    cmd = [
        sys.executable, "-m", "dlperf", "profile", workload, "--threads", str(args.threads),
        "--modes", modes, "--steps", str(args.steps), "--max-time", str(args.max_time),
        "--db", args.db, "--trace-dir", args.trace_dir,
    ]  # fmt: skip
    start = time.monotonic()
    done = subprocess.run(cmd, text=True, capture_output=True)
    print(done.stdout, end="", file=sys.stderr)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}")
    return time.monotonic() - start


def rows(db: str) -> list[str]:
    """A markdown row per profiled cell of every run in the store, in the order they ran."""
    from dlperf.report.profile import shares, verdict
    from dlperf.report.utilization import peak_lookup
    from dlperf.store import Store

    store = Store.open(db, create=False)
    out = []
    try:
        for run in store.runs():
            profiles = store.profiles(run.id)
            for cell in store.cells(run.id):
                record = profiles.get(cell.key)
                if record is None or not record.ok or not cell.median_s:
                    why = record.error if record is not None else cell.error or cell.status.value
                    out.append(f"| {cell.cell.workload} | {cell.cell.mode} | | | not profiled: {why} | | |")
                    continue
                peaks = peak_lookup(store, run.fingerprint, cell.device, cell.threads)
                share = sorted(shares(record.figures, record.overhead).items(), key=lambda kv: -kv[1])[:SHOWN]
                v = verdict(record.figures, peaks, device=cell.device, mode=cell.mode, overhead=record.overhead)
                out.append(
                    f"| {cell.cell.workload} | {cell.cell.mode} | {1000 * cell.median_s:.0f} | "
                    f"{record.overhead:.2f}x | {', '.join(f'{k} {100 * s:.0f}%' for k, s in share)} | "
                    f"{v.label + ': ' + v.figure if v else ''} | {', '.join(v.modes) if v else ''} |"
                )
    finally:
        store.close()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3, help="profiled steps per cell (default: 3)")
    p.add_argument("--max-time", type=float, default=10.0, help="seconds of timed steps per process (default: 10)")
    p.add_argument("--db", default="profile_suite.db")
    p.add_argument("--trace-dir", default="profile_suite.traces")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--no-peak", action="store_true", help="do not run `dlperf peak` first")
    args = p.parse_args()
    if os.path.exists(args.db):
        raise SystemExit(f"{args.db} exists: name a new --db, so the table holds this run's cells only")
    if not args.no_peak:
        peak = [sys.executable, "-m", "dlperf", "peak", "--threads", str(args.threads), "--db", args.db]
        done = subprocess.run(peak, text=True, capture_output=True)
        print(done.stdout, end="", file=sys.stderr)
        if done.returncode:
            raise SystemExit(f"{' '.join(peak)} exited {done.returncode}: {done.stderr.strip()}")
    took = {w: profile(w, args) for w in args.workloads.split(",")}
    print("| workload | mode | timed (ms) | profiled/timed | largest shares of the timed step | verdict | try |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows(args.db)))
    print(f"\ntook {sum(took.values()) / 60:.0f} min: " + ", ".join(f"{w} {s:.0f} s" for w, s in took.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
