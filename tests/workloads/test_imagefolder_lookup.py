"""Which folder `--data DIR` reads as an image folder, and what it reads there: DIR/imagenet/train or DIR/train in
place of DIR only where DIR's other folders hold no image (never a guess between the two), and each class folder's
images at any depth, in the order torchvision's ImageFolder lists them."""

import os
from pathlib import Path

import pytest

from dlperf.errors import UsageError
from dlperf.workloads.datasets import imagefolder


def images(folder: Path, *names: str) -> None:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"\xff\xd8 listed, not decoded")


def one_line_error(call, *words) -> str:
    with pytest.raises(UsageError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and all(w in message for w in words), message
    return message


IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")  # torchvision's


def imagefolders_samples(root: Path) -> list[tuple[str, int]]:
    """torchvision's `ImageFolder(root).samples` (`datasets.folder.find_classes` and `make_dataset`), restated: the
    class folders sorted, each walked with os.walk(followlinks=True), its folders sorted by path, their files by
    name."""
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    samples = []
    for index, name in enumerate(classes):
        for folder, _, files in sorted(os.walk(root / name, followlinks=True)):
            kept = [f for f in sorted(files) if f.lower().endswith(IMG_EXTENSIONS)]
            samples += [(os.path.join(folder, f), index) for f in kept]
    return samples


def test_a_class_folders_images_are_found_at_any_depth_in_imagefolders_order(tmp_path):
    """`_images` read a class folder one level deep: `cats/2019/*.jpg` was left out, silently, though the guide says
    a folder is read as ImageFolder reads it (os.walk, links followed). `2019-old` sorts before `2019/sub` by path,
    as `sorted(os.walk(...))` orders them, not after it as a walk of sorted names would."""
    root = tmp_path / "photos"
    images(root / "cats", "b.jpg", "a.JPEG", "2019/x.png", "2019/sub/y.jpg", "2019-old/z.jpg", "a b/c.jpg")
    images(root / "dogs", "d.jpg", "2020/e.jpeg")
    (root / "dogs" / "notes.txt").write_text("not an image")
    images(tmp_path / "elsewhere", "f.jpg", "deeper/g.png")
    (root / "dogs" / "linked").symlink_to(tmp_path / "elsewhere")  # followed, as ImageFolder follows it
    found = imagefolder.read_imagefolder(root)
    assert found.root == root and found.classes == ["cats", "dogs"]
    assert [(str(p), y) for p, y in found.samples] == imagefolders_samples(root)
    cats = [str(p.relative_to(root / "cats")) for p, y in found.samples if y == 0]
    assert cats == ["a.JPEG", "b.jpg", "2019/x.png", "2019-old/z.jpg", "2019/sub/y.jpg", "a b/c.jpg"]
    assert len(found) == 10


def test_classes_that_hold_only_subfolders_are_read_not_said_to_hold_no_image(tmp_path):
    """Every class with its images in subfolders only (`bus/2019/*.jpg`) was 'no imagenet/train folder, nor class
    folders of images'."""
    images(tmp_path, "bus/2019/a.jpg", "bus/2020/b.jpg", "car/2019/c.png")
    found = imagefolder.read_imagefolder(tmp_path)
    assert found.root == tmp_path and found.classes == ["bus", "car"]
    assert [(p.relative_to(tmp_path).as_posix(), y) for p, y in found.samples] == [
        ("bus/2019/a.jpg", 0), ("bus/2020/b.jpg", 0), ("car/2019/c.png", 1)]  # fmt: skip


def test_hidden_files_and_folders_under_a_class_are_left_out_and_a_nested_empty_image_is_named(tmp_path):
    images(tmp_path / "imagenet" / "train", "n1/a.jpg", "n1/.thumbs/b.jpg", "n1/sub/.c.jpg", "n2/d.jpg")
    found = imagefolder.read_imagefolder(tmp_path)
    assert [p.name for p, _ in found.samples] == ["a.jpg", "d.jpg"]
    empty = tmp_path / "imagenet" / "train" / "n2" / "2019" / "e.jpg"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), str(empty), "0 bytes")


