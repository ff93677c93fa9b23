"""The op count on fake tensors (frameworks/torch/opcount.py): FLOPs, bytes, launches and phases of known layers, a
ResNet-50 step without its activations' memory, and the probe's `ops` request."""

import contextlib
import math

import pytest

from conftest import framework_python, mlp_factory, require, run_in

torch = require("torch")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from dlperf.frameworks.common.ops import Count  # noqa: E402
from dlperf.frameworks.torch import backend as tb  # noqa: E402
from dlperf.frameworks.torch import opcount  # noqa: E402
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload  # noqa: E402
from dlperf.workloads.shi2016 import BUILTIN  # noqa: E402


def sum_loss(out, _targets):
    return out.float().sum()


def step_of(model, inputs, *, momentum=0.9, loss=sum_loss):
    """A TorchStep of `model` on one real batch (it is counted on fake copies, never run)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum, foreach=True)
    return tb.TorchStep(model, (inputs, torch.zeros(len(inputs))), loss, optimizer, None, torch.device("cpu"))


def of(ops, kind=None, phase=None):
    return [op for op in ops if (kind is None or op.kind == kind) and (phase is None or op.phase == phase)]


def test_linear_flops_bytes_and_phases():
    b, n_in, n_out = 8, 32, 16
    x = torch.randn(b, n_in, requires_grad=True)  # the input's gradient is the second backward product
    ops = opcount.count_ops(step_of(torch.nn.Linear(n_in, n_out), x))
    (fwd,) = of(ops, "matmul", "forward")  # addmm(bias, x, w.t())
    assert (fwd.flops, fwd.calls, fwd.dtype) == (2 * b * n_in * n_out, 1, "fp32")
    assert fwd.bytes == (b * n_in + n_in * n_out + b * n_out + n_out) * 4
    bwd = of(ops, "matmul", "backward")  # grad input (B,out)x(out,in) and grad weight (out,B)x(B,in)
    assert sum(op.calls for op in bwd) == 2 and {op.flops for op in bwd} == {2 * b * n_in * n_out}
    assert {op.bytes for op in bwd} == {(b * n_out + n_out * n_in + b * n_in) * 4}
    assert not of(ops, "matmul", "optimizer") and of(ops, "memory", "optimizer")  # the update is element-wise
    assert all(op.flops == 0 for op in of(ops, "memory"))


def test_conv_flops_are_flop_counter_modes():
    conv, x = torch.nn.Conv2d(3, 8, 3, padding=1), torch.randn(2, 3, 16, 16, requires_grad=True)
    with FlopCounterMode(display=False) as reference:
        conv(x).sum().backward()
    ops = opcount.count_ops(step_of(torch.nn.Conv2d(3, 8, 3, padding=1), x))
    (fwd,) = of(ops, "conv", "forward")
    assert fwd.flops == reference.get_flop_counts()["Global"][torch.ops.aten.convolution]
    assert sum(op.flops * op.calls for op in of(ops, "conv")) == reference.get_total_flops()
    assert of(ops, "conv", "backward") and not of(ops, "matmul")


def test_views_launch_nothing_in_place_ops_do():
    with FakeTensorMode():
        x = torch.randn(4, 6)
        with opcount.OpRecorder() as rec:
            x.view(6, 4), x.t(), x.transpose(0, 1), x[:1].expand(4, 6), x.detach(), torch.empty(3)
        assert rec.ops() == []
        with opcount.OpRecorder() as rec:
            x.relu_()
    (relu,) = rec.ops()
    assert (relu.kind, relu.bytes, relu.launches, relu.calls) == ("memory", 2 * 4 * 6 * 4, 1, 1)


def test_attention_on_the_cpu_counts_its_flops():
    b, h, s, d = 2, 4, 16, 8
    with FakeTensorMode():
        q = torch.randn(b, h, s, d, requires_grad=True)
        with opcount.OpRecorder() as rec:
            torch.nn.functional.scaled_dot_product_attention(q, q, q).sum().backward()
    attention = of(rec.ops(), "attention")  # FlopCounterMode's formulas: QK^T and PV, and 2.5 times that back
    assert sorted(op.flops for op in attention) == [4 * b * h * s * s * d, 10 * b * h * s * s * d]


class ManyTensors(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.ps = torch.nn.ParameterList(torch.nn.Parameter(torch.randn(3)) for _ in range(n))

    def forward(self, x):
        return x * torch.stack(list(self.ps)).sum()


def test_sgd_momentum_is_foreach_in_chunks_of_110():
    n = 230
    ops = opcount.count_ops(step_of(ManyTensors(n), torch.randn(2, 3)))
    update = of(ops, phase="optimizer")
    # steady state: buf *= momentum; buf += grad; param -= lr * buf, each over all n tensors
    assert sum(op.calls for op in update) == 3 and {op.launches for op in update} == {math.ceil(n / 110)}
    lists = {op.bytes: op.calls for op in update}  # bytes of n tensors of 3 floats, read and written
    assert lists == {2 * n * 3 * 4: 1, 3 * n * 3 * 4: 2}  # buf *= m writes buf; the adds read two lists, write one


def test_a_fused_update_is_one_kernel_per_chunk_of_110_tensors():
    """The fused optimizer (as a mode asks for it on CUDA): one kernel does every op of the update, over 110 tensors."""
    n = 230
    model = ManyTensors(n)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
    step = tb.TorchStep(model, (torch.randn(2, 3), torch.zeros(2)), sum_loss, optimizer, None, torch.device("cpu"))
    (update,) = of(opcount.count_ops(step), phase="optimizer")
    assert (update.calls, update.launches, update.issued) == (1, math.ceil(n / 110), math.ceil(n / 110))


def test_gradient_clipping_is_counted_foreach_as_cuda_runs_it():
    """CUDA clips with two multi-tensor ops over every gradient, not a norm and a product per tensor (the CPU's)."""
    n = 230
    model = ManyTensors(n)
    step = step_of(model, torch.randn(2, 3))
    step.clip_grad_norm = 1.0
    clipped = of(opcount.count_ops(step), phase="optimizer")
    plain = of(opcount.count_ops(step_of(ManyTensors(n), torch.randn(2, 3))), phase="optimizer")
    launches = sum(op.calls * op.issued for op in clipped) - sum(op.calls * op.issued for op in plain)
    assert launches <= 2 * math.ceil(n / 110) + 6  # foreach norm and scale, the norm of the norms, the coefficient


class Tagger(torch.nn.Module):
    """A projection, an LSTM over it, and the last state: what runs outside the LSTM stays one launch per op."""

    def __init__(self, i0: int, i: int, h: int) -> None:
        super().__init__()
        self.proj, self.lstm = torch.nn.Linear(i0, i), torch.nn.LSTM(i, h, batch_first=True)

    def forward(self, x):
        return self.lstm(self.proj(x))[0]


def test_lstm_runs_as_cudnn_launches_it():
    b, t, i0, i, h = 4, 6, 5, 8, 16
    ops = opcount.count_ops(step_of(Tagger(i0, i, h), torch.randn(b, t, i0)))
    proj_flops = 2 * b * t * i0 * i
    for phase in ("forward", "backward"):
        lstm = [op for op in of(ops, "matmul", phase) if op.flops != proj_flops]
        assert lstm and {op.launches for op in lstm} == ({2} if phase == "forward" else {1, 2}), phase  # 1: weights
        assert {op.launches for op in of(ops, "matmul", phase) if op.flops == proj_flops} == {1}, phase
        assert any(op.launches == 0 for op in of(ops, "memory", phase)), phase
    lstm_flops = {p: sum(op.flops * op.calls for op in of(ops, "matmul", p)) for p in ("forward", "backward")}
    forward = 8 * b * t * h * (i + h)
    assert lstm_flops["forward"] - proj_flops == forward
    assert lstm_flops["backward"] - proj_flops == pytest.approx(2 * forward, rel=0.1)  # no gradient for h0


class Stacked(torch.nn.Module):
    """A projection, then a two-layer LSTM."""

    def __init__(self, i0: int, i: int, h: int) -> None:
        super().__init__()
        self.proj, self.lstm = torch.nn.Linear(i0, i), torch.nn.LSTM(i, h, num_layers=2, batch_first=True)

    def forward(self, x):
        return self.lstm(self.proj(x))[0]


@contextlib.contextmanager
def unfused_counting():
    """Count as the CPU runs an LSTM: no RNN marked, every product issued by the host."""
    watching = opcount.OpRecorder.watching_rnns
    opcount.OpRecorder.watching_rnns = lambda self, model: contextlib.nullcontext()
    try:
        yield
    finally:
        opcount.OpRecorder.watching_rnns = watching


def test_an_lstm_is_counted_along_cudnns_path():
    """Per layer: the input projection of every step as one GEMM (m = seq x batch), a GEMM per step (m = batch); the
    host issues one cuDNN call per layer forward and two backward, none of the kernels cuDNN launches itself; the
    FLOPs are the unfused cells'."""
    b, t, i0, i, h = 4, 6, 5, 8, 16
    ops = opcount.count_ops(step_of(Stacked(i0, i, h), torch.randn(b, t, i0)))
    forward = {op.shape: op.calls for op in of(ops, "matmul", "forward")}
    assert forward == {(1, b * t, i, i0): 1, (1, b * t, 4 * h, i): 1, (1, b * t, 4 * h, h): 1, (1, b, 4 * h, h): 2 * t}
    cudnn_calls = {(op.phase, op.issued, op.calls) for op in ops if op.launches == 0 and op.issued}
    assert cudnn_calls == {("forward", 2, 1), ("backward", 4, 1)}  # 2 layers: forward; backward data and weights
    lstm = [op for op in of(ops, "matmul") if op.shape not in ((1, b * t, i, i0), (1, i, i0, b * t), (1, b * t, i0, i))]
    # a step's GEMM and its fused gate math; a weight's gradient, one GEMM (below); none issued by the host
    assert {(op.launches, op.issued) for op in lstm} == {(2, 0), (1, 0)}
    assert {op.issued for op in of(ops, "matmul") if op not in lstm} == {1}  # the projection: PyTorch issues it
    flops = sum(op.flops * op.calls for op in of(ops, "matmul", "forward"))
    assert flops == 2 * b * t * i0 * i + 8 * b * t * h * (i + h) + 8 * b * t * h * (h + h)
    weights = {op.shape: op.calls for op in of(ops, "matmul", "backward") if op.launches == 1 and not op.issued}
    assert weights == {(1, 4 * h, h, b * t): 3, (1, 4 * h, i, b * t): 1}  # each weight's gradient over every step
    with unfused_counting():  # the FLOPs of the unfused cells, all of them
        unfused = opcount.count_ops(step_of(Stacked(i0, i, h), torch.randn(b, t, i0)))
    assert sum(op.flops * op.calls for op in ops) == sum(op.flops * op.calls for op in unfused)
    assert sum(op.calls * op.launches for op in ops) < sum(op.calls * op.launches for op in unfused)


def test_a_convolution_carries_its_implicit_gemm():
    conv, x = torch.nn.Conv2d(3, 8, 3, padding=1), torch.randn(2, 3, 16, 16, requires_grad=True)
    ops = opcount.count_ops(step_of(conv, x))
    assert {op.shape for op in of(ops, "conv")} == {(1, 2 * 16 * 16, 8, 3 * 3 * 3)}
    grouped = opcount.count_ops(step_of(torch.nn.Conv2d(4, 8, 3, groups=2), torch.randn(2, 4, 10, 10)))
    assert {op.shape for op in of(grouped, "conv", "forward")} == {(2, 2 * 8 * 8, 4, 2 * 3 * 3)}


def test_bf16_and_fp16_products_run_in_half():
    for mode, name in (("bf16", "bf16"), ("fp16", "fp16")):
        count = Count.from_json(tb.op_count(BUILTIN["tiny-alexnet-r"], mode, 2))
        products = [op for op in count.ops if op.kind in ("conv", "matmul")]
        assert products and {op.dtype for op in products} == {name}, mode
    count = Count.from_json(tb.op_count(BUILTIN["tiny-alexnet-r"], "tf32", 2))
    assert {op.dtype for op in count.ops if op.kind in ("conv", "matmul")} == {"fp32"}


RESNET50 = """
import json, resource, torch
from torch.utils.flop_counter import FlopCounterMode
from dlperf.frameworks.torch import backend as tb
from dlperf.frameworks.torch.models import build_model
from dlperf.workloads.shi2016 import BUILTIN
count = tb.op_count(BUILTIN["resnet-50"], "fp32", 256)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
forward = sum(op["flops"] * op["calls"] for op in count["ops"] if op["phase"] == "forward")
with FlopCounterMode(display=False) as reference:
    build_model(BUILTIN["resnet-50"])(torch.randn(1, 3, 224, 224))
print(json.dumps({"rss": rss, "forward": forward, "reference": reference.get_total_flops(),
                  "input_bytes": count["input_bytes"], "params": count["params"]}))
"""


@pytest.mark.slow
def test_resnet50_at_256_counts_without_its_activations():
    got = run_in("torch", RESNET50, timeout=120)
    assert got["rss"] < 3 * 2**30  # real activations would be about 25 GB
    assert got["forward"] == pytest.approx(256 * got["reference"], rel=0.05)
    assert got["forward"] / 256 == pytest.approx(2 * 4.1e9, rel=0.05)  # 4.1 G multiply-adds an image
    assert got["input_bytes"] == 256 * (3 * 224 * 224 * 4 + 8) and got["params"] == BUILTIN["resnet-50"].params


def test_probe_answers_ops_requests():
    from dlperf.answers import OpRequest, OpsRequest
    from dlperf.runner import probe

    workload = BUILTIN["tiny-fcn-r"].to_json()
    requests = [OpRequest(workload, "fp32", b) for b in (4, 8)]
    answer = probe.ask("torch", OpsRequest(requests), python=framework_python("torch"))
    assert not [c.error for c in answer.counts if c.error]
    small, large = (Count.from_json(c.to_json()) for c in answer.counts)
    assert (small.workload, small.mode, small.batch, large.batch) == ("tiny-fcn-r", "fp32", 4, 8)
    assert large.flops == 2 * small.flops and large.input_bytes == 2 * small.input_bytes
    assert small.params == large.params == BUILTIN["tiny-fcn-r"].params
    update = [op for op in small.ops if op.phase == "optimizer"]  # foreach, as on CUDA: three ops over all tensors
    assert sum(op.calls for op in update) == 3 and sum(op.bytes * op.calls for op in update) == 8 * small.params * 4


def test_user_workload_counts_with_its_own_optimizer(tmp_path):
    source = tmp_path / "mini.py"
    source.write_text(mlp_factory(16, 4, "optimizer=lambda ps: torch.optim.Adam(ps), clip_grad_norm=1.0"))
    user = Workload("mini", "user", {}, InputSpec("vector", (8,)), 3, 4, OptimizerSpec(), source=f"{source}:make")
    count = Count.from_json(tb.op_count(user, "fp32", 6))
    (first, *_) = of(count.ops, "matmul", "forward")
    assert first.flops == 2 * 6 * 8 * 16  # the requested batch, not the factory's
    assert count.params == 8 * 16 + 16 + 16 * 3 + 3 and count.input_bytes == 6 * 8 * 4 + 6 * 8
    update = of(count.ops, phase="optimizer")
    assert any(op.launches == 1 and op.calls > 1 for op in update)  # clipping: a norm per tensor on a CPU
    assert sum(op.calls for op in update) > 6  # Adam's foreach update is more ops than SGD's three


def mlp_whose_forward(path, returns: str) -> Workload:
    """The MLP of `mlp_factory` written to `path`, its forward returning `returns` (of `y`, the MLP's output, and
    `x`, its input), as a user workload "mini"."""
    path.write_text(
        mlp_factory(16, 4, "clip_grad_norm=None").replace(
            "    return dlperf.user_workload(",
            "    class Mine(torch.nn.Sequential):\n"
            "        def forward(self, x):\n"
            "            y = super().forward(x)\n"
            f"            return {returns}\n"
            "    model = Mine(*model)\n"
            "    return dlperf.user_workload(",
        )
    )
    return Workload("mini", "user", {}, InputSpec("vector", (8,)), 3, 4, OptimizerSpec(), source=f"{path}:make")


def test_a_step_that_reads_values_answers_an_error_row(tmp_path):
    user = mlp_whose_forward(tmp_path / "reads.py", "y * (1.0 if float(x.sum()) > 0 else 2.0)")
    got = tb.op_count(user, "bf16", 4)
    assert (got["workload"], got["mode"], got["batch"]) == ("mini", "bf16", 4) and "error" in got and "ops" not in got


# ----------------------------------------------------------------------------------------------------------------------
# User models the fake tensors cannot run (issue 30): one row's error, one line naming the reason

UNTRACEABLE = """
import torch
import dlperf


class Branchy(torch.nn.Linear):
    def forward(self, x):
        return super().forward(x if x.sum() > 0 else -x)  # data-dependent control flow


class Item(torch.nn.Linear):
    def forward(self, x):
        return super().forward(x) * x.abs().max().item()


class Square(torch.autograd.Function):  # a custom autograd function computed in numpy
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.from_numpy(x.detach().numpy() ** 2)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class Numpy(torch.nn.Linear):
    def forward(self, x):
        return Square.apply(super().forward(x))


class Cube(torch.autograd.Function):  # a custom autograd function in torch: counted
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad


class Torch(torch.nn.Linear):
    def forward(self, x):
        return Cube.apply(super().forward(x))


class Raises(torch.nn.Linear):
    def forward(self, x):
        raise ValueError("the first line\\nand the second")


class Masked(torch.nn.Linear):
    def forward(self, x):
        kept = x[x[:, 0] > 0]  # a boolean mask: how many rows it keeps depends on the values
        return super().forward(x) + super().forward(kept).sum()


def make(kind):
    def batch(n, device):
        return torch.randn(n, 8, device=device), torch.randint(3, (n,), device=device)

    model = globals()[kind](8, 3)
    return dlperf.user_workload(kind, model, batch, torch.nn.functional.cross_entropy, batch_size=4)


def branchy(): return make("Branchy")
def item(): return make("Item")
def numpy(): return make("Numpy")
def torch_function(): return make("Torch")
def raises(): return make("Raises")
def masked(): return make("Masked")
"""


@pytest.mark.parametrize(
    ("factory", "reason"),
    [("branchy", "its step reads a tensor's value (.item(), float(), a Python `if` on a tensor)"),
     ("item", "its step reads a tensor's value"),
     ("numpy", "RuntimeError: .numpy() is not supported for tensor subclasses."),
     ("raises", "ValueError: the first line and the second"),
     ("masked", "its step's shapes depend on its values (pack_padded_sequence, nonzero, a boolean mask), which fake "
                "tensors do not hold (DynamicOutputShapeException: aten.nonzero.default); `dlperf run` and `dlperf "
                "fit` measure it on this machine")],
)  # fmt: skip
def test_a_model_fake_tensors_cannot_run_answers_one_line_naming_why(tmp_path, factory, reason):
    source = tmp_path / "untraceable.py"
    source.write_text(UNTRACEABLE)
    user = Workload(factory, "user", {}, InputSpec("vector", (8,)), 3, 4, OptimizerSpec(), source=f"{source}:{factory}")
    got = tb.op_count(user, "fp32", 4)
    assert "ops" not in got and reason in got["error"] and "\n" not in got["error"], got


def test_the_memory_trace_says_a_step_of_value_dependent_shapes_as_the_count_does(tmp_path):
    """pack_padded_sequence's or a boolean mask's output shape depends on values: `predict --memory` said only
    'DynamicOutputShapeException: aten._pack_padded_sequence.default'."""
    from dlperf.frameworks.torch.memcount import memory_count

    source = tmp_path / "untraceable.py"
    source.write_text(UNTRACEABLE)
    user = Workload("masked", "user", {}, InputSpec("vector", (8,)), 3, 4, OptimizerSpec(), source=f"{source}:masked")
    [traced] = memory_count(user, "fp32", [4])
    assert traced["error"] == tb.op_count(user, "fp32", 4)["error"] and "refused" not in traced
    assert traced["error"].startswith("its step's shapes depend on its values")


def test_a_custom_autograd_function_in_torch_is_counted(tmp_path):
    source = tmp_path / "untraceable.py"
    source.write_text(UNTRACEABLE)
    source = f"{source}:torch_function"
    user = Workload("t", "user", {}, InputSpec("vector", (8,)), 3, 4, OptimizerSpec(), source=source)
    count = Count.from_json(tb.op_count(user, "fp32", 4))
    assert of(count.ops, "matmul", "forward") and len(of(count.ops, "memory", "backward")) >= 2  # its own backward


# ----------------------------------------------------------------------------------------------------------------------
# Counted at two batches, checked at a third, scaled to any other (issue 32)


@pytest.mark.parametrize("name", ["tiny-alexnet-r", "tiny-resnet-56", "tiny-lstm"])
@pytest.mark.parametrize("mode", ["fp32", "fp16"])
def test_the_scaled_count_is_the_direct_count_at_another_batch(name, mode):
    """A conv net, a residual net with batch norm and an LSTM: fitted at 3 and 5, checked at 12, scaled to 2, 7 and
    40, each exactly (every op's FLOPs, bytes, launches and calls, in the same order) the count made there. (Not to 1:
    the CPU runs an LSTM's products at a batch of 1 as other kernels; dlperf counts a batch of 1 directly.)"""
    from dlperf.frameworks.common.ops import Affine

    answer = tb.op_count(BUILTIN[name], mode, 12, fit=[3, 5])
    assert "not_affine" not in answer, answer.get("not_affine")
    fitted = Affine.from_json(answer["affine"])
    assert fitted.batches == (3, 5, 12)
    assert fitted.at(12) == Count.from_json(answer)
    for batch in (2, 7, 40):
        assert fitted.at(batch) == Count.from_json(tb.op_count(BUILTIN[name], mode, batch)), batch


def test_a_step_not_affine_in_the_batch_says_why(tmp_path):
    user = mlp_whose_forward(tmp_path / "bent.py", "y * 2 if x.shape[0] > 8 else y")  # past 8: one more kernel
    answer = tb.op_count(user, "fp32", 16, fit=[2, 4])
    assert "affine" not in answer and "batch 16" in answer["not_affine"]
    assert Count.from_json(answer) == Count.from_json(tb.op_count(user, "fp32", 16))  # the direct count stands


@pytest.mark.parametrize("norm, x", [(lambda: torch.nn.BatchNorm2d(16), (8, 16, 4, 4)),
                                     (lambda: torch.nn.BatchNorm1d(16), (8, 16))])  # fmt: skip
def test_a_batch_norm_records_its_channels_forward_and_backward(norm, x):
    """CUDA's batch-norm training kernels run a thread block per channel: the count keeps (channels, elements per
    channel) for the roofline's waves, forward and backward; the kernels around it keep no shape."""
    inputs = torch.randn(*x, requires_grad=True)
    ops = opcount.count_ops(step_of(norm(), inputs))
    per_channel = inputs.numel() // 16
    shaped = [(op.phase, op.shape) for op in of(ops, "memory") if op.shape]
    assert shaped == [("forward", (16, per_channel)), ("backward", (16, per_channel))]


@pytest.mark.parametrize(("factory", "refused"), [("branchy", True), ("item", True), ("raises", False)])
def test_a_limit_of_the_count_is_marked_refused_and_the_models_own_error_is_not(tmp_path, factory, refused):
    """A value read is what fake tensors cannot do, whenever the same model is asked (the parent keeps it,
    predict/count.py); the model's own error is the user's to fix, asked again."""
    source = tmp_path / "untraceable.py"
    source.write_text(UNTRACEABLE)
    user = Workload(factory, "user", {}, InputSpec("vector", (8,)), 3, 4, OptimizerSpec(), source=f"{source}:{factory}")
    got = tb.op_count(user, "fp32", 4, fit=[2, 3])
    assert "error" in got and got.get("refused", False) is refused, got


@pytest.mark.parametrize(("raised", "refused"), [(MemoryError("this machine ran out of memory"), False),
                                                 (NotImplementedError("no fake kernel here"), True)])  # fmt: skip
def test_this_machines_out_of_memory_is_no_refusal_and_dlperfs_refusal_is(monkeypatch, raised, refused):
    from dlperf.frameworks.torch import probe

    def fails(*args, **kwargs):
        raise raised

    monkeypatch.setattr(probe, "count_calls", fails)
    got = tb.op_count(BUILTIN["tiny-fcn-r"], "fp32", 4)
    assert type(raised).__name__ in got["error"] and got.get("refused", False) is refused


def test_a_complex_models_products_are_named_by_their_dtype_not_none():
    """A complex64 parameter's products were counted in dtype None, said "None" in the notes, report and export."""
    z = torch.zeros(2, 3, dtype=torch.complex64)
    assert opcount.dtype_name(opcount.first_floating_dtype((z, torch.zeros(3)))) == "complex64"
    assert opcount.dtype_name(opcount.first_floating_dtype((torch.zeros(2, dtype=torch.int64), z))) == "complex64"
    assert opcount.first_floating_dtype((torch.zeros(2, dtype=torch.int64),)) is None
