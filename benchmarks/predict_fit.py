"""Fit the GPU predictor's general efficiencies on published measurements, and report its error held out.

    python benchmarks/predict_fit.py [--csv src/dlperf/data/gpu_dev.csv] [--counts counts.json]

Every row of the CSV that dlperf can predict (predict/validate.py) is counted once (the torch probe, on fake tensors;
`--counts FILE` keeps the counts between runs), then the efficiencies of `roofline.Efficiency` are fitted by least
squares on log(predicted / published) with a robust loss, bounded to their physical ranges (`roofline.LOW`,
`roofline.HIGH`), on the rows in scope only (the `scope` column: `dlperf predict --validate` reports the others
apart, and so does this script): one set for every row, no constant per model or per GPU. The two fixed costs per
kernel are not fitted: they are calibrated on an H100's eager/CUDA-graph pairs (`roofline.CALIBRATED`,
predict_h100.py). Prints the fitted constants (what roofline.EFFICIENCY holds) and `FIT` (what roofline.FIT holds):
the error of the rows in scope in sample, with each GPU left out of the fit in turn (leave-one-GPU-out: the 10th-90th
percentile of its signed error is the uncertainty every prediction prints, its median by mode what --validate prints
beside the in-sample errors), and with each generation left out; then the rows out of scope at the fit. The
measurements dlperf made on a GPU (benchmarks/h100_check_cells.csv) are the second validation set, never read here:
`python benchmarks/predict_h100.py` prints their error.

The fit evaluates the model vectorized over every row (`Rows`); the script checks that it agrees with
`roofline.predict` on every row at the fitted constants before printing anything.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from dlperf.frameworks.common.ops import Count
from dlperf.predict import count as counting
from dlperf.predict import roofline
from dlperf.predict import validate as v
from dlperf.workloads import BUILTIN

NAMES = [f.name for f in fields(roofline.Efficiency)]
FITTED = [n for n in NAMES if n not in roofline.CALIBRATED]


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
    return np.array([getattr(eff, n) for n in FITTED])


def from_vector(x: np.ndarray) -> roofline.Efficiency:
    """The fitted constants `x`, the calibrated ones at their values."""
    return replace(roofline.EFFICIENCY, **{n: float(a) for n, a in zip(FITTED, x, strict=True)})


class Rows:
    """The model of `roofline.predict` over many (case, count) rows at once: each op's wave-quantized work and what
    its blocks pull (`roofline.blocks_bound`), which do not depend on the constants, computed once; a prediction is
    then a few array operations."""

    def __init__(self, cases: list[v.Case], counts: list[Count]) -> None:
        cols: dict[str, list] = {
            k: [] for k in ("row", "calls", "comp", "fp32", "mem", "sm", "tensor", "conv", "launches")
        }
        self.kernels, self.issued, self.input_bytes, self.link_bw, self.measured = [], [], [], [], []
        for i, (c, n) in enumerate(zip(cases, counts, strict=True)):
            sms = roofline.sm_count(c.gpu)
            kernels = issued = 0
            for op in n.ops:
                if c.phases is not None and op.phase not in c.phases:
                    continue
                issued += op.calls * op.issued
                if op.launches == 0:
                    continue
                (peak, unit), *fp32 = roofline.units(op, c.gpu, n.mode) if op.flops else [(1.0, "fp32")]
                cols["row"].append(i)
                cols["calls"].append(op.calls)
                cols["comp"].append(roofline.compute_waves(op, peak, sms))
                # tf32's product on the FP32 cores, where it may run there too (`roofline.units`): the faster is taken
                cols["fp32"].append(roofline.compute_waves(op, fp32[0][0], sms) if fp32 else np.inf)
                cols["mem"].append(op.bytes / c.gpu.memory_bw)  # at the bandwidth, over the efficiency below
                cols["sm"].append(roofline.blocks_bound(op))  # what its blocks pull: no efficiency
                cols["tensor"].append("tensor" in unit)
                cols["conv"].append(op.kind == "conv")
                cols["launches"].append(op.launches)
                kernels += op.calls * op.launches
            self.kernels.append(kernels)
            self.issued.append(issued)
            self.input_bytes.append(n.input_bytes if c.transfer else 0)
            self.link_bw.append(c.gpu.host_link_bw)
            self.measured.append(c.measured_s)
        self.n = len(cases)
        self.cols = {k: np.array(x, dtype=float) for k, x in cols.items()}
        self.row = np.array(cols["row"], dtype=int)
        self.kernels, self.input_bytes = np.array(self.kernels, dtype=float), np.array(self.input_bytes, dtype=float)
        self.issued = np.array(self.issued, dtype=float)
        self.link_bw, self.measured = np.array(self.link_bw), np.array(self.measured)

    def step_s(self, eff: roofline.Efficiency) -> np.ndarray:
        c = self.cols
        conv = np.where(c["conv"] > 0, eff.conv, 1.0)
        fraction = np.where(c["tensor"] > 0, eff.tensor, eff.fp32) * conv
        compute = np.minimum(c["comp"] / fraction, c["fp32"] / (eff.fp32 * conv))
        work = c["calls"] * np.maximum(compute, np.maximum(c["mem"] / eff.memory, c["sm"]))
        gpu = np.bincount(self.row, work, self.n) + self.kernels * eff.kernel_s
        device = np.maximum(self.issued * eff.host_s, np.where(self.issued > 0, eff.host_s, 0.0) + gpu)
        return device + self.input_bytes / (self.link_bw * eff.link)

    def errors(self, eff: roofline.Efficiency) -> np.ndarray:
        return self.step_s(eff) / self.measured - 1


def predicted(cases, counts, eff) -> list[v.Result]:
    return [
        v.Result(c, roofline.predict(n, c.gpu, phases=c.phases, transfer=c.transfer, eff=eff))
        for c, n in zip(cases, counts, strict=True)
    ]


def fit(rows: Rows, start: roofline.Efficiency) -> roofline.Efficiency:
    lo, hi = to_vector(roofline.LOW), to_vector(roofline.HIGH)
    x0 = np.clip(to_vector(start), lo + 1e-9, hi - 1e-9)
    found = least_squares(lambda x: np.log1p(rows.errors(from_vector(x))), x0, bounds=(lo, hi), loss="soft_l1",
                          f_scale=0.1)  # fmt: skip
    return from_vector(found.x)


def held_out(cases, counts, eff, key) -> list[v.Result]:
    """Each group of `key` predicted by a fit on the other groups."""
    out = []
    for group in sorted({key(c) for c in cases}):
        train = [(c, n) for c, n in zip(cases, counts, strict=True) if key(c) != group]
        test = [(c, n) for c, n in zip(cases, counts, strict=True) if key(c) == group]
        e = fit(Rows(*map(list, zip(*train, strict=True))), eff)
        out += predicted([c for c, _ in test], [n for _, n in test], e)
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-quantile, linear between order statistics."""
    return float(np.percentile(values, q * 100))


