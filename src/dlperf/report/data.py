"""The input pipeline's view (`--data DIR`): per group of cells that differ only in their loader, the synthetic step
beside each loader setting, the step's wait for data, the input-bound verdict, and the recommended setting: the smallest
whose step is not measurably slower than the fastest's, and whether it is enough.

A pure function of stored cells: it never measures, and it recommends only a setting that was measured (an `ok`
cell), never one it guesses would do.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from dlperf import loaders
from dlperf.measure.units import plural
from dlperf.report.charts import Chart, Point, Series, _slug, few_samples, tip
from dlperf.report.fastest import MEDIANS_APART, has_mean_interval, long_run_s, told_apart_long_run
from dlperf.report.format import nbytes, seconds, significant
from dlperf.report.paper import doubts
from dlperf.store.records import CellRecord
from dlperf.vocab import Status

SYNTHETIC_LABEL = "synthetic"  # the row of the group's cell without a loader
HEAD = ("loader", "step", "samples /s", "loader alone", "data wait", "input bound", "w+t / cores")
LEGEND = (
    "step: median seconds per mini-batch with the loader, waiting for data included; samples /s: a long run's, the "
    "batch over the mean step (the median leaves out the steps that wait for a batch); loader "
    "alone: the samples /s of the loader iterated with no step, after its first batch (new epochs' starts in); data "
    "wait: the share of the "
    f"timed steps spent waiting for a batch (input bound from {loaders.INPUT_BOUND_MODERATE:.0%}, highly from "
    f"{loaders.INPUT_BOUND_HIGH:.0%}); "
    "w+t / cores: the loader's workers and the step's compute threads, against the cores they share (> where they "
    "are more than the cores: oversubscribed)"
)
# one batch's host->device copy (`protocol.Loader`'s h2d): the time each kind of copy took
H2D_COPIES = (("pageable_s", "pageable"), ("pinned_s", "pinned"), ("pinned_async_s", "pinned non_blocking"))


@dataclass
class Recommendation:
    setting: str | None  # the smallest measured setting not measurably slower than the fastest; None: none measured
    why: str  # why that one: the fastest, or tied with it; or why none
    enough: str | None = None  # why its loader keeps up with the step (`enough`); None: the step still waits on it
    slower: list[str] = field(default_factory=list)  # settings that wait less for data, but measurably slower steps
    # why no setting was held against the synthetic step's samples/s: its disturbances (`baseline_doubts`)
    doubts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Group:
    """Cells of one workload, framework, mode and column: the synthetic one and one per loader setting."""

    workload: str
    framework: str
    mode: str
    column: str
    synthetic: CellRecord | None
    cells: list[CellRecord]  # the loader cells, smallest setting first
    recommendation: Recommendation
    advice: list[str] = field(default_factory=list)  # where data preparation dominates; pin_memory

    @property
    def title(self) -> str:
        mode = "" if self.mode == "fp32" else f" {self.mode}"
        return f"{self.workload} {self.framework}{mode} {self.column}"

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload, "framework": self.framework, "mode": self.mode, "column": self.column,
            "synthetic": self.synthetic.key if self.synthetic else None, "cells": [c.key for c in self.cells],
            "recommendation": self.recommendation.to_json(), "advice": self.advice,
        }  # fmt: skip


def build(cells: list[CellRecord]) -> list[Group]:
    """The groups that have at least one loader cell, in the cells' order."""
    members: dict[tuple, list[CellRecord]] = {}
    for c in cells:
        members.setdefault((c.workload, c.framework, c.mode, c.column, c.scaling), []).append(c)
    groups = []
    for (workload, framework, mode, column, _), found in members.items():
        loaded = sorted((c for c in found if c.loader), key=lambda c: loaders.setting(c.loader).cost)
        if not loaded:
            continue
        synthetic = next((c for c in found if not c.loader), None)
        recommendation = recommend(synthetic, loaded)
        advice = dominates(synthetic, loaded) + shared_cores(synthetic, recommendation, loaded)
        advice += pin_advice(recommendation, loaded)
        groups.append(Group(workload, framework, mode, column, synthetic, loaded, recommendation, advice))
    return groups


