"""`dlperf data synth DIR`: the datasets `--data DIR` reads, written with random content in their real formats
(`workloads/datasets/synth.py`), so the input path can be measured without downloading anything."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dlperf.commands.common import choice, picked, whole
from dlperf.commands.common import console as wide
from dlperf.errors import UsageError
from dlperf.vocab import ExitCode

if TYPE_CHECKING:
    from pathlib import Path

HELP = "write synthetic datasets in their real formats (MNIST, CIFAR-10, PTB, ImageNet-style JPEGs) for --data DIR"
DESCRIPTION = (
    "synth DIR: write random datasets in the files `dlperf run --data DIR` reads: DIR/mnist (IDX), "
    "DIR/cifar-10-batches-py (python batches), DIR/ptb (text), DIR/imagenet/{train,val}/<wnid>/*.JPEG. "
    "--size small writes in seconds (MNIST 1000 + 200 images, CIFAR-10 6 x 200, PTB 20k words, ImageNet-style "
    "4 classes x 8 + 2 JPEGs); --size medium 20 batches an epoch or more at each network's batch (MNIST 24k + 2k, "
    "CIFAR-10 6 x 4,400, PTB 200k words, ImageNet-style 8 classes x 40 + 4); --size paper writes the paper's sizes "
    "(MNIST 60k + 10k, CIFAR-10 5 x 10k + 10k, PTB 929k words of a 10k vocabulary) and ImageNet-style 10 classes "
    "x 260 JPEGs + 50 each to validate (about 300 MB, "
    "not ImageNet's 1.28 M images: minutes of loading), about 400x350 pixels and 100 KB each, like ImageNet's. "
    "Other files in DIR are left alone; a dataset already there is refused unless --overwrite. Each dataset is "
    "written whole or not at all (staged in a hidden folder, then renamed into place): a full disk or Ctrl-C leaves "
    "no part of one."
)
DATASETS = ("mnist", "cifar10", "ptb", "imagenet")  # as synth.DATASETS, which --help does not import
TAKES_DB = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["synth"])
    p.add_argument("dir", metavar="DIR", help="where the datasets go (created if need be)")
    p.add_argument(
        "--size",
        default="small",
        type=choice("--size", ("small", "medium", "paper")),
        help="small (seconds: for tests and trying it out), medium (enough batches an epoch for steady loader workers) "
        "or paper (the paper's sizes) (default: small)",
    )
    p.add_argument("--seed", default=0, type=whole("--seed"), help="the same seed writes the same files (default: 0)")
    p.add_argument("--only", help=f"a comma list of {', '.join(DATASETS)} (default: all)")
    p.add_argument("--overwrite", action="store_true", help="replace a dataset's files already in DIR")


@dataclass(frozen=True)
class Written:
    dataset: str
    folder: Path
    files: int
    bytes: int
    seconds: float


def parse_only(text: str | None) -> tuple[str, ...]:
    if text is None:
        return DATASETS
    names = picked(text, "--only", DATASETS, "dataset")
    return tuple(d for d in DATASETS if d in names)


def target(text: str) -> Path:
    from pathlib import Path

    from dlperf.store.location import unreachable

    if not text.strip():  # `dlperf data synth "$DIR"` with $DIR unset: not the current folder
        raise UsageError(f"DIR {text!r}: expected the folder to write the datasets in, got nothing")
    directory = Path(text).expanduser().absolute()
    if why := unreachable(directory):
        raise UsageError(f"DIR {text!r}: {why}")
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory}: not a directory")
    return directory


def run(args) -> int:
    from dlperf.workloads.datasets import synth

    datasets, directory = parse_only(args.only), target(args.dir)
    found = {d: synth.existing(directory, d) for d in datasets}
    if not args.overwrite and (clash := [p for paths in found.values() for p in paths]):
        shown = ", ".join(str(p.relative_to(directory)) for p in clash[:4]) + (", ..." if len(clash) > 4 else "")
        raise UsageError(f"{directory}: {shown} already there (--overwrite replaces them, --only picks datasets)")
    written: list[Written] = []
    try:
        try:
            directory.mkdir(parents=True, exist_ok=True)  # before the progress lines: a bad DIR is one line alone
            synth.remove(synth.leftovers(directory))
            with synth.staged(directory) as stage:
                write_all(directory, stage, datasets, synth.SIZES[args.size], args.seed, written)
        finally:
            note(directory, args, datasets, written)
    except OSError as exc:  # a full disk, a folder not ours: one line, as for any bad input
        raise UsageError(failed(exc, directory, datasets, written)) from None
    except KeyboardInterrupt:
        return interrupted(directory, args, datasets, written)
    print_table(written, directory)
    return ExitCode.OK


def interrupted(directory: Path, args, datasets: tuple[str, ...], written: list[Written]) -> int:
    """Ctrl-C: what is written whole, what is not, and the command that writes the rest (a bare 'interrupted' left
    the datasets written unnamed, and the same command again was refused for them: 'already there')."""
    import shlex
    import sys

    done = [w.dataset for w in written]
    rest = [d for d in datasets if d not in done]
    if not rest:  # came as README.txt was written: every dataset is whole
        print(f"dlperf: interrupted; {', '.join(done)} written whole in {directory}", file=sys.stderr)
        return ExitCode.INTERRUPTED
    flags = ["--size", args.size, "--seed", str(args.seed), "--only", ",".join(rest)]
    again = shlex.join(["dlperf", "data", "synth", str(directory), *flags, *["--overwrite"] * args.overwrite])
    kept = f"{', '.join(done)} written whole in {directory}; " if done else ""
    print(f"dlperf: interrupted; {kept}nothing of {rest[0]} kept. To write the rest: {again}", file=sys.stderr)
    return ExitCode.INTERRUPTED


def failed(exc: OSError, directory: Path, datasets: tuple[str, ...], written: list[Written]) -> str:
    """What could not be written, named where it was going (not in the staging folder), and what was kept."""
    from pathlib import Path

    from dlperf.workloads.datasets import synth

    path = Path(exc.filename) if exc.filename else directory
    if staged := next((p for p in (path, *path.parents) if p.name.startswith(synth.STAGING)), None):
        path = directory / path.relative_to(staged)
    line = f"{path}: cannot be written ({exc.strerror or exc})"
    if len(written) < len(datasets):
        line += f": nothing of {datasets[len(written)]} kept"
    return line + (f"; {', '.join(w.dataset for w in written)} written whole" if written else "")


def note(directory: Path, args, datasets: tuple[str, ...], written: list[Written]) -> None:
    """README.txt's paragraph on the datasets written whole, even when a later one failed (a full disk, an
    interrupt: then as best it can)."""
    from dlperf.version import VERSION
    from dlperf.workloads.datasets import synth

    if not written:
        return
    text = synth.readme(args.size, args.seed, [w.dataset for w in written], VERSION)
    try:
        readme = directory / "README.txt"
        if readme.is_file() and text in readme.read_text(encoding="utf-8", errors="replace"):
            return  # said already (--overwrite of the same data grew it by the same paragraph each time)
        with open(readme, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        if len(written) == len(datasets):  # all written: the note must be too
            raise


def write_all(directory: Path, stage: Path, datasets: tuple[str, ...], size, seed: int, written: list[Written]) -> None:
    """Each dataset in turn into `stage`, then moved into `directory` whole (`written`, in order); a progress line
    each (on stderr, so the table alone goes to stdout)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from dlperf.workloads.datasets import synth

    columns = (TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(), TextColumn("files"),
               TimeElapsedColumn())  # fmt: skip
    with Progress(*columns, console=Console(stderr=True)) as progress:
        for dataset in datasets:
            task = progress.add_task(dataset, total=synth.files(dataset, size))
            start, files, size_bytes = time.monotonic(), 0, 0
            for path in synth.write(stage, dataset, size, seed):
                files, size_bytes = files + 1, size_bytes + path.stat().st_size
                progress.advance(task)
            synth.commit(stage, directory, dataset)
            folder = directory / synth.FOLDERS[dataset]
            written.append(Written(dataset, folder, files, size_bytes, time.monotonic() - start))


