"""Published single-GPU training measurements, read as steps dlperf can predict, and the prediction's error on them.

dlperf ships 225 of them (`dlperf/data/gpu_dev.csv`, read by `dlperf predict --validate` with no file): single-GPU
training figures published by NVIDIA's DeepLearningExamples, Lambda's benchmarks, DAWNBench, the cnn-benchmarks,
papers and framework READMEs, each row naming its `source` (a repository at a commit and file, a paper, a page) and,
in `notes`, the software and data loader behind it.

A row (the columns of dlperf/data/gpu_dev.csv: gpu, model, task, framework, precision, batch_per_gpu, metric,
value, unit, source, notes) becomes a `Case`: a dlperf workload at the row's batch and mode on a GPU of the table,
and the published figure as seconds per step:
- train_throughput in img/s or samples/s: batch / value; in tok/s (GNMT): batch x 2 x `GNMT_TOKENS` / value (the
  source's and the target's tokens; WMT16 En-De sentences average about 30 sub-word tokens after bucketing);
- epoch_time in s: value / steps per epoch (CIFAR-10 50,000 images, MNIST 60,000, Penn Treebank 929,589 and
  WikiText-2 2,088,628 training tokens at 70 per sequence);
- time_to_train_24ep in s: value / (24 epochs of CIFAR-10);
- fwd_bwd_time_per_batch in ms: forward and backward only (the optimizer's phase is left out of the prediction).
Rows on synthetic or random input make their data on the GPU (no host copy is predicted); others copy each batch.
A row whose network dlperf does not build, whose precision it does not predict (INT8: only FP32, TF32, BF16 and
mixed or half precision are), whose GPU the table lacks or whose GPU name several of its GPUs fit (A100), or without a
batch size, is skipped with the reason; a row that does not
parse (a missing column, a value that is not a positive number, a batch that is not a whole number from 1 to
`MAX_BATCH`, a name that a spreadsheet would take for a formula) is bad, with the reason and its line in the file;
neither stops the others.

A row measures what dlperf predicts (one training step of today's software) or something else: the optional `scope`
column says which, from the row's metadata and never from its error: `in` (or empty, or no column: every row of a file
without it), or `out: REASON`; `--validate` reports the rows out of scope apart, each with its reason and its error,
and the error of the rows in scope beside that of all rows. The shipped file's column was written once by
`scope_rule`, which reads a row's metric, framework and notes, first match wins:
- metric `epoch_time` or `time_to_train_*`: an epoch's wall time, the data loading, augmentation and evaluation
  inside the figure (the CIFAR rows' DAWNBench-style epochs, Keras' examples, AWD-LSTM's epochs);
- framework Torch7, Theano, Keras 1.x, PyTorch 0.1-0.3, TensorFlow 0.x-1.4, or one dated 2015-17: software whose
  kernels (CUDA 8, cuDNN 5) are not today's;
- notes stating that the input pipeline, the loader or the augmentation bounds or caps the figure ("may cap" is a
  hedge, not a statement: such a row stays in).
A test checks that every shipped row's `scope` is what the rule gives; a row added by hand gets the rule's verdict.

The file is read as a stream, a UTF-8 byte-order mark and any line ends taken: at most `MAX_ROWS` rows of at most
`MAX_LINE` characters, so a file of any size costs bounded time and memory; past either, or a file that is not UTF-8
text, the whole file is refused with one line saying why, before anything is counted.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dlperf.errors import UsageError
from dlperf.predict import MAX_BATCH
from dlperf.predict.gpus import GPU, AmbiguousGPU, lookup
from dlperf.predict.roofline import MODES, Prediction

COLUMNS = ("gpu", "model", "precision", "batch_per_gpu", "metric", "value", "unit")
GNMT_TOKENS = 30  # sub-word tokens per sentence and side, WMT16 En-De as bucketed for training
TOKENS = {"PTB": 929_589, "WikiText-2": 2_088_628}
BPTT = 70
IMAGES = {"CIFAR-10": 50_000, "MNIST": 60_000}
MAX_ROWS = 10_000  # a file of published measurements has hundreds (the shipped one, `shipped()`: 225)
MAX_LINE = 65_536  # characters of one line, its end included
FORMULA_START = ("=", "+", "-", "@")  # a spreadsheet takes a cell starting so for a formula (OWASP's list, stripped)
NAMED = ("gpu", "model", "task", "precision", "metric", "unit", "scope")  # text columns a prediction reads

_OLD_SOFTWARE = re.compile(r"Torch7|Theano|Keras 1\.|PyTorch 0\.[0-3]\b|TensorFlow (0\.|1\.[0-4]\b)|\b201[5-7]\b")

# The rule that wrote the shipped file's `scope` column (the module's docstring): (why out, the test), first match wins.
SCOPE_RULE: tuple[tuple[str, Callable[[dict[str, str]], bool]], ...] = (
    (
        "an epoch's wall time: data loading, augmentation and evaluation inside",
        lambda row: row["metric"] == "epoch_time" or row["metric"].startswith("time_to_train"),
    ),
    (
        "2015-17 software (Torch7, Theano, Keras 1, PyTorch 0.1-0.3, TensorFlow 0.x-1.4)",
        lambda row: _OLD_SOFTWARE.search(row["framework"]) is not None,
    ),
    (
        "the notes say the data loader bounds or caps the figure",
        lambda row: _says_loader_bound(row["notes"]),
    ),
)


def _says_loader_bound(notes: str) -> bool:
    """The notes state that the input pipeline bounds the figure; a hedge ("may cap", "might bound") is not a
    statement, so such a row stays in scope."""
    found = re.search(r"(input|loader|augmentation)\S*( \S+){0,3} (bound|cap)", notes, re.I)
    return found is not None and re.search(r"\b(may|might|could|possibly)\b", found.group(), re.I) is None


def shipped() -> Path:
    """The published measurements dlperf ships (package data), each row with its source."""
    return Path(__file__).resolve().parent.parent / "data" / "gpu_dev.csv"


_WHOLE = re.compile(r"[0-9]+", re.ASCII)
_UNDECODED = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as surrogateescape keeps it
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)

# The published name, matched in order (first wins), to the dlperf workload and its family in the summaries.
MODELS: tuple[tuple[str, str, str], ...] = (
    (r"^ResNet-50 v1\.5", "resnet-50-v1.5", "ResNet-50"),
    (r"^ResNet-50 \(fb\.resnet\.torch", "resnet-50-v1.5", "ResNet-50"),  # fb.resnet.torch strides the 3x3: v1.5
    (r"^ResNet-50( v1)?$", "resnet-50-v1", "ResNet-50"),
    (r"^ResNet-(18|34|101|152)\b", "resnet-{0}", "ResNet (ImageNet)"),
    (r"^VGG-?16", "vgg-16", "VGG"),
    (r"^VGG-?19", "vgg-19", "VGG"),
    (r"^Inception-?V3", "inception-v3", "Inception"),
    (r"^AlexNet", "alexnet-owt", "AlexNet"),
    (r"^GNMT", "gnmt", "GNMT (LSTM)"),
    (r"^AWD-LSTM", "awd-lstm", "AWD-LSTM"),
    (r"^ResNet-164 bottleneck", "resnet-164", "CIFAR ResNet"),
    (r"^ResNet-164 no-bottleneck", "resnet-164-basic", "CIFAR ResNet"),
    (r"^ResNet-(20|32|44|56|110)\b", "resnet-{0}", "CIFAR ResNet"),
    (r"^ResNet-9\b", "resnet-9", "CIFAR ResNet"),
    (r"^MLP 784-512-512-10", "mlp-mnist", "MLP"),
)


@dataclass(frozen=True)
class Case:
    line: int  # the row's line in its file
    gpu: GPU
    model: str  # as published
    workload: str  # dlperf's
    family: str
    mode: str  # fp32 | tf32 | bf16 | fp16
    batch: int
    measured_s: float  # seconds per step, from the published figure
    phases: tuple[str, ...] | None  # None: the whole step; ("forward", "backward") for a figure without the update
    transfer: bool  # the batch comes from the host each step
    seq_len: int | None  # token models: the sequence length counted
    framework: str
    source: str
    scope: str = ""  # why the row's figure is out of scope (its `scope` column); "" in scope

    @property
    def in_scope(self) -> bool:
        return not self.scope


@dataclass(frozen=True)
class Skipped:
    line: int
    model: str
    gpu: str
    reason: str
    bad: bool = False  # the row does not parse (else: dlperf cannot predict it)
    mode: str = ""  # its precision's mode (`mode_of`), where the row parses
    of_gpu: bool = False  # the reason is the row's GPU (`skipped_lines` names it and the line, not the model)


def read(path: str | Path, known: Callable[[str], bool] = lambda name: True) -> tuple[list[Case], list[Skipped]]:
    """Every row of the CSV at `path` as a Case or a Skipped, in order; `known(workload)` says whether dlperf builds
    it. A file that cannot be read, is not UTF-8, has none of the columns, or is over `MAX_ROWS` rows or `MAX_LINE`
    characters a line is a UsageError."""
    try:
        # undecodable bytes kept as lone surrogates, so that `_lines` names the line that holds them
        f = open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")  # noqa: SIM115 - closed below
    except OSError as e:
        raise UsageError(f"--validate {path}: cannot read it ({e.strerror or e})") from None
    with f:
        reader = csv.DictReader(_lines(f, path))
        try:
            return _rows(reader, path, known)
        except (csv.Error, OSError) as e:
            raise UsageError(f"--validate {path}: line {reader.line_num}: cannot read it ({e})") from None


def _lines(f, path: str | Path) -> Iterator[str]:
    """The file's lines, each at most MAX_LINE characters (one line may not hold the file), each UTF-8 text."""
    number = 0
    while line := f.readline(MAX_LINE + 1):
        number += 1
        if len(line) > MAX_LINE:
            raise UsageError(f"--validate {path}: line {number} is longer than {MAX_LINE:,} characters: not a "
                             "measurements CSV")  # fmt: skip
        if bad := _UNDECODED.search(line):
            byte = bytes([ord(bad.group()) - 0xDC00])
            raise UsageError(f"--validate {path}: line {number} is not UTF-8 text (byte {byte!r}); save the file as "
                             "UTF-8")  # fmt: skip
        yield line


