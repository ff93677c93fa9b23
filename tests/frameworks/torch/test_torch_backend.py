"""The PyTorch backend: train step, FLOP count, live-tensor memory, user workloads, modes and the probe."""

import json
import math
from itertools import pairwise

import pytest
from onednn import missing_lstm_kernel

from conftest import mlp_factory, require, required

torch = require("torch")

from dlperf.errors import UsageError  # noqa: E402
from dlperf.frameworks.torch import backend as tb  # noqa: E402
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload  # noqa: E402
from dlperf.workloads.shi2016 import BUILTIN  # noqa: E402


def mlp(batch: int, widths=(64, 256, 256, 10), momentum: float = 0.0) -> Workload:
    return Workload(
        name="mlp",
        arch="fcn",
        config={"widths": list(widths)},
        input=InputSpec("vector", (widths[0],)),
        outputs=widths[-1],
        batch=batch,
        optimizer=OptimizerSpec("sgd", lr=0.01, momentum=momentum),
    )


# ----------------------------------------------------------------------------------------------------------------------
# Building and stepping


def test_build_step_and_params():
    train = tb.build(BUILTIN["tiny-fcn-s"], "cpu", "fp32")
    assert train.params == BUILTIN["tiny-fcn-s"].params
    assert train.inputs.shape == (8, 64) and train.targets.shape == (8,)
    train.step()
    train.sync()  # nothing to wait for on CPU, but it must exist
    assert all(p.grad is not None for p in train.model.parameters())


def test_synthetic_tokens_and_per_token_loss():
    train = tb.build(BUILTIN["tiny-lstm"], "cpu", "fp32")
    assert train.inputs.shape == train.targets.shape == (4, 8)
    assert train.inputs.dtype == torch.int64 and int(train.inputs.max()) < 100
    assert train.clip_grad_norm == 5.0
    train.step()


def test_same_seed_same_model_and_data():
    a, b = (tb.build(BUILTIN["tiny-alexnet-r"], "cpu", "fp32") for _ in range(2))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert all(torch.equal(p, q) for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True))


def output_dtype(step):
    with step.autocast():
        return step.model(step.inputs).dtype


@pytest.mark.parametrize(("mode", "dtype"), [("fp32", "float32"), ("bf16", "bfloat16"), ("fp16", "float16")])
def test_precision_modes_cast_activations_and_keep_fp32_weights(mode, dtype):
    step = tb.build(BUILTIN["tiny-resnet-56"], "cpu", mode)
    assert output_dtype(step) == getattr(torch, dtype)
    before = [p.detach().clone() for p in step.trainable]
    step.step()
    assert all(p.dtype == torch.float32 and (p.grad is None or p.grad.dtype == torch.float32) for p in step.trainable)
    assert any(not torch.equal(b, p) for b, p in zip(before, step.trainable, strict=True))
    assert (step.scaler is not None) == (mode == "fp16")


