"""The GPU cells dlperf measured on an H100 against the predictor: its second validation set, and the calibration of
its two fixed costs per kernel; and on an H200, a GPU the calibration never saw.

    python benchmarks/predict_h100.py [--cells benchmarks/h100_check_cells.csv] [--calibrate]
    python benchmarks/predict_h100.py --cells benchmarks/h200_check_cells.csv --gpu H200-SXM-141GB

Reads `dlperf export` rows of `make gpu-check` (h100_check_cells.csv: eager and CUDA-graph modes, the seven networks),
predicts each measured cell for the H100 SXM with its data on the GPU (dlperf's synthetic batch), and prints measured
beside predicted with the error, each cell once (the median of its runs). The fit (predict_fit.py) never reads these
rows: they are a validation set of their own. The eager/CUDA-graph pairs among them calibrate `roofline.HOST_S` and
`roofline.KERNEL_S` (`--calibrate` prints how); they are marked, and the median is given without them too. JAX
cells are reported apart (the count is PyTorch's step).
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from dlperf.modes import PRECISIONS, Mode, mode_components
from dlperf.predict import count as counting
from dlperf.predict import roofline
from dlperf.predict.gpus import lookup
from dlperf.workloads import BUILTIN
from dlperf.workloads.shi2016 import SUITE

CELLS = Path(__file__).with_name("h100_check_cells.csv")
GPU = "H100-SXM5-80GB"
SEVEN = tuple(w.name for w in SUITE)


@dataclass(frozen=True)
class Measured:
    """One cell measured, the median over the runs that measured it."""

    framework: str
    workload: str  # dlperf's workload ("resnet-50-b256": resnet-50 at batch 256)
    mode: str
    batch: int
    median_s: float
    runs: int

    @property
    def precision(self) -> str:
        components = mode_components(self.mode)
        return "tf32" if Mode.TF32 in components else next(p.value for p in components if p in PRECISIONS)

    @property
    def graphs(self) -> bool:
        return Mode.CUDA_GRAPHS in mode_components(self.mode) or self.framework == "jax"

    @property
    def not_modelled(self) -> list[str]:
        skip = (*PRECISIONS, Mode.TF32, Mode.CUDA_GRAPHS)
        return [c.value for c in mode_components(self.mode) if c not in skip]

    @property
    def network(self) -> str:
        return re.sub(r"-b\d+$", "", self.workload) if self.workload not in BUILTIN else self.workload


def read(path: Path) -> list[Measured]:
    """The measured cells (status ok, the synthetic batch: a loader's cells time the input pipeline too) of an
    export, each once: the median of its runs' medians."""
    with path.open() as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))
                if r["status"] == "ok" and not r.get("loader")]  # fmt: skip
    runs: dict[tuple, list[float]] = {}
    for r in rows:
        runs.setdefault((r["framework"], r["workload"], r["mode"], int(r["batch"])), []).append(float(r["median_s"]))
    return [Measured(*key, statistics.median(s), len(s)) for key, s in runs.items()]


def predicted(cells: list[Measured], eff: roofline.Efficiency = roofline.EFFICIENCY, on: str = GPU
              ) -> list[roofline.Prediction]:  # fmt: skip
    """Each cell on the GPU `on`, its batch made on the GPU; a JAX step is one compiled program, issued as a graph
    is."""
    gpu = lookup(on)
    found = counting.counted([(counting.at(BUILTIN[c.network], c.batch), c.precision) for c in cells])
    pairs = zip(cells, found, strict=True)
    return [roofline.predict(n, gpu, eff=eff, transfer=False, cuda_graphs=c.graphs) for c, n in pairs]


def pairs(cells: list[Measured]) -> list[tuple[Measured, Measured]]:
    """(eager, with CUDA graphs) of the same torch network, batch and precision."""
    eager = {(c.workload, c.batch, c.mode): c for c in cells if c.framework == "torch" and not c.graphs}
    return [
        (eager[(c.workload, c.batch, c.precision)], c)
        for c in cells
        if c.framework == "torch" and c.graphs and (c.workload, c.batch, c.precision) in eager
    ]


@dataclass(frozen=True)
class Calibration:
    """One eager/CUDA-graph pair's fixed costs per counted kernel, under roofline's model: eager is launch-bound
    (its step the host's issuing), the graph's step is one launch + the roofline work + each kernel's fixed cost."""

    workload: str
    mode: str
    kernels: int
    host_s: float  # eager / kernels
    exposed_s: float  # (eager - graphs) / kernels: the host time the GPU's work does not hide
    kernel_s: float  # (graphs - one graph launch - roofline work) / kernels: an upper bound (all else unmodelled)


