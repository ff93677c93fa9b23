"""The GPUs dlperf predicts for: their published peaks, memory bandwidth and host link.

The table ships as package data (`dlperf/data/gpu_specs.csv`), each row with its source. Peaks are dense (no
sparsity) and at the boost clock (`peak_clock` says so per row; a row's source says why where it is not);
`fp16`/`bf16` are the tensor-core rates with FP32 accumulation, `fp8` with FP32 accumulation too; an empty cell is a
unit the GPU lacks (a peak) or a figure no source gave (`sm_count`, `boost_clock_mhz`, `l2_mib`, `cuda_gib`). The
memory is two figures: `mem_gib`, the size the GPU is sold by (its name's "80GB", read as GiB), and `cuda_gib`, the
total CUDA reports for it (PyTorch's "total capacity"), which is less: ECC holds a sixteenth of a data-centre GDDR
card (a T4's 16 GB is 14.56 GiB to CUDA), the driver some of every card; the room a step has is `cuda_gib` where a
source gave it (`GPU.device_gib`), else `mem_gib`, an upper bound. `--gpu-specs
FILE.csv` adds a user's rows in the same format (a row of a built-in GPU's name replaces it), checked as the built-in
rows are: a wrong cell is one line naming the file, the line and the column. Names are matched forgivingly (case,
spaces, hyphens, "NVIDIA"/"Tesla"/"GeForce"), and a name that matches none gets a one-line error suggesting the
nearest. What CUDA calls a device is matched whole (`for_device`): a laptop, Max-Q or MIG part is no row of the table.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from dlperf.errors import UsageError

TFLOPS, GBS = 1e12, 1e9
GENERATIONS = ("Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell")
CLOCKS = ("boost", "base", "unstated")
CONTEXT_GIB = 0.5  # an assumption: the CUDA context every process takes, outside the allocator's peak (memory.py)
REQUIRED = ("gpu", "fp32_tflops", "mem_bw_gbs", "mem_gib", "host_link", "host_link_gbs", "generation", "source")
PEAKS = ("tf32_tflops", "fp16_tensor_tflops", "bf16_tensor_tflops", "fp8_tensor_tflops")  # empty: no such unit
SHAPE = ("sm_count", "boost_clock_mhz", "l2_mib")  # empty: no source gave it
COLUMNS = (*REQUIRED[:2], *PEAKS, *REQUIRED[2:4], "cuda_gib", *REQUIRED[4:7], *SHAPE, "peak_clock", "source")
# Each figure's plausible range: the shipped rows' (fp32 2.3 to 125 TFLOPS, tensor peaks 8.7 to 5,000, memory 160 to
# 8,000 GB/s and 4 to 270 GiB, host links 8 to 450 GB/s, 10 to 188 SMs at 875 to 2,617 MHz, L2 2 to 128 MiB) with
# margins of 10 to 100 times either way (memory up to 16 TiB; below the CUDA context's 0.5 GiB `_row` says why). A
# figure outside is a typo or another unit; one of 1e300 made each prediction infinite (`memory.usable`: "cannot
# convert float infinity to integer").
RANGES = {
    "fp32_tflops": (0.01, 10_000.0, "TFLOPS"), **dict.fromkeys(PEAKS, (0.01, 100_000.0, "TFLOPS")),
    "mem_bw_gbs": (1.0, 100_000.0, "GB/s"), **dict.fromkeys(("mem_gib", "cuda_gib"), (0.01, 16_384.0, "GiB")),
    "host_link_gbs": (0.1, 10_000.0, "GB/s"),
    "sm_count": (1.0, 10_000.0, "SMs"), "boost_clock_mhz": (50.0, 10_000.0, "MHz"), "l2_mib": (0.01, 10_000.0, "MiB"),
}  # fmt: skip


@dataclass(frozen=True)
class GPU:
    name: str
    generation: str  # one of GENERATIONS
    fp32: float  # FLOP/s
    tf32: float | None  # FLOP/s on tensor cores; None: no TF32 unit (TF32 mode runs at the FP32 rate)
    fp16: float | None
    bf16: float | None
    memory_bw: float  # bytes/s
    memory_gib: float  # as sold: the "80GB" of its name, read as GiB
    host_link: str
    host_link_bw: float  # bytes/s, theoretical, per direction
    source: str
    fp8: float | None = None  # FLOP/s, FP8 inputs with FP32 accumulation; None: no FP8 unit
    sm_count: int | None = None  # None: no source gave it
    boost_clock_mhz: float | None = None
    l2_mib: float | None = None
    peak_clock: str = "boost"  # the clock the peaks are computed at: boost, base or unstated (the source's figure)
    cuda_gib: float | None = None  # the total CUDA reports (PyTorch's "total capacity"); None: no source gave it

    @property
    def device_gib(self) -> float:
        """The memory CUDA has on the device: `cuda_gib`, else the size it is sold by (an upper bound)."""
        return self.cuda_gib or self.memory_gib

    def peak(self, dtype: str, tensor: bool) -> tuple[float, str]:
        """The FLOP/s a product in `dtype` runs at, and the unit it runs on. `tensor`: fp32 products may use TF32.
        A half dtype without a tensor unit for it runs at the FP32 rate (cuDNN and cuBLAS compute in FP32 there)."""
        if dtype in ("fp16", "bf16", "fp8") and getattr(self, dtype):
            return getattr(self, dtype), f"{dtype} tensor"
        if dtype == "fp32" and tensor and self.tf32:
            return self.tf32, "tf32 tensor"
        return self.fp32, "fp32"

    def mixed(self) -> str | None:
        """The half precision it trains in with a tensor unit for it: bf16 (no loss scaling needed), else fp16
        (Volta, Turing: float16 autocast with gradient scaling), else None (no half-precision tensor unit)."""
        return "bf16" if self.bf16 else "fp16" if self.fp16 else None


@cache
def builtin() -> tuple[GPU, ...]:
    """The rows dlperf ships, checked as a user's file is."""
    text = resources.files("dlperf").joinpath("data/gpu_specs.csv").read_text()
    return parse(text, "dlperf/data/gpu_specs.csv")


