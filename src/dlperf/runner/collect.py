"""Turn what a worker reported into a stored measurement, and a cell's measurements into its figures.

A cell measured in R processes (`--repeats R`) is summarized by the median of the per-process medians, because on a
shared machine the variation between processes is often larger than within one; spread and n pool every sample.
"""

from __future__ import annotations

import statistics
from typing import Any

from dlperf.measure.stats import summarize
from dlperf.runner.launch import ChildResult
from dlperf.vocab import Status

NOISY_IQR_RATIO = 0.10
OTHERS_BUSY_SHARE = 0.10  # of the machine's CPU capacity, while the cell was timed


# The figure that becomes a cell's peak memory, best first: an allocator's own peak, the bytes of live tensors, XLA's
# buffer plan of a jitted step, and otherwise (compiled CPU steps, which no dispatch mode can trace; frameworks without
# a tensor-level figure) the process's resident-set peak during one step.
MEMORY_KINDS = {
    "cuda_allocator_peak_bytes": "cuda_allocator",
    "live_tensor_peak_bytes": "live_tensors",
    "xla_buffer_peak_bytes": "xla_buffers",  # XLA's plan of the compiled step: arguments + outputs + temporaries
    "process_rss_peak_bytes": "process_rss",
}


def _first(events: list[dict], name: str) -> dict:
    return next((e for e in events if e["event"] == name), {})


def measurement(events: list[dict], child: ChildResult, timeout: float) -> dict[str, Any]:
    """One process's outcome: status, error, every raw sample and the worker's details."""
    samples = [e["t"] for e in events if e["event"] == "sample"]
    status, error = _status(events, child, timeout, len(samples))
    built, warm, done = _first(events, "built"), _first(events, "warmup"), _first(events, "sampled")
    detail = {
        "params": built.get("params"),
        "build_s": built.get("build_s"),
        "settings": built.get("settings"),
        "flops_per_step": _first(events, "flops").get("flops_per_step"),
        "flops_by_dtype": _first(events, "flops").get("flops_by_dtype"),
        "compile": _compile_detail(events),
        "loss_check": _loss_check(events, child),
        "stopped_early": _first(events, "done").get("stopped_early"),
        "memory": {k: v for k, v in _first(events, "memory").items() if k != "event"},
        "warmup_steps": warm.get("steps"),
        "warmup_steady": warm.get("steady"),
        "warmup_times": warm.get("times"),
        "python": _first(events, "start").get("python"),  # the interpreter: dlperf's, or the framework's own
        "affinity": _first(events, "affinity").get("cpus"),
        "thread_env": _first(events, "affinity").get("thread_env"),
        "steal_fraction": done.get("steal_fraction"),
        "others_cpu_share": done.get("others_cpu_share"),
        "cpu_utilization": done.get("cpu_utilization"),
        "minor_faults_per_step": done.get("minor_faults_per_step"),
        "process_hwm_increase_bytes": done.get("process_hwm_increase_bytes"),
    }
    if status is not Status.OK:
        detail["traceback"] = _first(events, "error").get("traceback")
        detail["stderr_tail"] = child.stderr_tail
    return {
        "status": status.value,
        "error": error,
        "samples": samples,
        "detail": detail,
        "duration_s": child.duration_s,
    }


def _loss_check(events: list[dict], child: ChildResult) -> dict | None:
    if check := _first(events, "loss_check"):
        return {k: v for k, v in check.items() if k != "event"}
    if _first(events, "checking"):
        why = child.stop_reason or ("the cell's --timeout" if child.timed_out else child.crashed_reason or "no result")
        return {"ok": None, "reason": f"the check did not finish: {why}"}
    return None


def _compile_detail(events: list[dict]) -> dict[str, Any] | None:
    """First-step time and TorchDynamo's counts for a compiled cell; None for an eager one."""
    if not _first(events, "compiling"):
        return None
    compiled, end = _first(events, "compiled"), _first(events, "compile_end")
    detail = {k: v for k, v in compiled.items() if k != "event"}
    if compiled and end:
        detail["recompiles"] = end.get("frames_compiled", 0) - compiled.get("frames_compiled", 0)
        detail["graph_breaks_after_first_step"] = end.get("graph_breaks", 0) - compiled.get("graph_breaks", 0)
    detail["finished"] = bool(compiled)
    return detail


def _status(events: list[dict], child: ChildResult, timeout: float, n: int) -> tuple[Status, str | None]:
    if unsupported := _first(events, "unsupported"):
        return Status.UNSUPPORTED, unsupported.get("reason")
    if failure := _first(events, "error"):
        return Status.FAILED, failure.get("error")
    if (child.timed_out or child.crashed_reason) and _first(events, "checking") and not _first(events, "loss_check"):
        return Status.OK, None  # measured in full; only the untimed loss check was cut short (see `loss_check`)
    if child.timed_out:
        return Status.TIMEOUT, child.stop_reason or f"exceeded --timeout {timeout:g} s (kept {n} samples)"
    if child.crashed_reason:
        last = child.stderr_tail.strip().splitlines()[-1:] or [""]
        return Status.FAILED, f"{child.crashed_reason}{': ' + last[0] if last[0] else ''}"
    if not _first(events, "done"):
        return Status.FAILED, "worker ended without a result"
    return Status.OK, None


