"""The TensorFlow backend: models, graph and XLA steps, synchronization, threads, FLOPs, the loss check, the probe.

TensorFlow lives in its own environment (`dlperf env install tensorflow`), so every check runs as a script in that
interpreter (`conftest.run_in`) and returns JSON; the tests skip, with the reason, where it is not installed (and fail
when DLPERF_REQUIRE names tensorflow).
"""

from __future__ import annotations

import json
import math
import os
from itertools import pairwise

import pytest

from conftest import cores_kept_busy, framework_python, run_in, run_sections, section
from dlperf.workloads.shi2016 import BUILTIN, SUITE, TINY

TF = "tensorflow"
PRELUDE = """
import json, math, sys
import numpy as np
from dlperf.frameworks.tensorflow import backend as tb
from dlperf.frameworks.tensorflow import losscheck as tl
from dlperf.frameworks.tensorflow import models as tf_models
from dlperf.workloads.shi2016 import BUILTIN
import tensorflow as tf
def out(obj):
    print(json.dumps(obj))
"""


def tf_run(body: str, *args: str, threads: int = 1, timeout: float = 300) -> dict:
    return run_in(TF, PRELUDE + body, *args, threads=threads, timeout=timeout)


@pytest.fixture(scope="module", autouse=True)
def tensorflow_present():
    framework_python(TF)  # skips the module (or fails under DLPERF_REQUIRE) without TensorFlow


# The checks that need no process of their own, in one TensorFlow child (its import takes seconds): `run_sections`.
SHARED = {
    "unsupported": """
from dlperf.workloads import BUILTIN as ALL
raised = {}
asked = [(m, BUILTIN["tiny-fcn-r"], m) for m in UNSUPPORTED_MODES] + [("resnet-18", ALL["resnet-18"], "fp32")]
for key, workload, mode in asked:
    try:
        tb.build(workload, "cpu", mode); raised[key] = None
    except NotImplementedError as exc:
        raised[key] = str(exc)
out(raised)
""",
    "flops": """
train = tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32")
graph = train.function.get_concrete_function(train.inputs, train.targets).graph
opts = tf.compat.v1.profiler.ProfileOptionBuilder(
    tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()).with_empty_output().build()
node, profiler = tf.compat.v1.profiler.profile(graph=graph, cmd="op", options=opts), {}
while node.children:  # the op view is a chain, one op type per level
    node = node.children[0]
    profiler[node.name] = node.float_ops
out({"ours": train.count_flops(), "profiler_matmul": profiler["MatMul"]})
""",
    "matmul": """
import time
run = tb.matmul(256)
start = time.perf_counter(); result = run(); out({"result": result, "s": time.perf_counter() - start})
""",
    "judge": """
graph = [4.0, 3.0, 2.0, 1.5]
xla = [4.0, 3.0, 2.05, 1.49]  # 1.25% apart at the third step
out({"floor": tl.judge(graph, xla, 1e-5, None),
     "chaotic": tl.judge(graph, xla, 2e-2, (1e-2, 1e-2)),
     "flat": tl.judge(graph, [4.0, 4.0, 4.0, 4.0], 1e-5, (1e-2, 1.0)),
     "nan": tl.judge(graph, [4.0, float("nan"), 2.0, 1.5], 1e-5, None),
     "nan_reference": tl.judge([4.0, float("inf"), 2.0, 1.5], xla, float("nan"), None)})
""",
    "bf16": """
import dataclasses, keras
from dlperf.frameworks import precision
w = BUILTIN["tiny-fcn-r"]
train = tb.build(w, "cpu", "bf16")
losses = [float(train.step()) for _ in range(3)]
small = dataclasses.replace(w, batch=4)
tripled = dataclasses.replace(small, optimizer=dataclasses.replace(small.optimizer, lr=3 * small.optimizer.lr))
broken = precision.check(tb.seeded(small, "cpu", "fp32"), tb.seeded(tripled, "cpu", "bf16"), read=tb._read,
                         write=tb._write)
out({"losses": losses, "variables": sorted({v.dtype for v in train.model.trainable_variables}),
     "computes": sorted({layer.compute_dtype for layer in train.model.layers}), "flops": train.count_flops(),
     "policy_after": keras.config.dtype_policy().name, "settings": train.settings(),
     "check": tb.loss_check(w, "cpu", "bf16"), "broken": broken})
""",
    "loss_check": """
try:
    tb.loss_check(BUILTIN["tiny-fcn-r"], "cpu", "fp16+compile"); out({"raised": None})
except NotImplementedError as exc:
    out({"raised": str(exc)})
""",
}


