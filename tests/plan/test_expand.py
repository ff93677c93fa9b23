from dataclasses import replace

import pytest

from dlperf.errors import UsageError
from dlperf.plan import thread_counts
from dlperf.plan.cells import expand
from dlperf.plan.workloads import check_names
from dlperf.protocol import Cell
from dlperf.runner.tasks import schedule
from dlperf.spec import make_spec
from dlperf.workloads import BUILTIN


def test_cells_cover_the_product_and_gpus_get_one_column():
    spec = make_spec("fcn-r,lstm", threads="1,2")
    cells = expand(spec, [BUILTIN["fcn-r"], BUILTIN["lstm"]], ["cpu", "cuda:0"], [1, 2], host_threads=2)
    assert [c.column for c in cells] == ["cpu:1", "cpu:2", "cuda:0"] * 2
    assert {c.mode for c in cells} == {"fp32"}
    assert len({c.key for c in cells}) == len(cells)


def test_two_sources_that_name_one_workload_alike_are_one_line():
    """A cell is stored under its workload's name: two user factories (or one and a built-in) named alike would be
    one cell twice, so the plan refuses them, naming both."""
    mine = replace(BUILTIN["fcn-r"], name="mine", source="a.py:make")
    check_names({"fcn-r": BUILTIN["fcn-r"], "a.py:make": mine})  # distinct names: fine
    with pytest.raises(UsageError, match=r"^--workloads: 'a.py:make' and 'b.py:make' are both named 'mine'; give"):
        check_names({"a.py:make": mine, "b.py:make": replace(mine, source="b.py:make")})
    with pytest.raises(UsageError, match=r"'resnet-50' and 'c.py:make' are both named 'resnet-50'"):
        check_names({"resnet-50": BUILTIN["resnet-50"], "c.py:make": replace(mine, name="resnet-50")})


def test_a_users_factory_named_like_a_built_in_is_refused(tmp_path):
    """A factory named `fcn-r` was stored as fcn-r: `predict --cost` then quoted its CPU step as the built-in's."""
    from conftest import require
    from dlperf.plan.workloads import resolve_workload

    require("torch")
    path = tmp_path / "m.py"
    path.write_text(
        "import torch, dlperf\n"
        "def make():\n"
        "    return dlperf.user_workload('fcn-r', torch.nn.Linear(4, 2), lambda b, d: (torch.randn(2, 4), "
        "torch.tensor([0, 1])), torch.nn.functional.cross_entropy, batch_size=2)\n"
    )
    with pytest.raises(UsageError) as refused:
        resolve_workload(f"{path}:make", "torch", 120)
    assert str(refused.value) == (
        f"workload '{path}:make' is named 'fcn-r', as a built-in workload: give it a name of its own "
        "(dlperf.user_workload's first argument)"
    )


def test_key_is_stable():
    assert Cell("fcn-r", "torch", "cpu", 2, "fp32").key == "fcn-r|torch|cpu|2|fp32"


def test_repeats_are_interleaved():
    a, b = Cell("a", "torch", "cpu", 1, "fp32"), Cell("b", "torch", "cpu", 1, "fp32")
    tasks = schedule([a, b], 3)
    assert [(t.cell.workload, t.repeat) for t in tasks] == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]


def test_more_threads_than_cores_warns_but_is_allowed():
    warnings = []
    assert thread_counts((1, 8), cores=2, warnings=warnings) == [1, 8]
    assert "8" in warnings[0] and "2 usable cores" in warnings[0]
    assert thread_counts(None, cores=4, warnings=[]) == [1, 2, 4]


def _env(speed, flags, gpus=()):
    devices = [{"name": "cpu"}, *gpus]
    return {"cpu": {"flags": flags}, "frameworks": {"torch": {"devices": devices, "precision_speed": {"cpu": speed}}}}


def test_a_precision_without_a_fast_path_here_is_said_before_anything_is_measured():
    from dlperf.plan.warnings import precision_warnings

    cells = [Cell("resnet-18", "torch", "cpu", 1, m) for m in ("fp32", "bf16", "bf16+channels_last", "fp16")]
    # an AVX2-only CPU: bf16 emulated, about 90x slower than fp32 in a matrix product; fp16 fine
    avx2 = precision_warnings(cells, _env({"bf16": 0.011, "fp16": 0.9}, ["avx2", "fma"]))
    assert avx2 == [
        "bf16 on cpu: a bf16 matrix product ran 90.9x slower than fp32 here (no avx512_bf16 or amx_bf16 on this CPU): "
        "expect the bf16 cells to be many times slower than fp32; measured anyway"
    ]
    # native bf16 that still loses to fp32 in a product, at one thread
    slower = precision_warnings(cells, _env({"bf16": 0.57, "fp16": 1.1}, ["avx2", "avx512_bf16"]))
    assert len(slower) == 1 and "(the CPU has avx512_bf16): expect the bf16 cells to be no faster than" in slower[0]
    assert precision_warnings(cells, _env({"bf16": 2.6, "fp16": 0.9}, ["avx512_bf16"])) == []  # Zen 4's bf16: fast
    assert precision_warnings(cells[:1], _env({"bf16": 0.01}, [])) == []  # no bf16 cell: nothing to say