def by_cell(groups: list[Group]) -> dict[str, Group]:
    """Cell key -> its group, the synthetic cell's included."""
    return {c.key: g for g in groups for c in [*([g.synthetic] if g.synthetic else []), *g.cells]}


# ----------------------------------------------------------------------------------------------------------------------
# What is enough


def measured(cell: CellRecord | None) -> bool:
    return cell is not None and cell.ok and bool(cell.median_s)


def throughput(cell: CellRecord | None) -> float | None:
    """A long run's samples per second: the batch over the mean step (`fastest.long_run_s`), the synthetic cell's as
    a loader cell's; None for a cell not measured. Not the median's: most of a loader cell's steps find a batch
    ready, some wait for it, and a long run pays them all (one core, tiny-alexnet-s, w1: 200 samples/s at the
    median, 128 at the mean, where a plain loop over the same data trained 145)."""
    if not measured(cell):
        return None
    if cell.batch:
        return cell.batch / long_run_s(cell)
    return cell.samples_s * cell.median_s / long_run_s(cell) if cell.samples_s else None


SHARED_LOAD = ("other processes", "CPU steal")  # the machine's, not the synthetic step's own: no baseline doubt


def baseline_doubts(synthetic: CellRecord | None) -> list[str]:
    """Why the synthetic step's samples/s are no baseline to hold a loader setting against, a few words each: its own
    unsteadiness (`paper.doubts` less other processes' load and steal, which the loader cells beside it ran under
    too: few samples, a warm-up that did not settle, processes far apart). [] where it is one, or where there is none.
    On 2 busy cores a synthetic step of n=7 whose warm-up did not settle, its mean 1451% above its median, made a w1
    that waited 53% of its step 'enough: 2264% of the synthetic step's samples/s'."""
    if not measured(synthetic):
        return []
    said = [d for d in doubts(synthetic) if not d.startswith(SHARED_LOAD)]
    if few_samples(synthetic) and not any(d.startswith("few samples") for d in said):
        said.append(f"few samples n={synthetic.n}")
    return said


def enough(cell: CellRecord, synthetic: CellRecord | None) -> str | None:
    """Why the setting is enough (`loaders.enough`): the step waits under INPUT_BOUND_MODERATE of its time for data,
    or, waiting under INPUT_BOUND_HIGH, it reaches ENOUGH_OF_SYNTHETIC of the synthetic step's samples/s, where that
    step was not disturbed (`baseline_doubts`). None when neither, or when not measured."""
    if not measured(cell):
        return None
    share = cell.data.wait_share if cell.data else None
    ours, theirs = throughput(cell), None if baseline_doubts(synthetic) else throughput(synthetic)
    if not loaders.enough(share, 1 / ours if ours else None, 1 / theirs if theirs else None):
        return None
    if share is not None and share < loaders.INPUT_BOUND_MODERATE:
        return f"data wait {percent(share)} of the step"
    return f"{percent(ours / theirs)} of the synthetic step's samples/s"


# said where a setting was judged without 95% intervals (`fastest.told_apart_long_run`): tied with another, or none
MEANS_ALONE = f"on mean steps alone, with no 95% intervals: within {MEDIANS_APART:.0%} or the steps' IQR, a tie"
APART_ALONE = (f"told apart on mean steps alone, with no 95% intervals: over {MEDIANS_APART:.0%} and the steps' IQR "
               "faster than the rest")  # fmt: skip


