"""CIFAR-10's python batches (https://www.cs.toronto.edu/~kriz/cifar.html): `cifar-10-batches-py/data_batch_1..5`,
`test_batch` and `batches.meta`, each a dict pickled by Python 2: b"data" a numpy array of n x 3072 unsigned bytes
(row-major, channels first: 1024 red, 1024 green, 1024 blue), b"labels", b"batch_label", b"filenames".

Unpickling runs whatever a file names, so a file in `--data DIR` could run code. `SafeUnpickler` refuses every name
but the three a numpy array of bytes is rebuilt from, and maps those to inert classes of this module, never to numpy:
a batch reads without numpy, and a malicious file cannot import or call anything. The writer emits the same pickle
opcodes Python 2's cPickle wrote, so numpy's own `pickle.load(f, encoding="bytes")` reads its files too."""

from __future__ import annotations

import pickle
import random
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from dlperf.workloads.datasets import malformed, missing

FOLDER = "cifar-10-batches-py"
TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST, META = "test_batch", "batches.meta"
EXPECTED = [*TRAIN, TEST, META]
PIXELS = 3 * 32 * 32  # one image's bytes: channels first, rows of 32
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


@dataclass(frozen=True)
class Batch:
    data: bytes  # n * 3072 bytes, one image after another
    labels: list[int]

    def __len__(self) -> int:
        return len(self.labels)


class _Array:
    """What a pickled numpy array becomes here: its shape, element type and bytes, nothing else."""

    def __setstate__(self, state: tuple) -> None:
        _version, self.shape, self.dtype, self.fortran, self.raw = state


class _Dtype:
    def __init__(self, name: str | bytes, align: int = 0, copy: int = 1) -> None:
        self.name = name.decode() if isinstance(name, bytes) else name

    def __setstate__(self, state: tuple) -> None:
        pass  # the byte order: none for single bytes


def _reconstruct(cls: type, shape: tuple, typecode: bytes) -> _Array:
    return _Array()


class SafeUnpickler(pickle.Unpickler):
    """Finds only the names a numpy array is rebuilt from, as inert stand-ins; refuses every other."""

    ALLOWED: ClassVar[dict[tuple[str, str], object]] = {
        ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): _reconstruct,  # numpy 2 writes this name
        ("numpy", "ndarray"): _Array,
        ("numpy", "dtype"): _Dtype,
    }

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refused {module}.{name}: a CIFAR batch names only numpy's array")
        return self.ALLOWED[module, name]


def load(path: Path) -> object:
    try:
        with open(path, "rb") as f:
            return SafeUnpickler(f, encoding="bytes").load()
    except OSError as e:
        raise malformed(path, f"cannot be read ({e.strerror})") from None
    except Exception as e:  # a damaged pickle raises nearly any error: each means the same to the user
        raise malformed(path, f"not a CIFAR-10 python batch ({type(e).__name__}: {e})") from None


def folder(directory: Path) -> Path:
    """`directory/cifar-10-batches-py`, as the archive unpacks, or `directory` itself when it holds the batches."""
    return directory if (directory / TRAIN[0]).is_file() else directory / FOLDER


def read_batch(path: Path) -> Batch:
    if not path.is_file():
        raise missing(path.parent, path.name, "CIFAR-10", [f"{FOLDER}/{name}" for name in EXPECTED])
    batch = load(path)
    data = batch.get(b"data") if isinstance(batch, dict) else None
    labels = batch.get(b"labels") if isinstance(batch, dict) else None
    if not isinstance(data, _Array) or not isinstance(labels, list):
        raise malformed(path, 'not a CIFAR-10 python batch (expected a dict with b"data", an array, and b"labels")')
    n = len(labels)
    if data.dtype.name not in ("u1", "uint8") or tuple(data.shape) != (n, PIXELS) or len(data.raw) != n * PIXELS:
        raise malformed(path, f"b\"data\" is {data.dtype.name} {tuple(data.shape)} in {len(data.raw)} bytes; "
                              f"{n} labels want uint8 ({n}, {PIXELS})")  # fmt: skip
    if not all(isinstance(y, int) and 0 <= y < len(CLASSES) for y in labels):
        raise malformed(path, 'b"labels" must be integers 0 to 9')
    return Batch(bytes(data.raw), labels)


