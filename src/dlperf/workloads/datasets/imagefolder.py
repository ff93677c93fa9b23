"""An ImageNet-style folder of images (what torchvision's ImageFolder reads, and ImageNet's training set unpacks to):
one folder per class, named by its WordNet id, holding that class's images, `train/n01440764/n01440764_10026.JPEG`.
A class folder's images are found at any depth, as ImageFolder finds them (`photos/cats/2019/a.jpg`).

Only the listing lives here (standard library): the parent and any child can check a folder without decoding an
image; the PyTorch backend decodes (`frameworks/torch/data.py`)."""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dlperf.errors import UsageError
from dlperf.workloads.datasets import cifar, idx, malformed, missing, ptb

FOLDER = "imagenet"
NAME = "ImageNet-style folder"  # what a loader cell reading one records as its dataset (`LoaderRecord.dataset`)
SPLITS = ("train", "val")
# torchvision's IMG_EXTENSIONS, what its ImageFolder reads and Pillow decodes; compared lower-cased: ImageNet's own
# files end in .JPEG. Any other file of a class folder (.gif, which ImageFolder leaves out too, notes.txt) is skipped
# and counted (`ImageFolder.skipped`), a class of nothing else named with what it holds.
SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
EXPECTED = [f"{FOLDER}/train/<class>/<image>.JPEG (or {', '.join(s for s in SUFFIXES if s != '.jpeg')})"]
# the other datasets' folders `dlperf data synth DIR` writes (.gz, pickles, text): one of them that holds no image is
# none of DIR's classes; one that does is a class, as ImageFolder reads it (`PTB/`, pulmonary tuberculosis, of PNGs)
DATASETS = (idx.FOLDER, cifar.FOLDER, ptb.FOLDER)
# DIR's folders that are a dataset's splits or dlperf's imagenet/, never taken for DIR's own classes beside DIR/train;
# compared lower-cased, as Kaggle's folders are `Train/` and `Test/`
NOT_CLASSES = (FOLDER, *SPLITS, "valid", "validation", "test")
NAMED = 3  # of DIR's own class folders, those an ambiguous DIR's line names


@dataclass(frozen=True)
class ImageFolder:
    root: Path  # the split's folder, holding one folder per class
    classes: list[str]  # sorted by name: a class's index is its place here
    samples: list[tuple[Path, int]]  # (image, class index), classes in order, each class's as ImageFolder lists them
    skipped: dict[str, int] = field(default_factory=dict)  # the class folders' other files: suffix -> how many

    def __len__(self) -> int:
        return len(self.samples)

    def skipped_said(self) -> str:
        """The files of the class folders left unread, and why: "" where none was."""
        return skipped_said(self.skipped)


def skipped_said(skipped: dict[str, int], how: str = "skipped, not of a type read") -> str:
    """'3 files skipped, not of a type read (.gif 2, .txt 1)': where a folder's files are not all read, how many."""
    if not (count := sum(skipped.values())):
        return ""
    kinds = ", ".join(f"{suffix} {n}" for suffix, n in sorted(skipped.items(), key=lambda kind: (-kind[1], kind[0])))
    return f"{count} file{'s' if count > 1 else ''} {how} ({kinds})"


def _kind(path: Path) -> str:
    return path.suffix.lower() or "no suffix"


def folder(directory: Path, split: str = "train") -> Path:
    """`directory/imagenet/<split>`, `directory/<split>`, or `directory` itself when it holds the class folders. A
    split is read where `directory`'s other folders (not splits) hold no image; where they do, a `directory/<split>`
    that holds images itself is one of the classes (`train` beside `bus` and `car`), and any other is a UsageError
    naming both (the folder read is never a guess). One of those there but not a directory (a file, a link that
    loops or leads nowhere) is a UsageError naming it."""
    found = _split(directory, split)
    if found is None:
        return directory
    own = [p.name for p in _entries(directory) if _class(p.name) and p.is_dir() and _holds_images(p)]
    if not own:
        return found
    if found.parent == directory and _holds_images(found, deep=False):  # train/ beside bus/ and car/: a class
        return directory
    named = ", ".join(own[:NAMED]) + (f", ... ({len(own)} in all)" if len(own) > NAMED else "")
    outer = directory / found.relative_to(directory).parts[0]  # imagenet/ (of `dlperf data synth`), or train/
    aside = f"move {outer} out of it" if outer.name == FOLDER else f"rename {outer.name} (a split's name)"
    raise UsageError(f"{directory}: both {found} and {directory}'s own folders ({named}) hold images, and dlperf "
                     f"does not guess which to read: --data {found} reads the first; to read {directory}'s own "
                     f"class folders, {aside}")  # fmt: skip


def _class(name: str) -> bool:
    """Whether a folder of DIR named so may be one of DIR's own classes: not a split's (another dataset's folder
    holds no image, so is never one of those that hold images)."""
    return name.lower() not in NOT_CLASSES


def _split(directory: Path, split: str) -> Path | None:
    """`directory/imagenet/<split>` or `directory/<split>`, the first that is a directory; None for neither. Names
    match whatever their case (`Train/`, as Kaggle's folders are named), an exact match first: `Train/` beside `Test/`
    was read as two classes, the splits mixed."""
    for candidate in (_named(_named(directory, FOLDER), split), _named(directory, split)):
        for path in dict.fromkeys((candidate.parent, candidate)):
            if (status := _status(path)) is not None and not _is(stat.S_ISDIR, status):
                raise malformed(path, f"not a directory (expected {', '.join(EXPECTED)})")
        if candidate.is_dir():
            return candidate
    return None


