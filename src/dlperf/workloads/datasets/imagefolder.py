"""An ImageNet-style folder of images (what torchvision's ImageFolder reads, and ImageNet's training set unpacks to):
one folder per class, named by its WordNet id, holding that class's images, `train/n01440764/n01440764_10026.JPEG`.

Only the listing lives here (standard library): the parent and any child can check a folder without decoding an
image; the PyTorch backend decodes (`frameworks/torch/data.py`)."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import UsageError
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
    """`directory/imagenet/<split>`, `directory/<split>`, or `directory` itself when it holds the class folders. One
    of those there but not a directory (a file, a link that loops or leads nowhere) is a UsageError naming it."""
    for candidate in (directory / FOLDER / split, directory / split):
        for path in dict.fromkeys((candidate.parent, candidate)):
            if (status := _status(path)) is not None and not _is(stat.S_ISDIR, status):
                raise malformed(path, f"not a directory (expected {', '.join(EXPECTED)})")
        if candidate.is_dir():
            return candidate
    return directory


def _status(path: Path) -> os.stat_result | None:
    """What `path` leads to, or None when nothing is there; a link that loops or leads nowhere is named."""
    try:
        return path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise malformed(path, f"a symbolic link that leads nowhere ({os.readlink(path)})") from None
        return None
    except OSError as e:
        why = "a symbolic link loop" if e.errno == errno.ELOOP else f"cannot be read ({e.strerror})"
        raise malformed(path, why) from None


def _is(kind, status: os.stat_result | None) -> bool:
    return status is not None and kind(status.st_mode)


def _entries(folder: Path) -> list[Path]:
    """The folder's entries sorted by name, hidden ones left out."""
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError as e:
        raise malformed(folder, f"cannot be listed ({e.strerror})") from None


def _images(folder: Path) -> list[Path]:
    """The image files of a class folder (by suffix), sorted; an empty one (0 bytes) is named."""
    images = []
    for path in _entries(folder):
        if path.suffix.lower() in SUFFIXES and _is(stat.S_ISREG, status := _status(path)):
            if status.st_size == 0:
                raise malformed(path, "an empty file (0 bytes), not an image")
            images.append(path)
    return images


def read_imagefolder(directory: Path, split: str = "train") -> ImageFolder:
    """The images of `split` under `directory`, listed (not opened). No class folder, a class folder without an
    image, an empty image file, a link that loops or leads nowhere: a UsageError naming it and the expected layout."""
    root = folder(directory, split)
    if not root.is_dir():
        raise missing(directory, f"{FOLDER}/{split} folder", "an ImageNet-style folder", EXPECTED)
    classes = [p for p in _entries(root) if _is(stat.S_ISDIR, _status(p))]
    if not classes:
        raise missing(root, "class folders", "an ImageNet-style folder", EXPECTED)
    images = {path.name: _images(path) for path in classes}
    if not any(images.values()) and root == directory:  # no imagenet/<split> nor <split>: DIR's folders held no class
        searched = ", ".join(map(str, (directory / FOLDER / split, directory / split, directory)))
        raise UsageError(f"{directory}: no {FOLDER}/{split} folder, nor class folders of images; searched {searched} "
                         f"(an ImageNet-style folder expects {', '.join(EXPECTED)})")  # fmt: skip
    if not any(images.values()):
        raise malformed(root, f"{len(classes)} class folders but no image in them (expected {', '.join(EXPECTED)})")
    if empty := next((name for name, found in images.items() if not found), None):
        raise malformed(root / empty, f"no image in this class folder (an empty class; expected {', '.join(SUFFIXES)})")
    samples = [(p, i) for i, name in enumerate(images) for p in images[name]]
    return ImageFolder(root, list(images), samples)
