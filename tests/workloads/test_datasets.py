import gzip
import pickle
import pickletools
import struct
import tracemalloc
from pathlib import Path

import pytest

from conftest import require
from dlperf.errors import UsageError
from dlperf.workloads.datasets import cifar, idx, ptb

# ----------------------------------------------------------------------------------------------------------------------
# MNIST's IDX files


@pytest.mark.parametrize("compress", [True, False])
def test_mnist_round_trips(tmp_path, compress):
    idx.write_mnist(tmp_path, 5, compress=compress)
    mnist = idx.read_mnist(tmp_path)
    assert (len(mnist), mnist.rows, mnist.cols, len(mnist.images)) == (5, 28, 28, 5 * 784)
    assert all(y < 10 for y in mnist.labels)
    name = "train-images-idx3-ubyte" + (".gz" if compress else "")
    raw = (gzip.open if compress else open)(tmp_path / name, "rb").read()
    assert raw[16:] == mnist.images


def test_an_idx_header_is_mnists_byte_for_byte(tmp_path):
    idx.write(tmp_path / "images", (2, 3, 4), bytes(range(24)))
    assert (tmp_path / "images").read_bytes()[:16] == bytes.fromhex("00000803 00000002 00000003 00000004")
    idx.write(tmp_path / "labels", (2,), b"\x07\x01")
    assert (tmp_path / "labels").read_bytes() == bytes.fromhex("00000801 00000002 0701")
    hand_made = tmp_path / "hand"
    hand_made.write_bytes(struct.pack(">I3I", 0x803, 1, 2, 2) + b"\x01\x02\x03\x04")
    assert idx.read(hand_made, idx.IMAGES) == idx.Idx((1, 2, 2), b"\x01\x02\x03\x04")


def one_line_error(call, *words):
    with pytest.raises(UsageError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and all(w in message for w in words), message


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (struct.pack(">I1I", 0x801, 1) + b"\x00", ["magic 0x00000801", "expected 0x00000803"]),
        (struct.pack(">I3I", 0x0D03, 1, 1, 1) + b"\x00" * 4, ["magic 0x00000d03"]),  # int32 values, not bytes
        (b"\x00\x00", ["only 2 bytes"]),
        (struct.pack(">I2I", 0x803, 1, 2), ["truncated IDX header"]),
        (struct.pack(">I3I", 0x803, 2, 2, 2) + b"\x00" * 7, ["7 bytes of values", "say 8"]),
        (struct.pack(">I3I", 0x803, 1, 2, 2) + b"\x00" * 5, ["5 bytes of values", "say 4"]),
    ],
    ids=["labels-magic", "int32-magic", "two-bytes", "cut-header", "cut-values", "extra-values"],
)
def test_a_malformed_idx_file_is_one_line_naming_it(tmp_path, content, words):
    (tmp_path / "x").write_bytes(content)
    one_line_error(lambda: idx.read(tmp_path / "x", idx.IMAGES), str(tmp_path / "x"), *words)


def test_a_broken_gzip_and_missing_or_mismatched_mnist_files_are_named(tmp_path):
    one_line_error(lambda: idx.read_mnist(tmp_path), "train-images-idx3-ubyte or train-images-idx3-ubyte.gz",
                   "t10k-labels-idx1-ubyte[.gz]")  # fmt: skip
    idx.write_mnist(tmp_path, 3)
    cut = tmp_path / "train-images-idx3-ubyte.gz"
    cut.write_bytes(cut.read_bytes()[:-10])
    one_line_error(lambda: idx.read_mnist(tmp_path), str(cut), "cannot be read")
    idx.write_mnist(tmp_path, 3)
    idx.write(tmp_path / "train-labels-idx1-ubyte.gz", (2,), b"\x01\x02")
    one_line_error(lambda: idx.read_mnist(tmp_path), "2 labels for 3 images")
    idx.write(tmp_path / "train-labels-idx1-ubyte.gz", (3,), b"\x01\x02\x0a")
    one_line_error(lambda: idx.read_mnist(tmp_path), "label 10 of image 2", "0 to 9")


# ----------------------------------------------------------------------------------------------------------------------
# CIFAR-10's python batches


