"""The input pipeline as a dimension of a cell: where a step's batch comes from, and how it is loaded.

A cell's `loader` is "" for the paper's setting (one synthetic batch, made once on the device: what Table 7 times),
or a loader setting that reads the real dataset (`--data DIR`) through `torch.utils.data.DataLoader`:

    w2+pin+pf4+persist    2 worker processes, pinned host memory, 4 batches prefetched per worker, workers kept
                          alive between epochs; `w0` loads in the training process itself

Standard library only: the parent plans with it, a child reads it, the views order settings by it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import UsageError

SYNTHETIC = ""  # the cell's loader: one synthetic batch on the device, no loader at all
DATA_SYNTHETIC = "synthetic"  # --data's default
DATA_DATASET = "dataset"  # --data dataset: a user workload's own Dataset or DataLoader factory

# The input-bound verdict: the share of a step spent waiting for data (`--data`): moderate from 5%, high from 20%.
INPUT_BOUND_MODERATE = 0.05
INPUT_BOUND_HIGH = 0.20
# A loader setting is enough when its data wait is under INPUT_BOUND_MODERATE of the step, or when the step with it
# reaches this share of the synthetic step's throughput while waiting under INPUT_BOUND_HIGH of it.
ENOUGH_OF_SYNTHETIC = 0.95
# Fewer batches than this in an epoch: workers that do not persist start again often enough to be timed.
SHORT_EPOCH = 20

_PART = re.compile(r"^(w(?P<workers>[0-9]+)|(?P<pin>pin)|pf(?P<prefetch>[0-9]+)|(?P<persist>persist))$", re.ASCII)
MAX_WORKERS = 256
MAX_PREFETCH = 64


@dataclass(frozen=True)
class LoaderSetting:
    workers: int = 0  # DataLoader's num_workers: 0 loads in the training process
    pin: bool = False  # pin_memory: batches in page-locked host memory, so the copy to a GPU can be asynchronous
    prefetch: int | None = None  # prefetch_factor: batches each worker loads ahead (None: torch's default, 2)
    persistent: bool = False  # persistent_workers: workers survive the end of an epoch

    def __post_init__(self) -> None:
        if self.workers == 0 and (self.prefetch is not None or self.persistent):
            raise ValueError("prefetch and persistent workers need at least one worker (w1 or more)")

    @property
    def name(self) -> str:
        parts = [f"w{self.workers}"]
        parts += ["pin"] if self.pin else []
        parts += [f"pf{self.prefetch}"] if self.prefetch is not None else []
        parts += ["persist"] if self.persistent else []
        return "+".join(parts)

    @property
    def cost(self) -> tuple[int, int, int, int]:
        """Smallest first: fewer workers, then no pinning, then less prefetch, then no persistent workers. Of settings
        whose steps are not told apart the smallest is recommended: workers take cores and memory from the step."""
        return (self.workers, int(self.pin), self.prefetch or 0, int(self.persistent))

    def torch_kwargs(self) -> dict[str, object]:
        """DataLoader's keyword arguments for this setting."""
        kwargs: dict[str, object] = {"num_workers": self.workers, "pin_memory": self.pin}
        if self.workers:
            kwargs["persistent_workers"] = self.persistent
            if self.prefetch is not None:
                kwargs["prefetch_factor"] = self.prefetch
        return kwargs


def parse_loader(text: str, flag: str = "--loaders") -> LoaderSetting:
    """`w2+pin+pf4+persist` (parts in any order, `w` required) as a setting; a UsageError naming `flag` otherwise."""
    fields: dict[str, object] = {}
    for part in text.strip().lower().split("+"):
        m = _PART.match(part.strip())
        if m is None:
            raise UsageError(
                f"{flag} {text!r}: unknown part {part!r} (expected wN workers, then any of +pin, +pfN, +persist)"
            )
        key = next(k for k, v in m.groupdict().items() if v is not None)
        if key in fields:
            raise UsageError(f"{flag} {text!r}: {part!r} given twice")
        fields[key] = m.group(key)
    if "workers" not in fields:
        raise UsageError(f"{flag} {text!r}: name the workers first, e.g. w2+pin (w0: load in the training process)")
    workers, prefetch = int(str(fields["workers"])), fields.get("prefetch")
    if workers > MAX_WORKERS:
        raise UsageError(f"{flag} {text!r}: at most {MAX_WORKERS} workers")
    if prefetch is not None and not 1 <= int(str(prefetch)) <= MAX_PREFETCH:
        raise UsageError(f"{flag} {text!r}: pfN prefetches 1 to {MAX_PREFETCH} batches per worker")
    try:
        return LoaderSetting(
            workers, "pin" in fields, None if prefetch is None else int(str(prefetch)), "persist" in fields
        )
    except ValueError as exc:
        raise UsageError(f"{flag} {text!r}: {exc}") from None


