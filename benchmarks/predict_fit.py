"""Fit the GPU predictor's general efficiencies on published measurements, and report its error.

    python benchmarks/predict_fit.py [--csv src/dlperf/data/gpu_dev.csv] [--counts counts.json]

Every row of the CSV that dlperf can predict (predict/validate.py) is counted once (the torch probe, on fake tensors;
`--counts FILE` keeps the counts between runs), then the seven constants of `roofline.Efficiency` are fitted by
least squares on log(predicted / published) with a robust loss, bounded to physical ranges: one set for every row, no
constant per model or per GPU. Prints the fitted constants (what roofline.EFFICIENCY holds), the error on the rows,
and, as an honest figure of how the method carries to GPUs it was not fitted on, the error when each GPU generation in
turn is left out of the fit and predicted.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import astuple, fields
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from dlperf.frameworks.common.ops import Count
from dlperf.predict import count as counting
from dlperf.predict import roofline
from dlperf.predict import validate as v
from dlperf.workloads import BUILTIN

NAMES = [f.name for f in fields(roofline.Efficiency)]
# Physical ranges: fractions of a peak up to 1 (a convolution up to 2: Winograd and FFT do less work than counted);
# fixed costs of 1-20 microseconds per kernel on the GPU and 2-20 on the host (eager PyTorch dispatch and autograd).
LOW = {"fp32": 0.2, "tensor": 0.05, "conv": 0.3, "memory": 0.2, "kernel_s": 1e-6, "host_s": 2e-6, "link": 0.2}
HIGH = {"fp32": 1.0, "tensor": 1.0, "conv": 2.0, "memory": 1.0, "kernel_s": 2e-5, "host_s": 2e-5, "link": 1.0}
LOGGED = ("kernel_s", "host_s")  # fitted on a log scale: they span decades


def load_counts(cases: list[v.Case], cache: Path | None) -> list[Count]:
    requests = [(counting.at(BUILTIN[c.workload], c.batch, c.seq_len), c.mode) for c in cases]
    keys = [json.dumps([w.to_json(), m], sort_keys=True) for w, m in requests]
    stored = json.loads(cache.read_text()) if cache and cache.exists() else {}
    missing = [(k, r) for k, r in zip(keys, requests, strict=True) if k not in stored]
    if missing:
        unique = dict(missing)
        print(f"counting {len(unique)} steps in one probe child...", file=sys.stderr, flush=True)
        for k, c in zip(unique, counting.counted(list(unique.values())), strict=True):
            stored[k] = {"workload": c.workload, "mode": c.mode, "batch": c.batch, "input_bytes": c.input_bytes,
                         "params": c.params, "ops": [op.to_json() for op in c.ops]}  # fmt: skip
        if cache:
            cache.write_text(json.dumps(stored))
    return [Count.from_json(stored[k]) for k in keys]


def to_vector(eff: roofline.Efficiency) -> np.ndarray:
    return np.array([math.log(x) if n in LOGGED else x for n, x in zip(NAMES, astuple(eff), strict=True)])


def from_vector(x: np.ndarray) -> roofline.Efficiency:
    return roofline.Efficiency(*(math.exp(a) if n in LOGGED else float(a) for n, a in zip(NAMES, x, strict=True)))


def predicted(cases, counts, eff) -> list[v.Result]:
    return [
        v.Result(c, roofline.predict(n, c.gpu, phases=c.phases, transfer=c.transfer, eff=eff))
        for c, n in zip(cases, counts, strict=True)
    ]


def fit(cases, counts, start: roofline.Efficiency) -> roofline.Efficiency:
    def residuals(x):
        return [math.log(r.error + 1) for r in predicted(cases, counts, from_vector(x))]

    lo = to_vector(roofline.Efficiency(**LOW))
    hi = to_vector(roofline.Efficiency(**HIGH))
    x0 = np.clip(to_vector(start), lo + 1e-9, hi - 1e-9)
    found = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1)
    return from_vector(found.x)


def table(results: list[v.Result], by) -> list[str]:
    return [
        f"| {s.group} | {s.rows} | {s.median_abs_pct:.0f}% | {s.mean_abs_pct:.0f}% | {s.median_pct:+.0f}% |"
        for s in v.summarize(results, by)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=str(v.shipped()), help="published measurements (default: those dlperf ships)")
    ap.add_argument("--counts", type=Path, help="a JSON file keeping the operator counts between runs")
    args = ap.parse_args()
    cases, skipped = v.read(args.csv, known=lambda name: name in BUILTIN)
    counts = load_counts(cases, args.counts)
    eff = fit(cases, counts, roofline.EFFICIENCY)
    results = predicted(cases, counts, eff)
    print("EFFICIENCY =", eff)
    overall = v.summarize(results)[0]
    p80 = v.percentile_abs(results, 0.8)
    print(f"FIT = {{'rows': {overall.rows}, 'median_abs_pct': {overall.median_abs_pct:.1f}, "
          f"'p80_abs_pct': {p80:.1f}}}")  # fmt: skip
    print(f"\n{len(results)} rows predicted, {len(skipped)} skipped or bad")
    header = ["| group | rows | median abs error | mean abs error | median signed |", "|---|---:|---:|---:|---:|"]
    for title, by in (
        ("all", lambda r: "all"),
        ("generation", lambda r: r.case.gpu.generation),
        ("family", lambda r: r.case.family),
        ("mode", lambda r: r.case.mode),
        ("family and mode", lambda r: f"{r.case.family} {r.case.mode}"),
    ):
        print(f"\nby {title}\n" + "\n".join(header + table(results, by)))
    # Leave one generation out: fit on the others, predict it.
    held = []
    for gen in sorted({c.gpu.generation for c in cases}):
        train = [(c, n) for c, n in zip(cases, counts, strict=True) if c.gpu.generation != gen]
        test = [(c, n) for c, n in zip(cases, counts, strict=True) if c.gpu.generation == gen]
        e = fit([c for c, _ in train], [n for _, n in train], eff)
        held += predicted([c for c, _ in test], [n for _, n in test], e)
    print("\nleft out of the fit, by generation\n" + "\n".join(header + table(held, lambda r: r.case.gpu.generation)))
    errs = [abs(r.error) * 100 for r in held]
    print(f"\nleft-out overall: median {statistics.median(errs):.0f}%, mean {statistics.fmean(errs):.0f}%")


if __name__ == "__main__":
    main()
