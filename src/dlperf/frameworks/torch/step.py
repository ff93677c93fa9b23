"""The PyTorch backend's train step: one model, one fixed mini-batch on the device, one optimizer (`TorchStep`),
what the worker times; the step captured as one CUDA graph; the synthetic batch, the loss and the optimizers of the
built-in workloads.

Part of the PyTorch backend (`backend.py`): `build.py` builds a step and applies a mode's components to it. Imported
only in child processes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
import torch.nn.functional as F

from dlperf.frameworks.torch.instruments import CudaEvents, DtypeFlopCounter, LiveTensorBytes
from dlperf.frameworks.torch.opcount import call, tensors_in, unfused_rnns
from dlperf.frameworks.torch.threads import describe_device, kernel_settings, thread_settings
from dlperf.measure import system
from dlperf.modes import Mode
from dlperf.workloads.base import OptimizerSpec, Workload
from dlperf.workloads.user import UserWorkload

DATA_SEED = 10_000  # the batch is the same whatever `seed` initialized the weights
_NOT_YET = object()  # the model's outputs before its forward has returned
NO_GRAPH = "compile: torch.compile captured no graph: the step ran eager"


class TorchStep:
    """One model, one fixed mini-batch already on the device, one optimizer: what the worker times.

    `model` is always the eager module (FLOPs are counted on it); `forward` is what the step calls, the compiled
    module under `compile`. Modes configure the step after it is built (see `build`)."""

    def __init__(self, model, batch, loss_fn, optimizer, clip_grad_norm, device: torch.device) -> None:
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.forward: Callable = model
        self.inputs, self.targets = batch
        self.clip_grad_norm, self.device = clip_grad_norm, device
        self.trainable = [p for p in model.parameters() if p.requires_grad]
        self.params = sum(p.numel() for p in self.trainable)
        self.autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext  # fp32: none
        self.precision = Mode.FP32.value  # the autocast dtype's mode component
        self.scaler: torch.amp.GradScaler | None = None  # fp16: scale the loss so small gradients survive
        self.compiles = False  # the first step compiles (or captures): the worker times it apart
        self.check_capture = False  # torch.compile: the first step has yet to show that TorchDynamo captured a graph
        self.cuda_graph = False  # cuda_graphs: capture the whole step at the first call, replay it after
        self.graph: CudaGraphStep | None = None
        self.mode_settings: dict[str, Any] = {}
        self._live_peak: int | None = None  # live tensor bytes traced with the FLOP count (see count_flops)
        self.user: UserWorkload | None = None  # a user workload's own objects (its Dataset, with --data)

    def step(self) -> torch.Tensor:
        """One iteration; returns the loss (a tensor: reading its value would sync, so the timed loop does not)."""
        if self.cuda_graph:
            if self.graph is None:
                self.graph = CudaGraphStep(self)
            return self.graph.replay()
        if self.check_capture:
            return self._first_compiled_step()
        return self.iteration()

    def _first_compiled_step(self) -> torch.Tensor:
        """A compiled model's first step, which compiles it; NotImplementedError (the cell is `unsupported`) where
        TorchDynamo has captured no graph in this process even so: it skipped the forward, which ran eager, and the
        cell would time eager steps under the compile label (an nn.LSTM without `allow_rnn` was skipped so). A cell's
        process has compiled nothing before its first step; a later build in the same process (the loss check's) may
        reuse the cell's compiled code without capturing a graph of its own, and is not refused."""
        loss = self.iteration()
        self.check_capture = False
        if not _graphs_captured():
            why = NO_GRAPH
            if "checkpoint" in self.mode_settings:  # its forward goes through torch.utils.checkpoint (recompute.py)
                why += ("; with checkpoint its forward goes through torch.utils.checkpoint, which TorchDynamo skipped "
                        "here: compile and checkpoint do not combine on this model (each alone may)")  # fmt: skip
            raise NotImplementedError(why)
        return loss

    def load(self, inputs: Any, targets: Any) -> None:
        """A loaded batch copied into the step's own input and target tensors (`--data`; a dict of them key by key):
        compiled code, channels-last inputs and a captured CUDA graph keep reading the same buffers. Asynchronous
        from pinned memory."""
        _copy_into((self.inputs, self.targets), (inputs, targets))

    def iteration(self, forward: Callable | None = None) -> torch.Tensor:
        # Timed: no host-device syncs here (.item(), printing, checks); the timer calls sync() itself.
        self.optimizer.zero_grad(set_to_none=True)
        outputs = _NOT_YET
        try:  # free while nothing is raised (a generator context manager costs each step a few microseconds)
            with self.autocast():
                outputs = call(forward or self.forward, self.inputs)
                loss = self.loss_fn(outputs, self.targets)
        except RuntimeError as exc:
            if no_kernel := _no_kernel(exc, self.precision):
                raise no_kernel from exc
            raise
        except (TypeError, AttributeError) as exc:
            if outputs is not _NOT_YET and (unfed := _unfed_loss(outputs, exc)):
                raise unfed from exc
            raise
        try:  # fp16: the loss scaled, so small gradients survive
            (loss if self.scaler is None else self.scaler.scale(loss)).backward()
        except (RuntimeError, AttributeError) as exc:
            if wrong := _no_loss(loss):
                raise wrong from exc
            raise
        if self.scaler is None:
            self._clip()
            self.optimizer.step()
            return loss.detach()
        self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
        self._clip()
        self.scaler.step(self.optimizer)  # skipped when a gradient overflowed
        self.scaler.update()
        return loss.detach()

    def _clip(self) -> None:
        if self.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.trainable, self.clip_grad_norm)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type == "mps":
            torch.mps.synchronize()

    def device_clock(self) -> CudaEvents | None:
        """CUDA events on the stream the step runs on (CUDA graphs replay there too); None elsewhere: a CPU step is
        over when it returns, and MPS is synchronized every step."""
        return CudaEvents(self.device) if self.device.type == "cuda" else None

    def count_flops(self) -> dict[str, Any] | None:
        """FLOPs of one step of the model's own work, split by the dtype the products ran in.

        Counted on the eager module without checkpointing (the counter does not see inside compiled code, and
        recomputed activations are not model work). The optimizer's element-wise update is not a matrix product, so
        it counts zero."""
        with unfused_rnns(self.model), no_checkpointing(), DtypeFlopCounter() as counter:
            if self._counted_step_is_the_step():  # the live tensor bytes of the same step, for memory_of_step
                with LiveTensorBytes(self._existing_tensors()) as live:
                    self.iteration(self.model)
                self._live_peak = live.peak
            else:
                self.iteration(self.model)  # a model the counter cannot trace raises: the worker notes why, no figure
        self.sync()
        return {"flops_per_step": counter.total, "flops_by_dtype": counter.by_dtype}

    def _counted_step_is_the_step(self) -> bool:
        """Whether the step FLOPs are counted on is the very step memory_of_step traces: eager, on a device whose
        memory is read from tensors (not CUDA's allocator), no RNN run unfused for the count, no checkpointing
        turned off for it. Then one traced step gives both figures (a traced step costs a few plain ones)."""
        rnn = any(isinstance(m, torch.nn.RNNBase) for m in self.model.modules())
        checkpointed = "checkpoint" in self.mode_settings
        return self.device.type != "cuda" and not (self.compiles or self.cuda_graph or rnn or checkpointed)

    def memory_of_step(self, retrace: bool = False) -> dict[str, int]:
        """Peak memory of untimed steps, each figure labelled: the CUDA allocator's own peak; on other devices the
        live tensor bytes (eager steps only: TorchDynamo runs a step eagerly while a dispatch mode is active, so
        a compiled model cannot be traced this way) and the process's resident-set peak during one step.
        `retrace`: trace a step anew even when the FLOP count traced one (a wrapper whose step is not that one)."""
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.step()
            self.sync()
            return {"cuda_allocator_peak_bytes": torch.cuda.max_memory_allocated(self.device)}
        figures = {}
        traced, self._live_peak = self._live_peak, None
        if traced is not None and not retrace:  # traced with the FLOP count, the same step
            figures["live_tensor_peak_bytes"] = traced
        elif not self.compiles:
            with LiveTensorBytes(self._existing_tensors()) as live:
                self.step()
            self.sync()
            figures["live_tensor_peak_bytes"] = live.peak
        if system.reset_rss_hwm():
            self.step()
            self.sync()
            figures["process_rss_peak_bytes"] = system.rss_hwm_bytes()
        return figures

    def _existing_tensors(self) -> Iterator[torch.Tensor]:
        # A generator, so the tracker does not hold last step's gradients alive after zero_grad drops them.
        yield from self.model.parameters()
        yield from (p.grad for p in self.model.parameters() if p.grad is not None)
        yield from self.model.buffers()
        yield from tensors_in(list(self.optimizer.state.values()))
        yield from tensors_in((self.inputs, self.targets))

    def state_tensors(self) -> dict[str, list[torch.Tensor]]:
        return state_tensors(self.model, self.optimizer)

    def compile_stats(self) -> dict[str, Any]:
        """What TorchDynamo did so far in this process: graphs, graph breaks with their reasons, frames compiled."""
        if not self.compiles or self.cuda_graph:
            return {}
        from torch._dynamo.utils import counters

        breaks = counters["graph_break"]
        return {
            "graphs": _graphs_captured(),
            "graph_breaks": sum(breaks.values()),
            "graph_break_reasons": [reason.splitlines()[0][:200] for reason in list(breaks)[:5]],
            "frames_compiled": counters["frames"]["ok"],
            # hits would mean compiled code was reused from a warm cache: each cell gets its own, empty one
            "cache_hits": counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"],
        }

    def settings(self) -> dict[str, Any]:
        info = describe_device(self.device)
        device = {"device": info.pop("name"), **{f"device_{k}": v for k, v in info.items()}}
        optimizer = {f"optimizer_{k}": self.optimizer.defaults.get(k) for k in ("foreach", "fused")}
        return {**thread_settings(), **device, **kernel_settings(self.device), **optimizer, **self.mode_settings}


