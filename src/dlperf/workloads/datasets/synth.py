"""`dlperf data synth DIR`: every dataset of the layout `--data DIR` reads, written with random content in its real
file format and at a realistic size, so anyone can measure the input path without downloading anything:

    DIR/mnist/                train-images-idx3-ubyte.gz ... t10k-labels-idx1-ubyte.gz    (idx.py)
    DIR/cifar-10-batches-py/  data_batch_1..5, test_batch, batches.meta                   (cifar.py)
    DIR/ptb/                  ptb.train.txt, ptb.valid.txt, ptb.test.txt                  (ptb.py)
    DIR/imagenet/             train/<wnid>/<wnid>_<n>.JPEG, val/<wnid>/<wnid>_<n>.JPEG    (Pillow)

`paper` is the paper's sizes (MNIST 60k + 10k, CIFAR-10 5 x 10k + 10k, PTB 929k words of a 10k vocabulary), but
ImageNet-style is 10 classes of 260 images and 50 each to validate (about 300 MB in all), not 1.28 M images: enough
for minutes of loading. `small` writes in seconds, for tests and trying it out; `medium`, in seconds more, holds enough
batches an epoch at each network's batch (20 or more) for a loader's workers to run steadily.

The JPEGs look like grainy photos, not noise: a smooth colour field, a few soft blobs, a grey texture and colour
grain, 300-500 x 250-450 pixels (ImageNet's mean is about 400x350), quality 88-95 with 4:2:0 chroma, about 100 KB a
file like ImageNet's ~110 KB. At quality 75-90 even pure noise stays near 110 KB, and pure noise decodes unlike a
photo. The same seed writes the same files (with the same Pillow).

Each dataset is written whole or not at all: into a hidden staging folder in DIR (`staged`), then moved into place by
renames (`commit`), so a write that fails (a full disk) or is interrupted leaves nothing a reader would take for a
dataset, and a dataset it was replacing as it was. A synth killed outright (SIGKILL) leaves its staging folder, hidden
from every reader, and the next synth into DIR removes it (`leftovers`: no synth holds its lock).

Loaded only by the parent (the command), never by a child process: it imports Pillow, inside `jpeg` only."""

from __future__ import annotations

import fcntl
import io
import os
import random
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dlperf.workloads.datasets import cifar, idx, ptb

DATASETS = ("mnist", "cifar10", "ptb", "imagenet")  # the order they are written in
FOLDERS = {"mnist": "mnist", "cifar10": cifar.FOLDER, "ptb": "ptb", "imagenet": "imagenet"}
WIDTHS, HEIGHTS = (300, 500), (250, 450)  # drawn per image: ImageNet's mean is about 400x350
QUALITY = (88, 95)
PTB_SPLITS = {"train": ptb.TRAIN, "valid": "ptb.valid.txt", "test": "ptb.test.txt"}


@dataclass(frozen=True)
class Size:
    mnist: tuple[int, int]  # train, test images
    cifar_per_batch: int  # images in each of the six batches
    ptb_words: tuple[int, int, int]  # train, valid, test
    ptb_vocab: int
    classes: int  # ImageNet-style
    train_per_class: int
    val_per_class: int


SIZES = {
    "small": Size((1000, 200), 200, (20_000, 2_000, 2_000), 1_000, 4, 8, 2),
    # at each network's paper batch, 20 batches an epoch or more (`loaders.SHORT_EPOCH`: workers that do not persist
    # then start again every 20 steps or fewer): fcn-r's 1024 24, alexnet-r's 1024 22, resnet-56's 128 172, the LSTM's
    # 128 x 32 49, resnet-50's and alexnet-s's 16 20 (320 JPEGs, about 30 MB)
    "medium": Size((24_000, 2_000), 4_400, (200_000, 20_000, 20_000), 10_000, 8, 40, 4),
    "paper": Size((60_000, 10_000), 10_000, (ptb.PAPER_WORDS, 73_760, 82_430), ptb.PAPER_VOCAB, 10, 260, 50),
}


def files(dataset: str, size: Size) -> int:
    """How many files `write` writes for `dataset`: what its progress counts to."""
    imagenet = size.classes * (size.train_per_class + size.val_per_class)
    return {"mnist": 4, "cifar10": len(cifar.EXPECTED), "ptb": len(PTB_SPLITS), "imagenet": imagenet}[dataset]


def existing(directory: Path, dataset: str) -> list[Path]:
    """What of `dataset` is already in `directory`: the files it would write, and those a reader would take first
    (MNIST's plain files before the .gz), or ImageNet's train/ and val/ folders."""
    out = directory / FOLDERS[dataset]
    names = {
        "mnist": [f"{stem}{suffix}" for pair in idx.SPLITS.values() for stem in pair for suffix in ("", ".gz")],
        "cifar10": cifar.EXPECTED,
        "ptb": list(PTB_SPLITS.values()),
        "imagenet": ["train", "val"],
    }[dataset]
    return [out / name for name in names if (out / name).exists()]


