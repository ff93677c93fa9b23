"""When a GPU pays for the paper's seven networks: this CPU measured, an H100 and a T4 predicted (`dlperf crossover`).

    python benchmarks/crossover_suite.py [--db crossover.db] [--threads 2] [--workloads resnet-50,lstm]

For each network, batches in powers of four from 1 up to max(its paper batch, 256) are measured on the CPU (quick
timer: at least 5 steps), at `--threads` (default: every core; on 2 cores the fastest for every network of the
suite); the seven runs take about 20 minutes on 2 cores (19 at 41ebf39, BENCHMARKS.md). Each batch's GPU step is
predicted with the batch's copy over the host link. Prints a Markdown table: the CPU step and each GPU's at the
paper's batch, the batch from which each GPU pays, and its speed-up at the paper's batch ('?' beside a CPU step
dlperf judged disturbed or short of samples: measure that network again with --workloads on a quiet machine).
Everything is kept in the store (`dlperf report --run N` draws each run).
"""

from __future__ import annotations

import argparse
import os

from dlperf.crossover import Options, crossover
from dlperf.report.charts import doubtful
from dlperf.report.format import seconds
from dlperf.workloads import SUITE

GPUS = ("H100-SXM5-80GB", "T4")


def powers_of_four(limit: int) -> tuple[int, ...]:
    out, b = [], 1
    while b <= limit:
        out.append(b)
        b *= 4
    return tuple(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="crossover.db")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--workloads", help="a comma list of the suite's networks (default: all seven); one measured "
                    "again, on a quiet machine say, goes into the same --db as a run of its own")  # fmt: skip
    args = ap.parse_args()
    names = {w.name for w in SUITE}
    chosen = set(args.workloads.split(",")) if args.workloads else names
    if unknown := sorted(chosen - names):
        ap.error(f"--workloads: not in the suite: {', '.join(unknown)} (expected: {', '.join(sorted(names))})")
    print("| network | batch | CPU step | H100 step | T4 step | H100 pays from | T4 pays from | H100 x | T4 x | runs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in (w for w in SUITE if w.name in chosen):
        batches = tuple(sorted({*powers_of_four(max(w.batch, 256)), w.batch}))
        opts = Options(w.name, gpus=GPUS, batches=batches, threads=args.threads)
        result = crossover(opts, args.db, argv=["benchmarks/crossover_suite.py", w.name])
        x = result.answer
        row = next((r for r in x.rows if r.batch == w.batch), None) if x else None
        if row is None or row.cpu is None:
            print(f"| {w.name} | {w.batch} | failed | | | | | | | {result.run_id} |", flush=True)
            continue
        steps = [seconds(row.gpus[g].step_s) if g in row.gpus else "-" for g in GPUS]
        start = [str(x.pays_from(g) or f"never to {x.largest(g)}") for g in GPUS]
        speed = [f"{row.speedup(g):.1f}" if row.speedup(g) else "-" for g in GPUS]
        cpu = seconds(row.cpu.median_s) + ("?" if doubtful(row.cpu) else "")  # disturbed or few samples
        cells = [w.name, str(w.batch), cpu, *steps, *start, *speed, str(result.run_id)]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
