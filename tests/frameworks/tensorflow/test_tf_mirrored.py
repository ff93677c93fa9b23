"""TensorFlow's MirroredStrategy (`--parallel mirrored`): N replicas in one process, on logical CPU devices here.

The step's numerics run as scripts in TensorFlow's own environment (`conftest.run_in`), the cells end to end through
`dlperf run`; both skip, with the reason, where TensorFlow is not installed. The flag's checks and the worker's
dispatch need no TensorFlow.
"""

from __future__ import annotations

import types

import pytest

from conftest import FAST, dlperf, framework_python, one_line_error, run_in
from dlperf.measure.timer import TimerConfig
from dlperf.protocol import Cell, CellTask
from dlperf.store import Store
from dlperf.worker import cell as worker
from dlperf.workloads.shi2016 import BUILTIN

TF = "tensorflow"

# ----------------------------------------------------------------------------------------------------------------------
# Without TensorFlow


def test_mirrored_without_tensorflow_is_a_one_line_error():
    done = dlperf("run", "--frameworks", "torch", "--nproc", "2", "--parallel", "mirrored", "--dry-run")
    one_line_error(done, "--parallel mirrored: tf.distribute.MirroredStrategy (logical CPU devices, or GPUs) is "
                   "tensorflow's; add --frameworks tensorflow")  # fmt: skip


def test_a_backend_without_replicas_makes_the_cell_unsupported():
    """A replica cell reaching the plain worker goes to the backend's build_parallel; one without it (torch, jax,
    mxnet) raises NotImplementedError, so the cell is unsupported, never built as a plain step."""
    cell = Cell("tiny-fcn-r", "torch", "cpu", 1, "fp32", nproc=2, scaling="strong", parallel="mirrored")
    task = CellTask(cell=cell, repeat=0, workload=BUILTIN["tiny-fcn-r"].to_json(), timer=TimerConfig())
    plain = types.SimpleNamespace(build=lambda *a, **k: pytest.fail("a replica cell was built as a plain step"))
    with pytest.raises(NotImplementedError, match="the torch backend runs no replicas"):
        worker.build_cell(plain, task, BUILTIN["tiny-fcn-r"])
    built = types.SimpleNamespace(build_parallel=lambda workload, cell: ("step", cell.nproc))
    assert worker.build_cell(built, task, BUILTIN["tiny-fcn-r"]) == (("step", 2), {})


# ----------------------------------------------------------------------------------------------------------------------
# In TensorFlow's environment

SAME_LOSS = """
import dataclasses, json, sys
import numpy as np
from dlperf.frameworks.tensorflow import backend as tb, mirrored
from dlperf.protocol import Cell
from dlperf.workloads.shi2016 import BUILTIN
name, clip, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
w = BUILTIN[name]
w = dataclasses.replace(w, batch=8, optimizer=dataclasses.replace(w.optimizer, clip_grad_norm=clip or None))
cell = Cell(name, "tensorflow", "cpu", 1, mode, nproc=2, scaling="strong", parallel="mirrored")
mirrored.configure(cell)
two = mirrored.build(w, cell)
one = tb.build(w, "cpu", mode)
def weights(vs):
    return np.concatenate([v.numpy().ravel() for v in vs])
losses = [[float(two.step()), float(one.step())] for _ in range(3)]
a, b = weights(two.variables), weights(one.model.trainable_variables)
print(json.dumps({"losses": losses, "weights": float(np.linalg.norm(a - b) / np.linalg.norm(b)),
                  "settings": two.settings()}))
"""


@pytest.mark.parametrize(
    "workload,clip,mode",
    [
        ("tiny-fcn-r", 0.0, "fp32"),
        ("tiny-fcn-r", 0.0, "bf16"),
        # slow: 8-20 s; a bar every step's gradient exceeds: clipped after the all-reduce, as on one device
        pytest.param("tiny-lstm", 0.01, "fp32", marks=pytest.mark.slow),
    ],
)
def test_a_mirrored_step_trains_as_one_device_on_the_whole_batch(workload, clip, mode):
    """Two replicas on halves of a batch of 8 against one device on all of it, from the same weights: the same loss
    at each of three steps and the same weights after them, within fp32 rounding (the all-reduce sums in another
    order); in bf16 within its rounding (each half's weight gradient is a bf16 product of its own). ResNets differ by
    design: BatchNorm normalizes each replica's half."""
    got = run_in(TF, SAME_LOSS, workload, str(clip), mode, threads=2)
    close = 1e-5 if mode == "fp32" else 1e-3
    for two, one in got["losses"]:
        assert two == pytest.approx(one, rel=close)
    assert got["losses"][2][0] < got["losses"][0][0]  # it trains
    assert got["weights"] < close
    assert got["settings"]["dtype_policy"] == {"fp32": "float32", "bf16": "mixed_bfloat16"}[mode]
    settings = got["settings"]
    assert settings["replicas"] == 2 and settings["per_replica_batch"] == 4
    assert len(settings["replica_devices"]) == 2 and settings["tf_intra_op_threads"] == 2


