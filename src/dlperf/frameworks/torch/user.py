"""A user's own PyTorch workload (`dlperf.user_workload`): its factory loaded, its step built, its shape described
for the parent's probe.

Part of the PyTorch backend (`backend.py`), imported only in child processes.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch._guards import detect_fake_mode
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_leaves, tree_map
from torch.utils.data import default_collate

from dlperf.errors import UsageError
from dlperf.frameworks.torch.optimizers import parameter_names, rebuild_optimizer, regrouped
from dlperf.frameworks.torch.step import TorchStep, data_seeded
from dlperf.vocab import Framework
from dlperf.workloads.base import Workload
from dlperf.workloads.user import UserWorkload, build_user_workload, default_data_dir


def build_user(workload: Workload, device: torch.device, seed: int | None) -> TorchStep:
    """The user's factory called with torch's generators seeded by `seed` (None: as the caller left them, `build`),
    so a model it builds, with `training_parts` too, has each seed's own weights; then its batch, the same for
    every seed."""
    if seed is not None:
        torch.manual_seed(seed)
    user = user_of(workload)
    model = _on(user.model, device).train()
    with data_seeded(device, callers=seed is None):
        batch = _moved(user.make_batch(workload.batch, device), device)  # at the planned batch (factory's, or swept)
    make_optimizer: Callable = user.optimizer or partial(torch.optim.SGD, lr=0.01)
    optimizer = make_optimizer(model.parameters())  # after .to(device), so its state lives there too
    step = TorchStep(model, batch, user.loss, optimizer, user.clip_grad_norm, device)
    step.user = user
    return step


def _moved(batch: Any, device: torch.device) -> Any:
    """The batch's tensors on the cell's device: a batch maker that leaves `device` aside (`torch.randn(b, 3, 32,
    32)`) made them on the CPU, and a GPU cell's step then failed on torch's 'Expected all tensors to be on the same
    device'. Made once, so moving it costs no timed step."""
    return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) and t.device != device else t, batch)


