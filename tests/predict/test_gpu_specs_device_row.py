"""A GPU the table lacks gets its prediction from a user's --gpu-specs row only where the row is named as CUDA names
the device (vendor words, case and punctuation aside): what CUDA calls a device is matched whole (`for_device`), so a
row named "RTX 4090 Laptop" is no "NVIDIA GeForce RTX 4090 Laptop GPU". The note of a device without a prediction
says the name its row needs; it said only "give its figures with --gpu-specs FILE.csv"."""

from __future__ import annotations

from dlperf.frameworks.common.ops import Count, Op
from dlperf.predict import cells, count, gpus
from dlperf.protocol import Cell
from dlperf.workloads import BUILTIN
from predict.test_gpu_specs import MINE, write

LAPTOP = "NVIDIA GeForce RTX 4090 Laptop GPU"


def predicted(monkeypatch):
    w = BUILTIN["tiny-fcn-r"]
    cell = Cell(w.name, "torch", "cuda:0", 1, "fp32")
    machine = {"frameworks": {"torch": {"devices": [{"name": "cuda:0", "model": LAPTOP}]}}}
    op = Op("matmul", "fp32", 2 * 1024**3, 4 * 1024**2)
    monkeypatch.setattr(count, "counts", lambda requests, timeout=None: [Count(w.name, "fp32", 16, (op,), 1, 1)])
    return cells.predictions([cell], {cell.key: w.to_json()}, machine)


def test_the_note_names_the_row_the_device_needs(monkeypatch):
    rows, [warning] = predicted(monkeypatch)
    assert rows == [] and warning.endswith(f"give its figures with --gpu-specs FILE.csv, in a row named {LAPTOP!r}")


def test_a_row_named_as_the_note_says_predicts_the_device(tmp_path, monkeypatch):
    gpus.use_specs(str(write(tmp_path, MINE.replace("My GPU", "RTX 4090 Laptop GPU", 1))))
    try:
        rows, warnings = predicted(monkeypatch)
    finally:
        gpus.use_specs(None)
    assert warnings == [] and [r.gpu for r in rows] == ["RTX 4090 Laptop GPU"]