def recommend(synthetic: CellRecord | None, cells: list[CellRecord]) -> Recommendation:
    """Among the measured settings, the smallest (`LoaderSetting.cost`) whose long run is not measurably slower than
    the fastest's (`fastest.told_apart_long_run`: their 95% intervals of the mean step overlap; without intervals,
    mean steps within MEDIANS_APART or the steps' IQR): the median step leaves out the steps that wait for data. A
    setting that waits less for data but whose step is measurably slower is never it (on a CPU its workers took the
    compute threads' cores: following it trains slower), and is named (`slower`), enough or not: w1 waiting 43% of
    a 10.8 ms step against w0's 51% of 7.51 ms went unsaid where neither was enough. Whether the one recommended is
    `enough` says if the loader still holds the step back."""

    timed = sorted((c for c in cells if throughput(c)), key=lambda c: loaders.setting(c.loader).cost)
    if not timed:
        return Recommendation(None, unmeasured(cells))
    fastest = min(timed, key=long_run_s)
    tied = [c for c in timed if c is fastest or not told_apart_long_run(c, fastest)]
    chosen, alone = tied[0], len(timed) > 1 and not all(map(has_mean_interval, timed))
    if len(timed) == 1:
        why = "the only setting measured"
    elif chosen is fastest:
        why = f"the fastest measured, {_per_s(throughput(chosen))} samples/s"
    else:
        why = (f"the smallest of {', '.join(c.loader for c in tied)}, not told apart from the fastest, "
               f"{fastest.loader} at {_per_s(throughput(fastest))} samples/s")  # fmt: skip
        why += "" if alone else ": their 95% intervals of the mean step overlap"
    if alone:
        why += f", {MEANS_ALONE if len(tied) > 1 else APART_ALONE}"
    slower = [c.loader for c in timed if c not in tied and waits_less(c, chosen)]
    return Recommendation(chosen.loader, why, enough(chosen, synthetic), slower, baseline_doubts(synthetic))


NOT_MEASURED = "no loader setting was measured"
ERROR_SAID = 200  # characters of the first failure's error said: one line, the error's head


def unmeasured(cells: list[CellRecord]) -> str:
    """Why no loader setting was measured, in a line: how many failed (timed out included) and the first one's error
    (the smallest setting's), else the first that does not apply here and why. With every setting failed it read 'no
    loader setting was measured' and nothing of why (the cells' notes say it, the pipeline view did not)."""
    failed = [c for c in cells if c.status.is_failure]
    first = (failed or [c for c in cells if c.status == Status.UNSUPPORTED and c.error] or [None])[0]
    if first is None:
        return NOT_MEASURED
    error = " ".join((first.error or "no error said").split()).removeprefix(f"{first.loader}: ")  # named once
    error = error if len(error) <= ERROR_SAID else f"{error[: ERROR_SAID - 3]}..."
    said = {Status.TIMEOUT: " timed out", Status.UNSUPPORTED: " does not apply"}.get(first.status, "")
    verb = "failed or timed out" if any(c.status == Status.TIMEOUT for c in failed) else "failed"
    count = f"{len(failed)} of {len(cells)} {verb}; " if failed else ""
    return f"{NOT_MEASURED}: {count}{first.loader}{said}: {error}"


def waits_less(cell: CellRecord, than: CellRecord) -> bool:
    """Whether `cell`'s step waits a smaller share of it for data than `than`'s (False where either is unknown)."""
    ours, theirs = (c.data.wait_share if c.data else None for c in (cell, than))
    return ours is not None and theirs is not None and ours < theirs


def dominates(synthetic: CellRecord | None, cells: list[CellRecord]) -> list[str]:
    """When even the fastest loader alone gives fewer samples/s than the synthetic step takes, no setting measured can
    feed the step: data preparation dominates. Say so, and what would change it."""
    alone = [c for c in cells if measured(c) and c.data and c.data.alone_samples_per_s]
    target = throughput(synthetic)
    if not alone or not target:
        return []
    best = max(alone, key=lambda c: c.data.alone_samples_per_s)
    if (rate := best.data.alone_samples_per_s) >= target:
        return []
    return [
        f"data preparation dominates: the loader alone gives at best {rate:,.0f} samples/s ({best.loader}), under "
        f"the {target:,.0f} samples/s of the step on synthetic data, so no measured setting can feed the step. What "
        f"would change it: {loading_remedies(best)}"
    ]


# what else would feed the step faster, by the dataset a loader cell records (its `NAME` in frameworks/torch/data.py):
# images decoded a sample at a time (dlperf's image folder); datasets dlperf holds in memory as arrays already, where
# the time goes to each sample's Python transforms; and a user's own Dataset, whose data dlperf does not know: image
# advice (Pillow-SIMD, DALI) was given to a Dataset that parsed CSV lines
DECODED = "smaller or pre-resized images; faster decoding (Pillow-SIMD); decoding on the GPU, such as NVIDIA DALI"
IN_MEMORY = ("its samples are in memory already, so fewer Python operations a sample: the transforms over a whole "
             "batch at once (on the GPU where there is one) rather than in each sample's __getitem__")  # fmt: skip
