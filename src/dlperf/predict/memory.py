"""A training step's peak GPU memory predicted: `dlperf predict --memory`, and `predict --cost`'s memory check.

The probe child traces one steady step on fake tensors (`frameworks/torch/memcount.py`): the live tensor bytes at
the step's peak, split into parameters (and buffers), gradients alive then, optimizer state, the batch, and
activations (the rest). What no tensor holds is added by one stated rule, fitted once on CUDA allocator peaks measured
on an H100 (`benchmarks/memory_fit.py`, which prints the fit and both validations):

    overhead = OVERHEAD_BYTES + OVERHEAD_FRACTION * traced peak

a fixed part (the cuBLAS/cuDNN workspaces the allocator hands out) and a part in proportion (its 512-byte rounding,
block splitting, and the workspaces of larger layers). The peak is `torch.cuda.max_memory_allocated`'s; a GPU fits
the step when it is at most the memory CUDA has on the GPU (`GPU.device_gib`: what CUDA reports, not the size it is sold
by) less `CONTEXT_BYTES` (the CUDA context, outside the allocator): `usable`. A peak measured in a run is set against
the same room with the same rule: a live-tensor peak (a CPU cell's) plus the rule's overhead, a CUDA allocator peak as
it is (`allocator_peak`), so `--memory` and `--cost` say the same of the same peak.

Every part but the fixed ones grows in proportion to the batch, so each (workload, mode) is traced at its batch and at
twice it; the line through the two gives the peak at any batch, and the largest batch that fits on each GPU. Traces
are cached beside the operator counts (`predict/cache.py`: the same key, the counting code's source included), and
so is dlperf's refusal of a mode for a model (the child's `refused`), never a failure of this machine (a crash, a
timeout, out of its memory), which is asked again.
Standard library only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from dlperf.errors import UsageError
from dlperf.predict import MAX_BATCH
from dlperf.predict.gpus import CONTEXT_GIB

GIB = 2**30
OVERHEAD_BYTES = 60 * 2**20  # fitted on 14 CUDA allocator peaks of an H100 (benchmarks/memory_fit.py)
OVERHEAD_FRACTION = 0.025  # ... idem
CONTEXT_BYTES = int(CONTEXT_GIB * GIB)  # an assumption: the CUDA context, outside the allocator's peak
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
DEFAULT_MODES = "fp32,bf16,checkpoint,bf16+checkpoint"
PARTS = ("params", "grads", "optimizer", "data", "activations")


def parse_modes(text: str) -> tuple[str, ...]:
    """`--modes` of `--memory`: a precision (fp32, tf32, bf16, fp16), `checkpoint`, or a precision+checkpoint."""
    found = []
    for item in (m.strip() for m in text.split(",")):
        parts = item.split("+")
        precisions = [p for p in parts if p in PRECISIONS]
        if not item or len(precisions) > 1 or any(p not in (*PRECISIONS, "checkpoint") for p in parts) \
                or len(set(parts)) != len(parts):  # fmt: skip
            raise UsageError(
                f"--modes: {item!r} is not a memory mode (a precision of {', '.join(PRECISIONS)}, checkpoint, or "
                "both joined by +, e.g. bf16+checkpoint)"
            )
        found.append(item)
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class Peak:
    """One (workload, mode, batch) step's traced peak, its parts, and the rule's overhead."""

    workload: str
    mode: str
    batch: int
    params: int
    grads: int
    optimizer: int
    data: int
    activations: int  # the rest at the peak: what forward saved for backward, or the update's temporaries
    in_update: bool = False  # the step peaks in the optimizer's update: `activations` are its temporaries

    @property
    def traced(self) -> int:
        return self.params + self.grads + self.optimizer + self.data + self.activations

    @property
    def overhead(self) -> int:
        return overhead(self.traced)

    @property
    def total(self) -> int:
        return self.traced + self.overhead

    def to_json(self) -> dict:
        return {**{p: getattr(self, p) for p in PARTS}, "traced": self.traced, "overhead": self.overhead,
                "total": self.total, "in_update": self.in_update}  # fmt: skip


def overhead(traced: int) -> int:
    """The rule: what the allocator's peak holds beyond the live tensors."""
    return round(OVERHEAD_BYTES + OVERHEAD_FRACTION * traced)


def usable(gpu) -> int:
    """The bytes a step's allocator peak may reach on `gpu`: what CUDA has on it, less its context."""
    return int(gpu.device_gib * GIB) - CONTEXT_BYTES


