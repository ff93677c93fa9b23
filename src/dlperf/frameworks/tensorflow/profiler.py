"""Where a TensorFlow train step's time goes: tf.profiler over a few steady steps, read from the XSpace it writes
(`xplane.pb`, parsed with TensorFlow's own `xplane_pb2`, no TensorBoard), each op's self time put in a
`dlperf.vocab.Category`; the top ops, the top-level layers' forward and backward time, and the gzip Chrome trace
(TensorFlow's own converter, the "trace_viewer@" tool). The backend's `profile` (see `dlperf.frameworks`).

Runs only in the profile child (`worker/profile.py`), never in a timed process. Each profiled step is one
TraceMe range (`STEP`) around the step and its sync: the step's wall time is that range's.

The rule, on a CPU in graph mode: every TensorFlow op the executor ran inside a step range is an event named
"scope/name:Type". Its self time (less the ops nested in it on the same thread) goes to
- `optimizer` when it is under the optimizer's name scope ("sgd/...") or gradient clipping's, whatever its type;
- `loss` when under the backend's "loss" name scope, forward or gradient ("gradient_tape/loss/...");
- else by its type, with oneDNN's and Grappler's prefixes taken off ("_MklNativeFusedConv2D" -> "Conv2D",
  "_FusedMatMul" -> "MatMul"): products and convolutions (and their backprops) `matmul`, FusedBatchNorm* and other
  norms `normalization`, MaxPool*/AvgPool* `pooling`, the ApplyX/ResourceApplyX updates `optimizer`, the cross-entropy
  ops `loss`, casts, identities, transposes, layout conversions, concatenations and slices `copy`, arithmetic,
  activations, BiasAdd and reductions `elementwise`, the rest (variable reads, shapes, control flow) `other`.
A fused op counts where its main op does: a convolution fused with its bias and ReLU is `matmul`.
Under XLA (`compile`) the executor runs one compiled cluster: its HLO thunks are the events; products and convolutions
are `matmul`, copies and transposes `copy`, fusions and the rest of element-wise `elementwise`; the loss and the
optimizer are fused into them and not split (a note says so). `host` is the rest of the step's wall time: Python,
the eager call, the executor's scheduling and the profiler's own cost per event. Ops on several threads at once
(more inter-op threads, XLA's thunks) may overlap: their sum is scaled to the step, as the torch profiler does.
"""

from __future__ import annotations

import functools
import gzip
import re
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf
from tensorflow.python.profiler.internal import _pywrap_profiler_plugin  # the trace_viewer converter
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from dlperf.frameworks.common.profiling import fill_to_step, ranked, within_cap, written
from dlperf.vocab import Category

STEP = "dlperf_step"
LOSS_SCOPE = "loss"  # the backend's name scope around the loss (backend.train_step_fn)
OPTIMIZER_SCOPES = ("clip_by_global_norm",)  # and the optimizer's own name

PREFIXES = re.compile(r"^_?(Mkl)?(Native)?(Fused)?")
MATMUL_TYPES = ("MatMul", "BatchMatMul", "Conv", "DepthwiseConv", "Einsum", "CudnnRNN", "BlockLSTM", "LSTMBlock")
NORMALIZATION_TYPES = ("BatchNorm", "LayerNorm", "InstanceNorm", "GroupNorm")
POOLING_TYPES = ("MaxPool", "AvgPool")
OPTIMIZER_TYPES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply")
LOSS_TYPES = {"SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits"}
COPY_TYPES = {
    "Identity", "IdentityN", "Cast", "Transpose", "ConjugateTranspose", "Copy", "CopyHost", "ToTf", "TfToMkl", "Send",
    "Recv", "HostSend", "HostRecv", "ConcatV2", "Concat", "Pack", "Unpack", "Split", "SplitV", "Slice", "StridedSlice",
    "StridedSliceGrad", "Pad", "PadV2", "MirrorPad", "Tile", "GatherV2", "ResourceGather", "Reverse", "ReverseV2",
}  # fmt: skip
ELEMENTWISE_TYPES = {
    "Add", "AddV2", "AddN", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "FloorDiv", "Neg", "Square", "Sqrt", "Rsqrt",
    "SqrtGrad", "RsqrtGrad", "Exp", "Log", "Log1p", "Pow", "Reciprocal", "Abs", "Sign", "Maximum", "Minimum",
    "SquaredDifference", "Relu", "Relu6", "ReluGrad", "Relu6Grad", "Elu", "EluGrad", "Selu", "SeluGrad", "LeakyRelu",
    "LeakyReluGrad", "Gelu", "GeluGrad", "Sigmoid", "SigmoidGrad", "Tanh", "TanhGrad", "Softmax", "LogSoftmax",
    "Softplus", "SoftplusGrad", "Erf", "BiasAdd", "BiasAddV1", "BiasAddGrad", "Sum", "Mean", "Max", "Min", "Prod",
    "ArgMax", "ArgMin", "L2Loss", "Cumsum", "Select", "SelectV2", "Equal", "NotEqual", "Greater", "GreaterEqual",
    "Less", "LessEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "ZerosLike", "OnesLike", "Fill", "BroadcastTo",
    "ClipByValue", "IsFinite", "AssignAddVariableOp", "AssignSubVariableOp", "UnsortedSegmentSum", "Addv2",
}  # fmt: skip
XLA_MATMUL = ("dot", "convolution", "MatMul", "BatchMatMul", "Conv", "Einsum", "custom-call")
XLA_COPY = ("copy", "transpose", "Transpose", "concatenate", "slice", "dynamic-slice", "pad", "gather")


