"""Where a PyTorch train step's time goes: torch.profiler over a few steady steps, each operator's self time put in
a `dlperf.vocab.Category`; the FLOPs and bytes of one more step by category; the top operators, the top-level
modules' forward and backward time, and the gzip Chrome trace. The backend's `profile` (see `dlperf.frameworks`).

Runs only in the profile child (`worker/profile.py`), never in a timed process: the labels it needs (the loss,
the optimizer, each top-level module) are put on the step for the profiled steps only, and taken off after.

On a CPU the categories are the operators' self times (nested operators are not counted twice) and `host` the rest
of the step's wall time: Python, dispatch, autograd's bookkeeping and the profiler's own cost per event. On CUDA they
are the kernels' device times, each kernel in its launching operator's category (the one torch linked it to, else
the innermost one open on the launching thread at its launch: `cuda_activity`), scaled to the time the device was busy;
the rest of the step is `host` where the device waited for the next launch and `idle` where it waited with the work
already issued. Holistic Trace Analysis (0.5.0) was evaluated for this: it installs
beside torch 2.13, but brings 82 packages (jupyterlab, a Jupyter server, pandas, plotly) into the environment a
worker runs in, and reads a trace file from disk (a trace above the cap is not kept); its temporal breakdown is
the same kernel-interval union (`cuda_activity.busy_and_gaps`), and its idle breakdown the same host-wait test.
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.profiler import ProfilerActivity, record_function
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from dlperf.frameworks.common.profiling import fill_to_step, ranked, uneven, window, within_cap, written
from dlperf.frameworks.torch import cuda_activity
from dlperf.frameworks.torch.cuda_activity import CudaActivity, busy_and_gaps, memcpy_kind, note_attribution
from dlperf.vocab import Category

LOSS, OPTIMIZER, FORWARD = "dlperf.loss", "dlperf.optimizer", "dlperf.forward."
DATA = "dlperf.data"  # a loader cell's wait for its batch (`--data`: the feed's next batch and its copy issued)
OPTIMIZER_LABELS = ("Optimizer.", OPTIMIZER)  # torch labels step and zero_grad itself; clipping and scaling are ours
BACKWARD_NODE = "autograd::engine::evaluate_function:"
NOT_OPERATORS = ("autograd::", "torch::autograd", *cuda_activity.LABELS, "cuda")  # bookkeeping, labels, calls

# Operator names (without "aten::" and a trailing "_") by category; backward ops end in "_backward" and follow
# their forward op. Anything element-wise not listed falls to `other`, never silently to a wrong kind.
MATMUL = {
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "mv", "addmv", "dot", "einsum", "convolution",
    "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "cudnn_convolution", "cudnn_convolution_transpose", "mkldnn_convolution", "slow_conv2d_forward",
    "_slow_conv2d_forward", "thnn_conv2d", "_nnpack_spatial_convolution", "lstm", "gru", "rnn_tanh", "rnn_relu",
    "lstm_cell", "gru_cell", "rnn_tanh_cell", "mkldnn_rnn_layer", "_cudnn_rnn", "_thnn_fused_lstm_cell",
    "mkldnn_linear", "_scaled_dot_product_attention", "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention", "_addmm_activation",
    "_convolution_pointwise", "_linear_pointwise",
    # the fused attention kernels each backend dispatches to (on the CPU, flash_attention_for_cpu)
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable", "_flash_attention_forward", "_flash_attention",
    "_efficient_attention_forward", "_efficient_attention",  # (the last two: their backward's, "_backward" stripped)
}  # fmt: skip
NORMALIZATION = {
    "batch_norm", "native_batch_norm", "_batch_norm_impl_index", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "cudnn_batch_norm", "miopen_batch_norm", "layer_norm",
    "native_layer_norm", "group_norm", "native_group_norm", "instance_norm", "rms_norm", "_fused_rms_norm",
    "_batch_norm_with_update", "batch_norm_elemt", "batch_norm_stats",
}  # fmt: skip
POOLING_PREFIXES = ("max_pool", "avg_pool", "adaptive_max_pool", "adaptive_avg_pool", "fractional_max_pool")
LOSS_OPS = {
    "cross_entropy_loss", "nll_loss", "nll_loss2d", "nll_loss_nd", "nll_loss_forward", "nll_loss2d_forward", "mse_loss",
    "l1_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss", "kl_div",
}  # fmt: skip
COPY = {
    "copy", "to", "_to_copy", "contiguous", "clone", "_copy_from", "_copy_from_and_resize", "cat", "stack",
    "constant_pad_nd", "pad", "reflection_pad2d", "replication_pad2d", "flip", "roll", "repeat",
    "slice", "select", "as_strided",  # their backward (slice_backward, ...): the gradient copied into zeros
}  # fmt: skip
# Views and allocations: shapes, strides and the allocator, no arithmetic and no kernel; with them the framework's
# checks and a scalar read to the host (fp16's overflow test; on CUDA its copy is a Memcpy, `copy_d2h`). Their self
# time is the framework's own, so `host` (on CUDA they launch no kernel and count nowhere); the floor leaves them out.
NO_KERNEL = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize", "as_strided", "view",
    "_unsafe_view", "_reshape_alias", "reshape", "view_as", "expand", "expand_as", "t", "transpose", "permute",
    "unsqueeze", "squeeze", "slice", "select", "narrow", "detach", "alias", "flatten", "unflatten", "split",
    "split_with_sizes", "chunk", "unbind", "resolve_conj", "resolve_neg", "lift_fresh", "result_type", "set",
    "item", "_local_scalar_dense", "cudnn_is_acceptable",
}  # fmt: skip
# Random draws (dropout's masks: on a CPU, aten::bernoulli_ took 30% of a small transformer's step): `other`, neither
# memory traffic nor matrix products (a random number generator's arithmetic), said in a note (`random_note`)
RANDOM = ("bernoulli", "uniform", "normal", "random", "rand", "randn", "rand_like", "randn_like", "randint",
          "exponential", "multinomial")  # fmt: skip
RANDOM_NOTE_SHARE = 0.10  # a share of the step worth a note
ELEMENTWISE = {
    "add", "sub", "mul", "div", "neg", "pow", "sqrt", "rsqrt", "exp", "log", "log1p", "abs", "sign", "reciprocal",
    "addcmul", "addcdiv", "lerp", "clamp", "clamp_min", "clamp_max", "where", "maximum", "minimum", "fill", "zero",
    "zeros_like", "ones_like", "relu", "threshold", "gelu", "silu", "sigmoid", "tanh", "softmax", "_softmax",
    "log_softmax", "_log_softmax", "_log_softmax_backward_data", "_softmax_backward_data", "dropout",
    "native_dropout", "hardtanh", "leaky_relu", "elu", "hardswish", "hardsigmoid", "mish", "softplus", "sum", "mean",
    "norm", "linalg_vector_norm", "max", "min", "amax", "amin", "argmax", "prod", "var", "std",
    "eq", "ne", "lt", "gt", "le", "ge", "logical_not", "bitwise_and", "masked_fill", "rsub", "square",
    "cumsum", "embedding", "embedding_dense", "isfinite", "isinf", "isnan", "nan_to_num", "_amp_update_scale",
    "_amp_foreach_non_finite_check_and_unscale", "fused_dropout", "_masked_scale", "native_dropout_backward",
    "zeros", "ones", "full", "index_select", "gather", "scatter", "scatter_add", "index_add", "index", "index_put",
    "_safe_softmax",
}  # fmt: skip
# (embedding runs as index_select, a gather of rows; its backward, embedding_dense_backward, a scatter-add: the
# memory traffic of an element-wise op, no arithmetic to speak of)


def classify(name: str) -> Category:
    """The category of one operator by its name ("aten::addmm", "aten::relu_", "aten::convolution_backward")."""
    if _is_view_or_allocation(name):
        return Category.HOST
    base = name.split("::", 1)[-1].split(".", 1)[0].removesuffix("_").removesuffix("_backward")
    for category, names in ((Category.MATMUL, MATMUL), (Category.NORMALIZATION, NORMALIZATION),
                            (Category.LOSS, LOSS_OPS), (Category.COPY, COPY)):  # fmt: skip
        if base in names:
            return category
    if base.startswith(POOLING_PREFIXES):
        return Category.POOLING
    if base in ELEMENTWISE or base.startswith(("_foreach_", "_fused_")):
        return Category.ELEMENTWISE
    # What stays `other`: Inductor's compiled graphs (their fused kernels are not split by kind), custom and
    # user-defined operators, and any ATen operator not listed above: no guess.
    return Category.OTHER


def _is_view_or_allocation(name: str) -> bool:
    """Not its backward: slice_backward copies the gradient into a zero tensor, a kernel."""
    return name.split("::", 1)[-1].split(".", 1)[0].removesuffix("_") in NO_KERNEL


def leaf_ops(events: list) -> int:
    """Operators that do work themselves: no operator below them does, and they are no view or allocation (a conv2d
    calls convolution, _convolution and mkldnn_convolution: one; a linear, t and addmm: one). On a device, the
    operators that launch a kernel; what the dispatch floor counts. An operator that works and also calls one that
    does (a convolution's backward filling a gradient) counts through what it calls: a floor, not an estimate."""
    below: dict[int, bool] = {}

    def works(event) -> bool:
        return is_operator(event) and not _is_view_or_allocation(event.name)

    def work_below(event) -> bool:
        if id(event) not in below:
            below[id(event)] = any(works(c) or work_below(c) for c in event.cpu_children)
        return below[id(event)]

    return sum(1 for e in events if works(e) and not work_below(e))


def is_operator(event) -> bool:
    """A framework operator (an ATen op or a compiled graph's call), not a label or autograd's bookkeeping, and not a
    kernel: torch lists each kernel as a device-side event too, and a kernel's name has "::" in it."""
    if event.device_type != torch.autograd.DeviceType.CPU:
        return False
    name = event.name
    if "CompiledFxGraph" in name or name.startswith(CUSTOM_BACKWARD):
        return True
    return "::" in name and not name.startswith(NOT_OPERATORS)


# The autograd node of a torch.library custom op's registered backward: the user's backward runs inside it, its time
# the node's own (a numpy backward's 7 ms a step were read as dispatch, `host`, and the step launch-bound)
CUSTOM_BACKWARD = "GeneratedBackwardFor_"


# ----------------------------------------------------------------------------------------------------------------------
# Labels put on the step for the profiled steps only


@contextlib.contextmanager
def labelled(train) -> Iterator[list[str]]:
    """The loss, the optimizer's extras (clipping, fp16's gradient unscaling and scale update) and each top-level
    module's forward, labelled with record_function while the context lasts (as attributes of the objects
    themselves, taken off after). Yields the notes on what could not be labelled."""
    notes: list[str] = []
    targets = [(train, "loss_fn", LOSS), (train, "_clip", OPTIMIZER)]
    if getattr(train, "feed", None) is not None:  # a loader cell: the step waits for its batch first
        targets.append((train.feed, "wait", DATA))
    if getattr(train, "scaler", None) is not None:
        targets += [(train.scaler, "unscale_", OPTIMIZER), (train.scaler, "update", OPTIMIZER)]
    saved = [(obj, attr, vars(obj).get(attr, _MISSING)) for obj, attr, _ in targets if hasattr(obj, attr)]
    for obj, attr, label in targets:
        if hasattr(obj, attr):
            setattr(obj, attr, _under(label, getattr(obj, attr)))
    hooks = _module_hooks(train, notes)
    try:
        yield notes
    finally:
        for hook in hooks:
            hook.remove()
        for obj, attr, value in saved:
            if value is _MISSING:
                delattr(obj, attr)  # the class's method shows again
            else:
                setattr(obj, attr, value)


_MISSING = object()


def _under(label: str, fn):
    def call(*args, **kwargs):
        _phase.append(label)
        try:
            with record_function(label):
                return fn(*args, **kwargs)
        finally:
            _phase.pop()

    return call


# The label the step is under, for the byte counter: a dispatch mode does not see record_function's labels.
_phase: list[str] = []


@contextlib.contextmanager
def _optimizer_phase() -> Iterator[None]:
    """The optimizer's step under OPTIMIZER in `_phase`, by the global step hooks, while the context lasts."""
    pre = register_optimizer_step_pre_hook(lambda *_: _phase.append(OPTIMIZER))
    post = register_optimizer_step_post_hook(lambda *_: _phase.pop())
    try:
        yield
    finally:
        pre.remove()
        post.remove()


def _module_hooks(train, notes: list[str]) -> list:
    """record_function ranges around each top-level child's forward (a pre-hook opens it, a hook closes it).
    Their backward is found through autograd's sequence numbers, not hooks: a backward hook wraps the module's
    outputs, which an in-place op after it (ReLU(inplace=True)) then refuses."""
    if train.compiles:
        notes.append("modules: not split under a compiling mode (a compiled graph has no module boundaries)")
        return []
    hooks = []
    for name, child in top_level(train.model):
        ranges: list = []
        hooks.append(child.register_forward_pre_hook(lambda m, a, r=ranges, n=name: _open(r, FORWARD + n)))
        hooks.append(child.register_forward_hook(lambda m, a, o, r=ranges: _close(r)))
    return hooks


def top_level(model: torch.nn.Module) -> Iterator[tuple[str, torch.nn.Module]]:
    """The model's children; a ModuleList's or ModuleDict's own (a container is never called: its hooks never run)."""
    for name, child in model.named_children():
        if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)):
            yield from ((f"{name}.{n}", c) for n, c in child.named_children())
        else:
            yield name, child


