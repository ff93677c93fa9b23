"""What the user asked for, parsed and validated once, at the edge. Bad input stops here with a message naming the flag.

Nothing here imports a framework: checks that need one (does this device exist? does this factory build?) are made by
the probe child, in `dlperf.runner.probe`.
"""

from __future__ import annotations

import difflib
import math
import re
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dlperf.errors import UsageError
from dlperf.loaders import DATA_DATASET, DATA_SYNTHETIC
from dlperf.measure.timer import TimerConfig
from dlperf.modes import MODE_ORDER, Mode, exclusive_groups
from dlperf.vocab import DeviceKind, Framework
from dlperf.workloads import BUILTIN, SUITE
from dlperf.workloads.user import looks_like_source, normalize_source

# `dlperf optimize`'s defaults (here, so that its --help needs no search code)
OPTIMIZE_BUDGET_MIN = 15.0
OPTIMIZE_TIMER = TimerConfig(min_steps=10, min_time=2.0, max_time=10.0, max_warmup=30)
CROSSOVER_TIMER = TimerConfig(min_steps=5, min_time=0.5, max_time=10.0, max_warmup=10)  # `dlperf crossover`: many cells

_DEVICE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")
# ASCII digits only: int() and float() also take '٣', '３', '1_000', 'nan' and 'inf', none of which a flag means
_WHOLE = re.compile(r"[+-]?[0-9]+", re.ASCII)
DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)
INT64_MAX = 2**63 - 1  # SQLite's largest integer: a stored count or id beyond it cannot be written
MAX_SECONDS = threading.TIMEOUT_MAX  # the longest wait the platform can make (about 292 years)


@dataclass(frozen=True)
class RunSpec:
    workloads: tuple[str, ...]  # built-in names, or normalized `file.py:factory` sources
    frameworks: tuple[str, ...] = ("torch",)
    devices: tuple[str, ...] | None = None  # None: cpu and every visible accelerator
    threads: tuple[int, ...] | None = None  # None: 1, 2, 4, ... up to the cores
    modes: tuple[str, ...] = (Mode.FP32.value,)
    repeats: int = 1  # fresh processes per cell, interleaved with the other cells
    timeout: float = 600.0  # seconds per child process, start-up included
    compile_timeout: float | None = None  # seconds for a compiled cell's first step (compilation); None: no own limit
    pin: bool = False  # pin each child to `threads` cores of the allowed affinity mask
    loss_check: bool = True  # every mode but fp32 also checks that it still trains (untimed)
    timer: TimerConfig = field(default_factory=TimerConfig)
    nprocs: tuple[int, ...] | None = None  # DDP processes per node, e.g. (1, 2); None: plain cells, no DDP
    scaling: str = "strong"  # DDP: "strong" splits the protocol's total batch, "weak" gives each process the batch
    parallel: tuple[str, ...] = ()  # with nprocs: the strategies (`dlperf.parallel`); (): each framework's default
    microbatches: tuple[int, ...] = ()  # a pipeline's micro-batches per step; (): `parallel.DEFAULT_MICROBATCHES`
    nnodes: int = 1  # DDP over several machines: each runs the same command with its --node-rank
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # host:port of torchrun's c10d rendezvous; None on one node
    profile: bool = False  # after each cell's timed processes, one untimed profiled process (`runner/profile.py`)
    profile_steps: int = 5  # profiled steps of that process
    trace_dir: str | None = None  # where its gzip Chrome traces go (None: beside the database, `<db>.traces`)
    nvtx: bool = False  # NVTX ranges around each step's phases, for an Nsight Systems capture (not in the cell key)
    data: str = DATA_SYNTHETIC  # "synthetic", "dataset" (a user workload's own), or the datasets' directory, absolute
    loaders: tuple[str, ...] | None = None  # with real data: the loader settings measured; None: `default_loaders`
    predict: bool = True  # each plain GPU cell's step predicted for its GPU before any cell runs (predict/cells.py)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> RunSpec:
        d = dict(d)
        d["timer"] = TimerConfig(**d["timer"])
        for key in ("workloads", "frameworks", "devices", "threads", "modes", "nprocs", "loaders", "parallel",
                    "microbatches"):  # fmt: skip
            if d.get(key) is not None:
                d[key] = tuple(d[key])
        return cls(**d)


def split_list(text: str, flag: str) -> list[str]:
    items = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise UsageError(f"{flag} {text!r}: expected a comma-separated list")
    return items


def whole_number(text: str, flag: str, least: int = 0, most: int = INT64_MAX) -> int:
    """A whole number in ASCII digits from `least` to `most`; anything else is a UsageError naming the flag."""
    value = int(text) if _WHOLE.fullmatch(text.strip()) else None
    if value is None or not least <= value <= most:
        bounds = f"from {least} to {most}" if most < INT64_MAX else f"of at least {least}"
        if value is not None and value > most == INT64_MAX:
            bounds = f"at most {most} (SQLite's largest integer)"
        raise UsageError(f"{flag} {text!r}: expected a whole number {bounds} in ASCII digits")
    return value