def test_cifar_round_trips(tmp_path):
    out = cifar.write_cifar10(tmp_path, per_batch=3)
    assert sorted(p.name for p in out.iterdir()) == sorted(cifar.EXPECTED)
    train, test = cifar.read_cifar10(tmp_path), cifar.read_cifar10(out, "test")
    assert (len(train), len(train.data), len(test)) == (15, 15 * 3072, 3)
    first = cifar.read_batch(out / "data_batch_1")
    assert train.data.startswith(first.data) and train.labels[:3] == first.labels


def test_a_cifar_batch_is_what_numpy_reads(tmp_path):
    np = require("numpy")
    cifar.write_batch(tmp_path / "b", bytes(range(256)) * 24, [3, 1], "training batch 1 of 5")
    batch = pickle.loads((tmp_path / "b").read_bytes(), encoding="bytes")  # the recipe of the CIFAR page
    assert batch[b"data"].dtype == np.uint8 and batch[b"data"].shape == (2, 3072)
    assert batch[b"data"].tobytes() == bytes(range(256)) * 24 and batch[b"labels"] == [3, 1]
    assert batch[b"batch_label"] == b"training batch 1 of 5" and len(batch[b"filenames"]) == 2
    data = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
    (tmp_path / "np").write_bytes(pickle.dumps({b"data": data, b"labels": [0, 9]}, protocol=4))  # numpy's own
    assert cifar.read_batch(tmp_path / "np") == cifar.Batch(data.tobytes(), [0, 9])


class Boom:
    def __reduce__(self):
        return (print, ("ran",))


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (pickle.dumps({b"data": Boom(), b"labels": []}), ["refused builtins.print"]),
        (pickle.dumps([1, 2]), ['expected a dict with b"data"']),
        (pickle.dumps({b"data": b"raw", b"labels": [1]}), ['expected a dict with b"data"']),
        (b"not a pickle", ["not a CIFAR-10 python batch"]),
        (b"", ["not a CIFAR-10 python batch"]),
    ],
    ids=["calls-print", "a-list", "bytes-data", "not-a-pickle", "empty"],
)
def test_a_malformed_or_malicious_batch_is_one_line_and_runs_nothing(tmp_path, capsys, content, words):
    (tmp_path / "data_batch_1").write_bytes(content)
    one_line_error(lambda: cifar.read_batch(tmp_path / "data_batch_1"), str(tmp_path / "data_batch_1"), *words)
    assert "ran" not in capsys.readouterr().out


def test_a_batch_with_wrong_sizes_or_labels_is_named(tmp_path):
    cifar.write_batch(tmp_path / "b", b"\x00" * 3072, [1, 2], "x")  # one image, two labels
    one_line_error(lambda: cifar.read_batch(tmp_path / "b"), "in 3072 bytes", "2 labels want uint8 (2, 3072)")
    cifar.write_batch(tmp_path / "b", b"\x00" * 3072, [10], "x")
    one_line_error(lambda: cifar.read_batch(tmp_path / "b"), "label 10 of image 0", "0 to 9")
    cut = tmp_path / "cut"
    cifar.write_batch(cut, b"\x00" * 3072, [1], "x")
    cut.write_bytes(cut.read_bytes()[:-100])
    one_line_error(lambda: cifar.read_batch(cut), str(cut), "not a CIFAR-10 python batch")


def test_missing_cifar_batches_are_named(tmp_path):
    one_line_error(lambda: cifar.read_cifar10(tmp_path), "no data_batch_1", "cifar-10-batches-py/batches.meta")
    out = cifar.write_cifar10(tmp_path, per_batch=1)
    (out / "data_batch_4").unlink()
    one_line_error(lambda: cifar.read_cifar10(tmp_path), "no data_batch_4")


# ----------------------------------------------------------------------------------------------------------------------
# The Penn Treebank


def test_ptb_reads_each_line_then_eos(tmp_path):
    (tmp_path / "ptb.train.txt").write_text(" the cat sat \n\n a cat <unk> N \n")
    words = ptb.read_words(tmp_path)
    assert words == ["the", "cat", "sat", "<eos>", "<eos>", "a", "cat", "<unk>", "N", "<eos>"]
    vocab = ptb.vocabulary(words)
    assert list(vocab) == ["<eos>", "cat", "the", "sat", "a", "<unk>", "N"]  # by count, ties by first appearance
    capped = ptb.vocabulary(words, 3)
    assert list(capped) == ["<eos>", "cat", "<unk>"]  # the words left out read as <unk>, so it stays in
    assert ptb.encode(["the", "cat", "<eos>"], capped) == [2, 1, 0]