def _open(ranges: list, label: str) -> None:
    ranges.append(record_function(label).__enter__())


def _close(ranges: list) -> None:
    if ranges:
        ranges.pop().__exit__(None, None, None)


# ----------------------------------------------------------------------------------------------------------------------
# Profiling


# torch 2.11's profiler (the GPU machines') warns as it starts its first cycle that it "clears events at the end of each
# cycle" (torch 2.13 warns from the second cycle on): a profile is one cycle, and the warning, on the profile child's
# stderr, would be the last line a crash of that child is reported with
CYCLE_WARNING = "Warning: Profiler clears events at the end of each cycle"


def profile(train, steps: int, trace_path: str | None, max_trace_bytes: int) -> dict[str, Any]:
    """`steps` steady steps of `train` (a step.TorchStep, warmed up) under torch.profiler: the fields of
    `dlperf.protocol.Profiled`."""
    cuda = train.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with labelled(train) as notes, warnings.catch_warnings():
        warnings.filterwarnings("ignore", CYCLE_WARNING, UserWarning)
        train.sync()
        each: list[float] | None = None if cuda else []  # a CPU step has ended when it returns: its own time
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            step_s = window(train.step, train.sync, steps, each)
        events = list(prof.events())
        counted = counted_step(train, notes)
        notes += [said] if each and (said := uneven(each)) else []
    result = {"steps": steps, "step_s": step_s, "notes": notes, **counted}
    activity = attribute(prof, events) if cuda else None
    breakdown = breakdown_cuda(prof, events, steps, step_s, notes, activity) if cuda else None
    result.update(breakdown or breakdown_cpu(events, steps, step_s))
    notes += [] if cuda or not (said := random_note(events, steps, step_s)) else [said]
    result["top_ops"] = top_ops(events, steps, cuda, activity)
    result["modules"] = modules(events, steps, cuda)
    result["ops_per_step"] = round(sum(1 for e in events if is_operator(e)) / steps)
    result["leaf_ops_per_step"] = round(leaf_ops(events) / steps)
    result["trace"] = save_trace(prof, trace_path, max_trace_bytes, notes)
    return result


