"""`dlperf peak`: measured matmul and bandwidth peaks, stored by machine, and the utilization held against them."""

import json
import os
import signal
import sqlite3
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import astuple, replace

import pytest

from conftest import dlperf, old_store, one_line_error, require
from dlperf import envs
from dlperf.answers import PeakAnswer
from dlperf.errors import UsageError
from dlperf.report.utilization import dispatch_lookup, peak_lookup, utilization
from dlperf.runner.peak import PeakRow, copy_sizes, jobs, measure
from dlperf.store import MIGRATIONS, SCHEMA_VERSION, Store
from dlperf.store.machine import MeasuredPeak
from dlperf.vocab import Status

TINY = {"dtypes": ["fp32", "bf16", "fp16"], "sizes": [64, 128], "bandwidth_bytes": 8 * 2**20, "max_time": 0.2}
TINY_FLAGS = ["--sizes", "64,128", "--bandwidth-mib", "8", "--max-time", "0.2", "--copies-mib", "1"]
TINY_COPIES = [4096, 16384, 65536, 262144, 2**20]  # what --copies-mib 1 sweeps

MACHINE = {
    "cpu_model": "AMD EPYC",
    "cores": {"physical": 2, "affinity": 2, "cgroup": None, "cores": 2},
    "memory_gib": 23,
    "hostname": "here",
    "gpus": [],
    "frameworks": {"torch": "2.13.0+cpu"},
}


# ----------------------------------------------------------------------------------------------------------------------
# Measuring in a child


def test_child_measures_every_dtype_and_the_bandwidth():
    require("torch")
    (row,) = measure("torch", ["cpu"], [1], **TINY, timeout=120, copy_sizes=[4096, 2**20])
    assert row.status == "ok", row.error
    result = row.answer
    assert result.settings["torch_threads"] == 1 and result.threads == 1
    assert result.framework_version.startswith("2.")
    for dtype in TINY["dtypes"]:
        entry = result.matmul[dtype]
        measured = [f for f in entry.sizes if f.flops_per_s is not None]
        assert entry.peak_flops_per_s > 0 and entry.best_n in (64, 128)
        assert entry.peak_flops_per_s == max(f.flops_per_s for f in measured)
        for f in measured:
            assert f.flops_per_s == pytest.approx(2 * f.n**3 / f.timed.median_s)
            assert f.timed.samples >= 1 and f.timed.calls_per_step >= 1
    bandwidth = result.bandwidth
    assert bandwidth.array_bytes == TINY["bandwidth_bytes"]
    kernels = bandwidth.kernels
    assert kernels.copy.bytes_per_call == 2 * bandwidth.array_bytes
    assert kernels.triad.bytes_per_call == 3 * bandwidth.array_bytes
    assert bandwidth.peak_bytes_per_s == max(k.bytes_per_s for k in (kernels.copy, kernels.triad)) > 0
    dispatch = result.dispatch
    assert dispatch.timed.median_s > 0 and dispatch.ops_per_s == pytest.approx(1 / dispatch.timed.median_s)
    copies = result.copies  # on a CPU: host memcpy only, bytes copied per second (STREAM would count twice that)
    assert [(c.kind, c.bytes, c.pinned) for c in copies] == [("memcpy", 4096, False), ("memcpy", 2**20, False)]
    for c in copies:
        assert c.bytes_per_s == pytest.approx(c.bytes / c.best_s) and c.best_s > 0
        assert c.stream_bytes_per_s == pytest.approx(2 * c.bytes_per_s)
        assert 1 <= c.steps <= 5 and c.calls_per_step >= 1
    assert copies[0].calls_per_step > copies[1].calls_per_step  # a 4 KiB copy is timed many to a step
    json.dumps(result.to_json())  # plain JSON values only


@pytest.mark.serial  # a ratio of two CPU times: other processes on the cores still skew it (one flake under load)
def test_the_dispatch_cost_is_per_operator_a_chain_twice_as_long_takes_about_twice_as_long():
    torch = require("torch")
    from dlperf.frameworks.torch import peak as torch_peak

    def cpu_s(n: int) -> float:  # this thread's own time: on a shared machine, wall time is also others' turns
        start = time.thread_time()
        torch_peak.chain(x, n)
        return time.thread_time() - start

    x, n = torch.zeros(1), 2000
    torch_peak.chain(x, n)  # warm: the first calls build the dispatcher's caches
    one, two = [], []
    for _ in range(7):  # alternated; each chain's median: one odd reading (CI saw a 5.4 ms among 6-10) moves no median
        one.append(cpu_s(n))
        two.append(cpu_s(2 * n))
    assert 1.4 < statistics.median(two) / statistics.median(one) < 2.8, (one, two)
    assert x.item() == n + 7 * 3 * n  # every add ran, one after the other


def test_the_copy_sweep_goes_from_4_kib_to_256_mib_in_steps_of_4():
    assert copy_sizes(4096, 256 * 2**20) == [4**k for k in range(6, 15)]
    assert copy_sizes(4096, 2**20) == TINY_COPIES
    assert copy_sizes(4096, 3 * 2**20)[-2:] == [2**20, 3 * 2**20]  # a largest size between two steps is kept