def test_a_synthetic_ptb_reads_back(tmp_path):
    path = ptb.write_ptb(tmp_path, words=500, vocab=50)
    words = ptb.read_words(tmp_path)
    assert len(words) - words.count("<eos>") == 500 and path.read_text().startswith(" ")
    assert len(ptb.vocabulary(words)) <= 51 and "<unk>" in words


@pytest.mark.parametrize(
    ("content", "words"), [(b" \n\n", ["holds no words"]), (b"\xff\xfe w", ["UTF-8"])], ids=["empty", "not-utf8"]
)
def test_bad_or_missing_ptb_is_one_line(tmp_path, content, words):
    one_line_error(lambda: ptb.read_words(tmp_path), "no ptb.train.txt", "ptb.valid.txt")
    (tmp_path / "ptb.train.txt").write_bytes(content)
    one_line_error(lambda: ptb.read_words(tmp_path), str(tmp_path / "ptb.train.txt"), *words)


# ----------------------------------------------------------------------------------------------------------------------
# An ImageNet-style folder, and each dataset found in DIR or in its own folder under DIR


def test_an_image_folder_lists_its_classes_sorted_and_their_images_by_suffix(tmp_path):
    from dlperf.workloads.datasets import imagefolder

    for given, where in ((tmp_path / "a", "imagenet/train"), (tmp_path / "b", "train"), (tmp_path / "c", ".")):
        root = (given / where).resolve()
        for name, files in (("n2", ["z.JPEG", "a.png", "notes.txt"]), ("n1", ["b.jpg", "a.jpeg"])):
            (root / name).mkdir(parents=True)
            for file in files:
                (root / name / file).write_bytes(b"\xff\xd8")  # listed, not decoded
        found = imagefolder.read_imagefolder(given)
        assert found.root.resolve() == root and found.classes == ["n1", "n2"]
        assert [(p.name, y) for p, y in found.samples] == [("a.jpeg", 0), ("b.jpg", 0), ("a.png", 1), ("z.JPEG", 1)]


def test_an_empty_or_missing_image_folder_is_one_line_naming_the_layout(tmp_path):
    from dlperf.workloads.datasets import imagefolder

    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), "no class folders", "imagenet/train/<class>")
    (tmp_path / "imagenet" / "train" / "n1").mkdir(parents=True)
    (tmp_path / "imagenet" / "train" / "n1" / "readme.txt").write_text("no image")
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), "1 class folders but no image", "JPEG")


def test_mnist_and_ptb_are_read_from_their_folder_in_dir_or_from_dir_itself(tmp_path):
    idx.write_mnist(tmp_path / "mnist", 3)
    ptb.write_ptb(tmp_path / "ptb", words=20, vocab=10)
    assert len(idx.read_mnist(tmp_path)) == len(idx.read_mnist(tmp_path / "mnist")) == 3
    assert ptb.read_words(tmp_path) == ptb.read_words(tmp_path / "ptb")
    one_line_error(lambda: idx.read_mnist(tmp_path / "ptb"), "train-images-idx3-ubyte", "MNIST expects")


# ----------------------------------------------------------------------------------------------------------------------
# Bad files (issue 30): what a header claims is checked against the file before its values are read, a gzip stream is
# read no further than its header's claim, a pickle's opcodes are listed before anything is built, labels are in range


def peak_of_refusal(call) -> tuple[str, int]:
    """The one-line refusal `call` raises and the most memory Python held meanwhile (bytes, tracemalloc)."""
    tracemalloc.start()
    try:
        with pytest.raises(UsageError) as caught:
            call()
        return str(caught.value), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


MB = 1 << 20
ABSURD = (0xFFFFFFFF,) * 3  # 2**96 bytes of values claimed