@pytest.fixture(scope="module")
def shared() -> dict:
    modes = f"UNSUPPORTED_MODES = {UNSUPPORTED_MODES!r}\n"
    return run_sections(TF, PRELUDE + modes, SHARED)


# ----------------------------------------------------------------------------------------------------------------------
# Models


@pytest.mark.slow
def test_parameter_counts_equal_the_reference_but_the_lstm_bias():
    got = tf_run("""
out({w.name: [sum(math.prod(v.shape) for v in tf_models.build_model(w).trainable_variables),
              tf_models.param_deviation(w)] for w in BUILTIN.values()})
""")
    for w in (*SUITE, *TINY):
        params, deviation = got[w.name]
        assert params == w.params + deviation, w.name
        lstm = w.config if w.arch == "lstm-lm" else None
        assert deviation == (-4 * lstm["hidden"] * lstm["layers"] if lstm else 0), w.name
    assert got["alexnet-s"][0] == 62_378_344  # TensorFlow's own SAME-padded AlexNet-S would have 76,009,832
    assert got["lstm"][0] == 6_180_624


@pytest.mark.slow
def test_padding_follows_pytorch_and_inputs_are_nhwc():
    got = tf_run("""
shapes = {}
for name in ("alexnet-s", "resnet-50", "resnet-56"):
    model = tf_models.build_model(BUILTIN[name])
    named = lambda *prefixes: [l for l in model.layers if l.name.startswith(prefixes)]
    shapes[name] = {"input": list(model.input_shape[1:]),
                    "pools": [list(l.output.shape[1:]) for l in named("max_", "average_")],
                    "convs": [list(l.output.shape[1:3]) for l in named("conv2d")][:4],
                    "pads": [l.padding for l in named("zero_padding")][:3]}
train = tb.build(BUILTIN["tiny-alexnet-r"], "cpu", "fp32")
shapes["batch"] = [list(train.inputs.shape), list(train.targets.shape), train.targets.dtype.name]
out(shapes)
""")
    alex = got["alexnet-s"]
    assert alex["input"] == [224, 224, 3]
    assert alex["convs"][0] == [55, 55] and [p[:2] for p in alex["pools"]] == [[27, 27], [13, 13], [6, 6]]
    assert alex["pads"][0] == [[2, 2], [2, 2]]  # symmetric, as PyTorch's padding=2 (SAME would pad 1 and 2)
    resnet = got["resnet-50"]
    assert resnet["convs"][0] == [112, 112] and resnet["pools"][0] == [56, 56, 64]
    assert resnet["pads"][:2] == [[[3, 3], [3, 3]], [[1, 1], [1, 1]]]
    assert got["resnet-56"]["convs"][0] == [32, 32]
    assert got["batch"] == [[16, 32, 32, 3], [16], "int32"]


