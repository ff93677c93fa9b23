"""Utilization: how close a step gets to what the machine can really do, measured by `dlperf peak`.

    utilization = (sum over dtypes d of FLOPs_d / peak_d) / median step time

the share of the step the model's arithmetic would take if every FLOP ran at the measured matmul peak of its dtype,
for the same device and thread count (a 1-thread cell is held against the 1-thread peak). Measured, not taken from a
datasheet: on one CPU bf16 is several times faster than fp32, on another fp16 runs at a few GFLOP/s.

A `tf32` cell's fp32 FLOPs run on a CUDA GPU's TensorFloat-32 tensor cores, so they are held against the tf32 peak
(`dlperf peak --devices cuda --dtypes tf32`; none stored: no figure), not the fp32 one of the CUDA cores: on an H200
resnet-50's tf32 step read 31% of the fp32 peak, 15.8 TFLOP/s where the TF32 units offer several times the fp32 rate.

A reduced-precision FLOP is held against the faster of its own peak and fp32's: where bf16 has no native kernel, a
framework may compute bf16 work in fp32 (oneDNN's convolutions do), and against the emulated bf16 matmul peak such a
step once showed a utilization of 342%. Above 100% after that, the stored peak is too low for this machine (measured
under load, say), and the views say so.

A peak is the machine's best undisturbed one: each stored figure carries the load it was measured under (other
processes' share of the CPUs, the hypervisor's steal), and one measured while other work held the CPUs is far below
what the machine does (0.018 TFLOP/s of fp32 at 2 threads, once, on a CPU that does ten times that). The lookups take
the best figure measured on a quiet machine, a disturbed one only where no other exists, and `busy_notes` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dlperf.vocab import DeviceKind

if TYPE_CHECKING:
    from dlperf.store import Store
    from dlperf.store.records import CellRecord

# the machine part of envinfo.fingerprint; of its cores only the physical count: the affinity mask and the cgroup limit
# belong to a job (two jobs on one machine may be given different CPUs), and the thread count is matched on its own
MACHINE_KEYS = ("cpu_model", "memory_gib", "hostname", "gpus", "cpu_id")  # cpu_id: compared where both have it
REDUCED = ("bf16", "fp16")
BUSY_SHARE = 0.10  # of the CPUs used by other processes: above it, a peak was measured on a busy machine
BUSY_STEAL = 0.02  # ... or of its CPU time taken by other virtual machines (the cells' own threshold)


class Peaks(dict):
    """dtype -> FLOP/s; `disturbed`: dtype -> what disturbed its peak, for those of which only a peak measured on
    a busy machine exists (used, and said: `busy_notes`); `framework`: dtype -> whose kernels `dlperf peak` timed."""

    def __init__(self, values: dict[str, float] | None = None, disturbed: dict[str, str] | None = None,
                 framework: dict[str, str] | None = None) -> None:  # fmt: skip
        super().__init__(values or {})
        self.disturbed = dict(disturbed or {})
        self.framework = dict(framework or {})


def busy_load(detail: dict) -> tuple[float | None, float | None]:
    """The load recorded with a stored peak that disturbed it: other processes' share of the CPUs and the CPU steal,
    each None where under its threshold."""
    others, steal = detail.get("others_cpu_share") or 0.0, detail.get("steal_fraction") or 0.0
    return (others if others > BUSY_SHARE else None), (steal if steal > BUSY_STEAL else None)


def disturbance(detail: dict) -> str | None:
    """What disturbed a stored peak's measurement, from the load recorded with it; None on a quiet machine."""
    others, steal = busy_load(detail)
    found = [f"other processes used {100 * others:.0f}% of the CPUs"] if others is not None else []
    found += [f"CPU steal {100 * steal:.0f}%"] if steal is not None else []
    return ", ".join(found) or None


def busy_notes(peaks: Peaks | dict, where: str, mode: str | None = None) -> list[str]:
    """One note per dtype whose only peak was measured on a busy machine: the figures held against it read high.
    `mode`: only the dtypes a cell of that mode is held against (fp32, or tf32 for a tf32 cell's products, as
    `held_flops` holds them; and its autocast dtype)."""
    parts = [] if mode is None else mode.split("+")
    used = None if mode is None else {"tf32" if "tf32" in parts else "fp32", *({"bf16", "fp16"} & set(parts))}
    return [f"{where} {dtype}: only a peak measured on a busy machine ({why}) exists: utilization and shares of the "
            "peak held against it read high; run `dlperf peak` on a quiet machine"
            for dtype, why in getattr(peaks, "disturbed", {}).items() if used is None or dtype in used]  # fmt: skip


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
    if any(stored.get(k) != fingerprint.get(k) for k in MACHINE_KEYS if k in stored and k in fingerprint):
        return False
    if (stored.get("cores") or {}).get("physical") != (fingerprint.get("cores") or {}).get("physical"):
        return False
    recorded = (fingerprint.get("frameworks") or {}).get(framework)
    return version is None or recorded is None or recorded == version