def test_an_idx_header_is_checked_against_the_file_size_before_its_values_are_read(tmp_path):
    huge = tmp_path / "huge"  # one 28x28 image claimed, 64 MB of values behind it (sparse: no disk used)
    with open(huge, "wb") as f:
        f.write(idx.header((1, 28, 28)))
        f.truncate(16 + 64 * MB)
    message, peak = peak_of_refusal(lambda: idx.read(huge, idx.IMAGES))
    assert f"{64 * MB} bytes of values" in message and "say 784" in message and peak < 4 * MB, (message, peak)
    absurd = tmp_path / "absurd"
    absurd.write_bytes(idx.header(ABSURD) + b"\x00" * 100)
    message, peak = peak_of_refusal(lambda: idx.read(absurd, idx.IMAGES))
    assert "100 bytes of values" in message and f"say {2**96 - 3 * 2**64 + 3 * 2**32 - 1}" in message, message
    assert "\n" not in message and peak < MB


def test_a_gzip_bomb_is_read_no_further_than_its_header_claims(tmp_path):
    bomb = tmp_path / "train-images-idx3-ubyte.gz"  # 784 bytes claimed, 64 MB of zeros in about 64 KB
    bomb.write_bytes(gzip.compress(idx.header((1, 28, 28)) + bytes(64 * MB), compresslevel=1))
    message, peak = peak_of_refusal(lambda: idx.read(bomb, idx.IMAGES))
    assert "more than 784 bytes of values" in message and str(bomb) in message and peak < 4 * MB, (message, peak)
    absurd = tmp_path / "absurd.gz"  # a claim no gzip stream of its size can hold: refused before decompressing
    absurd.write_bytes(gzip.compress(idx.header(ABSURD) + bytes(64 * MB), compresslevel=1))
    message, peak = peak_of_refusal(lambda: idx.read(absurd, idx.IMAGES))
    assert "gzip" in message and "1032" in message and peak < MB, (message, peak)


def test_a_corrupt_gzip_stream_is_one_line_naming_it(tmp_path):
    idx.write_mnist(tmp_path, 50)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    raw = bytearray(path.read_bytes())
    start = raw.index(b"\x00", 10) + 1  # after the header and the file's name: the first deflate block's header
    raw[start : start + 16] = bytes(16)  # a stored block whose lengths disagree: zlib.error, not an OSError
    path.write_bytes(raw)
    one_line_error(lambda: idx.read_mnist(tmp_path), str(path), "cannot be read")


# each opcode that imports, calls or reaches outside the pickle, crafted by hand; none may run `print`
CRAFTED = {
    "GLOBAL": (b"cbuiltins\nprint\n(S'ran'\ntR.", "refused builtins.print"),
    "STACK_GLOBAL": (b"\x80\x04\x8c\x08builtins\x8c\x05print\x93\x8c\x03ran\x85R.", "refused builtins.print"),
    "REDUCE": (b"\x80\x02cbuiltins\neval\nX\x0b\x00\x00\x00print('ran')\x85R.", "refused builtins.eval"),
    "INST": (b"(S'ran'\nibuiltins\nprint\n.", "opcode INST"),
    "OBJ": (b"(cnumpy\nndarray\no.", "opcode OBJ"),
    "NEWOBJ": (b"\x80\x02cnumpy\nndarray\n)\x81.", "opcode NEWOBJ"),
    "NEWOBJ_EX": (b"\x80\x04cnumpy\nndarray\n)}\x92.", "opcode NEWOBJ_EX"),
    "PERSID": (b"Pran\n.", "opcode PERSID"),
    "BINPERSID": (b"\x80\x02X\x03\x00\x00\x00ranQ.", "opcode BINPERSID"),
    "EXT1": (b"\x80\x02\x82\x01.", "opcode EXT1"),
    "EXT2": (b"\x80\x02\x83\x01\x00.", "opcode EXT2"),
    "EXT4": (b"\x80\x02\x84\x01\x00\x00\x00.", "opcode EXT4"),
}


@pytest.mark.parametrize("opcode", CRAFTED)
def test_every_opcode_that_imports_or_calls_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch, opcode):
    import copyreg

    monkeypatch.setitem(copyreg._inverted_registry, 1, ("builtins", "print"))  # an extension code that names print
    content, words = CRAFTED[opcode]
    assert opcode in {op.name for op, _, _ in pickletools.genops(content)}
    (tmp_path / "data_batch_1").write_bytes(content)
    one_line_error(lambda: cifar.read_batch(tmp_path / "data_batch_1"), str(tmp_path / "data_batch_1"), words)
    assert "ran" not in capsys.readouterr().out


