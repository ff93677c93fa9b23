"""The capability table (`frameworks.common.capabilities`) is the one place the parent learns what a backend can do:
a capability changed there (monkeypatched here) changes what the parent's checks accept, with no other change."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dlperf import api, parallel
from dlperf.answers import DataAnswer, DataRequest, OpCount, OpsAnswer
from dlperf.errors import UsageError
from dlperf.frameworks.common import capabilities
from dlperf.parallel import STRATEGIES
from dlperf.plan.cells import expand_ddp
from dlperf.vocab import Framework, Parallel
from dlperf.workloads import BUILTIN


def test_every_framework_has_a_row_and_every_strategy_one_owner():
    assert set(capabilities.TABLE) == set(Framework)
    assert all(row.framework is name for name, row in capabilities.TABLE.items())
    assert {s: capabilities.owner(s) for s in STRATEGIES} == {
        **dict.fromkeys((Parallel.DDP, Parallel.FSDP, Parallel.GPIPE, Parallel.ONE_F_ONE_B, Parallel.TP), "torch"),
        Parallel.MIRRORED: "tensorflow",
        Parallel.MULTIWORKER: "tensorflow",
    }
    for row in capabilities.TABLE.values():
        assert row.data_parallel is None or row.data_parallel in row.strategies


def test_the_tables_answers_today():
    assert [f for f in Framework if not capabilities.of(f).profilable] == [Framework.MXNET]
    assert {f: capabilities.of(f).data_parallel for f in Framework} == {
        Framework.TORCH: Parallel.DDP, Framework.JAX: None, Framework.TENSORFLOW: Parallel.MIRRORED,
        Framework.MXNET: None,
    }  # fmt: skip
    assert capabilities.data_readers(["jax", "torch", "mxnet"]) == ["torch"]
    assert capabilities.op_counter() is Framework.TORCH


@pytest.fixture
def grant(monkeypatch):
    """Change one backend's row for the test: grant(framework, field=value, ...)."""

    def change(framework: Framework, **fields) -> None:
        monkeypatch.setitem(capabilities.TABLE, framework, replace(capabilities.TABLE[framework], **fields))

    return change


def test_a_backend_made_profilable_is_accepted_by_the_spec(grant):
    with pytest.raises(UsageError, match="--profile: mxnet cannot be profiled"):
        api.make_spec("tiny-fcn-r", frameworks="mxnet", profile=True)
    grant(Framework.MXNET, unprofilable=None)
    assert api.make_spec("tiny-fcn-r", frameworks="mxnet", profile=True).profile


def test_a_backend_made_unprofilable_is_refused_with_its_reason(grant):
    grant(Framework.JAX, unprofilable="its profiler is not mapped")
    with pytest.raises(UsageError, match=r"--profile: jax cannot be profiled \(its profiler is not mapped\)"):
        api.make_spec("tiny-fcn-r", frameworks="jax", profile=True)


def test_a_strategy_given_to_another_backend_moves_its_nproc_cells_there(grant):
    with pytest.raises(UsageError, match="--nproc: jax has no multi-process strategy"):
        api.make_spec("tiny-fcn-r", frameworks="jax", nprocs="2")
    grant(Framework.TENSORFLOW, strategies=(), data_parallel=None)
    grant(Framework.JAX, strategies=(Parallel.MIRRORED,), data_parallel=Parallel.MIRRORED)
    spec = api.make_spec("tiny-fcn-r", frameworks="jax", nprocs="2")
    assert spec.parallel == ("mirrored",) and STRATEGIES[Parallel.MIRRORED].framework == "jax"
    assert [c.framework for c in expand_ddp(spec, [BUILTIN["tiny-fcn-r"]], ["cpu"], cores=2)] == ["jax"]
    assert parallel.for_framework((Parallel.MIRRORED,), "jax") == [Parallel.MIRRORED]
    with pytest.raises(UsageError, match=r"--nproc: tensorflow has no .* use --frameworks torch or jax$"):
        api.make_spec("tiny-fcn-r", frameworks="tensorflow", nprocs="2")


def test_a_backend_that_reads_data_has_its_data_checked_by_its_own_probe(grant, monkeypatch, tmp_path):
    asked = []
    from dlperf.plan import workloads

    answer = DataAnswer({})  # each probe's answer, by workload: what the plan warns from
    monkeypatch.setattr(workloads.probe, "ask", lambda framework, request, *a, **k: asked.append((framework, request))
                        or answer)  # fmt: skip
    monkeypatch.setattr(workloads, "interpreter_for", lambda framework: f"python-of-{framework}")
    spec = replace(api.make_spec("tiny-fcn-r", frameworks="torch,jax"), data=str(tmp_path))
    workloads.check_data(spec, [BUILTIN["tiny-fcn-r"]])
    grant(Framework.JAX, reads_data=True)
    workloads.check_data(spec, [BUILTIN["tiny-fcn-r"]])
    assert [framework for framework, _ in asked] == ["torch", "torch", "jax"]
    assert all(isinstance(request, DataRequest) and request.data == str(tmp_path) for _, request in asked)


def test_the_op_counter_is_the_row_that_counts(grant, monkeypatch):
    from dlperf.predict import count

    grant(Framework.TORCH, counts_ops=False)
    grant(Framework.JAX, counts_ops=True)
    asked = []
    monkeypatch.setattr(count, "interpreter_for", lambda framework: asked.append(("python", framework)) or "python")
    monkeypatch.setattr(count.probe, "ask", lambda framework, request, *a, **kw: asked.append(("probe", framework))
                        or OpsAnswer([OpCount("tiny-fcn-r", "fp32", 8, error="no")]))  # fmt: skip
    assert count.counts([(BUILTIN["tiny-fcn-r"], "fp32")]) == ["no"]
    assert asked == [("python", "jax"), ("probe", "jax")]