def _rows(reader: csv.DictReader, path, known) -> tuple[list[Case], list[Skipped]]:
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise UsageError(f"--validate {path}: not a measurements CSV (no column {', '.join(missing)})")
    cases, skipped = [], []
    for n, row in enumerate(reader, start=1):
        if n > MAX_ROWS:
            raise UsageError(f"--validate {path}: more than {MAX_ROWS:,} rows (a file of published measurements has "
                             "hundreds); split it")  # fmt: skip
        line = reader.line_num  # the line the row ends on: blank lines and quoted line breaks counted
        try:
            found = case(line, row, known)
        except ValueError as e:
            found = Skipped(line, _shown(row.get("model")), _shown(row.get("gpu")), str(e), bad=True)
        (cases if isinstance(found, Case) else skipped).append(found)
    return cases, skipped


def skipped_lines(skipped: Iterable[Skipped]) -> list[str]:
    """The rows not predicted: each bad row with its line, then the others by reason, each reason with the models it
    skipped, or for a GPU dlperf does not know the GPUs and their lines ("skipped 1: the GPU is not in dlperf's
    table: A100x (line 2)": it named the row's model)."""
    lines = [f"bad row, line {s.line} ({s.model or '?'} on {s.gpu or '?'}): {s.reason}" for s in skipped if s.bad]
    reasons: dict[str, list] = {}
    for s in skipped:
        if not s.bad:
            reasons.setdefault(s.reason, []).append(s)
    for reason, rows in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
        named = [f"{s.gpu} (line {s.line})" if s.of_gpu else s.model for s in rows]
        lines.append(f"skipped {len(rows)}: {reason}: {', '.join(dict.fromkeys(named))}")
    return lines


