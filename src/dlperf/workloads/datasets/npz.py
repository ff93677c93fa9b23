"""NumPy's .npz archives of unsigned bytes, as Keras caches MNIST (`~/.keras/datasets/mnist.npz`: x_train, y_train,
x_test, y_test), read with the standard library: a zip of .npy files, each a magic string, a version, a header that is a
Python literal (read by `ast.literal_eval`, never unpickled) and the values. An array of objects (a pickle) is refused
as any type but uint8 is; what a header claims is checked against the member's size before a value is read."""

from __future__ import annotations

import ast
import math
import struct
import zipfile
from pathlib import Path
from typing import IO

from dlperf.workloads.datasets import malformed

MNIST = "mnist.npz"  # keras.datasets.mnist's file name in its cache
MAGIC = b"\x93NUMPY"
UINT8 = ("|u1", "<u1", ">u1", "=u1", "u1")
KINDS = {"i": "int", "u": "uint", "f": "float", "c": "complex", "b": "bool"}


def read_mnist(path: Path, split: str) -> tuple[tuple[tuple[int, ...], bytes], tuple[tuple[int, ...], bytes]]:
    """(dims, values) of `split`'s images (n, rows, cols) and labels (n,) in Keras' mnist.npz."""
    try:
        with zipfile.ZipFile(path) as archive:
            return _array(path, archive, f"x_{split}", 3), _array(path, archive, f"y_{split}", 1)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise malformed(path, f"not a NumPy .npz archive ({e})") from None


def _array(path: Path, archive: zipfile.ZipFile, name: str, ndim: int) -> tuple[tuple[int, ...], bytes]:
    """The uint8 array `name` of `ndim` dimensions in `archive`, as (dims, row-major values)."""
    try:
        info = archive.getinfo(f"{name}.npy")
    except KeyError:
        raise malformed(path, f"holds no {name} (Keras' {MNIST} holds x_train, y_train, x_test, y_test)") from None
    with archive.open(info) as f:
        start, header = _header(path, f, name)
        descr, shape = header.get("descr"), header.get("shape")
        if descr not in UINT8 or header.get("fortran_order") is not False:
            raise malformed(path, f"{name} is {_dtype(descr)} {shape}, expected uint8 in C order")
        if not (isinstance(shape, tuple) and len(shape) == ndim and all(type(d) is int and d >= 0 for d in shape)):
            raise malformed(path, f"{name} has shape {shape!r}, expected {ndim} dimensions")
        if (found := info.file_size - start) != (claimed := math.prod(shape)):
            raise malformed(path, f"{name} holds {found} bytes of values, but its shape {shape} says {claimed}")
        return shape, f.read(claimed)


def _header(path: Path, f: IO[bytes], name: str) -> tuple[int, dict]:
    """The .npy header of member `name` as a dict, and where its values start."""
    head = f.read(len(MAGIC) + 2)
    if not head.startswith(MAGIC) or len(head) < len(MAGIC) + 2 or head[-2] not in (1, 2, 3):
        raise malformed(path, f"{name} is not a .npy array (magic {head[: len(MAGIC) + 2]!r})")
    size_format = "<H" if head[-2] == 1 else "<I"
    size_bytes = f.read(struct.calcsize(size_format))
    (size,) = struct.unpack(size_format, size_bytes) if len(size_bytes) == struct.calcsize(size_format) else (-1,)
    text = f.read(size) if size >= 0 else b""
    try:
        header = ast.literal_eval(text.decode("utf-8" if head[-2] == 3 else "latin1"))
    except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
        raise malformed(path, f"{name}: a damaged .npy header ({type(e).__name__})") from None
    if not isinstance(header, dict) or len(text) != size:
        raise malformed(path, f"{name}: a damaged .npy header")
    return len(head) + len(size_bytes) + size, header


def _dtype(descr: object) -> str:
    """A .npy type descriptor as NumPy names it: '<i8' int64, '|O' object."""
    if not isinstance(descr, str) or len(descr) < 2:
        return f"a record type {descr!r}" if isinstance(descr, list) else repr(descr)
    kind, size = descr[1], descr[2:]
    if kind == "O":
        return "object"
    return f"{KINDS[kind]}{8 * int(size)}" if kind in KINDS and size.isdigit() else repr(descr)