REFUSED = """
import json
from dlperf.frameworks.tensorflow import mirrored
from dlperf.protocol import Cell
from dlperf.workloads.shi2016 import BUILTIN
out = {}
for mode in ("fp32", "bf16", "compile", "bf16+compile"):
    cell = Cell("tiny-fcn-r", "tensorflow", "cpu", 1, mode, nproc=2, scaling="strong", parallel="mirrored")
    try:
        mirrored.check(BUILTIN["tiny-fcn-r"], cell)
        out[mode] = None
    except NotImplementedError as exc:
        out[mode] = str(exc)
print(json.dumps(out))
"""


def test_the_strategy_runs_fp32_and_bf16_and_refuses_xla_saying_so():
    got = run_in(TF, REFUSED)
    assert got["fp32"] is None and got["bf16"] is None
    for mode in ("compile", "bf16+compile"):
        assert (
            got[mode] == f"{mode} under MirroredStrategy is not measured by dlperf: graph mode, in fp32 or bf16, only"
        )


# ----------------------------------------------------------------------------------------------------------------------
# End to end


def mirrored_cells(tmp_path, *flags: str) -> dict:
    framework_python(TF)
    db = tmp_path / "m.db"
    done = dlperf("run", "--frameworks", TF, "--workloads", "tiny-fcn-r", "--threads", "1", "--parallel",
                  "mirrored", *flags, *FAST, db=db, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(db, create=False)
    cells = {c.column: (c, store.measurements(1, c.key)[0].detail) for c in store.cells(1)}
    store.close()
    return cells


@pytest.mark.slow
def test_mirrored_cells_strong_scaling_end_to_end(tmp_path):
    cells = mirrored_cells(tmp_path, "--nproc", "1,2")
    assert set(cells) == {"mirrored:1x1", "mirrored:2x1"}
    for column, (cell, _) in cells.items():
        assert cell.status == "ok" and cell.framework == TF and cell.parallel == "mirrored", column
    two, detail = cells["mirrored:2x1"]
    assert two.key == "tiny-fcn-r|tensorflow|cpu|1|fp32|mirrored:2:strong"
    total = BUILTIN["tiny-fcn-r"].ddp_batch or BUILTIN["tiny-fcn-r"].batch
    assert detail.settings["replicas"] == 2 and detail.settings["per_replica_batch"] == total // 2
    assert detail.settings["tf_intra_op_threads"] == 2  # one thread per replica, in one shared pool
    comm = two.comm
    assert comm.world == 2 and comm.strategy == "mirrored" and comm.backend.startswith("mirrored: ")
    assert comm.backend.removeprefix("mirrored: ") == detail.settings["cross_device_ops"]
    assert comm.local_step_s > 0 and comm.exposed_comm_s >= 0 and 0 <= comm.comm_share < 1
    assert comm.exposed_comm_s == pytest.approx(max(0.0, comm.step_s - comm.local_step_s))
    assert comm.gradient_bytes == 4 * two.params and comm.param_bytes_rank == [4 * two.params] * 2
    assert cells["mirrored:1x1"][0].comm.busbw_bytes_s == 0.0  # one replica: nothing crosses a link


@pytest.mark.slow
def test_weak_scaling_gives_each_replica_the_workloads_batch(tmp_path):
    cells = mirrored_cells(tmp_path, "--nproc", "2", "--scaling", "weak")
    cell, detail = cells["mirrored:2x1"]
    assert cell.status == "ok" and cell.key.endswith("|mirrored:2:weak")
    assert detail.settings["per_replica_batch"] == BUILTIN["tiny-fcn-r"].batch