def phases(events: list) -> dict[int, str]:
    """Autograd sequence number -> the label its forward op ran under (the loss or a module): the backward node of
    that number runs the op's backward, so its time belongs there too."""
    found: dict[int, str] = {}
    for event in events:
        if event.sequence_nr >= 0 and is_operator(event):
            label = _label(event)
            if label is not None:
                found.setdefault(event.sequence_nr, label)
    return found


def _label(event) -> str | None:
    """The innermost dlperf or optimizer label above an event; for a backward op, its forward op's."""
    parent = event.cpu_parent
    while parent is not None:
        name = parent.name
        if name.startswith(OPTIMIZER_LABELS):
            return OPTIMIZER
        if name == LOSS or name.startswith(FORWARD):
            return name
        if name.startswith(BACKWARD_NODE):
            return f"backward:{parent.sequence_nr}"
        parent = parent.cpu_parent
    return None


def category_of(event, forward: dict[int, str]) -> Category:
    """The optimizer's labels and the loss's (its forward and, by sequence number, its backward) come first; then the
    operator's name."""
    label = _label(event)
    if label is not None and label.startswith("backward:"):
        label = forward.get(int(label.split(":", 1)[1]))
    if label == OPTIMIZER:
        return Category.OPTIMIZER
    if label == LOSS:
        return Category.LOSS
    return classify(event.name)


