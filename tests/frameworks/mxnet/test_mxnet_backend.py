"""The MXNet backend: every workload's model, training, the asynchronous engine, modes, the probe and threads.

MXNet lives in its own environment (`dlperf env install mxnet`): each test runs a script there (`run_in`) and checks
the JSON it prints; the test process never imports mxnet.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from conftest import cores_kept_busy, framework_python, run_in, run_sections, section
from dlperf.answers import EnvRequest, SelftestRequest
from dlperf.runner import probe

PRELUDE = """
import json, math, sys
import numpy as np
from dataclasses import replace
from dlperf.frameworks.mxnet import backend as mb
from dlperf.workloads import BUILTIN
mb.configure_threads(int(sys.argv[1]))  # as a worker does, with the thread variables already set
"""


def mxnet(script: str, threads: int = 1) -> dict:
    return run_in("mxnet", PRELUDE + script, str(threads), threads=threads, timeout=200)


# The checks that need no process of their own, in one MXNet child (its import takes seconds): `run_sections`.
SHARED = {
    "tiny": """
result = {}
for name, w in BUILTIN.items():
    if not name.startswith("tiny-"):
        continue
    train = mb.build(w, "cpu", "fp32")
    losses = []
    for _ in range(3):
        losses.append(float(train.step()))
        train.sync()
    result[name] = {"params": train.params, "expected": w.params + mb.param_deviation(w), "losses": losses,
                    "classes": w.outputs, "stats": train.compile_stats(), "settings": train.settings()}
print(json.dumps(result))
""",
    "full_size": """
from dlperf.frameworks.mxnet.models import build_model
counts = {}
for name, w in BUILTIN.items():
    if name.startswith("tiny-") or w.extra.get("torch_only"):
        continue
    shapes = [p.shape for p in build_model(w).collect_params().values() if p.grad_req != "null"]
    assert all(0 not in shape for shape in shapes), (name, shapes)  # 0 would be a size MXNet infers later
    counts[name] = [int(sum(np.prod(s) for s in shapes)), w.params + mb.param_deviation(w)]
print(json.dumps(counts))
""",
    "losses": """
train = mb.build(BUILTIN["tiny-resnet-56"], "cpu", "fp32")
print(json.dumps([float(train.step()) for _ in range(20)]))
""",
    "hybridized": """
diffs = {}
for name in ("tiny-resnet-56", "tiny-resnet-50", "tiny-lstm", "tiny-alexnet-s"):
    hybrid, eager = mb.build(BUILTIN[name], "cpu", "fp32"), mb.build(BUILTIN[name], "cpu", "fp32")
    eager.objective.hybridize(active=False)
    losses = [float(hybrid.step()), float(eager.step())]
    a, b = (np.concatenate([g.asnumpy().ravel() for g in t.grads]) for t in (hybrid, eager))
    # relative to the largest gradient: a convolution's bias before BatchNorm has a true gradient of 0, only noise
    diffs[name] = {"losses": losses, "grad_rel": float(abs(a - b).max() / abs(b).max()),
                   "traces": [hybrid.objective.traces, eager.objective.traces]}
print(json.dumps(diffs))
""",
    "update": """
w = BUILTIN["tiny-fcn-r"]
train = mb.build(w, "cpu", "fp32")
lr, m = w.optimizer.lr, w.optimizer.momentum
weights = [p.data().asnumpy() for p in train.trainable]
bufs = [0.0] * len(weights)
errors = []
for _ in range(3):
    train.step()
    train.sync()
    for i, (p, g) in enumerate(zip(train.trainable, train.grads)):
        bufs[i] = m * bufs[i] + g.asnumpy()
        weights[i] = weights[i] - lr * bufs[i]
        errors.append(float(abs(p.data().asnumpy() - weights[i]).max()))
print(json.dumps({"momentum": m, "max_error": max(errors)}))
""",
    "clip": """
w = BUILTIN["tiny-lstm"]
w = replace(w, optimizer=replace(w.optimizer, clip_grad_norm=1e-3))
train = mb.build(w, "cpu", "fp32")
before = [p.data().asnumpy() for p in train.trainable]
train.step()
train.sync()
grads = [g.asnumpy() for g in train.grads]
norm = float(np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads)))
error = max(float(abs(p.data().asnumpy() - (b - w.optimizer.lr * g)).max())
            for p, b, g in zip(train.trainable, before, grads))
print(json.dumps({"norm": norm, "update_error": error}))
""",
    "unsupported": """
from dlperf.errors import UsageError
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload
reasons = {}
def attempt(key, call):
    try:
        call()
        reasons[key] = None
    except (NotImplementedError, UsageError) as exc:
        reasons[key] = f"{type(exc).__name__}: {exc}"
tiny = BUILTIN["tiny-fcn-r"]
for mode in ("compile", "bf16", "fp16", "tf32", "channels_last", "foreach", "fused", "checkpoint", "cuda_graphs",
             "bf16+compile"):
    attempt(mode, lambda: mb.build(tiny, "cpu", mode))
