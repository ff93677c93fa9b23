"""From which batch a GPU is faster than this CPU: a `dlperf crossover` run's measured CPU steps, batch by batch,
against the GPU steps predicted beside them (`predictions` rows on its CPU cells) or measured (a CUDA cell of the
same workload and batch, from a GPU machine's run merged into the store). Pure functions of store records; `read`
gathers them from a store.

The GPU step includes the batch's copy over the host link: on a GPU a real step waits for its inputs, while the CPU
reads them where they already are. A measured CUDA cell of `dlperf run` trains on a batch made on the device, so its
copy is added from the prediction of the same GPU and batch (the host link's figure) when one is stored.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from dlperf.errors import UnreadableRow
from dlperf.measure.units import plural
from dlperf.report.charts import DOUBT_MARK, Chart, Point, Series, doubt_lines, doubt_of, doubted, doubtful
from dlperf.report.format import seconds
from dlperf.store.records import CellRecord, PredictionRecord, RunRecord

KIND = "crossover"  # a prediction's detail names the run that set it against its CPU cell


def variant_name(workload: str, batch: int) -> str:
    """The name of a workload at another batch: cells are keyed by workload name."""
    return f"{workload}@b{batch}"


def base_name(workload: str) -> str:
    """`tiny-fcn-r@b8` -> `tiny-fcn-r`; a plain name as it is."""
    head, sep, tail = workload.rpartition("@b")
    return head if sep and tail.isascii() and tail.isdigit() else workload


@dataclass(frozen=True)
class GpuStep:
    gpu: str
    step_s: float  # the device's step plus the batch's copy over the host link
    measured: bool
    bound: str = ""  # a prediction's: compute, memory or launch
    transfer_s: float = 0.0


@dataclass
class Row:
    batch: int
    cpu: CellRecord | None  # the fastest measured CPU cell at this batch
    gpus: dict[str, GpuStep] = field(default_factory=dict)

    def speedup(self, gpu: str) -> float | None:
        """How many times faster the GPU's step is than the CPU's (<1: slower)."""
        step = self.gpus.get(gpu)
        return self.cpu.median_s / step.step_s if step and self.cpu and self.cpu.median_s and step.step_s else None


@dataclass
class Crossover:
    run_id: int
    workload: str
    mode: str
    user_batch: int
    gpus: list[str]
    rows: list[Row]

    def pays_from(self, gpu: str) -> int | None:
        return pays_from([(r.batch, r.cpu.median_s, r.gpus[gpu].step_s) for r in self.rows if _both(r, gpu)])

    def largest(self, gpu: str) -> int | None:
        return max((r.batch for r in self.rows if _both(r, gpu)), default=None)

    def lines(self) -> list[str]:
        """The answer, one line per GPU and a line for the user's batch: from which batch the GPU is predicted (or
        measured) faster than this CPU, what bounds its step there, and the predictor's uncertainty: once, on a line of
        its own, where two GPUs or more are predicted (it is the same three lines for each)."""
        out = []
        at = next((r for r in self.rows if r.batch == self.user_batch), None)
        said = [u for gpu in self.gpus if (u := _uncertainty(self, gpu))]
        shared = len(said) > 1
        if len(self.gpus) > CHARTED:
            return self._grouped(at) + ([f"the GPUs' predicted steps: {said[0].removeprefix('; ')}"] if shared else [])
        for gpu in self.gpus:
            largest = self.largest(gpu)
            if largest is None:
                out.append(f"{gpu}: no batch has both a CPU and a GPU step")
                continue
            out.append(f"{gpu}: {self._verdict(gpu, largest)}" + ("" if shared else _uncertainty(self, gpu)))
            ratio = at.speedup(gpu) if at else None
            if ratio is not None:
                how = "measured" if at.gpus[gpu].measured else "predicted"
                faster = f"{ratio:.1f} times faster" if ratio >= 1 else f"{1 / ratio:.1f} times slower"
                out.append(f"{gpu}: at your batch {self.user_batch}: GPU {how} {faster}{_no_room(at, gpu)}")
        return out + ([f"the GPUs' predicted steps: {said[0].removeprefix('; ')}"] if shared else [])

    def _grouped(self, at: Row | None) -> list[str]:
        """`lines` of many GPUs (advise's 26), not two lines each: the GPUs of one verdict on one line, and their
        speed-ups at the user's batch on another, the fastest first."""
        verdicts: dict[str, list[str]] = {}
        for gpu in self.gpus:
            largest = self.largest(gpu)
            verdict = "no batch has both a CPU and a GPU step" if largest is None else self._verdict(gpu, largest)
            verdicts.setdefault(verdict, []).append(gpu)
        out = [f"{verdict}: {', '.join(gpus)}" for verdict, gpus in verdicts.items()]
        ratios = [(r, gpu) for gpu in self.gpus if at and (r := at.speedup(gpu)) is not None]
        ratios.sort(key=lambda pair: -pair[0])  # the fastest first; a tie in the GPUs' order
        if ratios:
            each = [f"{gpu} {r:.2f}x" if r < 1 else f"{gpu} {r:.1f}x" for r, gpu in ratios]
            each = [e + " measured" * at.gpus[gpu].measured + " (does not fit)" * bool(_no_room(at, gpu))
                    for e, (_, gpu) in zip(each, ratios, strict=True)]  # fmt: skip
            out.append(f"at your batch {self.user_batch}, each GPU's speed-up over this CPU (below 1x: slower; "
                       f"predicted unless said measured): {', '.join(each)}")  # fmt: skip
        return out

    def _verdict(self, gpu: str, largest: int) -> str:
        start = self.pays_from(gpu)
        step = self._step(gpu, start if start is not None else largest)
        how = "measured" if step.measured else "predicted"
        if start is not None:
            said = f"{how} faster than this CPU from batch {start}"
            said += "" if step.measured else f", {_bound(step)} there"
        else:
            faster = [r.batch for r in self.rows if _both(r, gpu) and r.speedup(gpu) > 1]
            said = f"not {how} faster than this CPU " if not step.measured else "not faster than this CPU "
            if faster:
                said += f"at batch {largest}, the largest measured (it is at {', '.join(map(str, faster))}"
                said += ")" if step.measured else f"; {_bound(step)} at {largest})"
            else:
                said += f"up to batch {largest} " + ("(measured there)" if step.measured else f"({_bound(step)} there)")
        return said + self._holds_up_to(gpu)

    def _holds_up_to(self, gpu: str) -> str:
        """'; its memory does not hold the step from batch B' where a predicted GPU cannot hold the step at a batch
        of the table (`_no_room`): "faster from batch 64" read as a GPU for every batch from 64, where it held none
        above 128."""
        too_large = [r.batch for r in self.rows if _both(r, gpu) and _no_room(r, gpu)]
        return f"; its memory does not hold the step from batch {min(too_large)}" if too_large else ""

    def _step(self, gpu: str, batch: int) -> GpuStep:
        return next(r.gpus[gpu] for r in self.rows if r.batch == batch and _both(r, gpu))


def _no_room(row: Row, gpu: str) -> str:
    """'; ...' where the GPU, predicted, cannot hold the step at this row's batch: this CPU's measured peak of live
    tensors, with the allocator's overhead, is more than its memory (a 0.6 GiB GPU read "120.9 times faster" at a
    batch 2.7 times the largest it holds). The CPU's peak lacks a GPU's foreach update temporaries: the step may not
    fit where this says nothing. '' where it fits, is measured, or no peak or GPU figure is known."""
    from dlperf.predict import cost, gpus, memory

    cell, step = row.cpu, row.gpus.get(gpu)
    if cell is None or step is None or step.measured or not cell.peak_mem_bytes:
        return ""
    peak = memory.allocator_peak(cell.peak_mem_bytes, cell.peak_mem_kind)
    spec = gpus.known(gpu)  # None: a GPU of a --gpu-specs file this view was not given, not checked
    ok, why = cost.fits(spec, None, "fp32", peak) if peak and spec else (True, "")
    return "" if ok else f", but the step does not fit its memory ({why.removeprefix(cost.NO_FIT + ': ')})"


def _both(row: Row, gpu: str) -> bool:
    return row.speedup(gpu) is not None


def _bound(step: GpuStep) -> str:
    """What bounds a predicted GPU step: the batch's copy over the host link when it is most of the step, else the
    device's bound (compute, memory or launch)."""
    return "bound by the batch's copy" if step.transfer_s > step.step_s / 2 else f"{step.bound}-bound"


def _uncertainty(x: Crossover, gpu: str) -> str:
    """The predictor's uncertainty, where any of the GPU's steps is predicted."""
    from dlperf.predict import roofline

    predicted = any(not r.gpus[gpu].measured for r in x.rows if _both(r, gpu))
    return f"; uncertainty {roofline.uncertainty()}" if predicted and roofline.uncertainty() else ""


def pays_from(points: list[tuple[int, float, float]]) -> int | None:
    """(batch, CPU step, GPU step) -> the smallest batch from which the GPU's step is below the CPU's at every larger
    batch; None when it is not below at the largest. A GPU that pays at small batches, stops, and pays again pays
    "from" the batch after which it always does."""
    start = None
    for batch, cpu_s, gpu_s in sorted(points, reverse=True):
        if gpu_s >= cpu_s:
            break
        start = batch
    return start


def build(
    run: RunRecord,
    cells: list[CellRecord],
    predictions: dict[str, list[PredictionRecord]],
    measured: list[tuple[str, CellRecord]] = (),
) -> Crossover | None:
    """A crossover run's answer; None when `run` is not one (no prediction of its names a crossover). `measured`:
    (GPU name, CUDA cell) from any run, used at their batch in place of a prediction of the same GPU."""
    by_key = {c.key: c for c in cells}
    mine = [p for ps in predictions.values() for p in ps if (p.detail.get(KIND) and p.cell_key in by_key)]
    if not mine:
        return None
    first = by_key[mine[0].cell_key]
    workload, mode, user_batch = base_name(first.workload), first.mode, int(mine[0].detail[KIND]["user_batch"])
    rows: dict[int, Row] = {}
    for c in cells:
        if c.device != "cpu" or c.batch is None or base_name(c.workload) != workload or c.mode != mode:
            continue
        row = rows.setdefault(c.batch, Row(c.batch, None))
        if c.ok and c.median_s and (row.cpu is None or c.median_s < row.cpu.median_s):
            row.cpu = c
    gpus: list[str] = []
    for p in mine:
        row = rows.get(by_key[p.cell_key].batch)
        if row is not None:
            row.gpus[p.gpu] = GpuStep(p.gpu, p.step_s, False, p.bound, p.transfer_s)
            gpus.append(p.gpu)
    for gpu, cell in measured:
        if base_name(cell.workload) != workload or cell.mode != mode or not (cell.ok and cell.median_s):
            continue
        row = rows.get(cell.batch)
        if row is None:
            continue
        predicted = row.gpus.get(gpu)
        transfer = predicted.transfer_s if predicted else 0.0
        row.gpus[gpu] = GpuStep(gpu, cell.median_s + transfer, True, "", transfer)
        gpus.append(gpu)
    return Crossover(
        run.id, workload, mode, user_batch, list(dict.fromkeys(gpus)), sorted(rows.values(), key=lambda r: r.batch)
    )


def table_rows(x: Crossover) -> tuple[list[str], list[list[str]]]:
    """The answer's table (`by_batch`), turned a row per GPU where the GPUs outnumber the batches (`oriented`)."""
    return oriented(x, *by_batch(x))


def oriented(x: Crossover, head: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """`by_batch`'s table (its columns after each GPU's speed-up too: `cost.crossover_table`'s price of a million
    samples) as it is, or a row per GPU where the GPUs outnumber the batches: advise's crossover of 26 GPUs at one
    batch was one row of 80 columns. Then the CPU's row comes first, and each batch has the columns a GPU had."""
    if len(x.gpus) <= len(x.rows):
        return head, rows
    starts = [head.index(gpu) for gpu in x.gpus]
    spans = {gpu: (a, b) for gpu, a, b in zip(x.gpus, starts, [*starts[1:], len(head)], strict=True)}
    widest = max(x.gpus, key=lambda gpu: spans[gpu][1] - spans[gpu][0])
    a, b = spans[widest]
    labels = [h.removeprefix(f"{widest} ") for h in head[a + 1 : b]]  # "speed-up", "$ per M samples"
    turned_head = ["GPU", *(h for r in x.rows for h in (f"batch {r.batch}", *labels))]
    cpu = [head[1], *(v for line in rows for v in (line[1], *["-"] * len(labels)))]
    turned = [cpu]
    for gpu, (a, b) in spans.items():
        turned.append([gpu, *(v for line in rows for v in (*line[a:b], *["-"] * (1 + len(labels) - (b - a))))])
    return turned_head, turned


def by_batch(x: Crossover) -> tuple[list[str], list[list[str]]]:
    """A row per batch: batch | CPU step (threads) | each GPU's step, predicted or measured | speed-up. A CPU step
    not to rely on (`charts.doubtful`: few samples, busy CPUs, steal, an unsettled warm-up) is marked `?`, and so is
    each speed-up set against it, as the chart draws its point hollow (`legend` says what the mark means)."""
    head = ["batch", "CPU (threads)"]
    for gpu in x.gpus:
        head += [gpu, "speed-up"]
    rows = []
    for r in x.rows:
        mark = _mark(r)
        line = [str(r.batch), f"{seconds(r.cpu.median_s)}{mark} ({r.cpu.threads})" if r.cpu else "-"]
        for gpu in x.gpus:
            step, ratio = r.gpus.get(gpu), r.speedup(gpu)
            line.append(f"{seconds(step.step_s)} {'measured' if step.measured else 'predicted'}" if step else "-")
            line.append(f"{ratio:.2f}x{mark}" if ratio is not None else "-")
        rows.append(line)
    return head, rows


def _mark(row: Row) -> str:
    return DOUBT_MARK if row.cpu and doubtful(row.cpu) else ""


def legend(x: Crossover) -> list[str]:
    """The table's legend line, where a row is marked: what `?` means (few samples alone, or a disturbed cell:
    `charts.doubt_of`, the chart's caption's words), as report/table.py's legend says its `?`."""
    marked = [r.cpu for r in x.rows if _mark(r)]
    return [f"{DOUBT_MARK} = the CPU step (and each speed-up set against it) from {doubt_of(marked)}"] if marked else []


CHARTED = 6  # GPUs a crossover chart draws at most: advise's of 26 GPUs drew 27 lines and 26 marks, its legend
# taller than the figure (matplotlib: "constrained_layout not applied because axes sizes collapsed to zero")


def charted(x: Crossover) -> list[str]:
    """The GPUs the chart draws: every one up to CHARTED; of more, those measured, then the GPUs predicted faster
    from the smallest batch, then the fastest at the largest batch (the table under the chart lists them all)."""
    if len(x.gpus) <= CHARTED:
        return list(x.gpus)
    last = max(x.rows, key=lambda r: r.batch)

    def rank(gpu: str) -> tuple:
        step = last.gpus.get(gpu)
        measured = any(r.gpus[gpu].measured for r in x.rows if gpu in r.gpus)
        return (not measured, x.pays_from(gpu) or math.inf, step.step_s if step else math.inf)

    chosen = set(sorted(x.gpus, key=rank)[:CHARTED])
    return [gpu for gpu in x.gpus if gpu in chosen]


def _left_out(x: Crossover, drawn: list[str]) -> str:
    if len(drawn) == len(x.gpus):
        return ""
    return (f"; {len(drawn)} of the {len(x.gpus)} GPUs drawn, those measured, then those predicted faster from the "
            "smallest batch, then the fastest (the table lists them all)")  # fmt: skip


def chart(x: Crossover) -> Chart:
    """Step time against batch size, log-log: the CPU measured, each GPU predicted (dashed) or measured, and the
    batch from which each GPU is predicted faster marked."""
    series = [
        Series(
            "CPU, measured",
            [
                Point(
                    r.batch,
                    r.cpu.median_s,
                    tip=f"batch {r.batch}: CPU {seconds(r.cpu.median_s)} at {plural(r.cpu.threads, 'thread')}"
                    + "".join(f"\n{line}" for line in doubt_lines(r.cpu)),
                    doubtful=doubtful(r.cpu),
                )
                for r in x.rows
                if r.cpu
            ],
        )
    ]
    from dlperf.predict import roofline

    drawn_gpus, band = charted(x), roofline.error_band() or (1.0, 1.0)
    series += [line for gpu in drawn_gpus for measured in (False, True) if (line := _gpu_line(x, gpu, measured, band))]
    marks = {f"{gpu} predicted faster from {b}": float(b) for gpu in drawn_gpus if (b := x.pays_from(gpu)) is not None}
    drawn = Chart(
        f"crossover-{x.run_id}",
        "lines",
        f"{x.workload} ({x.mode}): CPU against GPU by batch",
        "batch size",
        "seconds per step",
        series,
        log_x=True,
        log_y=True,
        marks=marks,
        caption="the CPU measured at its fastest thread count; GPU steps include the batch's copy over the host link; "
        "dashed: predicted from the GPU's published figures"
        + (
            f", each bar from {band[0]:.2f} to {band[1]:.2f} times the prediction (the published steps' 10th to 90th "
            "percentile in the predictor's held-out check)"
            if band != (1.0, 1.0)
            else ""
        )
        + _left_out(x, drawn_gpus),
    )
    return doubted(drawn, doubt_of([r.cpu for r in x.rows if r.cpu]))  # a busy CPU's points hollow, as scaling's


def _gpu_line(x: Crossover, gpu: str, measured: bool, band: tuple[float, float]) -> Series | None:
    """A GPU's measured steps, or its predicted ones, each with the predictor's held-out error (`band`, the
    published step over the predicted) as its bar; None where it has none."""

    def point(batch: int, step: GpuStep) -> Point:
        if measured:
            return Point(batch, step.step_s, tip=f"batch {batch}: {gpu} {seconds(step.step_s)} measured, with the "
                         "batch's copy")  # fmt: skip
        low, high = step.step_s * band[0], step.step_s * band[1]
        return Point(batch, step.step_s, low, high, tip=f"batch {batch}: {gpu} {seconds(step.step_s)} predicted "
                     f"({seconds(low)} to {seconds(high)}), {step.bound}-bound, with the batch's copy")  # fmt: skip

    points = [point(r.batch, s) for r in x.rows if (s := r.gpus.get(gpu)) and s.measured == measured]
    return Series(f"{gpu}, {'measured' if measured else 'predicted'}", points, dashed=not measured) if points else None


def read(store, run_ids: list[int], unreadable: Callable[[UnreadableRow], None] | None = None) -> list[Crossover]:
    """The crossovers among `run_ids`, each with the CUDA cells of every run in `store` that measured its workload. A
    cell row that no longer decodes is left out (the views name those already); a run whose predictions no longer
    decode is no crossover, its fault handed to `unreadable` when given."""
    from dlperf.predict.gpus import for_device

    skip = unreadable or (lambda fault: None)
    measured: list[tuple[str, CellRecord]] = []
    for run in store.runs():
        names = {d.get("name"): d.get("model") for fw in (run.env.get("frameworks") or {}).values()
                 for d in fw.get("devices", [])}  # fmt: skip
        for c in store.cells(run.id, unreadable=lambda fault: None):
            if c.device.startswith("cuda") and not c.nproc and not c.loader:
                model = names.get(c.device) or c.device
                gpu = for_device(model)
                measured.append((gpu.name if gpu else model, c))
    found = []
    for run_id in run_ids:
        try:
            predictions = store.predictions(run_id)
        except UnreadableRow as fault:
            skip(fault)
            continue
        x = build(store.run(run_id), store.cells(run_id, unreadable=lambda fault: None), predictions, measured)
        if x is not None:
            found.append(x)
    return found


# ----------------------------------------------------------------------------------------------------------------------
# The paper's check: the predictor's GTX 1080 against Shi et al.'s own GTX 1080 figures

PAPER_GPU = "GTX 1080"
PAPER_NOTE = (
    "the paper's figures are 2016 software (CUDA 8, cuDNN 5.1, the frameworks of then) on its GTX 1080; the "
    "prediction is a model fitted on later measurements, with the batch already on the GPU (the paper's synthetic "
    "data): expect the two to differ by more than the predictor's error"
)


@dataclass(frozen=True)
class PaperRow:
    network: str  # the paper's name
    workload: str
    batch: int
    predicted_s: float
    bound: str
    tools: dict[str, float]  # tool -> the paper's GTX 1080 seconds per mini-batch

    @property
    def best(self) -> tuple[str, float] | None:
        return min(self.tools.items(), key=lambda kv: kv[1]) if self.tools else None

    @property
    def ratio(self) -> float | None:
        """The paper's best over the prediction: >1, the prediction is faster."""
        best = self.best
        return best[1] / self.predicted_s if best else None


def paper_rows(predicted: list[tuple[str, str, int, float, str]]) -> list[PaperRow]:
    """(workload, paper network, batch, predicted seconds, bound) -> each beside the paper's GTX 1080 column, one
    figure per tool (a tool the paper has no figure for is left out)."""
    from dlperf.report.paper import table7

    rows = []
    for workload, network, batch, seconds_, bound in predicted:
        tools = {r["tool"]: float(r["gtx1080"]) for r in table7() if r["network"] == network and r["gtx1080"]}
        rows.append(PaperRow(network, workload, batch, seconds_, bound, tools))
    return rows


def paper_table(rows: list[PaperRow]) -> tuple[list[str], list[list[str]]]:
    head = ["network", "batch", "predicted", "bound", "paper best", "paper range", "paper/predicted"]
    out = []
    for r in rows:
        best = r.best
        spread = f"{seconds(min(r.tools.values()))} to {seconds(max(r.tools.values()))}" if r.tools else "-"
        out.append([
            r.network, str(r.batch), seconds(r.predicted_s), r.bound, f"{seconds(best[1])} {best[0]}" if best else "-",
            spread, f"{r.ratio:.2f}" if r.ratio else "-",
        ])  # fmt: skip
    return head, out