def test_each_frameworks_bf16_cells_are_warned_of_from_its_own_product():
    """Each framework's probe times its own products. On an AVX-512 CPU without bf16 (an Intel Xeon, model 207) a
    512 x 512 bf16 product ran at 0.2x fp32's speed in PyTorch and TensorFlow and 0.7-0.8x in JAX: each framework's
    cells are warned of by its own figure, named where the plan holds several or another than PyTorch."""
    from dlperf.plan.warnings import precision_warnings

    env = _env({"bf16": 0.18}, ["avx512f", "avx512_vnni"])
    env["frameworks"]["jax"] = {"precision_speed": {"cpu": {"bf16": 0.716}}}
    env["frameworks"]["tensorflow"] = {"precision_speed": {"cpu": {"bf16": 0.166}}}
    jax = [Cell("resnet-56", "jax", "cpu", 2, m) for m in ("fp32", "bf16")]
    assert precision_warnings(jax, env) == [
        "bf16 on cpu, jax: jax's bf16 matrix product ran 1.4x slower than fp32 here (no avx512_bf16 or amx_bf16 on "
        "this CPU): expect the jax bf16 cells to be no faster than, or slower than, fp32; measured anyway"
    ]
    three = [*jax, Cell("resnet-56", "tensorflow", "cpu", 2, "bf16"), Cell("resnet-56", "torch", "cpu", 2, "bf16")]
    said = precision_warnings(three, env)
    assert [line.split(":")[0] for line in said] == [
        "bf16 on cpu, jax",
        "bf16 on cpu, tensorflow",
        "bf16 on cpu, torch",
    ]
    assert (
        "tensorflow's bf16 matrix product ran 6.0x slower" in said[1] and "tensorflow bf16 cells to be many" in said[1]
    )
    assert "torch's bf16 matrix product ran 5.6x slower" in said[2] and "torch bf16 cells to be many times" in said[2]
    # a framework whose product is fast here is not warned of, whatever PyTorch's did
    env["frameworks"]["jax"]["precision_speed"]["cpu"]["bf16"] = 1.3
    assert [line.split(":")[0] for line in precision_warnings(three, env)] == ["bf16 on cpu, tensorflow",
                                                                              "bf16 on cpu, torch"]  # fmt: skip


def test_a_framework_whose_probe_timed_no_product_is_promised_only_no_faster_from_pytorchs():
    from dlperf.plan.warnings import precision_warnings

    env = _env({"bf16": 0.18}, ["avx512f"])
    env["frameworks"]["jax"] = {"devices": [{"name": "cpu"}]}  # a probe answer without the figure
    cells = [Cell("resnet-56", f, "cpu", 2, "bf16") for f in ("jax", "tensorflow")]
    assert precision_warnings(cells, env) == [
        "bf16 on cpu, jax and tensorflow: a bf16 matrix product ran 5.6x slower than fp32 here in PyTorch (no "
        "avx512_bf16 or amx_bf16 on this CPU; jax's and tensorflow's own kernels were not timed): expect the jax and "
        "tensorflow bf16 cells to be no faster than fp32; measured anyway"
    ]
    assert precision_warnings(cells, _env({"bf16": 2.6}, ["avx512_bf16"])) == []  # PyTorch's fast: nothing to say


def test_a_framework_whose_backend_lacks_the_precision_is_not_warned_of():
    """`--frameworks torch,mxnet --modes bf16` warned "expect the mxnet bf16 cells to be no faster than fp32; measured
    anyway" of cells the plan itself marks unsupported (MXNet 1.x trains in fp32 only here)."""
    from dlperf.plan.warnings import precision_warnings

    env = _env({"bf16": 0.25}, ["avx512f"])
    cells = [Cell("tiny-fcn-r", f, "cpu", 1, "bf16") for f in ("torch", "mxnet")]
    [said] = precision_warnings(cells, env)
    assert said.startswith("bf16 on cpu: a bf16 matrix product ran 4.0x slower") and "mxnet" not in said
    assert precision_warnings(cells[1:], env) == []


def test_bf16_on_a_gpu_before_ampere_is_said_and_not_on_one_after():
    from dlperf.plan.warnings import precision_warnings

    v100 = {"name": "cuda:0", "model": "Tesla V100-SXM2-16GB", "capability": "7.0"}
    h100 = {"name": "cuda:1", "model": "NVIDIA H100 80GB HBM3", "capability": "9.0"}
    cells = [Cell("resnet-50", "torch", d, 2, "bf16") for d in ("cuda:0", "cuda:1")]
    said = precision_warnings(cells, _env({}, [], gpus=[v100, h100]))
    assert len(said) == 1 and said[0].startswith("bf16 on cuda:0 (Tesla V100-SXM2-16GB, compute capability 7.0)")


