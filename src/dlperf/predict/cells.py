"""A run's GPU cells predicted for their own GPU, so the store keeps the prediction beside the measurement.

Each CUDA cell of one plain process whose device is in the GPU table gets one prediction (roofline.py) at its
workload's batch and its mode's precision, with no copy for a cell fed on the device (dlperf's synthetic batch) and
the host copy for a loader cell. CUDA graphs are modelled (one launch a step: roofline.py); the other techniques a
mode adds to its precision (compile, channels-last, checkpointing, fused optimizers) are not: such a cell is
predicted as its plain precision (with CUDA graphs where it has them), and says so.
A count that fails never fails the run: the run goes on without predictions, with a warning.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from dlperf.errors import UsageError
from dlperf.modes import PRECISIONS, Mode, mode_components
from dlperf.predict import count, gpus, roofline
from dlperf.protocol import Cell
from dlperf.store.records import Prediction
from dlperf.workloads.base import Workload


def device_models(env: dict[str, Any]) -> dict[str, str]:
    """Device name ("cuda:0") -> what CUDA calls it ("NVIDIA H100 80GB HBM3"), from the run's environment."""
    frameworks = env.get("frameworks") or {}
    return {d["name"]: d["model"] for fw in frameworks.values() for d in fw.get("devices", []) if d.get("model")}


def chosen(cells: list[Cell], workloads: dict[str, dict], env: dict[str, Any]):
    """(cell, workload, GPU, precision) of each cell to predict, and the warnings about those that cannot be."""
    models, picked, warnings, unknown = device_models(env), [], [], set()
    for cell in cells:
        if not cell.device.startswith("cuda") or cell.nproc or cell.device not in models:
            continue
        gpu = gpus.for_device(models[cell.device])
        if gpu is None:
            unknown.add(models[cell.device])
            continue
        components = mode_components(cell.mode)
        # tf32 is fp32's step at the tensor cores' TF32 peak: a precision to the predictor
        precision = "tf32" if Mode.TF32 in components else next(p.value for p in components if p in PRECISIONS)
        picked.append((cell, Workload.from_json(workloads[cell.key]), gpu, precision))
    for model in sorted(unknown):
        warnings.append(
            f"no prediction for {model}: it is not in dlperf's GPU table{gpus.unmatched(model)} (dlperf "
            f"predict --list-gpus); give its figures with --gpu-specs FILE.csv, in a row named {model!r}"
        )
    return picked, warnings


def predictions(
    cells: list[Cell], workloads: dict[str, dict], env: dict[str, Any]
) -> tuple[list[Prediction], list[str]]:
    """The predictions `Store.record_predictions` takes for the run's GPU cells, and the warnings to show."""
    picked, warnings = chosen(cells, workloads, env)
    if not picked:
        return [], warnings
    try:
        found = count.counts([(w, precision) for _, w, _, precision in picked])
    except UsageError as e:
        return [], [*warnings, f"no predictions: the operator count failed ({e}); the run goes on without them"]
    rows = []
    for (cell, w, gpu, precision), n in zip(picked, found, strict=True):
        if isinstance(n, str):
            warnings.append(f"no prediction for {cell.key}: its operators cannot be counted ({n})")
            continue
        components = mode_components(cell.mode)
        graphs = Mode.CUDA_GRAPHS in components
        p = roofline.predict(n, gpu, transfer=bool(cell.loader), cuda_graphs=graphs)
        extra = [c.value for c in components if c not in (*PRECISIONS, Mode.TF32, Mode.CUDA_GRAPHS)]
        detail = {
            "parts": p.parts, "kernels": p.kernels, "efficiency": asdict(roofline.EFFICIENCY),
            "uncertainty": roofline.uncertainty(), "modelled_as": precision + ("+cuda_graphs" if graphs else ""),
            "not_modelled": extra,
        }  # fmt: skip
        rows.append(Prediction(cell.key, gpu.name, precision, w.batch, p.step_s, p.device_s, p.transfer_s, p.bound,
                               detail))  # fmt: skip
    return rows, warnings
