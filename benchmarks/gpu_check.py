"""python benchmarks/gpu_check.py OUT [--only SECTIONS] [--budget SECONDS]      (make gpu-check GPU_CHECK_OUT=OUT)

The GPU acceptance check (issue 27): on a machine with a CUDA GPU, dlperf's GPU paths run for real, each as a user
would run them, into one store, and each relation they must hold becomes a PASS or FAIL line with its figures
(benchmarks/gpu_relations.py). It runs the machine's own torch and JAX with dlperf from this source tree
(PYTHONPATH=src: nothing is installed), and writes to OUT, after every section, so a stopped check keeps what it
measured:

    OUT/gpu_check.md     the table, with the GPU, driver, CUDA, torch, JAX and the commit
    OUT/gpu_check.json   the same lines with their data, and the header
    OUT/cells.jsonl      `dlperf export` of every run (the predictor's data: eager and CUDA-graph pairs, ...)
    OUT/trace.json.gz    the profile section's smallest trace, to study where no GPU is
    OUT/gpu_check.log    every command, its exit code and its output

CUDA cells fork from a warm parent that never initialized the CUDA driver, as dlperf's default is (table7 says whether
each did), which saves most of each GPU cell's start, compiled cells' included; JAX's cells start cold.

Sections, in order (--only takes a comma list of them; a second call's `--only left` those the first did not begin,
in this order):
    table7     the seven networks at the paper's batch in fp32 (`dlperf run --devices cuda:0`), each against a
               hand-written plain loop of the same model, the loops in one fresh process (this script's --plain-loop)
    peak       `dlperf peak --devices cuda:0`: bf16 matmul and bandwidth against the datasheet, copies, launch cost,
               tf32 products faster than fp32's
    nccl       `dlperf comm --backend nccl --nproc 1`, and --nproc 2 on one GPU refused
    modes      tf32, bf16, bf16+channels_last, bf16+cuda_graphs on resnet-50 and resnet-56, against table7's fp32;
               fp32 and tf32 on resnet-50 b256, bound by its matrix products
    crossover  `dlperf crossover fcn-r` with the measured CUDA cell in the store: the GPU side "measured"
    data       `dlperf data synth`, then loader cells w0 and w2+pin of fcn-r, resnet-56 and resnet-50 on CUDA
    compile    bf16+compile on resnet-50 and resnet-56, compiling side by side and each timed alone (`run
               --compile-at-once 2`, which the processes' stored timelines must show)
    profile    `dlperf run --profile` of resnet-56 b128, resnet-50 b16 and b256: categories, kernels, verdicts, traces
    jax        `--frameworks jax` on fcn-r and resnet-56 on CUDA, each against a plain JAX loop of the step dlperf
               builds (--plain-loop --framework jax)
    tests      `pytest -m gpu` with DLPERF_REQUIRE=cuda, one test at a time (`-p no:xdist`: they share the GPU)
    predicted  every GPU cell of the check's runs with its stored prediction and error (data, no threshold)

`--resume DIR` continues an earlier check whose OUT is DIR (15 minutes of a lent GPU hold one full check and a
rerun of part of it): the sections all of whose lines passed there are kept, marked with the commit they were
measured at, and the rest run again on a copy of its store (DIR/check.db, which every check writes beside its table),
so the sections that read earlier cells (modes, crossover, predicted) see them; a DIR without its check.db is refused
(exit 2) before anything runs. `predicted` reads every GPU cell: it is kept only when every other section is.
dlperf's caches (the planning probe's answers, the predictions' operator counts) are kept in OUT/cache and taken up by
the resumed check. Once every section has a time, here or in the checks it resumed (whatever --only chose), a last
line (`time`) holds the whole check to 8 minutes with where the time went.

On a lent GPU (docs/guides/ci.md): `make gpu-check GPU_CHECK_OUT=$OUT GPU_CHECK_ARGS="--budget 450"`, its files
brought back into gpu-check/call1; then, the device tool's `carry` naming gpu-check/call1 (an ignored folder travels
only so), `GPU_CHECK_ARGS="--resume gpu-check/call1 --only left --budget 300"`.

`--quick` takes the tiny workloads and short timers, and `--device cpu` runs the same commands on the CPU: how the
script itself is tested without a GPU (its CUDA-only relations then FAIL, as they should there). Exit 0 when every
line passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "src")]
import gpu_relations as rel  # noqa: E402

# in the order they run, and a second call's `--only left` takes those the first did not begin in this order: the
# headline (table7) and the cheap ones (peak, nccl) first, modes and crossover after table7 (they read its cells),
# compile where call 1 (--budget 450) ends with each section at its expected time plus 10% and call 2 (--budget 300)
# still begins it when the first sections overran (it was last but one: not begun in either call then), the test
# suite last but one (the least lost where call 2 runs short), and predicted, which reads every GPU cell, last
SECTIONS = ("table7", "peak", "nccl", "modes", "crossover", "data", "compile", "profile", "jax", "tests", "predicted")
LEFT = "left"  # --only left: the sections the resumed checks did not begin
BIG_BATCH = f"{HERE / 'workloads' / 'big_batch.py'}"


@dataclass(frozen=True)
class Sizes:
    """What each section measures: the paper's networks on a GPU, or their tiny versions (--quick)."""

    seven: tuple[str, ...]
    modes_nets: tuple[str, ...]  # (a host-bound net, the launch-bound net whose CUDA graphs should pay)
    modes: tuple[str, ...]
    tf32_net: tuple[str, str]  # (--workloads item, its name): bound by its matrix products, where tf32 should pay
    profiled: dict[str, tuple[str, tuple[str, ...]]]  # --workloads item -> (its name, the bounds it may be judged)
    data: tuple[str, ...]
    jax: tuple[str, ...]
    crossover: tuple[str, str]  # (workload, the batches)
    timer: tuple[str, ...]
    short: tuple[str, ...]  # where no relation needs the timer's precision: loader and JAX cells
    loop_s: float  # seconds of plain-loop blocks
    expected_s: dict[str, float]  # about how long each section takes: one is begun only when that much budget is left