@pytest.mark.slow  # 7-20 s: a TensorFlow process of its own
def test_weights_start_as_pytorch_draws_them():
    got = tf_run("""
def extent(model, name):
    return float(np.max(np.abs(next(v for v in model.trainable_variables if v.path.endswith(name)).numpy())))
fcn = tf_models.build_model(BUILTIN["tiny-fcn-r"])
lstm = tf_models.build_model(BUILTIN["tiny-lstm"])
embedding = lstm.trainable_variables[0].numpy()
out({"kernel": extent(fcn, "dense/kernel"), "bias": extent(fcn, "dense/bias"),
     "lstm": [extent(lstm, "lstm_cell/" + n) for n in ("kernel", "recurrent_kernel", "bias")],
     "embedding_std": float(embedding.std())})
""")
    bound = 1 / math.sqrt(784)  # the first Linear's fan-in
    # the largest of n uniform draws on (-bound, bound) stays under f * bound with probability f**n: the kernel's
    # 25,088 draws reach 0.95 of it always, the bias's 32 reach 0.6 but for 1 in 10^7 (0.9 failed 1 run in 30)
    assert 0.95 * bound < got["kernel"] <= bound and 0.6 * bound < got["bias"] <= bound
    assert all(0.8 * 0.25 < x <= 0.25 for x in got["lstm"])  # 1/sqrt(hidden 16), no forget-gate bias of 1
    assert got["embedding_std"] == pytest.approx(1.0, abs=0.1)


@pytest.mark.slow
def test_batchnorm_trains_with_pytorchs_momentum_and_epsilon_and_resnet50_has_no_conv_bias():
    got = tf_run("""
train = tb.build(BUILTIN["tiny-resnet-50"], "cpu", "fp32")
bns = [l for l in train.model.layers if "batch_normalization" in l.name]
convs = [l for l in train.model.layers if l.name.startswith("conv2d")]
before = bns[0].moving_mean.numpy().copy()
train.step(); train.sync()
out({"momentum": sorted({l.momentum for l in bns}), "epsilon": sorted({l.epsilon for l in bns}),
     "conv_bias": any(l.use_bias for l in convs),
     "moving_mean_moved": bool(np.any(bns[0].moving_mean.numpy() != before))})
""")
    assert got == {"momentum": [0.9], "epsilon": [1e-5], "conv_bias": False, "moving_mean_moved": True}


# ----------------------------------------------------------------------------------------------------------------------
# The step, the optimizer and synchronization


@pytest.mark.slow
def test_step_then_sync_leaves_the_weights_updated_by_pytorchs_sgd_formula():
    """Two steps of SGD with momentum: after step()+sync() every weight holds p - lr * b, b = momentum * b + g (the
    PyTorch formula), with g computed here, eagerly, from the weights before each step."""
    got = tf_run("""
train = tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32")
lr, mu = 0.05, 0.9
variables = train.model.trainable_variables
def grads():
    with tf.GradientTape() as tape:
        loss = tb.cross_entropy(train.model(train.inputs, training=True), train.targets)
    return [g.numpy() for g in tape.gradient(loss, variables)]
errors, buffers = [], None
for _ in range(2):
    w0, g = [v.numpy() for v in variables], grads()
    buffers = g if buffers is None else [mu * b + gi for b, gi in zip(buffers, g)]
    train.step(); train.sync()
    errors += [float(np.max(np.abs(v.numpy() - (w - lr * b)))) for v, w, b in zip(variables, w0, buffers)]
out({"max_error": max(errors), "traces": train.function.experimental_get_tracing_count()})
""")
    assert got["max_error"] < 1e-6 and got["traces"] == 1


@pytest.mark.slow
def test_same_seed_same_weights_and_the_batch_never_depends_on_it():
    got = tf_run("""
a, b, c = (tb.build(BUILTIN["tiny-resnet-56"], "cpu", "fp32", seed=s) for s in (0, 0, 1))
same = lambda x, y: all(np.array_equal(p.numpy(), q.numpy())
                        for p, q in zip(x.model.trainable_variables, y.model.trainable_variables))
out({"same_seed": same(a, b), "other_seed": same(a, c),
     "batch": all(np.array_equal(x.numpy(), y.numpy()) for x, y in [(a.inputs, c.inputs), (a.targets, c.targets)])})
""")
    assert got == {"same_seed": True, "other_seed": False, "batch": True}