def test_channels_last_converts_weights_and_inputs():
    step = tb.build(BUILTIN["tiny-alexnet-r"], "cpu", "bf16+channels_last")
    conv = next(m for m in step.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert step.inputs.is_contiguous(memory_format=torch.channels_last) and not step.inputs.is_contiguous()
    assert output_dtype(step) == torch.bfloat16
    step.step()
    assert conv.weight in [p for group in step.optimizer.param_groups for p in group["params"]]


@pytest.mark.parametrize("name", ["tiny-fcn-s", "tiny-lstm"])
def test_channels_last_is_unsupported_without_convolutions(name):
    with pytest.raises(NotImplementedError, match="channels_last applies to 2-d convolutional networks"):
        tb.build(BUILTIN[name], "cpu", "channels_last")


@pytest.mark.parametrize("mode", ["tf32", "cuda_graphs", "bf16+cuda_graphs"])
def test_cuda_only_modes_are_unsupported_on_cpu(mode):
    with pytest.raises(NotImplementedError, match="applies to CUDA GPUs only; this cell runs on cpu"):
        tb.build(BUILTIN["tiny-fcn-r"], "cpu", mode)


@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_optimizer_implementations_give_the_same_update(impl):
    plain, other = tb.build(BUILTIN["tiny-resnet-56"], "cpu", "fp32"), tb.build(BUILTIN["tiny-resnet-56"], "cpu", impl)
    assert other.optimizer.defaults[impl] is True and not plain.optimizer.defaults.get(impl)
    assert other.settings()[f"optimizer_{impl}"] is True
    assert other.optimizer.defaults["lr"] == plain.optimizer.defaults["lr"]
    for _ in range(2):  # the second step uses the momentum buffers
        plain.step(), other.step()
    for p, q in zip(plain.trainable, other.trainable, strict=True):
        torch.testing.assert_close(p, q)


def test_checkpoint_recomputes_the_trunk_in_backward_and_saves_memory():
    eager, ckpt = (
        tb.build(BUILTIN["tiny-resnet-56"], "cpu", "fp32"),
        tb.build(BUILTIN["tiny-resnet-56"], "cpu", "checkpoint"),
    )
    info = ckpt.settings()["checkpoint"]
    assert info["module"] == "blocks" and info["blocks"] == len(ckpt.model.blocks) and info["segments"] >= 2
    calls = []
    first_block = ckpt.model.blocks[0]
    forward = first_block.forward

    def counting(x):  # not a forward hook: recomputation does not run module hooks
        calls.append(1)
        return forward(x)

    first_block.forward = counting
    ckpt.step()
    assert len(calls) == 2  # once in forward, once more when backward recomputes its segment
    eager.step()
    for p, q in zip(eager.trainable, ckpt.trainable, strict=True):  # the same training, just recomputed
        torch.testing.assert_close(p, q)
    assert ckpt.memory_of_step()["live_tensor_peak_bytes"] < eager.memory_of_step()["live_tensor_peak_bytes"]
    assert ckpt.count_flops() == eager.count_flops()  # recomputation is not model work


@pytest.mark.parametrize("name", ["tiny-fcn-s", "tiny-lstm"])
def test_checkpoint_is_unsupported_without_a_sequential_trunk(name):
    """Nor an nn.ModuleList of blocks: the FCN's ModuleList holds single linear layers, which keep no more than
    checkpointing them would."""
    need = r"checkpoint needs an nn.Sequential of 3 or more modules, or an nn.ModuleList of 3 or more blocks"
    with pytest.raises(NotImplementedError, match=rf"^{need} \(modules made of modules\), to recompute in backward: "
                                                  f"{name} has neither$"):  # fmt: skip
        tb.build(BUILTIN[name], "cpu", "checkpoint")


LSTM_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
REFUSED = "{0}: no {0} kernel for this op on this device"  # the backend's `unsupported` reason


def lstm_step_or_its_refusal(precision: str, steps: int = 4) -> tuple[list[torch.dtype], list[float]]:
    """The LSTM's output dtypes and the losses of `steps` steps of tiny-lstm in `precision` on the same batch;
    NotImplementedError (the precision unsupported here) as the step raises it."""
    step = tb.build(BUILTIN["tiny-lstm"], "cpu", precision)
    dtypes = []
    step.model.lstm.register_forward_hook(lambda module, args, out: dtypes.append(out[0].dtype))
    return dtypes, [float(step.step()) for _ in range(steps)]


@pytest.mark.parametrize("precision", list(LSTM_DTYPES))
def test_a_reduced_precision_lstm_trains_where_onednn_has_its_kernel_and_is_unsupported_where_not(precision):
    # The CPU's flags say in advance which precision has its kernel (onednn.py): AVX2 only, neither (the next test runs
    # that side on any x86 CPU); AVX-512, bf16 only (an AMD EPYC without AVX512-FP16 and an Intel Xeon with it and
    # AMX-BF16 both ran this): oneDNN trains no fp16 LSTM on any CPU
    if missing_lstm_kernel(precision):
        with pytest.raises(NotImplementedError, match="^" + REFUSED.format(precision)):
            lstm_step_or_its_refusal(precision)
        return
    dtypes, losses = lstm_step_or_its_refusal(precision)
    assert dtypes == [LSTM_DTYPES[precision]] * 4  # the LSTM ran in the mode's precision
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0], losses  # and it learns the batch


def test_an_lstm_with_onednn_capped_at_avx2_is_unsupported_in_both_reduced_precisions():
    # the AVX2-only side of the test above, run on this CPU in a child with oneDNN capped as on an AMD Zen 3
    import os
    import subprocess
    import sys

    assert all(missing_lstm_kernel(p, cap="AVX2") for p in LSTM_DTYPES)
    code = (
        "from dlperf.frameworks.torch import backend as tb\n"
        "from dlperf.workloads.shi2016 import BUILTIN\n"
        "for p in ('bf16', 'fp16'):\n"
        "    try: tb.build(BUILTIN['tiny-lstm'], 'cpu', p).step(); print(p, 'trained')\n"
        "    except NotImplementedError as exc: print(exc)\n"
    )
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    refused = [line.split(" (")[0] for line in out.stdout.splitlines()]
    assert refused == [REFUSED.format(p) for p in LSTM_DTYPES], out.stdout


