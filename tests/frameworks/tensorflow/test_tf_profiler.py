"""The TensorFlow profile (frameworks/tensorflow/profiler.py): categories that sum to the step, a product-heavy step
whose largest category is `matmul`, the layers, the trace and its cap, and `dlperf profile` end to end.

Like the backend's tests, every check runs as a script in TensorFlow's own environment (`conftest.run_in`) and
returns JSON; they skip, with the reason, where it is not installed. Shares are compared with each other, never with
a time."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import FAST, dlperf, framework_python, run_in
from dlperf.store import Store
from dlperf.vocab import Category

TF = "tensorflow"
PRELUDE = """
import dataclasses, json, sys
from dlperf.frameworks.tensorflow import backend as tb
from dlperf.protocol import Profiled
from dlperf.workloads.shi2016 import BUILTIN
tb.configure_threads(2)
def profiled(workload, steps=2, trace=None, cap=50 * 2**20):
    train = tb.build(workload, "cpu", "fp32")
    train.step()
    result = tb.profile(train, steps, trace, cap)
    assert Profiled(**result).categories == result["categories"]  # exactly the event's fields
    return result
"""


def tf_run(body: str, *args: str) -> dict:
    return run_in(TF, PRELUDE + body, *args, threads=2, timeout=300)


@pytest.fixture(scope="module", autouse=True)
def tensorflow_present():
    framework_python(TF)  # skips the module (or fails under DLPERF_REQUIRE) without TensorFlow


@pytest.fixture(scope="module")
def profiles(tmp_path_factory) -> dict:
    """One TensorFlow process (its import takes seconds): a tiny ResNet with its trace, a step of large products,
    and a trace over its cap."""
    where = tmp_path_factory.mktemp("tfprof")
    kept, capped = where / "kept.json.gz", where / "capped.json.gz"
    result = tf_run(
        """
wide = dataclasses.replace(BUILTIN["tiny-fcn-r"], config={"widths": [768, 768, 10], "activation": "sigmoid"},
                           batch=512)
wide = dataclasses.replace(wide, input=dataclasses.replace(wide.input, shape=(768,)))
from dlperf.frameworks.tensorflow import profiler as P
types = json.loads(sys.argv[3])
print(json.dumps({"resnet": profiled(BUILTIN["tiny-resnet-56"], trace=sys.argv[1]), "wide": profiled(wide),
                  "capped": profiled(BUILTIN["tiny-fcn-r"], trace=sys.argv[2], cap=100),
                  "types": {t: P.classify(t) for t in types["graph"]},
                  "hlo": {t: P.classify_hlo(t) for t in types["hlo"]}}))
""",
        str(kept),
        str(capped),
        json.dumps({"graph": list(GRAPH_TYPES), "hlo": list(HLO_NAMES)}),
    )
    return {**result, "kept": kept, "capped_path": capped}


GRAPH_TYPES = {
    "_MklNativeFusedConv2D": "matmul", "_MklNativeConv2DBackpropFilterWithBias": "matmul", "_FusedMatMul": "matmul",
    "BatchMatMulV2": "matmul", "FusedBatchNormGradV3": "normalization", "_MklFusedBatchNormV3": "normalization",
    "MaxPoolGrad": "pooling", "_MklAvgPool": "pooling", "ResourceApplyKerasMomentum": "optimizer",
    "SparseSoftmaxCrossEntropyWithLogits": "loss", "Cast": "copy", "_MklToTf": "copy", "Transpose": "copy",
    "Relu": "elementwise", "BiasAddGrad": "elementwise", "_MklNativeMul": "elementwise", "ReadVariableOp": "other",
    "TensorListSetItem": "other",
}  # fmt: skip
HLO_NAMES = {"dot.3": "matmul", "MatMul_1.10": "matmul", "convolution.7": "matmul", "copy.2": "copy",
             "add_divide_fusion.1": "elementwise", "wrapped_add.8": "elementwise", "tuple": "other"}  # fmt: skip


def test_op_types_and_xla_thunks_map_into_the_categories_as_documented(profiles):
    assert profiles["types"] == GRAPH_TYPES
    assert profiles["hlo"] == HLO_NAMES


def test_the_categories_of_a_tiny_resnet_sum_to_its_step_and_its_layers_are_found(profiles):
    result = profiles["resnet"]
    categories = result["categories"]
    assert set(categories) <= {c.value for c in Category}
    assert sum(categories.values()) == pytest.approx(result["step_s"], rel=1e-9)
    assert all(v >= 0 for v in categories.values())
    for kind in ("matmul", "normalization", "elementwise", "loss", "optimizer", "host"):
        assert categories.get(kind, 0) > 0, kind  # BatchNormalization's moments and the SGD update by scope
    assert result["kernels_per_step"] is None and result["ops_per_step"] > 100
    assert 0 < len(result["top_ops"]) <= 15
    assert all(op["calls"] > 0 and op["self_s"] >= 0 for op in result["top_ops"])
    assert any("Conv2D" in op["name"] and op["shapes"].startswith("[[") for op in result["top_ops"])
    layers = {m["name"]: m for m in result["modules"]}
    assert {"conv2d", "batch_normalization", "dense"} <= set(layers)
    assert layers["conv2d_1"]["forward_s"] > 0 and layers["conv2d_1"]["backward_s"] > 0
    assert result["flops"]["matmul"] > 0 and result["bytes"] == {}


def test_a_step_of_large_products_spends_most_of_its_device_time_in_matmul(profiles):
    result = profiles["wide"]
    categories = result["categories"]
    assert sum(categories.values()) == pytest.approx(result["step_s"], rel=1e-9)
    work = {k: v for k, v in categories.items() if k not in ("host", "idle")}
    assert max(work, key=work.get) == "matmul", categories
    assert categories["matmul"] > sum(v for k, v in work.items() if k != "matmul"), categories


def test_the_trace_is_gzip_chrome_json_and_a_trace_over_the_cap_is_not_kept(profiles):
    assert profiles["resnet"]["trace"] == str(profiles["kept"])
    with gzip.open(profiles["kept"], "rt") as f:
        trace = json.load(f)
    complete = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert sum(1 for e in complete if e["name"].startswith("dlperf_step")) == 2  # the step ranges
    # the ops, by type: which convolution op runs depends on the CPU and oneDNN (_MklNativeFusedConv2D, Conv2D, ...)
    assert any("Conv2D" in e["name"] for e in complete), sorted({e["name"] for e in complete})
    assert profiles["capped"]["trace"] is None and not profiles["capped_path"].exists()
    assert any("above the cap of 100 bytes" in note for note in profiles["capped"]["notes"])


@pytest.mark.slow  # an end-to-end run of the command: with the sweeps (make test-slow), keeping make test short
def test_dlperf_profile_of_a_tensorflow_cell_end_to_end(tmp_path):
    db = tmp_path / "d.db"
    proc = dlperf(
        "profile", "tiny-fcn-r", "--framework", TF, "--threads", "1", "--steps", "2", *FAST, db=db, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "tiny-fcn-r tensorflow cpu:1 fp32:" in proc.stdout and "  verdict: " in proc.stdout
    store = Store.open(db, create=False)
    [profile] = store.profiles(1).values()
    store.close()
    assert profile.ok, profile
    figures = profile.figures
    assert sum(figures.categories.values()) == pytest.approx(figures.step_s, rel=1e-6)
    assert figures.trace.startswith(str(db) + ".traces")
    with gzip.open(figures.trace, "rt") as f:
        assert json.load(f)["traceEvents"]
