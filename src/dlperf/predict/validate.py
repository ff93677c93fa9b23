"""Published single-GPU training measurements, read as steps dlperf can predict, and the prediction's error on them.

A row (the columns of shared/reference/gpu_dev.csv: gpu, model, task, framework, precision, batch_per_gpu, metric,
value, unit, source, notes) becomes a `Case`: a dlperf workload at the row's batch and mode on a GPU of the table,
and the published figure as seconds per step:
- train_throughput in img/s or samples/s: batch / value; in tok/s (GNMT): batch x 2 x `GNMT_TOKENS` / value (the
  source's and the target's tokens; WMT16 En-De sentences average about 30 sub-word tokens after bucketing);
- epoch_time in s: value / steps per epoch (CIFAR-10 50,000 images, MNIST 60,000, Penn Treebank 929,589 and
  WikiText-2 2,088,628 training tokens at 70 per sequence);
- time_to_train_24ep in s: value / (24 epochs of CIFAR-10);
- fwd_bwd_time_per_batch in ms: forward and backward only (the optimizer's phase is left out of the prediction).
Rows on synthetic or random input make their data on the GPU (no host copy is predicted); others copy each batch.
A row whose network dlperf does not build, or without a batch size, is skipped with the reason; a row that does not
parse (a missing column, a value that is not a positive number) is bad, with the reason; neither stops the others.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import UsageError
from dlperf.predict.gpus import GPU, lookup
from dlperf.predict.roofline import Prediction

COLUMNS = ("gpu", "model", "precision", "batch_per_gpu", "metric", "value", "unit")
GNMT_TOKENS = 30  # sub-word tokens per sentence and side, WMT16 En-De as bucketed for training
TOKENS = {"PTB": 929_589, "WikiText-2": 2_088_628}
BPTT = 70
IMAGES = {"CIFAR-10": 50_000, "MNIST": 60_000}

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


@dataclass(frozen=True)
class Skipped:
    line: int
    model: str
    gpu: str
    reason: str
    bad: bool = False  # the row does not parse (else: dlperf cannot predict it)


def read(path: str | Path, known: Callable[[str], bool] = lambda name: True) -> tuple[list[Case], list[Skipped]]:
    """Every row of the CSV at `path` as a Case or a Skipped; `known(workload)` says whether dlperf builds it. A file
    that cannot be read, or has none of the columns, is a UsageError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--validate {path}: cannot read it ({e.strerror or e})") from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise UsageError(f"--validate {path}: not a measurements CSV (no column {', '.join(missing)})")
    cases, skipped = [], []
    for n, row in enumerate(reader, start=2):
        try:
            found = case(n, row, known)
        except ValueError as e:
            found = Skipped(n, (row.get("model") or "").strip(), (row.get("gpu") or "").strip(), str(e), bad=True)
        (cases if isinstance(found, Case) else skipped).append(found)
    return cases, skipped


def case(line: int, row: dict[str, str | None], known: Callable[[str], bool]) -> Case | Skipped:
    """One row. ValueError: the row is bad; a Skipped: dlperf cannot predict it."""
    get = {k: (row.get(k) or "").strip() for k in (*COLUMNS, "task", "framework", "source", "notes")}
    model, gpu_name = get["model"], get["gpu"]
    if not model or not gpu_name:
        raise ValueError("no model or no gpu")
    value = _positive(get["value"], "value")
    workload, family = _workload(model)
    if workload is None or not known(workload):
        return Skipped(line, model, gpu_name, "dlperf does not build this network")
    if not get["batch_per_gpu"]:
        return Skipped(line, model, gpu_name, "no batch size published")
    batch = int(_positive(get["batch_per_gpu"], "batch_per_gpu"))
    try:
        gpu = lookup(gpu_name, "gpu")
    except UsageError:
        return Skipped(line, model, gpu_name, "the GPU is not in dlperf's table")
    seq_len = GNMT_TOKENS if workload == "gnmt" else BPTT if workload == "awd-lstm" else None
    converted = _seconds_per_step(get, value, batch, seq_len)
    if isinstance(converted, str):
        return Skipped(line, model, gpu_name, converted)
    seconds, phases = converted
    synthetic = re.search(r"synthetic|random input", get["task"], re.I) is not None
    return Case(
        line, gpu, model, workload, family, mode_of(get["precision"]), batch, seconds, phases, not synthetic,
        seq_len, get["framework"], get["source"],
    )  # fmt: skip


def _positive(text: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{column} {text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{column} {text!r} is not a positive number")
    return value


def _workload(model: str) -> tuple[str | None, str]:
    for pattern, name, family in MODELS:
        m = re.search(pattern, model, re.I)
        if m:
            return name.format(*m.groups()), family
    return None, ""


def mode_of(precision: str) -> str:
    """The dlperf mode of a published precision: TF32, else mixed/half precision as fp16, else fp32."""
    p = precision.upper()
    if "TF32" in p:
        return "tf32"
    if "BF16" in p:
        return "bf16"
    if "AMP" in p or "FP16" in p or "HALF" in p:
        return "fp16"
    return "fp32"


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
