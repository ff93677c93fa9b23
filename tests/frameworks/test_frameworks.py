"""One table, four frameworks: `dlperf run --frameworks torch,jax,tensorflow,mxnet` end to end, each framework's
workers started with its own environment's interpreter, the parent importing none of them."""

from __future__ import annotations

import json
import os

import pytest

from conftest import FAST, cells, dlperf, framework_python, rows
from dlperf import envs

pytestmark = pytest.mark.slow
FRAMEWORKS = ["torch", "jax", "tensorflow", "mxnet"]


def detail(db, cell):
    [row] = [m for m in measurements(db) if m["cell_key"] == cell["key"]]
    return json.loads(row["detail_json"])


def measurements(db):
    return rows(db, "SELECT * FROM measurements")


@pytest.mark.timeout(900)
def test_one_run_fills_a_row_per_framework_each_from_its_own_interpreter(tmp_path):
    pythons = {fw: framework_python(fw) for fw in FRAMEWORKS}
    db, temp = tmp_path / "d.db", tmp_path / "tmp"
    temp.mkdir()
    proc = dlperf("run", "--frameworks", ",".join(FRAMEWORKS), "--workloads", "tiny-alexnet-r,tiny-lstm",
                  "--threads", "1", *FAST, db=db, timeout=900, env={"TMPDIR": str(temp)})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert os.listdir(temp) == []  # no framework left a file behind (TensorFlow's AutoGraph left two per process)
    found = {(c["workload"], c["framework"]): c for c in cells(db)}
    assert len(found) == 8 and all(c["status"] == "ok" and c["median_s"] > 0 for c in found.values()), found
    for (workload, framework), c in found.items():
        assert detail(db, c)["python"] == pythons[framework]
        assert (
            c["params"]
            == {"tiny-alexnet-r": 4_554, "tiny-lstm": 7_652 - (128 if framework in ("jax", "tensorflow") else 0)}[
                workload
            ]
        )
        compiled = json.loads(c["extra_json"])["compile"]
        assert (compiled is None) == (framework == "torch"), (framework, compiled)  # first steps that trace, apart
    assert found[("tiny-alexnet-r", "jax")]["peak_mem_kind"] == "xla_buffers"
    assert found[("tiny-alexnet-r", "jax")]["flops_per_step"] > 0
    assert found[("tiny-alexnet-r", "mxnet")]["flops_per_step"] is None  # MXNet has no FLOP counter
    table = json.loads(dlperf("table", "--format", "json", db=db).stdout)
    assert [(r["workload"], r["framework"]) for r in table["rows"]] == [
        (w, fw) for w in ("tiny-alexnet-r", "tiny-lstm") for fw in FRAMEWORKS
    ]
    assert any(n.startswith("tiny-lstm: the frameworks train different parameter counts") for n in table["notes"])
    env = json.loads(dlperf("env", "--format", "json", db=db).stdout)
    assert set(env["frameworks"]) == set(FRAMEWORKS) and env["frameworks"]["mxnet"]["version"] == "1.9.1"


@pytest.mark.timeout(900)
def test_tensorflow_compiles_with_xla_jax_and_tensorflow_train_bf16_and_what_a_framework_lacks_is_unsupported(
    tmp_path,
):
    for fw in ("jax", "tensorflow", "mxnet"):
        framework_python(fw)
    db = tmp_path / "d.db"
    proc = dlperf("run", "--frameworks", "jax,tensorflow,mxnet", "--workloads", "tiny-fcn-r", "--threads", "1",
                  "--modes", "fp32,compile,bf16", *FAST, db=db, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    found = {(c["framework"], c["mode"]): c for c in cells(db)}
    graph, xla = found[("tensorflow", "fp32")], found[("tensorflow", "compile")]
    assert graph["status"] == xla["status"] == "ok"
    settings = {c["mode"]: json.loads(c["extra_json"])["settings"] for c in (graph, xla)}
    assert (
        "jit_compile=False" in settings["fp32"]["execution"] and "jit_compile=True" in settings["compile"]["execution"]
    )
    assert json.loads(xla["extra_json"])["loss_check"]["ok"] is True  # XLA trains like graph mode
    for fw in ("jax", "mxnet"):
        assert found[(fw, "fp32")]["status"] == "ok"
        assert found[(fw, "compile")]["status"] == "unsupported" and fw in found[(fw, "compile")]["error"]
    for fw in ("jax", "tensorflow"):  # Flax's dtype, Keras's mixed_bfloat16: checked against fp32, FLOPs in bf16
        bf16 = found[(fw, "bf16")]
        assert bf16["status"] == "ok", bf16["error"]
        extra = json.loads(bf16["extra_json"])
        assert extra["loss_check"]["ok"] is True and extra["loss_check"]["min_cosine"] is not None, extra["loss_check"]
        assert extra["flops_by_dtype"] == {"bf16": bf16["flops_per_step"]}
    assert found[("mxnet", "bf16")]["status"] == "unsupported" and "fp32 only" in found[("mxnet", "bf16")]["error"]
    assert envs.interpreter_for("jax") != envs.interpreter_for("mxnet")  # separate environments
