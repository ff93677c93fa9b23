"""The memory predictor against measured peaks: `python benchmarks/memory_fit.py [--db STORE]`.

1. The H100 (fitted set): benchmarks/h100_check_cells.csv's CUDA allocator peaks (`peak_mem_kind` cuda_allocator;
   torch.cuda.max_memory_allocated around one step), each against its step traced on fake tensors here. The overhead
   rule of `predict/memory.py` (a fixed part + a fraction of the traced peak) is fitted on these rows (the least
   median relative error) and printed beside the constants in use. `cuda_graphs` rows are set apart: a replayed graph
   allocates nothing, its pool was made before the peak was reset, so their figure is not a step's peak.
2. This CPU (reported apart, not fitted): the live tensor peaks `dlperf run` measured (`peak_mem_kind`
   live_tensors) of the store given with --db (without one, the four small networks are run into a temporary store,
   about two minutes on 2 cores), against the traced peak without the overhead (a CPU's live tensors have no
   allocator).

Prints both tables and their median absolute errors (goal: within 15%).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from dlperf.predict import count, memory
from dlperf.workloads import BUILTIN

HERE = Path(__file__).resolve().parent
CELLS = HERE / "h100_check_cells.csv"
NOT_TRACED = ("channels_last", "cuda_graphs")  # traced as without: channels-last reorders a tensor, never resizes it
CPU_RUN = ["--workloads", "fcn-r,alexnet-r,resnet-56,lstm", "--threads", "2", "--max-time", "1", "--no-predict"]


def h100_rows() -> list[tuple[str, str, int, int]]:
    """(workload, mode, batch, measured bytes), each once."""
    with CELLS.open() as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        found = {(r["workload"], r["mode"], int(r["batch"])): int(r["peak_mem_bytes"]) for r in rows
                 if r["framework"] == "torch" and r["peak_mem_kind"] == "cuda_allocator"}  # fmt: skip
    return [(w.removesuffix("-b256"), m, b, v) for (w, m, b), v in found.items()]


def cpu_rows(db: str | None) -> list[tuple[str, str, int, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        if db is None:
            db = str(Path(tmp) / "cpu.db")
            subprocess.run(["dlperf", "run", *CPU_RUN, "--db", db], check=True, stdout=subprocess.DEVNULL)
        out = subprocess.run(["dlperf", "export", "--db", db, "--run", "all", "--format", "jsonl"], check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
    cells = [json.loads(line) for line in out.splitlines() if line.strip()]
    found = {(c["workload"], c["mode"], c["batch"]): c["peak_mem_bytes"] for c in cells
             if c["status"] == "ok" and c.get("peak_mem_kind") == "live_tensors" and c["device"] == "cpu"}  # fmt: skip
    return [(w, m, b, v) for (w, m, b), v in found.items()]


def traced(rows) -> list[int]:
    asked = [(count.at(BUILTIN[w], b), "+".join(c for c in m.split("+") if c not in NOT_TRACED), b)
             for w, m, b, _ in rows]  # fmt: skip
    found = memory.traces(asked, 1800.0)
    bad = [(r, f) for r, f in zip(rows, found, strict=True) if isinstance(f, str)]
    if bad:
        sys.exit(f"not traced: {bad}")
    return [f.traced for f in found]  # type: ignore[union-attr]


def show(title: str, rows, predicted: list[float]) -> float:
    print(f"\n{title}\n{'workload':<12}{'mode':<20}{'batch':>6}{'measured MiB':>14}{'predicted MiB':>15}{'error':>8}")
    errors = []
    for (w, m, b, v), p in zip(rows, predicted, strict=True):
        errors.append(abs(p - v) / v)
        print(f"{w:<12}{m:<20}{b:>6}{v / 2**20:>14.1f}{p / 2**20:>15.1f}{(p - v) / v:>+8.1%}")
    med = memory.median(errors)
    print(f"median absolute error: {med:.1%} over {len(rows)} rows (goal: within 15%)")
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a store of `dlperf run` CPU cells (default: run the four small networks)")
    args = parser.parse_args()
    rows = h100_rows()
    fitted, apart = [r for r in rows if "cuda_graphs" not in r[1]], [r for r in rows if "cuda_graphs" in r[1]]
    live = traced(fitted + apart)
    pairs = list(zip(live[: len(fitted)], (r[3] for r in fitted), strict=True))
    c, f = memory.fit_rule(pairs)
    print(f"rule fitted on {len(fitted)} H100 rows: {c / 2**20:.0f} MiB + {f:.1%} of the traced peak "
          f"(in use: {memory.OVERHEAD_BYTES / 2**20:.0f} MiB + {memory.OVERHEAD_FRACTION:.1%})")  # fmt: skip
    show("H100, CUDA allocator peaks (the fitted set; the rule in use)", fitted,
         [t + memory.overhead(t) for t in live[: len(fitted)]])  # fmt: skip
    show("H100, cuda_graphs (apart: a replay's pool is outside its peak)", apart,
         [t + memory.overhead(t) for t in live[len(fitted):]])  # fmt: skip
    cpu = cpu_rows(args.db)
    show("This CPU, live tensor peaks of `dlperf run` (not fitted; no overhead)", cpu, traced(cpu))


if __name__ == "__main__":
    main()
