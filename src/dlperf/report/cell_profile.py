"""What `dlperf profile` says of each cell (`CellProfile`), computed once from its stored profile: the shares of its
timed step, the verdict and the modes to try (`report/profile.py`), each category's achieved FLOP/s and bytes/s
against the measured peaks (`Achieved`: the roofline position the profile gives), the dispatch floor, the profiler's
overhead, the trace and the notes; its text (`CellProfile.lines`) and its JSON (`CellProfile.to_json`: `profile
--format json` and `dlperf export`'s `profile` column) are both read from these figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dlperf.measure.stats import few
from dlperf.measure.units import plural
from dlperf.report.format import figure, seconds
from dlperf.report.profile import (
    ABOVE_PEAK,
    Verdict,
    against_run,
    dispatch_cost,
    fit_of,
    floor_count,
    floor_words,
    peak_of,
    share_text,
    shares,
    timed_categories,
    timed_floor,
    verdict,
)
from dlperf.vocab import Framework

if TYPE_CHECKING:
    from dlperf.protocol import Profiled
    from dlperf.store import Store
    from dlperf.store.records import CellRecord, ProfileRecord, RunRecord

# the warnings runner/collect.py stores on a cell timed while others used the machine: the profile child ran just after,
# on the same busy machine, and its shares moved with the load (tiny-resnet-56 fp32, others 54-66%: compute-bound,
# matrix products 86% and 76%, in two runs; launch-bound, host 39%, 40% and 42%, in three)
BUSY_WARNINGS = ("other processes used", "CPU steal")
BUSY_NOTE = "on a busy machine the shares and the verdict vary from run to run (host time most): profile on a quiet one"


def searched(framework: str) -> tuple[str, ...]:
    """Who searches the modes of a framework's cell: `dlperf optimize` measures PyTorch (its spec's framework) only, so
    a tensorflow cell told to try --modes compile is not told that optimize would."""
    return ("dlperf optimize tries each",) if framework == Framework.TORCH else ()


@dataclass(frozen=True)
class Achieved:
    """One category's place on the roofline: its FLOPs and bytes over its seconds of the timed step, and those rates
    as shares of the measured peaks (None where a figure is missing)."""

    category: str
    flops_per_s: float | None
    bytes_per_s: float | None
    of_peak: float | None  # FLOP/s over the matmul peak of the mode's dtype
    of_bandwidth: float | None  # bytes/s over the memory bandwidth
    peak_dtype: str = "fp32"  # whose matmul peak `of_peak` is of (`profile.peak_of`)

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte: below the machine's ridge (peak / bandwidth) the category cannot be bound by arithmetic."""
        return self.flops_per_s / self.bytes_per_s if self.flops_per_s and self.bytes_per_s else None


def achieved(profile: Profiled, overhead: float | None = None, peaks: Mapping[str, float] | None = None,
             bandwidth: float | None = None, mode: str = "fp32") -> list[Achieved]:  # fmt: skip
    """Per category with a FLOP or byte count, its achieved rates in the timed step (`timed_categories`) against
    `dlperf peak`'s figures: the roofline position the profile gives. Largest FLOP/s first."""
    seconds = timed_categories(profile, overhead)[0]
    dtype, peak = peak_of(peaks, mode)
    found = []
    for category in {**(profile.flops or {}), **(profile.bytes or {})}:
        s = seconds.get(category)
        if not s:
            continue
        flops, nbytes = (profile.flops or {}).get(category), (profile.bytes or {}).get(category)
        rate, moved = flops / s if flops else None, nbytes / s if nbytes else None
        found.append(Achieved(
            category, rate, moved, rate / peak if rate and peak else None,
            moved / bandwidth if moved and bandwidth else None, dtype,
        ))  # fmt: skip
    return sorted(found, key=lambda a: -(a.flops_per_s or 0.0))