# A measured peak's kind (`protocol.MEMORY_KINDS`) -> whether the rule's overhead is added to reach an allocator peak.
# A process's RSS is the interpreter's and the libraries' too, not a step's: it is not set against a GPU.
WITH_OVERHEAD = {"live_tensors": True, "xla_buffers": True, "cuda_allocator": False}


def allocator_peak(measured: int, kind: str | None) -> int | None:
    """A peak measured in a run as the CUDA allocator's peak it stands for (what `usable` is set against): a CUDA
    allocator peak as it is, live tensors (a CPU cell's) with the rule's overhead; None for a kind that is no step's
    tensors (a process's RSS)."""
    if kind not in WITH_OVERHEAD:
        return None
    return measured + overhead(measured) if WITH_OVERHEAD[kind] else measured


@dataclass(frozen=True)
class Line:
    """A (workload, mode)'s traced peak as a function of the batch, through its traces at two batches."""

    at: Peak
    other: Peak

    @property
    def per_sample(self) -> float:
        return (self.other.traced - self.at.traced) / (self.other.batch - self.at.batch)

    def traced(self, batch: int) -> float:
        return self.at.traced + self.per_sample * (batch - self.at.batch)

    def total(self, batch: int) -> float:
        t = self.traced(batch)
        return t + OVERHEAD_BYTES + OVERHEAD_FRACTION * t


@dataclass(frozen=True)
class Verdict:
    gpu: str
    mode: str
    fits: bool
    why: str
    largest: int  # the largest batch that fits


def apart(need: float, have: float) -> tuple[str, str]:
    """Two sizes in GiB to one decimal, or to as many more as tell them apart: a step that does not fit read "needs
    14.1 GiB of 14.1", and at three decimals at most, a batch one sample past the boundary "14.060 GiB of 14.060"."""
    for digits in range(1, 10):
        shown = f"{need / GIB:.{digits}f}", f"{have / GIB:.{digits}f}"
        if shown[0] != shown[1]:
            break
    return shown


def verdict(gpu, line: Line, largest: int) -> Verdict:
    need, have = line.at.total, usable(gpu)
    if need <= have:
        why = f"fits ({need / GIB:.2f} GiB of {have / GIB:.1f} GiB)"
    else:
        why = "does not fit (needs {} GiB of {} GiB)".format(*apart(need, have))
    return Verdict(gpu.name, line.at.mode, need <= have, why, largest)


SEARCH_ROUNDS = 8  # children asked at most per mode; then the largest batch traced to fit is the answer


def largest(workload, lines: dict[str, Line], gpus, timeout: float, timeout_flag: str | None = None) -> dict:
    """Per mode, the largest batch whose traced peak fits each GPU (0: not a batch of 1; MAX_BATCH at most). The
    peak is the largest of the step's moments, each affine in the batch, so it is convex in it: a chord between two
    traced batches lies above it (its crossing is a batch that fits), a line beyond them below it (one that may not).
    Each round traces every mode's and GPU's next guess and the batch after it in one child, until a batch that fits
    is followed by one that does not."""
    known = {m: {line.at.batch: line.at.total, line.other.batch: line.other.total} for m, line in lines.items()}
    return fitting(workload, known, {g.name: usable(g) for g in gpus}, timeout, timeout_flag)


def largest_here(workload, mode: str, known: dict[int, int], timeout: float, timeout_flag: str | None = None) -> int:
    """The largest batch whose predicted peak in `mode` fits the memory this machine has available now (`known`: the
    peaks traced so far, by batch; `fitting`'s search): what `no_room_here` sets a step against."""
    from dlperf.measure.system import memory_available_bytes

    found = fitting(workload, {mode: known}, {"here": memory_available_bytes() or 0}, timeout, timeout_flag)
    return found[mode]["here"]


def fitting(workload, known: dict[str, dict[int, int]], rooms: dict[str, int], timeout: float,
            timeout_flag: str | None = None) -> dict[str, dict[str, int]]:  # fmt: skip
    """`largest`'s search: per mode (`known`: its peaks traced, by batch; more are added) and room (bytes, by name),
    the largest batch traced to fit."""
    from dlperf.predict import count

    found: dict[tuple[str, str], int] = {}
    for _ in range(SEARCH_ROUNDS):
        asks = set()
        for m in known:
            for g, room in rooms.items():
                guess = _guess(known[m], room) if (m, g) not in found else None
                if isinstance(guess, tuple):
                    found[(m, g)] = guess[0]
                elif guess is not None:
                    asks |= {(m, b) for b in (guess, guess + 1) if b <= MAX_BATCH and b not in known[m]}
        if not asks:
            break
        asked = sorted(asks)
        traced = traces([(count.at(workload, b), m, b) for m, b in asked], timeout, timeout_flag)
        for (m, b), t in zip(asked, traced, strict=True):
            if not isinstance(t, str):
                known[m][b] = t.total
        if any(isinstance(t, str) for t in traced):
            break
    return {m: {g: found.get((m, g), _bracket(known[m], room)[0]) for g, room in rooms.items()} for m in known}