def _graphs_captured() -> int:
    """The graphs TorchDynamo has captured in this process."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def _no_loss(loss: Any) -> TypeError | None:
    """The loss function's result in one line where it is no one number to call backward on (a tensor of one loss
    per sample: torch says only 'grad can be implicitly created only for scalar outputs'); None where it is one."""
    if not isinstance(loss, torch.Tensor):
        return TypeError(f"the loss function returned a {type(loss).__name__}, not a tensor: return the loss, one "
                         "number to call backward on")  # fmt: skip
    if loss.numel() != 1:
        return TypeError(f"the loss function returned a tensor of shape {list(loss.shape)}, not one number to call "
                         "backward on: reduce it (.mean() or .sum())")  # fmt: skip
    return None


def _unfed_loss(outputs: Any, exc: Exception) -> TypeError | None:
    """The loss's failure on a model output that is no tensor, said with what the output is and the fix: a dict of
    logits (a Hugging Face model's ModelOutput) given to F.cross_entropy failed every cell with torch's
    "cross_entropy_loss(): argument 'input' (position 1) must be Tensor, not dict". None where it is a tensor."""
    if isinstance(outputs, torch.Tensor):
        return None
    if isinstance(outputs, dict):
        what = f"a {type(outputs).__name__} with keys {', '.join(map(repr, outputs))}"
        pick = f"outputs[{'logits' if 'logits' in outputs else next(iter(outputs), '...')!r}]"
    elif isinstance(outputs, (tuple, list)):
        what, pick = f"a {type(outputs).__name__} of {len(outputs)}", "outputs[0]"
    else:
        what, pick = f"a {type(outputs).__name__}", "outputs..."
    return TypeError(f"the loss failed on the model's output, {what}, which it is given as the forward returns it "
                     f"({type(exc).__name__}: {exc}): take the tensor it needs in the loss, loss=lambda outputs, "
                     f"targets: your_loss({pick}, targets)")  # fmt: skip


def _no_kernel(exc: RuntimeError, precision: str) -> NotImplementedError | None:
    """oneDNN refuses a dtype it has no kernel for on this CPU (an fp16 LSTM, seen on CPUs with AVX512-FP16 and
    without): the mode's precision does not apply here, which is `unsupported` with the reason, naming the precision,
    not a failure. None for any other error."""
    if "could not create a primitive" not in str(exc):
        return None
    why = str(exc).split(".")[0]
    return NotImplementedError(f"{precision}: no {precision} kernel for this op on this device ({why})")


class CudaGraphStep:
    """The whole train step captured as one CUDA graph and replayed: one launch instead of hundreds.

    As the CUDA-graphs documentation prescribes: warm up on a side stream (so lazily created optimizer state and
    cuDNN workspaces exist before capture), capture with gradients set to None so backward allocates them from the
    graph's private pool, then replay on the same static input and target tensors.

    The warm-up does not train: the parameters and buffers are put back as they were before it, and the optimizer's
    state is zeroed in place (the graph reads those tensors), which is the state SGD's momentum, Adam's moments and
    step, and RMSprop's average start from. So the first replay is the first update, as the first eager step is: the
    loss check compares it with fp32's first update (before, the H200 check found a first update 4.2-4.7x fp32's:
    four SGD-momentum steps, three of them warm-up, counted as one)."""

    WARMUP_STEPS = 3

    def __init__(self, step: TorchStep) -> None:
        side = torch.cuda.Stream(step.device)
        side.wait_stream(torch.cuda.current_stream(step.device))

        def warm_up() -> None:
            with torch.cuda.stream(side):
                for _ in range(self.WARMUP_STEPS):
                    step.iteration()
            torch.cuda.current_stream(step.device).wait_stream(side)

        untrained(step, warm_up)
        self.graph = torch.cuda.CUDAGraph()
        step.optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.loss = step.iteration()

    def replay(self) -> torch.Tensor:
        self.graph.replay()
        return self.loss


def untrained(step: TorchStep, run: Callable[[], None]) -> None:
    """`run` steps `step`, and what they trained is undone: parameters and buffers as they were, the optimizer's
    state tensors (created by the steps) zeroed in place, which is where SGD's momentum, Adam's moments and step, and
    RMSprop's average start. The next step is then the first update."""
    kept = [*step.model.parameters(), *step.model.buffers()]
    before = [t.detach().clone() for t in kept]
    run()
    with torch.no_grad():
        for tensor, value in zip(kept, before, strict=True):
            tensor.copy_(value)
        for state in step.optimizer.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    value.zero_()


