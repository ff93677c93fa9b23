"""Real data for the PyTorch step (`--data DIR`): each dataset's samples as the workload's input, the recipe's
transforms, the loaders, the probe's check of bad data, and a fed step that trains."""

import dataclasses

import pytest

from conftest import released, require, write_datasets

torch = require("torch")

from dlperf.errors import UsageError  # noqa: E402
from dlperf.frameworks.torch import backend as tb  # noqa: E402
from dlperf.frameworks.torch import data  # noqa: E402
from dlperf.loaders import LoaderSetting  # noqa: E402
from dlperf.worker.feed import Feed  # noqa: E402
from dlperf.workloads.datasets import cifar, idx, imagefolder, ptb  # noqa: E402
from dlperf.workloads.shi2016 import BUILTIN  # noqa: E402


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    return write_datasets(tmp_path_factory.mktemp("datasets"))


def test_mnist_samples_are_normalized_vectors_with_int64_labels(datasets):
    mnist = idx.read_mnist(datasets)
    dataset = data.Mnist(mnist, BUILTIN["tiny-fcn-r"])
    x, y = dataset[3]
    assert x.shape == (784,) and x.dtype == torch.float32 and y.dtype == torch.int64 and y.item() == mnist.labels[3]
    raw = torch.tensor(list(mnist.images[3 * 784 : 4 * 784]), dtype=torch.float32)
    assert torch.allclose(x * data.MNIST_STD + data.MNIST_MEAN, raw / 255, atol=1e-6)


@pytest.mark.parametrize("size", [32, 16])  # alexnet-r and resnet-56; tiny-resnet-56 crops to 16
def test_cifar_samples_are_random_crops_of_the_padded_image_maybe_flipped_and_normalized(datasets, size):
    batch = cifar.read_cifar10(datasets)
    dataset = data.Cifar10(batch, size)
    image = torch.tensor(list(batch.data[:3072]), dtype=torch.float32).view(3, 32, 32) / 255
    padded = torch.nn.functional.pad(image, (4,) * 4)
    mean, std = torch.tensor(data.CIFAR_MEAN).view(3, 1, 1), torch.tensor(data.CIFAR_STD).view(3, 1, 1)
    crops = {(t, x, f) for t in range(41 - size) for x in range(41 - size) for f in (False, True)}
    seen = set()
    for _ in range(30):
        x, y = dataset[0]
        assert x.shape == (3, size, size) and x.dtype == torch.float32 and y.item() == batch.labels[0]
        pixels = x * std + mean
        found = next(c for c in crops if torch.allclose(_crop(padded, size, *c), pixels, atol=1e-5))
        seen.add(found)
    assert len(seen) > 5 and {f for *_, f in seen} == {False, True}  # random offsets, both flips


def _crop(padded, size, top, left, flip):
    crop = padded[:, top : top + size, left : left + size]
    return crop.flip(-1) if flip else crop


def test_ptb_targets_are_the_inputs_shifted_by_one_in_a_capped_vocabulary(datasets):
    words = ptb.read_words(datasets)
    dataset = data.Ptb(words, seq_len=8, vocab=20)
    assert len(dataset) == (len(words) - 1) // 8
    x, y = dataset[2]
    assert x.shape == y.shape == (8,) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[1:], y[:-1]) and torch.equal(dataset[3][0][0], y[-1])  # contiguous windows
    assert int(dataset.ids.max()) < 20 and ptb.UNK in ptb.vocabulary(words, 20)
    assert torch.equal(x, torch.tensor(ptb.encode(words[16:24], ptb.vocabulary(words, 20))))


def test_a_random_resized_crop_stays_inside_the_image_and_falls_back_to_the_center(monkeypatch):
    for width, height in ((400, 350), (50, 300)):
        boxes = {data.random_resized_crop(width, height) for _ in range(200)}
        for left, top, right, bottom in boxes:
            assert 0 <= left < right <= width and 0 <= top < bottom <= height
            area, ratio = (right - left) * (bottom - top), (right - left) / (bottom - top)
            assert area >= 0.08 * width * height * 0.9 and 3 / 4 * 0.9 <= ratio <= 4 / 3 * 1.1
        assert len(boxes) > 100  # random boxes
    # 500 x 20: no box of 8% of the area at 3:4 to 4:3 fits, so ten tries fail and the center crop at 4:3 is kept
    assert {data.random_resized_crop(500, 20) for _ in range(20)} == {(236, 0, 263, 20)}
    monkeypatch.setattr(data, "_uniform", lambda low, high: high * 4)  # every try too large: the center crop
    assert data.random_resized_crop(400, 300) == (0, 0, 400, 300)  # a ratio in range: the whole image
    assert data.random_resized_crop(100, 400) == (0, 133, 100, 266)  # too tall: 133 rows (3:4), centered