_user: tuple[GPU, ...] = ()


def use_specs(path: str | None) -> None:
    """Merge a user's GPU file over the built-in rows for this process (None: the built-in rows only). A wrong file is
    one UsageError naming it, the line and the column, and changes nothing."""
    global _user
    if path is None:
        _user = ()
        return
    if not path.strip():  # `--gpu-specs "$SPECS"` with $SPECS unset: no file named, not the built-in rows
        raise UsageError(f"--gpu-specs {path!r}: expected a CSV file, got nothing")
    where = f"--gpu-specs {path}"
    text = read_text(path, where)
    _user = parse(text, where)


def read_text(path: str, where: str) -> str:
    """A user's CSV file as text; one that cannot be read is one UsageError starting with `where`."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:  # -sig: a spreadsheet's "CSV UTF-8" starts with a BOM
            return f.read()
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not a CSV file in UTF-8") from None
    except OSError as e:
        raise UsageError(f"{where}: cannot be read ({e.strerror or e})") from None


def table() -> tuple[GPU, ...]:
    """The built-in rows, a user's row of the same name in place of its built-in one, then the user's new rows."""
    global _merged
    base = builtin()
    if not _user:
        return base
    if _merged[0] is not _user or _merged[1] is not base:  # merged once a file: `_by_key` keeps its map meanwhile
        mine = {_key(g.name): g for g in _user}
        merged = [mine.pop(_key(g.name), g) for g in base]
        _merged = (_user, base, (*merged, *mine.values()))
    return _merged[2]


_merged: tuple = ((), (), ())  # (the user's rows, the built-in rows, the table merged of them)


def parse(text: str, where: str) -> tuple[GPU, ...]:
    """Rows of the table's format; a wrong one is a UsageError `where, line N, column C: what is wrong`."""
    gpus, seen = [], {}
    for line, cells in csv_rows(text, where, COLUMNS, REQUIRED):
        gpu = _row(cells, lambda column, line=line: f"{where}, line {line}, column {column}")
        key = _key(gpu.name)
        if key in seen:
            raise UsageError(f"{where}, line {line}, column gpu: {gpu.name!r} is named on line {seen[key]} already")
        seen[key] = line
        gpus.append(gpu)
    if not gpus:
        raise UsageError(f"{where}: no GPU rows (the header, then one row per GPU)")
    return tuple(gpus)