def classify(op_type: str) -> Category:
    """The category of one TensorFlow op by its type ("_MklNativeFusedConv2D", "FusedBatchNormGradV3", "Relu")."""
    base = PREFIXES.sub("", op_type)
    if base.startswith(MATMUL_TYPES):
        return Category.MATMUL
    if base.startswith(NORMALIZATION_TYPES):
        return Category.NORMALIZATION
    if base.startswith(POOLING_TYPES):
        return Category.POOLING
    if base.startswith(OPTIMIZER_TYPES):
        return Category.OPTIMIZER
    if base in LOSS_TYPES:
        return Category.LOSS
    if base in COPY_TYPES:
        return Category.COPY
    if base in ELEMENTWISE_TYPES:
        return Category.ELEMENTWISE
    return Category.OTHER  # variable reads, shapes, control flow, function calls: no guess


def classify_hlo(name: str) -> Category:
    """The category of one XLA thunk by its HLO instruction's name ("MatMul_1.10", "add_divide_fusion.1", "copy.2")."""
    base = name.rsplit(".", 1)[0] if re.search(r"\.\d+$", name) else name
    if base.startswith(XLA_MATMUL):
        return Category.MATMUL
    if base.startswith(XLA_COPY):
        return Category.COPY
    if "fusion" in base or base.startswith(("wrapped_", "reduce", "add", "multiply", "subtract", "divide")):
        return Category.ELEMENTWISE
    return Category.OTHER


def category_of(name: str, op_type: str, train) -> Category:
    """The name scope first (the optimizer's and the loss's ops, and a normalization layer's, whatever their type:
    Keras 3 computes BatchNormalization from moments, element-wise ops), then the type."""
    scopes = name.split("/")
    if scopes[0].lower() in (train.optimizer.name.lower(), *OPTIMIZER_SCOPES):
        return Category.OPTIMIZER
    if scopes[0] == LOSS_SCOPE or scopes[:2] == ["gradient_tape", LOSS_SCOPE]:
        return Category.LOSS
    layer = layer_of(name, train.model)
    if layer is not None and isinstance(layer, NORMALIZATION_LAYERS):
        return Category.NORMALIZATION
    return classify(op_type)


NORMALIZATION_LAYERS = (
    keras.layers.BatchNormalization, keras.layers.LayerNormalization, keras.layers.GroupNormalization,
    keras.layers.UnitNormalization,
)  # fmt: skip


def layer_of(name: str, model) -> keras.layers.Layer | None:
    """The top-level layer whose name scope an op is under: "model/layer/..." (its forward) or
    "gradient_tape/model/layer/..." (its backward). Keras makes each scope unique with a "_N" suffix, which is taken
    off to find the layer."""
    scopes = name.split("/")
    scopes = scopes[1:] if scopes[0] == "gradient_tape" else scopes
    if len(scopes) < 3 or _unsuffixed(scopes[0]) != model.name:
        return None
    layers = _layers(model)
    return layers.get(_unsuffixed(scopes[1])) or layers.get(scopes[1])


