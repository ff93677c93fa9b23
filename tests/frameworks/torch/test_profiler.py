"""The torch profiler's breakdown of a step: categories that sum to the step, constructed models whose bound is known,
the modules, the FLOPs, and the trace with its cap. Shares are compared with each other, never with a time."""

import gzip
import json

import pytest

from conftest import require

torch = require("torch")

from dlperf.frameworks.common import profiling  # noqa: E402
from dlperf.frameworks.torch import backend as tb  # noqa: E402
from dlperf.frameworks.torch import profiler  # noqa: E402
from dlperf.protocol import Profiled  # noqa: E402
from dlperf.vocab import Category  # noqa: E402
from dlperf.workloads.shi2016 import BUILTIN  # noqa: E402

CAP = 50 * 2**20


def profiled(train, steps=2, warmup=1, trace=None, cap=CAP) -> dict:
    for _ in range(warmup):
        train.step()
    return profiler.profile(train, steps, trace, cap)


def constructed(forward, inputs, params, momentum=0.0) -> tb.TorchStep:
    """A TorchStep of `forward` over `inputs`, training `params` by SGD, the loss the output's sum."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.params = torch.nn.ParameterList(params)

        def forward(self, x):
            return forward(self, x)

    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=momentum)
    return tb.TorchStep(model, (inputs, None), lambda out, _: out.sum(), optimizer, None, torch.device("cpu"))


def shares(result: dict) -> dict[str, float]:
    return {k: v / result["step_s"] for k, v in result["categories"].items()}


def largest(result: dict) -> str:
    return max(result["categories"], key=result["categories"].get)


@pytest.fixture(scope="module", autouse=True)
def two_threads():
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(saved)


@pytest.mark.parametrize(  # tiny-resnet-56: 6 s, with the slow tests
    "name", ["tiny-fcn-r", pytest.param("tiny-resnet-56", marks=pytest.mark.slow), "tiny-lstm"]
)
def test_the_categories_of_a_tiny_workload_sum_to_its_step(name):
    result = profiled(tb.build(BUILTIN[name], "cpu", "fp32"))
    assert set(result["categories"]) <= {c.value for c in Category}
    assert sum(result["categories"].values()) == pytest.approx(result["step_s"], rel=1e-9)
    assert all(v >= 0 for v in result["categories"].values())
    assert result["categories"]["matmul"] > 0 and result["categories"]["loss"] > 0
    assert result["categories"]["optimizer"] > 0 and result["categories"]["host"] > 0
    assert result["kernels_per_step"] is None and result["ops_per_step"] > 50
    assert 0 < result["leaf_ops_per_step"] < result["ops_per_step"]
    assert 0 < len(result["top_ops"]) <= profiling.TOP_OPS
    assert all(op["calls"] > 0 and op["shapes"].startswith("[") for op in result["top_ops"])
    assert Profiled(**result).categories == result["categories"]  # exactly the event's fields


def test_the_backends_profile_measures_what_dispatching_one_operator_costs_after_it():
    """The dispatch floor's cost where `dlperf peak` measured none (`report/profile.dispatch_cost`): a chain of
    in-place adds timed in the profiled process, outside the profile."""
    train = tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32")
    train.step()
    result = tb.profile(train, 2, None, CAP)
    assert 1e-8 < result["dispatch_s"] < 1e-3  # torch dispatches a tiny operator in about 1-10 µs
    assert Profiled(**result).dispatch_s == result["dispatch_s"]
    assert not torch.autograd.profiler._is_profiler_enabled  # measured after the profile closed


def test_the_profilers_first_cycle_warning_of_torch_2_11_is_not_left_on_the_childs_stderr(monkeypatch):
    """torch 2.11's profiler warns "Profiler clears events at the end of each cycle" as its first cycle starts (torch
    2.13 only from a second): a profile is one cycle, and that line would be all a crashed profile child's reason
    said. Here 2.13's profiler is made to warn as 2.11's does."""
    import warnings

    prepare = torch.profiler.profile.prepare_trace

    def as_in_2_11(self):
        warnings.warn(
            "Warning: Profiler clears events at the end of each cycle.Only events from the current cycle will be "
            "reported.To keep events across cycles, set acc_events=True.",
            UserWarning,
            stacklevel=2,
        )
        return prepare(self)

    monkeypatch.setattr(torch.profiler.profile, "prepare_trace", as_in_2_11)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = profiled(tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32"))
    assert result["step_s"] > 0 and [str(w.message) for w in caught] == []


def test_many_tiny_ops_are_mostly_host_time():
    def chain(model, x):
        for _ in range(300):
            x = x + model.params[0]
        return x

    def large(model, x):
        for _ in range(10):
            x = x + model.params[0]
        return x

    result = profiled(constructed(chain, torch.ones(4), [torch.nn.Parameter(torch.zeros(4))]))
    # the same number of Python steps per op on 2**22 elements: the kernels' time, not the host's, grows. Measured
    # side by side, so a busy machine (which slows both) cannot turn the comparison; alone, the tiny chain's host
    # share ranged 46-70% on a loaded 2-core machine, and elementwise came first once
    big = profiled(constructed(large, torch.ones(2**22), [torch.nn.Parameter(torch.zeros(2**22))]))
    assert shares(result)["host"] > 0.3 and shares(result)["host"] > 4 * shares(big)["host"], (shares(result),
                                                                                              shares(big))  # fmt: skip
    assert largest(result) in ("host", "elementwise"), shares(result)
    assert result["ops_per_step"] >= 600  # 300 additions forward, their backward too


def test_one_large_matrix_product_is_mostly_matmul():
    linear = torch.nn.Linear(1024, 1024)
    result = profiled(constructed(lambda m, x: linear(x), torch.randn(1024, 1024), list(linear.parameters())))
    assert largest(result) == "matmul", shares(result)
    assert result["flops"]["matmul"] == 2 * 2 * 1024**3  # forward and the weight's gradient (the input has none)


def test_attention_on_the_cpu_is_matmul_not_other():
    """scaled_dot_product_attention runs on the CPU as _scaled_dot_product_flash_attention_for_cpu and its backward,
    names the list missed: a transformer block's profile put its attention under `other` (39% of the step), none of
    it under matmul."""
    k, v = (torch.nn.Parameter(torch.randn(8, 4, 256, 64)) for _ in range(2))
    attention = lambda m, q: torch.nn.functional.scaled_dot_product_attention(q, m.params[0], m.params[1])  # noqa: E731
    result = profiled(constructed(attention, torch.randn(8, 4, 256, 64), [k, v]))
    assert result["categories"].get("other", 0) == 0 and result["categories"]["matmul"] > 0, shares(result)


def test_a_long_elementwise_chain_is_mostly_elementwise():
    def chain(model, x):
        x = x * model.params[0]
        for _ in range(20):
            x = (x * 1.0001 + 0.5).relu()
        return x

    result = profiled(constructed(chain, torch.randn(2**20), [torch.nn.Parameter(torch.ones(()))]))
    assert largest(result) == "elementwise", shares(result)
    assert result["bytes"]["elementwise"] > 20 * 3 * 4 * 2**20  # at least each op's input and output, forward


def test_dropouts_random_draws_are_said_where_they_take_a_tenth_of_the_step():
    """A 3-layer transformer with dropout 0.1 on 2 CPU threads: 'other 33%' and no word of what it was, most of it
    aten::bernoulli_, dropout's masks drawn element by element: neither memory traffic nor matrix products, it stays
    `other`, and a note says what it holds."""
    w = torch.nn.Parameter(torch.randn(64, 2048) / 8)
    dropped = lambda m, x: torch.nn.functional.dropout(x @ m.params[0], 0.5, training=True)  # noqa: E731
    result = profiled(constructed(dropped, torch.randn(256, 64), [w]))
    said = [n for n in result["notes"] if n.startswith("random draws (aten::bernoulli_: dropout's masks")]
    assert len(said) == 1 and said[0].endswith("of the step, under other"), result["notes"]
    share = int(said[0].split(" take ")[1].split("%")[0]) / 100
    assert share <= shares(result)["other"] + 0.01  # what the note counts is within `other`
    assert not any(n.startswith("random draws") for n in profiled(constructed(
        lambda m, x: x @ m.params[0], torch.randn(256, 64), [w]))["notes"])  # fmt: skip


NAMES = {
    "aten::addmm": Category.MATMUL,
    "aten::convolution_backward": Category.MATMUL,
    "aten::mkldnn_rnn_layer_backward": Category.MATMUL,
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": Category.MATMUL,  # was `other`
    "aten::_flash_attention_forward": Category.MATMUL,
    "aten::_efficient_attention_backward": Category.MATMUL,
    "aten::native_batch_norm_backward": Category.NORMALIZATION,
    "aten::max_pool2d_with_indices_backward": Category.POOLING,
    "aten::adaptive_avg_pool2d": Category.POOLING,
    "aten::nll_loss_forward": Category.LOSS,
    "aten::relu_": Category.ELEMENTWISE,
    "aten::threshold_backward": Category.ELEMENTWISE,
    "aten::_foreach_add_": Category.ELEMENTWISE,
    "aten::copy_": Category.COPY,
    "aten::_to_copy": Category.COPY,
    # views and allocations are the framework's own time; the copies among them and their backward are copies
    "aten::view": Category.HOST,
    "aten::empty": Category.HOST,
    "aten::empty_strided": Category.HOST,
    "aten::as_strided_": Category.HOST,
    "aten::resize_": Category.HOST,
    "aten::t": Category.HOST,
    "aten::slice": Category.HOST,
    "aten::narrow": Category.HOST,
    "aten::detach": Category.HOST,
    "aten::resolve_conj": Category.HOST,
    "aten::_local_scalar_dense": Category.HOST,  # fp16's overflow check read on the host
    "aten::cudnn_is_acceptable": Category.HOST,  # the LSTM's check
    "aten::slice_backward": Category.COPY,
    "aten::constant_pad_nd": Category.COPY,
    "aten::cat": Category.COPY,
    "aten::index_select": Category.ELEMENTWISE,  # the embedding's lookup (lstm)
    "aten::embedding_dense_backward": Category.ELEMENTWISE,  # was `other`: "_backward" was stripped before the lookup
    "aten::zeros": Category.ELEMENTWISE,
    "aten::bernoulli_": Category.OTHER,  # dropout's masks: a generator's arithmetic, said in a note (`random_note`)
    "aten::_safe_softmax": Category.ELEMENTWISE,  # attention's softmax (nn.MultiheadAttention): was `other`
    "CompiledFxGraph": Category.OTHER,
}


@pytest.mark.parametrize("name", list(NAMES))
def test_classify_by_operator_name(name):
    assert profiler.classify(name) is NAMES[name]


def test_leaf_ops_are_the_operators_doing_the_work_not_their_wrappers_views_or_allocations():
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    a, linear = torch.randn(4, 5), torch.nn.Linear(5, 6)
    with torch.no_grad(), torch.profiler.profile() as prof:
        torch.nn.functional.conv2d(x, w)  # conv2d, convolution, _convolution, mkldnn_convolution (and an empty)
        linear(a)  # linear, t, addmm
        a.view(20).unsqueeze(0).t()
    events = list(prof.events())
    assert profiler.leaf_ops(events) == 2
    assert sum(profiler.is_operator(e) for e in events) >= 8


def test_modules_forward_and_backward_and_the_labels_come_off():
    train = tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32")
    loss_fn = train.loss_fn
    result = profiled(train, steps=4)
    names = [m["name"] for m in result["modules"]]
    assert names == ["layers.0", "layers.1", "layers.2", "layers.3"]  # a ModuleList's layers: it is never called
    assert all(m["forward_s"] > 0 and m["backward_s"] > 0 for m in result["modules"])
    # per step, and parts of it: the layers one after another, then their backward (35-80% of a step here)
    assert sum(m["forward_s"] + m["backward_s"] for m in result["modules"]) <= result["step_s"]
    assert train.loss_fn is loss_fn and "_clip" not in vars(train)
    assert all(not layer._forward_hooks and not layer._forward_pre_hooks for layer in train.model.layers)


def test_the_loss_and_its_backward_are_loss_not_elementwise():
    """log_softmax is the loss's here (cross-entropy), found by its label, its backward by autograd's sequence."""
    result = profiled(tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32"))
    loss_ops = {
        "aten::_log_softmax",
        "aten::_log_softmax_backward_data",
        "aten::nll_loss_forward",
        "aten::nll_loss_backward",
    }
    loss_self_s = sum(op["self_s"] for op in result["top_ops"] if op["name"] in loss_ops)
    assert loss_self_s > 0 and result["categories"]["loss"] >= loss_self_s * (1 - 1e-9)


def test_the_trace_is_gzip_chrome_json(tmp_path):
    path = tmp_path / "t.json.gz"
    result = profiled(tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32"), trace=str(path))
    assert result["trace"] == str(path)
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    assert isinstance(trace["traceEvents"], list)
    assert any(e.get("name") == "aten::addmm" for e in trace["traceEvents"])


def test_a_trace_above_the_cap_is_not_kept_and_a_note_says_why(tmp_path):
    path = tmp_path / "t.json.gz"
    result = profiled(tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32"), trace=str(path), cap=1000)
    assert result["trace"] is None and not path.exists()
    assert any("above the cap of 1000 bytes" in note for note in result["notes"])


def test_a_trace_its_folder_refuses_is_not_kept_and_the_profile_is(tmp_path, monkeypatch):
    """A full --trace-dir (a 4 KiB tmpfs) failed the whole profile ('profile failed: OSError: [Errno 28] No space
    left on device'): its figures, measured, were lost with the trace."""

    def full(prof, path):
        with open(path, "wb") as f:
            f.write(b"{")  # what fitted before the disk was full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", full)
    path = tmp_path / "t.json.gz"
    result = profiled(tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32"), trace=str(path))
    assert result["trace"] is None and not path.exists()
    assert f"no trace kept: writing it in {tmp_path} failed (No space left on device)" in " ".join(result["notes"])
    assert sum(result["categories"].values()) == pytest.approx(result["step_s"], rel=1e-9)


@pytest.mark.gpu
def test_cuda_categories_are_kernel_times_and_sum_to_the_step():
    result = profiled(tb.build(BUILTIN["tiny-resnet-56"], "cuda:0", "fp32"), steps=3, warmup=3)
    assert sum(result["categories"].values()) == pytest.approx(result["step_s"], rel=1e-9)
    assert result["kernels_per_step"] > 0 and result["categories"]["matmul"] > 0
    assert {"host", "idle"} <= set(result["categories"])


def test_device_gaps_are_the_hosts_when_the_next_work_was_launched_after_the_device_fell_idle():
    """The CUDA arithmetic on constructed activity: two overlapping kernels, then one already launched (a gap the
    device idled through) and one launched late (a gap the host caused)."""
    device = [(0, 10, "k1", 1), (5, 15, "k2", 2), (20, 30, "k3", 3), (40, 50, "Memcpy HtoD (Pageable -> Device)", 4)]
    launches = {1: 0, 2: 1, 3: 12, 4: 35}
    busy, total, host, gaps = profiler.busy_and_gaps(device, launches)
    assert (busy, total, host, gaps) == (35, 40, 10, 15)
    assert profiler.memcpy_kind(device[3][2]) is Category.COPY_H2D


def test_operator_time_above_the_step_is_scaled_to_it():
    filled = profiler.fill_to_step({"matmul": 3.0, "elementwise": 1.0}, 2.0, Category.HOST)
    assert filled == {"matmul": 1.5, "elementwise": 0.5, "host": 0.0}
    assert profiler.fill_to_step({"matmul": 1.0}, 2.0, Category.HOST) == {"matmul": 1.0, "host": 1.0}


def test_fp16_gradient_unscaling_is_the_optimizers_and_its_labels_come_off():
    train = tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp16")
    train.step()
    with profiler.labelled(train), torch.profiler.profile() as prof:
        train.step()
    events = list(prof.events())
    unscale = [e for e in events if "non_finite_check_and_unscale" in e.name]
    assert unscale and {profiler.category_of(e, profiler.phases(events)) for e in unscale} == {Category.OPTIMIZER}
    assert not {"unscale_", "update"} & set(vars(train.scaler))


def test_the_optimizers_bytes_are_its_own_as_its_time_is():
    """SGD with momentum over a 1024x1024 weight streams it, its gradient and its momentum buffer: those bytes are the
    optimizer's, not element-wise work's, or element-wise bytes/s would divide the update's bytes by other seconds."""
    linear = torch.nn.Linear(1024, 1024)
    result = profiled(constructed(lambda m, x: linear(x), torch.randn(8, 1024), list(linear.parameters()), 0.9))
    weight = 1024 * 1024 * 4
    assert result["bytes"]["optimizer"] >= 3 * weight, result["bytes"]
    assert result["bytes"].get("elementwise", 0) < weight, result["bytes"]  # the forward's few element-wise bytes


def test_a_compiling_mode_gives_no_bytes_since_its_fused_work_is_timed_under_other():
    """fcn-s at bf16+compile showed element-wise at 2400 GB/s: the eager step's bytes over the seconds of the few
    element-wise operators left outside the compiled graph. The flag alone decides, so no compile runs here."""
    train = tb.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32")
    train.compiles = True  # as a compiling mode's step says of itself
    notes: list[str] = []
    counted = profiler.counted_step(train, notes)
    assert counted["bytes"] == {} and counted["flops"]["matmul"] > 0
    assert any("not given under a compiling mode" in note for note in notes)


def test_a_custom_ops_registered_backward_is_its_work_not_dispatch():
    """A torch.library custom op's backward runs in an autograd node named GeneratedBackwardFor_...: no "::" in the
    name, so its time (a numpy backward's) was no operator's and fell into `host`, and the step read launch-bound."""
    import time

    @torch.library.custom_op("dlperf_test::slow_square", mutates_args=())
    def slow_square(x: torch.Tensor) -> torch.Tensor:
        return x * x

    @slow_square.register_fake
    def _(x):
        return torch.empty_like(x)

    def backward(ctx, grad):
        time.sleep(0.005)  # the user's own backward: work the profiler sees only as the node's self time
        return grad * 2

    slow_square.register_autograd(backward)
    x = torch.randn(8, requires_grad=True)
    with torch.profiler.profile() as prof:
        slow_square(x).sum().backward()
    events = list(prof.events())
    [node] = [e for e in events if e.name.startswith(profiler.CUSTOM_BACKWARD) and e.self_cpu_time_total > 4000]
    assert profiler.is_operator(node) and profiler.classify(node.name) is Category.OTHER
    assert any(op["name"] == node.name for op in profiler.top_ops(events, 1, cuda=False))
