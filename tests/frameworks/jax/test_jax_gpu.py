"""JAX on a CUDA GPU, marked `gpu` (make gpu-test, and the GPU check's tests section): on a machine without one each
test skips, saying so, and fails where DLPERF_REQUIRE lists cuda. The script runs in JAX's own interpreter (`run_in`).

The GPU check's jax section times fp32 cells against a plain loop; this is what it leaves out: bf16 on CUDA (its
products in bf16, its loss check passed there) and fp32 meaning fp32 (JAX multiplies fp32 in TensorFloat-32 on a GPU
unless told otherwise: every product of an fp32 step must carry HIGHEST)."""

from __future__ import annotations

import math

import pytest

from conftest import run_in

ON_CUDA = """
import json, sys
import jax
from dlperf.frameworks.jax import backend as jb
from dlperf.workloads import BUILTIN

device, workload = sys.argv[1], BUILTIN[sys.argv[2]]
out = {}
for mode in ("bf16", "fp32"):  # bf16 first: before anything has asked for fp32's precision
    step = jb.build(workload, device, mode)
    losses = [float(step.step()) for _ in range(3)]
    step.sync()
    text = step.jitted.lower(*step._args()).as_text()
    out[mode] = {"losses": losses, "platforms": sorted({d.platform for leaf in jax.tree.leaves(step.state)
                                                        for d in leaf.devices()}),
                 "products": [line.strip() for line in text.splitlines()
                              if "stablehlo.dot_general" in line or "stablehlo.convolution" in line],
                 "settings": step.settings()}
out["check"] = jb.loss_check(workload, device, "bf16")
print(json.dumps(out))
"""


def products_in(line: str) -> str:
    """The operand types of a StableHLO product line: what follows its last ' : ('."""
    return line.rsplit(" : (", 1)[-1]


@pytest.mark.gpu
@pytest.mark.timeout(300)
def test_jax_trains_fp32_and_bf16_on_cuda_and_bf16_passes_the_loss_check_there(monkeypatch):
    # JAX takes 75% of the GPU's memory at its first array unless told not to; the GPU check runs two test files at once
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    out = run_in("jax", ON_CUDA, "cuda:0", "tiny-resnet-56", timeout=280)
    for mode in ("bf16", "fp32"):
        found = out[mode]
        assert found["platforms"] == ["gpu"], (mode, found["platforms"])  # parameters and state live on the GPU
        assert all(math.isfinite(loss) for loss in found["losses"]), found["losses"]
        assert found["settings"]["device"] == "cuda:0" and found["products"]
    assert all("bf16>" in products_in(line) for line in out["bf16"]["products"]), out["bf16"]["products"][:2]
    not_highest = [line for line in out["fp32"]["products"] if "HIGHEST" not in line]
    assert not not_highest, f"fp32 products in TensorFloat-32 on the GPU: {not_highest[:2]}"
    check = out["check"]
    assert check["ok"] is True, check["reason"]
    assert check["cosine"] >= check["min_cosine"] and 0.5 < check["size_ratio"] < 2
