"""Real data for a PyTorch step (`--data DIR`): each workload's dataset as a `torch.utils.data.Dataset` over the
standard-library readers of `dlperf.workloads.datasets`, transformed as the usual recipe trains it, and loaded by a
`DataLoader` with a cell's loader setting (`dlperf.loaders`).

Every sample is shaped as the workload's input (`synthetic_batch`), so a loaded batch is copied into the step's
own buffers and the step itself is the one timed on synthetic data. Random transforms draw from torch's generator:
DataLoader seeds each worker apart. Images are decoded with Pillow, not torchvision: the torchvision wheel on the
package index is built against CUDA and does not import beside the CPU torch (`operator torchvision::nms does not
exist`), so RandomResizedCrop is written here as torchvision does it.
"""

from __future__ import annotations

import math
import os
import re
import signal
import stat
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from dlperf.errors import UsageError, in_user_code
from dlperf.frameworks.torch.opcount import tensors_in
from dlperf.loaders import DATA_DATASET, LoaderSetting, keyword_folder
from dlperf.measure import system
from dlperf.measure.units import plural
from dlperf.workloads.base import Workload
from dlperf.workloads.datasets import cifar, idx, imagefolder, malformed, ptb

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CIFAR_PAD = 4  # random crop from the image padded by 4 pixels of zeros, as ResNet's CIFAR recipe does
CROP_SCALE, CROP_RATIO, CROP_TRIES = (0.08, 1.0), (3 / 4, 4 / 3), 10  # torchvision's RandomResizedCrop defaults

# the paper's data set of a workload (Workload.data) -> what it reads in a datasets directory
DATASETS = {"MNIST": "mnist", "CIFAR-10": "cifar-10", "Penn Treebank": "ptb", "ImageNet": "imagenet"}
IMAGENET_ARCHS = ("alexnet", "resnet-imagenet")  # AlexNet-S and ResNet-50: ImageNet's networks


def dataset_name(workload: Workload) -> str:
    """The dataset a built-in workload reads; NotImplementedError (the cell is `unsupported`) for one without."""
    if workload.data in DATASETS:
        return DATASETS[workload.data]
    if workload.arch in IMAGENET_ARCHS:
        return "imagenet"
    raise NotImplementedError(
        f"{workload.name} has no dataset in the paper: it trains on synthetic data only (--data synthetic)"
    )


def normalize(x: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """(C, H, W) floats in [0, 1], each channel less its mean over its standard deviation."""
    return (x - torch.tensor(mean).view(-1, 1, 1)) / torch.tensor(std).view(-1, 1, 1)


def _uint8(data: bytes) -> torch.Tensor:
    """Bytes as a uint8 tensor; none as an empty one (torch.frombuffer refuses 0 bytes, which a dataset of no
    samples reached as a torch error, before its loader said it has fewer samples than one batch)."""
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)


def _uniform(low: float, high: float) -> float:
    return torch.empty(1).uniform_(low, high).item()


def _randint(high: int) -> int:
    """0 to high - 1, from torch's generator."""
    return int(torch.randint(high, (1,)).item())


def _flip(x: torch.Tensor) -> torch.Tensor:
    """A horizontal flip half of the time."""
    return x.flip(-1) if torch.rand(1).item() < 0.5 else x


class Mnist(Dataset):
    """MNIST as FCN-R reads it: (rows * cols,) float32 in [0, 1], normalized; the label int64."""

    NAME = "MNIST"  # what a loader cell records as its dataset

    def __init__(self, mnist: idx.Mnist, workload: Workload) -> None:
        n, features = len(mnist), mnist.rows * mnist.cols
        if workload.input.shape != (features,):  # the data, not the cell: one line before the run (was unsupported)
            raise malformed(mnist.source or Path("MNIST"), f"{n:,} images of {mnist.rows}x{mnist.cols} "
                            f"({features:,} values); {workload.name} takes {workload.input.shape[0]:,}")  # fmt: skip
        self.images = _uint8(mnist.images).view(n, features)
        self.labels = _uint8(mnist.labels).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return (self.images[i].float() / 255 - MNIST_MEAN) / MNIST_STD, self.labels[i]