def test_compile_mode_wraps_the_model_and_keeps_the_eager_module():
    step = tb.build(BUILTIN["tiny-fcn-r"], "cpu", "bf16+compile")  # building does not compile yet: cheap
    assert step.compiles and step.forward is not step.model
    assert step.settings()["compile_mode"] == "default"
    assert isinstance(step.model, torch.nn.Module) and not hasattr(step.model, "_orig_mod")


def test_configure_threads_reports_settings():
    settings = tb.configure_threads(torch.get_num_threads())  # same count: leaves the test process as it was
    assert settings["torch_threads"] == torch.get_num_threads()
    assert settings["torch_interop_threads"] >= 1
    assert {"cpu_capability", "mkldnn_enabled", "OMP_NUM_THREADS", "MKL_NUM_THREADS"} <= set(settings)
    train = tb.build(BUILTIN["tiny-fcn-s"], "cpu", "fp32")
    assert train.settings()["device"] == "cpu"
    json.dumps(train.settings())


# ----------------------------------------------------------------------------------------------------------------------
# FLOPs


@pytest.mark.parametrize("name", ["tiny-resnet-56", "tiny-lstm", "tiny-alexnet-s"])
def test_flops_by_dtype_total_matches_pytorchs_counter_and_follows_autocast(name):
    from torch.utils.flop_counter import FlopCounterMode

    reference = tb.build(BUILTIN[name], "cpu", "fp32")
    with tb.unfused_rnns(reference.model), FlopCounterMode(display=False) as counter:
        reference.step()
    fp32, bf16 = reference.count_flops(), tb.build(BUILTIN[name], "cpu", "bf16").count_flops()
    assert fp32 == {"flops_per_step": counter.get_total_flops(), "flops_by_dtype": {"fp32": counter.get_total_flops()}}
    assert bf16["flops_per_step"] == fp32["flops_per_step"]
    assert bf16["flops_by_dtype"] == {"bf16": fp32["flops_per_step"]}  # autocast runs every product in bf16


def test_fcn_flops_are_the_matrix_products():
    # Each Linear costs 2*B*in*out FLOPs forward, the same again for the weight gradient and for the input gradient,
    # except the first layer: its input needs no gradient, so autograd skips that product. Biases, sigmoids and the
    # loss are not matrix products and FlopCounterMode does not count them.
    workload = BUILTIN["tiny-fcn-r"]
    widths, b = workload.config["widths"], workload.batch
    products = [i * o for i, o in pairwise(widths)]
    expected = 6 * b * sum(products) - 2 * b * products[0]
    assert tb.build(workload, "cpu", "fp32").count_flops()["flops_per_step"] == expected


def test_lstm_flops_include_the_recurrent_products():
    # On CPU the LSTM runs as one fused oneDNN op the counter has no formula for; the backend counts it unfused.
    workload = BUILTIN["tiny-lstm"]
    c, b = workload.config, workload.batch
    n, h, gates = b * c["seq_len"], c["hidden"], 4 * c["hidden"]
    head = 6 * n * h * c["vocab"]  # forward, weight gradient, input gradient
    layer = (
        3 * 2 * n * gates * c["embed"]  # input projection: forward, weight and input gradients (embeddings learn)
        + 2 * 2 * n * gates * h  # hidden projection: forward and weight gradient
        + 2 * (n - b) * gates * h  # gradient to the previous hidden state; the zero initial state needs none
    )
    assert c["embed"] == h  # so both layers cost the same
    train = tb.build(workload, "cpu", "fp32")
    assert train.count_flops()["flops_per_step"] == head + c["layers"] * layer
    assert torch.backends.mkldnn.enabled  # restored after counting


def test_flops_leave_the_step_usable():
    train = tb.build(BUILTIN["tiny-resnet-56"], "cpu", "fp32")
    assert train.count_flops()["flops_per_step"] > 0
    train.step()


# ----------------------------------------------------------------------------------------------------------------------
# Live tensor memory


