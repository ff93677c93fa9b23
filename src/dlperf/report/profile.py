"""What bounds a profiled step, and what to try: the verdict of `dlperf profile` and `table --explain`.

A profile (`protocol.Profiled`, stored as `store.records.ProfileRecord`) says where one step's time goes, by
`vocab.Category`. The verdict reads the shares of the step in this order, as TensorFlow's profiler does
(tensorflow/core/profiler/convert/op_stats_to_input_pipeline_analysis.cc):

- input-bound: waiting for the input pipeline (`data`). Moderately from 5% of the step, highly from 20%
  (TensorFlow's kModerately/kHighlyInfeedBoundThresholdInPercent).
- transfer-bound: host <-> device copies (`copy_h2d` + `copy_d2h`), with the same thresholds: TensorFlow counts
  the host-to-device transfer as part of a step's input time.
- launch-bound: host time not hidden behind device work (`host`, plus `idle`: a device with nothing to run waits
  for the host). Moderately from 3%, highly from 15% (kModerately/kHighlyKernelLaunchBoundThresholdInPercent). On a
  CPU no kernel is launched: `host` is the framework's dispatch and Python overhead between operators, the same
  bound under its CPU name. But on a CPU each operator's own dispatch is inside its self time, and the profiler's
  cost per operator is of the same size, so `host` alone misreads a step of many tiny operators (one of 542
  operators on 16x32 tensors read memory-bound in one profile and launch-bound in another). Where `dlperf peak`
  measured the cost of dispatching one operator here, the dispatch floor (the operators that do work x that cost,
  `dispatch_floor`) counts as well: the larger of the two shares decides. On a GPU launches overlap the device's
  work, and `host` and `idle`, measured on the device's own timeline, are what tell.
- otherwise the device's own work decides between compute and memory: the matrix products and convolutions
  (`matmul`) against the work that moves more bytes than it computes (`elementwise`, `normalization`, `pooling`,
  `copy`, `loss`: a softmax and a reduction over the logits, `optimizer`: the update is element-wise over every
  parameter). The larger side wins. When `dlperf peak`
  measured the matmul peak for this machine, device, threads and the mode's dtype, the matmul's achieved FLOP/s
  are held against it too (`report/utilization.py` matches the peaks): matrix products below 10% of the peak are
  too small to be bound by arithmetic (below the roofline's ridge), so a step whose matrix products run that far
  below the peak is memory-bound. Its level is highly when its side takes half the step or more.

The shares are of the *timed* step where the cell has a timed median (a profiled step that ran faster is scaled up to
it, every category alike): profiling makes a step slower (on a CPU
often 1.3-1.6x), and that extra time is the profiler recording each operator on the host, between the operators'
own self times, so it lands in `host`. Left there it would call launch-bound a step that is not: `timed_categories`
takes the profiled step's extra time out of `host` first, and scales the rest down only if `host` cannot hold all of
it, so the categories sum to the timed median. The stored categories stay as the profiler measured them. On a GPU
the profiler can stretch the device's own work as well: where the kernels' busy time alone is as long as the timed
step or longer, the extra time is not the host's to give back, and the profiled shares stand as measured (the H200
check: resnet-56 b128 profiled at 62 ms with 49% host gaps and 32 ms of kernels against a timed 19 ms; taken out of
`host`, the gaps vanished and the step read compute-bound, though CUDA graphs ran it 1.8x faster).

A highly bound of the first three wins at once; then a highly compute- or memory-bound step; then the first
moderately bound of the three; then the device's side, moderately. A profile that could not be taken has no verdict.

The dispatch floor (`dispatch_floor`): the operators a step dispatches that each do work (on a GPU the kernels it
launches) times the cost of dispatching one tiny operator that `dlperf peak` measured on this machine: the step
could not be shorter while it issues that many operators one by one. A launch-bound verdict cites it.

What `dlperf profile` says of each cell, from these figures (its text and JSON): `report/cell_profile.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from dlperf.frameworks.common import capabilities
from dlperf.modes import ROWS, Fit, Mode, advisable, mode_components, with_option
from dlperf.report.charts import Chart, Point, Series, doubted, marked, marks_of, series_label, tip, trains, varying
from dlperf.report.data import loading_remedies
from dlperf.report.fastest import faster
from dlperf.report.format import seconds
from dlperf.vocab import Bound, Category, DeviceKind, Framework

if TYPE_CHECKING:
    from dlperf.protocol import Profiled
    from dlperf.store import Store
    from dlperf.store.records import CellRecord, ProfileRecord

MODERATELY, HIGHLY = "moderately", "highly"
INPUT_THRESHOLDS = (0.05, 0.20)  # TensorFlow: kModerately/kHighlyInfeedBoundThresholdInPercent
TRANSFER_THRESHOLDS = INPUT_THRESHOLDS  # TensorFlow counts host-to-device transfers as input time
LAUNCH_THRESHOLDS = (0.03, 0.15)  # TensorFlow: kModerately/kHighlyKernelLaunchBoundThresholdInPercent
DEVICE_HIGHLY = 0.5  # compute or memory: its side takes half the step or more
LOW_PEAK_SHARE = 0.10  # matrix products below this share of the measured peak are not bound by arithmetic

MEMORY_KINDS = (
    Category.ELEMENTWISE,
    Category.NORMALIZATION,
    Category.POOLING,
    Category.COPY,
    Category.LOSS,
    Category.OPTIMIZER,
)

# the modes that address each bound, in the order to try them; those that do not run on the device are left out, and
# those that do not apply to the model or have no fast path here (`modes.advisable`) are left out with the reason
REMEDIES: dict[Bound, tuple[Mode, ...]] = {
    Bound.LAUNCH: (Mode.CUDA_GRAPHS, Mode.COMPILE),
    Bound.MEMORY: (Mode.BF16, Mode.CHANNELS_LAST, Mode.FUSED),
    Bound.COMPUTE: (Mode.BF16, Mode.CHANNELS_LAST, Mode.TF32),  # channels_last: faster convolution kernels (NHWC)
    Bound.TRANSFER: (),  # pinned memory and non_blocking copies: a later issue's modes
    Bound.INPUT: (),  # more loader workers: a later issue's modes
}
# the update's share of the step from which the optimizer's implementations (fused, foreach) are advised first, whatever
# bounds the step: compile compiles the model, not the update, whose per-parameter loop stays eager (a 40-layer MLP
# under Adam: optimizer 65% of the step, launch-bound, told to try compile 1.77x where fused measured 2.65x)
OPTIMIZER_SHARE = 0.25
UPDATE_MODES = (Mode.FUSED, Mode.FOREACH)
ADVICE = {
    Bound.TRANSFER: "pinned host memory and non_blocking copies",
    Bound.INPUT: "more data-loader workers",  # a loader cell's own: `input_advice`
}


@dataclass(frozen=True)
class Verdict:
    bound: Bound
    level: str  # moderately | highly
    figure: str  # the figure that supports it: "host/dispatch 62% of the step, 4100 ops per step"
    modes: tuple[str, ...]  # the modes that address the bound on this device, best first
    advice: str = ""  # what addresses it that is not a mode yet
    left_out: tuple[tuple[str, str], ...] = ()  # (mode, why) of those that address it but cannot pay off here
    measured: tuple[tuple[str, str], ...] = ()  # (mode, what) of `modes` the cell's own run measured faster

    @property
    def label(self) -> str:
        return f"{self.bound.value}-bound ({self.level})"

    def tries(self, prefix: str = "") -> list[str]:
        """The modes to try, each named after `prefix` ("--modes "), one its run measured with what it measured."""
        measured = dict(self.measured)
        said = {m: f" (measured in this run: {measured[m]})" for m in measured}
        return [f"{prefix}{m}{said.get(m, '')}" for m in self.modes]

    def to_json(self) -> dict:
        return {"bound": self.bound.value, "level": self.level, "figure": self.figure, "modes": list(self.modes)}


def dispatch_cost(profile: Profiled, measured_s: float | None) -> float | None:
    """The cost of dispatching one operator the floor counts at: `dlperf peak`'s for the cell's machine and threads
    (`measured_s`), else the one the profiled process measured after its profile. Without either, the profiler's
    own cost per operator hid a tiny step's bound: a 56 µs step of Linear(16, 4), profiled 4-17x slower, read
    launch-, compute- or memory-bound from run to run."""
    return measured_s or profile.dispatch_s


def dispatch_floor(ops_per_step: int, cost_s: float, step_s: float | None = None) -> tuple[float, float | None]:
    """(seconds, share of `step_s`) of a step that issues `ops_per_step` operators (or kernels) at `cost_s` each:
    the time dispatching alone takes. Plain arithmetic, so any launch cost can be put in (a GPU's, to predict)."""
    seconds = ops_per_step * cost_s
    return seconds, (seconds / step_s if step_s else None)


def floor_count(profile: Profiled) -> tuple[int | None, str]:
    """What the floor counts, and its name: the kernels launched on a GPU; on a CPU the operators that do work
    themselves (`leaf_ops_per_step`: "leaf ops", told from the figure's count of every operator, which includes
    those that only call others), or every operator where a profiler does not tell them apart."""
    if profile.kernels_per_step is not None:
        return profile.kernels_per_step, "kernels"
    if profile.leaf_ops_per_step is not None:
        return profile.leaf_ops_per_step, "leaf ops"
    return profile.ops_per_step, "ops"


def timed_floor(profile: Profiled, cost_s: float | None, overhead: float | None
           ) -> tuple[float, float | None] | None:  # fmt: skip
    """The dispatch floor of the timed step (seconds, share), or None without a count or a cost."""
    count = floor_count(profile)[0]
    if count is None or not cost_s:
        return None
    return dispatch_floor(count, cost_s, timed_categories(profile, overhead)[1])


def _floor_share(profile: Profiled, cost_s: float | None, overhead: float | None) -> float | None:
    """The dispatch floor's share of the timed step, or None without a count, a cost or a step time."""
    floor = timed_floor(profile, cost_s, overhead)
    return floor[1] if floor else None


def floor_text(profile: Profiled, cost_s: float | None, overhead: float | None) -> str | None:
    """ "dispatch floor 2.10 ms (35% of the step): 1000 ops x 2.10 µs", or None without a count or a cost."""
    return floor_words(timed_floor(profile, cost_s, overhead), profile, cost_s)


def floor_words(floor: tuple[float, float | None] | None, profile: Profiled, cost_s: float | None) -> str | None:
    """`floor_text` of a floor `timed_floor` found."""
    if floor is None:
        return None
    (floor_s, share), (count, name) = floor, floor_count(profile)
    part = share_text(share or 0.0)
    of_step = f" ({part} of the step)" if share is not None else ""
    return f"dispatch floor {seconds(floor_s)}{of_step}: {count} {name} x {seconds(cost_s)}"


def share_text(share: float) -> str:
    """A share of a step in whole percent, "under 1%" below half a percent (not "0%" of it)."""
    return "under 1%" if share < 0.005 else f"{100 * share:.0f}%"


def timed_categories(profile: Profiled, overhead: float | None = None) -> tuple[dict[str, float], float | None]:
    """Category -> seconds of the timed step, and that step's time: the profiled categories with the profiler's own
    time taken out (module docstring). `overhead`: the profiled step / the cell's timed median (`ProfileRecord`);
    without it (no timed median) or when profiling cost nothing, the profiled figures as they are. A profiled step
    faster than the timed median (the timed steps slowed by a busy machine, say) is scaled up to it, every category
    alike: its shares were printed "of the step" beside the timed median (a floor of 43.6 ms "21% of the step" of
    0.301 s, 14%), and the plot drew them as "% of the timed step (0.549 s)" where they summed to 0.384 s."""
    categories, step = dict(profile.categories), profile.step_s
    if not step or not overhead or overhead == 1:
        return categories, step
    timed = step / overhead
    if overhead < 1:
        return {k: v / overhead for k, v in categories.items()}, timed
    if profile.kernels_per_step is not None and _device_work(categories) >= timed:
        return categories, step  # a device's profile whose own work outgrew the timed step (module docstring)
    extra = step - timed
    host = categories.get(Category.HOST, 0.0)
    if Category.HOST in categories:
        categories[Category.HOST] = max(0.0, host - extra)
    rest = sum(categories.values())
    if rest > timed:  # the host remainder could not hold all of the profiler's time: it is in the operators too
        categories = {k: v * timed / rest for k, v in categories.items()}
    return categories, timed


def _device_work(categories: Mapping[str, float]) -> float:
    """A device profile's busy time: every category but the host's gaps and the device's idle ones."""
    return sum(v for k, v in categories.items() if k not in (Category.HOST, Category.IDLE))


def shares(profile: Profiled, overhead: float | None = None) -> dict[str, float]:
    """Category -> its share of the timed step (`timed_categories`); of the categories' sum when the step time is
    missing."""
    categories, step = timed_categories(profile, overhead)
    total = step or sum(categories.values())
    return {k: v / total for k, v in categories.items()} if total and total > 0 else {}


def level(share: float, thresholds: tuple[float, float]) -> str | None:
    moderately, highly = thresholds
    return HIGHLY if share >= highly else MODERATELY if share >= moderately else None


def verdict(
    profile: Profiled,
    peaks: Mapping[str, float] | None = None,
    *,
    device: str = "cpu",
    mode: str = "fp32",
    overhead: float | None = None,
    launch_cost_s: float | None = None,
    fit: Fit | None = None,
    framework: str | None = None,
) -> Verdict | None:
    """The bound of a profiled step (module docstring), with its figure and the modes to try on `device`. `peaks`:
    dtype -> the matmul FLOP/s `dlperf peak` measured for the cell's machine, device and threads; `overhead`: the
    profiled step / the cell's timed median (`timed_categories`); `launch_cost_s`: `dlperf peak`'s dispatch cost
    there, for the launch figure's floor; `fit`: what the workload and the device allow (`modes.Fit`: without it,
    only the peaks); `framework`: the cell's, whose backend must implement a mode to advise it (None: any mode)."""
    fit = fit or Fit.of(device, {}, dict(peaks or {}))
    launch_cost_s = dispatch_cost(profile, launch_cost_s)
    share = shares(profile, overhead)
    if not share:
        return None
    on_cpu = device.split(":")[0] == DeviceKind.CPU
    launch, launch_what = share.get(Category.HOST, 0.0) + share.get(Category.IDLE, 0.0), "host/dispatch"
    if not on_cpu:
        launch_what = "host and device idle"
    elif (floor := _floor_share(profile, launch_cost_s, overhead)) is not None and floor > launch:
        launch, launch_what = floor, "dispatching operators (the dispatch floor)"
    found = [
        (Bound.INPUT, share.get(Category.DATA, 0.0), INPUT_THRESHOLDS, "waiting for input"),
        (Bound.TRANSFER, share.get(Category.COPY_H2D, 0.0) + share.get(Category.COPY_D2H, 0.0),
         TRANSFER_THRESHOLDS, "host<->device copies"),
        (Bound.LAUNCH, launch, LAUNCH_THRESHOLDS, launch_what),
    ]  # fmt: skip
    flagged = [(bound, s, level(s, t), what) for bound, s, t, what in found if level(s, t)]
    device_bound, device_share, device_figure = _device_side(profile, share, peaks, mode, overhead)
    device_level = HIGHLY if device_share >= DEVICE_HIGHLY else MODERATELY
    chosen = next((f for f in flagged if f[2] == HIGHLY), None)
    if chosen is None and device_level != HIGHLY and flagged:
        chosen = flagged[0]
    update = share.get(Category.OPTIMIZER, 0.0)
    said = f"; the update (optimizer) {100 * update:.0f}% of the step" if update >= OPTIMIZER_SHARE else ""
    said += _unclassed(share)
    if chosen is None:
        return _verdict(device_bound, device_level, device_figure + said, fit, mode, framework, update)
    bound, s, lvl, what = chosen
    figure = _figure(what, s, bound, profile)
    if bound is Bound.LAUNCH and (floor := floor_text(profile, launch_cost_s, overhead)):
        figure += f"; {floor}"
    return _verdict(bound, lvl, figure + said, fit, mode, framework, update)


def _unclassed(share: Mapping[str, float]) -> str:
    """'; operators of no class (other) 87% of the step: ...' where they outweigh both sides the device's verdict
    weighs (a step of sort, nonzero and masked_select read "memory-bound (moderately): ... 11% of the step")."""
    other = share.get(Category.OTHER, 0.0)
    weighed = max(share.get(Category.MATMUL, 0.0), sum(share.get(k, 0.0) for k in MEMORY_KINDS))
    if other < OTHER_SHARE or other <= weighed:
        return ""
    return f"; operators of no class (other) {100 * other:.0f}% of the step: the top operators name them"


OTHER_SHARE = 0.25  # of the step, unclassed operators that a verdict names


def _device_side(profile: Profiled, share: dict[str, float], peaks, mode: str, overhead: float | None
                 ) -> tuple[Bound, float, str]:  # fmt: skip
    """Compute or memory, the share of the step of that side, and the figure."""
    matmul = share.get(Category.MATMUL, 0.0)
    memory = sum(share.get(k, 0.0) for k in MEMORY_KINDS)
    of_peak = _of_peak(profile, peaks, mode, overhead)
    peak_text = f", {100 * of_peak:.0f}% of the measured {peak_of(peaks, mode)[0]} peak" if of_peak is not None else ""
    peak_text += f" ({ABOVE_PEAK})" if of_peak is not None and of_peak > 1 else ""
    if matmul > memory and (of_peak is None or of_peak >= LOW_PEAK_SHARE):
        return Bound.COMPUTE, matmul, f"matrix products {100 * matmul:.0f}% of the step{peak_text}"
    figure = f"element-wise, normalization, pooling, copies, loss and update {100 * memory:.0f}% of the step"
    if matmul > memory:  # matrix products dominate but run far below the peak: not arithmetic-bound
        return Bound.MEMORY, matmul, f"matrix products {100 * matmul:.0f}% of the step{peak_text}"
    return Bound.MEMORY, memory, figure


def _of_peak(profile: Profiled, peaks: Mapping[str, float] | None, mode: str, overhead: float | None) -> float | None:
    """The matrix products' achieved FLOP/s (in the timed step) as a share of the measured peak of the mode's dtype."""
    seconds = timed_categories(profile, overhead)[0].get(Category.MATMUL)
    flops = (profile.flops or {}).get(Category.MATMUL)
    peak = peak_of(peaks, mode)[1]
    if not flops or not seconds or not peak:
        return None
    return flops / seconds / peak


ABOVE_PEAK = "above it, so the profile's times are off"  # a rate over a measured peak


def matmul_dtype(mode: str) -> str:
    """The dtype whose measured matmul peak a mode's matrix products are held against: its half precision, else fp32."""
    return next((m.value for m in mode_components(mode) if m in (Mode.BF16, Mode.FP16)), "fp32")


def peak_of(peaks: Mapping[str, float] | None, mode: str) -> tuple[str, float | None]:
    """The matmul peak a mode's products are held against, and its dtype, as `utilization` holds a cell's FLOPs: the
    mode's half precision's, or fp32's where that was measured faster (its products may run in fp32 kernels: a bf16
    cell read 133% of the bf16 peak in its profile and 15% in the table's utilization); a CUDA `tf32` cell's the tf32
    peak (`utilization.held_flops`). None where the mode's own peak was not measured: a guess reads as a figure."""
    dtype, peaks = matmul_dtype(mode), peaks or {}
    if Mode.TF32 in mode_components(mode):
        return "tf32", peaks.get("tf32")
    own, fp32 = peaks.get(dtype), peaks.get("fp32")
    if dtype != "fp32" and own and fp32 and fp32 > own:
        return "fp32", fp32
    return dtype, own


def _figure(what: str, share: float, bound: Bound, profile: Profiled) -> str:
    figure = f"{what} {100 * share:.0f}% of the step"
    if bound is Bound.LAUNCH:
        counts = [(profile.kernels_per_step, "kernels"), (profile.ops_per_step, "ops")]
        figure += "".join(f", {n} {name} per step" for n, name in counts if n is not None)
    return figure


def _verdict(bound: Bound, lvl: str, figure: str, fit: Fit, mode: str = "fp32", framework: str | None = None,
             update: float = 0.0) -> Verdict:  # fmt: skip
    """The modes that address `bound`, run on the device and are not in the cell's `mode` already, those that may
    pay off there (`modes.advisable`: they apply to the model and have a fast path) apart from those that cannot,
    and those the cell's framework does not implement (a mxnet cell is never told to try --modes bf16). The update
    taking OPTIMIZER_SHARE of the step or more (`update`), the optimizer's implementations first."""
    runs_here = {row.mode for row in ROWS if fit.device in row.devices} - set(mode_components(mode))
    first = UPDATE_MODES if update >= OPTIMIZER_SHARE and not set(UPDATE_MODES) & set(mode_components(mode)) else ()
    remedies = (*first, *REMEDIES[bound])  # neither where the cell's mode has one (they are one group)
    addressing = [m for m in dict.fromkeys(remedies) if m in runs_here]
    implemented = capabilities.of(framework).modes if framework else frozenset(addressing)
    kept, out = advisable([m.value for m in addressing if m in implemented], fit)
    missing = {m.value: not_implemented(framework, implemented) for m in addressing if m not in implemented}
    return Verdict(bound, lvl, figure, tuple(kept), ADVICE.get(bound, ""), tuple({**missing, **out}.items()))


def against_run(v: Verdict, cell: CellRecord, cells: Sequence[CellRecord]) -> Verdict:
    """`v` with each mode to try that the cell's own run measured slower than the cell (its workload, batch,
    framework and column in the cell's mode plus that one, told apart by `fastest.faster`) moved to those left out,
    with both medians: the probe's matrix product, which `Fit` judges a precision by, is not the step (on an AVX-512
    BF16 CPU without AMX it timed bf16 3.2x faster than fp32, and tiny-lstm's bf16 step took 1.2-1.5x fp32's). A mode
    it measured faster stays, with its step and speed-up (`measured`): the advice is then a measurement already; one
    it measured not told apart from the cell stays too, saying so (it read as if never tried). An input-bound
    verdict's advice is the cell's loader's (`input_advice`)."""
    slower, quicker = {}, {}
    for option in v.modes:
        wanted = set(with_option(cell.mode, option))
        other = next((c for c in cells if c.ok and c.median_s and set(mode_components(c.mode)) == wanted
                      and _beside(c, cell)), None)  # fmt: skip
        if other is None or not (cell.ok and cell.median_s):
            continue
        if not trains(other):  # fast because it no longer learns: no mode to advise (the table marks it `!`)
            slower[option] = "measured in this run, but it did not train (its loss not finite, or failing its check)"
        elif faster(other, cell, None):
            slower[option] = (f"measured slower in this run: {seconds(other.median_s)} a step against this cell's "
                              f"{seconds(cell.median_s)} ({other.median_s / cell.median_s:.2f}x)")  # fmt: skip
        elif faster(cell, other, None):
            quicker[option] = f"{seconds(other.median_s)} a step, {cell.median_s / other.median_s:.2f}x faster"
        else:  # measured, neither told apart: still worth a longer try, but not as if it had never been tried
            quicker[option] = (f"{seconds(other.median_s)} a step against this cell's {seconds(cell.median_s)}, not "
                               "told apart")  # fmt: skip
    kept = tuple(m for m in v.modes if m not in slower)
    found = replace(v, modes=kept, left_out=(*v.left_out, *slower.items()), measured=tuple(quicker.items()))
    return faster_elsewhere(fewer_threads(input_advice(found, cell), cell, cells), cell, cells)


def faster_elsewhere(v: Verdict, cell: CellRecord, cells: Sequence[CellRecord]) -> Verdict:
    """`v` with the modes its run measured faster than the cell (told apart) that the verdict does not name, the
    fastest first: a memory-bound cell was told to try fused (the update under 1% of its step) beside a compile cell
    of the same run 3.2x faster, unsaid, compile being advised for launch-bound steps only."""
    if not (cell.ok and cell.median_s):
        return v
    guessed = {m for m, why in v.left_out if why.startswith(GUESSED)}  # a prediction the run may contradict
    named = set(v.modes) | {m for m, _ in v.left_out} - guessed
    found = sorted((c for c in cells if c.ok and c.median_s and trains(c) and _beside(c, cell) and faster(cell, c, None)
                    and not set(mode_components(c.mode)) - set(mode_components(cell.mode)) <= _parts(named)),
                   key=lambda c: c.median_s)  # fmt: skip
    if not found:
        return v
    each = [f"{c.mode} ({seconds(c.median_s)} a step, {cell.median_s / c.median_s:.2f}x faster)" for c in found[:3]]
    said = f"measured faster in this run: --modes {'; '.join(each)}"
    added = [set(mode_components(c.mode)) - set(mode_components(cell.mode)) for c in found]
    contradicted = {m for m in guessed if any(set(m.split("+")) <= parts for parts in added)}  # "no fast path", faster
    left = tuple((m, why) for m, why in v.left_out if m not in contradicted)
    return replace(v, advice="; ".join(a for a in (v.advice, said) if a), left_out=left)


GUESSED = "no fast path"  # a mode left out by the probe's or `dlperf peak`'s matrix product (`modes.left_out`)


def _parts(options: set[str]) -> set[str]:
    """The components of mode options ("bf16+channels_last": bf16, channels_last), as `Mode` values compare equal."""
    return {part for option in options for part in option.split("+")}


def fewer_threads(v: Verdict, cell: CellRecord, cells: Sequence[CellRecord]) -> Verdict:
    """`v` with the advice to take fewer threads where the cell's run measured it faster at fewer (told apart): a
    tiny-resnet-56 at 2 threads, 9x its 1-thread step on a shared machine, read "memory-bound: try channels_last"."""
    if not (cell.ok and cell.median_s and cell.device == "cpu"):
        return v
    fewer = [c for c in cells if c.ok and c.median_s and trains(c) and c.threads < cell.threads
             and _beside_threads(c, cell) and faster(cell, c, None)]  # fmt: skip
    if not fewer:
        return v
    best = min(fewer, key=lambda c: c.median_s)
    said = (f"--threads {best.threads} (measured in this run: {seconds(best.median_s)} a step, "
            f"{cell.median_s / best.median_s:.2f}x faster than at {cell.threads})")  # fmt: skip
    return replace(v, advice="; ".join(a for a in (said, v.advice) if a))


def _beside_threads(other: CellRecord, cell: CellRecord) -> bool:
    """Whether `other` is `cell` at another thread count, in the same run."""
    same = replace(other.cell, threads=cell.threads)
    return (other.run_id, other.batch, same) == (cell.run_id, cell.batch, cell.cell) and other.threads != cell.threads


def input_advice(v: Verdict, cell: CellRecord) -> Verdict:
    """An input-bound loader cell's advice as the input pipeline's view gives it (`report.data.loading_remedies`):
    more workers only where the setting's workers and the step's compute threads leave cores free, else more cores,
    and less work a sample. 'more data-loader workers' was said of w1 beside one compute thread on 2 cores, where
    `dlperf run` measured w1 and w2 slower than w0."""
    if v.bound is not Bound.INPUT or not cell.loader or cell.data is None:
        return v
    return replace(v, advice=loading_remedies(cell))


def _beside(other: CellRecord, cell: CellRecord) -> bool:
    """Whether `other` is `cell` in another mode, in the same run."""
    same = (other.run_id, other.batch, replace(other.cell, mode=cell.mode)) == (cell.run_id, cell.batch, cell.cell)
    return same and other.mode != cell.mode


def not_implemented(framework: str | None, modes: frozenset[Mode]) -> str:
    """Why a mode is not advised to a framework's cell: its backend does not implement it (what its step runs
    instead; the allocator's modes, the process's, every backend has, are left out)."""
    runs = sorted(m.value for m in modes if m not in capabilities.ALLOCATORS)
    if len(runs) == 1:
        return f"the {framework} backend runs {runs[0]} only"
    return f"the {framework} backend does not implement it (its modes: {', '.join(runs)})"


def fit_of(cell: CellRecord, peaks: Mapping[str, float], env: dict | None) -> Fit:
    """What the cell's workload (as planned) and device allow, from the peaks measured there and, for a dtype without
    one, the speed the run's planning probe timed in the cell's framework (`EnvAnswer.precision_speed`). A peak of
    another framework's kernels (`dlperf peak` times PyTorch's) gives way to the cell's framework's own figure: on an
    Intel Xeon without avx512_bf16, PyTorch's bf16 product ran 0.2x fp32's speed and JAX's 0.8x."""
    speeds = ((((env or {}).get("frameworks") or {}).get(cell.framework) or {}).get("precision_speed")) or {}
    probe_speed = speeds.get(cell.device) or speeds.get(cell.device.split(":")[0])
    whose = getattr(peaks, "framework", {})
    kept = {d: v for d, v in peaks.items() if not probe_speed or whose.get(d, cell.framework) == cell.framework}
    prober = "the planning probe" if cell.framework == Framework.TORCH.value else f"{cell.framework}'s planning probe"
    return Fit.of(cell.device, cell.workload_spec or {}, kept, probe_speed, prober)


def verdicts(store: Store, fingerprint: dict, cells: list[CellRecord],
             profiles: Mapping[str, ProfileRecord] | None = None) -> dict[str, Verdict]:  # fmt: skip
    """Cell key -> the verdict of its stored profile, against the peaks measured on the run's machine; a cell
    without a profile, or whose profile could not be taken, has none. The cells may come from several runs (a
    report's): each has its own run's profile, unless `profiles` says which (the report's: the latest of each)."""
    from dlperf.report.utilization import dispatch_lookup, peak_lookup

    profiles = profiles_of(store, cells) if profiles is None else profiles
    envs = {run_id: store.run(run_id).env for run_id in {c.run_id for c in cells if c.key in profiles}}
    found = {}
    for cell in cells:
        profile = profiles.get(cell.key)
        if profile is not None and profile.ok:
            peaks = peak_lookup(store, fingerprint, cell.device, cell.threads)
            cost = dispatch_lookup(store, fingerprint, cell.device, cell.threads, cell.framework)
            if v := verdict(profile.figures, peaks, device=cell.device, mode=cell.mode, overhead=profile.overhead,
                            launch_cost_s=cost, fit=fit_of(cell, peaks, envs[cell.run_id]),
                            framework=cell.framework):  # fmt: skip
                found[cell.key] = against_run(v, cell, cells)
    return found


def profiles_of(store: Store, cells: list[CellRecord]) -> dict[str, ProfileRecord]:
    """Cell key -> the profile its own run took of it."""
    by_run = {run_id: store.profiles(run_id) for run_id in {c.run_id for c in cells}}
    return {c.key: by_run[c.run_id][c.key] for c in cells if c.key in by_run[c.run_id]}


def breakdown(cells: list[CellRecord], profiles: Mapping[str, ProfileRecord], found: Mapping[str, Verdict]
              ) -> Chart | None:  # fmt: skip
    """The report's "where the time goes": one horizontal bar per profiled cell, its segments the categories of the
    timed step in `vocab.Category` order, each bar's verdict beside it (`Chart.labels`). None without a profile.

    Every bar is 100% of its cell's timed step, not its seconds: a run holds steps from microseconds to seconds, and
    on one seconds axis the fast cells' bars would be slivers whose parts no one can read; the question here is what
    share each category takes, and the timed step is in each bar's name and hover text."""
    profiled = [c for c in cells if c.key in profiles and profiles[c.key].ok]
    if not profiled:
        return None
    shown = [k for k in varying(profiled) if k != "workload"] or ["framework", "mode"]
    names, labels = [], {}
    series = {k.value: Series(k.value, []) for k in Category}
    for cell in profiled:
        name = f"{cell.workload} {cell.column} {series_label(cell, shown)} ({seconds(cell.median_s)})"
        names.append(name)
        record = profiles[cell.key]
        if v := found.get(cell.key):
            labels[name] = v.label
        timed = timed_categories(record.figures, record.overhead)[0]
        for category, share in shares(record.figures, record.overhead).items():
            if share > 0 and category in series:
                text = f"{category}: {100 * share:.1f}% of the timed step, {seconds(timed[category])}"
                series[category].points.append(Point(name, 100 * share, tip=tip(cell, text), doubtful=marked(cell)))
    chart = Chart(
        "profile", "stacked", "Where the time goes", "% of the timed step", "",
        [s for s in series.values() if s.points], categories=names, labels=labels,
        caption="each profiled cell's timed step by category (the profiler's own time taken out of host, or a faster "
        "profiled step scaled up to it); beside each bar, what bounds it",
    )  # fmt: skip
    return doubted(chart, marks_of(profiled))  # a busy CPU's shares vary from run to run: '?' beside its bar