def _on(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """`model` moved to `device` where any of its tensors is elsewhere: a model built under a fake mode (the memory
    trace's, `memcount.py`) is already there, and `.to` would try to swap its fake parameters, which torch refuses."""
    tensors = [*model.parameters(), *model.buffers()]
    return model.to(device) if any(t.device != device for t in tensors) else model


def load_user(source: str | None, data_dir: str | None = None, factory: Callable[..., Any] | None = None
              ) -> UserWorkload:  # fmt: skip
    """The user's workload (`data_dir`: --data DIR, for a factory that takes it), its `make_batch` the factory's or
    drawn from its dataset (`first_sample_batches`); `factory`: one already loaded, its file not run again."""
    if source is None:
        raise ValueError("a user workload needs its source (file.py:factory)")
    user = build_user_workload(source, data_dir, factory or factory_for_real(source))
    if user.framework != Framework.TORCH:
        raise UsageError(f"workload {source!r}: the factory describes a {user.framework} model, not a torch one")
    if isinstance(user.loss, type):  # called as loss(out, targets), a Module class took them as its arguments
        raise UsageError(f"workload {source!r}: the loss is the class {user.loss.__name__}: give an instance, "
                         f"{user.loss.__name__}(), or a function of (outputs, targets)")  # fmt: skip
    if isinstance(user.model, type) and issubclass(user.model, torch.nn.Module):
        raise UsageError(f"workload {source!r}: the model is the class {user.model.__name__}: give an instance, "
                         f"{user.model.__name__}(...)")  # fmt: skip
    if not isinstance(user.model, torch.nn.Module):
        raise UsageError(f"workload {source!r}: dlperf.user_workload's model must be a torch.nn.Module, got "
                         f"{type(user.model).__name__}{_foreign(user.model)}")  # fmt: skip
    if _compiled(user.model):
        raise UsageError(f"workload {source!r}: the model is compiled already (torch.compile), so every cell would run "
                         "it compiled, its fp32 cell too: return the model itself, and --modes compile (or "
                         "bf16+compile...) measures it compiled")  # fmt: skip
    if lazy := [f"model{'.' if n else ''}{n} ({type(m).__name__})" for n, m in user.model.named_modules()
                if _unmaterialised(m)]:  # fmt: skip
        which = (
            f"lazy modules {', '.join(lazy[:3])}{', ...' if len(lazy) > 3 else ''} have"
            if lazy[1:]
            else f"the lazy module {lazy[0]} has"
        )  # named as the model's attribute: "lazy modules 2" read as a count
        raise UsageError(f"workload {source!r}: {which} no parameters yet: materialise them in the factory with one "
                         "forward on a dummy batch (model(make_batch(1, 'cpu')[0])) before returning "
                         "dlperf.user_workload(...)")  # fmt: skip
    if not any(p.requires_grad for p in user.model.parameters()):
        held = sum(1 for _ in user.model.parameters())
        raise UsageError(f"workload {source!r}: the model has no parameter to train "
                         f"({f'its {held} are all frozen, requires_grad=False' if held else 'it holds none'}): "
                         "a training step would update nothing")  # fmt: skip
    if isinstance(user.optimizer, torch.optim.Optimizer):
        user.optimizer = _built_again(user.optimizer, user.model, source)
    if user.make_batch is None:
        user.make_batch = first_sample_batches(user, source)
    else:
        user.make_batch = partial(_pair_made, user.make_batch, source)
    return user


def _foreign(model: Any) -> str:
    """'; ...' where `model` is another framework's (a keras.Sequential, a flax Module): own models are PyTorch's."""
    from dlperf.workloads.user import ONLY_TORCH, OTHER_FRAMEWORKS

    theirs = any(c.__module__.partition(".")[0] in OTHER_FRAMEWORKS for c in type(model).__mro__)  # a keras.Model's too
    return f": {ONLY_TORCH}" if theirs else ""


def factory_for_real(source: str) -> Callable[..., Any]:
    """The factory of `source`, its file run for real whatever mode is active: the memory trace and the own-error
    check build the step under a fake mode (`memcount.py`), and the file's module-level code run there would compute
    fake tensors, and save them: `torch.save` of a fake tensor leaves a broken file where the user's good one was,
    before it raises. Only the factory is then called under the mode, as the probe calls it on the meta device."""
    from dlperf.workloads.user import load_factory

    meta = torch.get_default_device().type == "meta"
    with _disable_current_modes(), torch.device("cpu") if meta else contextlib.nullcontext():
        return load_factory(source)


def _built_again(built: torch.optim.Optimizer, model: torch.nn.Module, source: str) -> Callable[[Any], Any]:
    """An optimizer given built (`optimizer=torch.optim.SGD(model.parameters(), lr=0.1)`) rather than as a function of
    the parameters: made again for each step, over the model's parameters where the step has moved them (found by
    name), with its own groups and values and no state (calling it failed the cell: "'SGD' object is not callable").
    Refused in one line where it holds parameters that are not the model's: the step would update none of them."""
    names = parameter_names(model)
    if stray := sum(1 for g in built.param_groups for p in g["params"] if id(p) not in names):
        raise UsageError(f"workload {source!r}: the {type(built).__name__} given as optimizer holds {stray} "
                         "parameters that are not the model's: build it over model.parameters(), or give a function "
                         "of the parameters, optimizer=lambda params: ...")  # fmt: skip
    return lambda params: rebuild_optimizer(built, regrouped(built, names, model))


def _compiled(model: torch.nn.Module) -> bool:
    """Whether the model is torch.compile's wrapper: read without importing TorchDynamo (2 s), which compiling the
    model has imported."""
    dynamo = sys.modules.get("torch._dynamo.eval_frame")
    return dynamo is not None and isinstance(model, dynamo.OptimizedModule)


def scripted(model: torch.nn.Module, name: str, mode: str) -> str | None:
    """Why `mode` cannot apply to a TorchScript model, in words ending in the fix; None where it can. torch.compile
    refuses torch.jit.script's modules ("does not support compiling torch.jit.script ... models directly", a failed
    cell); checkpoint finds no nn.Sequential in either kind (torch.jit.trace's too), which its refusal called a
    model of neither, asking for the nn.Sequential it was."""
    kind = {"compile": torch.jit.RecursiveScriptModule, "checkpoint": torch.jit.ScriptModule}.get(mode)
    if kind is None or not isinstance(model, kind):
        return None
    how = "torch.jit.trace" if isinstance(model, torch.jit.TracedModule) else "torch.jit.script"
    return (
        f"{name} is a TorchScript module ({how}), and {mode} works on a model's Python modules: give "
        "dlperf the model unscripted"
    )


def _unmaterialised(module: torch.nn.Module) -> bool:
    """A lazy module (torch.nn.LazyLinear...) whose parameters wait for its first forward: counting them, moving them
    or handing them to an optimizer raises torch's 'uninitialized parameter' ValueError."""
    return isinstance(module, torch.nn.modules.lazy.LazyModuleMixin) and module.has_uninitialized_params()


def _pair_made(make_batch: Callable[[int, Any], Any], source: str, n: int, device: torch.device) -> tuple[Any, Any]:
    """The user's `make_batch(n, device)`, refused in one line unless it made an (inputs, targets) pair: a lone tensor
    of a batch of 2 would otherwise be taken apart as inputs and targets, and fail as the loss's dtype error."""
    made = make_batch(n, device)
    if not (isinstance(made, (tuple, list)) and len(made) == 2):
        raise UsageError(f"workload {source!r}: make_batch ({_where(make_batch)}) must return an (inputs, targets) "
                         f"pair; asked for a batch of {n}, it returned {_described(made)}")  # fmt: skip
    if untensored := _untensored(*made):
        raise UsageError(f"workload {source!r}: make_batch ({_where(make_batch)}) {untensored}")
    if unbatched := _unbatched(made, n):
        raise UsageError(f"workload {source!r}: make_batch ({_where(make_batch)}) {unbatched}")
    return made


def _unbatched(made: Any, n: int) -> str | None:
    """Why a made batch cannot be of `n` samples, in words ending in the fix: none of its tensors has a dimension of
    n (a make_batch that always made 3 samples was timed at every batch fit tried, its rate climbing to 9.3 million
    samples/s at a flat step); None where one has, or for a batch of 1."""
    shapes = [list(leaf.shape) for leaf in tree_leaves(made) if isinstance(leaf, torch.Tensor) and leaf.dim() > 0]
    if n <= 1 or not shapes or any(n in shape for shape in shapes):
        return None
    return (f"ignores its batch size: asked for a batch of {n}, it made tensors of shapes "
            f"{', '.join(map(str, shapes[:4]))}, none with a dimension of {n}: make batch_size samples")  # fmt: skip


def _untensored(inputs: Any, targets: Any) -> str | None:
    """Which part of a made batch holds NumPy arrays, in words ending in the fix; None where neither does (torch's
    "linear(): argument 'input' must be Tensor, not numpy.ndarray" failed every cell, naming no line of the user's).
    Other values are left to the model: one may take strings and tokenize them itself."""
    numpy = sys.modules.get("numpy")  # read where the user imported it: the backend imports torch only
    if numpy is None:
        return None
    arrays = [name for name, part in (("inputs", inputs), ("targets", targets))
              if any(isinstance(leaf, numpy.ndarray) for leaf in tree_leaves(part))]  # fmt: skip
    if not arrays:
        return None
    return f"returned NumPy arrays as its {' and '.join(arrays)}: return tensors, torch.from_numpy(array).to(device)"


def _where(function: Callable) -> str:
    """'NAME at FILE:LINE' of a function, as far as Python knows it."""
    name = getattr(function, "__qualname__", None) or repr(function)
    code = getattr(function, "__code__", None)
    return f"{name} at {code.co_filename}:{code.co_firstlineno}" if code is not None else name


def _described(made: Any) -> str:
    if isinstance(made, torch.Tensor):
        return f"one {type(made).__name__} of shape {list(made.shape)}"
    if isinstance(made, (tuple, list)):
        return f"a {type(made).__name__} of {len(made)}"
    return f"a {type(made).__name__}"


def user_of(workload: Workload) -> UserWorkload | None:
    """A user workload's factory built as the plan built it (`--data DIR` given to it); None for a built-in one."""
    return load_user(workload.source, workload.extra.get("data_dir")) if workload.is_user else None


def first_sample_batches(user: UserWorkload, source: str) -> Callable[[int, torch.device], Any]:
    """A batch maker for a user workload given a dataset (or only its own DataLoader factory, `loader=`) and no
    `make_batch`: the dataset's first sample, collated as a DataLoader collates it (or the loader's), repeated to the
    batch size. Repeated rather than `n` samples collated: its shape and
    dtype are what the timed step's cost depends on, one sample is read however large the batch (a dataset that
    decodes images would decode a whole batch), and under the operator count's fake tensors a batch of any size
    holds no memory."""
    what = "dataset[0]" if user.dataset is not None else "the first batch of loader(1, num_workers=0)"
    try:
        first = default_collate([user.dataset[0]]) if user.dataset is not None else _first_loaded(user.loader)
    except Exception as exc:
        raise UsageError(f"workload {source!r}: the batch is drawn from {what}, which raised "
                         f"{type(exc).__name__}: {exc}") from exc  # fmt: skip
    if not (isinstance(first, (list, tuple)) and len(first) == 2):
        raise UsageError(f"workload {source!r}: {what} must be an (input, target) pair to draw the batch from; it "
                         f"is {_sample(first)}")  # fmt: skip
    return partial(_repeated, tuple(first))


def _sample(first: Any) -> str:
    """What a dataset's sample (or a loader's batch) is, for the refusal: a dict's keys, and the pair that would do
    for a Hugging Face-style one of a `labels` key."""
    if not isinstance(first, dict):
        return _described(first)
    keys = ", ".join(map(str, first))
    label = next((k for k in ("labels", "label", "targets", "target") if k in first), None)
    if label is None:
        return f"a dict of {keys}"
    return (
        f"a dict of {keys}: return the inputs and the {label} apart, ({{k: v for k, v in sample.items() if k != "
        f"{label!r}}}, sample[{label!r}]), the inputs passed by name, model(**inputs)"
    )


def _first_loaded(loader: Callable[..., Any]) -> Any:
    """The first sample of the user's own DataLoader, as a batch of one: the factory asked for batches of one in the
    training process (no worker started), its first batch cut to one sample should it batch more."""
    from dlperf.loaders import LoaderSetting

    first = next(iter(loader(1, **LoaderSetting().torch_kwargs())))
    return tree_map(lambda t: t[:1] if isinstance(t, torch.Tensor) and t.dim() else t, first)


def _repeated(first: tuple[Any, Any], n: int, device: torch.device) -> tuple[Any, Any]:
    """`first` (collated: a batch of one) repeated to `n` on `device`; fake under an active fake mode (the operator
    count's), whose operators refuse real tensors."""
    fake = detect_fake_mode()

    def grow(t: Any) -> Any:
        t = fake.from_tensor(t) if fake is not None else t
        return t.to(device).expand(n, *t.shape[1:]).contiguous()

    return tree_map(lambda t: grow(t) if isinstance(t, torch.Tensor) else t, first)


def _unfit_call(model: torch.nn.Module, inputs: Any) -> str | None:
    """Why the model's forward cannot take the batch's inputs as the step passes them (`opcount.call`), in words
    ending in the fix; None where it can, or where its signature cannot be read."""
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return None
    parameters = list(signature.parameters.values())
    forward = f"{type(model).__name__}.forward"
    if isinstance(inputs, dict):
        try:
            signature.bind(**inputs)
        except TypeError as exc:
            return (f"{forward}{signature} cannot take the batch's inputs by name, model(**inputs), as "
                    f"{', '.join(map(str, inputs))}: {exc}")  # fmt: skip
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    wanted = [p.name for p in parameters if p.kind in positional and p.default is p.empty]
    if len(wanted) < 2:
        return None
    named = ", ".join(f"{name!r}: ..." for name in wanted)
    return (f"{forward} takes {len(wanted)} inputs ({', '.join(wanted)}), and a batch's inputs other than a dict are "
            f"passed as one, model(inputs): make them a dict, {{{named}}}, to have them passed by name, "
            "model(**inputs)")  # fmt: skip


def probe_workload(source: str, data_dir: str | None = None) -> dict[str, Any]:
    """Build the user's workload and describe it: on the meta device where the factory runs so, else for real on the
    CPU. The model never runs here: a forward that crashes, hangs or exhausts memory must fail its own cell in a
    worker, not the planning of the whole sweep; and a model too large for this machine is refused by the memory
    check after the probe (`crossover.check_room`), so the probe allocates none of its weights: a 1.3B-parameter
    LM's real build took 12 to 17 s here, its meta one a fraction of a second (FakeTensorMode's first use imports
    torch._dynamo, 3 s). The parameters' count, the batch's shape and dtype are the same either way.

    Only the factory runs on the meta device: the file (and its neighbours) is run once, for real, and its factory
    called from it. Its module-level code may write files, seed, read data: run on the meta device, a tensor it
    computes and saves (a cache beside the data) would be written without its values, and read back so by every
    later run. So a model built at module level is built for real here (own-model.md: build it in the factory)."""
    from dlperf.workloads.user import load_factory

    factory = load_factory(source)  # the file run once, for real: its module-level tensors on the CPU
    try:
        with torch.device("meta"):
            described = _description(source, data_dir, factory)
    except Exception:  # built again for real: what it raises then is the user's own error
        described = None
    if described is not None and described.get("batch_error") is None:
        return described
    return _description(source, data_dir, factory)  # a batch maker's error on the meta device may be the device's


def _description(source: str, data_dir: str | None, factory: Callable[..., Any]) -> dict[str, Any]:
    torch.manual_seed(0)
    user = load_user(source, data_dir, factory)
    return {
        "name": user.name,
        "framework": user.framework,
        "params": sum(p.numel() for p in user.model.parameters() if p.requires_grad),
        "param_bytes": sum(p.numel() * p.element_size() for p in user.model.parameters() if p.requires_grad),
        "batch": user.batch_size,
        "clip_grad_norm": user.clip_grad_norm,
        **_input_of(user, source),
        **({"no_checkpoint": why} if (why := _no_checkpoint(user)) else {}),
        **({"no_compile": why} if (why := scripted(user.model, user.name, "compile")) else {}),
        **({"default_data_dir": folder} if data_dir is None and (folder := default_data_dir(factory)) else {}),
        **({"dataset_samples": n} if (n := _dataset_samples(user)) else {}),
        **({"repeated": True} if user.make_batch is None else {}),
        **({"optimizer": said} if (said := _optimizer_of(user)) else {}),
    }


OPTIMIZER_SETTINGS = ("lr", "momentum", "dampening", "nesterov", "betas", "eps", "weight_decay")  # as it is said


def _optimizer_of(user: UserWorkload) -> dict[str, Any] | None:
    """The user's optimizer, its class and settings ({"name": "AdamW", "lr": 0.0003, "betas": [0.9, 0.999], ...}),
    built over the model's parameters as a cell builds it: the stored workload had read SGD's defaults, and `dlperf
    compare` could not name a change of it ("extra.optimizer.lr 0.001 -> 0.0003"). None where it cannot be built."""
    try:
        optimizer = (user.optimizer or partial(torch.optim.SGD, lr=0.01))(user.model.parameters())
        group = optimizer.param_groups[0]
    except Exception:  # its cells will say why
        return None
    return {"name": type(optimizer).__name__, **{k: _plain(group[k]) for k in OPTIMIZER_SETTINGS if k in group}}


def _plain(value: Any) -> Any:
    """A setting as JSON holds it: betas' tuple a list, a tensor's lr its text."""
    return list(value) if isinstance(value, tuple) else value if isinstance(value, int | float | bool) else str(value)


def _dataset_samples(user: UserWorkload) -> int | None:
    """How many samples the factory's `dataset=` holds, an epoch of the user's own data (`predict/cost.py`); None
    without one, or for one of no length (an IterableDataset)."""
    try:
        return len(user.dataset) if user.dataset is not None else None
    except Exception:  # TypeError: no __len__; a length the dataset cannot say
        return None


def _no_checkpoint(user: UserWorkload) -> str | None:
    """Why the checkpoint mode would refuse the model (`recompute.refusal`), read from its modules alone: a search
    leaves the mode out with it instead of starting a process to be told; None where it applies."""
    from dlperf.frameworks.torch import recompute

    if why := scripted(user.model, user.name, "checkpoint"):
        return why
    trunk = recompute.find_trunk(user.model)
    if trunk is not None and len(trunk.blocks) >= recompute.MIN_CHECKPOINT_BLOCKS:
        return None
    return recompute.refusal(user.name, trunk, user=True)


def _input_of(user: UserWorkload, source: str) -> dict[str, Any]:
    """Per-sample shape and dtype of the input, from one small batch (None if it is not a single tensor)."""
    try:
        inputs, _ = user.make_batch(1, torch.device("cpu"))
    except UsageError:  # it made no (inputs, targets) pair: said before anything runs
        raise
    except Exception as exc:  # e.g. a batch maker written for the GPU only: the workers will tell
        return {"input_shape": None, "input_dtype": None, "batch_error": f"{type(exc).__name__}: {exc}"}
    if unfit := _unfit_call(user.model, inputs):
        raise UsageError(f"workload {source!r}: {unfit}")
    try:  # a batch of 2 too: a maker that ignores its batch size is refused here (`_unbatched`), not in every cell
        user.make_batch(2, torch.device("cpu"))
    except UsageError:
        raise
    except Exception:  # one that fails only at 2 fails in the cells, saying so
        pass
    if isinstance(inputs, dict):  # passed by name (`opcount.call`): a recipe calls model(**x)
        shapes = {str(k): [*v.shape[1:], str(v.dtype).removeprefix("torch.")] for k, v in inputs.items()
                  if isinstance(v, torch.Tensor)}  # fmt: skip
        return {"input_shape": None, "input_dtype": None, "input_names": [str(k) for k in inputs],
                "input_shapes": shapes}  # fmt: skip
    if not isinstance(inputs, torch.Tensor):
        return {"input_shape": None, "input_dtype": None}
    return {"input_shape": list(inputs.shape[1:]), "input_dtype": str(inputs.dtype).removeprefix("torch.")}