def peak_lookup(store: Store, fingerprint: dict, device: str, threads: int) -> Peaks:
    """dtype -> FLOP/s: the best matmul peak of each dtype measured on a quiet machine for this machine, device and
    thread count; a peak measured on a busy one only where no other exists, named in `disturbed`.

    Thread counts must match on the CPU only; an accelerator's peak does not depend on the host threads. {} if none."""
    rows = store.peaks(device=device, threads=threads if _is_cpu(device) else None, kind="matmul", measured=True)
    found = Peaks()
    for dtype in dict.fromkeys(r.dtype for r in rows):
        best = _best([r for r in rows if r.dtype == dtype], fingerprint, max)
        if best is not None:
            found[dtype] = best.value
            found.framework[dtype] = best.framework
            if why := disturbance(best.detail):
                found.disturbed[dtype] = why
    return found


def dispatch_lookup(store: Store, fingerprint: dict, device: str, threads: int, framework: str) -> float | None:
    """Seconds to dispatch one tiny operator (`dlperf peak`'s dispatch figure), the least measured on a quiet machine
    for this machine, device and (on the CPU) thread count, by `framework`'s own dispatch, or None. PyTorch's eager
    dispatch is no cost of a TensorFlow graph's or an XLA program's operators: a TensorFlow LSTM's 5,297 graph ops at
    torch's 8.23 µs read "launch-bound (highly)", the same profile compute-bound without the peak."""
    return _figure(store, fingerprint, device, threads, "dispatch", min, framework)


def bandwidth_lookup(store: Store, fingerprint: dict, device: str, threads: int) -> float | None:
    """Bytes/s of memory bandwidth (`dlperf peak`'s STREAM triad), the best measured on a quiet machine for this
    machine, device and (on the CPU) thread count, or None."""
    return _figure(store, fingerprint, device, threads, "bandwidth", max)


def _figure(store: Store, fingerprint: dict, device: str, threads: int, kind: str, better: Callable,
            framework: str | None = None) -> float | None:  # fmt: skip
    """`kind`'s best figure (`_best`), of `framework`'s measuring where given (None: any framework's)."""
    rows = store.peaks(device=device, threads=threads if _is_cpu(device) else None, kind=kind, measured=True)
    best = _best([r for r in rows if framework in (None, r.framework)], fingerprint, better)
    return best.value if best is not None else None


def _best(rows: list, fingerprint: dict, better: Callable):
    """The best row (`better`: max or min of the values) of this machine measured on a quiet machine, else the best
    measured on a busy one; None when the machine has none."""
    mine = [r for r in rows if same_machine(r.fingerprint, fingerprint, r.framework, r.framework_version)]
    quiet = [r for r in mine if disturbance(r.detail) is None]
    return better(quiet or mine, key=lambda r: r.value, default=None)


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
        cell.utilization = cell_utilization(cell, cache[where])
    return found


def cell_utilization(cell: CellRecord, peaks: dict) -> float | None:
    """A cell's `utilization`, its FLOPs held against the peaks of the units its mode runs them on (`held_flops`)."""
    if not cell.ok:
        return None
    return utilization(held_flops(cell.flops_by_dtype, cell.mode, cell.device), cell.median_s, peaks)


def held_flops(flops_by_dtype: dict[str, int] | None, mode: str, device: str) -> dict[str, int] | None:
    """The FLOPs by the peak they are held against: a CUDA `tf32` cell's fp32 FLOPs under "tf32"."""
    if not flops_by_dtype or "tf32" not in mode.split("+") or _is_cpu(device) or "fp32" not in flops_by_dtype:
        return flops_by_dtype
    return {("tf32" if dtype == "fp32" else dtype): flops for dtype, flops in flops_by_dtype.items()}


def cells_busy_notes(store: Store, fingerprint: dict, cells: list[CellRecord]) -> list[str]:
    """`busy_notes` for each (device, threads) of `cells` whose utilization is held against a busy machine's peak:
    of the dtypes their modes are held against only (an fp32 sweep's table named the busy fp16 peak no cell used)."""
    modes: dict[tuple[str, int, str], list[str]] = {}
    for c in cells:
        if c.ok:
            modes.setdefault((c.device, c.threads, c.column), []).append(c.mode)
    notes: dict[str, None] = {}
    for (device, threads, column), used in modes.items():
        peaks = peak_lookup(store, fingerprint, device, threads)
        notes.update(dict.fromkeys(n for mode in used for n in busy_notes(peaks, column, mode)))
    return list(notes)