@pytest.mark.slow  # 8 s: a TensorFlow process of its own
def test_lstm_steps_with_clipping_and_says_which_implementation_runs():
    got = tf_run("""
train = tb.build(BUILTIN["tiny-lstm"], "cpu", "fp32")
losses = [float(train.step()) for _ in range(3)]
out({"shapes": [list(train.inputs.shape), list(train.targets.shape)], "losses": losses,
     "clip": train.clip_norm, "settings": train.settings()})
""")
    assert got["shapes"] == [[4, 8], [4, 8]] and all(math.isfinite(x) for x in got["losses"])
    assert got["clip"] == 5.0
    assert "while_loop" in got["settings"]["lstm_implementation"]
    assert got["settings"]["param_deviation"] == -4 * 16 * 2


@pytest.mark.slow
def test_embedding_gradient_is_made_dense_so_the_clipped_norm_is_the_true_norm():
    """A token that occurs twice gets two gradient rows in tf.gather's IndexedSlices: the norm of those rows is not
    the norm of the gradient. The step clips as PyTorch does, on the dense gradient."""
    got = tf_run("""
train = tb.build(BUILTIN["tiny-lstm"], "cpu", "fp32")
variables = train.model.trainable_variables
with tf.GradientTape() as tape:
    loss = tb.cross_entropy(train.model(train.inputs, training=True), train.targets)
grads = tape.gradient(loss, variables)
dense = [tf.convert_to_tensor(g) for g in grads]
norm = float(tf.linalg.global_norm(dense))
scale = min(1.0, 0.5 * norm / norm)  # clip at half the true norm: every gradient scaled by exactly 0.5
train.clip_norm = 0.5 * norm
step = tf.function(tb.train_step_fn(train.model, train.optimizer, train.clip_norm), jit_compile=False)
w0 = [v.numpy() for v in variables]
step(train.inputs, train.targets).numpy()
got = [float(np.max(np.abs((v.numpy() - w) - (-0.1 * 0.5 * g.numpy())))) for v, w, g in zip(variables, w0, dense)]
out({"max_error": max(got), "sparse": isinstance(grads[0], tf.IndexedSlices),
     "repeated_tokens": int(tf.size(train.inputs) - tf.size(tf.unique(tf.reshape(train.inputs, [-1]))[0]))})
""")
    assert got["sparse"] and got["repeated_tokens"] > 0  # the case that matters: duplicate ids in the batch
    assert got["max_error"] < 1e-6


# ----------------------------------------------------------------------------------------------------------------------
# Modes


@pytest.mark.slow
def test_graph_mode_and_xla_set_jit_compile_explicitly_and_trace_once():
    got = tf_run("""
res = {}
for mode in ("fp32", "compile"):
    train = tb.build(BUILTIN["tiny-alexnet-r"], "cpu", mode)
    losses = [float(train.step()) for _ in range(3)]
    res[mode] = {"jit": train.function._jit_compile, "compiles": train.compiles, "stats": train.compile_stats(),
                 "losses": losses, "settings_jit": train.settings()["jit_compile"]}
out(res)
""")
    for mode, xla in (("fp32", False), ("compile", True)):
        assert got[mode]["jit"] is xla and got[mode]["settings_jit"] is xla and got[mode]["compiles"] is True
        assert got[mode]["stats"] == {"graphs": 1, "frames_compiled": 1, "jit_compile": xla}
    assert got["fp32"]["losses"] == pytest.approx(got["compile"]["losses"], rel=1e-4)


UNSUPPORTED_MODES = ("fp16", "tf32", "channels_last", "foreach", "fused", "checkpoint", "cuda_graphs",
                     "fp16+compile", "bf16+checkpoint")  # fmt: skip