@pytest.mark.parametrize("target", [".", "..", "../.."])
def test_a_link_back_to_a_folder_above_is_named_not_walked_again_and_again(tmp_path, target):
    """os.walk(followlinks=True) follows a link to a folder above it until the path is too long, each turn listing
    the same images again: named, as a link that loops at the class folder's level is."""
    train = tmp_path / "imagenet" / "train"
    images(train, "n1/a.jpg", "n2/b.jpg")
    (train / "n1" / "up").symlink_to(target)
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), str(train / "n1" / "up"), "a symbolic link loop")


def test_a_train_class_beside_other_classes_is_a_class_not_a_split(tmp_path):
    """Classes bus, car and train: DIR/train was taken for the training split, and its subfolder old/, 11 images of
    one class, was what dlperf trained on. A train/ that holds images itself is a class folder: DIR is read, train's
    images with old/'s."""
    images(tmp_path, "bus/a.jpg", "car/b.jpg", "train/c.jpg", *(f"train/old/{k:02}.jpg" for k in range(11)))
    found = imagefolder.read_imagefolder(tmp_path)
    assert found.root == tmp_path and found.classes == ["bus", "car", "train"] and len(found) == 14


@pytest.mark.parametrize(
    "split, aside",
    [("imagenet/train", "move {dir}/imagenet out of it"), ("train", "rename train (a split's name)")],
)
def test_a_split_beside_class_folders_of_images_is_refused_naming_both(tmp_path, split, aside):
    """`dlperf data synth photos --only imagenet,mnist` into a folder of 3 class folders of photos: the run measured
    the 32 synthetic JPEGs of photos/imagenet/train, not the 300 photos, exit 0 and nothing said. Either could be
    meant: refused, naming both and how to read each."""
    photos = tmp_path / "photos"
    images(photos, "cats/a.jpg", "dogs/b.jpg", "birds/2019/c.jpg", f"{split}/n1/d.JPEG", f"{split}/n2/e.JPEG")
    (photos / "mnist").mkdir()
    (photos / "mnist" / "train-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8b")
    said = one_line_error(lambda: imagefolder.read_imagefolder(photos), f"both {photos / split} and {photos}'s own "
                          f"folders (birds, cats, dogs) hold images", f"--data {photos / split} reads the first",
                          aside.format(dir=photos))  # fmt: skip
    assert said.startswith(f"{photos}: ")


def test_many_classes_of_an_ambiguous_folder_are_counted_not_all_named(tmp_path):
    images(tmp_path, "imagenet/train/n1/a.jpg", *(f"c{k}/a.jpg" for k in range(5)))
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), "(c0, c1, c2, ... (5 in all))")


def test_a_split_beside_other_splits_and_datasets_is_read_without_a_question(tmp_path):
    """DIR/train beside val/, test/ and other datasets' folders, and `dlperf data synth`'s own layout, are not
    ambiguous: their other folders are splits or hold no image."""
    images(tmp_path / "a", "train/n1/a.jpg", "val/n1/b.jpg", "test/n1/c.jpg", "valid/n1/d.jpg", "mnist/x.gz")
    images(tmp_path / "b", "imagenet/train/n1/a.JPEG", "imagenet/val/n1/b.JPEG", "cifar-10-batches-py/data_batch_1")
    assert imagefolder.read_imagefolder(tmp_path / "a").root == tmp_path / "a" / "train"
    assert imagefolder.read_imagefolder(tmp_path / "b").root == tmp_path / "b" / "imagenet" / "train"
    assert imagefolder.read_imagefolder(tmp_path / "b" / "imagenet").root == tmp_path / "b" / "imagenet" / "train"
    images(tmp_path / "c", "train/n1/a.jpg", "train/n2/b.jpg", "train/preview.jpg", "val/n1/c.jpg")
    assert imagefolder.read_imagefolder(tmp_path / "c").root == tmp_path / "c" / "train"  # no class beside it


