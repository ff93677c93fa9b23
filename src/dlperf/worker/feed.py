"""A loader cell's input pipeline inside the worker (`--data`): the loader timed alone, then every step fed by it.

A fed step takes the loader's next batch (a new epoch when one ends), copies it into the step's own input buffers
(`TrainStep.load`) and runs the step; the timer times all of it, so the step's time includes its wait for data.
The wait (the next batch, and issuing its copy) is the host's time, recorded per timed call of the timer's `run`.
Where the timer pipelines steps (CUDA: it reads the device's time of the step launched a few calls before), a wait
pairs with the sample its call returned, and the device may have hidden part of it behind queued work: the wait
share is then the host's time blocked on data over the device's step time, an upper bound of what data costs.

Standard library only: the loader and the step are the backend's objects, used through their methods.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from dlperf.figures import LoaderFigures
from dlperf.loaders import oversubscribed
from dlperf.measure.timer import TimerConfig

ALONE_MIN_BATCHES = 3  # the loader alone is timed over at least this many batches after its first


class Feed:
    """Batches from a loader, round and round its epochs; `step` feeds one to the train step, timing the wait."""

    def __init__(self, loader: Any, train: Any = None) -> None:
        self.loader, self.train = loader, train
        self.train_step = train.step if train is not None else None  # the step's own, should it be replaced by ours
        self.batches: Any = None  # the epoch's iterator (holding the worker processes of a DataLoader)
        self.pending = 0.0  # wait since the timer's last call
        self.waits: list[float] = []  # one per call of the timer's run, in order
        self.stepped: list[float] = []  # what those calls returned

    def next(self) -> Any:
        if self.batches is not None:
            try:
                return next(self.batches)
            except StopIteration:
                pass
        self.batches = iter(self.loader)
        try:
            return next(self.batches)
        except StopIteration:
            raise RuntimeError("the loader gave no batch: its dataset holds less than one batch") from None

    def wait(self) -> None:
        """The next batch, copied into the step's buffers: what a step waits for."""
        start = time.perf_counter()
        inputs, targets = self.next()
        self.train.load(inputs, targets)
        self.pending += time.perf_counter() - start

    def step(self) -> Any:
        self.wait()
        return self.train_step()

    def timed(self, run: Callable[[], float]) -> Callable[[], float]:
        """The timer's `run` with each call's wait kept beside the time it returned."""

        def call() -> float:
            t = run()
            self.waits.append(self.pending)
            self.stepped.append(t)
            self.pending = 0.0
            return t

        return call

    def restart(self) -> None:
        """Forget what was measured so far (the warm-up's steps)."""
        self.waits, self.stepped, self.pending = [], [], 0.0

    def close(self) -> None:
        """Let the epoch's iterator go, and with it a DataLoader's worker processes."""
        self.batches = self.loader = None

    def figures(self) -> LoaderFigures:
        stepped = sum(self.stepped)
        return LoaderFigures(wait_s=self.waits, wait_share=sum(self.waits) / stepped if stepped > 0 else None)


def alone(loader: Any, cfg: TimerConfig) -> tuple[LoaderFigures, Any]:
    """The loader iterated with no step, for about the timer's min_time (at least ALONE_MIN_BATCHES batches, at
    most its max_time): samples per second over the batches after the first, whose time (starting workers, opening
    files) is `alone_first_s`. The samples over the time they took, new epochs' worker starts included, as training
    pays them: not a median of the gaps between batches, which workers hand over in bunches (four workers' batches
    arrive together, then a wait), so that its median gap was the hand-over of a batch already waiting (70,208
    samples/s read alone from four workers each preparing 470). Returns the figures and the last batch."""
    feed = Feed(loader)
    start = time.perf_counter()
    batch = feed.next()
    first = time.perf_counter() - start
    count = samples = 0
    start = last = time.perf_counter()
    while True:
        elapsed = last - start
        if count and (elapsed >= cfg.max_time or (count >= ALONE_MIN_BATCHES and elapsed >= cfg.min_time)):
            break
        batch = feed.next()
        last = time.perf_counter()
        count, samples = count + 1, samples + len(batch[0])
    feed.close()
    rate = samples / elapsed if count and elapsed > 0 else None
    figures = LoaderFigures(alone_samples_per_s=rate, alone_batches=count, alone_s=elapsed, alone_first_s=first)
    return figures, batch


def describe(loader: Any, setting: Any, threads: int) -> LoaderFigures:
    """What a loader cell records of its pipeline before measuring it: the setting, the cores it shares with the
    step's compute threads, and the dataset."""
    cores = len(os.sched_getaffinity(0))
    dataset = getattr(loader, "dataset", None)
    return LoaderFigures(
        setting=setting.name, workers=setting.workers, threads=threads, cores=cores,
        oversubscribed=oversubscribed(setting.workers, threads, cores),
        dataset=getattr(dataset, "NAME", type(dataset).__name__) if dataset is not None else type(loader).__name__,
        samples=len(dataset) if hasattr(dataset, "__len__") else None, batches=batches(loader),
    )  # fmt: skip


def batches(loader: Any) -> int | None:
    """An epoch's batches as the loader counts them (a DataLoader: its last partial batch dropped or not); None for
    a loader without a length (an iterable dataset's)."""
    try:
        return len(loader)
    except TypeError:
        return None
