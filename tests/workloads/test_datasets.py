import gzip
import pickle
import struct

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
    one_line_error(lambda: idx.read_mnist(tmp_path), "a label of 10")


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
    one_line_error(lambda: cifar.read_batch(tmp_path / "b"), "integers 0 to 9")
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
                (root / name / file).write_bytes(b"")
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