def test_tracker_counts_shared_storage_once_and_frees():
    with tb.LiveTensorBytes() as live:
        a = torch.ones(1000)  # 4000 bytes
        views = [a[:10], a.view(10, 100), a[::2]]
        assert live.now == 4000
        b = a * 2
        assert live.now == 8000
        del a, views
        assert live.now == 4000  # a's storage is gone once its last view is
        del b
    assert live.now == 0 and live.peak == 8000


def test_tracker_counts_tensors_that_existed_before():
    x = torch.zeros(250)
    with tb.LiveTensorBytes([x, x[:5]]) as live:
        y = x + 1
    assert live.peak == 2000
    del x, y


def test_tracker_sees_a_storage_resized_in_place_as_fsdp_frees_and_regathers():
    layer = torch.zeros(1000)  # 4000 bytes, as an all-gathered layer FSDP2 frees with resize_(0)
    with tb.LiveTensorBytes([layer]) as live:
        layer.untyped_storage().resize_(0)  # no op returns it: only read again before the next op
        y = torch.ones(500)  # 2000 bytes: the layer's freed memory is not counted beside it
        assert live.now == 2000
        layer.untyped_storage().resize_(4000)
        z = y + 1  # 2000 more: the layer counts again
        assert live.now == 8000
    assert live.peak == 8000
    del layer, y, z


def test_tracker_reads_no_storage_again_but_what_an_op_returns_or_writes(monkeypatch):
    """Before each op every live storage's size was read again (for a resize no op returns): a traced step of a big
    model, its weights, optimizer state and activations alive, cost ops x storages reads."""
    reads = []
    nbytes = torch.UntypedStorage.nbytes
    held = [torch.zeros(4) for _ in range(500)]  # 500 live storages, as a model's parameters and state
    with tb.LiveTensorBytes(held) as live:
        monkeypatch.setattr(torch.UntypedStorage, "nbytes", lambda s: reads.append(1) or nbytes(s))
        x = torch.ones(10)
        for _ in range(20):
            x = x + 1
        monkeypatch.undo()
    assert len(reads) < 100  # each op's result, not 500 storages per op
    assert live.peak == 500 * 16 + 2 * 40
    del held, x


def test_tracker_sees_a_resize_at_once_and_one_an_op_writes_without_returning_it():
    layer = torch.zeros(1000)
    with tb.LiveTensorBytes([layer]) as live:
        layer.untyped_storage().resize_(0)  # seen at once, before any op
        assert live.now == 0
        layer.untyped_storage().resize_(4000)
        assert live.now == live.peak == 4000
        torch.ops.inductor.resize_storage_bytes_(layer, 0)  # compiled FSDP's free: writes its argument, returns ()
        assert live.now == 0
    assert "resize_" not in vars(torch.UntypedStorage)  # PyTorch's own resize_ again once no tracker is active
    del layer


