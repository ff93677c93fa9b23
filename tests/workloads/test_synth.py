"""`dlperf data synth`'s writer: every dataset of the layout, in the format its reader reads, the same for a seed."""

import gzip
import random
import re
from pathlib import Path

import pytest

from conftest import require
from dlperf.workloads.datasets import cifar, idx, ptb, synth

SMALL = synth.SIZES["small"]


def write(directory: Path, datasets=synth.DATASETS, seed: int = 0) -> dict[str, list[Path]]:
    return {d: list(synth.write(directory, d, SMALL, seed)) for d in datasets}


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Path, dict[str, list[Path]]]:
    directory = tmp_path_factory.mktemp("small")
    return directory, write(directory)


def test_small_writes_each_dataset_where_its_reader_reads_it(small):
    directory, written = small
    assert {d: len(paths) for d, paths in written.items()} == {d: synth.files(d, SMALL) for d in synth.DATASETS}
    assert all(p.is_file() and p.stat().st_size for paths in written.values() for p in paths)
    train, test = idx.read_mnist(directory / "mnist"), idx.read_mnist(directory / "mnist", "test")
    assert (len(train), len(test), train.rows, train.cols) == (*SMALL.mnist, 28, 28)
    cifar_train, cifar_test = cifar.read_cifar10(directory), cifar.read_cifar10(directory, "test")
    assert (len(cifar_train), len(cifar_test)) == (5 * SMALL.cifar_per_batch, SMALL.cifar_per_batch)
    for name, count in zip(synth.PTB_SPLITS.values(), SMALL.ptb_words, strict=True):
        words = ptb.read_words(directory / "ptb", name)
        assert len(words) - words.count(ptb.EOS) == count
    assert len(ptb.vocabulary(ptb.read_words(directory / "ptb"))) <= SMALL.ptb_vocab + 1  # + <eos>


def test_the_imagenet_folder_holds_photo_sized_rgb_jpegs(small):
    pil = require("PIL.Image")
    directory, written = small
    images = written["imagenet"]
    for split, per_class in (("train", SMALL.train_per_class), ("val", SMALL.val_per_class)):
        classes = sorted(p.name for p in (directory / "imagenet" / split).iterdir())
        assert len(classes) == SMALL.classes and all(re.fullmatch(r"n\d{8}", c) for c in classes)
        for wnid in classes:
            names = sorted(p.name for p in (directory / "imagenet" / split / wnid).iterdir())
            assert names == sorted(f"{wnid}_{n}.JPEG" for n in range(per_class))
    for path in images:
        with pil.open(path) as image:
            assert (image.format, image.mode) == ("JPEG", "RGB")
            assert synth.WIDTHS[0] <= image.width <= synth.WIDTHS[1]
            assert synth.HEIGHTS[0] <= image.height <= synth.HEIGHTS[1]
    assert len({pil.open(p).size for p in images}) > len(images) // 2  # sizes vary per image
    mean = sum(p.stat().st_size for p in images) / len(images)
    assert 70_000 < mean < 160_000  # ImageNet's mean is about 110 KB


def test_a_jpeg_is_a_photo_not_noise():
    """Pure noise would make the files' size, but decodes (and compresses) unlike a photo: neighbouring pixels of a
    photo are alike, so its thumbnail keeps structure the grain washes out of noise."""
    pil = require("PIL.Image")
    import io

    from PIL import ImageFilter, ImageStat

    image = pil.open(io.BytesIO(synth.jpeg(random.Random(3)))).convert("L")
    smooth = image.filter(ImageFilter.BoxBlur(8))
    noise = pil.frombytes("L", image.size, random.Random(3).randbytes(image.width * image.height))
    assert ImageStat.Stat(smooth).stddev[0] > 3 * ImageStat.Stat(noise.filter(ImageFilter.BoxBlur(8))).stddev[0]


def test_a_seed_writes_the_same_files_and_only_writes_what_all_does(small, tmp_path, monkeypatch):
    directory, written = small
    monkeypatch.setattr(gzip.time, "time", lambda: 2e9)  # later: gzip once wrote the clock into each MNIST file
    again = write(tmp_path, ("ptb", "cifar10", "mnist"))  # another order, a subset: each dataset its own stream
    for paths in again.values():
        for path in paths:
            assert path.read_bytes() == (directory / path.relative_to(tmp_path)).read_bytes(), path
    assert synth.jpeg(random.Random("a")) == synth.jpeg(random.Random("a"))
    assert synth.jpeg(random.Random("a")) != synth.jpeg(random.Random("b"))
    other = write(tmp_path / "other", ("mnist",), seed=1)["mnist"]
    assert other[0].read_bytes() != written["mnist"][0].read_bytes()
    assert synth.wnids(4, 0) == synth.wnids(4, 0) != synth.wnids(4, 1)


def test_existing_names_what_a_reader_would_take(tmp_path):
    assert all(synth.existing(tmp_path, d) == [] for d in synth.DATASETS)
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / "train-images-idx3-ubyte").write_bytes(b"")  # plain: read before the .gz written
    (tmp_path / "imagenet" / "val").mkdir(parents=True)
    assert synth.existing(tmp_path, "mnist") == [tmp_path / "mnist" / "train-images-idx3-ubyte"]
    assert synth.existing(tmp_path, "imagenet") == [tmp_path / "imagenet" / "val"]
    synth.remove([*synth.existing(tmp_path, "mnist"), *synth.existing(tmp_path, "imagenet")])
    assert all(synth.existing(tmp_path, d) == [] for d in synth.DATASETS)


def test_medium_holds_enough_batches_an_epoch_at_each_networks_batch():
    """`--size medium`: each of the paper's networks that reads a dataset gets SHORT_EPOCH batches an epoch or more,
    so neither the plan nor a cell warns of workers starting again every few steps."""
    from dlperf.loaders import SHORT_EPOCH

    require("torch")
    from dlperf.frameworks.torch.data import dataset_name
    from dlperf.workloads import SUITE

    medium = synth.SIZES["medium"]
    samples = {"mnist": medium.mnist[0], "cifar-10": 5 * medium.cifar_per_batch,
               "imagenet": medium.classes * medium.train_per_class}  # fmt: skip
    found = {}
    for w in SUITE:
        try:
            name = dataset_name(w)
        except NotImplementedError:  # synthetic only (fcn-s)
            continue
        held = medium.ptb_words[0] // w.input.shape[0] if name == "ptb" else samples[name]
        found[w.name] = held // w.batch
    assert len(found) == 6 and min(found.values()) >= SHORT_EPOCH, found
