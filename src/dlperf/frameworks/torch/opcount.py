"""A training step's operators counted on fake tensors: what the GPU predictor reads (`dlperf.frameworks.common.ops`).

The backend builds the step as the worker does (`backend.op_count`, at the requested batch, with the mode's autocast
and a foreach optimizer) and hands it here; its weights and batch become fake tensors (FakeTensorMode: a shape, a
dtype and a device, no storage), so no activation is ever allocated and ResNet-50 at batch 256 counts in a few
hundred MB. One iteration runs, and a dispatch mode above the fake one records each ATen op as a GPU would launch it:

- flops by PyTorch's own formulas (`op_flops`, which `backend.DtypeFlopCounter` uses too), 0 for every other kernel
  ("memory"); the dtype is the first floating input's for a product, the widest floating input's otherwise;
- bytes: every tensor the op takes (lists of tensors too) plus every tensor it returns (an in-place op that returns
  nothing, as `_foreach_add_`: the tensors it writes), at their dtypes;
- ops that launch nothing are not recorded: views and aliases, `detach`, metadata, allocations without a fill;
- a cast (a copy that changes a floating dtype: autocast's `_to_copy` and its backward) is not a kernel of its own:
  its bytes are added to the kernel before it, so a bf16 step's casts are traffic, never kernels at the fixed cost;
- launches: 1; a `_foreach_*` op is ceil(tensors / 110) multi-tensor-apply chunks;
- RNNs run unfused (oneDNN's fused kernel has no FLOP formula), as per-step products and gate math: the FLOPs and
  GEMM shapes of cuDNN's RNN (per layer and direction, the input projection of all steps as one GEMM, m = seq x
  batch, then a GEMM per step, m = batch). cuDNN runs a step as its GEMM plus one fused point-wise kernel, so inside
  an `nn.RNNBase` (its forward, and the autograd nodes it made in backward) a matrix product counts 2 launches the
  device runs and every other op 0 (its bytes still count); none of them is issued by the host: cuDNN launches them
  from one call per layer and direction (forward; backward data and backward weights: 2), counted as an op of no
  work with those issued launches (`Op.issued`). An approximation: cuDNN's persistent kernels, its layer-wavefront
  overlap and its workspace traffic are not modelled. Its weight gradients are one GEMM per weight over every step
  (k = seq x batch), where the unfused cells ran one per step (`OpRecorder.weight_gradients`);
- a product's shape (batch, m, n, k), a convolution's as its implicit GEMM, for the wave quantization of the GPU
  model (`Op.shape`).

The optimizer starts from its steady state (momentum buffers exist: one warm-up update on zero gradients makes
them). Gradient clipping runs as CUDA's `clip_grad_norm_` runs it, foreach (`clip_as_cuda`: torch refuses foreach
clipping on a CPU device, where it would count two kernels per tensor). Imports torch and dlperf's standard-library
modules, never the backend.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

from dlperf.frameworks.common.ops import Op, grouped
from dlperf.frameworks.torch.optimizers import rebuild_optimizer

FOREACH_TENSORS_PER_LAUNCH = 110  # multi-tensor apply: the tensors one launch takes (CUDA's depth-1 chunking)
NOT_KERNELS = frozenset({"_unsafe_view", "_reshape_alias", "lift_fresh", "alias", "detach", "detach_"})
CPU_ATTENTION = {  # the CPU's flash attention, which PyTorch's registry lacks (it counts zero): the GPU's formulas
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: (
        lambda q, k, v, *_, **__: sdpa_flop_count(q.shape, k.shape, v.shape)
    ),
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: (
        lambda grad, q, k, v, *_, **__: sdpa_backward_flop_count(grad.shape, q.shape, k.shape, v.shape)
    ),
}
DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}


def count_ops(step, make_batch: Callable[[], tuple] | None = None) -> list[Op]:
    """The ops of one steady iteration of `step` (a `TorchStep` of step.py built on the CPU, never run), counted on
    fake tensors. The step itself is turned fake: its model, optimizer and batch; `make_batch` (inputs, targets)
    replaces the batch, made under the fake mode: a batch of any size then holds no memory."""
    return grouped(count_calls(step, [make_batch])[0][0])


def count_calls(step, make_batches: list[Callable[[], tuple] | None]) -> list[tuple[list[tuple], tuple]]:
    """For each batch maker in turn, one steady iteration of `step` on its batch: (the kernel calls in the order they
    ran, as `frameworks.common.ops.CALL` tuples; the batch as fake (inputs, targets)). The step is turned fake once
    and counted on each batch: the iterations are alike, each starting with its gradients unset."""
    found = []
    with unfused_rnns(step.model), FakeTensorMode() as fake:
        _fake(step, fake)
        _warm_up(step)
        for make_batch in make_batches:
            if make_batch is not None:
                step.inputs, step.targets = make_batch()
            found.append((count_step(step), (step.inputs, step.targets)))
    return found


def _fake(step, fake: FakeTensorMode) -> None:
    """Turn the step's parameters, buffers and batch into fake tensors, and rebuild its optimizer on them. (A model
    cannot be built under FakeTensorMode: `.to(device)` would swap its fake parameters, which torch refuses.)"""
    params: dict[int, torch.nn.Parameter] = {}
    for module in step.model.modules():
        for name, p in module._parameters.items():
            if p is not None:  # a parameter shared by two modules stays one
                params.setdefault(id(p), torch.nn.Parameter(fake.from_tensor(p), requires_grad=p.requires_grad))
                module._parameters[name] = params[id(p)]
        for name, b in module._buffers.items():
            if b is not None:
                module._buffers[name] = fake.from_tensor(b)
    opt = step.optimizer
    groups = [{**g, "params": [params[id(p)] for p in g["params"]]} for g in opt.param_groups]
    step.optimizer = rebuild_optimizer(opt, groups)
    step.trainable = [params[id(p)] for p in step.trainable]
    step.inputs, step.targets = (_fake_tree(part, fake) for part in (step.inputs, step.targets))


def _fake_tree(obj: Any, fake: FakeTensorMode) -> Any:
    """A batch (a tensor, or tensors nested in tuples, lists and dicts) with every tensor fake."""
    if isinstance(obj, torch.Tensor):
        return fake.from_tensor(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_fake_tree(o, fake) for o in obj)
    if isinstance(obj, dict):
        return {k: _fake_tree(v, fake) for k, v in obj.items()}
    return obj


def _warm_up(step) -> None:
    """One update on zero gradients, so that the counted step is a steady one: momentum buffers (and the like)
    exist, and so does fp16's loss scale."""
    for p in step.trainable:
        p.grad = torch.zeros_like(p)
    step.optimizer.step()
    step.optimizer.zero_grad(set_to_none=True)
    if step.scaler is not None:
        step.scaler.scale(torch.zeros(()))  # makes the scale tensor