@pytest.mark.parametrize(
    "bad",
    [{"timeout": float("nan")}, {"timeout": float("inf")}, {"timeout": 0}, {"compile_timeout": float("nan")},
     {"repeats": 2**63}, {"repeats": 1.5}],
)  # fmt: skip
def test_the_python_api_refuses_the_numbers_the_flags_refuse(bad):
    # issue 15: --timeout nan disabled the timeout; the flag is typed now, and dlperf.run(timeout=nan) must not do it
    with pytest.raises(UsageError, match=next(iter(bad)).replace("_", "-")):
        make_spec("tiny-fcn-r", **bad)


def test_a_loader_whose_workers_start_again_every_few_steps_is_warned_of():
    """Workers that do not persist start again each epoch: on a dataset of few batches, every few steps."""
    from dlperf.answers import DataCheck
    from dlperf.plan.warnings import epoch_warnings
    from dlperf.protocol import Cell

    cells = [Cell("resnet-50", "torch", "cuda:0", 16, "fp32", loader=loader) for loader in ("", "w0", "w2+pin",
             "w2+pin+persist", "w4")]  # fmt: skip
    [warning] = epoch_warnings(cells, {"resnet-50": 16}, {"resnet-50": DataCheck(samples=32)})
    assert warning == (
        "--data: resnet-50's dataset holds 32 samples, 2 batches of 16 an epoch: w2+pin, w4 start their workers again "
        "every 2 steps, and their steps carry it (+persist keeps them, or more data spreads it); measured anyway"
    )
    assert epoch_warnings(cells, {"resnet-50": 16}, {"resnet-50": DataCheck(samples=16 * 20)}) == []  # 20 batches
    assert epoch_warnings(cells, {"resnet-50": 16}, {"resnet-50": DataCheck(samples=None)}) == []  # a size unknown
    assert epoch_warnings(cells, {"resnet-50": 16}, {}) == []  # synthetic data: nothing was checked
    assert epoch_warnings(cells[:2] + cells[3:4], {"resnet-50": 16}, {"resnet-50": DataCheck(samples=32)}) == []


def test_a_plan_on_a_small_dataset_warns_before_anything_runs(tmp_path):
    """The probe that checks `--data` reads each dataset's size: the plan says what a short epoch will cost."""
    from conftest import dlperf, require
    from dlperf.plan import make_plan
    from dlperf.spec import make_spec

    require("torch")
    assert dlperf("data", "synth", str(tmp_path / "d"), "--only", "imagenet").returncode == 0
    plan = make_plan(make_spec(["resnet-50"], data=str(tmp_path / "d"), loaders="w0,w1", threads=[1]))
    assert any("resnet-50's dataset holds 32 samples, 2 batches of 16 an epoch: w1 start" in w for w in plan.warnings)


def test_the_warm_parents_start_before_the_data_is_opened_and_only_for_real_data(tmp_path, monkeypatch):
    """`make_plan(before_data=)`: a run starts its warm parents there (`api.start_warm_parents`), so their imports
    overlap the probe child's that opens `--data` (issue 27: a run on real data paid both, one after the other)."""
    import dlperf.plan as planning
    from conftest import require
    from dlperf.spec import make_spec

    require("torch")
    said = []
    monkeypatch.setattr(planning, "check_data", lambda spec, workloads: said.append("data opened") or {})
    planning.make_plan(make_spec(["tiny-fcn-r"], data=str(tmp_path), loaders="w0", threads=[1]),
                       before_data=lambda plan: said.append(("warm", [c.loader for c in plan.cells])))  # fmt: skip
    assert said == [("warm", ["", "w0"]), "data opened"]  # the plan's cells given first, loader cells included
    said.clear()
    planning.make_plan(make_spec(["tiny-fcn-r"], threads=[1]), before_data=lambda plan: said.append("warm"))
    assert said == ["data opened"]  # synthetic data: no probe to overlap, the run warms up as before


def test_a_run_on_real_data_starts_its_warm_parent_before_the_probe_that_opens_it(tmp_path, monkeypatch):
    import dlperf.api as api
    import dlperf.plan as planning
    from conftest import require

    require("torch")
    said = []
    monkeypatch.setattr(api.warm, "prepare", lambda processes, limit, asked: said.append(("warm", len(processes))))
    monkeypatch.setattr(planning, "check_data", lambda spec, workloads: said.append("data opened") or {})
    monkeypatch.setattr(api, "_execute", lambda *args, **kw: said.append("measured"))
    api.run(["tiny-fcn-r"], db=str(tmp_path / "r.db"), data=str(tmp_path), loaders="w0", threads=[1], predict=False)
    assert said == [("warm", 2), "data opened", "measured"]
