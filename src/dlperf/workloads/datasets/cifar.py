"""CIFAR-10's python batches (https://www.cs.toronto.edu/~kriz/cifar.html): `cifar-10-batches-py/data_batch_1..5`,
`test_batch` and `batches.meta`, each a dict pickled by Python 2: b"data" a numpy array of n x 3072 unsigned bytes
(row-major, channels first: 1024 red, 1024 green, 1024 blue), b"labels", b"batch_label", b"filenames".

Unpickling runs whatever a file names, so a file in `--data DIR` could run code. `SafeUnpickler` refuses every name
but the three a numpy array of bytes is rebuilt from, and maps those to inert classes of this module, never to numpy:
a batch reads without numpy, and a malicious file cannot import or call anything. The writer emits the same pickle
opcodes Python 2's cPickle wrote, so numpy's own `pickle.load(f, encoding="bytes")` reads its files too."""

from __future__ import annotations

import io
import pickle
import pickletools
import random
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from dlperf.errors import UsageError
from dlperf.workloads.datasets import check_labels, find, malformed, missing

FOLDER = "cifar-10-batches-py"
# where it is looked for in DIR: DIR itself, where the archive unpacks (and torchvision's CIFAR10(root=DIR), Keras 2's
# cache), Keras 3's cache (~/.keras/datasets, as keras.datasets.cifar10 of Keras 3.15 extracts it)
PLACES = ("", FOLDER, f"cifar-10-batches-py-target/{FOLDER}")
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
        _version, self.shape, self.dtype, self.fortran, raw = state
        self.raw = bytes(raw) if isinstance(raw, bytearray) else raw  # protocol 5 pickles the values as a bytearray


class _Dtype:
    def __init__(self, name: str | bytes, align: int = 0, copy: int = 1) -> None:
        self.name = name.decode() if isinstance(name, bytes) else name

    def __setstate__(self, state: tuple) -> None:
        pass  # the byte order: none for single bytes


def _reconstruct(cls: type, shape: tuple, typecode: bytes) -> _Array:
    return _Array()


def _frombuffer(buffer: bytes | bytearray, dtype: _Dtype, shape: tuple, order: str) -> _Array:
    """How protocol 5 pickles an array: its values in a bytearray, rebuilt by numpy's `_frombuffer`."""
    array = _Array()
    array.__setstate__((1, tuple(shape), dtype, order == "F", buffer))
    return array


def _latin1(text: str, encoding: str = "utf-8") -> bytes:
    """How protocols 2 and 3 pickle bytes written by Python 3 (numpy's values among them): `_codecs.encode` of their
    latin-1 text. Text alone, in latin-1 alone: nothing else is called."""
    if not isinstance(text, str) or encoding.replace("-", "").lower() != "latin1":
        raise pickle.UnpicklingError(f"refused _codecs.encode of {type(text).__name__} as {encoding!r}")
    return text.encode("latin-1")


class SafeUnpickler(pickle.Unpickler):
    """Finds only the names a numpy array is rebuilt from, as inert stand-ins; refuses every other."""

    ALLOWED: ClassVar[dict[tuple[str, str], object]] = {
        ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): _reconstruct,  # numpy 2 writes this name
        ("numpy", "ndarray"): _Array,
        ("numpy", "dtype"): _Dtype,
        ("numpy.core.numeric", "_frombuffer"): _frombuffer,  # an array as protocol 5 pickles it
        ("numpy._core.numeric", "_frombuffer"): _frombuffer,
        ("_codecs", "encode"): _latin1,  # bytes, as protocols 2 and 3 pickle them
    }

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refused {module}.{name}: a CIFAR batch names only numpy's array (and bytes)")
        return self.ALLOWED[module, name]


