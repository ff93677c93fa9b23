"""python benchmarks/harness_overhead.py --pairs 5 --threads 2 --markdown --out harness_overhead.json

What dlperf itself costs: the median step time `dlperf run` reports for a workload, against a minimal hand-written
PyTorch training loop of the same model in a fresh process that never imports dlperf.

For each pair and each workload (pair-major, so drift over time hits every workload alike) two child processes run
one after the other, dlperf first in even pairs and the hand loop first in odd ones:

  dlperf     `python -m dlperf run --workloads W --threads T --db <fresh db>`; its median is read back with
             `dlperf export --format jsonl --samples` (median_s), as a user would read it.
  hand loop  this file run again with `--child`: the same thread variables in its environment before torch is imported
             (OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS), the same torch.set_num_threads and
             set_num_interop_threads, the same CPUs when --pin (the affinity dlperf's own worker recorded), the model
             written out below from shared/reference/shi2016.md (parameter count checked), the same synthetic batch made
             once after torch.manual_seed(0), cross-entropy, SGD with the spec's lr and momentum, and per step
             zero_grad(set_to_none=True), forward, loss, backward, step. It warms up for --warmup-steps steps and
             --warmup-time seconds (both), then times each step with time.perf_counter for as many steps and as many
             seconds as dlperf's latest run of the workload sampled (both), and reports the median.
             It checks that `dlperf` is not in sys.modules and exits with an error if it is.

Per workload the ratio of each pair is dlperf's median over the hand loop's; the table gives the median ratio and a
95% percentile-bootstrap interval of it (pairs resampled with replacement, --resamples times, fixed --seed). The
target is 0.97-1.03: above it dlperf's loop costs more than the work itself, below it the two loops are not doing the
same work. Nothing is corrected or scaled: the figures are what the two processes measured.

Run it on an otherwise idle machine: the load average at start and end is printed and stored, because anything else
running shares the cores with both loops and widens the interval. Needs torch for --python, numpy for the bootstrap,
rich (optional) for the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"  # src layout: put on PYTHONPATH so `python -m dlperf` works without an install

TARGET = (0.97, 1.03)
THREAD_COUNT_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")  # what dlperf sets in each cell
# The inherited variables dlperf's worker records (its thread_env), so the two records can be compared as they are.
THREAD_ENV_PREFIXES = ("OMP_", "GOMP_", "KMP_", "MKL_", "ONEDNN_", "DNNL_", "OPENBLAS_", "BLIS_")
THREAD_ENV_NAMES = frozenset(
    {
        "ATEN_CPU_CAPABILITY",
        "TORCH_MKLDNN_MATMUL_MIN_DIM",
        "TORCH_MKLDNN_MATMUL_MIN_SIZE",
        "LD_PRELOAD",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_LAUNCH_BLOCKING",
        "CUBLAS_WORKSPACE_CONFIG",
        "NVIDIA_TF32_OVERRIDE",
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
        "PYTORCH_CUDA_ALLOC_CONF",
    }
)

# The three workloads as shared/reference/shi2016.md gives them: input per sample, classes, mini-batch, SGD, params.
SPEC = {
    "fcn-r": {"input": [784], "classes": 10, "batch": 1024, "lr": 0.05, "momentum": 0.9, "params": 14_205_962},
    "alexnet-r": {"input": [3, 32, 32], "classes": 10, "batch": 1024, "lr": 0.01, "momentum": 0.9, "params": 85_098},
    "resnet-56": {"input": [3, 32, 32], "classes": 10, "batch": 128, "lr": 0.01, "momentum": 0.9, "params": 855_050},
}


# ----------------------------------------------------------------------------------------------------------------------
# The hand-written loop (child process). Imports the standard library and torch, nothing else.


def hand_models():
    """The three networks, written out from shared/reference/shi2016.md. torch is imported here, in the child only."""
    import torch.nn.functional as F
    from torch import nn

    def fcn_r() -> nn.Module:
        return nn.Sequential(
            nn.Linear(784, 2048), nn.Sigmoid(),
            nn.Linear(2048, 4096), nn.Sigmoid(),
            nn.Linear(4096, 1024), nn.Sigmoid(),
            nn.Linear(1024, 10),
        )  # fmt: skip

    def alexnet_r() -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(3, 32, 5, padding=2), nn.MaxPool2d(3, 2), nn.ReLU(),  # 32 -> 15
            nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),  # -> 7
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.AvgPool2d(3, 2),  # -> 3
            nn.Flatten(), nn.Linear(576, 10),
        )  # fmt: skip

    class Block(nn.Module):
        """conv(stride)-BN-ReLU-conv-BN plus the option-A shortcut; no ReLU after the add."""

        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, padding=1)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
            self.bn2 = nn.BatchNorm2d(cout)
            self.stride, self.extra = stride, cout - cin

        def forward(self, x):
            out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
            if self.stride != 1 or self.extra:
                x = x[:, :, :: self.stride, :: self.stride]  # subsample, then zero channels, half before, half after
                x = F.pad(x, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))
            return out + x

    class ResNet56(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, padding=1)
            self.bn = nn.BatchNorm2d(16)
            blocks, cin = [], 16
            for stage, width in enumerate((16, 32, 64)):
                for j in range(9):
                    blocks.append(Block(cin, width, 2 if stage > 0 and j == 0 else 1))
                    cin = width
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            x = self.blocks(F.relu(self.bn(self.conv(x))))
            return self.fc(x.mean((2, 3)))  # global average pool

    return {"fcn-r": fcn_r, "alexnet-r": alexnet_r, "resnet-56": ResNet56}


def child(cfg: dict) -> None:
    """One hand-loop measurement; prints one JSON line. Pinned first, then torch, as dlperf's worker does."""
    if cfg["pin_cpus"]:
        os.sched_setaffinity(0, cfg["pin_cpus"])
    import torch
    import torch.nn.functional as F

    threads = cfg["threads"]
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        pass
    spec = SPEC[cfg["workload"]]
    torch.manual_seed(0)
    model = hand_models()[cfg["workload"]]()
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"{cfg['workload']}: {params:,} parameters (spec {spec['params']:,})", file=sys.stderr)
    if params != spec["params"]:  # not `assert`: python -O would skip it
        sys.exit(f"{cfg['workload']}: {params} parameters, the spec says {spec['params']}")
    x = torch.randn(spec["batch"], *spec["input"])  # made once, reused every step
    y = torch.randint(spec["classes"], (spec["batch"],))
    opt = torch.optim.SGD(model.parameters(), lr=spec["lr"], momentum=spec["momentum"])

    def step() -> float:
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return time.perf_counter() - start

    warm, start = [], time.perf_counter()
    while len(warm) < cfg["warmup_steps"] or time.perf_counter() - start < cfg["warmup_time"]:
        warm.append(step())
    samples, start = [], time.perf_counter()
    while len(samples) < cfg["sample_steps"] or time.perf_counter() - start < cfg["sample_time"]:
        samples.append(step())
    if "dlperf" in sys.modules:
        sys.exit("the hand loop imported dlperf")
    env = {k: v for k, v in os.environ.items() if k in THREAD_ENV_NAMES or k.startswith(THREAD_ENV_PREFIXES)}
    print(
        json.dumps(
            {
                "median_s": statistics.median(samples),
                "n": len(samples),
                "sampled_s": sum(samples),
                "warmup_steps": len(warm),
                "warmup_times": warm,
                "samples": samples,
                "params": params,
                "dlperf_imported": "dlperf" in sys.modules,
                "affinity": sorted(os.sched_getaffinity(0)),
                "torch_threads": torch.get_num_threads(),
                "torch_interop_threads": torch.get_num_interop_threads(),
                "thread_env": dict(sorted(env.items())),
                "torch_version": torch.__version__,
                "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            }
        )
    )


# ----------------------------------------------------------------------------------------------------------------------
# The parent: launch both sides, read their figures, compare.


def base_env() -> dict[str, str]:
    """The environment both sides start from; the thread variables come on top, as dlperf's launcher puts them."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    return env


def cell_env(threads: int) -> dict[str, str]:
    """What dlperf's launcher gives a cell's worker (runner/launch.py child_env): the same for the hand loop."""
    env = base_env()
    env.update(dict.fromkeys(THREAD_COUNT_VARS, str(threads)))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def fail(what: str, proc: subprocess.CompletedProcess) -> None:
    tail = "\n".join((proc.stderr or "").strip().splitlines()[-20:])
    sys.exit(f"{what} failed (exit code {proc.returncode}):\n{tail}")


def run_dlperf(args, workload: str, db: Path) -> dict:
    cmd = [args.python, "-m", "dlperf", "run", "--workloads", workload, "--threads", str(args.threads), "--db", str(db)]
    if args.pin:
        cmd.append("--pin")
    if args.max_time is not None:
        cmd += ["--max-time", str(args.max_time)]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=base_env(), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        fail(shlex.join(cmd), proc)
    export = [args.python, "-m", "dlperf", "export", "--db", str(db), "--format", "jsonl", "--samples"]
    out = subprocess.run(export, env=base_env(), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        fail(shlex.join(export), out)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if len(rows) != 1 or rows[0].get("status") != "ok" or rows[0].get("median_s") is None:
        sys.exit(f"dlperf run of {workload} gave no usable cell: {rows}")
    row = rows[0]
    samples = row["samples"][0] if row.get("samples") else []
    detail = worker_detail(db, row["key"])
    return {
        "median_s": row["median_s"],
        "n": row["n"],
        "sampled_s": sum(samples),
        "warmup_steps": row.get("warmup_steps"),
        "params": row.get("params"),
        "warnings": row.get("warnings", []),
        "affinity": detail.get("affinity"),
        "torch_threads": (detail.get("settings") or {}).get("torch_threads"),
        "torch_interop_threads": (detail.get("settings") or {}).get("torch_interop_threads"),
        "thread_env": detail.get("thread_env"),
        "samples": samples,
        "wall_s": wall,
    }


def worker_detail(db: Path, key: str) -> dict:
    """The worker's own record of its affinity and thread settings: not in the export, so read from the store."""
    try:
        with sqlite3.connect(db) as con:
            row = con.execute("SELECT detail_json FROM measurements WHERE cell_key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else {}
    except (sqlite3.Error, json.JSONDecodeError):
        return {}


def run_hand(args, workload: str, ref: dict) -> dict:
    """The hand loop, sampling as many steps and seconds as `ref` (dlperf's latest run of the workload) did."""
    if args.pin and not ref["affinity"]:
        sys.exit(f"--pin: dlperf's store holds no affinity for {workload}, so the hand loop cannot use the same CPUs")
    cfg = {
        "workload": workload,
        "threads": args.threads,
        "pin_cpus": ref["affinity"] if args.pin else None,
        "warmup_steps": args.warmup_steps,
        "warmup_time": args.warmup_time,
        "sample_steps": max(1, len(ref["samples"])),
        "sample_time": ref["sampled_s"],
    }
    cmd = [args.python, str(Path(__file__).resolve()), "--child", json.dumps(cfg)]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=cell_env(args.threads), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        fail(f"hand loop for {workload}", proc)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.monotonic() - start
    return result


def mismatches(dl: dict, hand: dict, pin: bool) -> list[str]:
    """Settings in which the two processes differed (an empty list when they ran alike)."""
    keys = ["torch_threads", "torch_interop_threads", "thread_env", "params"] + (["affinity"] if pin else [])
    return [f"{k}: dlperf {dl[k]!r}, hand {hand[k]!r}" for k in keys if dl.get(k) is not None and dl[k] != hand[k]]


def bootstrap_median_ci(ratios: list[float], resamples: int, seed: int) -> tuple[float, float]:
    import numpy as np

    r = np.asarray(ratios, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.median(r[rng.integers(0, len(r), size=(resamples, len(r)))], axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def summarize(pairs: list[dict], resamples: int, seed: int) -> dict:
    ratios = [p["ratio"] for p in pairs]
    low, high = bootstrap_median_ci(ratios, resamples, seed)
    ratio = statistics.median(ratios)
    return {
        "pairs": len(pairs),
        "dlperf_median_s": statistics.median(p["dlperf"]["median_s"] for p in pairs),
        "hand_median_s": statistics.median(p["hand"]["median_s"] for p in pairs),
        "ratio_median": ratio,
        "ratio_ci95": [low, high],
        "ratios": ratios,
        "median_in_target": TARGET[0] <= ratio <= TARGET[1],
        "ci_in_target": len(pairs) > 1 and TARGET[0] <= low and high <= TARGET[1],  # one pair: no interval at all
    }


def verdict(s: dict) -> str:
    """yes: the whole CI is inside the target; median only: the CI reaches outside; no: the median is outside."""
    if s["ci_in_target"]:
        return "yes"
    if s["median_in_target"]:
        return "median only"
    return "no, below" if s["ratio_median"] < TARGET[0] else "no, above"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def load() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


LEGEND = "ratio and 95% CI: median over pairs; 0.97-1.03: yes (CI inside), median only (CI reaches out), no"


def print_table(summary: dict[str, dict]) -> None:
    header = ["workload", "pairs", "dlperf (s)", "hand (s)", "ratio", "95% CI", "0.97-1.03"]
    rows = [
        [
            w,
            str(s["pairs"]),
            f"{s['dlperf_median_s']:.4f}",
            f"{s['hand_median_s']:.4f}",
            f"{s['ratio_median']:.3f}",
            f"{s['ratio_ci95'][0]:.3f}-{s['ratio_ci95'][1]:.3f}",
            verdict(s),
        ]
        for w, s in summary.items()
    ]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for r in [header, *rows]:
            print("  ".join(c.ljust(wd) for c, wd in zip(r, widths, strict=True)))
        print(LEGEND)
        return
    table = Table(title="median step time: dlperf / hand-written loop")
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i in (0, 6) else "right", no_wrap=True)
    for r in rows:
        table.add_row(*r)
    Console().print(table)
    print(LEGEND)


def markdown(summary: dict[str, dict], meta: dict) -> str:
    lines = [
        "```",
        meta["command"],
        "```",
        "",
        f"{meta['cpu']}, torch {meta['torch']} ({meta['cpu_capability']}), {meta['threads']} threads"
        f"{', pinned' if meta['pin'] else ''}; load average {meta['load_start']} at start, {meta['load_end']} at end.",
        "",
        "| workload | pairs | dlperf median (s) | hand loop median (s) | ratio (median) | 95% bootstrap CI "
        "| within 0.97-1.03 |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for w, s in summary.items():
        lines.append(
            f"| {w} | {s['pairs']} | {s['dlperf_median_s']:.4f} | {s['hand_median_s']:.4f} | {s['ratio_median']:.3f} "
            f"| {s['ratio_ci95'][0]:.3f}-{s['ratio_ci95'][1]:.3f} | {verdict(s)} |"
        )
    lines += [
        "",
        "ratio = dlperf's reported median / the hand loop's median in each interleaved pair of fresh processes; "
        "the table gives the median over pairs and a 95% bootstrap CI of it (pairs resampled). Within: yes when the "
        "whole CI lies in 0.97-1.03, median only when the CI reaches outside, no when the median itself is outside "
        "(below: the two loops do different work; above: dlperf adds time).",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workloads", default="fcn-r,alexnet-r,resnet-56", help="comma list (default: %(default)s)")
    p.add_argument("--threads", type=int, default=2, help="threads of both loops (default: %(default)s)")
    p.add_argument("--pairs", type=int, default=5, help="interleaved dlperf/hand pairs per workload (default: 5)")
    p.add_argument("--max-time", type=float, default=None, help="dlperf's --max-time per cell (default: dlperf's)")
    p.add_argument("--pin", action="store_true", help="dlperf run --pin, and the hand loop on the same CPUs")
    p.add_argument("--python", default=sys.executable, help="interpreter of both children (default: this one)")
    p.add_argument("--out", type=Path, help="write every figure to this JSON file")
    p.add_argument("--markdown", action="store_true", help="also print a BENCHMARKS.md table and the command")
    p.add_argument("--warmup-steps", type=int, default=10, help="hand loop: warm-up steps at least (default: 10)")
    p.add_argument("--warmup-time", type=float, default=3.0, help="hand loop: warm-up seconds at least (default: 3)")
    p.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default: 10000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--child", help=argparse.SUPPRESS)  # internal: run one hand-loop measurement
    args = p.parse_args(argv)
    if args.child is None:
        args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
        unknown = [w for w in args.workloads if w not in SPEC]
        if unknown:
            p.error(f"unknown workload(s) {', '.join(unknown)}; this benchmark has {', '.join(SPEC)}")
        if args.pairs < 1 or args.threads < 1 or args.resamples < 1000:
            p.error("--pairs and --threads must be at least 1, --resamples at least 1000")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.child is not None:
        child(json.loads(args.child))
        return 0
    command = shlex.join(["python", "benchmarks/harness_overhead.py", *argv])
    meta = {"command": command, "threads": args.threads, "pin": args.pin, "cpu": cpu_model(), "load_start": load()}
    print(f"{command}\nload average at start: {meta['load_start']} (other processes on the cores bias both sides)")
    results: dict[str, list[dict]] = {w: [] for w in args.workloads}
    last_dlperf: dict[str, dict] = {}  # latest dlperf figures per workload: sampling time, CPUs for the hand loop
    with tempfile.TemporaryDirectory(prefix="dlperf-overhead-") as tmp:
        for i in range(args.pairs):
            for w in args.workloads:
                order = ("dlperf", "hand") if i % 2 == 0 else ("hand", "dlperf")  # pair 0: dlperf first, always
                pair: dict = {"pair": i, "order": list(order)}
                for side in order:
                    if side == "dlperf":
                        pair["dlperf"] = last_dlperf[w] = run_dlperf(args, w, Path(tmp) / f"pair{i}-{w}.db")
                    else:
                        pair["hand"] = run_hand(args, w, last_dlperf[w])
                    m = pair[side]
                    print(
                        f"[pair {i + 1}/{args.pairs}] {w:<10} {side:<6} median {m['median_s']:.4f} s "
                        f"(n={m['n']}, {m['sampled_s']:.1f} s sampled, warm-up {m['warmup_steps']} steps, "
                        f"{m['wall_s']:.0f} s wall)",
                        flush=True,
                    )
                pair["ratio"] = pair["dlperf"]["median_s"] / pair["hand"]["median_s"]
                pair["mismatches"] = mismatches(pair["dlperf"], pair["hand"], args.pin)
                for problem in pair["mismatches"]:
                    print(f"  warning: the two processes differed in {problem}", file=sys.stderr)
                results[w].append(pair)
    meta["load_end"] = load()
    first = next(iter(results.values()))[0]["hand"]
    meta.update(torch=first["torch_version"], cpu_capability=first["cpu_capability"], python=args.python)
    summary = {w: summarize(pairs, args.resamples, args.seed) for w, pairs in results.items()}
    print(f"load average at end: {meta['load_end']}")
    print_table(summary)
    if args.markdown:
        print()
        print(markdown(summary, meta))
    if args.out:
        figures = {"meta": meta, "target": TARGET, "summary": summary, "pairs": results}
        args.out.write_text(json.dumps(figures, indent=1) + "\n")
        print(f"figures written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