def real_number(text: str, flag: str, least: float = 0.0, most: float = MAX_SECONDS, above: bool = True) -> float:
    """A finite decimal number in ASCII digits, above `least` (or from it, when not `above`) and at most `most`."""
    value = float(text) if DECIMAL.fullmatch(text.strip()) else math.nan
    if not (math.isfinite(value) and (value > least if above else value >= least) and value <= most):
        bounds = f"{'above' if above else 'of at least'} {least:g} and at most {most:g}"
        raise UsageError(f"{flag} {text!r}: expected a finite number {bounds} in ASCII digits")
    return value


def positive_ints(text: str, flag: str) -> list[int]:
    values = []
    for item in split_list(text, flag):
        try:
            values.append(whole_number(item, flag, least=1))
        except UsageError:
            raise UsageError(f"{flag} {text!r}: {item!r} is not a positive whole number") from None
    return values


def parse_threads(text: str) -> tuple[int, ...]:
    return tuple(dict.fromkeys(positive_ints(text, "--threads")))


def parse_nprocs(text: str) -> tuple[int, ...]:
    return tuple(dict.fromkeys(positive_ints(text, "--nproc")))


SCALING = ("strong", "weak")


def parse_scaling(text: str) -> str:
    if text not in SCALING:
        raise UsageError(f"--scaling {text!r}: expected strong (the total batch split) or weak (each process's fixed)")
    return text


def parse_devices(text: str) -> tuple[str, ...]:
    devices = []
    for item in split_list(text, "--devices"):
        item = item.lower()
        if not _DEVICE.match(item):
            raise UsageError(f"--devices: unknown device {item!r} (expected cpu, cuda, cuda:N or mps)")
        devices.append(item)
    return tuple(dict.fromkeys(devices))


def parse_frameworks(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(split_list(text, "--frameworks")))
    known = [f.value for f in Framework]
    for name in names:
        if name not in known:
            raise UsageError(f"--frameworks: unknown framework {name!r}{suggest(name, known)}")
    return names


def parse_modes(text: str) -> tuple[str, ...]:
    """Comma-separated modes, each components joined by '+', put in one canonical order."""
    return tuple(dict.fromkeys(canonical_mode(m) for m in split_list(text, "--modes")))


def canonical_mode(text: str) -> str:
    known = [m.value for m in MODE_ORDER]
    parts = [p.strip().lower() for p in text.split("+")]
    for part in parts:
        if part not in known:
            raise UsageError(f"--modes: unknown mode {part!r} in {text!r} (components: {', '.join(known)})")
    for group, members in exclusive_groups().items():
        if sum(p in members for p in parts) > 1:
            raise UsageError(f"--modes {text!r}: at most one {group} ({', '.join(m.value for m in members)})")
    ordered = [m.value for m in MODE_ORDER if m.value in parts]
    if len(ordered) > 1 and Mode.FP32.value in ordered:
        ordered.remove(Mode.FP32.value)  # fp32 is implied: `fp32+channels_last` is `channels_last`
    return "+".join(ordered)


def parse_workloads(text: str | None) -> tuple[str, ...]:
    if text is None:
        return tuple(w.name for w in SUITE)
    names = []
    for item in split_list(text, "--workloads"):
        if looks_like_source(item):
            names.append(normalize_source(item))
        elif item.lower() in BUILTIN:
            names.append(item.lower())
        else:
            raise UsageError(f"--workloads: unknown workload {item!r}{suggest(item, BUILTIN)}")
    return tuple(dict.fromkeys(names))


def parse_data(text: str) -> str:
    """--data: `synthetic`, `dataset` (each user workload's own), or a directory that exists, made absolute (the
    children run elsewhere). What a workload needs in it is checked by the child that reads it."""
    if text in (DATA_SYNTHETIC, DATA_DATASET):
        return text
    path = Path(text).expanduser()
    if not path.is_dir():
        raise UsageError(f"--data {text!r}: no such directory (expected synthetic, dataset, or a directory of "
                         "datasets, as `dlperf data synth DIR` writes)")  # fmt: skip
    return str(path.resolve())


def suggest(word: str, choices) -> str:
    """' (did you mean ...?)' for the closest names, ignoring case and punctuation."""

    def squash(s: str) -> str:
        return re.sub(r"[^a-z0-9]", "", s.lower())

    by_squashed = {squash(c): c for c in choices}
    close = difflib.get_close_matches(squash(word), list(by_squashed), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(by_squashed[c]) for c in close)}?)" if close else ""


def device_kind(device: str) -> DeviceKind:
    return DeviceKind(device.split(":")[0])