def array_state(shape, dtype, raw) -> bytes:
    """A batch of one label whose b"data" array carries the state given, pickled as numpy reduces an array; a dtype
    "u1" is numpy's own, pickled as numpy does."""
    out = bytearray(pickle.PROTO + b"\x02" + pickle.EMPTY_DICT + pickle.MARK)
    for value in (b"labels", [1], b"data"):
        cifar._save(value, out)
    out += b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n"
    cifar._save((0,), out)
    cifar._save(b"b", out)
    out += pickle.TUPLE3 + pickle.REDUCE + pickle.MARK + pickle.BININT1 + b"\x01"
    cifar._save(shape, out)
    if dtype == "u1":
        out += b"cnumpy\ndtype\n"
        cifar._save((b"u1", 0, 1), out)
        out += pickle.REDUCE
        cifar._save((3, b"|", None, None, None, -1, -1, 0), out)
        out += pickle.BUILD
    else:
        cifar._save(dtype, out)
    cifar._save(False, out)
    cifar._save(raw, out)
    return bytes(out + pickle.TUPLE + pickle.BUILD + pickle.SETITEMS + pickle.STOP)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (array_state(3072, "u1", b"\x00" * 3072), ['b"data" is not a uint8 array']),  # shape an int
        (array_state((1, 3072), 7, b"\x00" * 3072), ['b"data" is not a uint8 array']),  # dtype an int
        (array_state((1, 3072), "u1", [0] * 3072), ['b"data" is not a uint8 array']),  # values a list
        (array_state((1, 3072), "u1", b"\x00" * 3000), ["in 3000 bytes", "1 labels want uint8 (1, 3072)"]),
    ],
    ids=["shape-int", "dtype-int", "raw-list", "short"],
)
def test_an_array_with_a_wrong_shape_type_or_length_is_one_line(tmp_path, content, words):
    (tmp_path / "b").write_bytes(content)
    one_line_error(lambda: cifar.read_batch(tmp_path / "b"), str(tmp_path / "b"), *words)


@pytest.mark.parametrize("label", [255, -1, 10, True, b"3"])
def test_a_cifar_label_out_of_range_names_the_file_and_the_label(tmp_path, label):
    batch = {b"data": cifar._NdArray(3, b"\x00" * 3 * 3072), b"labels": [0, label, 2]}
    (tmp_path / "b").write_bytes(cifar._pickle2(batch))
    one_line_error(lambda: cifar.read_batch(tmp_path / "b"), str(tmp_path / "b"), f"label {label!r} of image 1",
                   "0 to 9")  # fmt: skip


def test_an_mnist_label_out_of_range_names_the_file_the_label_and_the_image(tmp_path):
    idx.write_mnist(tmp_path, 3)
    idx.write(tmp_path / "train-labels-idx1-ubyte.gz", (3,), b"\x01\xff\x02")
    one_line_error(lambda: idx.read_mnist(tmp_path), "train-labels-idx1-ubyte.gz", "label 255 of image 1", "0 to 9")
    idx.write(tmp_path / "train-labels-idx1-ubyte.gz", (3,), b"\x01\x07\x02")
    one_line_error(lambda: idx.read_mnist(tmp_path, classes=5, network="tiny-x"), "label 7 of image 1",
                   "tiny-x's 5 classes (0 to 4)")  # fmt: skip


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"\xef\xbb\xbf \n \n"], ids=["0-bytes", "bom", "bom-blank"])
def test_an_empty_ptb_file_holds_no_words_even_behind_a_bom(tmp_path, content):
    (tmp_path / "ptb.train.txt").write_bytes(content)
    one_line_error(lambda: ptb.read_words(tmp_path), str(tmp_path / "ptb.train.txt"), "holds no words")


def test_a_utf8_bom_is_not_part_of_the_first_word_and_a_utf16_file_is_named_as_such(tmp_path):
    (tmp_path / "ptb.train.txt").write_bytes(b"\xef\xbb\xbf the cat \n the \n")
    assert ptb.read_words(tmp_path) == ["the", "cat", "<eos>", "the", "<eos>"]
    (tmp_path / "ptb.train.txt").write_bytes(" the cat \n".encode("utf-16"))
    one_line_error(lambda: ptb.read_words(tmp_path), "ptb.train.txt", "UTF-16", "UTF-8")