user = Workload(name="mine", arch="user", config={}, input=InputSpec("user", (3,)), outputs=2, batch=1,
                optimizer=OptimizerSpec(), source="x.py:make")
attempt("user", lambda: mb.build(user, "cpu", "fp32"))
attempt("probe user", lambda: mb.probe({"what": "workload", "source": "x.py:make"}))
attempt("adam", lambda: mb.build(replace(tiny, optimizer=OptimizerSpec("adam")), "cpu", "fp32"))
attempt("cuda", lambda: mb.build(tiny, "cuda:0", "fp32"))
attempt("mps", lambda: mb.build(tiny, "mps", "fp32"))
attempt("published", lambda: mb.build(BUILTIN["resnet-18"], "cpu", "fp32"))
attempt("fp32 loss check", lambda: mb.loss_check(tiny, "cpu", "fp32"))
attempt("bf16 loss check", lambda: mb.loss_check(tiny, "cpu", "bf16"))
print(json.dumps(reasons))
""",
}


@pytest.fixture(scope="module")
def shared() -> dict:
    return run_sections("mxnet", PRELUDE, SHARED, "1")


@pytest.mark.timeout(240)
def test_every_tiny_workload_trains_with_the_reference_parameter_count(shared):
    out = section(shared, "tiny")
    assert len(out) == 7
    for name, r in out.items():
        assert r["params"] == r["expected"], name
        assert all(map(math.isfinite, r["losses"])), (name, r["losses"])
        assert abs(r["losses"][0] - math.log(r["classes"])) < 0.25 * math.log(r["classes"]), (name, r["losses"])
        assert r["stats"] == {"graphs": 1, "frames_compiled": 1}, name  # built once, never again
        assert r["settings"]["execution"] == "gluon hybridized (static_alloc, static_shape)"
    assert out["tiny-resnet-56"]["settings"]["layout"] == "NCHW" and "layout" not in out["tiny-lstm"]["settings"]


@pytest.mark.timeout(240)
def test_full_size_parameter_counts_match_the_reference(shared):
    """From the parameters' shapes, known before any memory is allocated (every layer is given its input size)."""
    out = section(shared, "full_size")
    assert len(out) == 7
    for name, (got, expected) in out.items():
        assert got == expected, name
    assert out["lstm"][0] == 6_182_672  # two biases per LSTM layer, as in PyTorch


@pytest.mark.timeout(240)
def test_losses_go_down(shared):
    out = section(shared, "losses")
    assert sum(out[-5:]) < 0.8 * sum(out[:5]), out


@pytest.mark.timeout(240)
def test_hybridized_step_computes_what_the_imperative_one_does(shared):
    """The cached graph is the model: the first loss and gradients equal those of the same block run op by op."""
    out = section(shared, "hybridized")
    for name, d in out.items():
        assert d["losses"][0] == pytest.approx(d["losses"][1], rel=1e-5), name
        assert d["grad_rel"] < 1e-4, name
        assert d["traces"] == [1, 0], name


@pytest.mark.timeout(240)
def test_update_is_torch_sgd_with_momentum(shared):
    """MXNet keeps state = m * state + lr * grad; PyTorch buf = m * buf + grad, w -= lr * buf. With a constant learning
    rate they give the same weights: checked against PyTorch's rule over three steps, with the step's own gradients."""
    out = section(shared, "update")
    assert out["momentum"] == 0.9
    assert out["max_error"] < 1e-6, out


@pytest.mark.timeout(240)
def test_global_norm_clip_then_plain_update(shared):
    """With a tiny clip norm the gradients the Trainer applies have exactly that global norm: nothing rescaled them
    after the clip (trainer.step(1), no kvstore)."""
    out = section(shared, "clip")
    assert out["norm"] == pytest.approx(1e-3, rel=1e-4)
    assert out["update_error"] < 1e-7


@pytest.mark.serial
@pytest.mark.timeout(240)
def test_step_only_queues_and_sync_waits_for_the_update():
    """MXNet's engine is asynchronous: step() returns long before the work is done; after sync() the weights hold the
    update and nothing is left to wait for.

    A ratio of two times from the same run: it runs alone (serial), and the step is large (about 16 GFLOP, a fifth of a
    second on one thread) so that queueing it, a few milliseconds of Python, stays far below the work even on a busy
    machine (a 1024-wide step of 16 ms once measured 27% queued under load)."""
    out = mxnet("""
import statistics, time
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload
w = Workload(name="mlp", arch="fcn", config={"widths": [2048, 2048, 2048, 10]}, input=InputSpec("vector", (2048,)),
             outputs=10, batch=256, optimizer=OptimizerSpec("sgd", lr=0.01))
train = mb.build(w, "cpu", "fp32")
train.step()
train.sync()
queued, done, after, errors = [], [], [], []
for _ in range(7):
    before = [p.data().asnumpy() for p in train.trainable]
    start = time.perf_counter()
    train.step()
    queued.append(time.perf_counter() - start)
    train.sync()
    done.append(time.perf_counter() - start)
    start = time.perf_counter()
    train.sync()  # a second sync finds nothing queued
    after.append(time.perf_counter() - start)
    errors += [float(abs(p.data().asnumpy() - (b - 0.01 * g.asnumpy())).max())
               for p, b, g in zip(train.trainable, before, train.grads)]
print(json.dumps({k: statistics.median(v) for k, v in (("queued", queued), ("done", done), ("after", after))}
                 | {"error": max(errors)}))
""")
    assert out["queued"] < 0.25 * out["done"], out
    assert out["after"] < 0.05 * out["done"], out
    assert out["error"] < 1e-6, out