def count_step(step) -> list[tuple]:
    """The kernel calls of one iteration of `step`, in order (built under a FakeTensorMode that is still active)."""
    with OpRecorder() as rec, rec.watching_rnns(step.model):
        rec.phase = "optimizer"
        step.optimizer.zero_grad(set_to_none=True)
        rec.phase = "forward"
        with step.autocast():
            loss = step.loss_fn(call(step.model, step.inputs), step.targets)
        if step.scaler is not None:
            loss = step.scaler.scale(loss)
        rec.phase = "backward"
        loss.backward()
        rec.weight_gradients()
        rec.phase = "optimizer"
        if step.scaler is not None:  # scaler.step reads found_inf on the host: the update is called directly
            step.scaler.unscale_(step.optimizer)
        clip_as_cuda(step)
        step.optimizer.step()
        if step.scaler is not None:
            step.scaler.update()
    return rec.calls


def clip_as_cuda(step) -> None:
    """`clip_grad_norm_` as CUDA runs it (its foreach path): every gradient's norm in one multi-tensor op, their norm,
    the coefficient, and every gradient scaled in one more."""
    if step.clip_grad_norm is None:
        return
    grads = [p.grad for p in step.trainable if p.grad is not None]
    if not grads:
        return
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(step.clip_grad_norm / (total + 1e-6), max=1.0))