FULL = Sizes(
    seven=rel.SEVEN,
    modes_nets=("resnet-50", "resnet-56"),
    modes=rel.MODES,
    # resnet-50 at its batch 16 is host-bound on an H200 (host 55% of the step), where tf32 against fp32 ranged from
    # 0.55x to 1.03x the time between runs; at batch 256 matrix products are 76% of the step
    tf32_net=(f"{BIG_BATCH}:resnet50_b256", "resnet-50-b256"),
    profiled={
        "resnet-56": ("resnet-56", ("launch",)),
        "resnet-50": ("resnet-50", ()),
        f"{BIG_BATCH}:resnet50_b256": ("resnet-50-b256", ("compute", "memory")),
    },
    data=("fcn-r", "resnet-56", "resnet-50"),
    jax=("fcn-r", "resnet-56"),
    crossover=("fcn-r", "256,1024"),
    timer=("--min-time", "1", "--max-time", "2", "--max-warmup", "20"),
    short=("--min-time", "0.3", "--max-time", "1", "--max-warmup", "10"),
    loop_s=2.0,
    # Measured on one H200 at 10eb4c4 (BENCHMARKS.md "On a GPU"), the GPU cells forked from a warm parent: table7
    # 90 s (with the loops in turns for the two unsteady ones), modes 72 (before resnet-50 b256's fp32 and tf32
    # cells joined it: not yet timed there), profile 70, peak 9, data 45, jax 92, nccl 12, crossover 22, compile 146,
    # predicted 4, tests 85. compile's 110 is a guess, not a measurement: its two cells now fork and compile at once.
    expected_s={
        "table7": 95,
        "modes": 105,
        "profile": 65,
        "peak": 10,
        "data": 55,
        "jax": 110,
        "nccl": 15,
        "crossover": 25,
        "compile": 110,
        "predicted": 5,
        "tests": 90,
    },
)
QUICK = Sizes(
    seven=("tiny-fcn-r", "tiny-resnet-56", "tiny-lstm"),
    modes_nets=("tiny-resnet-50", "tiny-resnet-56"),
    modes=("fp32", "tf32", "bf16", "bf16+cuda_graphs", "compile"),
    tf32_net=(f"{BIG_BATCH}:tiny_resnet50_b64", "tiny-resnet-50-b64"),
    profiled={
        "tiny-resnet-56": ("tiny-resnet-56", ("launch",)),
        f"{BIG_BATCH}:tiny_resnet50_b64": ("tiny-resnet-50-b64", ("compute", "memory")),
    },
    data=("tiny-fcn-r", "tiny-resnet-56"),
    jax=("tiny-fcn-r",),
    crossover=("tiny-fcn-r", "8,16"),
    timer=("--min-time", "0.1", "--max-time", "0.3", "--max-warmup", "5"),
    short=("--min-time", "0.1", "--max-time", "0.3", "--max-warmup", "5"),
    loop_s=0.3,
    expected_s={},
)
LOADERS = ("w0", "w2+pin")
OVERRUN_S, LEAST_S = 60.0, 30.0  # a command's time past the budget left, at most; and at least, whatever is left
CACHE = "cache.tar.gz"  # dlperf's caches, one file: the device tool brings back 8 files of OUT at most


@dataclass
class Check:
    out: Path
    work: Path
    device: str
    sizes: Sizes
    budget_s: float
    header: dict = field(default_factory=dict)
    lines: list = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @property
    def db(self) -> str:
        return str(self.work / "check.db")

    @property
    def gpu(self) -> bool:
        return self.device.startswith("cuda")

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    def command(self, cmd: list[str], timeout: float | None = None, env: dict | None = None, cwd: Path | None = None):
        """Run `cmd`, logged with its exit code and output; (exit code, stdout + stderr). A command past `timeout`, or
        past the budget left and a minute more (`OVERRUN_S`), at least `LEAST_S`, is stopped and exits 124: the
        machine's own kill comes 90 s after the budget, and what a section had not written then would be lost."""
        rc, text, _ = self.command_out(cmd, timeout, env, cwd)
        return rc, text

    def command_out(self, cmd: list[str], timeout: float | None = None, env: dict | None = None,
                    cwd: Path | None = None) -> tuple[int, str, str]:  # fmt: skip
        """`command`, with its stdout alone too: (exit code, stdout + stderr, stdout)."""
        limit = min(timeout if timeout is not None else float("inf"), max(LEAST_S, self.left() + OVERRUN_S))
        start, out = time.monotonic(), ""
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env or child_env(), cwd=cwd)
            rc, text, out = done.returncode, done.stdout + done.stderr, done.stdout
        except subprocess.TimeoutExpired as exc:
            rc, text = 124, f"{_text(exc.stdout)}{_text(exc.stderr)}\nstopped after {limit:.0f} s"
        with open(self.out / "gpu_check.log", "a") as log:
            log.write(f"$ {' '.join(cmd)}\n{text.rstrip()}\n[exit {rc} after {time.monotonic() - start:.1f} s]\n\n")
        return rc, text, out

    def dlperf(self, *args: str, timeout: float | None = None, env: dict | None = None) -> tuple[int, str]:
        return self.command([sys.executable, "-m", "dlperf", *args], timeout, env)

    def run(self, *args: str, timer: tuple[str, ...] | None = None, env: dict | None = None) -> tuple[int, list[dict]]:
        """`dlperf run ARGS` into the check's store on the check's device; (exit code, the new run's cells: none when
        the run was refused before it began)."""
        where = ("--devices", self.device) + (() if self.gpu else ("--threads", "1"))
        before = latest_run(self.db)
        rc, _ = self.dlperf("run", "--db", self.db, *where, *(timer or self.sizes.timer), *args, env=env)
        after = latest_run(self.db)
        return rc, self.cells(after) if after != before else []

    def cells(self, run: int | str) -> list[dict]:
        """`dlperf export` of `run` (an id, or "all"), in this process: no interpreter to start and no dlperf to
        import again for each of the check's two dozen reads (0.4-0.8 s each on the H200 machine); logged as run."""
        if run is None:
            return []
        from dlperf.cli import main as dlperf_main

        out = self.work / "export.jsonl"
        argv = ["export", "--db", self.db, "--run", str(run), "--format", "jsonl", "-o", str(out)]
        start = time.monotonic()
        rc = dlperf_main(argv)
        text = out.read_text() if rc == 0 and out.is_file() else ""
        with open(self.out / "gpu_check.log", "a") as log:
            log.write(f"$ dlperf {' '.join(argv)}  (in the check's process)\n{text.rstrip()}\n"
                      f"[exit {rc} after {time.monotonic() - start:.1f} s]\n\n")  # fmt: skip
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def write(self) -> None:
        (self.out / "gpu_check.md").write_text(rel.markdown(self.header, self.lines))
        data = {"header": self.header, "lines": [line.to_json() for line in self.lines]}
        (self.out / "gpu_check.json").write_text(json.dumps(data, indent=1))
        if Path(self.db).exists() and latest_run(self.db) is not None:  # a store of peaks alone: export says "no runs"
            (self.out / "cells.jsonl").write_text("\n".join(json.dumps(c) for c in self.cells("all")) + "\n")
        if Path(self.db).exists() and Path(self.db).resolve() != (self.out / "check.db").resolve():  # --work OUT
            with closing(sqlite3.connect(self.db)) as source, closing(sqlite3.connect(self.out / "check.db")) as copy:
                source.backup(copy)  # what a later `--resume OUT` starts from (a store backed up onto itself hangs)
        pack(data_dir() / "cache", self.out / CACHE)  # and the answers it need not ask again, one file