def table(results: list[v.Result], by) -> list[str]:
    return [
        f"| {s.group} | {s.rows} | {s.median_abs_pct:.0f}% | {s.mean_abs_pct:.0f}% | {s.median_pct:+.0f}% |"
        for s in v.summarize(results, by)
    ]


def side_by_side(sets: dict[str, list[v.Result]], by) -> list[str]:
    """Median absolute error and median signed error per group, one column pair per set."""
    names = list(sets)
    lines = ["| group | rows | " + " | ".join(f"{n} abs | {n} signed" for n in names) + " |",
             "|---|---:|" + "---:|---:|" * len(names)]  # fmt: skip
    summaries = {n: {s.group: s for s in v.summarize(r, by)} for n, r in sets.items()}
    for group in sorted(summaries[names[0]]):
        cells = [f"{summaries[n][group].median_abs_pct:.0f}% | {summaries[n][group].median_pct:+.0f}%" for n in names]
        lines.append(f"| {group} | {summaries[names[0]][group].rows} | " + " | ".join(cells) + " |")
    return lines


def in_scope(cases: list[v.Case], counts: list[Count]) -> tuple[list[v.Case], list[Count]]:
    """The rows whose `scope` column says they measure what dlperf predicts (`Case.in_scope`), with their counts: the
    rows the efficiencies are fitted on and the uncertainty is measured on, as `dlperf predict --validate` scores
    them. The others (epoch wall times, 2015-17 software, loader-bound figures) are predicted and printed apart."""
    kept = [(c, n) for c, n in zip(cases, counts, strict=True) if c.in_scope]
    return [c for c, _ in kept], [n for _, n in kept]