def calibrate(cells: list[Measured], eff: roofline.Efficiency = roofline.EFFICIENCY) -> list[Calibration]:
    found = pairs(cells)
    out = []
    for (eager, graphs), p in zip(found, predicted([g for _, g in found], eff), strict=True):
        work = p.parts["compute"] + p.parts["memory"]
        k, exposed = p.kernels, eager.median_s - graphs.median_s
        graph_fixed = graphs.median_s - roofline.GRAPH_LAUNCH_S - work
        out.append(Calibration(eager.workload, eager.mode, k, eager.median_s / k, exposed / k, graph_fixed / k))
    return out


def chosen(found: list[Calibration]) -> tuple[float, float]:
    """HOST_S: the pairs' median; KERNEL_S: the smallest of the pairs' upper bounds."""
    return statistics.median(c.host_s for c in found), min(c.kernel_s for c in found)


def report(cells: list[Measured], preds: list[roofline.Prediction], calibrated: set[tuple]) -> list[str]:
    lines = ["| framework | network | mode | batch | runs | measured | predicted | error | bound | note |",
             "|---|---|---|---:|---:|---:|---:|---:|---|---|"]  # fmt: skip
    for c, p in zip(cells, preds, strict=True):
        note = ["calibrates HOST_S/KERNEL_S"] if (c.workload, c.mode) in calibrated else []
        note += [f"{', '.join(c.not_modelled)} not modelled"] if c.not_modelled else []
        lines.append(f"| {c.framework} | {c.workload} | {c.mode} | {c.batch} | {c.runs} | {c.median_s * 1e3:.2f} ms "
                     f"| {p.step_s * 1e3:.2f} ms | {error(p, c) * 100:+.0f}% | {p.bound} | "
                     f"{'; '.join(note)} |")  # fmt: skip
    return lines


def error(p: roofline.Prediction, c: Measured) -> float:
    return p.step_s / c.median_s - 1


def medians(cells: list[Measured], preds: list[roofline.Prediction], calibrated: set[tuple]) -> list[str]:
    """The median absolute error of each set that the issue's targets name."""
    rows = list(zip(cells, preds, strict=True))
    sets = {
        "torch cells": [(c, p) for c, p in rows if c.framework == "torch"],
        "torch cells, calibration pairs left out": [
            (c, p) for c, p in rows if c.framework == "torch" and (c.workload, c.mode) not in calibrated
        ],
        "the seven networks, torch fp32 at the paper's batch": [
            (c, p) for c, p in rows if c.framework == "torch" and c.workload in SEVEN and c.mode == "fp32"
        ],
        "JAX cells (PyTorch's count, one program a step), apart": [(c, p) for c, p in rows if c.framework != "torch"],
    }
    out = []
    for name, got in sets.items():
        if got:
            errs = [abs(error(p, c)) * 100 for c, p in got]
            out.append(f"{name}: median absolute error {statistics.median(errs):.0f}% over {len(got)} cells")
    lstm = [(c, p) for c, p in sets["torch cells"] if c.workload == "lstm"]
    out += [f"lstm {c.mode} b{c.batch}: {error(p, c) * 100:+.0f}%" for c, p in lstm]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=Path, default=CELLS, help="dlperf export rows of a GPU run (default: %(default)s)")
    ap.add_argument("--calibrate", action="store_true", help="print the fixed costs per kernel the pairs give")
    ap.add_argument("--gpu", default=GPU, help="the GPU the cells were measured on (default: %(default)s)")
    args = ap.parse_args(argv)
    cells = read(args.cells)
    found = calibrate(cells)
    calibrated = {(c.workload, c.mode) for e, g in pairs(cells) for c in (e, g)}
    if args.calibrate:
        print("| network | mode | counted kernels | eager / kernels | (eager - graphs) / kernels | GPU's fixed cost |")
        print("|---|---|---:|---:|---:|---:|")
        for c in found:
            print(f"| {c.workload} | {c.mode} | {c.kernels} | {c.host_s * 1e6:.1f} us | {c.exposed_s * 1e6:.1f} us "
                  f"| {c.kernel_s * 1e6:.1f} us |")  # fmt: skip
        host, kernel = chosen(found)
        print(f"HOST_S = {host * 1e6:.1f} us (median), KERNEL_S = {kernel * 1e6:.1f} us (smallest upper bound); "
              f"roofline holds HOST_S = {roofline.HOST_S * 1e6:.1f} us, "
              f"KERNEL_S = {roofline.KERNEL_S * 1e6:.1f} us\n")  # fmt: skip
    preds = predicted(cells, on=args.gpu)
    print(f"measured on an {args.gpu} ({args.cells.name}) against predicted; never fitted on\n")
    print("\n".join(report(cells, preds, calibrated)) + "\n")
    print("\n".join(medians(cells, preds, calibrated)))


if __name__ == "__main__":
    main()
