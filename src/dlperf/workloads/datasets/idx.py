"""MNIST's IDX files (http://yann.lecun.com/exdb/mnist/): a big-endian header (two zero bytes, the type 0x08 for
unsigned bytes, the number of dimensions, then each dimension as a 32-bit integer) followed by the values, row-major.
Plain or gzip, as the files are distributed."""

from __future__ import annotations

import functools
import gzip
import math
import random
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from dlperf.workloads.datasets import check_labels, find, malformed, missing, npz

UBYTE = 0x08
IMAGES, LABELS = 3, 1  # dimensions of an image file (n, rows, cols) and of a label file (n,)
CLASSES = 10
SPLITS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
TRAIN_IMAGES = SPLITS["train"][0]
EXPECTED = [f"{stem}[.gz]" for pair in SPLITS.values() for stem in pair]
DEFLATE_MOST = 1032  # deflate's largest expansion: 258 bytes from a 2-bit code, less the block's overhead
FOLDER = "mnist"  # in a datasets directory (`--data DIR`)
# where it is looked for in DIR: DIR itself, `dlperf data synth`'s folder, torchvision's MNIST(root=DIR) (or DIR its
# MNIST folder), then Keras' cache (~/.keras/datasets: keras.datasets.mnist's one NumPy archive, read by npz.py)
PLACES = ("", FOLDER, "MNIST/raw", "raw", npz.MNIST)


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
    source: Path | None = None  # the images' file, named where a network cannot take them

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
    """The IDX file at `path`, which must hold unsigned bytes in `ndim` dimensions and nothing more. What its header
    claims is checked against the file's size before a value is read, and a gzip stream is read no further than the
    claim (and one byte): an absurd header or a gzip bomb is refused without holding more than the claim."""
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
            dims = _header(path, f, ndim)
            claimed = math.prod(dims)
            _check_size(path, dims, claimed, 4 + 4 * ndim)
            data = f.read(claimed + 1)
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError; EOFError: a cut gzip stream
        raise malformed(path, f"cannot be read ({e})") from None
    if len(data) != claimed:
        found = f"{len(data)}" if len(data) < claimed else f"more than {claimed}"
        raise malformed(path, f"{found} bytes of values, but its header's dimensions {dims} say {claimed}")
    return Idx(dims, data)


def _header(path: Path, f: BinaryIO, ndim: int) -> tuple[int, ...]:
    """The dimensions of an IDX header of `ndim` dimensions of unsigned bytes, read from `f`."""
    head = f.read(4)
    expected = UBYTE << 8 | ndim
    magic = f"0x{int.from_bytes(head, 'big'):08x}" if len(head) == 4 else f"only {len(head)} bytes"
    if magic != f"0x{expected:08x}":
        raise malformed(path, f"not an IDX file of {ndim}-dimensional unsigned bytes (magic {magic}, expected "
                              f"0x{expected:08x})")  # fmt: skip
    raw = f.read(4 * ndim)
    if len(raw) < 4 * ndim:
        raise malformed(path, f"truncated IDX header ({4 + len(raw)} bytes, {4 + 4 * ndim} expected)")
    return struct.unpack(f">{ndim}I", raw)


def _check_size(path: Path, dims: tuple[int, ...], claimed: int, start: int) -> None:
    """A plain file holds exactly its header's claim; a gzip file of n bytes cannot hold more than DEFLATE_MOST x n."""
    size = path.stat().st_size
    if path.suffix != ".gz":
        if (found := size - start) != claimed:
            raise malformed(path, f"{found} bytes of values, but its header's dimensions {dims} say {claimed}")
    elif claimed > DEFLATE_MOST * size:
        raise malformed(path, f"its header's dimensions {dims} say {claimed} bytes of values, more than a gzip file "
                              f"of {size} bytes can hold (deflate expands at most {DEFLATE_MOST}-fold)")  # fmt: skip


def locate(directory: Path, stem: str) -> Path:
    """`stem` or `stem.gz` in `directory`."""
    for path in (directory / stem, directory / f"{stem}.gz"):
        if path.is_file():
            return path
    raise missing(directory, f"{stem} or {stem}.gz", "MNIST", EXPECTED)


def folder(directory: Path) -> Path:
    """The first of PLACES in `directory` that holds MNIST's training images (or is Keras' mnist.npz)."""
    wanted = f"{TRAIN_IMAGES} or {TRAIN_IMAGES}.gz, nor {npz.MNIST}"
    return find(directory, PLACES, _holds_mnist, wanted, "MNIST", [*EXPECTED, f"or {npz.MNIST}"])


def _holds_mnist(place: Path) -> bool:
    if place.suffix == ".npz":
        return place.is_file()
    return (place / TRAIN_IMAGES).is_file() or (place / f"{TRAIN_IMAGES}.gz").is_file()


def read_mnist(directory: Path, split: str = "train", classes: int = CLASSES, network: str = "MNIST") -> Mnist:
    """MNIST's `split` in `directory` or where PLACES says, each label below `classes` (`network`'s: a network with
    fewer outputs than MNIST's ten)."""
    directory = folder(directory)
    if directory.suffix == ".npz":
        images, labels = (Idx(*array) for array in npz.read_mnist(directory, split))
        images_path = labels_path = directory
    else:
        images_stem, labels_stem = SPLITS[split]
        images_path = locate(directory, images_stem)
        images = read(images_path, IMAGES)
        labels_path = locate(directory, labels_stem)
        labels = read(labels_path, LABELS)
    if labels.dims[0] != images.dims[0]:
        raise malformed(labels_path, f"{labels.dims[0]} labels for {images.dims[0]} images")
    check_labels(labels_path, labels.data, min(classes, CLASSES), network if classes < CLASSES else "MNIST")
    return Mnist(images.data, labels.data, images.dims[1], images.dims[2], images_path)


def write_mnist(directory: Path, n: int, split: str = "train", seed: int = 0, compress: bool = True) -> None:
    """`n` random 28x28 images and labels in MNIST's files of `split`, gzip as distributed or plain."""
    rng = random.Random(seed)
    suffix = ".gz" if compress else ""
    images_stem, labels_stem = SPLITS[split]
    directory.mkdir(parents=True, exist_ok=True)
    write(directory / f"{images_stem}{suffix}", (n, 28, 28), rng.randbytes(n * 28 * 28))
    write(directory / f"{labels_stem}{suffix}", (n,), bytes(rng.randrange(CLASSES) for _ in range(n)))