def test_other_modes_and_published_networks_are_unsupported_with_the_reason(shared):
    """TensorFlow asks for every refused mode and a network defined for PyTorch only."""
    got = section(shared, "unsupported")
    for mode in UNSUPPORTED_MODES:
        assert got[mode] and "tensorflow" in got[mode], (mode, got[mode])
    assert got["resnet-18"] == "resnet-18 is defined for PyTorch only"  # not a bottleneck ResNet built by mistake


# ----------------------------------------------------------------------------------------------------------------------
# FLOPs


def fcn_flops(widths: list[int], batch: int) -> int:
    """2 x MACs: forward, the weight gradients (as much again), the input gradients of every layer but the first."""
    forward = sum(2 * batch * a * b for a, b in pairwise(widths))
    return 2 * forward + sum(2 * batch * a * b for a, b in pairwise(widths[1:]))


def test_flops_of_tiny_fcn_r_are_the_hand_count_and_tensorflows_profiler_agrees(shared):
    got = section(shared, "flops")
    w = BUILTIN["tiny-fcn-r"]
    expected = fcn_flops(w.config["widths"], w.batch)
    assert expected == 1_768_448
    assert got["ours"]["flops_per_step"] == got["profiler_matmul"] == expected
    assert got["ours"]["flops_by_dtype"] == {"fp32": expected}


@pytest.mark.slow
def test_conv_flops_skip_the_first_convolutions_input_gradient_and_lstm_counts_every_time_step():
    got = tf_run("""
out({name: tb.build(BUILTIN[name], "cpu", "fp32").count_flops()["flops_by_op"]
     for name in ("tiny-alexnet-r", "tiny-resnet-50", "tiny-lstm")})
""")
    alex = got["tiny-alexnet-r"]
    first = 2 * 16 * 32 * 32 * 8 * 5 * 5 * 3  # conv1 of tiny-alexnet-r: nothing needs its input's gradient
    assert alex["Conv2DBackpropFilter"] == alex["Conv2D"] and alex["Conv2DBackpropInput"] == alex["Conv2D"] - first
    resnet = got["tiny-resnet-50"]
    stem = 2 * 4 * 16 * 16 * 4 * 7 * 7 * 3  # the strided, padded 7x7 stem, exactly (no input/stride^2 estimate)
    assert resnet["Conv2DBackpropInput"] == resnet["Conv2D"] - stem
    b, t, e, h, v = 4, 8, 16, 16, 100
    forward = 2 * (2 * b * t * e * 4 * h + 2 * b * t * h * 4 * h) + 2 * b * t * h * v  # x@W, h@U per layer; head
    inputs = 2 * b * t * h * v + 2 * (2 * b * t * e * 4 * h + 2 * b * (t - 1) * h * 4 * h)  # h0 = 0 needs none
    assert got["tiny-lstm"] == {"MatMul": 2 * forward + inputs}


# ----------------------------------------------------------------------------------------------------------------------
# Memory, threads, probe


@pytest.mark.slow
def test_memory_of_step_reports_the_resident_set_peak():
    got = tf_run("""
train = tb.build(BUILTIN["tiny-fcn-s"], "cpu", "fp32")
train.step(); train.sync()
out(train.memory_of_step())
""")
    assert got["process_rss_peak_bytes"] > 0


@pytest.mark.serial  # alone on the machine, after the parallel tests: a quiet machine's figures are cleaner
@pytest.mark.parametrize("threads", [1, 2])
def test_thread_probe_keeps_about_n_cores_busy(threads):
    from dlperf.measure import system

    cores = system.usable_cores()["cores"]
    if threads > cores:
        pytest.skip(f"{threads} threads need {threads} cores")
    got = cores_kept_busy(TF, threads)  # whatever other processes take of the machine
    assert got["settings"]["tf_intra_op_threads"] == threads and got["settings"]["tf_inter_op_threads"] == 1
    assert threads - 0.5 < got["cores"], got
    # more threads than asked show only where cores are left for them; with every core in the pool, TensorFlow's own
    # other threads (the inter-op thread, the caller waiting on it) wait for the pool's cores and count as runnable
    # too (2.31 at 2 threads on 2 cores, fresh-clone CI)
    if threads < cores:
        assert got["cores"] < threads + 0.3, got