def _named(directory: Path, name: str) -> Path:
    """The entry of `directory` named `name` in any case (`directory/name` where there is none). Where more than one
    is (`train/` and `Train/`, `Train/` and `TRAIN/`), a UsageError naming them: which is meant is never a guess."""
    if not directory.is_dir():
        return directory / name
    try:
        alike = sorted(p for p in directory.iterdir() if p.name.lower() == name)
    except OSError:
        return directory / name  # what cannot be listed is named when it is read
    if len(alike) > 1:
        both = f"{', '.join(map(str, alike[:-1]))} and {alike[-1]}"
        more = ", and so on" if len(alike) > 2 else ""
        raise UsageError(f"{directory}: {'both ' if len(alike) == 2 else ''}{both} are named {name} (in different "
                         f"cases), and dlperf does not guess which to read: --data {alike[0]} reads the first, --data "
                         f"{alike[1]} the second{more}")  # fmt: skip
    return alike[0] if alike else directory / name


def _holds_images(folder: Path, deep: bool = True) -> bool:
    """Whether a file under `folder` is named as an image (`deep`: at any depth, else in `folder` itself), hidden
    entries left out. Only weighs which folder is meant: reading it names what is wrong in it, never this."""
    for _, folders, files in os.walk(folder):  # links not followed: a loop cannot hold this up
        if any(not f.startswith(".") and Path(f).suffix.lower() in SUFFIXES for f in files):
            return True
        folders[:] = [f for f in folders if not f.startswith(".")] if deep else []
    return False


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


def _listing(folder: Path) -> tuple[list[Path], list[Path], list[Path]]:
    """A folder's image files (by suffix), its folders and its other files, each sorted by name, hidden ones left out;
    an empty image (0 bytes), or one that is a link that loops or leads nowhere, is named."""
    images, folders, others = [], [], []
    for path in _entries(folder):
        if path.suffix.lower() not in SUFFIXES:
            if path.is_dir():  # as os.walk: a link that loops or leads nowhere is no folder
                folders.append(path)
            else:
                others.append(path)
        elif _is(stat.S_ISREG, status := _status(path)):
            if status.st_size == 0:
                raise malformed(path, "an empty file (0 bytes), not an image")
            images.append(path)
        elif _is(stat.S_ISDIR, status):
            folders.append(path)
    return images, folders, others


def _walk(top: Path) -> Iterator[tuple[Path, list[Path], list[Path]]]:
    """Each folder under `top`, `top` first, with its images: what os.walk(followlinks=True) visits, as ImageFolder
    walks a class folder. A link back to a folder above it is named: ImageFolder would follow it until the path grew
    too long, listing the same images again at each turn."""
    stack: list[tuple[Path, frozenset]] = [(top, frozenset())]
    while stack:
        path, above = stack.pop()
        status = _status(path)
        if (identity := (status.st_dev, status.st_ino)) in above:
            raise malformed(path, "a symbolic link loop (it leads back to a folder above it)")
        images, folders, others = _listing(path)
        yield path, images, others
        stack += [(p, above | {identity}) for p in reversed(folders)]


def _images(folder: Path) -> tuple[list[Path], Counter]:
    """The image files of a class folder at any depth, in ImageFolder's order: folder by folder sorted by path (as
    `sorted(os.walk(...))`), each one's files sorted by name; and its other files' kinds, counted."""
    walked = sorted(_walk(folder), key=lambda found: str(found[0]))
    others = Counter(_kind(p) for *_, files in walked for p in files)
    return [image for _, images, _ in walked for image in images], others


def read_imagefolder(directory: Path, split: str = "train") -> ImageFolder:
    """The images of `split` under `directory`, listed (not opened). No class folder, a class folder without an
    image, an empty image file, a link that loops or leads nowhere: a UsageError naming it and the expected layout."""
    root = folder(directory, split)
    if not root.is_dir():
        raise missing(directory, f"{FOLDER}/{split} folder", "an ImageNet-style folder", EXPECTED)
    classes = [p for p in _entries(root) if _is(stat.S_ISDIR, _status(p))]
    if not classes:
        raise missing(root, "class folders", "an ImageNet-style folder", EXPECTED)
    listed = {path.name: _images(path) for path in classes}
    if root == directory:  # DIR's own classes: not `dlperf data synth DIR`'s mnist/, ptb/ of no image; a PTB/ of images
        listed = {name: found for name, found in listed.items() if found[0] or name.lower() not in DATASETS}
    images = {name: found for name, (found, _) in listed.items()}
    skipped = sum((others for _, others in listed.values()), Counter())
    if not any(images.values()) and root == directory:  # no imagenet/<split> nor <split>: DIR's folders held no class
        searched = ", ".join(map(str, (directory / FOLDER / split, directory / split, directory)))
        raise UsageError(f"{directory}: no {FOLDER}/{split} folder, nor class folders of images{_holds(skipped)}; "
                         f"searched {searched} "
                         f"(an ImageNet-style folder expects {', '.join(EXPECTED)})")  # fmt: skip
    if not any(images.values()):
        raise malformed(root, f"{len(classes)} class folders but no image in them{_holds(skipped)} (expected "
                              f"{', '.join(EXPECTED)})")  # fmt: skip
    if empty := next((name for name, found in images.items() if not found), None):
        raise malformed(root / empty, f"no image in this class folder{_holds(listed[empty][1])} (an empty class; "
                                      f"expected {', '.join(SUFFIXES)})")  # fmt: skip
    samples = [(p, i) for i, name in enumerate(images) for p in images[name]]
    return ImageFolder(root, list(images), samples, dict(skipped))


def _holds(kinds: Counter) -> str:
    """What a folder without an image holds instead (a folder of .gif only), so the error says why none was read."""
    return f": it holds {skipped_said(kinds, 'of no type read')}" if kinds else ""
