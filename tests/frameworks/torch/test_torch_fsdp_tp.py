"""FSDP2 and tensor parallelism (frameworks/torch/fsdp.py, tp.py): the plans, the numerics against the unsharded
model on 2 gloo processes (and on 2 GPUs over NCCL), and the cells end to end through `dlperf run`."""

import json
import os
import socket
from pathlib import Path

import pytest

from conftest import FAST, dlperf
from dlperf.protocol import Cell
from dlperf.store import Store
from dlperf.workloads import BUILTIN

# ----------------------------------------------------------------------------------------------------------------------
# The plans: no processes


def _model(name):
    from dlperf.frameworks.torch.models import build_model

    return build_model(BUILTIN[name])


def test_tp_pairs_consecutive_linear_layers_colwise_then_rowwise(torch):
    from dlperf.frameworks.torch import tp
    from dlperf.frameworks.torch.models import FCN

    assert tp.plan(_model("tiny-fcn-r"), 2, "tiny-fcn-r") == {
        "layers.0": "colwise", "layers.1": "rowwise", "layers.2": "colwise", "layers.3": "rowwise",
    }  # fmt: skip
    assert tp.plan(FCN([8, 4, 4, 2]), 2, "odd") == {"layers.0": "colwise", "layers.1": "rowwise"}  # the last whole
    with pytest.raises(
        NotImplementedError,
        match=r"layers\.2's 5 outputs do not split evenly over 2 processes "
        r"\(uneven splits over no --nproc above 1\)$",
    ):
        tp.plan(FCN([8, 4, 4, 5, 2]), 2, "uneven")


@pytest.mark.slow  # 3 processes on 2 shared cores: about 10 s
def test_tp_over_processes_a_width_does_not_divide_by_is_unsupported_naming_what_divides(tmp_path):
    """Not bad input: DTensor shards unevenly too, dlperf does not measure it (as DDP's batch that does not split over
    the processes); in a sweep the other cells apply. The reason names the process counts that would split it."""
    from runner.test_pipeline_cells import unsupported_cell

    cell = unsupported_cell(tmp_path / "d.db", "--workloads", "tiny-fcn-r", "--nproc", "3", "--parallel", "tp")
    assert cell.error == ("rank 0: tp: layers.0's 32 outputs do not split evenly over 3 processes (tiny-fcn-r "
                          "splits over a --nproc that divides 16)")  # fmt: skip


@pytest.mark.parametrize("name,kind", [("tiny-resnet-56", "a conv net"), ("tiny-alexnet-r", "a conv net"),
                                       ("tiny-lstm", "a recurrent network")])  # fmt: skip
def test_tp_refuses_what_is_not_a_stack_of_linear_layers(torch, name, kind):
    from dlperf.frameworks.torch import tp

    with pytest.raises(NotImplementedError, match=f"only to the fully connected networks .*; {name} is {kind}$"):
        tp.plan(_model(name), 2, name)


def test_tps_check_of_the_split_forward_computes_in_fp32_in_the_tf32_mode(torch):
    """The check of a split forward against the whole one (tolerance 1e-4 of the output, 1e-5) ran its products as
    the cell's mode set them: in the tf32 mode on CUDA, TensorFloat-32, whose 10-bit rounding of inputs an fp32
    rounding apart told fcn-s and fcn-r, split exactly, 4-6 times the tolerance apart (emulated on the CPU) and
    refused them as unsupported. Both forwards compute in fp32, the mode's setting restored after."""
    from types import SimpleNamespace

    from dlperf.frameworks.torch import tp

    seen = []

    class Recording(torch.nn.Linear):
        def forward(self, x):
            seen.append(torch.backends.cuda.matmul.allow_tf32)
            return super().forward(x)

    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # as build._set_tf32 leaves it in the tf32 mode
    try:
        step = SimpleNamespace(model=Recording(4, 2), inputs=torch.ones(3, 4), device=torch.device("cuda", 0))
        (out,) = tp.output_of(step)
        assert seen == [False] and out.shape == (3, 2) and torch.backends.cuda.matmul.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_fsdp_shards_each_layer_or_block_on_its_own(torch):
    from dlperf.frameworks.torch import fsdp

    assert fsdp.units(_model("tiny-fcn-r")) == ["layers.0", "layers.1", "layers.2", "layers.3"]
    model = _model("resnet-56")
    resnet = fsdp.units(model)
    assert resnet[:2] == ["stem.0", "stem.1"] and resnet[-1] == "fc"  # the conv and its batch norm; no ReLU
    assert [u for u in resnet if u.startswith("blocks.")] == [f"blocks.{i}" for i in range(27)]  # 3 stages of 9