@functools.cache
def _layers(model) -> dict[str, keras.layers.Layer]:
    """The model's top-level layers by name, once per model (an op's layer is looked up for every op)."""
    return {layer.name: layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)}


def _unsuffixed(scope: str) -> str:
    return re.sub(r"_\d+$", "", scope)


# ----------------------------------------------------------------------------------------------------------------------
# Profiling


def profile(train, steps: int, trace_path: str | None, max_trace_bytes: int) -> dict[str, Any]:
    """`steps` steady steps of `train` (a backend.TFStep, warmed up) under tf.profiler: the fields of
    `dlperf.protocol.Profiled`."""
    if "GPU" in train.device:
        raise NotImplementedError("profile: tensorflow's GPU kernels (the device planes) are not mapped yet")
    notes: list[str] = []
    train.sync()
    with tempfile.TemporaryDirectory(prefix="dlperf-tfprof-") as logdir:
        tf.profiler.experimental.start(logdir)
        try:
            for i in range(steps):
                with tf.profiler.experimental.Trace(STEP, step_num=i, _r=1):
                    train.step()
                    train.sync()
        finally:
            tf.profiler.experimental.stop()
        found = sorted(Path(logdir).rglob("*.xplane.pb"))
        if not found:
            raise RuntimeError("tf.profiler wrote no .xplane.pb")
        space = xplane_pb2.XSpace()
        space.ParseFromString(found[0].read_bytes())
        trace = save_trace(found[0], trace_path, max_trace_bytes, notes)
    events = host_events(space)
    windows = [(start, end) for name, start, end, _, _ in events if name == STEP]
    if not windows:
        raise RuntimeError(f"tf.profiler recorded none of the {steps} step ranges")
    step_s = sum(end - start for start, end in windows) / len(windows) / 1e12
    ops = step_ops(events, windows)
    per_step = len(windows)
    seconds: dict[str, float] = defaultdict(float)
    for op in ops:
        category = classify_hlo(op["name"]) if op["xla"] else category_of(op["name"], op["type"], train)
        seconds[category.value] += op["self_ps"] / 1e12 / per_step
    if any(op["xla"] for op in ops):
        notes.append("XLA: the loss and the optimizer are fused into the compiled thunks and not split from them")
    result: dict[str, Any] = {
        "steps": per_step,
        "step_s": step_s,
        "categories": fill_to_step(seconds, step_s, Category.HOST),
        "kernels_per_step": None,
        "ops_per_step": round(len(ops) / per_step),
        "top_ops": top_ops(ops, per_step, train),
        "modules": modules(ops, per_step, train, notes),
        "trace": trace,
        "notes": notes,
    }
    result.update(flops(train, notes))
    notes.append("top_ops: shapes are the inputs of the op's node in the traced graph, before Grappler's rewrites")
    return result


def host_events(space) -> list[tuple[str, int, int, int, dict[str, Any]]]:
    """(name, start ps, end ps, thread, stats) of every event of the host plane, stats by name."""
    out = []
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            base = line.timestamp_ns * 1000
            for event in line.events:
                start = base + event.offset_ps
                stats = {stat_names.get(s.metadata_id, ""): s for s in event.stats}
                name = plane.event_metadata[event.metadata_id].name
                out.append((name, start, start + event.duration_ps, line.id, stats))
    return out


OP_NAME = re.compile(r"^([^\s:]+):([A-Za-z_]\w*)$")  # "scope/name:Type"; "EagerLocalExecute: f" is not an op