def achieved_text(rows: list[Achieved], mode: str = "fp32") -> str | None:
    """One line for `dlperf profile`: each category's FLOP/s and bytes/s, with their shares of the peaks."""
    parts = []
    for a in rows:
        bits = []
        if a.flops_per_s:
            above = f": {ABOVE_PEAK}" if a.of_peak is not None and a.of_peak > 1 else ""
            of = f" ({100 * a.of_peak:.0f}% of the {a.peak_dtype} peak{above})" if a.of_peak is not None else ""
            bits.append(f"{figure(a.flops_per_s / 1e9)} GFLOP/s{of}")
        if a.bytes_per_s:  # STREAM's arrays fit in no cache: above its bandwidth, a cache's, or the times are off
            cached = ": from caches, or the profile's times are off" if a.of_bandwidth and a.of_bandwidth > 1 else ""
            of = f" ({100 * a.of_bandwidth:.0f}% of the bandwidth{cached})" if a.of_bandwidth is not None else ""
            bits.append(f"{figure(a.bytes_per_s / 1e9)} GB/s{of}")
        if a.intensity is not None:
            bits.append(f"{figure(a.intensity)} FLOP/byte")
        parts.append(f"{a.category} {', '.join(bits)}")
    return "achieved: " + "; ".join(parts) if parts else None


@dataclass(frozen=True)
class CellProfile:
    """What `dlperf profile` says of one cell (`cell_profile`), computed once: its text (`lines`) and its JSON
    (`to_json`, `profile --format json` and `dlperf export`'s `profile` column) are both read from these figures."""

    cell: CellRecord
    profile: ProfileRecord | None
    categories: dict[str, float]  # category -> seconds of the timed step (`timed_categories`)
    step_s: float | None  # the timed step they are of
    shares: dict[str, float]  # category -> its share of that step (`shares`)
    verdict: Verdict | None
    achieved: tuple[Achieved, ...]
    floor: tuple[float, float | None] | None  # the dispatch floor: seconds, share of the timed step
    launch_cost_s: float | None  # the cost of dispatching one operator the floor counts at (`dispatch_cost`)
    notes: tuple[str, ...]  # the profile's own notes, and the busy machine's
    cost_from: str | None = None  # who measured that cost: "dlperf peak", or "the profiled process"

    @property
    def why_not(self) -> str | None:
        """Why the cell has no profile to show, or None where it has one."""
        cell, profile = self.cell, self.profile
        if profile is None:
            if cell.ok:  # measured, and no profile row: the run stopped before it, or profiled nothing
                return "measured, but its run stored no profile of it"
            return cell.error or "the cell was not measured"
        return None if profile.ok else profile.error

    def lines(self) -> list[str]:
        """The cell's lines, as `dlperf profile` prints them."""
        cell, profile = self.cell, self.profile
        timed = f"{seconds(cell.median_s)} per step" if cell.median_s and cell.ok else cell.status.value
        lines = [f"{cell.cell.label}: {timed}"]
        if profile is None or not profile.ok:
            status = "not profiled" if profile is None else f"profile {profile.status.value}"
            return [*lines, f"  {status}: {self.why_not}"]
        parts = sorted(self.shares.items(), key=lambda kv: -kv[1])
        lines.append("  where the timed step goes: " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in parts if v >= 0.005))
        if (v := self.verdict) is not None:
            rests = f" (rests on {plural(cell.n, 'timed step')})" if few(cell.n) else ""
            lines.append(f"  verdict: {v.label}: {v.figure}{rests}")
            unmeasured = [m for m in v.modes if m not in dict(v.measured)]
            where = f" ({'; '.join(('with dlperf run or profile', *searched(cell.framework)))})" if unmeasured else ""
            modes = "; ".join(v.tries("--modes ")) + where  # the hint after the modes it is for, not after the advice
            tries = [*([modes] if v.modes else []), *([v.advice] if v.advice else [])]
            none = "no mode addresses it on this device"
            none = "none of the modes that address it (left out below)" if v.left_out else none
            lines.append(f"  try: {'; '.join(tries) if tries else none}")
            if v.left_out:
                lines.append(f"  left out: {'; '.join(f'{m}: {why}' for m, why in v.left_out)}")
        if line := achieved_text(list(self.achieved), cell.mode):
            lines.append(f"  {line}")
        floor = floor_words(self.floor, profile.figures, self.launch_cost_s)
        if floor and not (v is not None and floor in v.figure):  # the verdict's own figure says it already
            lines.append(f"  {floor}")
        lines += [f"  {line}" for line in (top_ops_text(profile.figures), modules_text(profile.figures)) if line]
        if profile.overhead is not None:
            taken = " (taken out of host time above)" if profile.overhead > 1 else ""
            taken = " (faster: each category above scaled up to the timed step)" if profile.overhead < 1 else taken
            lines.append(f"  profiler overhead: the profiled step took {profile.overhead:.2f}x the timed median{taken}")
        lines.append(f"  trace: {profile.figures.trace or 'none'}")
        return lines + [f"  note: {note}" for note in self.notes]

    def to_json(self) -> dict:
        """The cell's figures as JSON: the same ones `lines` says, each category's seconds and share unrounded."""
        cell, profile = self.cell, self.profile
        said = {"key": cell.key, "label": cell.cell.label, "status": cell.status.value, "median_s": cell.median_s,
                "n": cell.n, "profile_status": profile and profile.status.value, "error": self.why_not}  # fmt: skip
        if profile is None or not profile.ok:
            return said
        figures, v = profile.figures, self.verdict
        count, counted = floor_count(figures)
        return said | {
            "step_s": self.step_s, "profiled_step_s": figures.step_s, "profiled_steps": figures.steps,
            "categories": {k: {"seconds": s, "share": self.shares.get(k)}
                           for k, s in sorted(self.categories.items(), key=lambda kv: -kv[1])},
            "verdict": v and {**v.to_json(), "label": v.label, "advice": v.advice or None,
                              "left_out": dict(v.left_out), "measured": dict(v.measured),
                              "rests_on_steps": cell.n if few(cell.n) else None},
            "achieved": [{"category": a.category, "flops_per_s": a.flops_per_s, "bytes_per_s": a.bytes_per_s,
                          "of_peak": a.of_peak, "of_bandwidth": a.of_bandwidth, "flops_per_byte": a.intensity}
                         for a in self.achieved],
            "dispatch_floor": self.floor and {"seconds": self.floor[0], "share": self.floor[1], "count": count,
                                              "counts": counted, "cost_s": self.launch_cost_s,
                                              "cost_from": self.cost_from},
            "ops_per_step": figures.ops_per_step, "leaf_ops_per_step": figures.leaf_ops_per_step,
            "kernels_per_step": figures.kernels_per_step, "profiler_overhead": profile.overhead,
            "trace": figures.trace, "notes": list(self.notes), "top_ops": figures.top_ops, "modules": figures.modules,
        }  # fmt: skip


