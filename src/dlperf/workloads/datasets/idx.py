"""MNIST's IDX files (http://yann.lecun.com/exdb/mnist/): a big-endian header (two zero bytes, the type 0x08 for
unsigned bytes, the number of dimensions, then each dimension as a 32-bit integer) followed by the values, row-major.
Plain or gzip, as the files are distributed."""

from __future__ import annotations

import functools
import gzip
import math
import random
import struct
from dataclasses import dataclass
from pathlib import Path

from dlperf.workloads.datasets import malformed, missing

UBYTE = 0x08
IMAGES, LABELS = 3, 1  # dimensions of an image file (n, rows, cols) and of a label file (n,)
SPLITS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
EXPECTED = [f"{stem}[.gz]" for pair in SPLITS.values() for stem in pair]
FOLDER = "mnist"  # in a datasets directory (`--data DIR`)


@dataclass(frozen=True)
class Idx:
    dims: tuple[int, ...]
    data: bytes  # prod(dims) unsigned bytes, row-major


@dataclass(frozen=True)
class Mnist:
    images: bytes  # n * rows * cols, row-major, one byte a pixel
    labels: bytes  # n, one byte a label
    rows: int
    cols: int

    def __len__(self) -> int:
        return len(self.labels)


def header(dims: tuple[int, ...]) -> bytes:
    return struct.pack(f">BBBB{len(dims)}I", 0, 0, UBYTE, len(dims), *dims)


def write(path: Path, dims: tuple[int, ...], data: bytes) -> None:
    """An IDX file of unsigned bytes; gzip when the name ends in .gz, as MNIST is distributed."""
    if len(data) != math.prod(dims):
        raise ValueError(f"{len(data)} bytes for dimensions {dims}")
    opener = functools.partial(gzip.GzipFile, mtime=0) if path.suffix == ".gz" else open  # no clock: a seed's bytes
    with opener(path, "wb") as f:
        f.write(header(dims) + data)


def read(path: Path, ndim: int) -> Idx:
    """The IDX file at `path`, which must hold unsigned bytes in `ndim` dimensions and nothing more."""
    raw = _content(path)
    expected = UBYTE << 8 | ndim
    magic = f"0x{int.from_bytes(raw[:4], 'big'):08x}" if len(raw) >= 4 else f"only {len(raw)} bytes"
    if magic != f"0x{expected:08x}":
        raise malformed(path, f"not an IDX file of {ndim}-dimensional unsigned bytes (magic {magic}, expected "
                              f"0x{expected:08x})")  # fmt: skip
    start = 4 + 4 * ndim
    if len(raw) < start:
        raise malformed(path, f"truncated IDX header ({len(raw)} bytes, {start} expected)")
    dims = struct.unpack_from(f">{ndim}I", raw, 4)
    if (found := len(raw) - start) != math.prod(dims):
        raise malformed(path, f"{found} bytes of values, but its header's dimensions {dims} say {math.prod(dims)}")
    return Idx(dims, raw[start:])


def _content(path: Path) -> bytes:
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
            return f.read()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError; EOFError: a cut gzip stream
        raise malformed(path, f"cannot be read ({e})") from None


def locate(directory: Path, stem: str) -> Path:
    """`stem` or `stem.gz` in `directory`."""
    for path in (directory / stem, directory / f"{stem}.gz"):
        if path.is_file():
            return path
    raise missing(directory, f"{stem} or {stem}.gz", "MNIST", EXPECTED)


def folder(directory: Path) -> Path:
    """`directory/mnist`, or `directory` itself when it holds MNIST's files."""
    stem = SPLITS["train"][0]
    here = (directory / stem).is_file() or (directory / f"{stem}.gz").is_file()
    return directory if here else directory / FOLDER


def read_mnist(directory: Path, split: str = "train") -> Mnist:
    """MNIST's `split` in `directory` or in its `mnist` folder."""
    images_stem, labels_stem = SPLITS[split]
    directory = folder(directory)
    images = read(locate(directory, images_stem), IMAGES)
    labels_path = locate(directory, labels_stem)
    labels = read(labels_path, LABELS)
    if labels.dims[0] != images.dims[0]:
        raise malformed(labels_path, f"{labels.dims[0]} labels for {images.dims[0]} images")
    if labels.data and max(labels.data) > 9:
        raise malformed(labels_path, f"a label of {max(labels.data)}: MNIST's labels are 0 to 9")
    return Mnist(images.data, labels.data, images.dims[1], images.dims[2])


def write_mnist(directory: Path, n: int, split: str = "train", seed: int = 0, compress: bool = True) -> None:
    """`n` random 28x28 images and labels in MNIST's files of `split`, gzip as distributed or plain."""
    rng = random.Random(seed)
    suffix = ".gz" if compress else ""
    images_stem, labels_stem = SPLITS[split]
    directory.mkdir(parents=True, exist_ok=True)
    write(directory / f"{images_stem}{suffix}", (n, 28, 28), rng.randbytes(n * 28 * 28))
    write(directory / f"{labels_stem}{suffix}", (n,), bytes(rng.randrange(10) for _ in range(n)))
