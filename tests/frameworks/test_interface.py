"""Each backend module against the backend interface (`frameworks.common.interface`): every member of the `Backend`
protocol present (and `ReadsData`'s where its capability row says it reads data), callable where it is a method, and
MODES its row's. A backend can only be imported in its framework's own environment, so each is checked in a child of
that interpreter (`run_in`); the checker itself is shown to find what a module lacks."""

from __future__ import annotations

from types import ModuleType

import pytest

from conftest import run_in
from dlperf.frameworks.common import capabilities, interface
from dlperf.modes import Mode
from dlperf.vocab import Framework

CHECK = """
import json, sys
from dlperf.frameworks import backend
from dlperf.frameworks.common.interface import missing
print(json.dumps({"missing": missing(backend(sys.argv[1]), sys.argv[1])}))
"""


@pytest.mark.parametrize("framework", [f.value for f in Framework])
def test_each_backend_provides_the_interface(framework):
    assert run_in(framework, CHECK, framework, timeout=600)["missing"] == []


def fake_backend(**overrides) -> ModuleType:
    """A module with every member of the interface, each a stand-in, then `overrides` (None: the member removed)."""
    module = ModuleType("fake_backend")
    members = {**interface.members(interface.Backend), **interface.members(interface.ReadsData)}
    for name, called in members.items():
        setattr(module, name, (lambda *a, **k: None) if called else capabilities.of("torch").modes)
    for name, value in overrides.items():
        if value is None:
            delattr(module, name)
        else:
            setattr(module, name, value)
    return module


def test_the_interface_names_what_the_worker_and_the_probe_call():
    assert interface.members(interface.Backend) == {
        "MODES": False, "version": True, "configure_threads": True, "build": True, "probe": True, "loss_check": True,
        "matmul": True, "loader": True, "profile": True,
    }  # fmt: skip
    assert interface.members(interface.ReadsData) == {"h2d": True}
    assert {"step", "sync", "count_flops", "memory_of_step", "params", "compiles"} <= set(
        interface.members(interface.TrainStep)
    )


def test_the_checker_finds_what_a_backend_lacks():
    assert interface.missing(fake_backend(), "torch") == []
    assert interface.missing(fake_backend(profile=None, matmul=3), "torch") == [
        "profile: absent",
        "matmul: not callable",
    ]
    assert interface.missing(fake_backend(h2d=None), "torch") == ["h2d: absent"]
    jax_modes = capabilities.of("jax").modes
    assert interface.missing(fake_backend(h2d=None, MODES=jax_modes), "jax") == []  # jax reads no data
    assert interface.missing(fake_backend(build_parallel="no"), "torch") == ["build_parallel: not callable"]
    wrong = interface.missing(fake_backend(MODES=frozenset({Mode.FP32})), "torch")
    assert len(wrong) == 1 and wrong[0].startswith("MODES: ")
