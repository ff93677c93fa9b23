"""A store holding one run of every kind of cell the report draws, written through the Store API (no framework).

Figures are made up for the views to lay out; nothing here is presented as a measurement of anything."""

from __future__ import annotations

import random

from dlperf.envinfo import fingerprint
from dlperf.protocol import Cell, Profiled
from dlperf.store import Store
from dlperf.store.machine import MeasuredPeak
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell, ProfileOutcome
from dlperf.vocab import Status

HOSTILE = "<script>alert(1)</script>"  # a workload name that must show as text
ERROR = 'crashed: <img src=x onerror="alert(2)"> & more'
ENV = {
    "cpu": {"model": "Test CPU <v2>", "flags": ["avx2", "avx512f"]},
    "cores": {"physical": 2, "affinity": 2, "cgroup": None, "cores": 2},
    "memory_total_bytes": 8 * 2**30,
    "hostname": "testhost",
    "gpus": [{"name": "Test GPU", "memory_bytes": 16 * 2**30}],
    "frameworks": {"torch": {"version": "2.13.0+cpu"}},
}
FCN_R = {"batch": 1024, "paper": "FCN-R", "params": 14_205_962}


def spec(workload: str, framework: str, device: str, threads: int, mode: str, workload_json: dict) -> PlannedCell:
    return PlannedCell(Cell(workload, framework, device, threads, mode), workload_json)


# (workload, framework, device, threads, mode, workload_json, median seconds or a status)
CELLS = [
    ("fcn-r", "torch", "cpu", 1, "fp32", FCN_R, 0.80),
    ("fcn-r", "torch", "cpu", 2, "fp32", FCN_R, 0.45),
    ("fcn-r", "torch", "cpu", 2, "bf16", FCN_R, 0.20),
    ("fcn-r", "jax", "cpu", 1, "fp32", FCN_R, 0.90),
    ("fcn-r", "jax", "cpu", 2, "fp32", FCN_R, 0.50),
    ("fcn-r", "torch", "cuda:0", 2, "fp32", FCN_R, 0.01),
    (HOSTILE, "torch", "cpu", 1, "fp32", {"batch": 8}, 0.05),
    (HOSTILE, "torch", "cpu", 2, "fp32", {"batch": 8}, 0.03),
    ("lstm", "torch", "cpu", 1, "fp32", {"batch": 128, "paper": "LSTM"}, "failed"),
    ("lstm", "jax", "cpu", 1, "bf16", {"batch": 128, "paper": "LSTM"}, "unsupported"),
]


def fill(store: Store, env: dict = ENV, processes: int = 2, seed: int = 0) -> int:
    rng = random.Random(seed)
    run_id = store.create_run({"workloads": "test"}, env, fingerprint(env), ["dlperf", "run", "--test"],
                              [spec(*c[:6]) for c in CELLS])  # fmt: skip
    for workload, framework, device, threads, mode, wj, value in CELLS:
        key = spec(workload, framework, device, threads, mode, wj).cell.key
        if isinstance(value, str):
            error = ERROR if value == "failed" else "bf16: not supported by jax here"
            m = ProcessMeasurement(status=Status(value), error=error)
            store.record(run_id, key, 0, m, CellFigures(status=Status(value), error=error))
            continue
        per_process = [[value * rng.uniform(0.97, 1.03) for _ in range(20)] for _ in range(processes)]
        pooled = sorted(x for s in per_process for x in s)
        warnings = ["noisy: IQR is 12% of the median"] if threads == 2 and framework == "jax" else []
        figures = CellFigures(
            status=Status.OK, median_s=value, iqr_s=pooled[29] - pooled[9], n=len(pooled), warnings=warnings,
            flops_by_dtype={"fp32": int(value * 2e10)} if device == "cpu" else None,
        )  # fmt: skip
        for repeat, samples in enumerate(per_process):
            store.record(run_id, key, repeat, ProcessMeasurement(status=Status.OK, samples=samples), figures)
    store.record_peaks(
        fingerprint(env), env,
        [MeasuredPeak(framework="torch", framework_version="2.13.0+cpu", device="cpu", threads=t, kind="matmul",
                      dtype="fp32", value=5e10 * t) for t in (1, 2)],
    )  # fmt: skip
    store.set_run_status(run_id, "complete")
    return run_id


def make_db(path) -> None:
    store = Store.open(path, create=True)
    try:
        fill(store)
    finally:
        store.close()


# (cell key, the profile's status, its categories in seconds of the profiled step, ops per step); the timed medians
# are CELLS': fcn-r torch cpu:2 fp32 0.45 s, bf16 0.20 s. Made up to be laid out, as above.
PROFILES = [
    ("fcn-r|torch|cpu|2|fp32", "ok", {"matmul": 0.40, "elementwise": 0.05, "optimizer": 0.03, "host": 0.12}, 60),
    ("fcn-r|torch|cpu|2|bf16", "ok", {"matmul": 0.05, "elementwise": 0.02, "host": 0.16}, 4100),
    ("fcn-r|jax|cpu|2|fp32", "unsupported", {}, None),
]


def add_profiles(store: Store, run_id: int, trace_dir) -> list[str]:
    """The PROFILES of the run filled above, each ok one with a small gzip trace file in `trace_dir`; returns the
    traces' paths."""
    import gzip
    import json

    traces = []
    for key, status, categories, ops in PROFILES:
        if status != "ok":
            store.record_profile(run_id, key, ProfileOutcome(Status(status), "jax.profiler: no categories yet"))
            continue
        trace = trace_dir / f"{key.replace('|', '_')}.json.gz"
        trace.write_bytes(gzip.compress(json.dumps({"traceEvents": []}).encode()))
        traces.append(str(trace))
        profiled = Profiled(steps=5, step_s=sum(categories.values()), categories=categories, ops_per_step=ops,
                            trace=str(trace))  # fmt: skip
        store.record_profile(run_id, key, ProfileOutcome(Status.OK, None, 3.0, profiled))
    return traces