def test_a_tracker_that_cannot_be_entered_leaves_pytorchs_resize_and_a_nested_one_its_outers(monkeypatch):
    """The watch on UntypedStorage.resize_ was installed before the mode was entered: a mode that raised as it was
    entered left it installed, and the tracker in the active list, for the rest of the process."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from dlperf.frameworks.torch import instruments

    def refused(self):
        raise RuntimeError("no mode here")

    with monkeypatch.context() as patch:
        patch.setattr(TorchDispatchMode, "__enter__", refused)
        with pytest.raises(RuntimeError, match="no mode here"), tb.LiveTensorBytes():
            pass
    assert "resize_" not in vars(torch.UntypedStorage) and instruments._ACTIVE == []
    layer = torch.zeros(1000)
    with tb.LiveTensorBytes([layer]) as outer:
        with tb.LiveTensorBytes([layer]) as inner:
            layer.untyped_storage().resize_(0)
        assert inner.now == outer.now == 0
        layer.untyped_storage().resize_(4000)  # the inner one left: the outer one still watches
        assert outer.now == 4000 and inner.now == 0
    assert "resize_" not in vars(torch.UntypedStorage) and instruments._ACTIVE == []
    del layer


def measured_peak(workload: Workload) -> tuple[int, tb.TorchStep]:
    train = tb.build(workload, "cpu", "fp32")
    train.step()  # gradients and optimizer state exist, as they do after the worker's FLOP count
    return train.memory_of_step()["live_tensor_peak_bytes"], train


def test_mlp_peak_is_params_grads_data_and_activations():
    batch = 256
    peak, train = measured_peak(mlp(batch))
    params = train.params * 4
    data = train.inputs.nbytes + train.targets.nbytes
    saved = batch * (256 + 256 + 10) * 4  # two sigmoid outputs and the logits, kept for backward
    assert peak >= 2 * params + data  # weights and their gradients at least
    assert params + data + saved <= peak <= 2 * params + data + 3 * saved


def test_momentum_state_adds_one_copy_of_the_parameters():
    plain, train = measured_peak(mlp(256))
    with_momentum, _ = measured_peak(mlp(256, momentum=0.9))
    assert with_momentum - plain == train.params * 4


def test_bigger_batch_bigger_peak():
    small, _ = measured_peak(mlp(256))
    large, _ = measured_peak(mlp(512))
    extra_data_and_saved = 256 * (64 * 4 + 8) + 256 * (256 + 256 + 10) * 4
    assert large - small >= extra_data_and_saved


MEM_TRACKER = "torch.distributed._tools.mem_tracker"


def private_mem_tracker():
    """PyTorch's MemTracker, the live-tensor peak's only independent check: a private module a torch upgrade may move
    or drop. Without it the check skips locally and fails where DLPERF_REQUIRE lists torch (CI), like `require`."""
    import importlib

    try:
        return importlib.import_module(MEM_TRACKER)
    except ImportError as exc:
        message = f"{MEM_TRACKER} is gone from torch {torch.__version__} ({exc}): find another independent count"
        if "torch" in required():
            pytest.fail(f"{message}, and DLPERF_REQUIRE lists torch", pytrace=False)
        pytest.skip(message)


@pytest.mark.parametrize("name", ["tiny-resnet-56", "tiny-lstm"])
def test_tracker_agrees_with_pytorch_memtracker(name):
    # PyTorch's own (private) MemTracker counts the same thing on CPU; it refuses models whose root module runs twice
    # in a step, which is why the backend has its own tracker.
    mem_tracker = private_mem_tracker()
    peak, train = measured_peak(BUILTIN[name])
    reference = mem_tracker.MemTracker()
    reference.track_external(train.model, train.optimizer, train.inputs, train.targets)
    with reference:
        train.step()
    assert peak == reference.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]


# ----------------------------------------------------------------------------------------------------------------------
# User workloads and the probe

USER_FILE = (
    mlp_factory(16, 4, "clip_grad_norm=1.0")
    + """


def broken():
    return 42


class Crashes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 2)

    def forward(self, x):
        raise AssertionError("the probe must not run the model")


def crashes():
    batch = lambda n, device: (torch.randn(n, 8, device=device), torch.zeros(n, dtype=torch.long, device=device))
    return dlperf.user_workload("crashes", Crashes(), batch, torch.nn.functional.cross_entropy, batch_size=2)


def two(model=None):
    batch = lambda n, device: (torch.randn(n, 8, device=device), torch.zeros(n, dtype=torch.long, device=device))
    model = model or torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 3))
    return dlperf.user_workload("my-linear", model, batch, torch.nn.functional.cross_entropy, batch_size=2)


def one():
    return two(torch.nn.Linear(8, 3))


class Encoder(torch.nn.Module):  # a transformer's shape: blocks in an nn.ModuleList (the encoder's), no nn.Sequential

    def __init__(self, layers):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(8, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device)
        return self.head(self.encoder(x, mask=mask, is_causal=True).mean(1))


def encoder(layers):
    batch = lambda n, device: (torch.randn(n, 6, 8, device=device), torch.zeros(n, dtype=torch.long, device=device))
    return dlperf.user_workload("my-encoder", Encoder(layers), batch, torch.nn.functional.cross_entropy, batch_size=4)


class Keywords(torch.nn.Module):  # a Hugging Face model's signature: its inputs by name
    def __init__(self):
        super().__init__()
        self.embed, self.head = torch.nn.Embedding(50, 8), torch.nn.Linear(8, 3)

    def forward(self, input_ids, attention_mask):
        kept = attention_mask.unsqueeze(-1).float()
        return self.head((self.embed(input_ids) * kept).sum(1) / kept.sum(1))


def keywords():
    def batch(n, device):
        ids = torch.randint(0, 50, (n, 6), device=device)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        return inputs, torch.zeros(n, dtype=torch.long, device=device)

    return dlperf.user_workload("my-keywords", Keywords(), batch, torch.nn.functional.cross_entropy, batch_size=4)


def encoder_of_2():
    return encoder(2)


def encoder_of_3():
    return encoder(3)