def test_other_datasets_folders_written_beside_class_folders_are_not_classes(tmp_path):
    """In a folder of class folders c0/ c1/, after `dlperf data synth DIR --only mnist,cifar10,ptb` (which a missing
    dataset's line suggests) the run stopped: '--data DIR/mnist: no image in this class folder'. Those folders hold
    another dataset, never one of DIR's classes."""
    images(tmp_path, "c0/a.jpg", "c1/b.jpg", "mnist/train-images-idx3-ubyte.gz", "ptb/ptb.train.txt")
    images(tmp_path, "cifar-10-batches-py/data_batch_1")
    found = imagefolder.read_imagefolder(tmp_path)
    assert found.root == tmp_path and found.classes == ["c0", "c1"] and len(found) == 2


def test_a_class_named_as_another_dataset_that_holds_images_is_a_class(tmp_path):
    """A class `PTB/` of PNGs (pulmonary tuberculosis) beside `Normal/` read '1 image in 1 class', PTB/ left out as
    `dlperf data synth`'s ptb/ of text; and a `train/` beside an `MNIST/` class of images was read without a question.
    Only such a folder that holds no image is left out: ImageFolder reads both classes, and the split is asked."""
    images(tmp_path / "a", "Normal/a.png", "PTB/b.png", "PTB/2019/c.png", "mnist/x.gz")
    found = imagefolder.read_imagefolder(tmp_path / "a")
    assert found.classes == ["Normal", "PTB"] and len(found) == 3
    assert [(str(p), i) for p, i in found.samples] == imagefolders_samples(tmp_path / "a")
    images(tmp_path / "b", "train/n1/a.jpg", "train/n2/b.jpg", "MNIST/c.jpg")
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path / "b"), "own folders (MNIST) hold images")


def test_capitalised_splits_are_splits_not_two_classes(tmp_path):
    """Kaggle's `Train/` and `Test/` were read as two classes of DIR, the splits mixed: split names match whatever
    their case, as `train/` and `test/` do."""
    images(tmp_path / "a", "Train/n1/a.jpg", "Train/n2/b.jpg", "Test/n1/c.jpg", "Valid/n1/d.jpg")
    assert imagefolder.read_imagefolder(tmp_path / "a").root == tmp_path / "a" / "Train"
    images(tmp_path / "b", "cats/a.jpg", "dogs/b.jpg", "TRAIN/n1/c.jpg")
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path / "b"), f"both {tmp_path / 'b' / 'TRAIN'}")


@pytest.mark.parametrize("names", [("Train", "train"), ("TRAIN", "Train"), ("IMAGENET/train", "imagenet/train")])
def test_a_split_named_in_more_than_one_case_is_refused_naming_each(tmp_path, names):
    """`train/{a,b}` beside `Train/{x,y,z}` was read as train/ without a word (before split names matched in any
    case, it was refused), and `Train/` beside `TRAIN/` read whichever sorts first: which is meant is never a guess."""
    (tmp_path / "Probe").mkdir()
    if (tmp_path / "probe").exists():
        pytest.skip("this file system ignores case: it holds one of the two names only")
    (tmp_path / "Probe").rmdir()
    first, second = (tmp_path / name.split("/")[0] for name in names)
    images(tmp_path, *(f"{names[0]}/{c}/a.jpg" for c in "xyz"), *(f"{names[1]}/{c}/b.jpg" for c in "ab"))
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path), f"{tmp_path}: both {first} and {second} are "
                   f"named", "dlperf does not guess which to read", f"--data {first} reads the first")  # fmt: skip


def test_a_folder_of_no_type_read_says_what_it_holds_and_what_is_read(tmp_path):
    """A folder of class folders of .gif only said 'no imagenet/train folder, nor class folders of images', and a
    class of only .gif 'no image in this class folder (an empty class ...)': neither said what was there."""
    images(tmp_path / "a", "c0/x.gif", "c1/y.gif", "c1/notes.txt")
    said = one_line_error(lambda: imagefolder.read_imagefolder(tmp_path / "a"),
                          "it holds 3 files of no type read (.gif 2, .txt 1)")  # fmt: skip
    assert ".jpg, .png, .ppm, .bmp, .pgm, .tif, .tiff, .webp" in said
    images(tmp_path / "b", "c0/a.webp", "c1/y.gif")
    one_line_error(lambda: imagefolder.read_imagefolder(tmp_path / "b"), f"{tmp_path / 'b' / 'c1'}: no image in this "
                   "class folder: it holds 1 file of no type read (.gif 1)")  # fmt: skip