def csv_rows(text: str, where: str, columns: tuple[str, ...], required: tuple[str, ...]):
    """(line, {column: cell}) for each row of a CSV table after its header (lines starting with # are comments), the
    cells stripped; a header naming an unknown column or missing a required one, or a row of another length, is a
    UsageError `where, line N: what is wrong`."""
    lines = text.splitlines(keepends=True)
    reader = csv.reader(io.StringIO("".join("\n" if line.startswith("#") else line for line in lines)))
    header = [h.strip() for h in next((row for row in reader if any(c.strip() for c in row)), [])]
    at = reader.line_num or 1
    unknown = [h for h in header if h not in columns]
    if unknown:
        raise UsageError(f"{where}, line {at}: unknown column {unknown[0]!r} (the columns: {', '.join(columns)})")
    missing = [c for c in required if c not in header]
    if missing:
        raise UsageError(f"{where}, line {at}: no column {', '.join(missing)} (required: {', '.join(required)})")
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise UsageError(f"{where}, line {reader.line_num}: {len(row)} fields where the header has {len(header)}")
        yield reader.line_num, {h: c.strip() for h, c in zip(header, row, strict=True)}


def _row(cells: dict[str, str], at) -> GPU:
    def number(column: str, *, required: bool = False, whole: bool = False) -> float | None:
        text = cells.get(column, "")
        if not text:
            if required:
                raise UsageError(f"{at(column)}: empty (a figure is required)")
            return None
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"{at(column)}: {text!r} is not a number") from None
        if not math.isfinite(value):  # float() takes "inf", "nan" and 1e309
            raise UsageError(f"{at(column)}: {text!r} is not a finite number")
        if not value > 0:
            raise UsageError(f"{at(column)}: {text} (a figure must be above 0)")
        least, most, unit = RANGES[column]
        if not least <= value <= most:
            raise UsageError(f"{at(column)}: {text} is outside {least:,g} to {most:,g} {unit}, the range a GPU's "
                             "figure can take (another unit?)")  # fmt: skip
        if whole and value != int(value):
            raise UsageError(f"{at(column)}: {text} (a whole number)")
        return value

    for column in ("gpu", "host_link", "source"):
        if not cells.get(column):
            raise UsageError(f"{at(column)}: empty (every row names its {column.replace('_', ' ')})")
    if cells["generation"] not in GENERATIONS:
        raise UsageError(f"{at('generation')}: {cells['generation']!r}, expected one of {', '.join(GENERATIONS)}")
    clock = cells.get("peak_clock") or "boost"
    if clock not in CLOCKS:
        raise UsageError(f"{at('peak_clock')}: {clock!r}, expected {', '.join(CLOCKS)} (empty: boost)")
    tera = lambda column: None if (v := number(column)) is None else v * TFLOPS  # noqa: E731
    sm = number("sm_count", whole=True)
    cuda = number("cuda_gib")
    if cuda is not None and cuda > number("mem_gib", required=True):
        raise UsageError(f"{at('cuda_gib')}: {cuda:g} is above mem_gib (CUDA reports at most the memory sold)")
    for column in ("mem_gib", "cuda_gib"):  # a 0.3 GiB GPU's room read "needs 0.1 GiB of -0.2"
        if (gib := number(column)) is not None and gib < CONTEXT_GIB:
            raise UsageError(f"{at(column)}: {gib:g} GiB, less than the {CONTEXT_GIB:g} GiB the CUDA context "
                             "takes")  # fmt: skip
    return GPU(
        name=cells["gpu"], generation=cells["generation"], fp32=number("fp32_tflops", required=True) * TFLOPS,
        tf32=tera("tf32_tflops"), fp16=tera("fp16_tensor_tflops"), bf16=tera("bf16_tensor_tflops"),
        memory_bw=number("mem_bw_gbs", required=True) * GBS, memory_gib=number("mem_gib", required=True),
        host_link=cells["host_link"], host_link_bw=number("host_link_gbs", required=True) * GBS,
        source=cells["source"], fp8=tera("fp8_tensor_tflops"), sm_count=None if sm is None else int(sm),
        boost_clock_mhz=number("boost_clock_mhz"), l2_mib=number("l2_mib"), peak_clock=clock, cuda_gib=cuda,
    )  # fmt: skip


_NOISE = re.compile(r"\b(nvidia|tesla|geforce)\b")


def _key(name: str) -> str:
    """A name reduced to what tells GPUs apart: lower case, vendor words and punctuation gone."""
    return re.sub(r"[^a-z0-9]", "", _NOISE.sub("", name.lower()))


def _by_key() -> dict[str, GPU]:
    """The table by normalized name (`_key`), built once per table: a prediction's scope note looks up each of the
    225 shipped rows' GPU, and rebuilding it for each was half the note's time."""
    global _index
    rows = table()
    if _index[0] is not rows:
        _index = (rows, {_key(g.name): g for g in rows})
    return _index[1]