HELD = """
import os
tb.configure_threads(1)
train = tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32")
for _ in range(3):
    train.step()
train.sync()
held = sorted({tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")})
out({"held": held, "threads": len(os.listdir("/proc/self/task")), "settings": train.settings()})
"""


@pytest.mark.timeout(300)
def test_a_one_thread_cell_is_held_to_one_cpu():
    """The Python thread, the inter-op thread and the pool hand each step over to each other: free to run on two CPUs,
    a 1-thread cell took 1.4-1.5x as long on tiny networks as held on one, so every thread is held to one CPU."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("this machine lets the tests use one CPU: nothing to hold the cell to")
    got = tf_run(HELD)
    assert len(got["held"]) == 1 and len(got["held"][0]) == 1, got
    assert got["threads"] > 1 and got["settings"]["cpu_affinity"] == got["held"][0], got


STEP_THREADS = """
from dlperf.measure import system
tb.configure_threads(int(sys.argv[1]))
train = tb.build(BUILTIN["fcn-r"], "cpu", "fp32")
train.step(); train.sync()
before = system.thread_times()
for _ in range(2):
    train.step(); train.sync()
after = system.thread_times()
work = sorted((after[t][0] - before.get(t, (0.0, None))[0] for t in after), reverse=True)
out({"busy": sum(w > 0.2 * work[0] for w in work), "cpu_s": [round(w, 3) for w in work[:6]],
     "settings": tb.thread_settings()})
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("threads", [1, 2, "above the CPUs"])
def test_a_training_step_runs_on_that_many_threads(threads):
    """The threads that did the work of two fcn-r steps, from their own CPU times (which other processes do not
    change): at one thread one, TensorFlow's inter-op thread and oneDNN's kernels included (oneDNN, on by default on
    x86, runs on the intra-op pool, no OpenMP pool of its own); above the CPUs the process may use, as many as asked,
    so such a cell is oversubscribed as it says."""
    threads = len(os.sched_getaffinity(0)) + 2 if threads == "above the CPUs" else threads
    got = tf_run(STEP_THREADS, str(threads), threads=threads)
    assert got["settings"]["tf_intra_op_threads"] == threads, got
    assert got["busy"] == threads, got


def test_probe_env():
    from dlperf.answers import EnvRequest
    from dlperf.runner import probe

    got = probe.ask(TF, EnvRequest(), python=framework_python(TF))
    assert got.framework == TF and got.version.count(".") >= 2
    assert {"keras", "xla", "onednn"} <= set(got.build) and got.build["xla"] is True
    assert got.devices[0] == {"name": "cpu"}
    # TensorFlow's own bf16 product timed against fp32's (`common.speed`): the plan's warning and a profile read it
    assert list(got.precision_speed) == ["cpu"] and list(got.precision_speed["cpu"]) == ["bf16"]
    assert got.precision_speed["cpu"]["bf16"] > 0
    json.dumps(got.to_json())


def test_matmul_returns_a_finished_product(shared):
    got = section(shared, "matmul")
    assert got["result"] is None and got["s"] > 0


# ----------------------------------------------------------------------------------------------------------------------
# The loss check


@pytest.mark.slow
def test_xla_trains_like_graph_mode():
    got = tf_run("""
out({name: tb.loss_check(BUILTIN[name], "cpu", "compile") for name in ("tiny-fcn-r", "tiny-resnet-56")})
""")
    for name, check in got.items():
        assert check["ok"] is True and check["reason"] is None, (name, check)
        assert len(check["graph_losses"]) == len(check["xla_losses"]) == 8 and check["batch"] == 4
        assert check["graph_losses"][-1] < check["graph_losses"][0]
        assert check["first_update_difference"] < 1e-4 and check["loss_difference"] < 1e-4