def largest_left_out(workload, left_out, timeout: float) -> dict[tuple[str, str], int]:
    """For each (GPU, mode) of `left_out` (rows with `gpu` and `mode`: `predict/cost.py`'s that do not fit), the largest
    batch that fits, predicted (`largest`'s search); a mode that cannot be traced is left out."""
    from dlperf.predict import gpus

    modes = sorted({r.mode for r in left_out})
    if not modes:
        return {}
    chosen = [gpus.lookup(g, "left_out") for g in sorted({r.gpu for r in left_out})]  # a Python caller's, named so
    found = lines([(workload, m) for m in modes], timeout, "--timeout")
    traced = {m: line for m, line in zip(modes, found, strict=True) if not isinstance(line, str)}
    most = largest(workload, traced, chosen, timeout, "--timeout")
    return {(g, m): n for m, by_gpu in most.items() for g, n in by_gpu.items()}


def _bracket(known: dict[int, int], room: int) -> tuple[int, int | None]:
    """The largest batch traced to fit, and the smallest traced not to (None: none yet)."""
    lo = max((b for b, t in known.items() if t <= room), default=0)
    hi = min((b for b, t in known.items() if t > room), default=None)
    return lo, hi


def _guess(known: dict[int, int], room: int) -> int | tuple[int]:
    """The next batch to trace, or (the answer,) once a fitting batch is followed by one that does not."""
    lo, hi = _bracket(known, room)
    if hi == lo + 1 or lo >= MAX_BATCH or hi == 1:
        return (lo,)
    points = sorted(known)
    if len(points) == 1:  # one batch traced (`dlperf advise`'s own, too large here): a line needs a second point
        return 1 if hi is not None else points[0] + 1
    below = [b for b in points if b <= lo] or points[:1]
    above = [b for b in points if hi is not None and b >= hi] or points[-1:]
    a, b = (below[-1], above[0]) if below[-1] != above[0] else (points[-2], points[-1])
    slope = (known[b] - known[a]) / (b - a)
    if slope <= 0:
        return MAX_BATCH if hi is None else hi - 1
    guess = math.floor(a + (room - known[a]) / slope)
    return max(lo + 1, min(guess, MAX_BATCH if hi is None else hi - 1))


def no_room_here(workload, need: int | None, mode: str = "fp32", largest: int | None = None) -> str:
    """Why this machine does not measure `workload`'s step at its batch in `mode`, where its predicted peak (`need`:
    the allocator peak `peaks` predicts) is more than the memory this machine has available now; "" where it fits
    or is not known. `dlperf advise` and `dlperf crossover` check a step so before they measure it: a process that
    could only swap or meet the kernel's out-of-memory killer. `largest`: the largest batch predicted to fit here
    (`largest_here`; 0: not even 1, where `dlperf fit` would try six batches to find none), None where not known."""
    from dlperf.measure.system import memory_available_bytes, memory_total_bytes

    have, total = memory_available_bytes(), memory_total_bytes()
    if not need or not have or need <= have:
        return ""
    of = f" of {total / GIB:.1f} GiB" if total else ""
    fits = FITTING.get(largest) or f"(batch {largest:,} is the largest predicted to fit: dlperf fit measures it)"
    return (f"not measured: the {mode} step at batch {workload.batch} needs about {need / GIB:.1f} GiB (predicted), "
            f"more than the {have / GIB:.1f} GiB{of} this machine has available, so it cannot train here at this batch "
            f"{fits}")  # fmt: skip


FITTING = {
    None: "(dlperf fit finds the largest batch that does)",
    0: "nor at any: batch 1 is predicted to need more too (dlperf predict --memory shows where it goes)",
}