class Cifar10(Dataset):
    """CIFAR-10 as ResNet's recipe trains it: padded by 4, a random size x size crop (32, or a tiny workload's
    own size), a random horizontal flip, normalized by CIFAR-10's channel means and deviations."""

    NAME = "CIFAR-10"  # what a loader cell records as its dataset

    def __init__(self, batch: cifar.Batch, size: int) -> None:
        n = len(batch)
        images = _uint8(batch.data).view(n, 3, 32, 32)
        self.images = torch.nn.functional.pad(images, (CIFAR_PAD,) * 4)  # (n, 3, 40, 40), zeros around
        self.labels = torch.tensor(batch.labels, dtype=torch.int64)
        self.size = size

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        room = self.images.shape[-1] - self.size + 1
        top, left = _randint(room), _randint(room)
        crop = self.images[i, :, top : top + self.size, left : left + self.size]
        return normalize(_flip(crop).float() / 255, CIFAR_MEAN, CIFAR_STD), self.labels[i]


class Ptb(Dataset):
    """The Penn Treebank as a language model reads it: contiguous windows of seq_len + 1 token ids, the inputs the
    first seq_len, the targets the same shifted by one (one target per position, as `synthetic_batch` makes them);
    the vocabulary capped at the workload's, rarer words read as <unk>."""

    NAME = "Penn Treebank"  # what a loader cell records as its dataset

    def __init__(self, words: list[str], seq_len: int, vocab: int) -> None:
        self.ids = torch.tensor(ptb.encode(words, ptb.vocabulary(words, vocab)), dtype=torch.int64)
        self.seq_len = seq_len

    def __len__(self) -> int:
        return max(0, (len(self.ids) - 1) // self.seq_len)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        window = self.ids[i * self.seq_len : (i + 1) * self.seq_len + 1]
        return window[:-1], window[1:]


def random_resized_crop(width: int, height: int) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop box (left, top, right, bottom): a random area of 8% to 100% of the image at a
    random aspect ratio from 3/4 to 4/3 (drawn on a log scale), ten tries; then the center crop at the nearest
    ratio in range."""
    area, (low, high) = width * height, (math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1]))
    for _ in range(CROP_TRIES):
        target, ratio = area * _uniform(*CROP_SCALE), math.exp(_uniform(low, high))
        w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            top, left = _randint(height - h + 1), _randint(width - w + 1)
            return left, top, left + w, top + h
    w, h = width, height
    if width / height < CROP_RATIO[0]:
        h = round(w / CROP_RATIO[0])
    elif width / height > CROP_RATIO[1]:
        w = round(h * CROP_RATIO[1])
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


class ImageFolder(Dataset):
    """An ImageNet-style folder as the usual recipe trains on it: decoded (Pillow), RGB, RandomResizedCrop to size x
    size (bilinear), a random horizontal flip, floats normalized by ImageNet's channel means and deviations. More
    class folders than the network's outputs is a UsageError naming the first beyond them (their labels would be out
    of range)."""

    NAME = imagefolder.NAME  # what a loader cell records as its dataset

    def __init__(self, folder: imagefolder.ImageFolder, size: int, outputs: int, network: str = "the network") -> None:
        if len(folder.classes) > outputs:
            raise UsageError(f"{folder.root / folder.classes[outputs]}: class folder {outputs + 1} of "
                             f"{len(folder.classes)} (label {outputs}) is out of range for {network}'s {outputs} "
                             f"classes (0 to {outputs - 1})")  # fmt: skip
        self.samples, self.size = folder.samples, size
        self.root, self.class_count = folder.root, len(folder.classes)  # what the run says it reads before measuring
        self.skipped = folder.skipped_said()  # ... and the files it leaves unread

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        path, label = self.samples[i]
        return decode(path, self.size), torch.tensor(label)


def decode(path: Path, size: int) -> torch.Tensor:
    """One image file as a (3, size, size) float32 tensor, randomly cropped, resized and flipped, normalized. A file
    Pillow cannot read is the user's data: a one-line UsageError naming it. So is a decompression bomb, an image of
    more pixels than Pillow's limit (`Image.MAX_IMAGE_PIXELS`): Pillow refuses one of twice the limit but only warns
    of one between, which is made an error here, raised from the header before anything is decoded."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                rgb = image.convert("RGB")
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise UsageError(f"{path}: a decompression bomb, not decoded ({e})") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: not an image Pillow can decode ({type(e).__name__}: {e})") from None
    box = random_resized_crop(*rgb.size)
    crop = rgb.resize((size, size), Image.Resampling.BILINEAR, box=box)
    pixels = torch.frombuffer(bytearray(crop.tobytes()), dtype=torch.uint8).view(size, size, 3)
    return normalize(_flip(pixels.permute(2, 0, 1)).float() / 255, IMAGENET_MEAN, IMAGENET_STD)