def test_host_device_copies_are_said_to_be_unmeasured_without_a_gpu_never_made_up():
    from dlperf.commands.peak import PeakOptions, copy_notes

    opts = PeakOptions(("cpu",), None, ("fp32",), (64,), 2**20, (4096,), 0.2, 60.0, "text")
    memcpy = measured_row("cpu", {"kind": "memcpy", "pinned": False})
    assert copy_notes([memcpy], opts, gpus=False) == ["no GPU: host<->device copies not measured"]
    assert copy_notes([memcpy], opts, gpus=True) == ["host<->device copies are measured with --devices cuda"]
    h2d = measured_row("cuda:0", {"kind": "h2d", "pinned": True})
    assert copy_notes([memcpy, h2d], PeakOptions(("cpu", "cuda:0"), *astuple(opts)[1:]), gpus=True) == []
    assert copy_notes([], PeakOptions(*astuple(opts)[:5], (), *astuple(opts)[6:]), gpus=False) == []  # --copies-mib 0


def measured_row(device: str, *copies: dict) -> PeakRow:
    """The row of a peak child on `device` that measured `copies` (each {"kind", "pinned"}) and little else."""
    timed = {"median_s": 1.0, "iqr_s": 0.0, "samples": 5, "calls_per_step": 1, "warmup_steps": 1, "warmup_steady": True}
    kernel = {"bytes_per_call": 8, "bytes_per_s": 1e10, **timed}
    figure = {"bytes": 4096, "bytes_per_s": 1e10, "best_s": 4e-7, "steps": 5, "calls_per_step": 1}
    answer = PeakAnswer.from_json({
        "framework": "torch", "framework_version": "2.13.0+cpu", "device": device, "matmul": {},
        "bandwidth": {"array_bytes": 4, "kernels": {"copy": kernel, "triad": kernel}, "peak_bytes_per_s": 1e10,
                      "best_kernel": "copy"},
        "copies": [{**c, **figure} for c in copies], "duration_s": 1.0, "others_cpu_share": None, "threads": 1,
        "settings": {},
    })  # fmt: skip
    return PeakRow("torch", device, 1, 1.0, Status.OK, answer=answer)


def test_a_measured_row_is_stored_as_one_record_per_figure_its_json_and_the_childs_context_in_the_detail():
    from dlperf.runner.peak import peak_records
    from test_answers import PEAK_WIRE

    row = PeakRow("torch", "cpu", 1, 3.6, Status.OK, answer=PeakAnswer.from_json(PEAK_WIRE))
    context = {"settings": {"torch_threads": 1}, "others_cpu_share": 0.02, "steal_fraction": None, "duration_s": 3.5}
    records = peak_records(row)
    assert [(r.kind, r.dtype, r.value) for r in records] == [
        ("matmul", "fp32", 2e11), ("matmul", "fp16", None), ("matmul", "bool", None), ("bandwidth", None, 2e10),
        ("dispatch", None, 0.5), ("memcpy", None, 1e10), ("h2d", None, 5e9),
    ]  # fmt: skip
    wire = PEAK_WIRE
    figures = [*wire["matmul"].values(), wire["bandwidth"], wire["dispatch"]]
    figures += [{k: v for k, v in c.items() if k != "kind"} for c in wire["copies"]]
    assert [json.dumps(r.detail) for r in records] == [json.dumps({**f, **context}) for f in figures]
    assert {(r.framework, r.framework_version, r.device, r.threads) for r in records} == {
        ("torch", "2.13.0+cpu", "cpu", 1)
    }
    assert list(records[0].to_json()) == ["framework", "framework_version", "device", "threads", "kind", "dtype",
                                          "value", "detail"]  # fmt: skip


def test_the_cpu_is_measured_at_every_thread_count_an_accelerator_once():
    assert jobs(["cpu", "cuda:0"], [1, 2, 4]) == [("cpu", 1), ("cpu", 2), ("cpu", 4), ("cuda:0", 4)]


def test_a_failed_or_hung_child_is_an_error_row_not_a_traceback(monkeypatch):
    (row,) = measure("nosuch", ["cpu"], [1], **TINY, timeout=60)  # not installed anywhere: no child at all
    assert row.status == "failed" and "--frameworks nosuch: not installed" in row.error
    monkeypatch.setattr(envs, "importable_here", lambda framework: True)  # this interpreter, as if it had it
    (row,) = measure("nosuch", ["cpu"], [1], **TINY, timeout=60)
    assert row.status == "failed" and "No module named 'dlperf.frameworks.nosuch'" in row.error
    assert row.answer is None
    require("torch")
    (row,) = measure("torch", ["cpu"], [1], **{**TINY, "sizes": [64, 128, 256]}, timeout=0.5)
    assert row.status == "timeout" and "--timeout 0.5" in row.error


def test_a_size_too_slow_for_max_time_is_skipped_and_a_dtype_the_device_cannot_do_is_unsupported(monkeypatch):
    torch = require("torch")
    from dlperf.frameworks.torch import peak as torch_peak

    cpu, cfg = torch.device("cpu"), torch_peak.timer_config(0.05)
    entry = torch_peak.matmul_peak(cpu, "fp32", [64, 8192], cfg, lambda: None)  # 1.1 TFLOP: seconds on any CPU
    assert entry["best_n"] == 64 and entry["peak_flops_per_s"] > 0
    assert "more than 4 x --max-time (0.2 s)" in entry["sizes"][1]["skipped"]
    monkeypatch.setitem(torch_peak.DTYPES, "bool", torch.bool)  # no CPU matmul kernel for booleans
    entry = torch_peak.matmul_peak(cpu, "bool", [64], cfg, lambda: None)
    assert entry.keys() == {"unsupported"} and "bool" in entry["unsupported"]