def fit_rule(pairs: list[tuple[int, int]]) -> tuple[int, float]:
    """The rule's (OVERHEAD_BYTES, OVERHEAD_FRACTION) from (traced, measured) peaks: the pair with the least median
    relative error, on a grid of 1 MiB and 0.1% steps (a median: one layer's large workspace does not move it)."""
    best = (math.inf, 0, 0.0)
    for mib in range(0, 513):
        for per_mille in range(0, 201):
            c, f = mib * 2**20, per_mille / 1000
            err = median([abs(t + c + f * t - m) / m for t, m in pairs])
            best = min(best, (err, c, f))
    return best[1], best[2]


def median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return (s[n // 2] + s[(n - 1) // 2]) / 2 if s else math.nan


def lines(requests, timeout: float, timeout_flag: str | None = None) -> list[Line | str]:
    """Each (workload at its batch, mode) traced at its batch and at twice it, in one child, as a `Line`; or why the
    step could not be traced (a checkpoint mode on a model without a trunk of blocks)."""
    batches = [(w.batch, 2 * w.batch) for w, _ in requests]
    found = traces([(w, m, b) for (w, m), bs in zip(requests, batches, strict=True) for b in bs], timeout, timeout_flag)
    out: list[Line | str] = []
    for i, _ in enumerate(requests):
        a, b = found[2 * i], found[2 * i + 1]
        out.append(a if isinstance(a, str) else b if isinstance(b, str) else Line(a, b))
    return out


def peaks(workload, modes, timeout: float, timeout_flag: str | None = None) -> dict[str, int]:
    """The predicted allocator peak per mode at the workload's batch (`predict --cost`, `dlperf advise`); a mode
    that cannot be traced is left out."""
    modes = sorted(modes)
    found = traces([(workload, m, workload.batch) for m in modes], timeout, timeout_flag)
    return {m: p.total for m, p in zip(modes, found, strict=True) if not isinstance(p, str)}


def traces(asked, timeout: float, timeout_flag: str | None = None) -> list[Peak | str]:
    """Each (workload, mode, batch) traced, from the cache where it holds it, the rest asked of one probe child."""
    from dlperf.answers import MemoryAsk, MemoryRequest
    from dlperf.envs import interpreter_for
    from dlperf.errors import MissingDependency
    from dlperf.frameworks.common import capabilities
    from dlperf.predict import cache, count
    from dlperf.runner import probe

    counter = capabilities.op_counter()
    python = interpreter_for(counter)
    if python is None:
        raise MissingDependency("dlperf predict traces memory with PyTorch: pip install torch==2.13.0")
    version = count.torch_version(counter, python) if cache.enabled() else None
    keys = [cache.key(w.to_json(), f"memory {m}", counter, version) for w, m, _ in asked]
    found: list[Peak | str | None] = [_cached(k, w, m, b) for k, (w, m, b) in zip(keys, asked, strict=True)]
    todo = [i for i, f in enumerate(found) if f is None]
    if todo:
        request = MemoryRequest([MemoryAsk(asked[i][0].to_json(), asked[i][1], [asked[i][2]]) for i in todo])
        at = time.time()
        answer = probe.ask(counter, request, python, timeout, timeout_flag=timeout_flag)
        origin = cache.Origin(answer.sources, at)  # the user's files traced: kept with the traces
        for i, t in zip(todo, answer.traces, strict=True):
            w, m, b = asked[i]
            found[i] = t.error or Peak(w.name, m, b, t.params, t.grads, t.optimizer, t.data, t.activations,
                                       bool(t.in_update))  # fmt: skip
            if keys[i] is not None and (not t.error or t.refused):
                cache.write(keys[i], f"b{b}", t.to_json(), origin)
    return found  # type: ignore[return-value]


def _cached(key, workload, mode: str, batch: int) -> Peak | str | None:
    """The trace kept of (workload, mode, batch), or dlperf's refusal of the mode kept (a checkpoint mode on a model
    without a trunk of blocks: asked again, the child would refuse it again); None: asked of a child."""
    from dlperf.answers import MemoryTrace
    from dlperf.predict import cache

    value = cache.read(key, f"b{batch}") if key is not None else None
    try:
        t = MemoryTrace.from_json(value) if isinstance(value, dict) else None
    except (KeyError, TypeError, ValueError):
        return None
    if t is not None and t.batch == batch and isinstance(t.error, str) and t.refused is True:
        return t.error
    if t is None or t.batch != batch or t.error or t.peak is None:
        return None
    return Peak(workload.name, mode, batch, t.params, t.grads, t.optimizer, t.data, t.activations, bool(t.in_update))
