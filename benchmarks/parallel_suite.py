"""The paper's seven networks under every strategy dlperf measures, on the same processes (`dlperf run --parallel`).

    python benchmarks/parallel_suite.py [--db parallel.db] [--nproc 2] [--threads 1] [--max-time 10]
                                        [--workloads fcn-s,...] [--parallel ddp,fsdp,pipeline,tp] [--tensorflow]

One `dlperf run` of the workloads at `--nproc` processes x `--threads` threads each, plus one process of DDP (the
efficiency's T1): DDP, FSDP, the pipeline's GPipe and 1F1B schedules at 4 and 8 micro-batches, and tensor
parallelism where it applies; with `--tensorflow`, a second run of TensorFlow's MirroredStrategy at 1 and N
replicas. Prints a Markdown table per run from the store: each cell's step, its speed against DDP on the same
processes, the largest rank's parameters and peak, the pipeline's bubble (measured and theoretical), the exposed
communication, or why the cell is unsupported. Everything stays in the store (`dlperf report` draws it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from dlperf.report import ddp
from dlperf.report.format import nbytes, seconds
from dlperf.store import Store
from dlperf.workloads import SUITE


def run(db: str, args: argparse.Namespace, extra: list[str]) -> int:
    """One `dlperf run`; returns its run id."""
    cmd = [sys.executable, "-m", "dlperf", "run", "--db", db, "--workloads", args.workloads, "--threads",
           str(args.threads), "--max-time", str(args.max_time), "--min-steps", "3", "--timeout", "900",
           "--no-predict", *extra]  # fmt: skip
    print(" ".join(["dlperf", *cmd[3:]]), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    store = Store.open(db, create=False)
    try:
        return store.run().id  # the latest
    finally:
        store.close()


def table(db: str, run_ids: list[int]) -> None:
    """The runs' cells in one view: the one-process DDP cells of the first are the others' T1."""
    store = Store.open(db, create=False)
    try:
        cells = [c for run_id in run_ids for c in store.cells(run_id)]
    finally:
        store.close()
    rows = {r.column + r.workload + r.mode: r for r in ddp.build(cells)}
    print(f"\nruns {', '.join(map(str, run_ids))}\n")
    print("| workload | column | step | vs DDP | efficiency | params/rank | peak/rank | bubble (theory) | "
          "exposed comm | note |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for c in cells:
        r = rows.get(c.column + c.workload + c.mode)
        if r is None:
            why = (c.error or c.status.value).splitlines()[0][:110]
            print(f"| {c.workload} | {c.column} | {c.status.value} | | | | | | | {why} |")
            continue
        v = dict(zip(ddp.HEAD, ddp.values(r), strict=True))
        split = f"split at {', '.join(r.comm.split)} ({r.comm.split_by})" if r.comm.split else ""
        print(f"| {c.workload} | {c.column} | {seconds(r.median_s)} | {v['vs DDP']} | {v['efficiency']} | "
              f"{nbytes(r.param_bytes)} | {nbytes(r.peak_bytes)} | {v['bubble (theory)']} | {v['exposed comm']} | "
              f"{split} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="parallel.db")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-time", type=float, default=10.0)
    ap.add_argument("--workloads", default=",".join(w.name for w in SUITE))
    ap.add_argument("--parallel", default="ddp,fsdp,pipeline,tp")
    ap.add_argument("--tensorflow", action="store_true", help="also MirroredStrategy, in the TensorFlow environment")
    args = ap.parse_args()
    runs = [run(args.db, args, ["--nproc", "1", "--parallel", "ddp"])]  # T1 of the efficiency
    piped = any(p in args.parallel for p in ("pipeline", "gpipe", "1f1b"))
    runs.append(run(args.db, args, ["--nproc", str(args.nproc), "--parallel", args.parallel,
                                    *(["--microbatches", "4,8"] if piped else [])]))  # fmt: skip
    if args.tensorflow:
        runs.append(run(args.db, args, ["--frameworks", "tensorflow", "--nproc", f"1,{args.nproc}", "--parallel",
                                        "mirrored"]))  # fmt: skip
    if len(set(runs)) < len(runs):
        sys.exit("a dlperf run stored no run (its error is above)")
    table(args.db, runs[:2])
    if args.tensorflow:
        table(args.db, runs[2:])


if __name__ == "__main__":
    main()