def data_dir() -> Path:
    from dlperf import envs

    return envs.data_dir()


def pack(source: Path, archive: Path) -> None:
    """dlperf's caches (`copy_new`) as one gzip tar file, written whole or not at all: OUT's files are what the device
    tool brings back, at most 8 of them (the caches alone were 28 files)."""
    import tarfile

    if not source.is_dir():
        return
    partial = archive.with_name(f".{archive.name}.partial")
    with tarfile.open(partial, "w:gz") as tar:
        for path in sorted(source.rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                tar.add(path, arcname=str(path.relative_to(source)))
    partial.replace(archive)


def unpack(archive: Path, target: Path) -> None:
    """An earlier check's caches (`pack`) into `target`, each file it lacks: none outside it, none it has."""
    import tarfile

    if not archive.is_file():
        return
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")  # no path outside tmp, no links out, no devices
        copy_new(Path(tmp), target)


def copy_new(source: Path, target: Path) -> None:
    """Every file under `source` that `target` lacks, copied there: dlperf's caches (`cache/probe`, the planning
    probe's answers, and `cache/opcounts`, the predictions' operator counts; each under a key that is checked when it
    is read), so a resumed check neither imports PyTorch to ask what the machine has nor counts again what was
    counted (on the H200, 6-18 s of each run's start)."""
    for path in source.rglob("*"):
        to = target / path.relative_to(source)
        if path.is_file() and not to.exists() and not path.name.startswith("."):
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, to)


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def child_env() -> dict[str, str]:
    """This source tree's dlperf first on the path: nothing is installed on the GPU machine. CUDA cells fork from a
    warm parent, the default, whatever this shell says (7-13 s of each cold GPU cell's start was importing PyTorch and
    building, on the H100; 9 s on the H200)."""
    path = os.environ.get("PYTHONPATH", "")
    env = {k: v for k, v in os.environ.items() if k not in ("DLPERF_WARM_GPU", "DLPERF_NO_WARM")}
    return {**env, "PYTHONPATH": str(ROOT / "src") + (os.pathsep + path if path else "")}


def how_started(db: str, run: int) -> list[dict]:
    """Each measurement of `run`: its workload, device, how its process started (`started`, `cold_because`,
    `phases`) and when its events came (`timeline` from `started_at`), read through the store: `dlperf export` has
    no column for them."""
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        return [{"workload": c.cell.workload, "mode": c.cell.mode, "device": c.cell.device, "started": m.detail.started,
                 "cold_because": m.detail.cold_because, "phases": m.detail.phases, "timeline": m.detail.timeline,
                 "started_at": m.detail.started_at}
                for c in store.cells(run) for m in store.measurements(run, c.key)]  # fmt: skip
    finally:
        store.close()


def latest_run(db: str) -> int | None:
    """The store's newest run; None where there is none yet: no file, or no tables (a first run refused early)."""
    try:
        with closing(read_only(db)) as conn:
            return conn.execute("SELECT max(id) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:
        return None


def read_only(db: str) -> sqlite3.Connection:
    """The check's store, read only: reading a store that is not there never leaves an empty file behind (one that
    read "no such table: runs" ever after, and stopped a rehearsal whose first dlperf could not import torch)."""
    return sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True)


# ----------------------------------------------------------------------------------------------------------------------
# Sections


def table7(c: Check) -> list:
    _, cells = c.run("--workloads", ",".join(c.sizes.seven), "--modes", "fp32")
    threads = next((cell["threads"] for cell in cells if cell.get("threads")), None)
    lines = rel.seven_lines(cells, plain_loops(c, c.sizes.seven, threads), c.sizes.seven)
    return lines + ([rel.forked_line(how_started(c.db, cells[0]["run_id"]))] if c.gpu and cells else [])


