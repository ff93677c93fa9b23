"""The JAX profiler's breakdown of a step: categories that sum to the step, a matmul-heavy step whose largest device
category is matmul, HLO instructions classified by what they hold, the trace with its cap, and `dlperf profile` with
jax end to end. Shares are compared with each other, never with a time.

Everything JAX runs in JAX's own interpreter (`run_in`), in one child for the profiles and the classification: each
child pays JAX's import.
"""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import FAST, dlperf, framework_python, run_in
from dlperf.vocab import Category

PROFILES = """
import dataclasses, gzip, json, sys
from dlperf.frameworks.jax import backend as jb
from dlperf.workloads import BUILTIN
from dlperf.workloads.base import InputSpec
jb.configure_threads(1)
trace, capped = sys.argv[1], sys.argv[2]
tiny = BUILTIN["tiny-fcn-r"]
widths = [512, 512, 512, 10]  # a few large matrix products: the step is theirs
wide = dataclasses.replace(tiny, name="wide-fcn", batch=256, input=InputSpec("vector", (512,)), outputs=10,
                           config={**tiny.config, "widths": widths})
out = {}
for name, workload, path, cap in [("tiny", tiny, trace, 50 * 2**20), ("wide", wide, capped, 1)]:
    train = jb.build(workload, "cpu", "fp32")
    for _ in range(2):
        train.step()
    train.sync()
    out[name] = jb.profile(train, 3, path, cap)
"""


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    framework_python("jax")  # skips, saying why, without JAX's environment
    tmp = tmp_path_factory.mktemp("jaxprof")
    trace, capped = tmp / "tiny.json.gz", tmp / "wide.json.gz"
    script = PROFILES + CLASSIFY + "print(json.dumps(out))\n"  # the classification too: one JAX import
    found = run_in("jax", script, str(trace), str(capped), timeout=240)
    return found, trace, capped


def device_categories(result: dict) -> dict[str, float]:
    return {k: v for k, v in result["categories"].items() if k != Category.HOST}


@pytest.mark.timeout(240)
def test_the_categories_of_a_tiny_workload_sum_to_its_step_and_name_its_phases(profiles):
    tiny = profiles[0]["tiny"]
    assert tiny["steps"] == 3 and tiny["step_s"] > 0
    assert sum(tiny["categories"].values()) == pytest.approx(tiny["step_s"], rel=1e-9)
    assert all(v >= 0 for v in tiny["categories"].values())
    assert set(tiny["categories"]) <= {c.value for c in Category}
    # forward and backward matrix products, the named loss scope and the optax update outside jvp/transpose
    assert {Category.MATMUL, Category.LOSS, Category.OPTIMIZER, Category.HOST} <= set(tiny["categories"])
    assert tiny["ops_per_step"] > 10 and tiny["kernels_per_step"] is None
    assert 0 < len(tiny["top_ops"]) <= 15
    top = tiny["top_ops"][0]
    assert top["calls"] >= 1 and "->" in top["shapes"] and top["self_s"] > 0
    assert tiny["modules"] == [] and any(n.startswith("modules:") for n in tiny["notes"])


@pytest.mark.timeout(240)
def test_a_step_of_large_matrix_products_is_mostly_matmul(profiles):
    wide = profiles[0]["wide"]
    device = device_categories(wide)
    assert max(device, key=device.get) == Category.MATMUL
    assert device[Category.MATMUL] > 0.5 * sum(device.values())
    tiny = profiles[0]["tiny"]
    share = lambda r: r["categories"][Category.MATMUL] / r["step_s"]  # noqa: E731
    assert share(wide) > share(tiny)


