"""A NotImplementedError in a child is a mode or setting the cell does not support (`unsupported`, exit 0), unless it
is the user's model failing: raised in the user's own code, or by anything but dlperf in a user model's plain fp32
cell. A `foward` typo (torch's Module answers it with a NotImplementedError) and a model on the meta device were
`unsupported`, exit 0: a CI check on the exit code passed a broken model."""

from __future__ import annotations

import types

import pytest

from dlperf.protocol import Cell
from dlperf.worker.child import models_own

USER = {"source": "/home/me/mine.py:make"}


def task(mode="fp32", workload=USER, loader="", nproc=0):
    cell = Cell(workload="mine", framework="torch", device="cpu", threads=1, mode=mode, loader=loader, nproc=nproc)
    return types.SimpleNamespace(cell=cell, workload=workload)


def raised_in(filename: str) -> NotImplementedError:
    """A NotImplementedError whose innermost frame is in `filename`."""
    code = compile("def f():\n    raise NotImplementedError('x')\n", filename, "exec")
    scope: dict = {}
    exec(code, scope)
    try:
        scope["f"]()
    except NotImplementedError as exc:
        return exc
    raise AssertionError("not raised")


def test_the_users_own_raise_is_their_models_failure_in_every_mode(tmp_path):
    own = raised_in(str(tmp_path / "mine.py"))
    assert models_own(own, task()) and models_own(own, task("bf16")) and models_own(own, task(loader="w2"))


def test_a_libraries_not_implemented_is_the_models_in_the_plain_cell_only():
    import torch

    with pytest.raises(NotImplementedError) as typo:
        torch.nn.Module()(torch.zeros(1))  # no forward: the `foward` typo
    assert models_own(typo.value, task())
    assert not models_own(typo.value, task("bf16"))  # an op without a bf16 kernel is a mode unsupported
    assert not models_own(typo.value, task(nproc=2)) and not models_own(typo.value, task(loader="w0"))


def test_dlperfs_own_refusals_and_built_in_workloads_stay_unsupported():
    import dlperf

    ours = raised_in(dlperf.__file__)
    assert not models_own(ours, task())  # `optimizer X is not implemented by the torch backend`, a refused strategy
    library = raised_in(types.__file__)
    assert not models_own(library, task(workload={"source": None, "name": "fcn-r"}))
    assert not models_own(library, types.SimpleNamespace(framework="torch"))  # a probe: no cell
