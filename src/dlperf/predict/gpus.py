"""The GPUs dlperf predicts for: their published peaks, memory bandwidth and host link.

The table ships as package data (`dlperf/data/gpu_specs.csv`): shared/reference/gpu_specs.csv with each GPU's
generation added, and two GPUs the published measurements need (K20m, RTX A5000), each row with its source. Peaks are
dense (no sparsity); `fp16`/`bf16` are the tensor-core rates with FP32 accumulation; an empty cell is a unit the GPU
lacks. Names are matched forgivingly (case, spaces, hyphens, "NVIDIA"/"Tesla"/"GeForce"), and a name that matches
none gets a one-line error suggesting the nearest.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from dlperf.errors import UsageError

TFLOPS, GBS = 1e12, 1e9


@dataclass(frozen=True)
class GPU:
    name: str
    generation: str  # Kepler, Maxwell, Pascal, Volta, Turing, Ampere, Ada, Hopper, Blackwell
    fp32: float  # FLOP/s
    tf32: float | None  # FLOP/s on tensor cores; None: no TF32 unit (TF32 mode runs at the FP32 rate)
    fp16: float | None
    bf16: float | None
    memory_bw: float  # bytes/s
    memory_gib: float
    host_link: str
    host_link_bw: float  # bytes/s, theoretical, per direction
    source: str

    def peak(self, dtype: str, tensor: bool) -> tuple[float, str]:
        """The FLOP/s a product in `dtype` runs at, and the unit it runs on. `tensor`: fp32 products may use TF32.
        A half dtype without a tensor unit for it runs at the FP32 rate (cuDNN and cuBLAS compute in FP32 there)."""
        if dtype in ("fp16", "bf16") and getattr(self, dtype):
            return getattr(self, dtype), f"{dtype} tensor"
        if dtype == "fp32" and tensor and self.tf32:
            return self.tf32, "tf32 tensor"
        return self.fp32, "fp32"


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


@cache
def table() -> tuple[GPU, ...]:
    text = resources.files("dlperf").joinpath("data/gpu_specs.csv").read_text()
    gpus = []
    for row in csv.DictReader(io.StringIO(text)):
        gpus.append(
            GPU(
                name=row["gpu"],
                generation=row["generation"],
                fp32=float(row["fp32_tflops"]) * TFLOPS,
                tf32=_scaled(row["tf32_tflops"], TFLOPS),
                fp16=_scaled(row["fp16_tensor_tflops"], TFLOPS),
                bf16=_scaled(row["bf16_tensor_tflops"], TFLOPS),
                memory_bw=float(row["mem_bw_gbs"]) * GBS,
                memory_gib=float(row["mem_gib"]),
                host_link=row["host_link"],
                host_link_bw=float(row["host_link_gbs"]) * GBS,
                source=row["source"],
            )
        )
    return tuple(gpus)


def _scaled(text: str, unit: float) -> float | None:
    value = _number(text)
    return None if value is None else value * unit


_NOISE = re.compile(r"\b(nvidia|tesla|geforce)\b")


def _key(name: str) -> str:
    """A name reduced to what tells GPUs apart: lower case, vendor words and punctuation gone."""
    return re.sub(r"[^a-z0-9]", "", _NOISE.sub("", name.lower()))


def names() -> list[str]:
    return [g.name for g in table()]


def lookup(name: str, flag: str = "--gpu") -> GPU:
    """The GPU called `name`: an exact match after normalizing, else the only GPU that every word of `name` fits (in
    any order, each the start of a word of its name or its memory: "4090", "A100 80GB", "h100 sxm"); else a one-line
    UsageError listing every candidate (several fit) or the nearest names (none does)."""
    key = _key(name)
    by_key = {_key(g.name): g for g in table()}
    if key in by_key:
        return by_key[key]
    fitting = candidates(name) or [g for k, g in by_key.items() if key and k.startswith(key)]
    if len(fitting) == 1:
        return fitting[0]
    if fitting:
        raise UsageError(f"{flag} {name!r} is ambiguous: {', '.join(g.name for g in fitting)} (name one of them)")
    near = difflib.get_close_matches(key, list(by_key), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(by_key[k].name for k in near)}?" if near else ""
    raise UsageError(f"{flag} {name!r}: unknown GPU{hint} (`dlperf predict --list-gpus` lists the {len(by_key)})")


_MEMORY = re.compile(r"\b(\d+)\s*(?:gib|gb|g)\b")


def _words(name: str) -> list[str]:
    """A name's words, lower case, vendor words gone, a memory size written one way ("80 GB", "80G" -> "80gb")."""
    return re.findall(r"[a-z0-9]+", _MEMORY.sub(r"\1gb", _NOISE.sub(" ", name.lower())))


def candidates(name: str) -> list[GPU]:
    """The GPUs, in the table's order, that each word of `name` fits: the start of a word of the GPU's name, or its
    memory size."""
    typed = _words(name)
    if not typed:
        return []

    def fits(g: GPU) -> bool:
        own = [*_words(g.name), f"{g.memory_gib:g}gb"]
        return all(any(w.startswith(t) for w in own) for t in typed)

    return [g for g in table() if fits(g)]


def parse_gpus(text: str, flag: str = "--gpu") -> tuple[GPU, ...]:
    """`--gpu A,B`: each looked up, in order, each once."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError(f"{flag}: expected one or more GPU names, e.g. {flag} H100-SXM5-80GB,T4")
    found = [lookup(p, flag) for p in parts]
    return tuple(dict.fromkeys(found))


# What CUDA calls a device, when it does not say which variant it is: the memory says. "NVIDIA H100 80GB HBM3" is the
# SXM5 part (the PCIe card has HBM2e); an A100 without a form factor in its name is told apart by its memory size.
_CUDA_HINTS = (
    (re.compile(r"h100.*(pcie|hbm2e)"), "H100-PCIe-80GB"),
    (re.compile(r"h100"), "H100-SXM5-80GB"),
    (re.compile(r"h200"), "H200-SXM-141GB"),
    (re.compile(r"a100.*pcie.*80"), "A100-PCIe-80GB"),
    (re.compile(r"a100.*pcie"), "A100-PCIe-40GB"),
    (re.compile(r"a100.*80"), "A100-SXM4-80GB"),
    (re.compile(r"a100"), "A100-SXM4-40GB"),
    (re.compile(r"v100.*pcie"), "V100-PCIe-16GB"),
    (re.compile(r"v100.*sxm3"), "V100-SXM3-32GB"),
    (re.compile(r"v100.*32"), "V100-SXM2-32GB"),
    (re.compile(r"v100"), "V100-SXM2-16GB"),
    (re.compile(r"p100.*pcie"), "P100-PCIe-16GB"),
    (re.compile(r"p100"), "P100-SXM2-16GB"),
    (re.compile(r"k80"), "K80 (1 GK210 die)"),
)


def for_device(cuda_name: str) -> GPU | None:
    """The table's GPU for a name CUDA reports (torch.cuda.get_device_name), or None when it is not in the table."""
    key = _key(cuda_name)
    by_key = {_key(g.name): g for g in table()}
    if key in by_key:
        return by_key[key]
    spaced = _NOISE.sub("", cuda_name.lower())
    for pattern, name in _CUDA_HINTS:
        if pattern.search(spaced):
            return lookup(name)
    # "NVIDIA GeForce RTX 3090" and the like: the table's name is the device's name without the vendor words.
    matches = [g for k, g in by_key.items() if key.startswith(k) or k.startswith(key)]
    return max(matches, key=lambda g: len(g.name)) if matches else None
