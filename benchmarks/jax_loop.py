"""python benchmarks/jax_loop.py --workloads tiny-fcn-r,tiny-resnet-56,tiny-lstm --threads 1,2 --rounds 3

dlperf's JAX cells against a plain JAX training loop, in the same run: for each round, workload and thread count,
`dlperf run --frameworks jax` (its median read back with `dlperf export`) and then the GPU check's plain JAX loop
(`gpu_check.py --plain-loop W --framework jax`, its jax section's) in JAX's own environment (`dlperf env install
jax`): the step dlperf builds (`frameworks/jax/backend.build`: the same model, batch, optax optimizer and jitted,
donating step), run as a training loop runs it, dispatching step after step and blocking only at the end of each of
five blocks; its step is the median of the blocks' means. The loop restricts itself to the same CPUs and XLA flag
dlperf's worker does (`configure_threads`). The ratio is dlperf's median over the plain loop's; the target is
0.97-1.03, as for PyTorch (`harness_overhead.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
GPU_CHECK = REPO / "benchmarks" / "gpu_check.py"


def dlperf_median(workload: str, threads: int, max_time: float) -> float:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "j.db")
        run = [sys.executable, "-m", "dlperf", "run", "--db", db, "--frameworks", "jax", "--workloads", workload,
               "--threads", str(threads), "--max-time", str(max_time)]  # fmt: skip
        subprocess.run(run, env=env, check=True, capture_output=True)
        out = subprocess.run([sys.executable, "-m", "dlperf", "export", "--db", db, "--format", "jsonl"], env=env,
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
    return json.loads(out.splitlines()[0])["median_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workloads", default="tiny-fcn-r,tiny-resnet-56,tiny-lstm")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-time", type=float, default=3.0, help="dlperf's --max-time; the plain loop's seconds")
    args = p.parse_args()
    sys.path.insert(0, str(SRC))
    from dlperf.envs import env_python

    python = str(env_python("jax"))
    print("| workload | threads | round | dlperf | plain loop | ratio |\n|---|---|---|---|---|---|")
    for r in range(1, args.rounds + 1):
        for workload in args.workloads.split(","):
            for threads in map(int, args.threads.split(",")):
                ours = dlperf_median(workload, threads, args.max_time)
                cmd = [python, str(GPU_CHECK), "--plain-loop", workload, "--framework", "jax", "--device", "cpu",
                       "--seconds", str(args.max_time), "--threads", str(threads)]  # fmt: skip
                done = subprocess.run(cmd, check=True, capture_output=True, text=True)
                plain = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"| {workload} | {threads} | {r} | {ours * 1e6:.1f} µs | {plain['step_s'] * 1e6:.1f} µs "
                      f"({plain['steps']} steps) | {ours / plain['step_s']:.3f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