_index: tuple[tuple[GPU, ...] | None, dict[str, GPU]] = (None, {})


def names() -> list[str]:
    return [g.name for g in table()]


NOT_NVIDIA = re.compile(r"\b(mi\d{2,3}\w*|instinct|radeon|gaudi|tpu\w*|amd|intel|arc)\b", re.IGNORECASE)


class AmbiguousGPU(UsageError):
    """A name that several of the table's GPUs fit ("A100"): said so wherever it is read, never as an unknown GPU."""


def lookup(name: str, flag: str = "--gpu") -> GPU:
    """The GPU called `name`: an exact match after normalizing, or the name nvidia-smi and CUDA give it (`_CUDA_NAMES`:
    "NVIDIA H100 80GB HBM3" is the H100-SXM5-80GB, as `run` maps the device), else the only GPU that every word of
    `name` fits (in any order, each the start of a word of its name or its memory: "4090", "A100 80GB", "h100 sxm");
    else a one-line
    UsageError listing every candidate (several fit) or the nearest names (none does), naming `flag`: a command's
    (`--gpu 'Z9000'`), a Python caller's argument (`'Z9000' in gpus`), or none ('')."""
    key = _key(name)
    by_key = _by_key()
    if key in by_key:
        return by_key[key]
    if (typed := _spelled(name)) in _cuda_spelled():  # what nvidia-smi and CUDA call it ("NVIDIA H100 80GB HBM3"),
        return own(_cuda_spelled()[typed])  # as `run` maps it: with its vendor word, so "H200" stays ambiguous
    fitting = candidates(name) or [g for k, g in by_key.items() if key and k.startswith(key)]
    if len(fitting) == 1:
        return fitting[0]
    if fitting:
        raise AmbiguousGPU(f"{_said(name, flag)} is ambiguous: {', '.join(g.name for g in fitting)} (name one of "
                           "them)")  # fmt: skip
    near = difflib.get_close_matches(key, list(by_key), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(by_key[k].name for k in near)}?" if near else ""
    if NOT_NVIDIA.search(name):  # an MI300X read "did you mean B300?"
        hint = ": the table holds NVIDIA GPUs only (dlperf predicts CUDA's kernels, not ROCm's or a TPU's)"
    raise UsageError(f"{_said(name, flag)}: unknown GPU{hint} (`dlperf predict --list-gpus` lists the {len(by_key)})")


def known(name: str) -> GPU | None:
    """The table's GPU of `name` as dlperf wrote it (a stored prediction's, a prediction's own): matched as the table
    spells it after normalizing, never forgivingly as what a person types is (`lookup`); None where the table has no
    such GPU (one a run's --gpu-specs added, not given now)."""
    return _by_key().get(_key(name))


def own(name: str) -> GPU:
    """A GPU dlperf names itself (the paper's GTX 1080, what CUDA calls a device): one the table lacks is a bug in
    dlperf, said as one, not as a --gpu the user never typed."""
    gpu = known(name)
    if gpu is None:
        raise RuntimeError(f"dlperf's own GPU name {name!r} is not in its GPU table (dlperf/data/gpu_specs.csv): a bug "
                           "in dlperf, please report it")  # fmt: skip
    return gpu


def _said(name: str, flag: str) -> str:
    """A name as the caller gave it: after its flag (`--gpu 'Z9000'`), in a Python argument (`'Z9000' in gpus`)."""
    return f"{flag} {name!r}" if flag.startswith("-") else f"{name!r} in {flag}" if flag else repr(name)


_MEMORY = re.compile(r"\b([0-9]+)\s*(?:gib|gb|g)\b", re.ASCII)


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