OWN = ("less work a sample in the Dataset's __getitem__: read, parse or decode the data once ahead (cached in memory, "
       "or pre-processed into arrays or tensors on disk) rather than each time a sample is read")  # fmt: skip
PREPARED = {"ImageNet-style folder": DECODED, **{name: IN_MEMORY for name in ("MNIST", "CIFAR-10", "Penn Treebank")}}


def loading_remedies(cell: CellRecord) -> str:
    """What would feed a loader cell's step faster: more workers or more cores (`more_loading`), then less work a
    sample for its kind of dataset. Said where data preparation dominates, and by `dlperf profile` of an input-bound
    step (`report.profile.against_run`)."""
    d = cell.data
    return f"{more_loading(cell.loader, d.workers, d.threads, d.cores)}; {PREPARED.get(d.dataset, OWN)}"


def more_loading(name: str, workers: int | None, threads: int | None, cores: int | None) -> str:
    """More workers where the setting's workers and the step's compute threads (`threads`, one where not known)
    leave cores free, else more cores: the workers and threads would take turns (`loaders.oversubscribed`). `w0`
    loads in the training process: on one core it read 'more workers (w0 uses 0 of the 1 cores)', where a worker
    could only take turns with it (w1 measured beside it: 1+1 > 1); and w1 beside one compute thread on 2 cores was
    told to try more workers, where w1 and w2 stepped slower than w0."""
    if workers is None or cores is None:
        return "more workers or more cores"
    step = threads or 1
    if workers + step < cores:
        if not workers:
            return f"more workers ({name} loads in the training process, on 1 of the {cores} cores)"
        return (f"more workers ({name}'s {plural(workers, 'worker')} and the step's {plural(step, 'compute thread')} "
                f"leave {cores - workers - step} of the {cores} cores free)")  # fmt: skip
    if workers >= cores:
        return f"more cores ({name} already has a worker per core, {workers} on {cores})"
    if not workers and cores == 1:
        return f"more cores ({name} loads in the training process, on the only core)"
    taken = f"{plural(workers, 'worker')} and the step's" if workers else "training process and its"
    return (f"more cores ({name}'s {taken} {plural(step, 'compute thread')} take the {cores} cores: another worker "
            "would take turns with them)")  # fmt: skip


def shared_cores(synthetic: CellRecord | None, recommendation: Recommendation, cells: list[CellRecord]) -> list[str]:
    """On a CPU, workers load on the cores the step computes on: a step can wait little for data and still run slower
    than on synthetic data, the workers taking the compute threads' time. Without workers the loading is all in the
    wait, and the gap is the step's own. Said of the recommended setting when it is enough yet its step is under
    ENOUGH_OF_SYNTHETIC of the synthetic step's samples/s (one not enough waits for data: its line says so)."""
    cell = next((c for c in cells if c.loader == recommendation.setting), None)
    if recommendation.enough is None or recommendation.doubts:  # a disturbed synthetic step: no baseline to say it by
        return []
    ours, theirs = throughput(cell), throughput(synthetic)
    if cell is None or cell.device != "cpu" or not ours or not theirs or ours >= loaders.ENOUGH_OF_SYNTHETIC * theirs:
        return []
    share = cell.data.wait_share if cell.data else None
    waited = f"waits only {percent(share)} of it for data" if share is not None else "waits little for data"
    head = f"{cell.loader}'s step {waited} yet runs at {percent(ours / theirs)} of the synthetic step's samples/s"
    if not loaders.setting(cell.loader).workers:
        # w0 loads inside the wait: the rest of the gap is not the loader's time
        return [f"{head}: with no workers, loading is all in the wait, so the rest is the step itself (caches the "
                "loading evicts, or the variation between processes: --repeats measures more of them)"]  # fmt: skip
    return [
        f"{head}: on a CPU, the workers load and augment on the cores the step computes on; fewer workers, fewer "
        "compute threads, or lighter preprocessing give them back"
    ]


def h2d_bandwidths(h2d: dict[str, Any] | None) -> dict[str, float]:
    """One batch's host->device copy as bytes/s per kind of copy (pageable, pinned, pinned non_blocking)."""
    size = (h2d or {}).get("bytes")
    if not size:
        return {}
    return {name: size / h2d[key] for key, name in H2D_COPIES if h2d.get(key)}