@pytest.mark.timeout(240)
def test_the_trace_is_gzip_chrome_json_and_one_above_the_cap_is_not_kept(profiles):
    found, trace, capped = profiles
    assert found["tiny"]["trace"] == str(trace)
    with gzip.open(trace) as f:
        events = json.load(f)["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    assert complete and all({"name", "ts", "dur"} <= set(e) for e in complete)
    assert found["wide"]["trace"] is None and not capped.exists()
    assert any("above the cap of 1 bytes" in n for n in found["wide"]["notes"])


CLASSIFY = r"""
import json
from dlperf.frameworks.jax import profiler
hlo = '''HloModule jit_step, entry_computation_layout={(f32[4,16]{1,0})->f32[4,64]{1,0}}

%fused_dot (p0: f32[4,16], p1: f32[16,64]) -> f32[4,64] {
  %p0 = f32[4,16]{1,0} parameter(0)
  %p1 = f32[16,64]{1,0} parameter(1)
  %t = f32[16,64]{1,0} tanh(%p1)
  ROOT %d = f32[4,64]{1,0} dot(%p0, %t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused_sum (p0.1: f32[4,64]) -> f32[4] {
  %p0.1 = f32[4,64]{1,0} parameter(0)
  %c = f32[] constant(0)
  ROOT %r = f32[4]{0} reduce(%p0.1, %c), dimensions={1}, to_apply=%add
}

%fused_move (p0.2: f32[4,64]) -> f32[64,4] {
  %p0.2 = f32[4,64]{1,0} parameter(0)
  ROOT %tr = f32[64,4]{0,1} transpose(%p0.2), dimensions={1,0}
}

%body (s: (s32[], f32[4,64])) -> (s32[], f32[4,64]) {
  %s = (s32[], f32[4,64]{1,0}) parameter(0)
  ROOT %same = (s32[], f32[4,64]{1,0}) tuple(%s)
}

%cond (s.1: (s32[], f32[4,64])) -> pred[] {
  %s.1 = (s32[], f32[4,64]{1,0}) parameter(0)
  ROOT %k = pred[] constant(false)
}

ENTRY %main (x: f32[4,16], w: f32[16,64]) -> f32[4,64] {
  %x = f32[4,16]{1,0} parameter(0)
  %w = f32[16,64]{1,0} parameter(1)
  %mm = f32[4,64]{1,0} fusion(%x, %w), calls=%fused_dot, metadata={op_name="jit(step)/jvp()/dot_general"}
  %loss = f32[4]{0} fusion(%mm), calls=%fused_sum, metadata={op_name="jit(step)/transpose(jvp(dlperf.loss))/reduce_sum"}
  %update = f32[4]{0} fusion(%mm), calls=%fused_sum, metadata={op_name="jit(step)/add"}
  %grad = f32[4]{0} fusion(%mm), calls=%fused_sum, metadata={op_name="jit(step)/transpose(jvp())/add"}
  %move = f32[64,4]{0,1} fusion(%mm), calls=%fused_move, metadata={op_name="jit(step)/jvp()/transpose"}
  %pool = f32[4,32]{1,0} reduce-window(%mm, %c2), window={size=1x2 stride=1x2}, to_apply=%add
  %rng = (u32[2], u32[4]) rng-bit-generator(%k2), algorithm=rng_default
  %t0 = (s32[], f32[4,64]{1,0}) tuple(%i, %mm)
  %while.3 = (s32[], f32[4,64]{1,0}) while(%t0), condition=%cond, body=%body
  ROOT %out = f32[4,64]{1,0} copy(%mm)
}
'''
out["classified"] = {name: [c, shapes] for name, (c, shapes) in profiler.classify(hlo).items()}
out["update_holds"] = profiler.update_holds(hlo)
out["update_notes"] = [profiler.update_note(*held) for held in [(1, 1, 0), (192, 10, 23), (56, 0, 0)]]
"""


@pytest.mark.timeout(240)
def test_hlo_instructions_are_classified_by_what_they_hold_and_where_jax_traced_them(profiles):
    found = profiles[0]["classified"]
    category = {name: c for name, (c, _) in found.items()}
    assert category["mm"] == Category.MATMUL  # a fusion with a product in it, whatever else it holds
    assert category["loss"] == Category.LOSS  # the loss's scope, in its backward too
    assert category["update"] == Category.OPTIMIZER  # traced at the top of the step: the optax update
    assert category["grad"] == Category.ELEMENTWISE  # a reduction of the backward pass
    assert category["move"] == Category.COPY and category["out"] == Category.COPY
    assert category["pool"] == Category.POOLING and category["rng"] == Category.OTHER
    assert category["while.3"] is None  # control flow: its body's instructions are counted, not it
    assert found["mm"][1] == "(f32[4,16], f32[16,64]) -> f32[4,64]"


@pytest.mark.timeout(240)
def test_the_profile_says_what_xla_fused_of_the_backward_into_the_update(profiles):
    """tiny-resnet-56 in bf16 read "optimizer 12%" against fp32's 2%: 10 of its 192 update operations reduce a
    gradient and 23 cast bf16 gradients to fp32, the backward's work fused into the update."""
    assert profiles[0]["update_holds"] == [1, 1, 0]  # %update: a reduction, traced at the top of the step
    reduced, both, none = profiles[0]["update_notes"]
    assert (
        reduced == "optimizer: holds backward work XLA fused into the update: of its 1 operations, 1 reduce a gradient"
    )
    assert both.endswith("of its 192 operations, 10 reduce a gradient, 23 cast a bf16 gradient to fp32")
    assert none is None


@pytest.mark.slow  # an end-to-end run of the command: with the sweeps (make test-slow), keeping make test short
@pytest.mark.timeout(300)
def test_dlperf_profile_with_jax_end_to_end(tmp_path):
    from dlperf.store import Store

    framework_python("jax")
    db = tmp_path / "d.db"
    proc = dlperf("profile", "tiny-fcn-r", "--framework", "jax", "--threads", "1", "--steps", "2", *FAST, db=db,
                  timeout=280)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "tiny-fcn-r jax cpu:1 fp32:" in proc.stdout and "  verdict: " in proc.stdout
    store = Store.open(db, create=False)
    try:
        [profile] = store.profiles(1).values()
    finally:
        store.close()
    assert profile.ok, profile
    figures = profile.figures
    assert abs(sum(figures.categories.values()) - figures.step_s) <= 1e-6 * figures.step_s
    assert figures.categories[Category.MATMUL] > 0 and figures.trace.startswith(str(db) + ".traces")
    with gzip.open(figures.trace) as f:
        assert json.load(f)["traceEvents"]