def _copy_into(mine: Any, loaded: Any) -> None:
    """Each tensor of `loaded` into its place in `mine`: a dict's by key (a loader's dict may list its keys in
    another order than the batch maker's), a tuple's or list's by position."""
    if isinstance(mine, dict):
        for key, value in mine.items():
            _copy_into(value, loaded[key])
    elif isinstance(mine, (tuple, list)):
        for value, other in zip(mine, loaded, strict=True):
            _copy_into(value, other)
    else:
        mine.copy_(loaded, non_blocking=True)


class Checkpointing:
    """Whether checkpointed trunks recompute in backward (`build.py`'s checkpoint mode)."""

    active = True  # switched off while FLOPs are counted: recomputation is not model work


@contextlib.contextmanager
def no_checkpointing() -> Iterator[None]:
    saved, Checkpointing.active = Checkpointing.active, False
    try:
        yield
    finally:
        Checkpointing.active = saved


def state_tensors(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, list[torch.Tensor]]:
    """What a rank holds between steps: its parameters, their gradients, the optimizer's state."""
    params = list(model.parameters())
    state = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    return {"params": params, "grads": [p.grad for p in params if p.grad is not None], "optimizer": state}


@contextlib.contextmanager
def data_seeded(device: torch.device, *, callers: bool = False) -> Iterator[None]:
    """The batch drawn from `DATA_SEED`, the same whatever seed the weights came from; `callers`: torch's generators
    (the CPU's and `device`'s kind) then put back as they stood, the weights having been drawn from the caller's own
    (`training_parts`): a factory's draws after it go on from the seed dlperf set, not from the batch's."""
    kind = "cuda" if device.type == "cpu" else device.type
    gpus = list(range(getattr(torch, kind).device_count())) if callers and device.type != "cpu" else []
    with torch.random.fork_rng(devices=gpus, enabled=callers, device_type=kind):
        torch.manual_seed(DATA_SEED)
        yield