def image_folder(root: Path, classes: dict[str, list[str]]) -> Path:
    for name, files in classes.items():
        (root / "imagenet" / "train" / name).mkdir(parents=True)
        for file in files:
            (root / "imagenet" / "train" / name / file).write_bytes(b"\xff\xd8 not decoded when listed")
    return root / "imagenet" / "train"


def test_an_empty_class_folder_is_named(tmp_path):
    from dlperf.workloads.datasets import imagefolder

    train = image_folder(tmp_path, {"n1": ["a.JPEG"], "n2": ["notes.txt"], "n3": ["b.JPEG"]})
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), str(train / "n2"), "no image")


def test_a_zero_byte_image_is_named_when_listed(tmp_path):
    from dlperf.workloads.datasets import imagefolder

    train = image_folder(tmp_path, {"n1": ["a.JPEG"], "n2": ["b.JPEG", "c.JPEG"]})
    (train / "n2" / "c.JPEG").write_bytes(b"")
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), str(train / "n2" / "c.JPEG"), "0 bytes")


@pytest.mark.parametrize("where", ["class", "image", "dangling"])
def test_a_symlink_loop_or_a_dangling_link_is_named_not_skipped(tmp_path, where):
    from dlperf.workloads.datasets import imagefolder

    train = image_folder(tmp_path, {"n1": ["a.JPEG"], "n3": ["b.JPEG"]})
    link = {"class": train / "n2", "image": train / "n1" / "z.JPEG", "dangling": train / "n1" / "y.JPEG"}[where]
    link.symlink_to(link.name if where != "dangling" else "gone.JPEG")  # n2 -> n2: a loop
    words = "a symbolic link that leads nowhere" if where == "dangling" else "a symbolic link loop"
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), str(link), words)


@pytest.mark.parametrize("file", ["imagenet", "imagenet/train"])
def test_an_image_folder_that_is_a_file_is_named(tmp_path, file):
    from dlperf.workloads.datasets import imagefolder

    idx.write_mnist(tmp_path / "mnist", 2)  # DIR's other folders: not classes
    ptb.write_ptb(tmp_path / "ptb", words=20, vocab=10)
    (tmp_path / file).parent.mkdir(exist_ok=True)
    (tmp_path / file).write_bytes(b"")
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), str(tmp_path / file), "not a directory")


# ----------------------------------------------------------------------------------------------------------------------
# Each dataset where the common tools put it (issue 31): torchvision's MNIST/raw, Keras' cache (mnist.npz, CIFAR-10's
# cifar-10-batches-py-target), Mikolov's simple-examples/data and torchtext's PennTreebank; the error names every place


@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize("given", ["", "MNIST"])  # the root given to torchvision.datasets.MNIST, or its MNIST folder
def test_mnist_as_torchvision_downloads_it(tmp_path, compress, given):
    idx.write_mnist(tmp_path / "MNIST" / "raw", 3, compress=compress)
    assert len(idx.read_mnist(tmp_path / given)) == 3


def keras_mnist(path: Path, n: int = 3, label_dtype: str = "uint8", labels=None):
    """mnist.npz as keras.datasets.mnist downloads it: x_train (n, 28, 28) and y_train (n,) uint8, the test split."""
    np = require("numpy")
    rng = np.random.default_rng(0)
    y = np.array(labels if labels is not None else rng.integers(0, 10, n), dtype=label_dtype)
    arrays = {f"x_{s}": rng.integers(0, 256, (n, 28, 28), dtype=np.uint8) for s in ("train", "test")}
    np.savez(path, **arrays, y_train=y, y_test=y)
    return arrays, y


def test_mnist_as_keras_caches_it_is_read_from_its_npz_without_numpy(tmp_path):
    arrays, y = keras_mnist(tmp_path / "mnist.npz", 4)
    for split in ("train", "test"):
        mnist = idx.read_mnist(tmp_path, split)
        assert (len(mnist), mnist.rows, mnist.cols) == (4, 28, 28)
        assert mnist.images == arrays[f"x_{split}"].tobytes() and mnist.labels == y.tobytes()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [({"label_dtype": "int64"}, ["y_train", "int64", "uint8"]),
     ({"label_dtype": "object"}, ["y_train", "object", "uint8"]),  # a pickled array: never unpickled
     ({"labels": [1, 2, 10]}, ["label 10 of image 2", "0 to 9"])],
    ids=["int64", "pickled", "label"],
)  # fmt: skip
def test_a_bad_mnist_npz_is_one_line_naming_the_file(tmp_path, kwargs, words):
    keras_mnist(tmp_path / "mnist.npz", **kwargs)
    one_line_error(lambda: idx.read_mnist(tmp_path), "mnist.npz", *words)