# What a batch's pickle may hold: values, containers, the memo, and the globals and calls that rebuild numpy's array
# (names checked by SafeUnpickler.find_class). Refused before anything is built: INST, OBJ, NEWOBJ, NEWOBJ_EX (build
# an object of a class named), PERSID, BINPERSID (ask the loader for an object by id), EXT1, EXT2, EXT4 (import by
# an extension code), the out-of-band buffers of protocol 5 (its in-band bytearray is a value), sets, and any opcode
# pickletools does not know.
OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP", "NONE", "NEWTRUE", "NEWFALSE", "INT", "BININT",
    "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT", "STRING", "BINSTRING", "SHORT_BINSTRING",
    "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8",
    "EMPTY_LIST", "LIST", "APPEND", "APPENDS", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_DICT",
    "DICT",
    "SETITEM", "SETITEMS", "GET", "BINGET", "LONG_BINGET", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE",
    "GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD",
})  # fmt: skip


def load(path: Path) -> object:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise malformed(path, f"cannot be read ({e.strerror})") from None
    try:
        refused = next((op.name, at) for op, _, at in pickletools.genops(raw) if op.name not in OPCODES)
    except StopIteration:
        refused = None
    except Exception as e:  # not a pickle: said as a damaged one is, below
        raise _damaged(path, e) from None
    if refused is not None:
        raise malformed(path, f"not a CIFAR-10 python batch: pickle opcode {refused[0]} (at byte {refused[1]}) is "
                              "refused (a batch is a dict of lists, bytes, ints and numpy's array)")  # fmt: skip
    try:
        return SafeUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as e:  # a damaged pickle raises nearly any error: each means the same to the user
        raise _damaged(path, e) from None


def _damaged(path: Path, e: Exception) -> UsageError:
    return malformed(path, f"not a CIFAR-10 python batch ({type(e).__name__}: {e})")


def folder(directory: Path) -> Path:
    """The first of PLACES in `directory` that holds the first training batch."""
    expected = [f"{FOLDER}/{name}" for name in EXPECTED]
    return find(directory, PLACES, lambda d: (d / TRAIN[0]).is_file(), TRAIN[0], "CIFAR-10", expected)


def read_batch(path: Path, classes: int = len(CLASSES), network: str = "CIFAR-10") -> Batch:
    """One batch, each label below `classes` (`network`'s: a network with fewer outputs than CIFAR-10's ten)."""
    if not path.is_file():
        raise missing(path.parent, path.name, "CIFAR-10", [f"{FOLDER}/{name}" for name in EXPECTED])
    batch = load(path)
    data = batch.get(b"data") if isinstance(batch, dict) else None
    labels = batch.get(b"labels") if isinstance(batch, dict) else None
    if not isinstance(data, _Array) or not isinstance(labels, list):
        raise malformed(path, 'not a CIFAR-10 python batch (expected a dict with b"data", an array, and b"labels")')
    shape, dtype, raw = (getattr(data, name, None) for name in ("shape", "dtype", "raw"))
    if not (isinstance(shape, tuple) and isinstance(dtype, _Dtype) and isinstance(raw, bytes)):
        raise malformed(path, f'b"data" is not a uint8 array (shape {shape!r}, type {type(dtype).__name__}, values '
                              f"{type(raw).__name__})")  # fmt: skip
    n = len(labels)
    if dtype.name not in ("u1", "uint8") or shape != (n, PIXELS) or len(raw) != n * PIXELS:
        raise malformed(path, f"b\"data\" is {dtype.name} {shape} in {len(raw)} bytes; "
                              f"{n} labels want uint8 ({n}, {PIXELS})")  # fmt: skip
    check_labels(path, labels, min(classes, len(CLASSES)), network if classes < len(CLASSES) else "CIFAR-10")
    return Batch(raw, labels)


def read_cifar10(
    directory: Path, split: str = "train", classes: int = len(CLASSES), network: str = "CIFAR-10"
) -> Batch:
    """The five training batches joined, or the test batch; each label below `classes` (`network`'s)."""
    names = TRAIN if split == "train" else (TEST,)
    batches = [read_batch(folder(directory) / name, classes, network) for name in names]
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