def cell_figures(measurements: list[dict], batch: int, threads: int, cores: int, device: str) -> dict[str, Any]:
    """A cell's columns from all its measured processes (dicts with status, error, samples, detail)."""
    status, error = _cell_status(measurements)
    figures: dict[str, Any] = {"status": status.value, "error": error}
    details = [m["detail"] for m in measurements]
    figures.update(_static(details))
    measured = [m for m in measurements if m["samples"]]
    warnings = []
    if measured:
        medians = [statistics.median(m["samples"]) for m in measured]
        pooled = [t for m in measured for t in m["samples"]]
        s = summarize(pooled, median=statistics.median(medians))
        figures.update(
            median_s=s.median,
            iqr_s=s.iqr,
            mean_s=s.mean,
            stdev_s=s.stdev,
            ci_low_s=s.ci_low,
            ci_high_s=s.ci_high,
            n=s.n,
            samples_s=batch / s.median if s.median > 0 else None,
        )
        figures["extra"]["per_process_medians"] = medians
        if compiled := _first_compile(details):
            # the first step's time beyond a steady step is what compiling (or capturing) cost
            figures["extra"]["compile"] = {**compiled, "compile_s": max(0.0, compiled["first_step_s"] - s.median)}
        if s.median > 0 and s.iqr / s.median > NOISY_IQR_RATIO:
            warnings.append(f"noisy: IQR is {100 * s.iqr / s.median:.0f}% of the median")
    warnings += _warnings(details, threads, cores, device)
    figures["extra"]["warnings"] = warnings
    return figures


def _first_compile(details: list[dict]) -> dict | None:
    return next((d["compile"] for d in details if (d.get("compile") or {}).get("first_step_s") is not None), None)


def _cell_status(measurements: list[dict]) -> tuple[Status, str | None]:
    statuses = [Status(m["status"]) for m in measurements]
    for bad in (Status.FAILED, Status.TIMEOUT):
        if bad in statuses:
            return bad, next(m["error"] for m in measurements if m["status"] == bad.value)
    if statuses and all(s is Status.UNSUPPORTED for s in statuses):
        return Status.UNSUPPORTED, measurements[0]["error"]
    return (Status.OK, None) if statuses else (Status.PENDING, None)


def _static(details: list[dict]) -> dict[str, Any]:
    """Figures that do not depend on timing: taken from the first process that reported them."""

    def first(key):
        return next((d[key] for d in details if d.get(key) is not None), None)

    memory = first("memory") or {}
    kind, peak = next(
        ((kind, memory[key]) for key, kind in MEMORY_KINDS.items() if memory.get(key) is not None), (None, None)
    )
    warmups = [d["warmup_steps"] for d in details if d.get("warmup_steps") is not None]
    steals = [d["steal_fraction"] for d in details if d.get("steal_fraction") is not None]
    others = [d["others_cpu_share"] for d in details if d.get("others_cpu_share") is not None]
    return {
        "params": first("params"),
        "flops_per_step": first("flops_per_step"),
        "warmup_steps": int(statistics.median(warmups)) if warmups else None,
        "peak_mem_bytes": peak,
        "peak_mem_kind": kind,
        "extra": {
            "memory": {**memory, "process_hwm_increase_bytes": first("process_hwm_increase_bytes")},
            "steal_fraction": max(steals) if steals else None,
            "others_cpu_share": max(others) if others else None,
            "settings": first("settings"),
            "warmup_steady": all(d.get("warmup_steady", True) is not False for d in details),
            "build_s": first("build_s"),
            "cpu_utilization": first("cpu_utilization"),
            "minor_faults_per_step": first("minor_faults_per_step"),
            "flops_by_dtype": first("flops_by_dtype"),
            "compile": first("compile"),
            "loss_check": first("loss_check"),
        },
    }


def _warnings(details: list[dict], threads: int, cores: int, device: str) -> list[str]:
    warnings = [f"stopped after timing: {d['stopped_early']}" for d in details if d.get("stopped_early")][:1]
    if device == "cpu" and threads > cores:
        warnings.append(f"oversubscribed: {threads} threads on {cores} cores")
    if any(d.get("warmup_steady") is False for d in details):
        warnings.append("warm-up did not settle within --max-warmup steps or --max-time")
    steal = max((d["steal_fraction"] or 0.0 for d in details if d.get("steal_fraction") is not None), default=0.0)
    if steal > 0.02:
        warnings.append(f"CPU steal time {100 * steal:.0f}%: another virtual machine took this machine's CPU")
    others = max((d.get("others_cpu_share") or 0.0 for d in details), default=0.0)
    if others > OTHERS_BUSY_SHARE:
        warnings.append(f"other processes used {100 * others:.0f}% of the CPUs while this cell was timed")
    return warnings