@pytest.mark.timeout(240)
def test_other_modes_workloads_and_devices_are_unsupported_with_a_reason(shared):
    out = section(shared, "unsupported")
    assert "already hybridized" in out.pop("compile")
    assert out.pop("fp32 loss check") is None
    assert out.pop("probe user").startswith("UsageError") and "PyTorch" in out["user"]
    assert out.pop("published") == "NotImplementedError: resnet-18 is defined for PyTorch only"
    for key, reason in out.items():
        assert reason is not None and reason.startswith("NotImplementedError"), key
        assert "mxnet" in reason.lower(), (key, reason)
    assert out["bf16+compile"].startswith("NotImplementedError: bf16")


@pytest.mark.timeout(240)
def test_probe_env_and_selftest():
    python = framework_python("mxnet")
    env = probe.ask("mxnet", EnvRequest(), python=python)
    assert env.framework == "mxnet" and env.version == "1.9.1"
    assert env.devices[0] == {"name": "cpu"}
    assert "MKLDNN" in env.build["features"] and tuple(map(int, env.build["numpy"].split(".")[:2])) < (1, 24)
    json.dumps(env.to_json())
    selftest = probe.ask("mxnet", SelftestRequest(), python=python)
    assert selftest.params == 26_874 and len(selftest.losses) == 2


@pytest.mark.timeout(240)
@pytest.mark.parametrize("threads", [1, pytest.param(2, marks=pytest.mark.slow)])  # 5 s each
def test_a_training_step_runs_on_that_many_threads(threads):
    """Which of the process's threads did the work of two steps, from their own CPU times: unlike the CPU/wall ratio
    below, this does not depend on how busy the rest of the machine is."""
    out = mxnet(
        """
import os
def cpu_ticks():
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks[tid] = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks
train = mb.build(BUILTIN["alexnet-r"], "cpu", "fp32")
train.step()
train.sync()
before = cpu_ticks()
for _ in range(2):
    train.step()
    train.sync()
after = cpu_ticks()
work = sorted((after[t] - before.get(t, 0) for t in after), reverse=True)
print(json.dumps({"busy": sum(w > 0.2 * work[0] for w in work), "ticks": work[:4]}))
""",
        threads=threads,
    )
    assert out["busy"] == threads, out


@pytest.mark.timeout(240)
def test_a_one_thread_cell_is_held_to_one_cpu():
    """The Python thread pushes a step's operators while the engine worker runs those pushed before: unheld, a cell at
    1 thread kept 1.3-1.4 cores busy on tiny networks, so every thread, the engine's included, is held to one CPU."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("this machine lets the tests use one CPU: nothing to hold the cell to")
    out = mxnet(
        """
import os
train = mb.build(BUILTIN["tiny-resnet-56"], "cpu", "fp32")
for _ in range(3):
    train.step()
train.sync()
held = {tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")}
threads = len(os.listdir("/proc/self/task"))
print(json.dumps({"held": sorted(held), "threads": threads, "settings": mb.thread_settings()}))
"""
    )
    assert len(out["held"]) == 1 and len(out["held"][0]) == 1, out
    assert out["threads"] > 1 and out["settings"]["cpu_affinity"] == out["held"][0], out


@pytest.mark.timeout(240)
@pytest.mark.serial  # alone on the machine, after the parallel tests: a quiet machine's figures are cleaner
@pytest.mark.parametrize("threads", [1, 2])
def test_threads_keep_that_many_cores_busy(threads):
    """One engine worker with an OpenMP team of N threads: matrix products keep about N cores busy."""
    if threads > len(os.sched_getaffinity(0)):
        pytest.skip(f"this machine lets the tests use fewer than {threads} CPUs")
    answer = cores_kept_busy("mxnet", threads)  # whatever other processes take of the machine
    settings = answer["settings"]
    assert settings["MXNET_CPU_WORKER_NTHREADS"] == "1" and not settings["configured_after_import"]
    assert settings["omp_max_threads"] == settings["openblas_threads"] == threads
    assert answer["cores"] < 1.3 if threads == 1 else answer["cores"] > 1.5, answer
