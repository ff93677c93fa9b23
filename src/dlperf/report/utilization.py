"""Utilization: how close a step gets to what the machine can really do, measured by `dlperf peak`.

    utilization = (sum over dtypes d of FLOPs_d / peak_d) / median step time

the share of the step the model's arithmetic would take if every FLOP ran at the measured matmul peak of its dtype,
for the same device and thread count (a 1-thread cell is held against the 1-thread peak). Measured, not taken from a
datasheet: on one CPU bf16 is several times faster than fp32, on another fp16 runs at a few GFLOP/s.

A reduced-precision FLOP is held against the faster of its own peak and fp32's: where bf16 has no native kernel, a
framework may compute bf16 work in fp32 (oneDNN's convolutions do), and against the emulated bf16 matmul peak such a
step once showed a utilization of 342%. Above 100% after that, the stored peak is too low for this machine (measured
under load, say), and the views say so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlperf.vocab import DeviceKind

if TYPE_CHECKING:
    from dlperf.store import Store
    from dlperf.store.records import CellRecord

# the machine part of envinfo.fingerprint; of its cores only the physical count: the affinity mask and the cgroup limit
# belong to a job (two jobs on one machine may be given different CPUs), and the thread count is matched on its own
MACHINE_KEYS = ("cpu_model", "memory_gib", "hostname", "gpus")
REDUCED = ("bf16", "fp16")


def _is_cpu(device: str) -> bool:
    return device.split(":")[0] == DeviceKind.CPU


def utilization(flops_by_dtype: dict[str, int] | None, median_s: float | None, peaks: dict) -> float | None:
    """The share of the step the model's arithmetic would take at the measured peaks.

    sum over dtypes of flops_d / peaks[d] (seconds at peak), divided by `median_s`. Under autocast a step's FLOPs are
    split by dtype ({"bf16": 8e9, "fp32": 1e8}), each held against its own peak. None when the FLOPs, the time or a
    needed peak is missing: a guess would look like a measurement."""
    if not flops_by_dtype or median_s is None or median_s <= 0:
        return None
    ideal_s = 0.0
    for dtype, flops in flops_by_dtype.items():
        if flops is None:
            return None
        if flops == 0:
            continue  # no work in this dtype: its peak is not needed
        peak = peaks.get(dtype)
        if not peak or peak <= 0:
            return None
        if dtype in REDUCED:
            peak = max(peak, peaks.get("fp32") or 0.0)  # the work may run in fp32 kernels, never slower than those
        ideal_s += flops / peak
    return ideal_s / median_s


def same_machine(stored: dict, fingerprint: dict, framework: str, version: str | None) -> bool:
    """Whether a peak measured with fingerprint `stored` applies to a run with `fingerprint`: the same machine and,
    when both recorded one, the same version of the framework that measured the peak (its kernels are what reaches
    the peak; a run of other frameworks only did not record it)."""
    if any(stored.get(k) != fingerprint.get(k) for k in MACHINE_KEYS):
        return False
    if (stored.get("cores") or {}).get("physical") != (fingerprint.get("cores") or {}).get("physical"):
        return False
    recorded = (fingerprint.get("frameworks") or {}).get(framework)
    return version is None or recorded is None or recorded == version


def peak_lookup(store: Store, fingerprint: dict, device: str, threads: int) -> dict[str, float]:
    """dtype -> FLOP/s: the latest measured matmul peak of each dtype for this machine, device and thread count.

    Thread counts must match on the CPU only; an accelerator's peak does not depend on the host threads. {} if none."""
    rows = store.peaks(device=device, threads=threads if _is_cpu(device) else None, kind="matmul", measured=True)
    found: dict[str, float] = {}
    for row in rows:  # newest first
        if row.dtype not in found and same_machine(row.fingerprint, fingerprint, row.framework, row.framework_version):
            found[row.dtype] = row.value
    return found


def dispatch_lookup(store: Store, fingerprint: dict, device: str, threads: int) -> float | None:
    """Seconds to dispatch one tiny operator (`dlperf peak`'s dispatch figure), the latest for this machine, device
    and (on the CPU) thread count, or None."""
    return _latest(store, fingerprint, device, threads, "dispatch")


def bandwidth_lookup(store: Store, fingerprint: dict, device: str, threads: int) -> float | None:
    """Bytes/s of memory bandwidth (`dlperf peak`'s STREAM triad), the latest for this machine, device and (on the
    CPU) thread count, or None."""
    return _latest(store, fingerprint, device, threads, "bandwidth")


def _latest(store: Store, fingerprint: dict, device: str, threads: int, kind: str) -> float | None:
    rows = store.peaks(device=device, threads=threads if _is_cpu(device) else None, kind=kind, measured=True)
    found = (r.value for r in rows if same_machine(r.fingerprint, fingerprint, r.framework, r.framework_version))
    return next(found, None)


def attach_utilization(store: Store, fingerprint: dict, cells: list[CellRecord]) -> bool:
    """Set `utilization` on every cell, against the peaks measured on the run's machine; whether any peak was found
    (the views then say how to measure them when none was)."""
    found = False
    cache: dict[tuple[str, int], dict[str, float]] = {}
    for cell in cells:
        where = (cell.device, cell.threads)
        if where not in cache:
            cache[where] = peak_lookup(store, fingerprint, *where)
        found |= bool(cache[where])
        cell.utilization = utilization(cell.flops_by_dtype, cell.median_s, cache[where]) if cell.ok else None
    return found