def pin_advice(recommendation: Recommendation, cells: list[CellRecord]) -> list[str]:
    """On a GPU: pin_memory, when pinned copies ran faster than pageable ones and the recommendation is unpinned."""
    name = recommendation.setting
    if name is None or loaders.setting(name).pin:
        return []
    for c in cells:
        bw = h2d_bandwidths(c.data.h2d if c.data else None)
        if bw.get("pinned") and bw.get("pageable") and bw["pinned"] > bw["pageable"]:
            pinned = dataclasses.replace(loaders.setting(name), pin=True).name
            return [f"pin_memory: pinned copies to the device ran at {rate(bw['pinned'])} against "
                    f"{rate(bw['pageable'])} pageable; try {pinned}"]  # fmt: skip
    return []


# ----------------------------------------------------------------------------------------------------------------------
# Text


def percent(share: float) -> str:
    return f"{100 * share:.1f}%" if share < 0.1 else f"{100 * share:.0f}%"


def rate(bytes_per_s: float) -> str:
    return f"{significant(bytes_per_s / 1e9)} GB/s"


def _per_s(value: float | None) -> str:
    return "-" if not value else f"{value:,.0f}"


def values(cell: CellRecord) -> list[str]:
    """One row: the synthetic cell's or a loader cell's."""
    name = cell.loader or SYNTHETIC_LABEL
    if not measured(cell):
        return [name, cell.status.value, *["-"] * (len(HEAD) - 2)]
    d = cell.data
    if d is None:
        return [name, seconds(cell.median_s), _per_s(throughput(cell)), *["-"] * (len(HEAD) - 3)]
    share = "-" if d.wait_share is None else percent(d.wait_share)
    return [name, seconds(cell.median_s), _per_s(throughput(cell)), _per_s(d.alone_samples_per_s), share,
            d.verdict or "no", cores_text(d)]  # fmt: skip


def cores_text(d) -> str:
    if d.workers is None or d.threads is None:
        return "-"
    # "3+2 > 4": more workers and threads than cores (oversubscribed), kept short so a terminal's column holds it
    return f"{d.workers}+{d.threads} {'>' if d.oversubscribed else '/'} {d.cores if d.cores is not None else '?'}"


def rows(group: Group) -> list[list[str]]:
    return [values(c) for c in ([group.synthetic] if group.synthetic else []) + group.cells]


ENOUGH_RULE = (f"a wait under {loaders.INPUT_BOUND_MODERATE:.0%}, or {loaders.ENOUGH_OF_SYNTHETIC:.0%} of the "
               f"synthetic step's samples/s with a wait under {loaders.INPUT_BOUND_HIGH:.0%}")  # fmt: skip


def recommendation_line(group: Group) -> str:
    r = group.recommendation
    if r.setting is None:
        return f"no recommendation: {r.why}"
    head = f"recommended: {r.setting} ({r.why})"
    slower = "".join(slower_text(group, name) for name in r.slower)
    if r.enough:
        return f"{head}; enough: {r.enough}{slower}"
    cell = next(c for c in group.cells if c.loader == r.setting)
    share, ours, theirs = cell.data.wait_share if cell.data else None, throughput(cell), throughput(group.synthetic)
    said = [f"its step waits {percent(share)} of it for data"] if share is not None else []
    if r.doubts:  # a disturbed step's samples/s say nothing of a setting's: a w1 at 2264% of them read as enough
        said += [f"the synthetic step was disturbed ({', '.join(r.doubts)}), so no setting is held against its "
                 "samples/s"]  # fmt: skip
    elif ours and theirs:
        said += [f"reaches {percent(ours / theirs)} of the synthetic step's samples/s"]
    return (f"{head}; not enough: {' and '.join(said) or 'its data wait was not measured'} (enough: {ENOUGH_RULE})"
            f"{slower}; --loaders measures more settings")  # fmt: skip


def slower_text(group: Group, name: str) -> str:
    """'; w1 waits less for data (4.9%) but steps slower (0.897 s a mean step)': why a setting that waits less for
    data, enough or not, is not it."""
    cell = next(c for c in group.cells if c.loader == name)
    slower = f"{seconds(long_run_s(cell))} a mean step"
    return f"; {name} waits less for data ({percent(cell.data.wait_share)}) but steps slower ({slower})"