def builtin_dataset(workload: Workload, directory: Path) -> Dataset:
    """A built-in workload's dataset read from a datasets directory (`--data DIR`), shaped as its input, every label
    checked against its outputs."""
    name, classes = dataset_name(workload), workload.outputs
    if name == "mnist":
        return Mnist(idx.read_mnist(directory, classes=classes, network=workload.name), workload)
    if name == "ptb":
        return Ptb(ptb.read_words(directory), workload.input.shape[0], workload.input.vocab or 0)
    size = workload.input.shape[-1]  # images are (3, S, S)
    if name == "cifar-10":
        return Cifar10(cifar.read_cifar10(directory, classes=classes, network=workload.name), size)
    return ImageFolder(imagefolder.read_imagefolder(directory), size, classes, workload.name)


def user_data(user: Any) -> tuple[Dataset | None, Any]:
    """A user workload's (Dataset, DataLoader factory); NotImplementedError when it gives neither."""
    if user.dataset is None and user.loader is None:
        raise NotImplementedError(f"{user.name} reads no real data: pass dataset= (a torch Dataset) or loader= (a "
                                  "DataLoader factory) to dlperf.user_workload")  # fmt: skip
    return user.dataset, user.loader


def loader(workload: Workload, data: str, setting: LoaderSetting, device: torch.device, user: Any = None,
           exact: bool = True):  # fmt: skip
    """The DataLoader of a loader cell: the workload's batch, shuffled, the last partial batch dropped, the
    setting's workers, pinning, prefetch and persistence. `user`: a user workload's built `UserWorkload` (its
    Dataset, or its own factory called with the batch size and those settings: `exact`, its DataLoader must have
    them, `unlike`)."""
    if setting.pin and device.type != "cuda":
        raise NotImplementedError(f"{setting.name}: pinned memory speeds copies to a GPU; pinning needs a GPU, and "
                                  f"this cell runs on {device.type}")  # fmt: skip
    kwargs = setting.torch_kwargs()
    if user is not None:
        dataset, factory = user_data(user)
        if factory is not None:
            built = factory(workload.batch, **kwargs)
            if exact and isinstance(built, DataLoader) and (differs := unlike(built, setting)):
                raise NotImplementedError(differs)
            return Batches(built) if isinstance(built, DataLoader) else built
    elif data == DATA_DATASET:
        here = f"; {folder}" if (folder := keyword_folder(data)) else ""  # the worker runs where dlperf was started
        raise NotImplementedError(f"--data dataset reads a user workload's own Dataset; {workload.name} is built in "
                                  f"(--data DIR reads its dataset){here}")  # fmt: skip
    else:
        dataset = builtin_dataset(workload, Path(data))
    if len(dataset) < workload.batch:
        raise UsageError(f"--data: the dataset of {workload.name} has {plural(len(dataset), 'sample')}, fewer than "
                         f"one batch of {workload.batch}")  # fmt: skip
    return Batches(DataLoader(dataset, batch_size=workload.batch, shuffle=True, drop_last=True, **kwargs))