def synthetic_batch(workload: Workload, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Random inputs and labels of the workload's shapes, made once, on the device."""
    shape = (workload.batch, *workload.input.shape)
    if workload.input.kind == "tokens":
        tokens = torch.randint(workload.input.vocab, shape, device=device)  # (B, T)
        return tokens, torch.randint(workload.outputs, shape, device=device)  # a target per position, (B, T)
    return torch.randn(shape, device=device), torch.randint(workload.outputs, (workload.batch,), device=device)


AUX_LOSS_WEIGHT = 0.4  # an auxiliary classifier's share of the loss (Inception-v3, as its training recipes weigh it)


def cross_entropy(logits: torch.Tensor | tuple[torch.Tensor, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
    """Mean softmax cross-entropy over every prediction: (B, K) with (B,), or per token (B, T, V) with (B, T). A
    model with an auxiliary classifier (Inception-v3 in training mode) gives (logits, auxiliary logits): the
    auxiliary term is added, weighed by AUX_LOSS_WEIGHT."""
    if isinstance(logits, tuple):
        main, aux = logits
        return cross_entropy(main, targets) + AUX_LOSS_WEIGHT * cross_entropy(aux, targets)
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten())


def make_optimizer(spec: OptimizerSpec, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    match spec.name:
        case "sgd":
            return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum)
        case "adam":  # GNMT's (DeepLearningExamples)
            return torch.optim.Adam(params, lr=spec.lr)
        case "rmsprop":  # Keras's mnist_mlp: its decay rate is 0.9 where torch's default is 0.99
            return torch.optim.RMSprop(params, lr=spec.lr, alpha=0.9)
    raise NotImplementedError(f"optimizer {spec.name!r} is not implemented by the torch backend")