# ----------------------------------------------------------------------------------------------------------------------
# Numerics: 2 processes (gloo, or NCCL on 2 GPUs) against the unsharded model in each


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, out: str, device: str) -> None:
    """One process: tp's and FSDP's steps of tiny-fcn-r against the torch backend's unsharded step (gloo on the CPU,
    NCCL on this rank's own GPU)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))  # fmt: skip
    import torch

    from dlperf.frameworks.torch import ddp
    from dlperf.worker.child import exit_now

    torch.set_num_threads(1)
    group = ddp.init(device, 60)
    workload = BUILTIN["tiny-fcn-r"]
    found = {"tp": _tp_against_whole(workload, group), "fsdp": _fsdp_against_whole(workload, group)}
    with open(f"{out}.{rank}", "w") as f:
        json.dump(found, f)
    ddp.close(together=True)
    exit_now(0)  # as a worker ends: gloo's destructors in the interpreter's teardown abort now and then (SIGABRT)


def _tp_against_whole(workload, group) -> dict:
    """The output, a gradient of each split and the loss after two updates, as differences from the whole model."""
    from dlperf.frameworks.torch import backend, tp

    device = group.device
    split = tp.build(workload, Cell(workload.name, "torch", device.type, 1, "fp32", nproc=2, parallel="tp"), group)
    whole = backend.build(workload, str(device), "fp32")  # the same seeds: the same weights and inputs
    out, ref = split.inner.model(split.inner.inputs), whole.model(whole.inputs)
    diff = {"output": (out.full_tensor() if hasattr(out, "full_tensor") else out).sub(ref).abs().max().item()}
    backend.cross_entropy(out, split.inner.targets).backward()
    backend.cross_entropy(ref, whole.targets).backward()
    for name in ("layers.0", "layers.1"):  # colwise, rowwise
        grad = split.inner.model.get_submodule(name).weight.grad.full_tensor()
        diff[f"{name}.grad"] = grad.sub(whole.model.get_submodule(name).weight.grad).abs().max().item()
    losses = [(split.step(), whole.step()) for _ in range(3)]
    diff["loss_after_updates"] = abs(float(losses[-1][0]) - float(losses[-1][1]))
    diff["loss_changed"] = abs(float(losses[-1][1]) - float(losses[0][1]))
    return diff


def _fsdp_against_whole(workload, group) -> dict:
    """Each rank a half of the batch, sharded, against the whole batch in one model: the same parameters after
    two updates (the mean loss's gradient is the mean of the halves'). The halves are the ones the ranks drew,
    gathered (on GPUs each rank draws on its own device); `halves_differ`: each rank drew its own."""
    from dataclasses import replace

    import torch

    from dlperf.frameworks.torch import backend, fsdp

    batch = 2 * workload.batch
    cell = Cell(workload.name, "torch", group.device.type, 1, "fp32", nproc=2, scaling="strong", parallel="fsdp")
    sharded = fsdp.build(replace(workload, batch=batch), cell, group)
    whole = backend.build(replace(workload, batch=batch), str(group.device), "fp32")
    halves = gathered_batch(sharded.inner, group)
    whole.inputs, whole.targets = (torch.cat(parts) for parts in halves)
    for _ in range(2):
        sharded.step(), whole.step()
    mine = dict(sharded.inner.model.named_parameters())
    diff = {n: mine[n].full_tensor().sub(p).abs().max().item() for n, p in whole.model.named_parameters()}
    return {"halves_differ": not torch.equal(*halves[0]), "diff": diff}


def gathered_batch(step, group) -> list[list]:
    """Every rank's inputs, then every rank's targets, of a data-parallel step: the batch one process would train."""
    import torch
    import torch.distributed as dist

    halves = []
    for mine in (step.inputs, step.targets):
        parts = [torch.empty_like(mine) for _ in range(group.world)]
        dist.all_gather(parts, mine)
        halves.append(parts)
    return halves


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu(2))])
def test_tp_and_fsdp_compute_what_the_unsharded_model_does(tmp_path, torch, device):
    """In the fast run on the CPU (make test); on 2 GPUs over NCCL, within float32's differences between cuBLAS's
    reductions over a split layer and over the whole one."""
    import torch.multiprocessing as mp

    tolerance = 1e-5 if device == "cpu" else 1e-4
    out = str(tmp_path / "diff")
    mp.spawn(_rank, args=(2, _free_port(), out, device), nprocs=2, join=True)
    for rank in (0, 1):
        found = json.loads(Path(f"{out}.{rank}").read_text())
        split = found["tp"]
        assert split.pop("loss_changed") > 10 * tolerance  # the updates did something: the comparison can fail
        assert all(d < tolerance for d in split.values()), split
        sharded = found["fsdp"]
        assert sharded["halves_differ"] and all(d < tolerance for d in sharded["diff"].values()), sharded


# ----------------------------------------------------------------------------------------------------------------------
# End to end: dlperf run, gloo, 2 processes


@pytest.mark.slow
def test_fsdp_holds_half_of_ddps_parameters_per_rank(tmp_path, torch):
    db = tmp_path / "d.db"
    done = dlperf("run", "--workloads", "tiny-fcn-r", "--nproc", "2", "--parallel", "ddp,fsdp", "--threads", "1",
                  *FAST, db=db, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(db, create=False)
    cells = {c.parallel: c for c in store.cells(1)}
    store.close()
    assert set(cells) == {"ddp", "fsdp"} and all(c.status == "ok" and c.median_s > 0 for c in cells.values())
    ddp, fsdp = cells["ddp"].comm, cells["fsdp"].comm
    assert len(fsdp.param_bytes_rank) == 2 and fsdp.strategy == "fsdp"
    for whole, shard in zip(ddp.param_bytes_rank, fsdp.param_bytes_rank, strict=True):
        assert 0.4 <= shard / whole <= 0.6
    assert ddp.param_bytes_rank[0] == 4 * cells["ddp"].params  # DDP: the whole model on every rank
    assert fsdp.local_step_s > 0 and fsdp.bound in ("compute", "communication")


@pytest.mark.slow
def test_tp_on_a_conv_net_is_unsupported_with_the_reason(tmp_path, torch):
    db = tmp_path / "d.db"
    done = dlperf("run", "--workloads", "tiny-resnet-56", "--nproc", "2", "--parallel", "tp", "--threads", "1",
                  *FAST, db=db, timeout=300)  # fmt: skip
    store = Store.open(db, create=False)
    [cell] = store.cells(1)
    store.close()
    assert cell.status == "unsupported", (cell.status, cell.error, done.stderr[-3000:])
    assert "only to the fully connected networks" in cell.error and "tiny-resnet-56 is a conv net" in cell.error