def plain_loops(c: Check, workloads: tuple[str, ...], threads: int | None, framework: str = "torch",
                env: dict | None = None) -> dict:  # fmt: skip
    """The plain loops in one fresh process of their own, one network after another, at the cells' thread count
    (importing torch and starting CUDA once: about 8 s of each process on an H100 machine). JAX's in the interpreter
    dlperf runs JAX's cells with (this one on the GPU machine; `dlperf env install jax`'s elsewhere)."""
    python = sys.executable
    if framework != "torch":
        from dlperf.envs import interpreter_for

        python = interpreter_for(framework) or python
    cmd = [python, __file__, "--plain-loop", ",".join(workloads), "--framework", framework, "--device", c.device,
           "--seconds", str(c.sizes.loop_s)] + (["--threads", str(threads)] if threads else [])  # fmt: skip
    rc, text = c.command(cmd, timeout=60 + 30 * len(workloads), env=env)
    found = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    loops = {loop["workload"]: loop for loop in found}
    return {w: loops.get(w) or {"error": f"exit {rc}: {rel.last_line(text)}"} for w in workloads}


def modes(c: Check) -> list:
    """The modes but fp32, whose cells table7 measured already on this machine (measured here when it did not);
    then fp32 and tf32 on the net bound by its matrix products, where tf32 should be faster."""
    nets, chosen = c.sizes.modes_nets, tuple(m for m in c.sizes.modes if "compile" not in m)
    earlier = [cell for cell in c.cells("all") if cell["mode"] == "fp32" and cell["workload"] in nets
               and cell["device"] == c.device and not cell.get("loader") and cell["status"] == "ok"]  # fmt: skip
    fp32 = [rel.cell_of(earlier, net) for net in nets]
    asked = tuple(m for m in chosen if m != "fp32" or None in fp32)
    _, cells = c.run("--workloads", ",".join(nets), "--modes", ",".join(asked))
    cells += [cell for cell in fp32 if cell is not None and "fp32" not in asked]
    spec, name = c.sizes.tf32_net
    _, big = c.run("--workloads", spec, "--modes", "fp32,tf32")
    return rel.modes_lines(cells, nets, chosen, graphs_net=nets[1]) + rel.modes_lines(
        big, (name,), ("fp32", "tf32"), tf32_net=name
    )


def compiled(c: Check) -> list:
    nets, chosen = c.sizes.modes_nets, tuple(m for m in c.sizes.modes if "compile" in m)
    if not chosen:
        return []
    # the cells' own timer, as the other modes': under the short one (10 warm-up steps) resnet-50's compiled step had
    # not settled on the H200 at 10ba3bb (32.8 ms, n=20, against eager bf16's 22.0); a few seconds beside its compile
    # the nets compile side by side, each timed alone (`--compile-at-once`): on the H200 each compilation took 45-47 s
    # of mostly one thread, one after the other
    at_once = ("--compile-at-once", str(len(nets)))
    _, cells = c.run("--workloads", ",".join(nets), "--modes", ",".join(chosen), "--compile-timeout", "200", *at_once)
    at_once_line = [rel.at_once_line(how_started(c.db, cells[0]["run_id"]))] if cells else []
    return rel.modes_lines(cells, nets, chosen, section="compile") + at_once_line


def profile(c: Check) -> list:
    names = list(c.sizes.profiled)
    traces = c.work / "traces"
    c.run("--workloads", ",".join(names), "--modes", "fp32", "--profile", "--trace-dir", str(traces))
    run = latest_run(c.db)
    rc, text = c.dlperf("table", "--db", c.db, "--run", str(run), "--explain", "--format", "json")
    verdicts = {row["workload"]: cell.get("verdict") for row in (json.loads(text)["rows"] if rc == 0 else [])
                for cell in row["cells"].values()}  # fmt: skip
    profiles = {}
    for key, row in profile_rows(c.db, run).items():
        name = key.split("|")[0]
        row["verdict"] = verdicts.get(name)
        row["trace_events"] = trace_events(row.get("trace"))
        profiles[name] = row
    keep_smallest_trace([row.get("trace") for row in profiles.values()], c.out)
    expected = {name: bounds for name, bounds in c.sizes.profiled.values() if bounds}
    return rel.profile_lines(profiles, expected) + [
        rel.Line("profile", f"{name} profiled", False, "no profile stored")
        for name, _ in c.sizes.profiled.values()
        if name not in profiles
    ]


def profile_rows(db: str, run: int) -> dict[str, dict]:
    with closing(read_only(db)) as conn:
        rows = conn.execute("SELECT cell_key, status, error, trace, profile_json FROM profiles WHERE run_id = ?",
                            (run,)).fetchall()  # fmt: skip
    out = {}
    for key, status, error, trace, blob in rows:
        figures = json.loads(blob or "{}")
        out[key] = {
            "status": status,
            "error": error,
            "trace": trace,
            "step_s": figures.get("step_s"),
            "categories": figures.get("categories", {}),
            "kernels_per_step": figures.get("kernels_per_step"),
            "notes": figures.get("notes", []),
        }
    return out


def keep_smallest_trace(paths: list[str | None], out: Path, limit: int = 12 << 20) -> None:
    """The smallest trace, beside the table (OUT/trace.json.gz), under the device tool's 16 MiB a file: what its
    notes say of the device work under other can be looked at where no GPU is."""
    found = sorted((Path(p).stat().st_size, p) for p in paths if p and Path(p).is_file())
    if found and found[0][0] <= limit:
        shutil.copyfile(found[0][1], out / "trace.json.gz")