def breakdown_cpu(events: list, steps: int, step_s: float) -> dict[str, Any]:
    """Operators' self times by category; `host` the rest of the step. Operators that ran on other threads (none in a
    CPU train step: autograd runs on the caller's) would overlap; their share is scaled so the sum stays the step."""
    forward = phases(events)
    seconds: dict[str, float] = defaultdict(float)
    for event in events:
        if event.name == DATA:  # the whole wait, Python and the loader's operators included
            seconds[Category.DATA.value] += event.cpu_time_total / 1e6 / steps
        elif is_operator(event) and not _under_data(event):
            seconds[category_of(event, forward).value] += event.self_cpu_time_total / 1e6 / steps
    return {"categories": fill_to_step(seconds, step_s, Category.HOST), "kernels_per_step": None}


def random_note(events: list, steps: int, step_s: float) -> str | None:
    """Where drawing random numbers (dropout's masks) takes RANDOM_NOTE_SHARE of a CPU step or more, a note: what
    `other` holds."""
    drawn: Counter[str] = Counter()
    for event in events:
        name = event.name.split("::", 1)[-1].split(".", 1)[0].removesuffix("_")
        if is_operator(event) and name in RANDOM and not _under_data(event):
            drawn[event.name] += event.self_cpu_time_total / 1e6 / steps
    if not step_s or sum(drawn.values()) < RANDOM_NOTE_SHARE * step_s:
        return None
    ops = ", ".join(name for name, _ in drawn.most_common())
    return (
        f"random draws ({ops}: dropout's masks, or the model's own) take {sum(drawn.values()) / step_s:.0%} of "
        "the step, under other"
    )