def test_an_image_is_decoded_cropped_resized_and_normalized(datasets):
    folder = imagefolder.read_imagefolder(datasets)
    dataset = data.ImageFolder(folder, size=24, outputs=3)
    x, y = dataset[len(dataset) - 1]
    assert x.shape == (3, 24, 24) and x.dtype == torch.float32 and y.item() == 2  # the last class
    mean, std = torch.tensor(data.IMAGENET_MEAN).view(3, 1, 1), torch.tensor(data.IMAGENET_STD).view(3, 1, 1)
    pixels = x * std + mean
    assert pixels.min() >= -1e-5 and pixels.max() <= 1 + 1e-5 and pixels.std() > 0.05  # noise, not a flat image


WORKLOADS = ["tiny-fcn-r", "tiny-alexnet-r", "tiny-resnet-56", "tiny-lstm", "tiny-alexnet-s"]


@pytest.mark.parametrize("name", WORKLOADS)
def test_each_tiny_workload_reads_its_dataset_and_trains(datasets, name):
    workload = BUILTIN[name]
    train = tb.build(workload, "cpu", "fp32")
    loader = tb.loader(workload, str(datasets), LoaderSetting(0), "cpu", train)
    synthetic = [t.clone() for t in (train.inputs, train.targets)]
    before = [p.detach().clone() for p in train.trainable]
    fed = Feed(loader, train)
    losses = [float(fed.step()) for _ in range(3)]
    inputs, targets = next(iter(loader))
    assert inputs.shape == synthetic[0].shape and inputs.dtype == synthetic[0].dtype
    assert targets.shape == synthetic[1].shape and targets.dtype == synthetic[1].dtype
    assert not torch.equal(train.inputs, synthetic[0])  # the step read the loaded batch, in its own buffers
    assert all(map(torch.isfinite, map(torch.tensor, losses)))
    assert any(not torch.equal(a, b) for a, b in zip(before, train.trainable, strict=True))


def test_a_workload_without_a_dataset_and_pinning_without_a_gpu_are_unsupported(datasets):
    with pytest.raises(NotImplementedError, match="tiny-fcn-s has no dataset in the paper"):
        data.loader(BUILTIN["tiny-fcn-s"], str(datasets), LoaderSetting(0), torch.device("cpu"))
    with pytest.raises(NotImplementedError, match="pinning needs a GPU"):
        data.loader(BUILTIN["tiny-fcn-r"], str(datasets), LoaderSetting(0, pin=True), torch.device("cpu"))
    assert data.check(BUILTIN["tiny-fcn-s"], str(datasets))["unsupported"].startswith("tiny-fcn-s has no dataset")


