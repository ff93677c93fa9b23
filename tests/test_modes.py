"""The modes table (`dlperf.modes`), and the generated mode test: every backend × mode × tiny workload either builds
the cell (and trains one step) or is `unsupported`, as the table and the backend's `MODES` say it must be.

The modes are generated from the table: every component, and every pair of components it allows (at most one
exclusive member per group), canonical. A row added to the table adds its cases here without an edit. Each framework
runs all its cells in ONE child process in its own interpreter (`run_in`); the test process never imports jax,
tensorflow or mxnet. The child reports what happened and its backend's own `MODES`; the expectation is computed here,
from the table, and compared cell by cell. "error" (anything but NotImplementedError) is never acceptable.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections import Counter
from dataclasses import dataclass

import pytest

from conftest import run_in
from dlperf.modes import (
    DEVICE_NAMES,
    MODE_ORDER,
    ROW,
    ROWS,
    STEP,
    Mode,
    check_device,
    exclusive_groups,
    mode_components,
    options_of,
    preamble,
    recipe,
)
from dlperf.spec import canonical_mode
from dlperf.vocab import DeviceKind, Framework
from dlperf.workloads import BUILTIN, TINY

FRAMEWORKS = tuple(f.value for f in Framework)
# One tiny workload per input kind: a vector FCN, an image CNN (with a trunk `checkpoint` can split) and the
# token LSTM. Every cell is a real training step, so the set stays small.
WORKLOADS = ("tiny-fcn-r", "tiny-resnet-56", "tiny-lstm")
DEVICE = DeviceKind.CPU

# Refusals the table cannot know: the backend looks at the model itself. The cell must be `unsupported` with a reason
# that starts with the component, never built and never an error.
REFUSED = {
    # torch `recompute` splits the largest nn.Sequential, or checkpoints each block of an nn.ModuleList, and needs
    # MIN_CHECKPOINT_BLOCKS (3) or more; the FCN (an nn.ModuleList of single layers) and the LSTM (embedding, nn.LSTM,
    # decoder) have neither.
    (Mode.CHECKPOINT, "tiny-fcn-r"): "no trunk of 3+ blocks",
    (Mode.CHECKPOINT, "tiny-lstm"): "no trunk of 3+ blocks",
}
# Refusals that depend on the machine, not the table: the cell is built, or `unsupported` with a reason that starts
# with the component.
MACHINE_DEPENDENT = {
    # torch `_no_kernel`: oneDNN has no fp16 LSTM kernel on many CPUs, and no bf16 one without AVX-512 (an
    # AVX2-only Zen 3, say); refused at the first step, not in build
    (Mode.FP16, "tiny-lstm"): "no fp16 LSTM kernel on some CPUs",
    (Mode.BF16, "tiny-lstm"): "no bf16 LSTM kernel on AVX2-only CPUs",
}


def pair_allowed(a: Mode, b: Mode) -> bool:
    return not any(a in members and b in members for members in exclusive_groups().values())


def generated_modes() -> list[str]:
    """Every component, then every pair the table allows, canonical (`fp32+x` is `x`: the duplicates go)."""
    singles = [canonical_mode(m.value) for m in MODE_ORDER]
    pairs = [canonical_mode(f"{a}+{b}") for a, b in itertools.combinations(MODE_ORDER, 2) if pair_allowed(a, b)]
    return list(dict.fromkeys(singles + pairs))


MODES = generated_modes()


# ----------------------------------------------------------------------------------------------------------------------
# The expectation, from the table


def where(component: Mode) -> str:
    """The devices a component runs on, worded as `check_device` words them."""
    return " and ".join(DEVICE_NAMES[d] for d in DeviceKind if d in ROW[component].devices)


@dataclass(frozen=True)
class Expected:
    outcome: str  # "built" or "unsupported"
    why: str  # the rule that decided, for the failure table
    components: tuple[Mode, ...] = ()  # unsupported: the reason starts with one of these
    contains: str = ""  # unsupported: and contains this
    may_build: bool = False  # a machine-dependent refusal: "built" is fine too

    def accepts(self, got: str) -> bool:
        if got == "built":
            return self.outcome == "built" or self.may_build
        if not got.startswith("unsupported: ") or self.outcome != "unsupported":
            return False
        reason = got.removeprefix("unsupported: ")
        return any(reason.startswith(c.value) for c in self.components) and self.contains in reason

    def __str__(self) -> str:
        if self.outcome == "built":
            return "built"
        text = f"unsupported, reason starts with {'|'.join(c.value for c in self.components)}"
        text += f" and says {self.contains!r} ({self.why})" if self.contains else f" ({self.why})"
        return f"built, or {text}" if self.may_build else text


def expect(implemented: frozenset[Mode], mode: str, workload: str) -> Expected:
    parts = mode_components(mode)
    missing = tuple(c for c in parts if c not in implemented)
    if missing:
        return Expected("unsupported", "not in the backend's MODES", missing)
    elsewhere = tuple(c for c in parts if DEVICE not in ROW[c].devices)
    if elsewhere:
        # check_device: "<component> applies to CUDA GPUs only; this cell runs on cpu"
        return Expected(
            "unsupported", f"runs on {where(elsewhere[0])} only", elsewhere, f"applies to {where(elsewhere[0])} only"
        )
    # an allocator's component is the process's, set or checked by the worker before the framework is imported
    # (`common/heap.py`; tests/frameworks/torch/test_allocator_modes.py): the backend builds fp32's step
    images = tuple(c for c in parts if ROW[c].image_input)
    if images and BUILTIN[workload].input.kind != "image":
        return Expected("unsupported", f"needs an image input, {workload} has {BUILTIN[workload].input.kind}", images)
    refused = tuple(c for c in parts if (c, workload) in REFUSED)
    if refused:
        return Expected("unsupported", REFUSED[refused[0], workload], refused)
    maybe = tuple(c for c in parts if (c, workload) in MACHINE_DEPENDENT)
    if maybe:
        return Expected("unsupported", MACHINE_DEPENDENT[maybe[0], workload], maybe, may_build=True)
    return Expected("built", "the table allows it")


# ----------------------------------------------------------------------------------------------------------------------
# The child: every cell of one framework, in its own interpreter

CHILD = """
import json, math, sys
from dlperf.frameworks import backend
from dlperf.modes import Mode, mode_components
from dlperf.workloads import BUILTIN

