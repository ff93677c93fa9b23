"""How long `dlperf predict --memory` takes, and the most memory it holds, on a small model and a 1.3B-parameter LM.

    python benchmarks/predict_memory.py [--gpu H100-SXM5-80GB,A100-SXM4-40GB,T4] [--only small|1.3b] [--before OLD_SRC]

Runs `dlperf predict FILE.py:FACTORY --memory --gpu GPUS` (every mode: fp32, tf32, bf16, fp16) on the two GPT-style
LMs of benchmarks/workloads/lm_1b.py (`small`: 2 layers of 256, 14.5M parameters; `make`: 24 layers of 2048, 1.31B
parameters, AdamW), each in a fresh data directory (DLPERF_DATA_DIR in a temporary folder): cold (every trace in a
probe child), then warm (the traces kept in the cache). With `--before OLD_SRC` (a `src` folder of an older dlperf:
`git archive COMMIT src | tar -x -C DIR`), the same command on that code first, cold. Prints each run's wall time,
its peak RSS (the largest resident set of the command and of each child it waited for: `wait4`'s ru_maxrss, which
Linux takes over the whole tree) and the load average before it, and checks that every run of a model printed the
same table. PyTorch must be importable here: a dedicated environment would live in the data directory this replaces.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
MODELS = {"small": f"{HERE / 'workloads' / 'lm_1b.py'}:small", "1.3b": f"{HERE / 'workloads' / 'lm_1b.py'}:make"}
GPUS = "H100-SXM5-80GB,A100-SXM4-40GB,T4"


def measured(args: list[str], src: Path, data: Path) -> tuple[float, float, str]:
    """`dlperf ARGS` run to its end: wall seconds, peak RSS in MiB over its process tree, and what it printed."""
    env = {**os.environ, "PYTHONPATH": str(src), "DLPERF_DATA_DIR": str(data), "COLUMNS": "200"}
    env.pop("DLPERF_NO_COUNT_CACHE", None)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "dlperf", *args], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        took = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        out.seek(0), err.seek(0)
        printed, said = out.read(), err.read()
    if proc.returncode != 0:
        sys.exit(f"dlperf {' '.join(args)} failed ({proc.returncode}): {said[-2000:]}")
    return took, usage.ru_maxrss / 1024, printed


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default=GPUS, help=f"the GPUs asked (default: {GPUS})")
    parser.add_argument("--only", choices=sorted(MODELS), help="one model (default: both, the small one first)")
    parser.add_argument("--before", type=Path, help="the src folder of the dlperf to compare with")
    opts = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; dlperf predict MODEL --memory --gpu {opts.gpu}; load average (1, 5, 15 min) "
          "before each run")  # fmt: skip
    for name, source in MODELS.items():
        if opts.only not in (None, name):
            continue
        runs = ([("before", opts.before)] if opts.before else []) + [("cold", SRC), ("warm", SRC)]
        tables = set()
        with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as before_data:
            for label, src in runs:
                shown = load()
                folder = Path(before_data if label == "before" else data)
                took, rss, printed = measured(["predict", source, "--memory", "--gpu", opts.gpu], src, folder)
                tables.add(printed)
                print(f"{name:6} {label:6} {took:8.2f} s  peak RSS {rss:8.0f} MiB   load {shown}", flush=True)
        print(f"{name}: {'the same table every run' if len(tables) == 1 else f'{len(tables)} different tables'}")
        if len(tables) == 1:
            print(printed)


if __name__ == "__main__":
    main()