def test_bad_data_is_one_line_naming_the_file(tmp_path, datasets):
    (tmp_path / "cifar-10-batches-py").mkdir()
    for name in cifar.TRAIN:
        (tmp_path / "cifar-10-batches-py" / name).write_bytes(b"not a pickle")
    broken = tmp_path / "imagenet" / "train" / "n1"
    broken.mkdir(parents=True)
    jpeg = next((datasets / "imagenet" / "train" / "n00000000").iterdir()).read_bytes()
    for k in range(BUILTIN["tiny-alexnet-s"].batch):  # a batch of images, each cut short
        (broken / f"cut{k}.JPEG").write_bytes(jpeg[: len(jpeg) // 3])
    for workload, words in (("tiny-alexnet-r", "data_batch_1: not a CIFAR-10 python batch"),
                            ("tiny-alexnet-s", "cut0.JPEG: not an image Pillow can decode"),
                            ("tiny-fcn-r", "no train-images-idx3-ubyte")):  # fmt: skip
        with pytest.raises(UsageError, match=words) as caught:
            data.check(BUILTIN[workload], str(tmp_path))
        assert "\n" not in str(caught.value)


def test_the_check_says_which_image_folder_it_found_and_its_classes(datasets):
    """Nothing said which folder `--data DIR` read (DIR/imagenet/train, DIR/train or DIR), nor how many images: the
    check gives the run the folder and its classes to say before it measures."""
    found = data.check(BUILTIN["tiny-alexnet-s"], str(datasets))
    assert found["folder"] == str(datasets / "imagenet" / "train") and found["classes"] == 3 and found["samples"] == 9
    assert data.check(BUILTIN["tiny-fcn-r"], str(datasets))["folder"] is None  # MNIST's files: no image folder


def test_the_dataset_keyword_names_a_folder_called_dataset_here(tmp_path, monkeypatch):
    """A folder of images copied to ./dataset and given as `--data dataset` was read as the keyword: every loader
    cell `unsupported`, exit 0, and nothing said of ./dataset. The keyword stays; its line names the folder."""
    monkeypatch.chdir(tmp_path)
    said = (
        "--data dataset reads a user workload's own Dataset; tiny-alexnet-s is built in (--data DIR reads its dataset)"
    )
    assert data.check(BUILTIN["tiny-alexnet-s"], "dataset")["unsupported"] == said
    (tmp_path / "dataset").mkdir()
    found = data.check(BUILTIN["tiny-alexnet-s"], "dataset")["unsupported"]
    assert found == f"{said}; ./dataset is a folder here: --data ./dataset reads it"


class Pairs(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.full((8,), float(i)), torch.tensor(i % 3)


def test_a_user_workload_reads_its_own_dataset_or_its_own_loader():
    from dlperf.workloads.user import user_workload

    def make_batch(n, device):
        return torch.zeros(n, 8), torch.zeros(n, dtype=torch.int64)

    model, loss = torch.nn.Linear(8, 3), torch.nn.functional.cross_entropy
    workload = dataclasses.replace(BUILTIN["tiny-fcn-r"], batch=4)  # the planned batch: the factory's
    given = user_workload("u", model, make_batch, loss, batch_size=4, dataset=Pairs())
    loader = data.loader(workload, "dataset", LoaderSetting(0), torch.device("cpu"), given)
    assert loader.batch_size == workload.batch and loader.drop_last and isinstance(loader.dataset, Pairs)
    asked = {}

    def factory(batch_size, **kwargs):
        asked.update(kwargs, batch_size=batch_size)
        return torch.utils.data.DataLoader(Pairs(), batch_size=batch_size, **kwargs)

    own = user_workload("u", model, make_batch, loss, batch_size=4, loader=factory)
    data.loader(workload, "dataset", LoaderSetting(1, prefetch=3), torch.device("cpu"), own)
    assert asked == {"batch_size": workload.batch, "num_workers": 1, "pin_memory": False,
                     "persistent_workers": False, "prefetch_factor": 3}  # fmt: skip
    neither = user_workload("u", model, make_batch, loss, batch_size=4)
    with pytest.raises(NotImplementedError, match="pass dataset="):
        data.loader(workload, "dataset", LoaderSetting(0), torch.device("cpu"), neither)


def test_a_factory_whose_loader_is_not_the_setting_asked_leaves_that_setting_unsupported():
    """`spawnm.py:make_ignore`'s factory, `lambda batch_size, **kw: DataLoader(Sq(), batch_size=batch_size)`, run with
    --loaders w0,w2+persist: the w2+persist row said `2+1 > 2`, a note that its 2 workers exceeded the cores, and
    advice that it had a worker per core, of a loader with no worker, its figures w0's. The setting it is not is
    `unsupported`, in one line naming what it has and what was asked; what it is stays measured."""
    from dlperf.workloads.user import user_workload

    def ignoring(batch_size, **kwargs):
        return torch.utils.data.DataLoader(Pairs(), batch_size=batch_size)

    workload = dataclasses.replace(BUILTIN["tiny-fcn-r"], batch=4)
    own = user_workload("u", torch.nn.Linear(8, 3), None, torch.nn.functional.cross_entropy, batch_size=4,
                        loader=ignoring)  # fmt: skip
    with pytest.raises(NotImplementedError) as caught:
        data.loader(workload, "dataset", LoaderSetting(2, persistent=True), torch.device("cpu"), own)
    said = str(caught.value)
    assert said.startswith("w2+persist: the loader= factory's DataLoader has num_workers=0, persistent_workers=False, "
                           "not the num_workers=2, persistent_workers=True asked, so it cannot be measured as that "
                           "setting: pass the factory's keyword arguments on to DataLoader")  # fmt: skip
    assert "\n" not in said
    assert isinstance(data.loader(workload, "dataset", LoaderSetting(0), torch.device("cpu"), own), data.Batches)
    # the check before the run reads one batch at w0 and asks nothing of the workers
    assert data.check(workload, "dataset", own)["unsupported"] is None
    # a factory of its own worker count and prefetch: what matches the setting is measured, what does not is named
    assert data.unlike(torch.utils.data.DataLoader(Pairs(), num_workers=1), LoaderSetting(1)) is None
    own_prefetch = torch.utils.data.DataLoader(Pairs(), num_workers=1, prefetch_factor=3)
    said = data.unlike(own_prefetch, LoaderSetting(1, prefetch=4))
    assert said.startswith("w1+pf4: the loader= factory's DataLoader has prefetch_factor=3, not the prefetch_factor=4 "
                           "asked")  # fmt: skip


class One(Pairs):
    def __len__(self):
        return 1


def test_a_dataset_smaller_than_a_batch_says_its_samples_in_the_singular_for_one():
    """'has 1 samples, fewer than one batch of 4'."""
    from dlperf.workloads.user import user_workload

    workload = dataclasses.replace(BUILTIN["tiny-fcn-r"], batch=4)
    own = user_workload("u", torch.nn.Linear(8, 3), None, torch.nn.functional.cross_entropy, batch_size=4,
                        dataset=One())  # fmt: skip
    with pytest.raises(UsageError, match=r"^--data: the dataset of tiny-fcn-r has 1 sample, fewer than one batch of 4"):
        data.loader(workload, "dataset", LoaderSetting(0), torch.device("cpu"), own)


def test_the_copy_timed_is_every_input_tensors_bytes():
    """A dict of inputs (a Hugging Face batch) had no .shape: the copy timed is their bytes as one block."""
    ids = torch.arange(12).reshape(3, 4)
    block = data.host_block({"input_ids": ids, "attention_mask": torch.ones(3, 4, dtype=torch.bool)})
    assert block.dtype == torch.uint8 and block.numel() == 12 * 8 + 12
    assert torch.equal(block[: 12 * 8].view(torch.int64), ids.reshape(-1))
    image = torch.randn(2, 3, 5, 5).permute(0, 2, 3, 1)  # not contiguous: its bytes in logical order
    assert torch.equal(data.host_block(image).view(torch.float32), image.reshape(-1))


@pytest.mark.gpu  # host-to-device copies, pinned memory and non_blocking need one
def test_a_batch_copied_to_a_gpu_is_timed_pageable_and_pinned_blocking_or_not():
    figures = data.h2d((torch.randn(64, 3, 32, 32), torch.zeros(64)), torch.device("cuda"))
    assert figures["bytes"] == 64 * 3 * 32 * 32 * 4
    for kind in ("pageable", "pinned", "pinned_async"):
        assert figures[f"{kind}_s"] > 0 and figures[f"{kind}_bytes_per_s"] > 0
    assert figures["pinned_async_host_s"] <= figures["pinned_host_s"] * 1.5  # non_blocking does not hold the host


# ----------------------------------------------------------------------------------------------------------------------
# Bad data found by the loader (issue 30): a bomb refused by its header, a worker's error naming the file, labels
# checked against the network's outputs when the dataset is opened (the probe's check)


def jpeg_bytes(size=(40, 40)) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.effect_noise(size, 60).convert("RGB").save(buffer, "JPEG", quality=75)
    return buffer.getvalue()


def test_an_image_over_pillows_pixel_limit_is_refused_not_decoded(tmp_path, monkeypatch):
    from PIL import Image

    path = tmp_path / "bomb.JPEG"
    path.write_bytes(jpeg_bytes((40, 40)))  # 1600 pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # over the limit, under twice it: Pillow only warns
    with pytest.raises(UsageError, match=r"bomb.JPEG: a decompression bomb, not decoded \(.*1600 pixels") as caught:
        data.decode(path, 16)
    assert "\n" not in str(caught.value)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 700)  # over twice the limit: Pillow refuses, named alike
    with pytest.raises(UsageError, match=r"bomb.JPEG: a decompression bomb, not decoded \(.*1600 pixels"):
        data.decode(path, 16)


def test_a_corrupt_image_met_by_a_loader_worker_is_its_own_one_line_naming_the_file(tmp_path):
    folder = tmp_path / "imagenet" / "train"
    for c in range(2):
        (folder / f"n{c}").mkdir(parents=True)
        for k in range(4):
            (folder / f"n{c}" / f"{k}.JPEG").write_bytes(jpeg_bytes())
    corrupt = folder / "n1" / "2.JPEG"
    corrupt.write_bytes(corrupt.read_bytes()[:60])  # cut: only decoding finds it, after the probe's first sample
    workload = BUILTIN["tiny-alexnet-s"]
    assert data.check(workload, str(tmp_path))["samples"] == 8
    loader = data.loader(workload, str(tmp_path), LoaderSetting(1), torch.device("cpu"))
    with pytest.raises(UsageError) as caught:
        for _ in loader:
            pass
    first = str(caught.value).splitlines()[0]
    released(caught.value)  # its worker stopped now, not 5 s into a later test
    assert first.startswith(f"{corrupt}: not an image Pillow can decode") and "DataLoader worker" in first, first


def test_labels_beyond_the_networks_outputs_name_the_file_and_the_label(tmp_path, datasets):
    few = {name: dataclasses.replace(BUILTIN[name], outputs=2) for name in ("tiny-fcn-r", "tiny-alexnet-r")}
    with pytest.raises(UsageError, match=r"train-labels-idx1-ubyte.gz: label \d of image \d+ .*tiny-fcn-r's 2 cl"):
        data.builtin_dataset(few["tiny-fcn-r"], datasets)
    with pytest.raises(UsageError, match=r"data_batch_1: label \d of image \d+ .*tiny-alexnet-r's 2 classes"):
        data.builtin_dataset(few["tiny-alexnet-r"], datasets)
    alexnet = dataclasses.replace(BUILTIN["tiny-alexnet-s"], outputs=2)  # 3 class folders
    with pytest.raises(
        UsageError, match=r"n00000002: class folder 3 of 3 \(label 2\) is .*tiny-alexnet-s's 2 classes \(0 to 1\)"
    ):
        data.builtin_dataset(alexnet, datasets)


def test_an_mnist_of_another_size_or_of_no_samples_is_one_line(tmp_path):
    """An IDX of 32x32 images (LeNet's padded MNIST) made tiny-fcn-r's loader cells `unsupported`, exit 0 and no
    file named; one of no images was torch's 'both buffer length (0) and count (-1) must not be 0'."""
    padded, empty = tmp_path / "padded", tmp_path / "empty"
    for folder, n, side in ((padded, 100, 32), (empty, 0, 28)):
        folder.mkdir()
        idx.write(folder / "train-images-idx3-ubyte", (n, side, side), bytes(n * side * side))
        idx.write(folder / "train-labels-idx1-ubyte", (n,), bytes(n))
    with pytest.raises(UsageError) as caught:
        data.check(BUILTIN["tiny-fcn-r"], str(padded))
    assert (
        str(caught.value)
        == f"{padded / 'train-images-idx3-ubyte'}: 100 images of 32x32 (1,024 values); tiny-fcn-r takes 784"
    )
    with pytest.raises(UsageError, match=r"^--data: the dataset of tiny-fcn-r has 0 samples, fewer than one batch"):
        data.check(BUILTIN["tiny-fcn-r"], str(empty))


def test_every_image_type_imagefolder_reads_is_listed_and_decoded_and_the_rest_said_skipped(tmp_path):
    """.webp, .bmp, .tif(f), .ppm and .pgm images (what torchvision's ImageFolder reads) were skipped silently, the
    folder 'read as ImageFolder reads it'. Each is listed and decoded now; a .gif (ImageFolder leaves it out too) and a
    notes.txt are counted and said, before the run measures."""
    from PIL import Image

    formats = {".jpg": "JPEG", ".png": "PNG", ".webp": "WEBP", ".bmp": "BMP", ".tif": "TIFF", ".tiff": "TIFF",
               ".ppm": "PPM", ".pgm": "PPM", ".gif": "GIF"}  # fmt: skip
    for k, (suffix, kind) in enumerate(formats.items()):
        path = tmp_path / f"c{k % 2}" / f"{k}{suffix.upper() if k % 3 == 0 else suffix}"
        path.parent.mkdir(exist_ok=True)
        Image.new("L" if suffix == ".pgm" else "RGB", (20, 12), (k * 20, 40, 90)[:1] if suffix == ".pgm" else
                  (k * 20, 40, 90)).save(path, format=kind)  # fmt: skip
    (tmp_path / "c1" / "notes.txt").write_text("not an image")
    found = imagefolder.read_imagefolder(tmp_path)
    assert sorted(p.suffix.lower() for p, _ in found.samples) == sorted(s for s in formats if s != ".gif")
    assert found.skipped_said() == "2 files skipped, not of a type read (.gif 1, .txt 1)"
    assert all(data.decode(path, 8).shape == (3, 8, 8) for path, _ in found.samples)
    check = data.check(dataclasses.replace(BUILTIN["tiny-alexnet-s"], batch=2), str(tmp_path))
    assert (check["samples"], check["skipped"]) == (8, "2 files skipped, not of a type read (.gif 1, .txt 1)")