def h2d_lines(group: Group) -> list[str]:
    lines = []
    for c in group.cells:
        h2d = c.data.h2d if c.data else None
        bw = h2d_bandwidths(h2d)
        if bw:
            copies = ", ".join(f"{name} {rate(v)}" for name, v in bw.items())
            lines.append(f"{c.loader}: one batch ({nbytes(h2d['bytes'])}) to the device: {copies}")
    return lines


def lines(group: Group) -> list[str]:
    """What follows a group's table: the recommendation, the advice, the host->device copies."""
    return [recommendation_line(group), *group.advice, *h2d_lines(group)]


def render_rich(group: Group):
    from rich.table import Table

    from dlperf.report.format import markup

    table = Table(title=f"Input pipeline: {markup(group.title)}")
    for i, name in enumerate(HEAD):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in rows(group):
        styled = [markup(v) for v in row]
        styled[-1] = f"[red]{styled[-1]}[/]" if " > " in row[-1] else styled[-1]
        styled[5] = f"[yellow]{styled[5]}[/]" if row[5] in ("moderate", "high") else styled[5]
        table.add_row(*styled)
    return table


CSV_LEGEND = f"input pipeline: step in seconds and data wait a share (0 to 1), as plain numbers; {LEGEND}"


def raw_values(cell: CellRecord) -> list[str]:
    """One row as `values`, its figures plain numbers (the step in seconds, the wait a share), as the csv's device
    columns hold a cell's raw median; a cell not measured, its status."""
    name = cell.loader or SYNTHETIC_LABEL
    if not measured(cell):
        return [name, cell.status.value, *[""] * (len(HEAD) - 2)]
    d = cell.data
    figures = [repr(cell.median_s), _raw(throughput(cell))]
    if d is None:
        return [name, *figures, *[""] * (len(HEAD) - 3)]
    return [name, *figures, _raw(d.alone_samples_per_s), _raw(d.wait_share), d.verdict or "no", cores_text(d)]


def _raw(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def csv_rows(groups: list[Group]) -> list[list[str]]:
    """The section in `dlperf table --format csv`, after the table's own rows, each row's first field what it is: a
    head, then per group ("group": its title) a row per setting (`raw_values`) and a "note" per line that follows its
    table (the recommendation, the advice, the copies), then the legend. md and json had it, csv did not."""
    rows = [["input pipeline", "group", *HEAD]]
    for g in groups:
        rows += [["input pipeline", g.title, *raw_values(c)] for c in ([g.synthetic] if g.synthetic else []) + g.cells]
        rows += [["input pipeline note", g.title, line] for line in lines(g)]
    return [*rows, ["legend", CSV_LEGEND]]


def render_markdown(groups: list[Group]) -> str:
    out = []
    for g in groups:
        out += [f"### Input pipeline: {g.title}", "", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
        out += ["| " + " | ".join(r) + " |" for r in rows(g)]
        out += ["", *lines(g), ""]
    return "\n".join([*out, LEGEND])


# ----------------------------------------------------------------------------------------------------------------------
# The chart


def chart(group: Group) -> Chart:
    """The mean step with each loader setting (a long run's, as the wait share is), stacked as compute and data
    wait; the synthetic cell's mean step as a line."""
    compute, wait = Series("compute", []), Series("data wait", [])
    for c in (c for c in group.cells if measured(c)):
        share = (c.data.wait_share if c.data else None) or 0.0
        headline = f"data wait {percent(share)} of the step"
        compute.points.append(Point(c.loader, long_run_s(c) * (1 - share), tip=tip(c, headline)))
        wait.points.append(Point(c.loader, long_run_s(c) * share, tip=tip(c, headline)))
    lines = {"synthetic step": long_run_s(group.synthetic)} if measured(group.synthetic) else {}
    return Chart(
        f"input-{_slug(group.title)}", "columns", f"Input pipeline: {group.title}", "loader setting",
        "seconds per mini-batch", [compute, wait], categories=[p.x for p in compute.points], lines=lines,
        caption="the mean step with each loader setting (a long run's), split by the share of the timed steps spent "
        "waiting for data; the dashed line is the same step on one synthetic batch already on the device",
    )  # fmt: skip
