"""Every GPU cell dlperf's checks recorded (the H100's and the H200's) against the predictor, each session apart.

    python benchmarks/predict_gpu_cells.py [--before OLD_SRC]

The sessions: the H100 (benchmarks/h100_check_cells.csv), the first H200 (h200_check_cells.csv, e87f12b), the second
(gpu_runs/h200-2026-11-27b-call1 and -call2, 10ba3bb) and the third (h200-2026-11-27c-call1 and -call2, 10eb4c4: the
second call's store holds the first's runs too, read once). Each cell is the median of its runs in its session, with
its data on the GPU (dlperf's synthetic batch): a loader cell times the input pipeline too and is left out, as are
CPU cells. Each is predicted for the GPU it ran on, by `predict_h100.predicted` (the operators counted on this CPU as
`dlperf predict` counts them). With `--before OLD_SRC` (`git archive OLD src | tar -x -C DIR`, then DIR/src) each
cell is predicted by that dlperf too, in a child process, and both errors are printed side by side. Its last line is
`roofline.MEASURED_GPU`, the band of these errors that `advise --deadline` weighs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from predict_h100 import Measured, predicted
from predict_h100 import read as read_csv

HERE = Path(__file__).parent
RUNS = HERE / "gpu_runs"
H100, H200 = "H100-SXM5-80GB", "H200-SXM-141GB"


@dataclass(frozen=True)
class Session:
    name: str
    gpu: str
    files: tuple[Path, ...]


def calls(stem: str) -> tuple[Path, ...]:
    """A check's two calls' cells (`gpu_runs/STEM-call1` and `-call2`)."""
    return tuple(RUNS / f"{stem}-call{n}" / "cells.jsonl" for n in (1, 2))


SESSIONS = (
    Session("H100 e7d4373", H100, (HERE / "h100_check_cells.csv",)),
    Session("H200 e87f12b", H200, (HERE / "h200_check_cells.csv",)),
    Session("H200 10ba3bb", H200, calls("h200-2026-11-27b")),
    Session("H200 10eb4c4", H200, calls("h200-2026-11-27c")),
)


def read_jsonl(files: tuple[Path, ...]) -> list[Measured]:
    """The GPU cells of `make gpu-check`'s cells.jsonl files (status ok, no loader), a row kept in two files once,
    each cell the median of its runs."""
    rows = {}
    for path in files:
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r["status"] == "ok" and not r["loader"] and r["device"].startswith("cuda"):
                rows[(r["run_id"], r["key"], r["median_s"])] = r
    runs: dict[tuple, list[float]] = {}
    for r in rows.values():
        runs.setdefault((r["framework"], r["workload"], r["mode"], int(r["batch"])), []).append(r["median_s"])
    return [Measured(*key, statistics.median(s), len(s)) for key, s in runs.items()]


def cells(session: Session) -> list[Measured]:
    if session.files[0].suffix == ".csv":
        return [c for path in session.files for c in read_csv(path)]
    return read_jsonl(session.files)


def predictions() -> list[list[float]]:
    """Each session's cells' predicted steps, in seconds, in the order `cells` gives them."""
    return [[p.step_s for p in predicted(cells(s), on=s.gpu)] for s in SESSIONS]


def before(src: Path) -> list[list[float]]:
    """`predictions` by the dlperf in `src`, asked of a child process that imports it."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, __file__, "--json"], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def table(now: list[list[float]], old: list[list[float]] | None) -> list[str]:
    head = "| session | network | mode | batch | runs | measured |" + (" before | error |" if old else "")
    lines = [
        head + " predicted | error |",
        "|---|---|---|---:|---:|---:|" + ("---:|---:|" if old else "") + "---:|---:|",
    ]
    for i, session in enumerate(SESSIONS):
        for j, c in enumerate(cells(session)):
            row = (
                f"| {session.name} | {c.framework} {c.workload} | {c.mode} | {c.batch} | {c.runs} | {ms(c.median_s)} |"
            )
            for got in (*([old[i][j]] if old else []), now[i][j]):
                row += f" {ms(got)} | {(got / c.median_s - 1) * 100:+.0f}% |"
            lines.append(row)
    return lines


def summary(now: list[list[float]], old: list[list[float]] | None) -> list[str]:
    """The median absolute error over each session's cells, and over all of them."""
    out = []
    for label, pick in [(s.name, [i]) for i, s in enumerate(SESSIONS)] + [("all sessions", range(len(SESSIONS)))]:
        measured = [c.median_s for i in pick for c in cells(SESSIONS[i])]
        figures = [(name, [p for i in pick for p in got[i]]) for name, got in (("before", old), ("now", now)) if got]
        said = ", ".join(f"{name} {median_error(got, measured):.0f}%" for name, got in figures)
        out.append(f"{label}: {len(measured)} cells, median absolute error {said}")
    return out


def band(now: list[list[float]]) -> dict:
    """What `roofline.MEASURED_GPU` holds: the signed error's 10th and 90th percentiles and the median absolute error
    over every session's cells, the deadline's risk when it is wider than the published rows' band."""
    pairs = [pair for s, got in zip(SESSIONS, now, strict=True) for pair in zip(cells(s), got, strict=True)]
    errors = [(p / c.median_s - 1) * 100 for c, p in pairs]
    deciles = statistics.quantiles(errors, n=10, method="inclusive")
    return {"cells": len(errors), "p10_pct": round(deciles[0], 1), "p90_pct": round(deciles[-1], 1),
            "median_abs_pct": round(statistics.median(map(abs, errors)), 1)}  # fmt: skip


def median_error(got: list[float], measured: list[float]) -> float:
    return statistics.median(abs(p / m - 1) * 100 for p, m in zip(got, measured, strict=True))


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="the src folder of the dlperf to compare with")
    ap.add_argument("--json", action="store_true", help="print the predictions as JSON (what --before asks)")
    args = ap.parse_args(argv)
    now = predictions()
    if args.json:
        print(json.dumps(now))
        return
    old = before(args.before) if args.before else None
    print("\n".join(table(now, old)) + "\n")
    print("\n".join(summary(now, old)))
    print(f"MEASURED_GPU = {band(now)}  (roofline.MEASURED_GPU holds it)")


if __name__ == "__main__":
    main()