def encoder_of_6():
    return encoder(6)
"""
)


@pytest.fixture
def user_source(tmp_path):
    path = tmp_path / "mini_model.py"
    path.write_text(USER_FILE)
    return str(path)


def user_workload(source: str, batch: int = 4) -> Workload:
    return Workload("mini", "user", {}, InputSpec("vector", (8,)), 3, batch, OptimizerSpec(), source=f"{source}:make")


def test_user_workload_trains(user_source):
    train = tb.build(user_workload(user_source, batch=6), "cpu", "fp32")
    assert train.params == 8 * 16 + 16 + 16 * 3 + 3
    assert train.inputs.shape == (6, 8)  # the planned batch size
    assert isinstance(train.optimizer, torch.optim.SGD) and train.clip_grad_norm == 1.0
    before = [p.detach().clone() for p in train.model.parameters()]
    train.step()
    assert not torch.equal(before[0], next(train.model.parameters()))
    assert train.count_flops()["flops_per_step"] == 6 * 6 * (8 * 16 + 16 * 3) - 2 * 6 * 8 * 16
    assert train.memory_of_step()["live_tensor_peak_bytes"] > 2 * train.params * 4


def test_checkpoint_refused_says_what_the_users_model_lacks_and_how_to_give_it(user_source):
    """`--modes checkpoint` of a user's nn.Sequential of two linear layers read "checkpoint needs a sequential trunk of
    at least 3 blocks (an nn.Sequential); my-linear has none", where the model is one, of two."""
    need = ("checkpoint needs an nn.Sequential of 3 or more modules, or an nn.ModuleList of 3 or more blocks (modules "
            "made of modules), to recompute in backward")  # fmt: skip
    for factory, said in (
        ("two", "my-linear's largest nn.Sequential, the model itself, has 2; to checkpoint it, put 3 or more of its "
                "layers in one nn.Sequential that forward calls"),
        ("one", "my-linear has neither; to checkpoint it, put its layers in an nn.Sequential, or its blocks in an "
                "nn.ModuleList, that forward calls"),
        ("encoder_of_2", "my-encoder's largest nn.ModuleList, its 'encoder.layers', has 2 blocks; to checkpoint "
                           "it, put 3 or more of its blocks in one nn.ModuleList that forward calls"),
    ):  # fmt: skip
        name = said.split("'")[0].split(" ")[0]  # the name the planner gave the workload, as its factory does
        w = Workload(name, "user", {}, InputSpec("vector", (8,)), 3, 2, OptimizerSpec(),
                     source=f"{user_source}:{factory}")  # fmt: skip
        with pytest.raises(NotImplementedError) as refused:
            tb.build(w, "cpu", "checkpoint")
        assert str(refused.value) == f"{need}: {said}"


def test_the_probe_says_the_checkpoint_refusal_a_search_leaves_the_mode_out_with(user_source):
    """`dlperf optimize` of a model checkpoint refuses started a process to be told so: the probe reads it from the
    model's modules (on the meta device, as it builds the model), the build's very words, and the plan's `Fit` leaves
    the mode out with them. A model it applies to says nothing."""
    from dlperf.frameworks.torch.user import probe_workload
    from dlperf.modes import Fit, left_out
    from dlperf.plan.workloads import resolve_workload

    source = f"{user_source}:encoder_of_2"
    said = probe_workload(source)["no_checkpoint"]
    with pytest.raises(NotImplementedError) as refused:
        tb.build(Workload("my-encoder", "user", {}, InputSpec("vector", (6, 8)), 3, 2, OptimizerSpec(), source=source),
                 "cpu", "checkpoint")  # fmt: skip
    assert said == str(refused.value)
    assert "no_checkpoint" not in probe_workload(f"{user_source}:encoder_of_3")
    planned = resolve_workload(source, "torch", 120.0).to_json()
    fit = Fit.of("cpu", planned)
    assert left_out("checkpoint", fit) == said and left_out("bf16+checkpoint", fit) == f"checkpoint: {said}"
    assert left_out("foreach", fit) is None


