"""How long `dlperf predict` takes with its operator counts cold, kept (warm) and, optionally, before the cache.

    python benchmarks/count_cache.py [--before OLD_SRC] [--workload resnet-50-v1.5]

Runs, each in a fresh data directory (DLPERF_DATA_DIR in a temporary folder, so the counts start cold):
- `dlperf predict --validate` (the 225 shipped rows) cold, then again warm;
- `dlperf predict WORKLOAD --gpu H100-SXM5-80GB` (four modes) cold, then warm;
- with `--before OLD_SRC` (a `src` folder of an older dlperf, e.g. `git archive COMMIT src | tar -x -C DIR`), the
  same two commands on that code first, for the figures before.
Prints each wall time with the load average before it, and checks that every run of a command printed the same
(the scaled and cached counts give the predictions the direct counts gave). PyTorch must be importable here: a
dedicated environment would live in the data directory this replaces.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
TARGETS_S = {"validate warm": 20.0, "validate cold": 60.0, "predict warm": 3.0}


def timed(args: list[str], src: Path, data: Path) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(src), "DLPERF_DATA_DIR": str(data), "COLUMNS": "200"}
    env.pop("DLPERF_NO_COUNT_CACHE", None)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dlperf", *args], capture_output=True, text=True, env=env)
    took = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"dlperf {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return took, done.stdout


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="the src folder of the dlperf to compare with")
    parser.add_argument("--workload", default="resnet-50-v1.5")
    opts = parser.parse_args()
    commands = {
        "validate": ["predict", "--validate"],
        "predict": ["predict", opts.workload, "--gpu", "H100-SXM5-80GB"],
    }
    print(f"{os.cpu_count()} CPUs; load average (1, 5, 15 min) before each run")
    outputs: dict[str, set[str]] = {name: set() for name in commands}
    for name, args in commands.items():
        runs = [("before", opts.before)] if opts.before else []
        runs += [("cold", SRC), ("warm", SRC)]
        with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as before_data:
            for label, src in runs:
                shown = load()
                took, out = timed(args, src, Path(before_data if label == "before" else data))
                outputs[name].add(out)
                goal = TARGETS_S.get(f"{name} {label}")
                verdict = "" if goal is None else f"  (goal < {goal:g} s: {'met' if took < goal else 'NOT met'})"
                print(f"{name:8} {label:6} {took:7.2f} s   load {shown}{verdict}")
    for name, seen in outputs.items():
        print(f"{name}: {'the same output every run' if len(seen) == 1 else f'{len(seen)} different outputs'}")


if __name__ == "__main__":
    main()