def _shown(text: str | None, most: int = 80) -> str:
    """A cell's text as a message quotes it: stripped, and cut at `most` characters."""
    text = (text or "").strip() if isinstance(text, str) else ""
    return text if len(text) <= most else text[: most - 1] + "…"


def case(line: int, row: dict[str, str | None], known: Callable[[str], bool]) -> Case | Skipped:
    """One row. ValueError: the row is bad; a Skipped: dlperf cannot predict it."""
    get = {k: _text(row.get(k)) for k in (*COLUMNS, "task", "framework", "source", "notes", "scope")}
    model, gpu_name = get["model"], get["gpu"]
    if not model or not gpu_name:
        raise ValueError("no model or no gpu")
    for column in NAMED:
        if get[column].startswith(FORMULA_START):
            raise ValueError(f"{column} {_shown(get[column])!r} starts as a spreadsheet formula does, not as a name")
    value = _positive(get["value"], "value")
    scope = _scope(get["scope"])
    workload, family = _workload(model)
    mode = mode_of(get["precision"]) or ""
    if workload is None or not known(workload):
        return Skipped(line, _shown(model), _shown(gpu_name), "dlperf does not build this network", mode=mode)
    if not mode:
        return Skipped(line, _shown(model), _shown(gpu_name), f"precision {_shown(get['precision'])!r} is not "
                       f"predicted (dlperf predicts {', '.join(MODES)})")  # fmt: skip
    if not get["batch_per_gpu"]:
        return Skipped(line, _shown(model), _shown(gpu_name), "no batch size published", mode=mode)
    batch = _batch(get["batch_per_gpu"])
    try:
        gpu = lookup(gpu_name, "")
    except AmbiguousGPU as e:  # "A100": said as --gpu A100 says it, not as a GPU the table lacks
        return Skipped(line, _shown(model), _shown(gpu_name), f"the GPU name {e}", mode=mode, of_gpu=True)
    except UsageError:
        return Skipped(line, _shown(model), _shown(gpu_name), "the GPU is not in dlperf's table", mode=mode,
                       of_gpu=True)  # fmt: skip
    seq_len = GNMT_TOKENS if workload == "gnmt" else BPTT if workload == "awd-lstm" else None
    converted = _seconds_per_step(get, value, batch, seq_len)
    if isinstance(converted, str):
        return Skipped(line, _shown(model), _shown(gpu_name), converted, mode=mode)
    seconds, phases = converted
    synthetic = re.search(r"synthetic|random input", get["task"], re.I) is not None
    return Case(
        line, gpu, model, workload, family, mode, batch, seconds, phases, not synthetic, seq_len, get["framework"],
        get["source"], scope,
    )  # fmt: skip