def test_tf32_is_a_cuda_gpus_and_its_flag_is_set_only_for_its_own_products():
    """On a CPU tf32 is unsupported, saying why, and cuBLAS's flag is left alone; `dlperf peak` asks for tf32 by
    default only where a device is a CUDA GPU."""
    torch = require("torch")
    from dlperf.commands.peak import DEFAULT_DTYPES, default_dtypes
    from dlperf.frameworks.torch import peak as torch_peak

    before = torch.backends.cuda.matmul.allow_tf32
    entry = torch_peak.matmul_peak(torch.device("cpu"), "tf32", [64], torch_peak.timer_config(0.05), lambda: None)
    assert entry == {"unsupported": "tf32 is CUDA's (fp32 products on TensorFloat-32 tensor cores), not cpu's"}
    with torch_peak.tensor_float32(torch.device("cpu"), not before):
        assert torch.backends.cuda.matmul.allow_tf32 == before  # not a CUDA device: untouched
    assert default_dtypes(("cpu",)) == DEFAULT_DTYPES == ("fp32", "bf16", "fp16")
    assert default_dtypes(("cpu", "cuda:0")) == ("fp32", "bf16", "fp16", "tf32")


# ----------------------------------------------------------------------------------------------------------------------
# The command line


def test_cli_measures_stores_and_prints_json(tmp_path):
    require("torch")
    db = tmp_path / "d.db"
    proc = dlperf("peak", "--threads", "1", *TINY_FLAGS, "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["failed"] == [] and out["db"] == str(db)
    kinds = sorted((p["kind"], p["dtype"] or "") for p in out["peaks"] if p["kind"] != "memcpy")
    assert kinds == [("bandwidth", ""), ("dispatch", ""), ("matmul", "bf16"), ("matmul", "fp16"), ("matmul", "fp32")]
    memcpy = [p for p in out["peaks"] if p["kind"] == "memcpy"]  # one row per size, no GPU here: no h2d, no d2h
    assert [(p["detail"]["bytes"], p["detail"]["pinned"], p["dtype"]) for p in memcpy] == [
        (n, False, None) for n in TINY_COPIES
    ]
    assert all(p["value"] > 0 and p["device"] == "cpu" and p["threads"] == 1 for p in out["peaks"])
    store = Store.open(db, create=False)
    try:
        rows = store.peaks()
        assert sorted(r.id for r in rows) == sorted(p["id"] for p in out["peaks"])
        assert rows[0].fingerprint["frameworks"]["torch"] == out["peaks"][0]["framework_version"]
        env = json.loads(store.conn.execute("SELECT env_json FROM peaks LIMIT 1").fetchone()[0])
        peaks = peak_lookup(store, rows[0].fingerprint, "cpu", 1)
        copies = store.copies("cpu", threads=1)  # what views read: smallest size first
        assert [(c.kind, c.detail["bytes"], c.value) for c in copies] == [
            ("memcpy", p["detail"]["bytes"], p["value"]) for p in memcpy
        ]
        cost = dispatch_lookup(store, rows[0].fingerprint, "cpu", 1, "torch")
        assert dispatch_lookup(store, rows[0].fingerprint, "cpu", 2, "torch") is None
        # torch's eager dispatch is no cost of a TensorFlow graph's operators: a TF LSTM read launch-bound by it
        assert dispatch_lookup(store, rows[0].fingerprint, "cpu", 1, "tensorflow") is None
    finally:
        store.close()
    assert env["frameworks"]["torch"]["version"] == out["peaks"][0]["framework_version"]
    assert peaks.keys() == {"fp32", "bf16", "fp16"}
    [dispatch] = [p for p in out["peaks"] if p["kind"] == "dispatch"]
    assert cost == dispatch["value"] == dispatch["detail"]["median_s"] > 0


def test_cli_text_output(tmp_path):
    require("torch")
    proc = dlperf("peak", "--threads", "1", "--dtypes", "bf16", *TINY_FLAGS, db=tmp_path / "d.db")
    assert proc.returncode == 0, proc.stderr
    assert "TFLOP/s" in proc.stdout and "bf16" in proc.stdout and "triad GB/s" in proc.stdout
    assert "µs per op" in proc.stdout
    assert "Copies (GB/s)" in proc.stdout and "memcpy" in proc.stdout and "256 KiB" in proc.stdout
    if "h2d pinned" not in proc.stdout:  # a machine without a GPU: said, not left out silently
        assert "no GPU: host<->device copies not measured" in proc.stdout
    assert "8 peaks stored" in proc.stdout  # bf16, bandwidth, dispatch, 5 copy sizes
    assert "[1/1] peaks of cpu:1: done" in proc.stderr


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--dtypes", "fp8"], "unknown dtype 'fp8'"),
        (["--dtypes", "bf16,"], "--dtypes"),
        (["--sizes", "64,0"], "--sizes"),
        (["--threads", "x"], "--threads"),
        (["--devices", "tpu"], "unknown device 'tpu'"),
        (["--bandwidth-mib", "0"], "--bandwidth-mib '0': expected a whole number of at least 1"),
        (["--max-time", "-1"], "--max-time '-1': expected a number of seconds above 0"),
        (["--copies-mib", "-1"], "--copies-mib '-1'"),
        (["--format", "xml"], "--format 'xml'"),
        # absurd: nothing this machine could run (a million threads crashed the child; the arrays did not fit)
        (["--threads", "1,100000"], "--threads 100000: at most 8 per usable core"),
        (["--sizes", "1024,1000000"], "--sizes 1000000: three 1000000x1000000 fp32 matrices take 1.2e+04 GB"),
        (["--bandwidth-mib", "100000000"], "--bandwidth-mib 100000000: three arrays take 3.1e+05 GB"),
        (["--copies-mib", "100000000"], "--copies-mib 100000000: a copy's two buffers take 2.1e+05 GB"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, flags, fragment):
    one_line_error(dlperf("peak", *flags, db=tmp_path / "d.db", timeout=60), fragment)
    assert not (tmp_path / "d.db").exists()


# ----------------------------------------------------------------------------------------------------------------------
# Looking peaks up and using them


def matmul(device, threads, dtype, value, version="2.13.0+cpu"):
    return MeasuredPeak(framework="torch", framework_version=version, device=device, threads=threads,
                        kind="matmul", dtype=dtype, value=value, detail={})  # fmt: skip


def test_peak_lookup_matches_machine_device_and_threads_and_takes_the_latest(tmp_path):
    store = Store.open(tmp_path / "d.db", create=True)
    other_machine = {**MACHINE, "hostname": "elsewhere"}
    store.record_peaks(MACHINE, {}, [matmul("cpu", 1, "fp32", 1e11), matmul("cpu", 1, "bf16", 3e11)])
    store.record_peaks(MACHINE, {}, [matmul("cpu", 2, "fp32", 2e11), matmul("cuda:0", 2, "fp32", 5e13)])
    store.record_peaks(MACHINE, {}, [matmul("cpu", 1, "fp32", 1.1e11)])  # measured again: the latest counts
    store.record_peaks(MACHINE, {}, [matmul("cpu", 1, "bf16", None)])  # not measured this time: the older stays
    store.record_peaks(other_machine, {}, [matmul("cpu", 1, "fp32", 9e12), matmul("cpu", 1, "fp16", 9e12)])
    store.record_peaks(MACHINE, {}, [matmul("cpu", 1, "fp16", 9e12, version="2.14.0+cpu")])  # other torch
    bandwidth = replace(matmul("cpu", 1, None, 5e10), kind="bandwidth")
    store.record_peaks(MACHINE, {}, [bandwidth])
    assert peak_lookup(store, MACHINE, "cpu", 1) == {"fp32": 1.1e11, "bf16": 3e11}
    assert peak_lookup(store, MACHINE, "cpu", 2) == {"fp32": 2e11}
    assert peak_lookup(store, MACHINE, "cpu", 4) == {}
    assert peak_lookup(store, MACHINE, "cuda:0", 8) == {"fp32": 5e13}  # host threads do not matter on a GPU
    assert peak_lookup(store, other_machine, "cpu", 1) == {"fp32": 9e12, "fp16": 9e12}
    assert peak_lookup(store, {**MACHINE, "frameworks": {"torch": "2.14.0+cpu"}}, "cpu", 1) == {"fp16": 9e12}
    assert peak_lookup(store, {**MACHINE, "memory_gib": 64}, "cpu", 1) == {}
    store.close()


def test_a_peak_applies_to_runs_of_the_same_machine_whatever_cpus_their_job_was_given(tmp_path):
    """A peak measured in one job counts for a run in another on the same machine: the affinity mask and the cgroup
    limit belong to the job, not the machine; and a run of other frameworks did not record torch's version."""
    store = Store.open(tmp_path / "d.db", create=True)
    store.record_peaks(MACHINE, {}, [matmul("cpu", 1, "fp32", 1e11)])
    smaller_job = {**MACHINE, "cores": {**MACHINE["cores"], "affinity": 1, "cgroup": 1.0, "cores": 1}}
    assert peak_lookup(store, smaller_job, "cpu", 1) == {"fp32": 1e11}
    assert peak_lookup(store, {**MACHINE, "frameworks": {"jax": "0.10.2"}}, "cpu", 1) == {"fp32": 1e11}
    other_cpu = {**MACHINE, "cores": {**MACHINE["cores"], "physical": 64}}
    assert peak_lookup(store, other_cpu, "cpu", 1) == {}
    store.close()


def test_utilization_is_time_at_peak_over_measured_time():
    peaks = {"fp32": 1e11, "bf16": 4e11}
    assert utilization({"fp32": 5e10}, 1.0, peaks) == pytest.approx(0.5)
    assert utilization({"fp32": 5e10}, 2.0, peaks) == pytest.approx(0.25)
    # autocast: most FLOPs in bf16 at its own peak, the rest in fp32: (8e10 / 4e11 + 1e10 / 1e11) / 0.6 s
    assert utilization({"bf16": 8e10, "fp32": 1e10}, 0.6, peaks) == pytest.approx((0.2 + 0.1) / 0.6)
    assert utilization({"bf16": 8e10, "fp16": 0}, 0.4, peaks) == pytest.approx(0.5)  # no fp16 work: no peak needed


def test_a_tf32_cells_fp32_work_is_held_against_the_tf32_peak_on_a_gpu():
    """The H200's resnet-50 tf32 step (388.8 GFLOP in 24.6 ms) read 31% of a 51 TFLOP/s fp32 peak; its products ran
    on the TensorFloat-32 units: against a 400 TFLOP/s tf32 peak, 4%. Without a tf32 peak: no figure."""
    from conftest import make_cell
    from dlperf.report.utilization import cell_utilization, held_flops

    peaks = {"fp32": 51e12, "tf32": 400e12, "bf16": 680e12}
    tf32 = make_cell("resnet-50", device="cuda:0", mode="tf32", median_s=0.0246, flops_by_dtype={"fp32": 388.8e9})
    assert held_flops(tf32.flops_by_dtype, tf32.mode, tf32.device) == {"tf32": 388.8e9}
    assert cell_utilization(tf32, peaks) == pytest.approx(388.8e9 / 400e12 / 0.0246)
    assert cell_utilization(tf32, {"fp32": 51e12}) is None  # never the fp32 peak's 31% instead
    fp32 = replace(tf32, mode="fp32")
    assert cell_utilization(fp32, peaks) == pytest.approx(388.8e9 / 51e12 / 0.0246)
    mixed = replace(tf32, mode="bf16+tf32", flops_by_dtype={"bf16": 3e11, "fp32": 1e9})
    assert held_flops(mixed.flops_by_dtype, mixed.mode, mixed.device) == {"bf16": 3e11, "tf32": 1e9}
    on_cpu = replace(tf32, device="cpu")
    assert held_flops(on_cpu.flops_by_dtype, on_cpu.mode, on_cpu.device) == {"fp32": 388.8e9}
    assert cell_utilization(replace(tf32, status=Status.FAILED), peaks) is None


def test_reduced_precision_work_is_held_against_the_faster_of_its_peak_and_fp32s():
    # an AVX2 CPU: bf16 matmul emulated at 1e9 FLOP/s, fp32 at 1e11; oneDNN ran the bf16 convolutions through fp32
    # kernels, and against the bf16 peak alone the table showed 342%
    emulated = {"fp32": 1e11, "bf16": 1e9}
    assert utilization({"bf16": 3.42e9}, 1.0, {"bf16": 1e9}) == pytest.approx(3.42)  # the old reading
    assert utilization({"bf16": 3.42e9}, 1.0, emulated) == pytest.approx(0.0342)
    assert utilization({"fp32": 5e10}, 1.0, {"fp32": 1e11, "bf16": 4e11}) == pytest.approx(0.5)  # fp32 alone: as before


def test_a_utilization_above_100_percent_is_explained_in_the_notes():
    from conftest import make_cell
    from dlperf.report import table

    over = make_cell("resnet-18", mode="bf16", median_s=1.0, n=10, flops_by_dtype={"bf16": 1e9}, utilization=1.5)
    fine = make_cell("resnet-18", median_s=1.0, n=10, flops_by_dtype={"fp32": 1e9}, utilization=0.5)
    notes = table.utilization_notes([over, fine])
    assert len(notes) == 1 and notes[0].startswith("utilization above 100% (resnet-18 torch bf16 cpu:1 150%)")
    assert "dlperf peak" in notes[0] and table.utilization_notes([fine]) == []


@pytest.mark.parametrize(
    ("flops", "median_s", "peaks"),
    [
        ({"fp16": 1e10}, 1.0, {"fp32": 1e11}),  # no fp16 peak measured
        ({"bf16": 1e10, "fp32": 1e9}, 1.0, {"bf16": 4e11}),  # one of two peaks missing
        (None, 1.0, {"fp32": 1e11}),  # FLOPs not counted
        ({}, 1.0, {"fp32": 1e11}),
        ({"fp32": 1e10}, None, {"fp32": 1e11}),  # no time
        ({"fp32": 1e10}, 0.0, {"fp32": 1e11}),
        ({"fp32": 1e10}, 1.0, {}),  # no peaks stored for this machine
    ],
)
def test_utilization_is_none_when_anything_is_missing(flops, median_s, peaks):
    assert utilization(flops, median_s, peaks) is None


# ----------------------------------------------------------------------------------------------------------------------
# The store: schema version 2


def v1_file(path):
    """A store as dlperf wrote it before peaks existed, with one run."""
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute(
        "INSERT INTO runs (started_at, status, spec_json, env_json, fingerprint_json)"
        " VALUES ('2026-01-01T00:00:00+00:00', 'complete', '{}', '{\"hostname\": \"old\"}', '{}')"
    )
    conn.commit()
    conn.close()


def schema_version(path):
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("create", [False, True])
def test_a_v1_file_is_upgraded_in_place_and_keeps_its_runs(tmp_path, create):
    assert SCHEMA_VERSION >= 2
    path = tmp_path / "old.db"
    v1_file(path)
    store = Store.open(path, create=create)  # a reader (dlperf table) upgrades it too
    assert [r.env for r in store.runs()] == [{"hostname": "old"}]
    assert store.peaks() == []
    store.record_peaks(MACHINE, {}, [matmul("cpu", 1, "fp32", 1e11)])
    store.close()
    assert schema_version(path) == SCHEMA_VERSION
    store = Store.open(path, create=False)
    assert [r.value for r in store.peaks()] == [1e11] and len(store.runs()) == 1
    store.close()


def test_a_reader_that_cannot_write_still_reads_an_old_file(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    v1_file(path)

    def readonly(self):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(Store, "_migrate", readonly)
    store = Store.open(path, create=False)
    assert store.version == 1 and len(store.runs()) == 1 and store.peaks() == []
    store.close()
    with pytest.raises(UsageError, match="cannot upgrade"):
        Store.open(path, create=True)
    assert schema_version(path) == 1


def test_a_reader_still_refuses_a_file_without_dlperf_tables(tmp_path):
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    path.write_bytes(b"")
    with pytest.raises(UsageError, match="no dlperf runs"):
        Store.open(path, create=False)


@pytest.mark.slow
def test_table_and_export_show_utilization_against_the_stored_peak(tmp_path):
    require("torch")
    from conftest import FAST

    db = tmp_path / "d.db"
    run = ["run", "--workloads", "tiny-alexnet-r", "--threads", "1", "--modes", "fp32,bf16", *FAST]
    assert dlperf(*run, db=db).returncode == 0
    before = [json.loads(line) for line in dlperf("export", db=db).stdout.splitlines()]
    assert all(r["utilization"] is None for r in before)  # no peak measured yet: no guess either
    assert dlperf("peak", "--threads", "1", "--dtypes", "fp32,bf16", *TINY_FLAGS, db=db).returncode == 0
    records = {r["mode"]: r for r in (json.loads(line) for line in dlperf("export", db=db).stdout.splitlines())}
    assert records["fp32"]["flops_by_dtype"] == {"fp32": records["fp32"]["flops_per_step"]}
    assert records["bf16"]["flops_by_dtype"] == {"bf16": records["bf16"]["flops_per_step"]}
    for r in records.values():
        assert 0 < r["utilization"] < 5  # tiny matrices reach little of the peak; above 1 only through noise
    table = json.loads(dlperf("table", "--format", "json", db=db).stdout)
    assert len(table["rows"]) == len(records) == 2  # fp32's row and bf16's: none would pass the check below
    assert all(row["cells"]["cpu:1"]["utilization"] == records[row["mode"]]["utilization"] for row in table["rows"])
    assert "%)" in dlperf("table", db=db).stdout


def old_peaks_file(path, version, peak, refused_kind):
    """A store file at schema `version` holding one peak, (kind, dtype, value), whose table refuses `refused_kind`."""
    conn = old_store(path, version)
    row = ("then", json.dumps(MACHINE), "{}", "torch", "2.13.0+cpu", "cpu", 1, *peak)
    conn.execute("INSERT INTO peaks (measured_at, fingerprint_json, env_json, framework, framework_version, device, "
                 "threads, kind, dtype, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)  # fmt: skip
    with pytest.raises(sqlite3.IntegrityError):  # the old table refuses the new kind
        conn.execute("INSERT INTO peaks (measured_at, fingerprint_json, env_json, framework, device, threads, kind) "
                     "VALUES ('now', '{}', '{}', 'torch', 'cpu', 1, ?)", (refused_kind,))  # fmt: skip
    conn.commit()
    conn.close()


def test_a_v7_file_keeps_its_peaks_and_stores_a_dispatch_cost_once_upgraded(tmp_path):
    from dlperf.store.schema import DISPATCH

    path = tmp_path / "v7.db"
    old_peaks_file(path, DISPATCH - 1, ("matmul", "fp32", 1e11), "dispatch")
    store = Store.open(path, create=True)
    try:
        assert store.version == SCHEMA_VERSION
        dispatch = MeasuredPeak(framework="torch", device="cpu", threads=1, kind="dispatch", value=2e-6)
        store.record_peaks(MACHINE, {}, [dispatch])
        assert peak_lookup(store, MACHINE, "cpu", 1) == {"fp32": 1e11}
        assert dispatch_lookup(store, MACHINE, "cpu", 1, "torch") == 2e-6
        assert [p.id for p in store.peaks()] == [2, 1]  # ids go on from the old table's
    finally:
        store.close()


def copy_row(device, threads, kind, nbytes, pinned, value):
    return MeasuredPeak(framework="torch", framework_version="2.13.0+cpu", device=device, threads=threads,
                        kind=kind, dtype=None, value=value, detail={"bytes": nbytes, "pinned": pinned})  # fmt: skip


def test_a_v8_file_keeps_its_peaks_and_stores_copies_once_upgraded(tmp_path):
    from dlperf.store.schema import LOADERS

    path = tmp_path / "v8.db"
    old_peaks_file(path, LOADERS - 1, ("dispatch", None, 2e-6), "memcpy")
    store = Store.open(path, create=True)
    try:
        assert store.version == SCHEMA_VERSION and store.copies("cpu") == []
        store.record_peaks(MACHINE, {}, [copy_row("cpu", 1, "memcpy", 2**20, False, 1e10)])
        assert dispatch_lookup(store, MACHINE, "cpu", 1, "torch") == 2e-6  # the old peak survived
        assert [(p.id, p.kind) for p in store.peaks()] == [(2, "memcpy"), (1, "dispatch")]
        assert [c.value for c in store.copies("cpu")] == [1e10]
    finally:
        store.close()


def test_copies_are_read_the_latest_of_each_kind_size_and_pinning_of_one_machine(tmp_path):
    store = Store.open(tmp_path / "d.db", create=True)
    other = {**MACHINE, "hostname": "elsewhere"}
    try:
        store.record_peaks(MACHINE, {}, [copy_row("cuda:0", 2, k, n, p, 1e9) for k in ("h2d", "d2h")
                                         for p in (True, False) for n in (2**20, 4096)])  # fmt: skip
        store.record_peaks(MACHINE, {}, [copy_row("cuda:0", 2, "h2d", 4096, True, 2e9)])  # measured again
        store.record_peaks(other, {}, [copy_row("cuda:0", 2, "h2d", 4096, False, 9e9)])
        store.record_peaks(MACHINE, {}, [copy_row("cpu", 1, "memcpy", 4096, False, 5e9)])
        mine = store.copies("cuda:0", machine=lambda r: r.fingerprint == MACHINE)
        assert [(c.kind, c.detail["pinned"], c.detail["bytes"], c.value) for c in mine] == [
            ("h2d", False, 4096, 1e9), ("h2d", False, 2**20, 1e9), ("h2d", True, 4096, 2e9), ("h2d", True, 2**20, 1e9),
            ("d2h", False, 4096, 1e9), ("d2h", False, 2**20, 1e9), ("d2h", True, 4096, 1e9), ("d2h", True, 2**20, 1e9),
        ]  # fmt: skip
        assert store.copies("cuda:0")[0].value == 9e9  # any machine: the other one's is the latest
        assert [c.kind for c in store.copies("cpu", threads=1)] == ["memcpy"] and store.copies("cpu", threads=2) == []
    finally:
        store.close()


# ----------------------------------------------------------------------------------------------------------------------
# Peaks measured on a busy machine (issue 31): recorded with their load, and the views take an undisturbed one


def busy(peak: MeasuredPeak, others: float = 0.0, steal: float = 0.0) -> MeasuredPeak:
    """`peak` as `dlperf peak` stores it: with the load it was measured under in its detail."""
    return replace(peak, detail={**peak.detail, "others_cpu_share": others, "steal_fraction": steal})


def test_the_views_take_the_best_undisturbed_peak_and_say_when_only_disturbed_ones_exist(tmp_path):
    from dlperf.report.utilization import bandwidth_lookup, busy_notes

    store = Store.open(tmp_path / "d.db", create=True)
    store.record_peaks(MACHINE, {}, [busy(matmul("cpu", 2, "fp32", 1.9e11), others=0.01)])  # idle: the machine's
    store.record_peaks(MACHINE, {}, [busy(matmul("cpu", 2, "fp32", 1.8e10), others=0.55)])  # later, busy: 10x lower
    store.record_peaks(MACHINE, {}, [busy(matmul("cpu", 2, "bf16", 9e11), steal=0.3)])  # busy too, and the only bf16
    bw = [busy(replace(matmul("cpu", 2, None, v), kind="bandwidth"), others=o) for v, o in ((2e10, 0.0), (5e9, 0.4))]
    store.record_peaks(MACHINE, {}, bw)
    peaks = peak_lookup(store, MACHINE, "cpu", 2)
    assert peaks == {"fp32": 1.9e11, "bf16": 9e11}  # the busy fp32 peak, though newer, is not the machine's
    assert bandwidth_lookup(store, MACHINE, "cpu", 2) == 2e10
    [note] = busy_notes(peaks, "cpu:2")
    assert note.startswith("cpu:2 bf16: only a peak measured on a busy machine (CPU steal 30%)")
    assert busy_notes(peaks, "cpu:2", "fp32") == [] and busy_notes(peaks, "cpu:2", "bf16+channels_last") == [note]
    store.record_peaks(MACHINE, {}, [busy(matmul("cpu", 1, "fp32", 1.8e10), others=0.55)])
    only_busy = peak_lookup(store, MACHINE, "cpu", 1)
    assert only_busy == {"fp32": 1.8e10}  # still used, and said
    assert "other processes used 55% of the CPUs" in busy_notes(only_busy, "cpu:1")[0]
    store.close()


def test_a_peak_records_the_steal_it_was_measured_under_and_warns_when_the_machine_was_busy():
    from dlperf.commands.peak import notes
    from dlperf.runner.peak import peak_records
    from test_answers import PEAK_WIRE

    row = PeakRow("torch", "cpu", 2, 3.6, Status.OK, answer=PeakAnswer.from_json({**PEAK_WIRE, "steal_fraction": 0.2}))
    assert {r.detail["steal_fraction"] for r in peak_records(row)} == {0.2}
    [note] = [n for n in notes([row], []) if "busy" in n]
    assert note.startswith("cpu:2: measured on a busy machine (CPU steal 20%)")


def test_the_tables_write_no_figure_in_scientific_notation():
    """Issue 31, item 4: a dispatch of 1.2 ms (a loaded machine) printed as `1.2e+03` µs per op."""
    import re

    from rich.console import Console

    from dlperf.commands.peak import dispatch_table, matmul_table
    from test_answers import PEAK_WIRE

    wire = {**PEAK_WIRE, "dispatch": {**PEAK_WIRE["dispatch"], "median_s": 0.0012}}
    wire["matmul"] = {**wire["matmul"], "fp32": {**wire["matmul"]["fp32"], "peak_flops_per_s": 1.46e16}}
    row = PeakRow("torch", "cpu", 1, 3.6, Status.OK, answer=PeakAnswer.from_json(wire))
    console = Console(width=200, record=True)
    console.print(dispatch_table([row]))
    console.print(matmul_table([row]))
    text = console.export_text()
    assert "1200" in text and "14600" in text, text
    assert not re.search(r"\d[eE][+-]\d", text), text


def test_an_interrupt_while_a_processs_peaks_are_stored_comes_once_they_are(tmp_path, monkeypatch, capsys):
    """Ctrl-C while a finished process's peaks were written was raised inside the store's transaction, which rolled
    them back: the process measured for nothing. It comes once they are stored."""
    from dlperf.cli import main
    from dlperf.runner import peak
    from dlperf.store.machine import MachineFigures
    from test_answers import PEAK_WIRE

    def measure(framework, devices, threads, *args):
        progress = args[5]
        progress(0, 1, "cpu", 1, None)
        progress(1, 1, "cpu", 1, PeakRow("torch", "cpu", 1, 3.6, Status.OK, answer=PeakAnswer.from_json(PEAK_WIRE)))
        return []

    real = MachineFigures.record_peaks

    def interrupted(self, *args):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as they are written
        return real(self, *args)

    monkeypatch.setattr(peak, "measure", measure)
    monkeypatch.setattr(MachineFigures, "record_peaks", interrupted)
    db = tmp_path / "d.db"
    with handlers_put_back():
        assert main(["peak", "--threads", "1", "--db", str(db)]) == 130
    store = Store.open(db, create=False)
    try:
        assert len(store.peaks()) == 7  # PEAK_WIRE's figures
    finally:
        store.close()


def test_an_interrupted_peak_says_which_peaks_it_stored(tmp_path, monkeypatch, capsys):
    """Ctrl-C after cpu:1's peaks were stored, while cpu:2's were measured, said only 'dlperf: interrupted'."""
    from dlperf.cli import main
    from dlperf.runner import peak
    from test_answers import PEAK_WIRE

    def measure(framework, devices, threads, *args):
        progress = args[5]
        progress(1, 2, "cpu", 1, PeakRow("torch", "cpu", 1, 3.6, Status.OK, answer=PeakAnswer.from_json(PEAK_WIRE)))
        progress(1, 2, "cpu", 2, None)
        raise KeyboardInterrupt

    monkeypatch.setattr(peak, "measure", measure)
    db = tmp_path / "d.db"
    argv = ["peak", "--threads=1,2", "--dtypes", "fp32", "--db", str(db)]
    monkeypatch.setattr(sys, "argv", ["dlperf", *argv])
    assert main(argv) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (  # it named no command, and measured cpu:1 again
        f"dlperf: interrupted; the peaks of cpu:1 are stored in {db}. To measure the rest: dlperf peak --dtypes fp32 "
        f"--db {db} --devices cpu --threads 2"
    )


def test_the_rest_of_a_peak_is_the_cpu_at_the_thread_counts_left_and_the_gpus_left(monkeypatch):
    from dlperf.commands.peak import rest_command

    monkeypatch.setattr(sys, "argv", ["dlperf", "peak", "--devices", "cpu,cuda:0", "--threads", "1,2"])
    both = ["cpu", "cuda:0"]
    assert rest_command({"cpu:1"}, both, [1, 2]) == "dlperf peak --devices cpu,cuda:0 --threads 2"
    assert rest_command({"cpu:1", "cpu:2"}, both, [1, 2]) == "dlperf peak --devices cuda:0"
    assert rest_command({"cuda:0"}, both, [1, 2]) == "dlperf peak --devices cpu --threads 1,2"
    assert rest_command({"cpu:1", "cpu:2", "cuda:0"}, both, [1, 2]) is None
    # the store named by $DLPERF_DB: run as printed, the rest went to ./dlperf.db
    monkeypatch.setenv("DLPERF_DB", "my peaks.db")
    assert (
        rest_command({"cpu:1"}, both, [1, 2]) == "DLPERF_DB='my peaks.db' dlperf peak --devices cpu,cuda:0 --threads 2"
    )
    monkeypatch.setattr(sys, "argv", ["dlperf", "peak", "--threads", "1,2", "--db", "x.db"])  # --db said it: as typed
    assert rest_command({"cpu:1"}, ["cpu"], [1, 2]) == "dlperf peak --db x.db --devices cpu --threads 2"


def test_a_peak_interrupted_before_its_first_figures_says_nothing_is_stored(tmp_path, monkeypatch, capsys):
    """Ctrl-C (or SIGTERM) while cpu:1's peaks were measured said only 'dlperf: interrupted'."""
    from dlperf.cli import main
    from dlperf.runner import peak

    def measure(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(peak, "measure", measure)
    monkeypatch.setattr(sys, "argv", ["dlperf", "peak", "--threads", "1,2"])
    assert main(["peak", "--threads", "1,2", "--db", str(tmp_path / "d.db")]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        "dlperf: interrupted; nothing is stored: no peak was measured yet. To measure, run it again: dlperf peak "
        "--threads 1,2"
    )


@contextmanager
def handlers_put_back():
    """The CLI's signal handling as it was before the block: interrupted, the CLI ignores interrupts to its process's
    end (`lifeline.sigterm_as_interrupt(to_the_end=True)`), which in this process would outlast the test."""
    from dlperf.runner import lifeline

    previous = {sig: signal.getsignal(sig) for sig in (*lifeline.INTERRUPTS, signal.SIGTSTP)}
    try:
        yield
    finally:
        lifeline._interrupted = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def test_a_bandwidth_under_1_gb_s_keeps_two_significant_figures():
    """A 64 KiB memcpy at 2 threads on a busy machine printed as '0.0' GB/s: no figure at all."""
    from dlperf.commands.peak import _gbps

    assert [_gbps(v) for v in (4.204e12, 55.1e9, 0.97e9, 4.3e7, 1.2e5)] == [
        "4204.0",
        "55.1",
        "0.97",
        "0.043",
        "0.00012",
    ]
