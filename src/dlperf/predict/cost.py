"""What the work costs on each GPU predicted, and on this CPU: `dlperf predict --cost`.

The work is a number of samples: the epochs asked (`--epochs`, default 1) of the workload's data set, or `--samples`.
A GPU's time is the predicted step (`roofline.Prediction.step_s`, the batch's copy included) times the steps the work
takes; its cost, that time at the low and the high $/GPU-hour of its price row (`prices.py`). This CPU's time comes
from a measured step of the same workload (the same model, not only its name: `same_model`) and batch in the store,
never a prediction; its energy cost from a stated watt figure and an electricity price (both assumptions,
overridable). Pure functions over their inputs; the command
(`commands/predict.py`) reads the store and prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlperf.errors import UsageError
from dlperf.predict.prices import Price

# The training split of each data set the built-in workloads name (Workload.data), in samples.
PTB_WORDS = 929_589  # the Penn Treebank's training words (workloads/datasets/ptb.py), read as sequences of seq_len
DATASETS = {"MNIST": 60_000, "CIFAR-10": 50_000}


def parse_deadline(text: str) -> float:
    """`--deadline 2h` -> seconds: a number and a unit (s, m, h, d), or several ("1h30m"); above zero."""
    from dlperf.flagtext import duration_seconds

    return duration_seconds(text, "--deadline", bare_s=None)


@dataclass(frozen=True)
class Work:
    """The work costed, in words: whole (`full`: what the JSON and advise's CPU line say), as a table's title says
    it (`title`: without the samples a loader leaves out, which ran a title past 100 columns; "": `full`), and those
    samples as a note says them (`left_out`: "an epoch: 58 steps of batch 1024, the last 608 samples left out as the
    loader drops a partial batch"; "": none)."""

    full: str
    title: str = ""
    left_out: str = ""

    def titled(self) -> str:
        return self.title or self.full

    @staticmethod
    def of(what: Work | str) -> Work:
        """A caller's own words (a Python caller of `costs`) as a work with no parts."""
        return what if isinstance(what, Work) else Work(what)


def epoch_samples(workload) -> tuple[int, str] | None:
    """The samples of one epoch of the workload's data set and what they are: a paper's data set's, or that of the
    user's own `dataset=` (its length); None for synthetic data."""
    if n := workload.extra.get("dataset_samples"):
        return n, f"its dataset's {n:,} samples"
    if workload.data in DATASETS:
        return DATASETS[workload.data], f"{workload.data}'s {DATASETS[workload.data]:,} training samples"
    if workload.data == "Penn Treebank":
        seq = int(workload.config.get("seq_len") or workload.input.shape[0])
        n = PTB_WORDS // seq
        return n, f"the Penn Treebank's {PTB_WORDS:,} training words as {n:,} sequences of {seq}"
    return None


def epoch(size: int, batch: int, batches: int | None = None) -> tuple[int, str]:
    """An epoch of `size` samples at `batch` in the steps a loader trains it in: the loader's own count where it is
    known (`batches`, len(loader): a user's loader= may keep a partial last batch), else the whole batches, as
    dlperf's DataLoaders drop a partial last batch (drop_last: 1,000 samples at batch 64 are 15 steps, not 16); and
    what the work says of them where samples are left out ("" where none is)."""
    from dlperf.measure.units import plural

    steps = batches or size // batch
    left = size - steps * batch
    if left <= 0:
        return steps, ""
    return steps, (f"{plural(steps, 'step')} of batch {batch}, the last {plural(left, 'sample')} left out as the "
                   "loader drops a partial batch")  # fmt: skip


def work(workload, samples: int | None, epochs: float | None) -> tuple[int, Work, int]:
    """The samples to cost, how they were chosen, and the steps they take at the workload's batch, as a loader trains
    them (`epoch`: each epoch's whole batches): `--samples` (a data set's size, one pass), else `--epochs` (1) of the
    data set. Fewer samples than a batch are refused: a loader that drops a partial batch trains none of them."""
    if samples is not None and epochs is not None:
        raise UsageError("--samples and --epochs: give one (the work is N samples, or E epochs of the data set)")
    if samples is not None:
        steps, dropped = epoch(samples, workload.batch)
        if not steps:
            raise UsageError(f"--samples {samples:,}: fewer than one batch of {workload.batch}, which a loader that "
                             "drops a partial batch trains none of: give at least one batch")  # fmt: skip
        return samples, parted(f"{samples:,} samples (--samples", ")", dropped, "the work"), steps
    found = epoch_samples(workload)
    if found is None:
        raise UsageError(
            f"--cost: {workload.name} trains on {workload.data} data, which has no epoch: give the work with "
            "--samples N (e.g. your data set's size)"
        )
    n, what = found
    epochs = 1.0 if epochs is None else epochs
    if n * epochs < workload.batch:  # as --samples below a batch: it was charged a whole step
        raise UsageError(f"--epochs {epochs:g}: {n * epochs:,.0f} samples of {what}, fewer than one batch of "
                         f"{workload.batch}: give at least --epochs {workload.batch / n:.2g}")  # fmt: skip
    steps, dropped = epoch(n, workload.batch)
    said = (f"{epochs:g} epochs of " if epochs != 1 else "one epoch: ") + what
    return max(1, round(n * epochs)), parted(said, "", dropped, "an epoch", " ("), max(1, round(steps * epochs))


def parted(said: str, end: str, dropped: str, per: str, sep: str = ": ") -> Work:
    """The work `said` then `end`, with the samples left out (`dropped`, of `per`: an epoch, the work) between them
    after `sep` where there are any: "1,000 samples (--samples: 15 steps ..., the last 40 samples left out ...)",
    titled "1,000 samples (--samples)"."""
    if not dropped:
        return Work(said + end)
    return Work(f"{said}{sep}{dropped}{end or ')'}", said + end, f"{per}: {dropped}")


def fits(
    gpu, workload, mode: str, peak_bytes: int | None = None, predicted_bytes: int | None = None
) -> tuple[bool, str]:
    """Whether a training step of `workload` at its batch fits in the GPU's memory, and why it is said so: a peak
    measured for the same workload and batch (`peak_bytes`, from the store, as the allocator peak it stands for:
    `measured_peaks`), else the peak `predict/memory.py` predicts (`predicted_bytes`: its allocator peak), set against
    the room `predict --memory` sets it against (`memory.usable`: what CUDA has on the GPU less its context); without
    either the GPU is kept, unchecked."""
    from dlperf.predict import memory

    if peak_bytes is None and predicted_bytes is None:
        return True, "memory not checked: no peak measured or predicted for this workload and batch"
    measured = peak_bytes is not None
    need, what = (peak_bytes, "the measured peak") if measured else (predicted_bytes, "the predicted peak")
    need_gib, have = need / 2**30, memory.usable(gpu) / 2**30
    if need_gib > have:
        shown = memory.apart(need, memory.usable(gpu))
        return False, f"{NO_FIT}: needs {shown[0]} GiB ({what}) of {shown[1]} GiB"
    return True, f"fits: {what} {need_gib:.2f} GiB of {have:.1f} GiB"


NO_FIT = "does not fit"
TIE = 0.01  # times within 1% are a tie: well inside the predictor's own error (roofline.uncertainty(): -23% to +36%)


@dataclass(frozen=True)
class Row:
    gpu: str
    mode: str
    step_s: float
    samples_per_s: float
    time_s: float  # the whole work
    price: Price | None
    fits: bool
    why: str  # fits' reason

    def cost(self) -> tuple[float, float] | None:
        """(low, high) US dollars of the whole work; None without a price."""
        if self.price is None:
            return None
        hours = self.time_s / 3600
        return hours * self.price.low, hours * self.price.high

    def per_million(self) -> tuple[float, float] | None:
        if self.price is None:
            return None
        hours = 1e6 / self.samples_per_s / 3600
        return hours * self.price.low, hours * self.price.high


@dataclass(frozen=True)
class Cpu:
    """This CPU's measured step for the same work, and its energy at `watts`."""

    step_s: float
    batch: int
    threads: int
    mode: str
    run_id: int
    time_s: float
    watts: float
    kwh_price: float

    @property
    def kwh(self) -> float:
        return self.watts * self.time_s / 3600 / 1000

    @property
    def energy_cost(self) -> float:
        return self.kwh * self.kwh_price


@dataclass
class Costs:
    workload: str
    batch: int
    samples: int
    what: Work  # how the samples were chosen
    rows: list[Row]
    left_out: list[Row] = field(default_factory=list)  # do not fit
    cpu: Cpu | None = None
    deadline_s: float | None = None
    largest: dict[tuple[str, str], int] = field(default_factory=dict)  # (GPU, mode) left out -> the largest batch

    def tied(self) -> list[Row]:
        """The rows predicted as fast as the fastest, within `TIE`: the predictor cannot tell them apart."""
        best = min((r.time_s for r in self.rows), default=None)
        return [r for r in self.rows if r.time_s <= best * (1 + TIE)] if best is not None else []

    def fastest(self) -> Row | None:
        """Of the rows tied for the fastest, the cheapest (a priced one before one without a price), then the
        fastest of those."""
        return min(self.tied(), key=lambda r: (r.cost() is None, r.cost() or (0.0, 0.0), r.time_s), default=None)

    def tied_with(self) -> list[str]:
        """The other GPUs tied with the fastest pick (its own other modes left out)."""
        pick = self.fastest()
        return list(dict.fromkeys(r.gpu for r in self.tied() if pick and r.gpu != pick.gpu))

    def cheapest(self, within_s: float | None = None) -> Row | None:
        priced = [r for r in self.rows if r.price and (within_s is None or r.time_s <= within_s)]
        return min(priced, key=lambda r: (r.cost(), r.time_s), default=None)


def at_risk(r: Row | None, deadline_s: float | None) -> dict | None:
    """Where a pick within the deadline would miss it at the predictor's error (its step up to
    `roofline.slowest_factor` times the predicted): the factor, whose error it is, and the time it would take;
    None where it stays within (or no pick, no deadline, no fit)."""
    from dlperf.predict.roofline import slowest_factor

    if r is None or deadline_s is None or (risk := slowest_factor()) is None or r.time_s * risk[0] <= deadline_s:
        return None
    return {"factor": risk[0], "whose": risk[1], "time_s": r.time_s * risk[0]}


def costs(workload, predictions, samples: int, what: Work | str, peaks: dict[str, int], deadline_s=None,
          predicted: dict[str, int] | None = None, steps: int | None = None) -> Costs:  # fmt: skip
    """The work on each predicted (GPU, mode); `peaks`: a measured peak per mode (`measured_peaks`; tf32's is fp32's,
    the same tensors; "" for any mode, a caller's own); `predicted`: the predicted peak per mode, where no peak was
    measured in that mode; `steps`: the work's steps (`work`), else the samples' whole batches (`epoch`)."""
    from dlperf.predict import gpus, prices

    kept, out = [], []
    for p in predictions:
        gpu = gpus.lookup(p.gpu, "predictions")  # a Python caller's own prediction: its argument named
        measured = peaks.get(p.mode, peaks.get("fp32") if p.mode == "tf32" else None) or peaks.get("")
        ok, why = fits(gpu, workload, p.mode, measured, (predicted or {}).get(p.mode))
        n = steps or max(1, epoch(samples, p.batch)[0])
        row = Row(p.gpu, p.mode, p.step_s, p.samples_per_s, n * p.step_s, prices.price(gpu), ok, why)
        (kept if ok else out).append(row)
    return Costs(workload.name, workload.batch, samples, Work.of(what), kept, out, None, deadline_s)


def cpu_cost(cell, samples: int, watts: float, kwh_price: float, step_s: float | None = None,
             steps: int | None = None) -> Cpu:  # fmt: skip
    """A measured CPU cell (a `store.records.CellRecord`) doing the same work, at its median step or `step_s` (a
    loader cell's mean: its waits for data come in bursts the median leaves out, and a long run pays them), in
    `steps` (`work`) or the samples' whole batches (`epoch`)."""
    step_s = step_s or cell.median_s
    steps = steps or max(1, epoch(samples, cell.batch)[0])
    return Cpu(step_s, cell.batch, cell.threads, cell.mode, cell.run_id, steps * step_s, watts, kwh_price)


# What names, sizes or feeds a workload rather than what model it is: the rest of its `Workload.to_json` identifies it,
# as `dlperf compare` reads it (`report.compare.workload_diff`); the batch is matched on its own.
NOT_IDENTITY = ("name", "batch", "ddp_batch", "notes", "hidden", "paper", "data", "extra")


def same_model(cells, workload) -> tuple[list, list[str]]:
    """The stored `cells` of `workload`'s name that are `workload` (the same model, whatever their batch), and a note
    for each other model stored under its name (another user's factory of the same name, one named like a built-in),
    whose cells are not used. Only what the stored workload says is compared (an older store's lacks newer fields; a
    cell stored without its workload cannot be told apart and is kept), both as the store's JSON reads."""
    import json

    from dlperf.measure.units import named
    from dlperf.workloads.base import workload_diff

    as_stored = lambda d: json.loads(json.dumps(d))  # noqa: E731  (a tuple reads back a list)
    mine, spec, others = [], as_stored(workload.to_json()), {}
    for c in cells:
        unsaid = [k for k in spec if k not in c.workload_spec]
        differs = workload_diff(as_stored(c.workload_spec), spec, (*NOT_IDENTITY, *unsaid)) if c.workload_spec else ""
        if differs:
            others.setdefault(differs, set()).add(c.run_id)
        else:
            mine.append(c)
    notes = [f"the store's {workload.name} of {named('run', sorted(runs))} was a "
             f"different model (the workloads differ: {differs}), so it was not used"
             for differs, runs in others.items()]  # fmt: skip
    return mine, notes


def plain_cpu(cells, batch: int) -> list:
    """The plain CPU steps at `batch` among `cells` (measured, one process, no loader): what `measured_cpu` quotes."""
    return [c for c in cells if c.device == "cpu" and c.ok and c.median_s and not c.nproc and not c.loader
            and c.batch == batch]  # fmt: skip


def this_cpu(runs, here: dict) -> tuple[list[int], dict[int, list[str]]]:
    """The ids of `runs` (`store.records.RunRecord`s) this machine measured, the latest measured first (by its start,
    `RunRecord.order`: not the highest id, which `dlperf merge` gives in its own order), and how each other run's
    machine differs from `here` (this machine's `envinfo.capture`), its hardware only (`envinfo.machine_diff`, as
    `dlperf run --resume` takes a run as this machine's): advise quotes the step it measured here, and `--cost` quoted
    a merged store's other machine as "this CPU"."""
    from dlperf.envinfo import machine_diff

    runs = sorted(runs, key=lambda r: r.order, reverse=True)
    elsewhere = {r.id: diff for r in runs if (diff := machine_diff(r.fingerprint, r.env, here))}
    return [r.id for r in runs if r.id not in elsewhere], elsewhere


def elsewhere_notes(cells, batch: int, elsewhere: dict[int, list[str]]) -> list[str]:
    """A note for each run of another machine (`this_cpu`) holding a plain CPU step at `batch`, which is not quoted."""
    found = {c.run_id for c in plain_cpu(cells, batch)}
    return [f"run {run} measured another machine ({'; '.join(diff)}), so its CPU step is not this CPU's and is not "
            "quoted" for run, diff in elsewhere.items() if run in found]  # fmt: skip


def without_fp32(cells, batch: int, order: list[int]) -> list[str]:
    """The modes of the plain CPU steps at `batch` that the runs in `order` (`this_cpu`'s) stored, where no step is
    quoted (`measured_cpu`: None): none of them has fp32 eager to set a mode against."""
    return sorted({c.mode for c in plain_cpu(cells, batch) if c.run_id in order})


def measured_cpu(cells, batch: int, timed, quoted, order: list[int]):
    """This CPU's step at `batch` as `dlperf advise` quotes it, from `cells` (the workload's, of any run:
    `same_model`'s) and their per-process step times (`timed(run, cells)`, by cell key: read for each run as it is
    reached, `readable`): of the runs in `order` (this machine's, the latest measured first: `this_cpu`), the first
    that measured a plain CPU step at the batch with fp32 eager among it, the cell `quoted` takes of each process
    kind's modes (the command gives `optimize_results.quoted`: a mode reliably faster than fp32 that still trains,
    else fp32 eager), at the thread count where that is fastest (as crossover's thread search takes it); None where no
    run did (an older one is read where the latest has no fp32 step). Never the fastest cell of any run: a minimum
    over noisy cells, disturbed ones and modes not told apart from fp32 among them, is biased low."""
    mine = plain_cpu(cells, batch)
    for run in order:
        groups: dict[tuple, list] = {}  # the modes of one process kind: workload (crossover's @bN), framework, threads
        for c in mine:
            if c.run_id == run:
                groups.setdefault((c.workload, c.framework, c.threads), []).append(c)
        picks = [quoted(g, timed(run, g)) for g in groups.values()]
        if found := [c for c in picks if c is not None]:
            return min(found, key=lambda c: c.median_s)
    return None


def readable(timed, notes: list[str]):
    """`timed` (a run's per-process step times by cell key, as `measured_cpu` reads them) with a row that no longer
    decodes read as none of that run's cells' (its fp32 eager step quoted: no other mode is told apart from it without
    them), said in `notes`: one damaged row of any run stopped `predict --cost`."""
    from dlperf.errors import UnreadableRow

    def read(run: int, cells) -> dict[str, list[list[float]]]:
        try:
            return timed(run, cells)
        except UnreadableRow as fault:
            notes.append(f"{fault}: this CPU's step is that run's fp32 eager one, no other mode told apart from it "
                         "without them")  # fmt: skip
            return {}

    return read


def measured_peaks(cells, batch: int, predicted: dict[str, int] | None = None) -> dict[str, int]:
    """The largest peak memory measured at `batch` among `cells` (the workload's: `same_model`'s), per mode, as the
    CUDA allocator peak it stands for (`memory.allocator_peak`: a live-tensor peak with the rule's overhead, as
    `predict --memory` predicts one); a process's RSS, no step's tensors, is not used. No peak stands for another
    mode: an fp32 step's is about twice a bf16 or fp16 one's activations. A CPU cell's peak counts only in a mode
    with no peak `predicted` (traced as a GPU runs the step): PyTorch's optimizers update the parameters one at a
    time on the CPU, and together on a GPU (foreach), with temporaries the CPU's peak lacks (a 402M-parameter model
    with Adam: 6.13 GiB measured on the CPU, 7.75 GiB predicted; `--cost` called a 7.5 GiB GPU big enough)."""
    from dlperf.predict import memory

    peaks: dict[str, int] = {}
    for c in cells:
        peak = memory.allocator_peak(c.peak_mem_bytes, c.peak_mem_kind) if c.peak_mem_bytes else None
        if c.device == "cpu" and (c.mode in (predicted or {}) or (c.mode == "fp32" and "tf32" in (predicted or {}))):
            continue  # tf32's step holds fp32's tensors: `costs` sets an fp32 peak against tf32 too
        if c.batch == batch and peak and not c.nproc:
            peaks[c.mode] = max(peaks.get(c.mode, 0), peak)
    return peaks


def to_json(x: Costs) -> dict:
    """What `--format json` prints: every figure by name, seconds and US dollars."""

    def row(r: Row) -> dict:
        cost, million = r.cost(), r.per_million()
        return {
            "gpu": r.gpu, "mode": r.mode, "step_s": r.step_s, "samples_per_s": r.samples_per_s, "time_s": r.time_s,
            "cost_usd": cost, "usd_per_million_samples": million, "fits": r.fits, "memory": r.why,
            "price": None if r.price is None else {k: getattr(r.price, k) for k in
                                                   ("low", "high", "region", "date", "sources", "user")},
        }  # fmt: skip

    pick = lambda r: None if r is None else {"gpu": r.gpu, "mode": r.mode}  # noqa: E731
    cpu = None
    if x.cpu:
        cpu = {**{k: getattr(x.cpu, k) for k in x.cpu.__dataclass_fields__}, "kwh": x.cpu.kwh,
               "energy_usd": x.cpu.energy_cost}  # fmt: skip
    return {
        "workload": x.workload, "batch": x.batch, "samples": x.samples, "work": x.what.full, "predicted": True,
        "rows": [row(r) for r in x.rows], "cpu_measured": cpu,
        "does_not_fit": [{**row(r), "largest_batch": x.largest.get((r.gpu, r.mode))} for r in x.left_out],
        "fastest": pick(x.fastest()), "fastest_tied_with": x.tied_with(), "cheapest": pick(x.cheapest()),
        "deadline_s": x.deadline_s,
        "cheapest_within_deadline": pick(x.cheapest(x.deadline_s)) if x.deadline_s else None,
        "within_deadline_at_risk": at_risk(x.cheapest(x.deadline_s), x.deadline_s),
    }  # fmt: skip