def _under_data(event) -> bool:
    parent = event.cpu_parent
    while parent is not None and parent.name != DATA:
        parent = parent.cpu_parent
    return parent is not None


def breakdown_cuda(prof, events: list, steps: int, step_s: float, notes: list[str], activity=None) -> dict[str, Any]:
    """Device time by its operator's category (`attribute`), scaled to the device's busy time (streams may overlap);
    the device's gaps split into `host` (the next work was not launched yet) and `idle` (it was)."""
    activity = attribute(prof, events) if activity is None else activity
    forward = phases(events)
    seconds: dict[str, float] = defaultdict(float)
    for (start, stop, name, *_), owner in zip(activity.device, activity.owners, strict=True):
        category = memcpy_kind(name) or (Category.OTHER if owner is None else category_of(owner, forward))
        seconds[category.value] += (stop - start) / 1e9 / steps
    note_attribution(activity, steps, notes)
    busy, total, host_gaps, all_gaps = busy_and_gaps(activity.device, activity.launches)
    scale = (busy / total) if total else 0.0
    busy_s = {k: v * scale for k, v in seconds.items()}
    gaps_s = max(0.0, step_s - sum(busy_s.values()))
    host_share = host_gaps / all_gaps if all_gaps else 1.0
    categories = {**busy_s, Category.HOST.value: gaps_s * host_share, Category.IDLE.value: gaps_s * (1 - host_share)}
    return {"categories": fill_to_step(categories, step_s, Category.IDLE),
            "kernels_per_step": round(activity.kernels / steps)}  # fmt: skip


def attribute(prof, events: list) -> CudaActivity:
    """The device work of a CUDA profile, each with its operator (`cuda_activity.attribute`) among `events`'
    operators."""
    return cuda_activity.attribute(prof, [e for e in events if is_operator(e) and not e.is_async])


def top_ops(events: list, steps: int, cuda: bool, activity: CudaActivity | None = None) -> list[dict[str, Any]]:
    """The operators with the most self time (on CUDA, of the device work `activity` attributes to them; without it,
    of the kernels torch linked to them): seconds and calls per step, the most frequent call's input shapes. A
    kernel's own event is no operator: its time is its operator's."""
    device_us: dict[int, float] = defaultdict(float)
    for (start, stop, *_), owner in zip(activity.device, activity.owners, strict=True) if activity is not None else ():
        device_us[id(owner)] += (stop - start) / 1e3
    self_s: dict[str, float] = defaultdict(float)
    shapes: dict[str, Counter] = defaultdict(Counter)
    for event in events:
        if is_operator(event):
            spent = event.self_device_time_total if cuda else event.self_cpu_time_total
            self_s[event.name] += (device_us[id(event)] if activity is not None else spent) / 1e6 / steps
            shapes[event.name][str(event.input_shapes)] += 1
    return [
        {"name": name, "self_s": self_s[name], "calls": sum(shapes[name].values()) / steps,
         "shapes": shapes[name].most_common(1)[0][0]}
        for name in ranked(self_s)
    ]  # fmt: skip