def read_cifar10(directory: Path, split: str = "train") -> Batch:
    """The five training batches joined, or the test batch."""
    batches = [read_batch(folder(directory) / name) for name in (TRAIN if split == "train" else (TEST,))]
    return Batch(b"".join(b.data for b in batches), [y for b in batches for y in b.labels])


def write_batch(path: Path, data: bytes, labels: list[int], batch_label: str) -> None:
    filenames = [f"synthetic_{i:06d}.png".encode() for i in range(len(labels))]
    batch = {b"batch_label": batch_label.encode(), b"labels": labels, b"data": _NdArray(len(labels), data),
             b"filenames": filenames}  # fmt: skip
    path.write_bytes(_pickle2(batch))


def write_cifar10(directory: Path, per_batch: int = 10000, seed: int = 0) -> Path:
    """Random images and labels in CIFAR-10's six batches (`per_batch` images each) and its meta file, in
    `directory/cifar-10-batches-py`, which it returns."""
    rng = random.Random(seed)
    out = directory / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate((*TRAIN, TEST)):
        labels = [rng.randrange(len(CLASSES)) for _ in range(per_batch)]
        label = f"training batch {i + 1} of 5" if name != TEST else "testing batch 1 of 1"
        write_batch(out / name, rng.randbytes(per_batch * PIXELS), labels, label)
    meta = {b"num_cases_per_batch": per_batch, b"label_names": [c.encode() for c in CLASSES], b"num_vis": PIXELS}
    (out / META).write_bytes(_pickle2(meta))
    return out


# ----------------------------------------------------------------------------------------------------------------------
# Python 2's cPickle, protocol 2, for the types a batch holds: written opcode by opcode, since pickling a numpy array
# by name needs numpy, and Python 3 pickles bytes as calls to _codecs.encode under protocol 2.


@dataclass(frozen=True)
class _NdArray:
    n: int
    raw: bytes  # n * PIXELS


def _pickle2(obj: object) -> bytes:
    out = bytearray(pickle.PROTO + b"\x02")
    _save(obj, out)
    return bytes(out + pickle.STOP)


def _save(obj: object, out: bytearray) -> None:
    if isinstance(obj, dict):
        out += pickle.EMPTY_DICT + pickle.MARK
        for key, value in obj.items():
            _save(key, out)
            _save(value, out)
        out += pickle.SETITEMS
    elif isinstance(obj, list):
        out += pickle.EMPTY_LIST + pickle.MARK
        for item in obj:
            _save(item, out)
        out += pickle.APPENDS
    elif isinstance(obj, bool | None):
        out += {True: pickle.NEWTRUE, False: pickle.NEWFALSE, None: pickle.NONE}[obj]
    elif isinstance(obj, int):
        out += pickle.BININT1 + bytes([obj]) if 0 <= obj < 256 else pickle.BININT + struct.pack("<i", obj)
    elif isinstance(obj, bytes):  # a Python 2 str
        out += pickle.SHORT_BINSTRING + bytes([len(obj)]) if len(obj) < 256 else pickle.BINSTRING
        out += (b"" if len(obj) < 256 else struct.pack("<I", len(obj))) + obj
    elif isinstance(obj, tuple):
        out += pickle.MARK
        for item in obj:
            _save(item, out)
        out += pickle.TUPLE
    else:
        _save_array(obj, out)


def _save_array(array: _NdArray, out: bytearray) -> None:
    """numpy's reduction of a C-ordered uint8 array: _reconstruct(ndarray, (0,), b"b"), then its state (version,
    shape, dtype, fortran order, bytes); the dtype is dtype("u1", 0, 1) with the state of a one-byte type."""
    out += b"cnumpy.core.multiarray\n_reconstruct\n"
    out += b"cnumpy\nndarray\n"
    _save((0,), out)
    _save(b"b", out)
    out += pickle.TUPLE3  # the arguments: (ndarray, (0,), b"b")
    out += pickle.REDUCE
    out += pickle.MARK + pickle.BININT1 + b"\x01"
    _save((array.n, PIXELS), out)
    out += b"cnumpy\ndtype\n"
    _save((b"u1", 0, 1), out)
    out += pickle.REDUCE
    _save((3, b"|", None, None, None, -1, -1, 0), out)
    out += pickle.BUILD
    _save(False, out)
    _save(array.raw, out)
    out += pickle.TUPLE + pickle.BUILD