task = json.loads(sys.argv[1])
be = backend(task["framework"])
be.configure_threads(1)  # as a worker does, before anything is built
cells = []
for mode in task["modes"]:
    for name in task["workloads"]:
        try:
            train = be.build(BUILTIN[name], "cpu", mode)
            if task["step_compile"] or Mode.COMPILE not in mode_components(mode):
                loss = train.step()
                train.sync()
                loss = float(loss)
                got = "built" if math.isfinite(loss) else f"error: non-finite loss {loss} after one step"
            else:
                got = "built"
        except NotImplementedError as exc:  # the worker records this as `unsupported`, not failed
            got = f"unsupported: {exc}"
        except Exception as exc:
            got = f"error: {type(exc).__name__}: {exc}"
        cells.append([mode, name, got.splitlines()[0][:300]])
print(json.dumps({"modes": sorted(be.MODES), "cells": cells}))
"""


@functools.cache
def results(framework: str) -> tuple[frozenset[Mode], dict[tuple[str, str], str]]:
    """(the backend's own MODES, (mode, workload) -> "built" | "unsupported: <reason>" | "error: <type>: <message>")."""
    task = {
        "framework": framework,
        "modes": MODES,
        "workloads": list(WORKLOADS),
        # torch.compile compiles at the first call, and Inductor on CPU takes 5-25 s per model: stepping the compile
        # cells made the torch child take 2 minutes instead of 4 s. So on torch a compile cell only builds (the mode
        # and device checks, the trunk `checkpoint` splits, the wrapping); tests/runner/test_sweep.py runs a compiled
        # cell end to end. TensorFlow's compile (XLA) takes a few seconds in all and is stepped.
        "step_compile": framework != "torch",
    }
    out = run_in(framework, CHILD, json.dumps(task), timeout=240)
    unknown = set(out["modes"]) - {m.value for m in Mode}
    assert not unknown, f"{framework} backend declares MODES that are no Mode: {sorted(unknown)}"
    return frozenset(Mode(m) for m in out["modes"]), {(mode, w): got for mode, w, got in out["cells"]}


def table(framework: str, implemented: frozenset[Mode], cells: dict[tuple[str, str], str]) -> str:
    lines = [f"{framework}: MODES = {sorted(m.value for m in implemented)}; (mode, workload): got | expected"]
    for (mode, workload), got in cells.items():
        expected = expect(implemented, mode, workload)
        mark = "   " if expected.accepts(got) else "XXX"
        lines.append(f"{mark} {mode:<26} {workload:<15} {got} | {expected}")
    return "\n".join(lines)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(  # JAX's and TensorFlow's over ten seconds each, MXNet's 7: with the slow tests
    "framework", [f if f == "torch" else pytest.param(f, marks=pytest.mark.slow) for f in FRAMEWORKS]
)
def test_every_mode_builds_or_is_unsupported(framework):
    implemented, cells = results(framework)
    assert Mode.FP32 in implemented, f"{framework}: every backend runs the reference mode"
    assert sorted(cells) == sorted(itertools.product(MODES, WORKLOADS)), "the child left out cells"
    wrong = []
    for (mode, w), got in cells.items():
        expected = expect(implemented, mode, w)
        if not expected.accepts(got):
            wrong.append((mode, w))
    if wrong:
        pytest.fail(f"{len(wrong)} cells are not as the table says (XXX):\n{table(framework, implemented, cells)}")


# ----------------------------------------------------------------------------------------------------------------------
# The generated modes and workloads


def test_generated_modes_are_every_component_and_every_allowed_pair():
    assert len(MODES) == len(set(MODES))
    assert all(canonical_mode(m) == m for m in MODES)
    assert {m.value for m in Mode} <= set(MODES)
    for a, b in itertools.combinations(MODE_ORDER, 2):
        if pair_allowed(a, b):
            assert canonical_mode(f"{a}+{b}") in MODES, (a, b)
        else:
            assert f"{a}+{b}" not in MODES, (a, b)
    for mode in MODES:
        parts = mode_components(mode)
        for members in exclusive_groups().values():
            assert sum(p in members for p in parts) <= 1, mode


def test_the_workloads_are_tiny_and_cover_every_input_kind():
    assert set(WORKLOADS) <= {w.name for w in TINY}
    assert {BUILTIN[w].input.kind for w in WORKLOADS} == {w.input.kind for w in TINY} == {"vector", "image", "tokens"}
    for component, workload in (*REFUSED, *MACHINE_DEPENDENT):
        assert component in Mode and workload in WORKLOADS


# ----------------------------------------------------------------------------------------------------------------------
# The table itself (no framework)


def test_every_mode_has_exactly_one_row():
    counts = Counter(r.mode for r in ROWS)
    assert {m: counts[m] for m in Mode} == dict.fromkeys(Mode, 1)
    assert len(ROWS) == len(Mode) and all(ROW[m].mode is m for m in Mode)


def test_exclusive_groups_are_the_groups_with_exclusive_members():
    groups = exclusive_groups()
    assert set(groups) == {r.group for r in ROWS if r.exclusive}
    for group, members in groups.items():
        assert members == tuple(r.mode for r in ROWS if r.group == group and r.exclusive)
    assert groups["precision"][0] is Mode.FP32


@pytest.mark.parametrize("row", [r for r in ROWS if DeviceKind.CPU not in r.devices], ids=lambda r: r.mode.value)
def test_check_device_refuses_a_cuda_only_component_on_cpu(row):
    with pytest.raises(NotImplementedError, match=rf"^{row.mode.value} applies to {where(row.mode)} only"):
        check_device(row.mode.value, DeviceKind.CPU)
    check_device(row.mode.value, DeviceKind.CUDA, gpus=max(1, row.min_gpus))
    if row.min_gpus > 1:
        with pytest.raises(NotImplementedError, match=rf"^{row.mode.value} needs {row.min_gpus} or more GPUs"):
            check_device(row.mode.value, DeviceKind.CUDA, gpus=row.min_gpus - 1)


def test_check_device_passes_everything_that_runs_on_cpu():
    for row in ROWS:
        if DeviceKind.CPU in row.devices:
            check_device(row.mode.value, DeviceKind.CPU)


@pytest.mark.parametrize("device", list(DeviceKind))
def test_options_never_offer_a_component_that_does_not_run_on_the_device(device):
    for group in dict.fromkeys(r.group for r in ROWS):
        for option in options_of(group, device):
            for component in option.split("+"):
                row = ROW[Mode(component)]
                assert row.group == group and row.searched, (group, option)
                assert device in row.devices, (group, device, option)


@pytest.mark.parametrize("row", [r for r in ROWS if r.searched], ids=lambda r: r.mode.value)
def test_recipe_of_every_searched_component_changes_something(row):
    device = next(d for d in DeviceKind if d in row.devices)
    lines = preamble(canonical_mode(row.mode.value)) + recipe(canonical_mode(row.mode.value), device)
    assert lines != recipe("fp32", device), lines
    assert not any("{device}" in line for line in lines), lines


def test_the_recipe_of_fp32_is_the_plain_loop():
    for device in DeviceKind:
        assert recipe("fp32", device) == ["for _ in range(steps):", *(f"    {line}" for line in STEP)]


def test_a_precision_barely_slower_than_fp32_says_by_how_much():
    from dlperf.modes import Fit, left_out

    fit = Fit(DeviceKind.CPU, speed=(("fp16", 0.96, "the planning probe timed"),))
    assert (
        left_out("fp16", fit) == "no fast path for fp16 here: the planning probe timed its matrix product 1.04x "
        "slower than fp32's"
    )  # fmt: skip  (it said "1x slower")
