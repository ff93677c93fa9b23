"""`dlperf compare`: what data each side's cell read, apart from its model. Two runs over different data compare,
with one line saying so: a ratio of steps that read different folders, or datasets of different sizes, measures the
data too. A user workload records its folder and its dataset's size in its definition (`extra`); a built-in
workload's loader cells read the run's --data DIR (its `spec.data`), which the cells themselves do not record, nor
the image folder found in it (`read_folder`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dlperf.errors import UsageError
from dlperf.store.records import CellRecord

# where a stored user workload keeps the folder its factory read: --data DIR, or the factory's own default without it
DATA_FOLDER = ("data_dir", "default_data_dir")
# of a user workload's `extra`, what is its data, not its model: the folder, and len(dataset=) (an epoch's samples)
DATA_KEYS = (*DATA_FOLDER, "dataset_samples")


def without_data(spec: dict[str, Any]) -> dict[str, Any]:
    """A workload's definition less what its data is (`DATA_KEYS`): its model, which `model_note` compares."""
    extra = {k: v for k, v in (spec.get("extra") or {}).items() if k not in DATA_KEYS}
    return {**spec, "extra": extra}


def data_note(a: CellRecord, b: CellRecord, runs: tuple[str | None, str | None] = (None, None)) -> str | None:
    """One line when the two cells read different data: a user workload's --data DIR, or without it the folder its
    factory's `data_dir` defaulted to, as the run recorded it (`plan.workloads.resolve_workload`), and its dataset's
    size; a built-in workload's loader cell, what it read of its run's --data DIR (`runs`, A's and B's; `loader_folder`:
    a pair over two folders was compared with no word of it, where a user workload's said so). None when both read the
    same, or neither says."""
    folders = [_data_folder(c.workload_spec) or loader_folder(c, run) for c, run in zip((a, b), runs, strict=True)]
    sizes = [(c.workload_spec.get("extra") or {}).get("dataset_samples") for c in (a, b)]
    resized = all(sizes) and sizes[0] != sizes[1]
    if folders[0] == folders[1] and not resized:
        return None
    read = [folder or "the folder its factory chose, which the run does not record" for folder in folders]
    if folders[0] == folders[1]:  # one folder, or none recorded: the size alone differs
        read = [
            f"{n:,} samples" + (f" of {folder}" if folder else "") for n, folder in zip(sizes, folders, strict=True)
        ]
    elif resized:
        read = [f"{where} ({n:,} samples)" for where, n in zip(read, sizes, strict=True)]
    differs = "differs" if all(folders) or resized else "may differ"
    return f"{a.workload}: the data {differs}: A read {read[0]}, B read {read[1]}; each ratio compares the data too"


def run_data(spec: dict[str, Any]) -> str | None:
    """The folder a run's --data named (absolute, as stored), None for synthetic data or `--data dataset`."""
    from dlperf.loaders import DATA_DATASET, DATA_SYNTHETIC

    data = spec.get("data")
    return data if data and data not in (DATA_SYNTHETIC, DATA_DATASET) else None


def read_apart(cells: tuple[list[CellRecord], list[CellRecord]], data: tuple[str | None, ...]) -> list[str] | None:
    """The folders two runs (their cells, their --data: `run_data`) read where a loader cell both measured ok read
    different ones: a pair sharing only cells on synthetic data read neither --data, so theirs is no difference."""
    later = {c.key: c for c in cells[1] if c.ok and c.loader}
    for cell in (c for c in cells[0] if c.ok and c.key in later):
        read = [loader_folder(c, run) for c, run in zip((cell, later[cell.key]), data, strict=True)]
        if all(read) and read[0] != read[1]:
            return read
    return None


def loader_folder(cell: CellRecord, data: str | None) -> str | None:
    """The folder a built-in workload's loader cell read of its run's --data DIR (`data`, `run_data`), None for a
    cell without a loader: `read_folder` where it read an image folder (or its record does not say what it read)."""
    from dlperf.workloads.datasets import imagefolder

    if not cell.loader or not data:
        return None
    dataset = cell.data.dataset if cell.data else None
    return read_folder(data) if dataset in (None, imagefolder.NAME) else _real(data)


def read_folder(data: str | None) -> str | None:
    """The image folder --data DIR reads (`imagefolder.folder`: DIR/imagenet/train, DIR/train or DIR itself),
    links resolved: `--data goodlink` (a link to good, which holds train/) and `--data good/train` read one folder,
    as each run said, where their --data differ. A run stores DIR, not the folder it found there: DIR itself where it
    is gone or can no longer be read so (a folder that now holds both)."""
    from dlperf.workloads.datasets import imagefolder

    if not data:
        return None
    try:
        return _real(str(imagefolder.folder(Path(data))))
    except (UsageError, OSError):
        return _real(data)


def _data_folder(spec: dict[str, Any]) -> str | None:
    extra = spec.get("extra") or {}
    return _real(next((extra[k] for k in DATA_FOLDER if extra.get(k)), None))


def _real(folder: str | None) -> str | None:
    return os.path.realpath(folder) if folder else None