def pick(cases: list[Case], skipped: list[Skipped], gpus=None, modes=None) -> tuple[list[Case], list[Skipped]]:
    """The rows on one of `gpus` and in one of `modes` (None: any), as --gpu and --modes pick them beside --validate;
    a row that does not parse is kept whatever it names: the file's fault, said however the rows are picked."""
    names = None if gpus is None else {g.name for g in gpus}

    def wanted(gpu: str, mode: str) -> bool:
        return (names is None or _table_name(gpu) in names) and (modes is None or mode in modes)

    return [c for c in cases if wanted(c.gpu.name, c.mode)], [s for s in skipped if s.bad or wanted(s.gpu, s.mode)]


def _table_name(gpu: str) -> str | None:
    """The name of the table's GPU a row names, None where it names none."""
    try:
        return lookup(gpu, "gpu").name
    except UsageError:
        return None


def scope_rule(row: dict[str, str]) -> str:
    """The `scope` the rule gives a row of the shipped file (its metric, framework and notes): `in` or `out: REASON`."""
    text = {k: _text(row.get(k)) for k in ("metric", "framework", "notes")}
    return next((f"out: {reason}" for reason, test in SCOPE_RULE if test(text)), "in")


def _scope(text: str) -> str:
    """A `scope` cell: "" for `in` (or empty), the reason for `out: REASON`."""
    if text.lower() in ("", "in"):
        return ""
    head, sep, reason = text.partition(":")
    if head.strip().lower() != "out" or not sep or not reason.strip():
        raise ValueError(f"scope {_shown(text)!r} is neither 'in' nor 'out: REASON'")
    return reason.strip()