@pytest.mark.parametrize("layers", [3, 6])
def test_checkpoint_recomputes_each_block_of_a_module_list(user_source, layers):
    """A transformer keeps its blocks in an nn.ModuleList, not an nn.Sequential (the checkpoint mode refused
    nn.TransformerEncoder). Each block is checkpointed on its own: recomputed once in backward, the same training,
    less memory, the same FLOPs."""
    w = Workload("my-encoder", "user", {}, InputSpec("vector", (6, 8)), 3, 4, OptimizerSpec(),
                 source=f"{user_source}:encoder_of_{layers}")  # fmt: skip
    eager, ckpt = tb.build(w, "cpu", "fp32"), tb.build(w, "cpu", "checkpoint")
    assert ckpt.settings()["checkpoint"] == {"module": "encoder.layers", "blocks": layers, "segments": layers}
    calls = []
    for block in ckpt.model.encoder.layers:  # an inner layer: the block's own forward is checkpoint's wrapper
        inner = block.linear1.forward
        block.linear1.forward = lambda x, inner=inner: calls.append(1) or inner(x)
    ckpt.step()
    assert len(calls) == 2 * layers  # once in forward, once more when backward recomputes its block
    eager.step()
    for p, q in zip(eager.trainable, ckpt.trainable, strict=True):  # the same training, just recomputed
        torch.testing.assert_close(p, q)
    assert ckpt.memory_of_step()["live_tensor_peak_bytes"] < eager.memory_of_step()["live_tensor_peak_bytes"]
    assert ckpt.count_flops() == eager.count_flops()  # recomputation is not model work


def test_a_batch_of_named_inputs_is_passed_by_name(user_source):
    """A Hugging Face-style batch, a dict of input_ids and attention_mask, failed every cell: "forward() missing 1
    required positional argument: 'attention_mask'". It is passed as keyword arguments, as HF's Trainer does, in the
    timed step, the FLOP count and the memory trace; a loaded batch is copied into it key by key (a loader's dict may
    list them in another order)."""
    w = Workload("my-keywords", "user", {}, InputSpec("vector", (6,)), 3, 4, OptimizerSpec(),
                 source=f"{user_source}:keywords")  # fmt: skip
    train = tb.build(w, "cpu", "fp32")
    before = train.model.head.weight.detach().clone()
    train.step()
    assert not torch.equal(before, train.model.head.weight)
    assert train.count_flops()["flops_per_step"] > 0 and train.memory_of_step()["live_tensor_peak_bytes"] > 0
    ids = torch.randint(0, 50, (4, 6))
    train.load({"attention_mask": torch.zeros_like(ids), "input_ids": ids}, torch.ones(4, dtype=torch.long))
    assert torch.equal(train.inputs["input_ids"], ids) and not train.inputs["attention_mask"].any()
    assert train.targets.tolist() == [1] * 4


def test_probe_describes_a_user_workload(user_source):
    answer = tb.probe({"what": "workload", "source": f"{user_source}:make"})
    assert answer["name"] == "mini" and answer["params"] == 195 and answer["batch"] == 4
    assert answer["input_shape"] == [8] and answer["input_dtype"] == "float32" and "input_names" not in answer
    json.dumps(answer)
    named = tb.probe({"what": "workload", "source": f"{user_source}:keywords"})  # the recipe's model(**x)
    assert named["input_names"] == ["input_ids", "attention_mask"] and named["input_shape"] is None


def test_probe_does_not_run_the_model(user_source):
    answer = tb.probe({"what": "workload", "source": f"{user_source}:crashes"})
    assert answer["name"] == "crashes" and answer["params"] == 8 * 2 + 2 and answer["input_shape"] == [8]


def test_probe_lets_user_errors_through(user_source):
    with pytest.raises(UsageError, match="user_workload"):
        tb.probe({"what": "workload", "source": f"{user_source}:broken"})


def test_probe_env_lists_the_cpu():
    answer = tb.probe({"what": "env"})
    assert answer["framework"] == "torch" and answer["version"] == torch.__version__
    assert {"name": "cpu"} in answer["devices"]
    assert {"cuda", "cudnn", "debug", "cpu_capability"} <= set(answer["build"])
    json.dumps(answer)


def test_the_probe_measures_how_fast_each_reduced_precision_multiplies_here():
    speed = tb.probe_env()["precision_speed"]["cpu"]
    assert set(speed) == {"bf16", "fp16"} and all(v > 0 for v in speed.values())


def test_bf16_emulated_as_on_an_avx2_only_cpu_is_measured_as_a_trap():
    # oneDNN capped at AVX2 has no bf16 instructions, as on an AMD Zen 3: its bf16 products are emulated
    import os
    import subprocess
    import sys

    from dlperf.plan.warnings import TRAP_PRECISION

    code = "from dlperf.frameworks.torch.backend import precision_speed; print(precision_speed()['bf16'])"
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert float(out.stdout) < TRAP_PRECISION


