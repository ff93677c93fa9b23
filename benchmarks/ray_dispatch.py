"""What Ray's dispatch costs a sweep (`dlperf run --ray`, issue 35): the same six tiny cells measured by a local
`dlperf run`, over a one-node Ray cluster that is already up (`ray start --head`), and over one dlperf starts itself
(`--ray local`), on this machine, in alternating rounds.

    python benchmarks/ray_dispatch.py [--rounds 2]

Prints each command's wall time (median over the rounds), its difference to the local run, that difference per cell,
and the load average before and after. Needs the ray extra (pip install 'dlperf[ray]').
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELLS = ["--workloads", "tiny-fcn-r,tiny-alexnet-r,tiny-resnet-56", "--threads", "1,2"]  # 3 x 2 = 6 cells
TIMER = ["--no-loss-check", "--no-predict", "--max-warmup", "1", "--min-steps", "2", "--min-time", "0",
         "--max-time", "0.5"]  # fmt: skip
N_CELLS = 6


def timed(args: list[str], folder: str) -> float:
    db = tempfile.mktemp(suffix=".db", dir=folder)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dlperf", "run", *CELLS, *TIMER, *args, "--db", db], env=env,
                          capture_output=True, text=True)  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"dlperf run {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    rounds = parser.parse_args().rounds
    from ray.cluster_utils import Cluster

    folder = tempfile.mkdtemp(prefix="rd")  # short: Ray's socket paths inside it
    os.environ["TMPDIR"] = folder
    load_before = os.getloadavg()
    cluster = Cluster(
        initialize_head=True, head_node_args={"temp_dir": os.path.join(folder, "ray"), "include_dashboard": False}
    )
    kinds = {
        "local dlperf run": [],
        "--ray HOST:PORT (a cluster already up)": [],
        "--ray local (started and stopped)": [],
    }
    try:
        for _ in range(rounds):
            kinds["local dlperf run"].append(timed([], folder))
            kinds["--ray HOST:PORT (a cluster already up)"].append(timed(["--ray", cluster.address], folder))
            kinds["--ray local (started and stopped)"].append(timed(["--ray", "local"], folder))
    finally:
        cluster.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    load_after = os.getloadavg()
    local = statistics.median(kinds["local dlperf run"])
    print(f"{N_CELLS} cells, {rounds} rounds, {os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after")  # fmt: skip
    print("| how | wall (median) | over local | per cell |\n|---|---:|---:|---:|")
    for kind, seconds in kinds.items():
        median = statistics.median(seconds)
        print(f"| {kind} | {median:.1f} s | {median - local:+.1f} s | {(median - local) / N_CELLS:+.2f} s |")


if __name__ == "__main__":
    main()