class OpRecorder(TorchDispatchMode):
    """Every ATen op that launches a kernel, grouped into `Op`s. Pushed after (above) FakeTensorMode, it sees each
    op first and runs it on the fake tensors below. `phase` is set by the caller."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.calls: list[tuple] = []  # (kind, dtype, flops, bytes, launches, phase) of each kernel, in order
        self.cast_bytes = 0  # casts before the first kernel: their bytes go to it
        self.rnn_depth = 0  # inside an RNN module's forward
        self.rnn_nodes: set = set()  # the autograd nodes RNN forwards made: their backward runs as cuDNN's
        self.rnn_weights: list[tuple] = []  # the shapes of RNN weights (and transposed), one per weight
        self.rnn_weight_grads: dict[tuple, list[int]] = {}  # (dtype, m, n): flops, bytes read, k, bytes written

    def ops(self) -> list[Op]:
        return grouped(self.calls)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if _launches_kernel(func):
            self._record(func, args, kwargs, out)
        return out

    def _record(self, func, args, kwargs, out) -> None:
        flops = op_flops(func, args, kwargs, out)
        inputs = list(tensors_in([list(args), kwargs]))
        outputs = list(tensors_in(out)) or list(tensors_in(_written(func, args, kwargs)))  # in place, returning none
        if flops is None:
            kind, flops = "memory", 0
            read = [t.dtype for t in inputs if t.is_floating_point()]
            floating = read or [t.dtype for t in outputs if t.is_floating_point()]  # e.g. a fill
            tensors = inputs + outputs
            dtype = max(floating, key=lambda d: d.itemsize) if floating else tensors[0].dtype if tensors else None
        else:
            kind, dtype = _kind(func), first_floating_dtype(args)
        launches = issued = 1
        if func._overloadpacket.__name__.startswith(("_foreach_", "_fused_")):
            first = next((a for a in args if isinstance(a, (list, tuple))), [])
            launches = issued = math.ceil(len(first) / FOREACH_TENSORS_PER_LAUNCH)
        if self.rnn_depth or (self.rnn_nodes and torch._C._current_autograd_node() in self.rnn_nodes):
            launches, issued = (2 if kind == "matmul" else 0), 0  # cuDNN: a step's GEMM, then its fused gate math
        traffic = sum(nbytes(t) for t in inputs) + sum(nbytes(t) for t in outputs)
        if _is_cast(func, inputs, outputs):
            # autocast's casts (and their backward's) are memory traffic, not kernels at the fixed cost: their bytes
            # go to the kernel before them (the first kernel, where none ran before)
            if not self.calls:
                self.cast_bytes += traffic
                return
            last = self.calls[-1]
            self.calls[-1] = (*last[:3], last[3] + traffic, *last[4:])
            return
        shape = gemm_shape(func, args, out) if kind != "memory" else norm_shape(func, args, kwargs)
        if kind == "matmul" and not self.rnn_depth and launches == 2 and tuple(out.shape) in self.rnn_weights:
            # a weight's gradient at one step: cuDNN's backward weights computes it once over every step
            found = self.rnn_weight_grads.setdefault((dtype_name(dtype), *shape[1:3]), [0, 0, 0, nbytes(out)])
            found[0], found[1], found[2] = found[0] + flops, found[1] + traffic - nbytes(out), found[2] + shape[3]
            return
        call = (kind, dtype_name(dtype), flops, traffic + self.cast_bytes, launches, self.phase, issued, shape)
        self.calls.append(call)
        self.cast_bytes = 0

    def weight_gradients(self) -> None:
        """After backward: each RNN weight's gradient as cuDNN's backward weights computes it, one GEMM over every
        step (k: seq x batch) where the unfused cells ran one per step; their FLOPs and the bytes they read, the
        gradient written once."""
        for (dtype, m, n), (flops, read, k, written) in self.rnn_weight_grads.items():
            # weights of one shape (a layer's input and recurrent weights, layers alike) share the work evenly
            parts = self.rnn_weights.count((m, n))
            if parts < 1 or flops % parts or read % parts or k % parts:
                parts = 1
            traffic = read // parts + written
            call = ("matmul", dtype, flops // parts, traffic, 1, "backward", 0, (1, m, n, k // parts))
            self.calls.extend([call] * parts)
        self.rnn_weight_grads.clear()

    def _cudnn_calls(self, module: torch.nn.RNNBase, out: Any) -> None:
        """The host's calls into cuDNN for one run of `module`: one per layer and direction forward, and where a
        gradient flows back, two in backward (backward data, backward weights)."""
        calls = module.num_layers * (2 if module.bidirectional else 1)
        floating = [t for t in tensors_in(out) if t.is_floating_point()]
        dtype = dtype_name(floating[0].dtype) if floating else "fp32"
        self.calls.append(("memory", dtype, 0, 0, 0, "forward", calls, ()))
        if any(t.requires_grad for t in floating):
            self.calls.append(("memory", dtype, 0, 0, 0, "backward", 2 * calls, ()))

    @contextlib.contextmanager
    def watching_rnns(self, model: torch.nn.Module) -> Iterator[None]:
        """Mark the ops of every RNN module: by a depth count in forward, and in backward by the autograd nodes its
        forward made (found walking back from its outputs to its inputs' nodes and the parameters' leaves)."""

        def enter(module, args):
            self.rnn_depth += 1

        def leave(module, args, out):
            self.rnn_depth -= 1
            self._cudnn_calls(module, out)
            stop = {t.grad_fn for t in tensors_in(list(args)) if t.grad_fn is not None}
            todo = [t.grad_fn for t in tensors_in(out) if t.grad_fn is not None]
            while todo:
                node = todo.pop()
                if node in self.rnn_nodes or node in stop or type(node).__name__ == "AccumulateGrad":
                    continue
                self.rnn_nodes.add(node)
                todo.extend(n for n, _ in node.next_functions if n is not None)

        rnns = [m for m in model.modules() if isinstance(m, torch.nn.RNNBase)]
        weights = [tuple(w.shape) for m in rnns for name, w in m.named_parameters() if name.startswith("weight")]
        self.rnn_weights = [*weights, *(w[::-1] for w in weights if w[::-1] != w)]
        handles = [h for m in rnns for h in (m.register_forward_pre_hook(enter), m.register_forward_hook(leave))]
        try:
            yield
        finally:
            for h in handles:
                h.remove()


def _launches_kernel(func) -> bool:
    """Whether an op runs a kernel: it writes an argument, or returns a tensor that is not a view of an input;
    allocations without a fill (empty*) and the aliasing ops whose schema hides it are not kernels."""
    name = func._overloadpacket.__name__
    if name in NOT_KERNELS or name.lstrip("_").startswith(("empty", "new_empty")):
        return False
    schema = func._schema
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return True
    return any(r.alias_info is None and "Tensor" in str(r.type) for r in schema.returns)


def _is_cast(func, inputs: list, outputs: list) -> bool:
    """A copy that changes a floating tensor's dtype: what autocast inserts (`aten::_to_copy`) and its backward."""
    if func._overloadpacket.__name__ not in ("_to_copy", "to", "copy_") or not inputs or not outputs:
        return False
    return inputs[0].is_floating_point() and outputs[0].is_floating_point() and inputs[0].dtype != outputs[0].dtype