def step_ops(events: list, windows: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """The ops that started inside a step range, with their self time (less the ops nested in them on their thread).
    A graph-mode op is "scope/name:Type"; an XLA thunk carries an "hlo_op" stat."""
    ops = []
    for name, start, end, thread, stats in events:
        if not any(lo <= start < hi for lo, hi in windows):
            continue
        match = OP_NAME.match(name)
        if "hlo_op" in stats and not name.startswith("end: "):
            ops.append({"name": name, "type": name, "xla": True, "start": start, "end": end, "thread": thread})
        elif match and not match.group(2).startswith("__inference"):
            ops.append({"name": match.group(1), "type": match.group(2), "xla": False, "start": start, "end": end,
                        "thread": thread})  # fmt: skip
    by_thread: dict[int, list] = defaultdict(list)
    for op in ops:
        by_thread[op["thread"]].append(op)
    for line in by_thread.values():
        line.sort(key=lambda op: (op["start"], -op["end"]))
        stack: list[dict[str, Any]] = []
        for op in line:
            op["self_ps"] = op["end"] - op["start"]
            while stack and stack[-1]["end"] <= op["start"]:
                stack.pop()
            if stack:
                stack[-1]["self_ps"] -= op["end"] - op["start"]
            stack.append(op)
    for op in ops:
        op["self_ps"] = max(0, op["self_ps"])
    return ops


def top_ops(ops: list, steps: int, train) -> list[dict[str, Any]]:
    """The op types with the most self time: seconds and calls per step, and the input shapes of the node of that
    type with the most self time (from the traced graph; "" where the graph has no node of that name)."""
    self_ps: dict[str, float] = defaultdict(float)
    calls: Counter = Counter()
    heaviest: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for op in ops:
        kind = op["name"].rsplit(".", 1)[0] if op["xla"] else op["type"]  # an HLO thunk: its name less the ".N"
        self_ps[kind] += op["self_ps"]
        calls[kind] += 1
        heaviest[kind][op["name"]] += op["self_ps"]
    graph = _graph(train)
    return [
        {"name": kind, "self_s": self_ps[kind] / 1e12 / steps, "calls": calls[kind] / steps,
         "shapes": _shapes(graph, max(heaviest[kind], key=heaviest[kind].get))}
        for kind in ranked(self_ps)
    ]  # fmt: skip


def _graph(train):
    try:
        with tf.device(train.device):
            return train.function.get_concrete_function(train.inputs, train.targets).graph
    except Exception:  # shapes are a detail: a graph that cannot be had leaves them empty
        return None


def _shapes(graph, name: str) -> str:
    if graph is None:
        return ""
    try:
        op = graph.get_operation_by_name(name)
    except (KeyError, ValueError):
        return ""
    return str([t.shape.as_list() if t.shape.rank is not None else None for t in op.inputs])


def modules(ops: list, steps: int, train, notes: list[str]) -> list[dict[str, Any]]:
    """Forward and backward self time of each top-level Keras layer, by its name scope (`layer_of`)."""
    if any(op["xla"] for op in ops):
        notes.append("modules: not split under XLA (a compiled cluster has no layer scopes)")
        return []
    fwd: dict[str, float] = defaultdict(float)
    bwd: dict[str, float] = defaultdict(float)
    for op in ops:
        layer = layer_of(op["name"], train.model)
        if layer is not None:
            (bwd if op["name"].startswith("gradient_tape/") else fwd)[layer.name] += op["self_ps"] / 1e12 / steps
    return [{"name": n, "forward_s": fwd[n], "backward_s": bwd.get(n, 0.0)} for n in _layers(train.model) if n in fwd]


def flops(train, notes: list[str]) -> dict[str, Any]:
    """The step's FLOPs (the backend's graph count: products and convolutions) under `matmul`; no bytes."""
    notes.append("bytes: not counted for tensorflow")
    try:
        counted = train.count_flops()
    except Exception as exc:  # an analysis, never a failure of the profile
        notes.append(f"no FLOPs: counting them failed ({type(exc).__name__}: {exc})".splitlines()[0])
        return {"flops": {}, "bytes": {}}
    return {"flops": {Category.MATMUL.value: float(counted["flops_per_step"])}, "bytes": {}}


def save_trace(xplane: Path, path: str | None, max_bytes: int, notes: list[str]) -> str | None:
    """The profile as Chrome-trace JSON (TensorFlow's own converter), gzipped at `path`; not kept (with a note) when
    above the cap."""
    if path is None:
        return None
    data, ok = _pywrap_profiler_plugin.xspace_to_tools_data([str(xplane)], "trace_viewer@", {})
    if not ok or not data:
        notes.append("no trace kept: tensorflow's trace_viewer converter gave nothing")
        return None
    packed = gzip.compress(data if isinstance(data, bytes) else data.encode())
    if not within_cap(len(packed), max_bytes, notes):
        return None
    return path if written(lambda: Path(path).write_bytes(packed), path, notes) else None