SHOWN = 5  # the operators and modules a cell's lines name, the most time first (JSON: every one the profile kept)


def top_ops_text(figures: Profiled) -> str | None:
    """ "top operators, self time a step (of the profiled step): aten::sort 143 ms (28%, 3 calls), ...": what the
    categories are made of, by name (a step 87% `other` named no operator, though the profile kept them)."""
    ops = sorted(figures.top_ops, key=lambda op: -(op.get("self_s") or 0.0))[:SHOWN]
    if not ops or not figures.step_s:
        return None
    calls = [f", {plural(round(op['calls']), 'call')}" if (op.get("calls") or 0) >= 1 else "" for op in ops]
    each = [f"{op['name']} {seconds(op['self_s'])} ({share_text(op['self_s'] / figures.step_s)}{n})"
            for op, n in zip(ops, calls, strict=True)]  # fmt: skip
    return "top operators, self time a step (share of the profiled step): " + ", ".join(each)


def modules_text(figures: Profiled) -> str | None:
    """ "modules, forward + backward a step: fc1 2.90 ms + 2.20 ms (45%), ...": the model's top-level modules (the
    user's own names: a model's own code named nowhere in the profile's lines)."""
    spans = [(m["name"], m.get("forward_s") or 0.0, m.get("backward_s") or 0.0) for m in figures.modules]
    spans = sorted((s for s in spans if s[1] + s[2] > 0), key=lambda s: -(s[1] + s[2]))[:SHOWN]
    if not spans or not figures.step_s:
        return None
    step = figures.step_s
    each = [f"{name} {seconds(fwd) if fwd else 0} + {seconds(bwd) if bwd else 0} ({share_text((fwd + bwd) / step)})"
            for name, fwd, bwd in spans]  # fmt: skip
    return "modules, forward + backward a step (share of the profiled step): " + ", ".join(each)


