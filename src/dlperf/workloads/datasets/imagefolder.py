"""An ImageNet-style folder of images (what torchvision's ImageFolder reads, and ImageNet's training set unpacks to):
one folder per class, named by its WordNet id, holding that class's images, `train/n01440764/n01440764_10026.JPEG`.

Only the listing lives here (standard library): the parent and any child can check a folder without decoding an
image; the PyTorch backend decodes (`frameworks/torch/data.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dlperf.workloads.datasets import malformed, missing

FOLDER = "imagenet"
SPLITS = ("train", "val")
SUFFIXES = (".jpeg", ".jpg", ".png")  # compared lower-cased: ImageNet's own files end in .JPEG
EXPECTED = [f"{FOLDER}/train/<class>/<image>.JPEG (or .jpg, .png)"]


@dataclass(frozen=True)
class ImageFolder:
    root: Path  # the split's folder, holding one folder per class
    classes: list[str]  # sorted by name: a class's index is its place here
    samples: list[tuple[Path, int]]  # (image, class index), classes in order, each class's files sorted by name

    def __len__(self) -> int:
        return len(self.samples)


def folder(directory: Path, split: str = "train") -> Path:
    """`directory/imagenet/<split>`, `directory/<split>`, or `directory` itself when it holds the class folders."""
    for candidate in (directory / FOLDER / split, directory / split):
        if candidate.is_dir():
            return candidate
    return directory


def is_image(path: Path) -> bool:
    return path.suffix.lower() in SUFFIXES and path.is_file()


def read_imagefolder(directory: Path, split: str = "train") -> ImageFolder:
    """The images of `split` under `directory`, listed (not opened). No class folder with an image in it is a
    UsageError naming the expected layout."""
    root = folder(directory, split)
    if not root.is_dir():
        raise missing(directory, f"{FOLDER}/{split} folder", "an ImageNet-style folder", EXPECTED)
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    samples = [(p, i) for i, name in enumerate(classes) for p in sorted((root / name).iterdir()) if is_image(p)]
    if not classes:
        raise missing(root, "class folders", "an ImageNet-style folder", EXPECTED)
    if not samples:
        raise malformed(root, f"{len(classes)} class folders but no image in them (expected {', '.join(EXPECTED)})")
    return ImageFolder(root, classes, samples)
