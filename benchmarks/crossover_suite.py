"""When a GPU pays for the paper's seven networks: this CPU measured, an H100 and a T4 predicted (`dlperf crossover`).

    python benchmarks/crossover_suite.py [--db crossover.db] [--threads 2]

For each network, batches in powers of four from 1 up to max(its paper batch, 256) are measured on the CPU (quick
timer: at least 5 steps), at `--threads` (default: every core; on 2 cores the fastest for every network of the
suite) so the seven runs fit in minutes; each batch's GPU step is predicted with the batch's copy over the host
link. Prints a Markdown table: the CPU step and each GPU's at the paper's batch, the batch from which each GPU pays,
and its speed-up at the paper's batch. Everything is kept in the store (`dlperf report --run N` draws each run).
"""

from __future__ import annotations

import argparse
import os

from dlperf.crossover import Options, crossover
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
    args = ap.parse_args()
    print("| network | batch | CPU step | H100 step | T4 step | H100 pays from | T4 pays from | H100 x | T4 x | runs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in SUITE:
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
        cells = [w.name, str(w.batch), seconds(row.cpu.median_s), *steps, *start, *speed, str(result.run_id)]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