@pytest.mark.parametrize("name", ["tiny-lstm", "tiny-resnet-56"])
def test_the_timed_step_dispatches_the_operators_of_a_plain_training_loop_and_no_host_sync(name):
    # on an H100 dlperf's LSTM step took 1.19x a plain loop's: the step itself adds no operator (no .item(), no
    # allocation, the same clipping), only the returned loss's detach, a view that launches nothing
    import collections

    from torch.utils._python_dispatch import TorchDispatchMode

    from dlperf.frameworks.torch.models import build_model

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.count = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.count[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    workload = BUILTIN[name]
    step = tb.build(workload, "cpu", "fp32")
    torch.manual_seed(0)
    model = build_model(workload)
    spec, x, y = workload.optimizer, step.inputs, step.targets
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum)

    def plain():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, -2), y.flatten())
        loss.backward()
        if spec.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), spec.clip_grad_norm)
        optimizer.step()

    for _ in range(2):  # optimizer state exists, as in the timed steps
        step.step()
        plain()
    with Ops() as ours:
        step.step()
    with Ops() as theirs:
        plain()
    assert ours.count - theirs.count == collections.Counter({"aten.detach": 1}) and not theirs.count - ours.count
    assert "aten._local_scalar_dense" not in ours.count  # .item() or a Python branch on a tensor: a host sync


SHARED_TRACE = [
    ("tiny-resnet-56", "fp32", True),
    ("tiny-fcn-r", "bf16", True),
    ("tiny-lstm", "fp32", False),  # counted with the RNN unfused: another step
    ("tiny-resnet-56", "checkpoint", False),  # counted without recomputation: another step
]


@pytest.mark.parametrize(("name", "mode", "shared"), SHARED_TRACE)
def test_one_traced_step_gives_the_flops_and_the_live_bytes_where_it_is_the_same_step(name, mode, shared):
    # a traced step costs several plain ones: the first process of a cell counted FLOPs in one and traced the
    # memory in another; where both trace the very same step (eager, no RNN run unfused, no checkpointing switched
    # off) one does, and the figure is the one a separate trace gives
    def built():
        step = tb.build(BUILTIN[name], "cpu", mode)
        for _ in range(2):
            step.step()
        return step

    alone = built()
    expected = alone.memory_of_step()["live_tensor_peak_bytes"]
    both = built()
    flops = both.count_flops()
    assert (both._live_peak is not None) == shared
    assert both.memory_of_step()["live_tensor_peak_bytes"] == expected and flops["flops_per_step"] > 0
    assert both._live_peak is None  # used once


@pytest.mark.parametrize("optimizer", [OptimizerSpec("sgd", lr=0.1, momentum=0.9), OptimizerSpec("adam", lr=1e-3),
                                       OptimizerSpec("rmsprop", lr=1e-3)])  # fmt: skip
def test_steps_undone_leave_the_next_step_the_first_update(optimizer):
    """cuda_graphs warms up three steps before its capture (`CudaGraphStep`), and undoes them (`untrained`): the H200
    check found its first update 4.2-4.7x fp32's, four SGD-momentum steps counted as one. Undone steps, then one step,
    must equal one step from the start: parameters, BatchNorm's statistics, and the optimizer's state (momentum,
    moments, step count, average), here on the CPU for each optimizer the workloads use."""
    from dataclasses import replace

    from dlperf.frameworks.torch.step import untrained

    workload = replace(BUILTIN["tiny-resnet-56"], optimizer=optimizer)
    warmed, fresh = tb.build(workload, "cpu", "fp32"), tb.build(workload, "cpu", "fp32")
    untrained(warmed, lambda: [warmed.iteration() for _ in range(3)])
    for _ in range(2):
        warmed.iteration(), fresh.iteration()
    for p, q in zip([*warmed.model.parameters(), *warmed.model.buffers()],
                    [*fresh.model.parameters(), *fresh.model.buffers()], strict=True):  # fmt: skip
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert warmed.optimizer.state, "the steps created the optimizer's state"
    for p, q in zip(warmed.optimizer.state_dict()["state"].values(), fresh.optimizer.state_dict()["state"].values(),
                    strict=True):  # fmt: skip
        for key in q:
            torch.testing.assert_close(torch.as_tensor(p[key]), torch.as_tensor(q[key]), rtol=1e-5, atol=1e-6)