@pytest.mark.slow
def test_an_xla_step_with_a_learning_rate_ten_percent_off_fails():
    got = tf_run("""
import dataclasses
w = dataclasses.replace(BUILTIN["tiny-fcn-r"], batch=4)
def broken():
    train = tb.build(w, "cpu", "compile")
    train.optimizer.learning_rate.assign(0.05 * 1.1)
    return train
out(tl.check(lambda: tb.build(w, "cpu", "fp32"), broken, steps=8))
""")
    assert got["ok"] is False and "first update" in got["reason"]
    assert got["first_update_difference"] == pytest.approx(0.1, rel=0.05)


def test_judge_uses_graph_modes_own_rounding_spread_for_a_chaotic_network(shared):
    got = section(shared, "judge")
    assert got["floor"][0] is False and "step 3" in got["floor"][1]
    assert got["chaotic"] == [True, None]
    assert got["flat"][0] is False and "fell by 0" in got["flat"][1]
    assert got["nan"][0] is False and "not finite" in got["nan"][1]
    # issue 30: a reference that diverged says nothing of XLA: not checked, never failed
    assert got["nan_reference"] == [None, "not checked: graph mode's loss is inf at step 2"]


def test_bf16_is_kerass_mixed_precision_and_passes_the_loss_check(shared):
    """Keras's mixed_bfloat16: layers compute in bf16 from fp32 variables; the global policy is put back after the
    build; the loss check passes it against fp32 graph mode and fails the same step with a learning rate 3x."""
    got = section(shared, "bf16")
    assert all(math.isfinite(loss) for loss in got["losses"])
    assert got["variables"] == ["float32"] and got["computes"] == ["bfloat16"]
    assert got["flops"]["flops_by_dtype"] == {"bf16": got["flops"]["flops_per_step"]}
    assert got["policy_after"] == "float32" and got["settings"]["dtype_policy"] == "mixed_bfloat16"
    check = got["check"]
    assert check["ok"] is True and check["reason"] is None and check["batch"] == 4
    assert check["cosine"] >= check["min_cosine"] and len(check["spread_losses"]) == 2
    assert got["broken"]["ok"] is False and "the size of fp32's" in got["broken"]["reason"], got["broken"]["reason"]


@pytest.mark.slow
def test_every_tiny_network_passes_the_bf16_loss_check_in_graph_mode_and_under_xla():
    script = """
out({f"{name} {mode}": tb.loss_check(BUILTIN[name], "cpu", mode) for name in sys.argv[1:] for mode in MODES})
"""
    got = tf_run(script.replace("MODES", '("bf16", "bf16+compile")'), *(w.name for w in TINY), timeout=600)
    for key, check in got.items():
        assert check["ok"] is True, (key, check["reason"])


def test_loss_check_of_an_unsupported_mode_raises_before_training(shared):
    got = section(shared, "loss_check")
    assert "tensorflow" in got["raised"]


# ----------------------------------------------------------------------------------------------------------------------
# End to end


@pytest.mark.slow
def test_a_sweep_measures_graph_mode_and_xla(tmp_path):
    from conftest import FAST, dlperf

    db = tmp_path / "d.db"
    run = dlperf(
        "run", "--workloads", "tiny-fcn-r,tiny-lstm", "--frameworks", TF, "--modes", "fp32,compile",
        "--threads", "1", *FAST, db=db,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    records = [json.loads(line) for line in dlperf("export", "--format", "jsonl", db=db).stdout.splitlines()]
    assert {(r["workload"], r["mode"]) for r in records if r["status"] == "ok"} == {
        (w, m) for w in ("tiny-fcn-r", "tiny-lstm") for m in ("fp32", "compile")
    }
    for r in records:
        assert r["flops_per_step"] > 0 and r["params"] == BUILTIN[r["workload"]].params + (
            -4 * 16 * 2 if r["workload"] == "tiny-lstm" else 0
        )
        assert (r.get("loss_ok") is True) == (r["mode"] == "compile"), r