def test_an_npz_that_is_not_one_is_one_line(tmp_path):
    (tmp_path / "mnist.npz").write_bytes(b"not a zip")
    one_line_error(lambda: idx.read_mnist(tmp_path), "mnist.npz", "not a NumPy .npz")


def test_cifar10_as_keras_3_caches_it(tmp_path):
    cifar.write_cifar10(tmp_path / "cifar-10-batches-py-target", per_batch=1)
    assert len(cifar.read_cifar10(tmp_path).labels) == 5


@pytest.mark.parametrize("place", ["simple-examples/data", "PennTreebank"])  # Mikolov's archive; torchtext's root
def test_ptb_where_its_archive_unpacks_and_torchtext_downloads_it(tmp_path, place):
    ptb.write_ptb(tmp_path / place, words=20, vocab=10)
    assert ptb.read_words(tmp_path) == ptb.read_words(tmp_path / place)


@pytest.mark.parametrize(
    ("read", "places"),
    [(idx.read_mnist, ["", "mnist", "MNIST/raw", "raw", "mnist.npz"]),
     (cifar.read_cifar10, ["", "cifar-10-batches-py", "cifar-10-batches-py-target/cifar-10-batches-py"]),
     (ptb.read_words, ["", "ptb", "simple-examples/data", "PennTreebank"])],
    ids=["mnist", "cifar10", "ptb"],
)  # fmt: skip
def test_a_dataset_not_found_names_every_place_searched(tmp_path, read, places):
    with pytest.raises(UsageError) as caught:
        read(tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "searched" in message
    for place in places:
        assert f"{tmp_path / place}" in message, (place, message)
    name = {idx.read_mnist: "mnist", cifar.read_cifar10: "cifar10", ptb.read_words: "ptb"}[read]
    assert message.endswith(f"; `dlperf data synth {tmp_path} --only {name}` writes a random one to try"), message
    from dlperf.workloads.datasets.synth import DATASETS

    assert name in DATASETS  # the name `data synth --only` takes


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_a_batch_numpy_pickles_at_any_protocol_is_read(tmp_path, protocol):
    """Batches written by Python 3 at protocol 2 (bytes as `_codecs.encode` of latin-1 text) or 5 (values in a
    bytearray, rebuilt by numpy's `_frombuffer`; Python 3.14's default) were refused as 'not a CIFAR-10 python
    batch', though numpy reads them and they hold nothing but values and numpy's array."""
    import numpy as np

    values = (np.arange(2 * cifar.PIXELS) % 251).astype(np.uint8).reshape(2, cifar.PIXELS)
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({b"data": values, b"labels": [3, 7]}, protocol=protocol))
    batch = cifar.read_batch(path)
    assert batch.labels == [3, 7] and batch.data == values.tobytes()


def test_codecs_encode_is_latin1_text_alone(tmp_path):
    """The one call protocol 2 makes to give bytes: refused for anything but latin-1 text."""
    path = tmp_path / "data_batch_1"
    path.write_bytes(b"\x80\x02c_codecs\nencode\nX\x03\x00\x00\x00ranX\x05\x00\x00\x00utf-8\x86R.")
    one_line_error(lambda: cifar.read_batch(path), str(path), "refused _codecs.encode of str as 'utf-8'")


def test_dir_without_an_image_folder_names_the_places_searched_not_its_folders_as_classes(tmp_path):
    """--data DIR holding mnist/ and ptb/ but no imagenet/train said '2 class folders but no image in them': its
    other datasets' folders were taken for classes. It names where an image folder was looked for."""
    from dlperf.workloads.datasets import imagefolder

    for name in ("mnist", "ptb"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "data.bin").write_bytes(b"\x00")
    searched = f"searched {tmp_path / 'imagenet' / 'train'}, {tmp_path / 'train'}, {tmp_path} "
    said = f"{tmp_path}: no imagenet/train folder, nor class folders of images; {searched}"
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), said)