def fit_line(results: list[v.Result], by_gpu: list[v.Result]) -> str:
    """`roofline.FIT` as it is written: the held-out band and median of the rows in scope, the in-sample median beside
    it, and the held-out median by mode (fp32 is not fp16: one band hides that)."""
    signed = [r.error * 100 for r in by_gpu]
    modes = {s.group: round(s.median_abs_pct, 1) for s in v.summarize(by_gpu, lambda r: r.case.mode)}
    in_sample = statistics.median(abs(r.error * 100) for r in results)
    return (f"FIT = {{'rows': {len(by_gpu)}, 'scope': 'in', 'held_out': 'leave-one-GPU-out', "
            f"'median_abs_pct': {statistics.median(map(abs, signed)):.1f}, "
            f"'p10_pct': {percentile(signed, 0.1):.1f}, 'p90_pct': {percentile(signed, 0.9):.1f}, "
            f"'in_sample_median_abs_pct': {in_sample:.1f}, 'by_mode': {modes}}}")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=str(v.shipped()), help="published measurements (default: those dlperf ships)")
    ap.add_argument("--counts", type=Path, help="a JSON file keeping the operator counts between runs")
    args = ap.parse_args(argv)
    cases, skipped = v.read(args.csv, known=lambda name: name in BUILTIN)
    counts = load_counts(cases, args.counts)
    inside, inside_counts = in_scope(cases, counts)
    if not inside:
        raise SystemExit(f"{args.csv}: no row in scope to fit on")
    eff = fit(Rows(inside, inside_counts), roofline.EFFICIENCY)
    every = predicted(cases, counts, eff)
    direct = np.array([r.error for r in every])
    assert np.allclose(direct, Rows(cases, counts).errors(eff), rtol=1e-9, atol=1e-12), (
        "the vectorized model is not roofline's"
    )
    results = [r for r in every if r.case.in_scope]
    by_gpu = held_out(inside, inside_counts, eff, lambda c: c.gpu.name)
    by_gen = held_out(inside, inside_counts, eff, lambda c: c.gpu.generation)
    print("EFFICIENCY =", eff)
    print(fit_line(results, by_gpu))
    print(
        f"\n{len(every)} rows predicted ({len(results)} in scope, fitted on; {len(every) - len(results)} out of scope "
        f"by their metadata, not fitted on), {len(skipped)} skipped or bad. The rows in scope: median absolute error "
        "in sample, leave-one-GPU-out (GPU) and leave-one-generation-out (gen), and the median signed error"
    )
    sets = {"in sample": results, "GPU out": by_gpu, "gen out": by_gen}
    groups = (
        ("all", lambda r: "all"),
        ("generation", lambda r: r.case.gpu.generation),
        ("family", lambda r: r.case.family),
        ("mode", lambda r: r.case.mode),
    )
    for title, by in groups:
        print(f"\nby {title}\n" + "\n".join(side_by_side(sets, by)))
    outside = [r for r in every if not r.case.in_scope]
    if outside:
        print("\nThe rows out of scope, predicted at the fit (never fitted on), by why they are out\n"
              + "\n".join(side_by_side({"at the fit": outside}, lambda r: r.case.scope)))  # fmt: skip


if __name__ == "__main__":
    main()