def unlike(built: DataLoader, setting: LoaderSetting) -> str | None:
    """Why a user factory's DataLoader is not the loader setting asked of it (the keyword arguments it was given that
    it does not have), or None where it is: a factory that ignored num_workers was measured as w2+persist with no
    worker, its row `2+1 > 2`, its figures w0's, and advice that w2+persist had a worker per core. The cell is then
    `unsupported`, naming what the loader has and how the factory gives it what is asked."""
    asked = setting.torch_kwargs()
    got = {k: getattr(built, k, None) for k in asked}
    differ = [k for k in asked if got[k] != asked[k]]
    if not differ:
        return None
    has, wanted = (", ".join(f"{k}={d[k]!r}" for k in differ) for d in (got, asked))
    return (f"{setting.name}: the loader= factory's DataLoader has {has}, not the {wanted} asked, so it cannot be "
            "measured as that setting: pass the factory's keyword arguments on to DataLoader (def factory(batch_size, "
            "**kw): return DataLoader(dataset, batch_size=batch_size, **kw))")  # fmt: skip


class Batches:
    """A DataLoader, dlperf's or a user's, whose workers' failures read as the workers met them (`worker_error`,
    `worker_death`): torch raises a worker's exception again as `Caught ZeroDivisionError in DataLoader worker
    process 0.` and the worker's traceback, so a cell's reason (an error's first line) named neither the error nor
    the file; and a worker that died without raising (an import its spawned process could not make, os._exit, a
    signal) only as `DataLoader worker (pid(s) N) exited unexpectedly`, its own traceback in the cell's log."""

    def __init__(self, loader: DataLoader) -> None:
        self.loader = loader

    def __iter__(self) -> _Unwrapped:
        return _Unwrapped(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:  # dataset, batch_size, ...: the loader's
        if name == "loader":
            raise AttributeError(name)
        return getattr(self.loader, name)


class _Unwrapped:
    """A DataLoader's iterator, its workers' failures raised in their own words."""

    def __init__(self, loader: DataLoader) -> None:
        self.since = stderr_offset()  # before the workers start: what they write comes after
        self.oom_kills = system.oom_kills()  # a worker's SIGKILL is the kernel's only where this count moves
        self.batches = iter(loader)  # holds the worker processes: dropped with this iterator

    def __iter__(self) -> _Unwrapped:
        return self

    def __len__(self) -> int:
        return len(self.batches)

    def __next__(self) -> Any:
        try:
            return next(self.batches)
        except StopIteration:
            raise
        except Exception as exc:
            named = worker_error(exc)
            named = worker_death(exc, self.batches, self.since, self.oom_kills) if named is exc else named
            if named is exc:
                raise
            raise named from exc


def worker_error(exc: Exception) -> Exception:
    """The exception a DataLoader worker raised, as `exc` carries it (its type, the message torch wraps in
    `Caught <type> in DataLoader worker process <n>.` and the worker's traceback), with its own message first and
    the worker named last, with the line of the user's code it was raised from; `exc` itself when it is not a
    worker's."""
    first, _, traceback = str(exc).partition("\n")
    caught = f"Caught {type(exc).__name__} "
    if not (first.startswith(caught) and " DataLoader worker process " in first and traceback.strip()):
        return exc
    last = traceback.strip().splitlines()[-1]  # "<module>.<type>: <message>", as the worker's traceback ends
    for name in (f"{type(exc).__module__}.{type(exc).__qualname__}: ", f"{type(exc).__qualname__}: "):
        last = last.removeprefix(name)
    where = ", ".join([first.removeprefix(caught).rstrip("."), *user_frame(traceback)])
    try:
        return type(exc)(f"{last} ({where})")
    except Exception:  # a type that takes other arguments: left as torch raised it
        return exc


def worker_death(exc: Exception, batches: Any, since: int | None, oom_kills: int | None = None) -> Exception:
    """A worker that died without raising, said with how it ended (an exit code, a signal) and the last error its
    process wrote to stderr since the iterator began (a spawned worker's failed import of the Dataset's module), where
    a traceback says one; `exc` itself when it is no such death. torch says it three ways: `DataLoader worker (pid(s)
    N) exited unexpectedly`, `... (pid N) exited unexpectedly with exit code 3. Details are lost ...` and `... (pid N)
    is killed by signal: Killed.`; a SIGKILL is said as the out-of-memory killer's only where its count (`oom_kills`
    before the workers started, `measure.system.oom_kills`) moved, else as by hand or the kernel."""
    text = str(exc)
    if not (isinstance(exc, RuntimeError) and text.startswith(DIED)):
        return exc
    said = text.split(". Details are lost")[0].strip().rstrip(".")
    if said.endswith("exited unexpectedly"):
        pids = {int(pid) for pid in re.findall(r"\d+", said)}
        ends = [w.exitcode for w in getattr(batches, "_workers", []) if w.pid in pids and w.exitcode]
        said += f" ({ended(ends[0], oom_kills)})" if ends else ""
    elif said.endswith("signal: Killed"):
        said += f" ({killed(oom_kills)})"
    return RuntimeError(said + last_error(stderr_since(since)))


DIED = "DataLoader worker (pid"


def ended(exitcode: int, oom_kills: int | None = None) -> str:
    """A process's exit code in words: 'exit code 3', 'killed by SIGSEGV'."""
    if exitcode > 0:
        return f"exit code {exitcode}"
    name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else f"signal {-exitcode}"
    return f"killed by {killed(oom_kills)}" if name == "SIGKILL" else f"killed by {name}"


def killed(oom_kills: int | None) -> str:
    """Who sent a worker its SIGKILL, as far as the kernel's out-of-memory count (read before, `oom_kills`, and now)
    tells: its killer where the count moved, a process where it did not, either where there is no count to read."""
    now = system.oom_kills() if oom_kills is not None else None
    if now is None:
        return "SIGKILL: by the kernel when memory runs out, or by hand"
    if now > oom_kills:
        return "SIGKILL: out of memory, the kernel's out-of-memory killer killed a process while the loader ran"
    return "SIGKILL: sent by a process, by hand say: the kernel's out-of-memory killer counted no kill while it ran"


FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (.+)$', re.MULTILINE)


def user_frame(traceback: str) -> list[str]:
    """['at FILE:LINE, in FUNCTION']: a traceback's deepest frame in the user's own code (`in_user_code`); [] where
    none is."""
    for file, line, function in reversed(FRAME.findall(traceback)):
        if in_user_code(file):
            return [f"at {file}:{line}, in {function}"]
    return []


def last_error(text: str) -> str:
    """': <type>: <message> (at FILE:LINE, in FUNCTION)': the error that ends the last Python traceback of `text`,
    with its deepest frame in the user's code; '' where `text` holds no traceback."""
    start = text.rfind("Traceback (most recent call last):")
    if start < 0:
        return ""
    traceback = text[start:]
    said = [line.strip() for line in traceback.splitlines()[1:] if line.strip() and not line[0].isspace()]
    if not said:
        return ""
    where = user_frame(traceback)
    return f": {said[0][:ERROR_CHARS]}" + (f" ({where[0]})" if where else "")


ERROR_CHARS = 300  # of a dead worker's error, in a cell's reason
STDERR_READ = 1 << 16  # the last bytes of what the workers wrote, read for their error


def stderr_offset() -> int | None:
    """Where this process's stderr is now, when it is a file (a cell's log, which DataLoader workers inherit); None
    for a terminal or a pipe, which cannot be read back."""
    try:
        return os.lseek(2, 0, os.SEEK_CUR) if stat.S_ISREG(os.fstat(2).st_mode) else None
    except OSError:
        return None


def stderr_since(offset: int | None) -> str:
    """What this process and its children wrote to stderr since `offset` (its last STDERR_READ bytes), read back
    through /proc; '' where it cannot be."""
    if offset is None:
        return ""
    try:
        with open("/proc/self/fd/2", "rb") as written:
            end = written.seek(0, os.SEEK_END)
            written.seek(max(offset, end - STDERR_READ))
            return written.read().decode(errors="replace")
    except OSError:
        return ""


def check(workload: Workload, data: str, user: Any = None) -> dict[str, Any]:
    """The probe's check of a loader cell's data before a run is created: the dataset opened and one sample read
    (a user's factory: one batch). Bad data is a UsageError; a workload without data answers why (its cells will be
    `unsupported`). A user workload that gives neither a Dataset nor a DataLoader factory is refused here, when the
    run is planned: its loader cells could only be `unsupported`."""
    if user is not None and user.dataset is None and user.loader is None:
        raise UsageError(f"--data {data}: {user.name} reads no real data: give dlperf.user_workload dataset= (a torch "
                         "Dataset) or loader= (a DataLoader factory), or measure it without --data")  # fmt: skip
    try:
        built = loader(workload, data, LoaderSetting(), torch.device("cpu"), user, exact=False)
    except NotImplementedError as exc:
        return {"samples": None, "unsupported": str(exc)}
    from_dataset = user is None or user.loader is None
    try:
        inputs = built.dataset[0][0] if from_dataset else next(iter(built))[0][0]
    except UsageError:
        raise
    except Exception as exc:  # a user's Dataset or factory that fails
        raise UsageError(f"--data: reading a sample of {workload.name} raised {type(exc).__name__}: {exc}") from None
    size = len(built.dataset) if hasattr(built.dataset, "__len__") else None
    try:
        batches = len(built)  # an epoch's, its last partial batch dropped (dlperf's DataLoaders) or not
    except TypeError:
        batches = None
    found = built.dataset if isinstance(built.dataset, ImageFolder) else None  # a folder dlperf looked up in DIR
    return {"samples": size, "batches": batches, "input_shape": list(getattr(inputs, "shape", ())),
            "unsupported": None, "folder": str(found.root) if found else None,
            "classes": found.class_count if found else None,
            "skipped": (found.skipped or None) if found else None}  # fmt: skip


H2D_REPEATS = 5  # copies timed per kind; the median is kept


def h2d(batch: Any, device: torch.device) -> dict[str, Any]:
    """One batch's inputs copied host -> GPU three ways, each timed with CUDA events around the copy on the current
    stream (the median of a few, after one untimed): from pageable memory (the driver stages it through a pinned
    buffer of its own), from pinned memory, and from pinned memory with non_blocking=True. The copy's device time
    is alike for the last two; what non_blocking buys is the host's: `pinned_async_host_s` is the time the host
    spent in the call, against `pinned_host_s` blocking. Bandwidths are bytes per second of device time."""
    pageable = host_block(batch[0] if isinstance(batch, (tuple, list)) else batch)
    pinned = pageable.pin_memory()
    target = torch.empty_like(pageable, device=device)
    nbytes = pageable.numel() * pageable.element_size()
    figures: dict[str, Any] = {"bytes": nbytes}
    for name, source, non_blocking in (("pageable", pageable, False), ("pinned", pinned, False),
                                       ("pinned_async", pinned, True)):  # fmt: skip
        device_s, host_s = _timed_copies(target, source, non_blocking)
        figures[f"{name}_s"], figures[f"{name}_host_s"] = device_s, host_s
        figures[f"{name}_bytes_per_s"] = nbytes / device_s if device_s > 0 else None
    return figures


def host_block(inputs: Any) -> torch.Tensor:
    """A batch's inputs as one block of their bytes in pageable host memory: a tensor's, or a dict of them (a
    Hugging Face batch's input_ids and attention_mask) one after another."""
    return torch.cat([t.detach().cpu().reshape(-1).view(torch.uint8) for t in tensors_in(inputs)])


def _timed_copies(target: torch.Tensor, source: torch.Tensor, non_blocking: bool) -> tuple[float, float]:
    """(device seconds, host seconds) of one copy, the medians of H2D_REPEATS after one untimed."""
    stream = torch.cuda.current_stream(target.device)
    target.copy_(source, non_blocking=non_blocking)
    device_s, host_s = [], []
    for _ in range(H2D_REPEATS):
        torch.cuda.synchronize(target.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        host = time.perf_counter()
        target.copy_(source, non_blocking=non_blocking)
        host_s.append(time.perf_counter() - host)
        end.record(stream)
        end.synchronize()
        device_s.append(start.elapsed_time(end) / 1000.0)  # milliseconds
    return statistics.median(device_s), statistics.median(host_s)
