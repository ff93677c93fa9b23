"""Readers and writers of the datasets' standard on-disk formats (MNIST's IDX, CIFAR-10's python batches, PTB's
text), so `--data DIR` reads what people download and `dlperf data synth` writes what those readers read.

Standard library only, returning plain buffers, shapes and label lists: a child process loads them, perhaps in a
framework's own environment without numpy. Bad data is a `UsageError` of one line naming the file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dlperf.errors import UsageError


def missing(directory: Path, wanted: str, dataset: str, expected: Sequence[str]) -> UsageError:
    return UsageError(f"{directory}: no {wanted} ({dataset} expects {', '.join(expected)})")


def malformed(path: Path, why: str) -> UsageError:
    return UsageError(f"{path}: {why}")