def trace_events(path: str | None) -> int:
    """Events in a gzip Chrome trace, 0 when it does not open."""
    try:
        with gzip.open(path, "rt") as f:
            return len(json.load(f).get("traceEvents", []))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def peak(c: Check) -> list:
    cmd = [sys.executable, "-m", "dlperf", "peak", "--db", c.db, "--devices", c.device, "--dtypes", "bf16,fp32,tf32",
           "--max-time", "0.5", "--format", "json", *(() if c.gpu else ("--threads", "1"))]  # fmt: skip
    rc, _, out = c.command_out(cmd)  # stdout alone: a warning on stderr holds no JSON to mistake for it
    start = out.find("{")
    peaks = json.loads(out[start:])["peaks"] if rc == 0 and start >= 0 else []
    return rel.peak_lines(peaks, datasheet(c.header.get("gpu")))


def datasheet(name: str | None) -> dict | None:
    from dlperf.predict.gpus import for_device

    gpu = for_device(name) if name else None
    if gpu is None:
        return None
    bf16 = gpu.bf16 / 1e12 if gpu.bf16 else None
    return {"gpu": gpu.name, "bf16_tensor_tflops": bf16, "mem_bw_gbs": gpu.memory_bw / 1e9}


def data(c: Check) -> list:
    folder = c.work / "data"
    # on a GPU, 20 batches an epoch or more at each network's batch: the small folder's 32 JPEGs were 2 of resnet-50's
    # 16, and w2+pin's workers, started again every second step, took it to 145 ms a step against w0's 109 (H200)
    size = ("--size", "medium") if c.gpu else ()
    c.dlperf("data", "synth", str(folder), "--only", "mnist,cifar10,imagenet", *size)
    _, cells = c.run("--workloads", ",".join(c.sizes.data), "--data", str(folder), "--loaders", ",".join(LOADERS),
                     timer=c.sizes.short)  # fmt: skip
    return rel.data_lines(cells, c.sizes.data, LOADERS)


def jax(c: Check) -> list:
    """JAX's cells ok, each against a plain JAX loop of the step dlperf builds, same run (JAX's steps are pipelined
    as a training loop runs them, timed by when the host finds each loss ready: `timer.HostClock`). The loop runs
    the executables the cells compiled, through JAX's persistent compilation cache: no second compile (the loop's
    process took 46.5 s for two networks on the H200), and no second autotuning that could choose other kernels."""
    env = {**child_env(), "JAX_COMPILATION_CACHE_DIR": str(c.work / "jax-cache"),
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}  # fmt: skip
    _, cells = c.run("--frameworks", "jax", "--workloads", ",".join(c.sizes.jax), env=env)
    cells = [cell for cell in cells if cell["framework"] == "jax"]
    threads = next((cell["threads"] for cell in cells if cell.get("threads")), None)
    loops = plain_loops(c, c.sizes.jax, threads, framework="jax", env=env)
    label = "JAX against a plain JAX loop"
    return rel.ok_lines("jax", cells, c.sizes.jax, f"JAX on {c.device}") + rel.seven_lines(
        cells, loops, c.sizes.jax, section="jax", label=label
    )


def nccl(c: Check) -> list:
    wait = f"{max(LEAST_S, min(120.0, c.left() / 2)):.0f}"  # each of the two jobs: NCCL's start is where one hangs
    quick = ("--sizes", "4K:1M", "--iters", "5", "--warmup", "2", "--timeout", wait)
    one = c.dlperf("comm", "--db", c.db, "--backend", "nccl", "--nproc", "1", *quick)
    two = c.dlperf("comm", "--db", c.db, "--backend", "nccl", "--nproc", "2", *quick)
    return rel.nccl_lines(one, two)


def crossover(c: Check) -> list:
    workload, batches = c.sizes.crossover
    gpu = (datasheet(c.header.get("gpu")) or {}).get("gpu", "H100-SXM5-80GB")
    rc, text = c.dlperf("crossover", workload, "--db", c.db, "--gpu", gpu, "--batches", batches, "--threads",
                        str(os.cpu_count() if c.gpu else 1), "--max-time", "1", "--min-time", "0.3")  # fmt: skip
    return rel.crossover_lines(rc, text, gpu)


def predicted(c: Check) -> list:
    cells = c.cells("all")
    runs = sorted({cell["run_id"] for cell in cells if str(cell["device"]).startswith("cuda")})
    text = "".join(c.dlperf("table", "--db", c.db, "--run", str(r))[1] for r in runs)
    return rel.predicted_lines(cells, text)


def tests(c: Check) -> list:
    env = {**child_env(), "DLPERF_REQUIRE": "cuda", "DLPERF_DATA_DIR": str(c.work / "tests-data")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-rfEs", "-p", "no:cacheprovider", "-o", "addopts=",
           "--durations=12", *ONE_AT_A_TIME, *map(str, gpu_test_files(ROOT / "tests"))]  # fmt: skip
    rc, text = c.command(cmd, timeout=max(120.0, c.left()), env=env, cwd=ROOT)
    return rel.tests_lines(rc, text, gpus_here(c))


# The GPU tests one at a time, in one process, whatever is installed: two pytest-xdist workers (`-n 2 --dist
# loadfile`, where it was installed) ran two test files side by side on the one GPU, so the test that times CUDA
# steps against a plain loop (ratio < 1.1) could share it with a JAX compile or an NCCL test. The H200's 17 GPU tests
# took 85 s in one process.
ONE_AT_A_TIME = ("-p", "no:xdist")


def gpu_test_files(tests: Path) -> list[Path]:
    """The test files that mark a test `gpu` (`pytest.mark.gpu`, `mark.gpu(2)`, `marks=pytest.mark.gpu`): pytest
    collects only these, not the 2,000 other tests' files and what they import (8 s of collection on 2 cores)."""
    return sorted(p for p in tests.rglob("test_*.py") if "mark.gpu" in p.read_text())


