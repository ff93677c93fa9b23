"""A workload is framework-neutral data: what to train, on what input, with which optimizer.

Each framework backend turns a `Workload` into a model and a train step of its own; the description here is what makes
the rows of two frameworks comparable. Nothing in this module imports a framework.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class InputSpec:
    """One sample's input: "vector" (features,), "image" (C, H, W), "tokens" (sequence length,), or "user" (the
    shape a user's batch maker produced, as the probe saw it)."""

    kind: str
    shape: tuple[int, ...]
    dtype: str = "float32"  # "int64" for token ids
    vocab: int | None = None  # token ids are drawn from range(vocab)

    def __post_init__(self) -> None:
        if self.kind not in ("vector", "image", "tokens", "user"):
            raise ValueError(f"unknown input kind {self.kind!r}")
        if self.kind == "tokens" and not self.vocab:
            raise ValueError("token input needs a vocabulary size")


@dataclass(frozen=True)
class OptimizerSpec:
    name: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.0
    clip_grad_norm: float | None = None  # clip the global gradient norm before the update


@dataclass(frozen=True)
class Workload:
    """One trainable network at one mini-batch size.

    `arch` names a builder every backend implements ("fcn", "alexnet", "resnet-imagenet", "alexnet-cifar",
    "resnet-cifar", "lstm-lm", or "user" for a factory the user wrote); `config` holds its hyper-parameters.
    """

    name: str
    arch: str
    config: dict[str, Any]
    input: InputSpec
    outputs: int  # classes of the softmax
    batch: int
    optimizer: OptimizerSpec
    params: int | None = None  # static parameter count of the reference definition; None when only a probe knows
    data: str = "synthetic"  # the paper's data set; dlperf feeds synthetic data of the same shape
    paper: str | None = None  # the network's name in shared/reference/shi2016_table7.csv
    source: str | None = None  # "file.py:factory" or "package.module:factory" for user workloads
    hidden: bool = False  # tiny test variants: left out of `dlperf list` and the default sweep
    ddp_batch: int | None = None  # the paper's multi-GPU protocol: the total batch split over 1, 2, 4 devices
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_user(self) -> bool:
        return self.source is not None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Workload:
        d = dict(d)
        d["input"] = InputSpec(**{**d["input"], "shape": tuple(d["input"]["shape"])})
        d["optimizer"] = OptimizerSpec(**d["optimizer"])
        return cls(**d)


def workload_diff(wa: dict[str, Any], wb: dict[str, Any], ignore: Sequence[str] = ()) -> str:
    """How two workloads (`Workload.to_json`) differ, e.g. "params 263338 -> 270298"; "" when they are the same but
    for the keys in `ignore`. What identifies a workload in `dlperf compare` and `dlperf predict --cost`."""
    keys = [k for k in dict.fromkeys([*wa, *wb]) if k not in ignore and wa.get(k) != wb.get(k)]
    return ", ".join(_changed(k, wa.get(k), wb.get(k)) for k in keys)


LONGEST_CHANGE = 80  # characters: a change said value by value up to this, else named only


def _changed(key: str, a: Any, b: Any) -> str:
    """One key's change, "batch 64 -> 128"; a dict's by its own keys ("extra.input_names ['x'] -> ['ids']"), and one
    too long to read beside the others by its name alone ("extra.no_checkpoint changed": the checkpoint mode's refusal,
    both its sentences, filled a compare's note)."""
    if isinstance(a, dict) and isinstance(b, dict):
        inner = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
        return ", ".join(_changed(f"{key}.{k}", a.get(k), b.get(k)) for k in inner)
    said = f"{key} {a} -> {b}"
    return said if len(said) <= LONGEST_CHANGE else f"{key} changed"


VARIANT = re.compile(r"(.+)@b([0-9]+)", re.ASCII)  # at a batch of its own: `resnet-50@b64` (never `@b١٦`)


def split_variant(name: str) -> tuple[str, int | None]:
    """`resnet-50@b64` -> ("resnet-50", 64); a plain name -> (name, None)."""
    found = VARIANT.fullmatch(name)
    return (found.group(1), int(found.group(2))) if found else (name, None)
