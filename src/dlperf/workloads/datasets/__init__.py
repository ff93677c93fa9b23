"""Readers and writers of the datasets' standard on-disk formats (MNIST's IDX, CIFAR-10's python batches, PTB's
text), so `--data DIR` reads what people download and `dlperf data synth` writes what those readers read.

Standard library only, returning plain buffers, shapes and label lists: a child process loads them, perhaps in a
framework's own environment without numpy. Bad data is a `UsageError` of one line naming the file."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from dlperf.errors import UsageError

# `dlperf data synth --only` names of the datasets the readers look for (`synth.DATASETS`)
SYNTH_NAMES = {"MNIST": "mnist", "CIFAR-10": "cifar10", "the Penn Treebank": "ptb"}


def missing(directory: Path, wanted: str, dataset: str, expected: Sequence[str]) -> UsageError:
    return UsageError(f"{directory}: no {wanted} ({dataset} expects {', '.join(expected)})")


def find(directory: Path, places: Sequence[str], holds: Callable[[Path], bool], wanted: str, dataset: str,
         expected: Sequence[str]) -> Path:  # fmt: skip
    """The first of `places` under `directory` ("" is `directory` itself) that `holds` the dataset: where the common
    tools put it (torchvision, Keras' cache, the dataset's own archive). None: a UsageError naming every place."""
    for place in places:
        if holds(candidate := directory / place):
            return candidate
    searched = ", ".join(str(directory / place) for place in places)
    synth = SYNTH_NAMES.get(dataset)
    hint = f"; `dlperf data synth {directory} --only {synth}` writes a random one to try" if synth else ""
    raise UsageError(f"{directory}: no {wanted}; searched {searched} ({dataset} expects {', '.join(expected)}){hint}")


def malformed(path: Path, why: str) -> UsageError:
    return UsageError(f"{path}: {why}")


def check_labels(path: Path, labels: Iterable[object], classes: int, network: str) -> None:
    """Every label an integer from 0 to classes - 1 (`network`'s classes), else a UsageError naming the file, the
    first label out of range and its sample: never a label a loss would index out of range or train silently."""
    for i, label in enumerate(labels):
        if type(label) is not int or not 0 <= label < classes:
            raise malformed(path, f"label {label!r} of image {i} is out of range for {network}'s {classes} classes "
                                  f"(0 to {classes - 1})")  # fmt: skip