def _text(cell: str | list | None) -> str:
    """A cell's text, stripped (a row longer than the header puts its extra cells in a list: None's key)."""
    return cell.strip() if isinstance(cell, str) else ""


def _positive(text: str, column: str) -> float:
    """A finite decimal number above 0 in ASCII digits (float() would also take 'nan', 'inf', '1_000' and '٣')."""
    value = float(text) if _DECIMAL.fullmatch(text) else None
    if value is None:
        raise ValueError(f"{column} {_shown(text)!r} is not a number")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{column} {_shown(text)!r} is not a positive number")
    return value


def _batch(text: str) -> int:
    """A batch: a whole number from 1 to MAX_BATCH (1.5 is no batch, and 1e9 samples per GPU no training)."""
    if not _WHOLE.fullmatch(text) or not 1 <= int(text) <= MAX_BATCH:
        raise ValueError(f"batch_per_gpu {_shown(text)!r} is not a whole number from 1 to {MAX_BATCH:,}")
    return int(text)


def _workload(model: str) -> tuple[str | None, str]:
    for pattern, name, family in MODELS:
        m = re.search(pattern, model, re.I)
        if m:
            return name.format(*m.groups()), family
    return None, ""


# TF32 said to be off: "FP32 (TF32 disabled)", "TF32 off", "no TF32", "allow_tf32=False", "NVIDIA_TF32_OVERRIDE=0"
_TF32_OFF = re.compile(r"\b(?:NO|WITHOUT)\s+TF32\b|TF32(?:_OVERRIDE)?\s*[:=]?\s*(?:OFF|DISABLED?|FALSE|0)\b")


def mode_of(precision: str) -> str | None:
    """The dlperf mode of a published precision: TF32, else BF16, else mixed/half precision as fp16 ("AMP", "Mixed
    precision", as dlperf predicts mixed precision: it was skipped as not predicted), else FP32 (or float32, single,
    or TF32 said to be off: "FP32 (TF32 disabled)" was scored as tf32); None for any other (INT8, FP8, none given): a
    precision dlperf does not predict, whose row is skipped saying so, never scored as fp32."""
    said = precision.upper()
    p = _TF32_OFF.sub(" ", said)
    if "TF32" in p:
        return "tf32"
    if "BF16" in p or "BFLOAT16" in p:
        return "bf16"
    if "AMP" in p or "FP16" in p or "HALF" in p or "FLOAT16" in p or "MIXED" in p:
        return "fp16"
    if "FP32" in p or "FLOAT32" in p or "SINGLE" in p or p != said:  # the last: TF32 said to be off
        return "fp32"
    return None


def _seconds_per_step(get: dict[str, str], value: float, batch: int, seq_len: int | None):
    """(seconds per step, phases) of a row's figure, or why it cannot be converted."""
    metric, unit, task = get["metric"], get["unit"].lower(), get["task"]
    if metric == "train_throughput":
        if unit in ("img/s", "samples/s"):
            return batch / value, None
        if unit == "tok/s" and seq_len:
            return batch * 2 * seq_len / value, None
        return f"a throughput in {unit} is not converted to steps"
    if metric == "fwd_bwd_time_per_batch":
        scale = {"ms": 1e-3, "s": 1.0}.get(unit)
        return (value * scale, ("forward", "backward")) if scale else f"a time in {unit}"
    if metric in ("epoch_time", "time_to_train_24ep") and unit == "s":
        epochs = 24 if metric == "time_to_train_24ep" else 1
        steps = _steps_per_epoch(task, batch)
        return (value / (epochs * steps), None) if steps else "the data set's size per epoch is not known"
    return f"the metric {metric} ({unit}) is not converted to steps"


def _steps_per_epoch(task: str, batch: int) -> float | None:
    for name, tokens in TOKENS.items():
        if name in task:
            return tokens / (batch * BPTT)
    for name, images in IMAGES.items():
        if name in task:
            return math.ceil(images / batch)
    return None


# ----------------------------------------------------------------------------------------------------------------------
# The error


@dataclass(frozen=True)
class Result:
    case: Case
    prediction: Prediction

    @property
    def predicted_s(self) -> float:
        return self.prediction.step_s

    @property
    def error(self) -> float:
        return relative_error(self.predicted_s, self.case.measured_s)