def print_table(written: list[Written], directory: Path) -> None:
    from rich.table import Table

    table = Table(title=f"Synthetic datasets in {directory}")
    for name in ("dataset", "folder", "files", "MB", "seconds"):
        table.add_column(name, justify="left" if name in ("dataset", "folder") else "right")
    for w in written:
        table.add_row(w.dataset, w.folder.name, str(w.files), f"{w.bytes / 1e6:.1f}", f"{w.seconds:.1f}")
    console = wide()
    console.print(table)
    console.print(f"{reads(written, directory)} (README.txt says what they are)", highlight=False, markup=False,
                  soft_wrap=True)  # fmt: skip


def reads(written: list[Written], directory: Path) -> str:
    """The command that reads what was written. Into a folder whose own class folders hold images, `--data DIR`
    is refused for the images (`imagefolder.folder`: it does not guess between DIR/imagenet/train and DIR's own
    classes), so the images are named by their folder: synth into a folder of photos ended 'dlperf run --data
    photos reads them', which the run then refused."""
    import shlex

    from dlperf.workloads.datasets import imagefolder

    given = shlex.quote(str(directory))  # a command to paste: `data synth "sp ace"` ended with it unquoted
    if not any(w.dataset == "imagenet" for w in written):
        return f"dlperf run --data {given} reads them"
    try:
        imagefolder.folder(directory)
    except UsageError:
        images = shlex.quote(str(directory / imagefolder.FOLDER / "train"))
        others = [w.dataset for w in written if w.dataset != "imagenet"]
        rest = f"dlperf run --data {given} reads {', '.join(others)}; " if others else ""
        return (f"{rest}the images: dlperf run --data {images} ({directory}'s own folders hold images too, and --data "
                f"{given} does not guess which to read)")  # fmt: skip
    return f"dlperf run --data {given} reads them"
