"""The cell worker, in process, on a fake backend: what it reports when the framework's optional analyses fail."""

from __future__ import annotations

import types

from dlperf.measure.timer import TimerConfig
from dlperf.protocol import Cell, CellTask, Done, Flops, Memory, Sample, first
from dlperf.runner import worker
from dlperf.runner.collect import cell_figures, measurement
from dlperf.runner.launch import ChildResult
from dlperf.workloads import BUILTIN


class Step:
    """A train step whose counters fail as XLA's did on CUDA (jax 0.11.2: cost_analysis() gave None)."""

    params, compiles = 10, False

    def step(self):
        return 0.0

    def sync(self):
        pass

    def compile_stats(self):
        return {}

    def count_flops(self):
        raise TypeError("'NoneType' object is not subscriptable")

    def memory_of_step(self):
        raise RuntimeError("no memory analysis on this backend")

    def settings(self):
        return {}


def fake_backend(monkeypatch) -> None:
    module = types.SimpleNamespace(
        configure_threads=lambda n: {"threads": n}, build=lambda w, d, m: Step(), version=lambda: "0.0"
    )
    monkeypatch.setattr(worker, "backend", lambda framework: module)


def test_optional_analyses_that_fail_give_no_figure_and_a_note_never_a_failed_cell(monkeypatch):
    fake_backend(monkeypatch)
    task = CellTask(Cell("tiny-fcn-r", "fake", "cpu", 1, "fp32"), 0, BUILTIN["tiny-fcn-r"].to_json(),
                    TimerConfig(min_steps=3, min_time=0, max_time=0.2, max_warmup=2))  # fmt: skip
    events = []
    worker.measure(task, events.append)
    flops, memory = first(events, Flops), first(events, Memory)
    assert flops.flops_per_step is None and "no FLOP count" in flops.note and "NoneType" in flops.note
    assert memory.figures == {} and "no memory figure" in memory.note
    assert first(events, Done) is not None and first(events, Sample) is not None
    m = measurement(events, ChildResult(0, False, 1.0, ""), timeout=60)
    assert m["status"] == "ok" and m["detail"]["flops_per_step"] is None
    figures = cell_figures([m], batch=16, threads=1, cores=2, device="cpu")
    assert figures["status"] == "ok" and any(w.startswith("no FLOP count") for w in figures["extra"]["warnings"])