def gpus_here(c: Check) -> int:
    return len(c.header.get("gpus", [])) if c.gpu else 0


RUNNERS = {
    "table7": table7, "modes": modes, "profile": profile, "peak": peak, "data": data, "jax": jax, "nccl": nccl,
    "crossover": crossover, "compile": compiled, "predicted": predicted, "tests": tests,
}  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------------
# The machine


def header(device: str, commit: str) -> dict:
    """GPU, driver, CUDA, torch, JAX and the commit, read without initializing CUDA in this process."""
    smi = shutil.which("nvidia-smi")
    gpus = []
    if smi:
        done = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        gpus = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    probe = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    torch_version, cuda = json.loads(done.stdout) if done.returncode == 0 else (None, None)
    return {
        "device": device,
        "gpu": gpus[0].split(",")[0].strip() if gpus else None,
        "gpus": gpus,
        "driver": gpus[0].split(",")[1].strip() if gpus else None,
        "cuda": cuda,
        "torch": torch_version,
        "jax": _version("jax"),
        "jaxlib": _version("jaxlib"),
        "flax": _version("flax"),  # flax 0.12.8 and 0.12.9 do not import beside jax 0.11 (jax.experimental.hijax)
        "optax": _version("optax"),
        "pytest_xdist": _version("pytest-xdist"),  # installed or not, the tests section runs without it
        "python": sys.version.split()[0],
        "commit": commit,
        "cpus": os.cpu_count(),
    }


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# ----------------------------------------------------------------------------------------------------------------------
# The plain loop


def plain_loop(workload: str, device: str, seconds: float, threads: int | None = None) -> dict:
    """The same model, optimizer, loss and batch dlperf trains (`training_parts`), stepped by a hand-written loop:
    warm-up, then blocks of steps timed by the wall clock with the device synchronized only at each block's ends,
    as a training loop runs. The step is the median block's mean."""
    import torch

    from dlperf import training_parts
    from dlperf.workloads import BUILTIN

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)  # the cells' weights: training_parts draws them from torch's generator as it stands
    model, optimizer, loss_fn, x, y = training_parts(workload, device)
    clip = BUILTIN[workload].optimizer.clip_grad_norm if workload in BUILTIN else None
    params = [p for p in model.parameters() if p.requires_grad]
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def steps(n: int) -> float:
        sync()
        start = time.perf_counter()
        for _ in range(n):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(params, clip)
            optimizer.step()
        sync()
        return time.perf_counter() - start

    def dlperfs_step():
        from dlperf.frameworks.torch import backend

        return backend.build(BUILTIN[workload], device, "fp32")

    return in_blocks(workload, steps, seconds, dlperfs_step)


def in_blocks(workload: str, steps: Callable[[int], float], seconds: float, dlperfs_step=None) -> dict:
    """A plain loop's figure: `steps(n)` (n steps' wall time, the device synchronized at both ends) warmed up, then
    five blocks sized to take `seconds` together; the step is the median block's mean. Where the blocks spread wider
    than the relation's bounds (a host-bound step on an unsteady host), the host's speed drifts more than the check
    can resolve between two processes, so dlperf's timer is also compared with the loop in this process, in turns
    (`interleaved`), on the step dlperf builds (`dlperfs_step()`)."""
    warm = steps(10) / 10
    per_block = max(5, int(seconds / 5 / max(warm, 1e-6)))
    blocks = [steps(per_block) / per_block for _ in range(5)]
    loop = {"workload": workload, "step_s": statistics.median(blocks), "blocks": blocks, "steps": 5 * per_block}
    if dlperfs_step is not None and rel.unsteady(blocks):
        loop["interleaved"] = interleaved(dlperfs_step(), max(10, min(per_block, int(0.2 / max(warm, 1e-6)))))
    return loop


def interleaved(step, steps: int, rounds: int = 10) -> dict:
    """dlperf's timer (`worker.cell.step_timer`, as a cell times its steps) and a plain loop on one step, in turns:
    each round `steps` timed steps, then `steps` in a loop timed by the wall clock. Each round's ratio is of figures
    a fraction of a second apart, so the host's drift between them is small; the relation takes their median.
    Both sides of a round are means: the timer's steps end to end sum to its span, as the loop's do. A median of the
    timer's steps against the loop's mean reads a host that stalls now and then as dlperf being faster (the H200's
    JAX resnet-56 at 10eb4c4: the cell's median 15.2 ms, its mean 18.6; rounds whose median was 0.45-0.69x the
    loop's mean); each round's median is kept beside (`dlperf_median_s`)."""
    from dlperf.worker.cell import step_timer

    ours, medians, loops = [], [], []
    for _ in range(3):
        step.step()
    for _ in range(rounds):
        run = step_timer(step)  # a new pipeline each round: an older one's marks would span the loop between
        timed = [run() for _ in range(steps + 3)][3:]  # the first began on an idle device
        ours.append(statistics.fmean(timed))
        medians.append(statistics.median(timed))
        step.sync()
        start = time.perf_counter()
        for _ in range(steps):
            step.step()
        step.sync()
        loops.append((time.perf_counter() - start) / steps)
    ratios = [o / s for o, s in zip(ours, loops, strict=True)]
    return {"dlperf_s": ours, "dlperf_median_s": medians, "loop_s": loops, "ratio": statistics.median(ratios)}


def plain_jax_loop(workload: str, device: str, seconds: float, threads: int | None = None) -> dict:
    """The step dlperf builds for JAX (`frameworks/jax/backend.build`: model, batch, optax optimizer, the jitted step
    donating its state), dispatched step after step as a training loop does, waited for only at each block's end.
    On the CPU the same threads and CPUs as dlperf's worker (`configure_threads`). The step is the median block's
    mean, as for PyTorch's loop."""
    from dlperf.frameworks.jax import backend
    from dlperf.workloads import BUILTIN

    if threads:
        backend.configure_threads(threads)
    step = backend.build(BUILTIN[workload], device, "fp32")

    def steps(n: int) -> float:
        step.sync()
        start = time.perf_counter()
        for _ in range(n):
            step.step()
        step.sync()
        return time.perf_counter() - start

    steps(3)  # the first step compiles
    return in_blocks(workload, steps, seconds, lambda: step)