def parse_loaders(text: str) -> tuple[str, ...]:
    """A comma-separated list of settings, each in its canonical name, duplicates dropped."""
    items = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise UsageError(f"--loaders {text!r}: expected a comma-separated list such as w0,w2,w2+pin")
    return tuple(dict.fromkeys(parse_loader(item).name for item in items))


def setting(name: str) -> LoaderSetting:
    """A cell's stored loader name back as a setting (names come from `parse_loader`, so they parse)."""
    return parse_loader(name, "loader")


def default_loaders(cores: int, gpu: bool) -> tuple[str, ...]:
    """What `--data DIR` measures unless `--loaders` says: every worker count from 0 up to the cores; on a GPU each
    also with pinned memory (on a CPU there is nothing to pin for)."""
    settings = [LoaderSetting(w) for w in range(max(1, cores) + 1)]
    if gpu:
        settings += [LoaderSetting(w, pin=True) for w in range(max(1, cores) + 1)]
    return tuple(s.name for s in sorted(settings, key=lambda s: s.cost))


def enough(wait_share: float | None, step_s: float | None, synthetic_s: float | None) -> bool:
    """Is a loader setting enough? Its step waits under INPUT_BOUND_MODERATE of its time for data, or takes at most
    1/ENOUGH_OF_SYNTHETIC of the synthetic step's time (the same batch: at least 95% of its samples/s) while it waits
    under INPUT_BOUND_HIGH: a step highly input-bound is never enough on throughput alone (on 2 busy cores a w1 that
    waited 53% of its step read 'enough: 2264% of the synthetic step's samples/s', against a disturbed synthetic
    step). `synthetic_s` None: judged on the wait alone."""
    if wait_share is not None and wait_share < INPUT_BOUND_MODERATE:
        return True
    if wait_share is not None and wait_share >= INPUT_BOUND_HIGH:
        return False
    return bool(step_s and synthetic_s and synthetic_s / step_s >= ENOUGH_OF_SYNTHETIC)


def oversubscribed(workers: int, threads: int, cores: int) -> bool:
    """Loader workers and the step's compute threads share the cores: more of both than cores, and they take turns."""
    return workers + threads > cores


def input_bound(wait_share: float | None) -> str | None:
    """The input-bound verdict of a step that waits `wait_share` of its time for data: "high", "moderate" or None."""
    if wait_share is None:
        return None
    if wait_share >= INPUT_BOUND_HIGH:
        return "high"
    return "moderate" if wait_share >= INPUT_BOUND_MODERATE else None


def restarts_every(samples: int | None, batch: int | None, loader: str, batches: int | None = None) -> int | None:
    """The batches of an epoch where it holds fewer than SHORT_EPOCH and `loader`'s workers do not persist: they start
    again every that many steps. None otherwise, or where a size is unknown. `batches`: the loader's own count
    (`len(loader)`, a user's factory keeping its last partial batch or not); without it, the samples' whole batches,
    as dlperf's own DataLoaders read them (`drop_last`: 25 samples are 6 batches of 4, not 7)."""
    epoch = batches or (samples // batch if samples and batch else None)
    found = setting(loader)
    if epoch is None or epoch >= SHORT_EPOCH or not found.workers or found.persistent:
        return None
    return epoch


def keyword_folder(data: str) -> str:
    """`--data synthetic` or `--data dataset` (keywords, never read as a folder) where a folder of that name is in
    the current directory: how to name the folder, said where the keyword is explained; '' otherwise."""
    if data in (DATA_SYNTHETIC, DATA_DATASET) and Path(data).is_dir():
        return f"./{data} is a folder here: --data ./{data} reads it"
    return ""