def remove(paths: list[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


STAGING = ".dlperf-synth."  # DIR/.dlperf-synth.<random>/: datasets being written (hidden: no reader looks)


@contextmanager
def staged(directory: Path) -> Iterator[Path]:
    """A staging folder in `directory` (so a rename moves a dataset out of it), locked while this synth lives (a
    folder nobody locks is a leftover: `leftovers`), removed with whatever is left in it."""
    stage = Path(tempfile.mkdtemp(prefix=STAGING, dir=directory))
    lock = os.open(stage, os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        os.close(lock)


def leftovers(directory: Path) -> list[Path]:
    """The staging folders in `directory` that no synth holds: those of synths killed before they could clean up."""
    found = []
    for path in directory.glob(f"{STAGING}*"):
        try:
            lock = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            found.append(path)
        except BlockingIOError:
            pass  # a synth writing there now
        finally:
            os.close(lock)
    return found


def commit(stage: Path, directory: Path, dataset: str) -> None:
    """Move `dataset`, written whole into `stage`, into `directory`: its folder renamed into place, or, when the folder
    is there already, each of its files and folders, what of the dataset was there (`existing`) moved aside first and
    removed with the stage. Interrupts wait the few microseconds of the renames: half moved, old and new files mixed
    would read as one dataset."""
    new, out = stage / FOLDERS[dataset], directory / FOLDERS[dataset]
    with interrupts_deferred():
        if not out.exists():
            os.rename(new, out)
            return
        aside = Path(tempfile.mkdtemp(prefix="replaced.", dir=stage))
        for path in existing(directory, dataset):
            os.rename(path, aside / path.name)
        for path in new.iterdir():
            os.rename(path, out / path.name)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C (and SIGTERM, read as one) held until the block is done, then delivered."""
    held = {signal.SIGINT, signal.SIGTERM}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def write(directory: Path, dataset: str, size: Size, seed: int = 0) -> Iterator[Path]:
    """Write `dataset` into its folder of `directory`, yielding each file once it is written."""
    out = directory / FOLDERS[dataset]
    seed = _seed(seed, dataset)
    if dataset == "mnist":
        for i, (split, n) in enumerate(zip(idx.SPLITS, size.mnist, strict=True)):
            idx.write_mnist(out, n, split, seed=seed + i)
            yield from (out / f"{stem}.gz" for stem in idx.SPLITS[split])
    elif dataset == "cifar10":
        cifar.write_cifar10(directory, size.cifar_per_batch, seed=seed)
        yield from (out / name for name in cifar.EXPECTED)
    elif dataset == "ptb":
        for i, (name, words) in enumerate(zip(PTB_SPLITS.values(), size.ptb_words, strict=True)):
            yield ptb.write_ptb(out, words, size.ptb_vocab, seed=seed + i, name=name)
    else:
        yield from write_imagenet(out, size, seed)


def _seed(seed: int, dataset: str) -> int:
    """Each dataset its own stream, so --only writes the same files as a run writing them all."""
    return random.Random(f"{seed}/{dataset}").randrange(2**32)


def wnids(classes: int, seed: int) -> list[str]:
    """Made-up WordNet ids in ImageNet's form (n01440764): n and 8 digits, distinct, sorted as folders list."""
    return sorted(f"n{i:08d}" for i in random.Random(seed).sample(range(1_000_000, 15_000_000), classes))


def write_imagenet(out: Path, size: Size, seed: int) -> Iterator[Path]:
    for split, per_class in (("train", size.train_per_class), ("val", size.val_per_class)):
        for wnid in wnids(size.classes, seed):
            folder = out / split / wnid
            folder.mkdir(parents=True, exist_ok=True)
            for n in range(per_class):
                path = folder / f"{wnid}_{n}.JPEG"
                path.write_bytes(jpeg(random.Random(f"{seed}/{split}/{wnid}/{n}")))
                yield path


def jpeg(rng: random.Random) -> bytes:
    """One photo-like JPEG drawn from `rng`: its size, content and quality."""
    from PIL import Image, ImageDraw, ImageFilter

    width, height = rng.randint(*WIDTHS), rng.randint(*HEIGHTS)
    bicubic = Image.Resampling.BICUBIC
    # a smooth colour field (a 4x3 image stretched), with a few soft-edged blobs on it
    image = Image.frombytes("RGB", (4, 3), rng.randbytes(4 * 3 * 3)).resize((width, height), bicubic)
    draw = ImageDraw.Draw(image)
    for _ in range(rng.randint(3, 8)):
        x, y = rng.randrange(width), rng.randrange(height)
        rx, ry = rng.randint(15, width // 3), rng.randint(15, height // 3)
        draw.ellipse((x - rx, y - ry, x + rx, y + ry), fill=tuple(rng.randbytes(3)))
    image = image.filter(ImageFilter.GaussianBlur(2))
    # a grey texture at half the resolution, then colour grain: the detail a photo's file size comes from
    tw, th = width // 2, height // 2
    texture = Image.frombytes("L", (tw, th), rng.randbytes(tw * th)).resize((width, height), bicubic).convert("RGB")
    grain = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    image = Image.blend(Image.blend(image, texture, 0.35), grain, 0.35)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=rng.randint(*QUALITY), subsampling="4:2:0")
    return buffer.getvalue()


def readme(size_name: str, seed: int, written: list[str], version: str) -> str:
    """The paragraph README.txt gets for each `dlperf data synth` into its directory."""
    return (
        f"dlperf {version} wrote {', '.join(written)} here (dlperf data synth --size {size_name} --seed {seed}).\n"
        "Random content in each dataset's real file format, for measuring the input path (dlperf run --data DIR):\n"
        "the labels, pixels and words mean nothing, and a model trained on them learns nothing.\n\n"
    )