def release(device: str) -> None:
    """The last network's memory back to the device before the next one is built."""
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------------------------------


def previous(folder: Path, work: Path) -> list:
    """An earlier check's lines (FOLDER/gpu_check.json), each marked with the commit it was measured at, and its
    store copied into this check's work folder, unless that holds one already; its caches (FOLDER/cache) join this
    check's."""
    try:
        data = json.loads((folder / "gpu_check.json").read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"gpu_check.py: --resume {folder}: no earlier check's gpu_check.json there ({exc})") from None
    at = data["header"].get("commit") or "unknown"
    if (folder / "check.db").exists() and not (work / "check.db").exists():
        shutil.copyfile(folder / "check.db", work / "check.db")
    copy_new(folder / "cache", data_dir() / "cache")  # as a check before cache.tar.gz left them
    unpack(folder / CACHE, data_dir() / "cache")
    return [rel.Line(**{**line, "at": line.get("at") or at}) for line in data["lines"]]


def resume_refused(folders: list[Path], work: Path | None) -> str | None:
    """Why `--resume FOLDERS` cannot go on, in one line, or None; asked before anything is made or measured. Each
    folder needs its gpu_check.json, and the latest its store (check.db), which the resumed check runs on: without
    it the sections that read earlier cells (modes, crossover, predicted) found none, the header named runs the store
    did not hold, and the `time` line was left out unsaid. Not where the work folder (`--work`) holds a store already,
    nor where the latest check made no run."""
    for folder in folders:
        try:
            header = json.loads((folder / "gpu_check.json").read_text())["header"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return f"--resume {folder}: no earlier check's gpu_check.json there ({type(exc).__name__}: {exc})"
    if work is not None and (work / "check.db").exists():
        return None
    db = folders[-1] / "check.db"
    made = [ids for key, ids in header.items() if key.endswith("_runs") and key != "earlier_runs" and ids]
    if not db.is_file():
        if not made and not any(header.get("earlier_runs", {}).values()):
            return None
        return (f"--resume {folders[-1]}: no check.db there, the earlier check's store (written beside its "
                "gpu_check.json): bring the folder back whole, or run the check without --resume")  # fmt: skip
    try:
        with closing(read_only(str(db))) as conn:
            conn.execute("SELECT max(id) FROM runs").fetchone()
    except sqlite3.Error as exc:
        return f"--resume {folders[-1]}: its check.db does not open as dlperf's store ({exc})"
    return None


def latest(checks: list[list]) -> list:
    """The lines of earlier checks (oldest first), each section's from the latest check that ran it: a section that
    check did not begin (`not run`) keeps an older check's lines."""
    by_section: dict[str, list] = {}
    for lines in checks:
        for section in dict.fromkeys(line.section for line in lines):
            ran = [line for line in lines if line.section == section]
            if any(line.check != f"{section} not run" for line in ran) or section not in by_section:
                by_section[section] = ran
    return [line for found in by_section.values() for line in found]


def not_begun(lines: list) -> tuple[str, ...]:
    """The sections the earlier checks' lines (`latest`) never began: none of their lines, or only `not run`; in
    SECTIONS' order. `predicted` joins them whenever any does: it reads the GPU cells they will add."""
    begun = {line.section for line in lines if line.check != f"{line.section} not run"}
    left = [s for s in SECTIONS if s not in begun]
    return tuple(dict.fromkeys([*left, *(["predicted"] if left else [])]))


def kept(lines: list, sections: tuple[str, ...]) -> dict[str, list]:
    """The chosen sections a resumed check keeps, with their lines: those whose every line passed. `predicted`
    reads every GPU cell, so it is kept only when every other chosen section is."""
    by_section: dict[str, list] = {}
    for line in lines:
        by_section.setdefault(line.section, []).append(line)
    keep = {s: found for s, found in by_section.items() if s in sections and all(x.passed for x in found)}
    if any(s not in keep for s in sections if s != "predicted"):
        keep.pop("predicted", None)
    return keep


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("out", nargs="?", help="where the table, the JSON, the cells and the log go")
    p.add_argument("--device", default="cuda:0", help="default: cuda:0 (cpu: to test this script)")
    p.add_argument("--only", help=f"a comma list of sections: {', '.join(SECTIONS)} (default: all); {LEFT}: those "
                   "the --resume checks did not begin, in that order")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="the tiny workloads and short timers (to test this script)")
    p.add_argument("--budget", type=float, default=480.0, help="seconds: sections not begun by then are not run")
    p.add_argument("--commit", default=os.environ.get("DLPERF_COMMIT", "unknown"), help="named in the header")
    p.add_argument("--work", help="the store, data and traces (default: a temporary folder)")
    p.add_argument(
        "--resume",
        metavar="DIR",
        action="append",
        default=[],
        help="an earlier check's OUT: keep its passed sections, run the rest (again: a later check's)",
    )
    p.add_argument("--plain-loop", metavar="WORKLOAD", help=argparse.SUPPRESS)
    p.add_argument("--framework", default="torch", choices=("torch", "jax"), help=argparse.SUPPRESS)
    p.add_argument("--seconds", type=float, default=2.0, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.plain_loop and not args.out:
        p.error("OUT is required")
    chosen = SECTIONS if not args.only else tuple(s.strip() for s in args.only.split(","))
    if chosen == (LEFT,) and not args.resume:
        p.error(f"--only {LEFT}: the sections an earlier check left: name it with --resume DIR")
    if chosen == (LEFT,):
        args.sections = chosen
        return args
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        p.error(f"--only: unknown section(s) {', '.join(unknown)} (expected: {', '.join(SECTIONS)})")
    args.sections = chosen
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.plain_loop:
        for workload in args.plain_loop.split(","):
            loop = plain_jax_loop if args.framework == "jax" else plain_loop
            print(json.dumps(loop(workload, args.device, args.seconds, args.threads)), flush=True)
            if args.framework == "torch":
                release(args.device)
        return 0
    if args.resume and (why := resume_refused([Path(f) for f in args.resume], args.work and Path(args.work))):
        print(f"gpu_check.py: {why}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.log").write_text("")
    work = Path(args.work or tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DLPERF_DATA_DIR", str(work / "dlperf-data"))
    check = Check(out, work, args.device, QUICK if args.quick else FULL, args.budget)
    check.header = header(args.device, args.commit)
    earlier = [previous(Path(folder), work) for folder in reversed(args.resume)][::-1]  # the latest store copied
    if args.sections == (LEFT,):
        args.sections = not_begun(latest(earlier))
    keep = kept(latest(earlier), args.sections)
    if keep:
        check.header["kept"] = {section: found[0].at for section, found in keep.items()}
    if args.resume:
        folders = [Path(folder) for folder in args.resume]
        check.header.update({f"earlier{x}": earlier_figures(folders, x) for x in ("_s", "_runs")})
    run_sections(check, args.sections, keep)
    if line := time_line(check):
        check.lines.append(line)
    check.write()
    print((out / "gpu_check.md").read_text())
    return 0 if all(line.passed for line in check.lines) else 1


def earlier_figures(folders: list[Path], suffix: str) -> dict:
    """Each section's header figure `<section><suffix>` (its seconds "_s", the ids of the runs it made "_runs") from
    the latest of the earlier checks (`--resume`, oldest first) that ran it, those checks' own earlier ones included
    (their `earlier<suffix>`)."""
    found: dict = {}
    for folder in folders:
        header = json.loads((folder / "gpu_check.json").read_text())["header"]
        found.update(header.get(f"earlier{suffix}", {}))
        found.update({s: header[f"{s}{suffix}"] for s in SECTIONS if f"{s}{suffix}" in header})
    return found


def time_line(check: Check):
    """The whole check's time and where it went, once every section has run (here, or in the checks it resumed: the
    store holds their cells too). The cell processes are those of the runs each counted section made, where every
    section says which (a section run again leaves its earlier runs in the store); else every one in the store."""
    took = {**check.header.get("earlier_s", {}), **by_section(check.header, "_s")}
    if set(took) != set(SECTIONS) or not Path(check.db).exists():
        return None
    runs = {**check.header.get("earlier_runs", {}), **by_section(check.header, "_runs")}
    rows = processes(check.db, {r for ids in runs.values() for r in ids} if set(runs) == set(SECTIONS) else None)
    details = [json.loads(detail) for _, detail in rows]
    return rel.time_line(took, [d.get("phases") or {} for d in details], busy_s(rows, details))


def busy_s(rows: list[tuple], details: list[dict]) -> float:
    """The wall time within cell processes: the union of their lives where each says when it started (processes
    compiled at once overlap: `run --compile-at-once`), else their sum."""
    spans, alone = [], 0.0
    for (duration, _), detail in zip(rows, details, strict=True):
        if detail.get("started_at") is not None and duration:
            spans.append((detail["started_at"], detail["started_at"] + duration))
        else:
            alone += duration or 0.0
    covered, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        covered += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return alone + covered


def processes(db: str, runs: set[int] | None) -> list[tuple]:
    """(duration_s, detail_json) of every process the store measured in `runs` (None: in every run)."""
    with closing(read_only(db)) as conn:
        rows = conn.execute("SELECT run_id, duration_s, detail_json FROM measurements").fetchall()
    return [(duration, detail) for run, duration, detail in rows if runs is None or run in runs]


def by_section(header: dict, suffix: str) -> dict:
    return {s: header[f"{s}{suffix}"] for s in SECTIONS if f"{s}{suffix}" in header}


def run_sections(check: Check, sections: tuple[str, ...], keep: dict[str, list], runners=None) -> None:
    """Each section in turn, its lines written as it ends: one kept from an earlier check is taken as it was, and one
    is begun only while the budget left holds its expected time (a shorter one after it may still fit)."""
    runners = runners or RUNNERS
    for section in sections:
        if section in keep:
            check.lines += keep[section]
            print(f"{section}: kept from {keep[section][0].at} ({len(keep[section])} PASS)", flush=True)
            continue
        need, left = check.sizes.expected_s.get(section, 0.0), check.left()
        if left <= 0 or left < need:
            why = (
                f"the {check.budget_s:g} s budget was spent"
                if left <= 0
                else f"it takes about {need:g} s, and {left:.0f} s of the {check.budget_s:g} s budget were left"
            )
            check.lines.append(rel.not_run(section, f"{why}: run it with --resume OUT --only left"))
            continue
        begun, first = time.monotonic(), latest_run(check.db) or 0
        try:
            check.lines += runners[section](check)
        except Exception as exc:  # a section that broke is a FAIL line with its reason; the next one still runs
            check.lines.append(rel.Line(section, f"{section} ran", False, f"{type(exc).__name__}: {exc}"))
        check.header[f"{section}_s"] = round(time.monotonic() - begun, 1)
        check.header[f"{section}_runs"] = list(range(first + 1, (latest_run(check.db) or 0) + 1))
        check.write()
        print(f"{section}: {sum(x.passed for x in check.lines if x.section == section)} PASS, "
              f"{sum(not x.passed for x in check.lines if x.section == section)} FAIL "
              f"({check.header[f'{section}_s']} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