def relative_error(predicted_s: float, measured_s: float) -> float:
    """Signed relative error of a predicted step time (+0.10: predicted 10% slower than measured or published)."""
    return predicted_s / measured_s - 1


@dataclass(frozen=True)
class Summary:
    group: str
    rows: int
    median_abs_pct: float
    mean_abs_pct: float
    median_pct: float  # signed: a bias towards too slow (+) or too fast (-)


def summarize(results: Iterable[Result], key: Callable[[Result], str] = lambda r: "all") -> list[Summary]:
    groups: dict[str, list[float]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r.error * 100)
    return [
        Summary(name, len(errs), statistics.median(map(abs, errs)), statistics.fmean(map(abs, errs)),
                statistics.median(errs))
        for name, errs in sorted(groups.items())
    ]  # fmt: skip


def percentile_abs(results: Iterable[Result], q: float) -> float:
    errs = sorted(abs(r.error) * 100 for r in results)
    return errs[min(len(errs) - 1, max(0, math.ceil(q * len(errs)) - 1))] if errs else float("nan")


@cache
def coverage() -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """What the predictor's uncertainty (`roofline.uncertainty()`, fitted and held out on the shipped measurements in
    scope) was measured on: the networks (their `Workload.arch`: resnet-50 is the ResNet the rows' resnet-50-v1.5 is),
    their families, the GPU generations and the modes of the shipped rows in scope dlperf predicts. The rows out of
    scope (epoch wall times, 2015-17 software) neither fit the efficiencies nor count in the band."""
    from dlperf.predict.gpus import GENERATIONS
    from dlperf.workloads import BUILTIN

    cases, _ = read(shipped(), known=lambda name: name in BUILTIN)
    cases = [c for c in cases if c.in_scope]
    generations = {c.gpu.generation for c in cases}
    return (frozenset(BUILTIN[c.workload].arch for c in cases), tuple(sorted({c.family for c in cases})),
            tuple(g for g in GENERATIONS if g in generations), tuple(sorted({c.mode for c in cases})))  # fmt: skip


def caveats(workload, gpus, modes, predictions) -> list[str]:
    """What a reader of predictions must know to read them (`dlperf predict`'s notes and `dlperf advise`'s): where
    they lie outside what the uncertainty was measured on (`scope_note`), what fp32 means on a GPU with TF32 units,
    and the GPUs whose step the host's launches bound."""
    from dlperf.predict.roofline import fp32_note, launch_note

    notes = [scope_note(workload, gpus, modes)]
    tf32 = [g for g in gpus if g.tf32] if "fp32" in modes else []
    notes.append(fp32_note(tf32) if tf32 else None)
    launch = list(dict.fromkeys(p.gpu for p in predictions if p.bound == "launch"))
    notes.append(launch_note(launch) if launch else None)
    return [n for n in notes if n]


def scope_note(workload, gpus, modes) -> str | None:
    """One note where a prediction lies outside what the uncertainty was measured on (`coverage`): a user's model or a
    network no published row measures, a GPU of a generation none of the rows is, a mode none is in; None inside."""
    from dlperf.predict.roofline import named

    archs, families, generations, measured_modes = coverage()
    outside = []
    if workload.is_user or workload.arch not in archs:
        outside.append(f"{workload.name} ({'your model' if workload.is_user else 'a network none of them is'})")
    by_generation: dict[str, list[str]] = {}
    for g in gpus:
        if g.generation not in generations:
            by_generation.setdefault(g.generation, []).append(g.name)
    outside += [f"{gen} ({named(names, 3)}: no GPU of it measured)" for gen, names in by_generation.items()]
    unmeasured = [m for m in dict.fromkeys(modes) if m not in measured_modes]
    outside += [f"{m} (no row in it)" for m in unmeasured]
    if not outside:
        return None
    return (f"the uncertainty was measured on published steps of {', '.join(families)} networks on "
            f"{', '.join(generations)} GPUs in {', '.join(measured_modes)}; outside that here: {'; '.join(outside)}: "
            "there the error is not known and may be larger")  # fmt: skip