def _written(func, args: tuple, kwargs: dict) -> list:
    """The arguments an op writes (a `_foreach_*_` op writes its lists and returns nothing)."""
    schema = func._schema.arguments
    values = [args[i] if i < len(args) else kwargs.get(a.name) for i, a in enumerate(schema)]
    return [v for a, v in zip(schema, values, strict=True) if a.alias_info is not None and a.alias_info.is_write]


def _kind(func) -> str:
    name = func._overloadpacket.__name__
    return "conv" if "conv" in name else "attention" if "attention" in name else "matmul"


def gemm_shape(func, args: tuple, out: Any) -> tuple[int, ...]:
    """(batch, m, n, k) of a product; a convolution's implicit GEMM (groups, N x output pixels, output channels per
    group, input channels per group x kernel size), read from its output (forward) or its output's gradient
    (backward); () for attention and what is not read."""
    name = func._overloadpacket.__name__
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if "conv" in name:
        names = [a.name for a in func._schema.arguments]
        if "weight" not in names or "groups" not in names:
            return ()
        y = args[0] if "backward" in name else out[0] if isinstance(out, (tuple, list)) else out
        w, groups = args[names.index("weight")], int(args[names.index("groups")])
        return (groups, y.shape[0] * math.prod(y.shape[2:]), y.shape[1] // groups, math.prod(w.shape[1:]))
    if name in ("addmm", "baddbmm", "addbmm"):
        tensors = tensors[1:]
    if len(tensors) < 2 or not isinstance(out, torch.Tensor) or out.dim() < 2 or tensors[0].dim() < 2:
        return ()
    return (math.prod(out.shape[:-2]), out.shape[-2], out.shape[-1], tensors[0].shape[-1])


# batch norm's training kernels, forward and backward: CUDA runs each as one thread block per channel (PyTorch's
# batch_norm_collect_statistics_kernel and its backward reduce, grid = channels; cuDNN's bn_fw_tr_1C11 and bn_bw_1C11)
BATCH_NORMS = frozenset({"native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
                         "_batch_norm_with_update", "_batch_norm_with_update_functional", "cudnn_batch_norm",
                         "native_batch_norm_backward", "batch_norm_backward", "cudnn_batch_norm_backward"})  # fmt: skip


def norm_shape(func, args: tuple, kwargs: dict) -> tuple[int, ...]:
    """A batch norm's (channels, elements per channel) in training, as its kernels run: a block per channel streaming
    that channel's N x H x W elements; () for any other memory kernel (and a batch norm in eval, element-wise)."""
    if func._overloadpacket.__name__ not in BATCH_NORMS or not args or not isinstance(args[0], torch.Tensor):
        return ()
    names = [a.name for a in func._schema.arguments]
    for flag in ("training", "train"):
        if flag in names:
            i = names.index(flag)
            if not (args[i] if i < len(args) else kwargs.get(flag, True)):
                return ()
    x = args[0]
    if x.dim() < 2 or x.shape[1] < 1:
        return ()
    return (x.shape[1], x.numel() // x.shape[1])


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def call(forward: Any, inputs: Any) -> Any:
    """The model called on a batch's inputs: a dict as keyword arguments (a Hugging Face model's input_ids and
    attention_mask, as its Trainer calls it), anything else as the one argument."""
    return forward(**inputs) if isinstance(inputs, dict) else forward(inputs)


def tensors_in(obj: Any) -> Iterator[torch.Tensor]:
    """Tensors in an op result, a batch or a state dict, however nested in tuples, lists and dicts."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from tensors_in(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from tensors_in(item)


def op_flops(func, args: tuple, kwargs: dict, out: Any) -> int | None:
    """FLOPs of one op by PyTorch's own formulas (FlopCounterMode's, and the same for the CPU's attention;
    multiply-add = 2); None for an op they do not cover."""
    formula = flop_registry.get(func._overloadpacket) or CPU_ATTENTION.get(func._overloadpacket)
    return None if formula is None else int(formula(*args, **kwargs, out_val=out))


def first_floating_dtype(args: Any) -> torch.dtype | None:
    """The dtype a product runs in: its first floating-point or complex input's (under autocast, the dtype cast to;
    a complex model's was None, said "None" in its notes, report and export)."""
    return next((t.dtype for t in tensors_in(list(args)) if t.is_floating_point() or t.is_complex()), None)


def dtype_name(dtype: torch.dtype | None) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


@contextlib.contextmanager
def unfused_rnns(model: torch.nn.Module) -> Iterator[None]:
    """Run RNNs as plain matrix products while FLOPs are counted.

    FlopCounterMode has no formula for the fused RNN kernels of oneDNN (`mkldnn_rnn_layer`, CPU) and cuDNN, so an
    LSTM would count as zero. Without those libraries PyTorch runs the same products as mm/addmm, which it counts.
    """
    if not any(isinstance(m, torch.nn.RNNBase) for m in model.modules()):
        yield
        return
    saved = torch.backends.mkldnn.enabled, torch.backends.cudnn.enabled
    torch.backends.mkldnn.enabled = torch.backends.cudnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled, torch.backends.cudnn.enabled = saved