def cell_profile(cell: CellRecord, profile: ProfileRecord | None, peaks: Mapping[str, float],
                 launch_cost_s: float | None = None, bandwidth: float | None = None, env: dict | None = None,
                 cells: Sequence[CellRecord] = ()) -> CellProfile:  # fmt: skip
    """What `dlperf profile` says of one cell: the shares of its timed step, the verdict and the modes to try (those
    its run's `cells` measured slower left out: `against_run`), each category's achieved FLOP/s and bytes/s against
    the measured peaks and bandwidth, the dispatch floor (with `dlperf peak`'s dispatch cost for the cell's machine),
    the profiler's overhead, the trace and the notes."""
    if profile is None or not profile.ok:
        return CellProfile(cell, profile, {}, None, {}, None, (), None, launch_cost_s, ())
    figures, overhead = profile.figures, profile.overhead
    cost_from = "dlperf peak" if launch_cost_s else "the profiled process" if figures.dispatch_s else None
    launch_cost_s = dispatch_cost(figures, launch_cost_s)
    categories, step = timed_categories(figures, overhead)
    v = verdict(figures, peaks, device=cell.device, mode=cell.mode, overhead=overhead, launch_cost_s=launch_cost_s,
                fit=fit_of(cell, peaks, env), framework=cell.framework)  # fmt: skip
    busy = [f"{w}; {BUSY_NOTE}" for w in cell.warnings if w.startswith(BUSY_WARNINGS)]
    return CellProfile(
        cell, profile, categories, step, shares(figures, overhead), v and against_run(v, cell, cells),
        tuple(achieved(figures, overhead, peaks, bandwidth, cell.mode)), timed_floor(figures, launch_cost_s, overhead),
        launch_cost_s, (*figures.notes, *busy), cost_from,
    )  # fmt: skip


def describe(cell: CellRecord, profile: ProfileRecord | None, peaks: Mapping[str, float],
             launch_cost_s: float | None = None, bandwidth: float | None = None, env: dict | None = None,
             cells: Sequence[CellRecord] = ()) -> list[str]:  # fmt: skip
    """What `dlperf profile` prints for one cell (`CellProfile.lines`)."""
    return cell_profile(cell, profile, peaks, launch_cost_s, bandwidth, env, cells).lines()


def run_profiles(store: Store, run: RunRecord, cells: list[CellRecord] | None = None
                 ) -> tuple[list[CellProfile], list[str]]:  # fmt: skip
    """Each cell of a run (`cells`, as read already; None: read here) as `dlperf profile` says it, against the peaks,
    dispatch cost and bandwidth measured on the run's machine, and the notes of the peaks measured on a busy machine
    that its cells are held against."""
    from dlperf.report.utilization import bandwidth_lookup, busy_notes, dispatch_lookup, peak_lookup

    profiles, cells = store.profiles(run.id), store.cells(run.id) if cells is None else cells
    said, busy = [], {}
    for cell in cells:
        peaks = peak_lookup(store, run.fingerprint, cell.device, cell.threads)
        cost = dispatch_lookup(store, run.fingerprint, cell.device, cell.threads, cell.framework)
        bandwidth = bandwidth_lookup(store, run.fingerprint, cell.device, cell.threads)
        said.append(cell_profile(cell, profiles.get(cell.key), peaks, cost, bandwidth, run.env, cells))
        busy.update(dict.fromkeys(busy_notes(peaks, cell.column, cell.mode)))  # its own dtypes' peaks only
    return said, list(busy)