def modules(events: list, steps: int, cuda: bool) -> list[dict[str, Any]]:
    """Forward (the module's labelled range) and backward (the autograd nodes of its forward ops) time of each
    top-level module, inclusive of what they called; on CUDA, of the kernels they launched."""
    forward = phases(events)
    fwd: dict[str, float] = defaultdict(float)
    bwd: dict[str, float] = defaultdict(float)
    for event in events:
        if event.device_type != torch.autograd.DeviceType.CPU:
            continue  # a label's span on the device (gpu_user_annotation): its kernels count through its operators
        spent = (event.device_time_total if cuda else event.cpu_time_total) / 1e6 / steps
        if event.name.startswith(FORWARD):
            fwd[event.name.removeprefix(FORWARD)] += spent
        elif event.name.startswith(BACKWARD_NODE) and forward.get(event.sequence_nr, "").startswith(FORWARD):
            bwd[forward[event.sequence_nr].removeprefix(FORWARD)] += spent
    return [{"name": n, "forward_s": fwd[n], "backward_s": bwd.get(n, 0.0)} for n in fwd]


def save_trace(prof, path: str | None, max_bytes: int, notes: list[str]) -> str | None:
    """The profiler's Chrome trace, gzipped at `path`; deleted (with a note) when above the cap."""
    if path is None:
        return None
    if not written(lambda: prof.export_chrome_trace(path), path, notes):  # a ".gz" path is written compressed
        return None
    if within_cap(Path(path).stat().st_size, max_bytes, notes):
        return path
    Path(path).unlink()
    return None


# ----------------------------------------------------------------------------------------------------------------------
# FLOPs and bytes of one more step


def counted_step(train, notes: list[str]) -> dict[str, Any]:
    """FLOPs and bytes by category over one untimed step. The FLOPs come from the step's own counter
    (`count_flops`, PyTorch's formulas, so they add up to the cell's FLOP count) seen through FlopCounterMode, which
    keeps them per operator; bytes are each operator's input and output tensors, for the kinds that stream memory
    (element-wise, normalization, pooling, copies): a floor, as caches are ignored. The bytes of the loss's forward
    and of the optimizer's step are theirs, as their time is: a rate is bytes over the seconds of the same work."""
    try:
        with FlopCounterMode(display=False) as flop_counter, ByteCounter() as byte_counter, _optimizer_phase():
            train.count_flops()
    except Exception as exc:  # an analysis, never a failure of the profile
        notes.append(f"no FLOPs or bytes: counting them failed ({type(exc).__name__}: {exc})".splitlines()[0])
        return {"flops": {}, "bytes": {}}
    flops: dict[str, float] = defaultdict(float)
    for op, count in flop_counter.get_flop_counts().get("Global", {}).items():
        flops[classify(str(op).replace(".", "::", 1)).value] += count
    if train.compiles:  # the bytes are the eager step's; the compiled step ran that work fused, under `other`
        notes.append("bytes: not given under a compiling mode (the compiled graph fuses the element-wise work the "
                     "eager step's bytes are of; its time is under other)")  # fmt: skip
        return {"flops": dict(flops), "bytes": {}}
    return {"flops": dict(flops), "bytes": dict(byte_counter.bytes)}  # how they count: docs/guides/profile.md


BYTE_KINDS = {Category.ELEMENTWISE, Category.NORMALIZATION, Category.POOLING, Category.COPY}
PHASES = {LOSS: Category.LOSS, OPTIMIZER: Category.OPTIMIZER}


class ByteCounter(TorchDispatchMode):
    """Bytes read and written by memory-streaming operators: their tensor inputs and outputs, each storage once."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes: dict[str, float] = defaultdict(float)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        category = classify(func._overloadpacket._qualified_op_name)
        if category in BYTE_KINDS:
            category = PHASES.get(_phase[-1], category) if _phase else category
            leaves = tree_leaves([args, kwargs or {}, out])
            tensors = {id(t.untyped_storage()): t for t in leaves if isinstance(t, torch.Tensor)}
            self.bytes[category.value] += sum(t.numel() * t.element_size() for t in tensors.values())
        return out