def parse_gpus(text: str, flag: str = "--gpu", example: str = "") -> tuple[GPU, ...]:
    """`--gpu A,B`: each looked up, in order, each once; `example`: how a Python caller gives them, where not a tuple
    (`flag=('H100-SXM5-80GB', 'T4')`)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        listed = f"{flag} H100-SXM5-80GB,T4" if flag.startswith("-") else f"{flag}=('H100-SXM5-80GB', 'T4')"
        example = example or listed
        raise UsageError(f"{flag}: expected one or more GPU names, e.g. {example}")
    found = [lookup(p, flag) for p in parts]
    return tuple(dict.fromkeys(found))


# The GPUs each command predicts when --gpu is not given, and why they differ: `defaults.BRACKET`.


# What CUDA calls the table's GPUs (torch.cuda.get_device_name, nvidia-smi's name) where it is not the table's name
# after normalizing (`_key`: "Tesla T4", "NVIDIA A100-SXM4-40GB", "NVIDIA GeForce RTX 3090" need no line here), each
# name as users report it. A name is matched whole, never by a part of it: "NVIDIA GeForce RTX 4090 Laptop GPU" is no
# RTX 4090, "NVIDIA H100 64GB HBM3" no H100-SXM5-80GB, "NVIDIA A100-SXM4-40GB MIG 1g.5gb" a slice of a GPU, "NVIDIA
# GH200 144G HBM3e" not the 96 GB GH200: each has other clocks, memory or power, and gets no prediction (`unmatched`
# says why).
_CUDA_NAMES = {
    "NVIDIA H100 80GB HBM3": "H100-SXM5-80GB",  # the SXM5 part: the PCIe card has HBM2e and is named so
    "NVIDIA H100 PCIe": "H100-PCIe-80GB",
    "NVIDIA H200": "H200-SXM-141GB",  # the NVL card is "NVIDIA H200 NVL", the table's name
    "NVIDIA H800": "H800-SXM5-80GB",  # the PCIe card is "NVIDIA H800 PCIe"
    "NVIDIA GH200 480GB": "GH200",  # 96 GB HBM3 beside Grace's 480 GB
    "NVIDIA GB200": "GB200 (per GPU)",
    "NVIDIA B300 SXM6 AC": "B300",
    "NVIDIA A100-SXM-80GB": "A100-SXM4-80GB",  # an HGX board's name for the SXM4 part
    "NVIDIA A100 80GB PCIe": "A100-PCIe-80GB",
    "NVIDIA A16": "A16 (1 of 4 GPUs)",
    "NVIDIA RTX 6000 Ada Generation": "RTX 6000 Ada",
    "NVIDIA RTX 4000 Ada Generation": "RTX 4000 Ada",  # the 70 W "RTX 4000 SFF Ada Generation" is another card
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "RTX PRO 6000 Blackwell",  # not the Max-Q nor the Server one
    "Tesla K80": "K80 (1 GK210 die)",  # each of the board's two dies is a device
    "GeForce GTX TITAN X": "Titan X (Maxwell)",  # the Pascal card is "NVIDIA TITAN X (Pascal)"
}


def for_device(cuda_name: str) -> GPU | None:
    """The table's GPU for a name CUDA reports (torch.cuda.get_device_name): the row of that name after normalizing
    (a user's --gpu-specs row too), or the one `_CUDA_NAMES` says; None for any other name, a variant of one of the
    table's GPUs included (`unmatched` says why)."""
    found = known(cuda_name)
    if found is not None:
        return found
    return own(_aliases()[_key(cuda_name)]) if _key(cuda_name) in _aliases() else None


def _spelled(name: str) -> str:
    """A name as typed, but for case and punctuation: its vendor word kept (`_key` drops it)."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _cuda_spelled() -> dict[str, str]:
    """`_CUDA_NAMES` by `_spelled` name: a --gpu typed as CUDA names a device resolves as `run` maps it, and only so
    ("H200" alone, which the H200 NVL fits too, was taken for the SXM part CUDA calls "NVIDIA H200")."""
    return {_spelled(cuda): name for cuda, name in _CUDA_NAMES.items()}


def _aliases() -> dict[str, str]:
    """`_CUDA_NAMES` by normalized name (`_key`): what `for_device` and `lookup` (a --gpu typed as nvidia-smi says it)
    read alike."""
    return {_key(cuda): name for cuda, name in _CUDA_NAMES.items()}


def unmatched(cuda_name: str) -> str:
    """Why a device `for_device` does not find is none of the table's GPUs, where the table has its kind: a MIG slice
    of a GPU, or another part of a GPU's name ("RTX 4090 Laptop GPU": "whose RTX 4090 is another part"); '' else."""
    if re.search(r"\bMIG\b", cuda_name, re.IGNORECASE):
        return ", a MIG slice of a GPU (the table's figures are a whole GPU's)"
    model = next((w for w in _words(cuda_name) if re.search(r"\d", w) and not w.endswith("gb")), None)
    near = [g.name for g in table() if model and model in _words(g.name)[:3]]
    if not near:
        return ""
    return f", whose {', '.join(near)} {'is another part' if len(near) == 1 else 'are other parts'}"
