"""Training modes as one table. Standard library only: the parent, the workers and every backend read it.

A mode is components joined by '+', e.g. `bf16+channels_last+compile`. Each component is a row of `ROWS`: the
group it belongs to (and whether it excludes the other members of that group), the devices it runs on, whether it
needs an image input or can run under DDP, its help text, and the lines of PyTorch that apply it (the recipe
`dlperf optimize` prints). Everything that asks "what is this mode?" asks this table: the flag parser, `--help`,
the optimizer's search, the recipe, the backends' device checks and the generated mode test.

Adding a mode: one row here, and its implementation in the backends that support it (each backend declares its
`MODES`; every other backend reports the new component as `unsupported`, with the reason, without a change).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dlperf.vocab import DeviceKind


class Mode(StrEnum):
    """One component of a training mode, in canonical order: `compile+bf16` and `bf16+compile` are one cell."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    TF32 = "tf32"
    CHANNELS_LAST = "channels_last"
    FOREACH = "foreach"
    FUSED = "fused"
    CHECKPOINT = "checkpoint"
    COMPILE = "compile"
    CUDA_GRAPHS = "cuda_graphs"
    DATA_PARALLEL = "dataparallel"
    MALLOC_KEEP = "malloc_keep"
    TCMALLOC = "tcmalloc"
    JEMALLOC = "jemalloc"


ANY_DEVICE = frozenset(DeviceKind)
DEVICE_NAMES = {DeviceKind.CPU: "CPUs", DeviceKind.CUDA: "CUDA GPUs", DeviceKind.MPS: "Apple GPUs (MPS)"}
CUDA = frozenset({DeviceKind.CUDA})
CPU = frozenset({DeviceKind.CPU})


@dataclass(frozen=True)
class ModeRow:
    mode: Mode
    group: str  # the dimension it belongs to; `dlperf optimize` searches the groups in SEARCH_ORDER
    help: str  # one line: what it does (--help, the README)
    exclusive: bool = False  # at most one exclusive component of a group in a mode
    devices: frozenset[DeviceKind] = ANY_DEVICE  # where it can run; elsewhere the cell is `unsupported`
    min_gpus: int = 0  # CUDA GPUs it needs on the machine
    image_input: bool = False  # needs a batch of images (channels, height, width)
    ddp: bool = True  # measurable inside a DDP process (`--nproc`)
    searched: bool = True  # an option `dlperf optimize` tries in its group's round
    recipe: tuple[str, ...] = ()  # PyTorch lines that apply it before the loop; {device} is "cpu", "cuda", ...
    preamble: tuple[str, ...] = ()  # lines that go first, before the framework is imported (an allocator's)
    step: tuple[str, ...] = ()  # a precision's loop body, in place of the plain one (STEP)
    arithmetic: bool = True  # may change what the step computes: a mode with it gets a loss check against fp32


# the user's optimizer, rebuilt (before it has state) with its class and every setting but its implementation
REBUILD = ('groups = [{k: v for k, v in g.items() if k not in ("foreach", "fused")} for g in optimizer.param_groups]',)
# one plain training step: what a precision's `step` replaces
STEP = ("optimizer.zero_grad(set_to_none=True)", "loss = loss_fn(model(x), y)", "loss.backward()", "optimizer.step()")

# torch.compile of a model with an nn.LSTM, GRU or RNN: off (torch's default), TorchDynamo skips the forward that
# calls one and the step runs eager; dlperf's compiled cells turn it on for such a model's calls (`torch/build.py`)
ALLOW_RNN = "torch._dynamo.config.allow_rnn = True  # an nn.LSTM, GRU or RNN compiled too, not run eager"
# fmt: off
ROWS: tuple[ModeRow, ...] = (
    ModeRow(Mode.FP32, "precision", "the paper's setting: everything in fp32, eager", exclusive=True, searched=False),
    ModeRow(
        Mode.BF16, "precision", "bfloat16 mixed precision (PyTorch's autocast, Flax's dtype, Keras's mixed_bfloat16): "
        "the layers in bf16; weights, gradients and update stay fp32",
        exclusive=True,
        step=("optimizer.zero_grad(set_to_none=True)", 'with torch.autocast("{device}", dtype=torch.bfloat16):',
              "    loss = loss_fn(model(x), y)", "loss.backward()", "optimizer.step()"),
    ),
    ModeRow(
        Mode.FP16, "precision", "float16 autocast with gradient scaling; weights, gradients and update stay fp32",
        exclusive=True,
        recipe=('scaler = torch.amp.GradScaler("{device}")',),
        step=("optimizer.zero_grad(set_to_none=True)", 'with torch.autocast("{device}", dtype=torch.float16):',
              "    loss = loss_fn(model(x), y)", "scaler.scale(loss).backward()", "scaler.step(optimizer)",
              "scaler.update()"),
    ),
    ModeRow(
        Mode.TF32, "precision", "CUDA only: fp32 matrix products and convolutions on TensorFloat-32 tensor cores",
        devices=CUDA,
        recipe=("torch.backends.cuda.matmul.allow_tf32 = True", "torch.backends.cudnn.allow_tf32 = True"),
    ),
    ModeRow(
        Mode.CHANNELS_LAST, "memory format", "NHWC weights and activations for convolutional networks",
        image_input=True,
        recipe=("model = model.to(memory_format=torch.channels_last)",
                "x = x.contiguous(memory_format=torch.channels_last)  # every input batch"),
    ),
    ModeRow(
        Mode.FOREACH, "optimizer implementation", "the optimizer's multi-tensor implementation (one kernel per "
        "operation over all parameters)", exclusive=True,
        recipe=(*REBUILD, "optimizer = type(optimizer)(groups, foreach=True)  # the same optimizer and settings"),
    ),
    ModeRow(
        Mode.FUSED, "optimizer implementation", "the optimizer's fused implementation (the whole update in one "
        "kernel per parameter group)", exclusive=True,
        recipe=(*REBUILD, "optimizer = type(optimizer)(groups, fused=True)  # the same optimizer and settings"),
    ),
    ModeRow(
        Mode.CHECKPOINT, "checkpointing", "gradient checkpointing of the model's trunk, the largest nn.Sequential "
        "in about sqrt(n) segments or each block of an nn.ModuleList (a transformer's layers): memory for time",
        ddp=False,
        recipe=("# in forward: y = torch.utils.checkpoint.checkpoint_sequential(trunk, segments, x, "
                "use_reentrant=False)", "# or, for each block of an nn.ModuleList: x = torch.utils.checkpoint."
                "checkpoint(block, x, use_reentrant=False)"),
    ),
    ModeRow(
        Mode.COMPILE, "compilation", "torch.compile of the model; each cell compiles with its own empty cache",
        ddp=False, recipe=(ALLOW_RNN, "model = torch.compile(model)"),
    ),
    ModeRow(
        Mode.CUDA_GRAPHS, "compilation", "CUDA only: the whole step captured once and replayed (with compile: "
        "Inductor's reduce-overhead)", devices=CUDA, ddp=False,
        recipe=("# capture the whole step once with torch.cuda.graph(g) after a warm-up, then g.replay() per step",),
    ),
    ModeRow(
        Mode.DATA_PARALLEL, "parallelism", "CUDA with 2+ GPUs: torch.nn.DataParallel over every visible GPU, one "
        "process (for DDP, see --nproc)", devices=CUDA, min_gpus=2, ddp=False, searched=False,
    ),
    ModeRow(
        Mode.MALLOC_KEEP, "allocator", "CPU, glibc: the heap keeps freed memory for reuse (mallopt: every block from "
        "the heap, none mapped on its own, none given back, one arena for every thread), so a step's activations are "
        "not page-faulted in afresh", exclusive=True, devices=CPU, arithmetic=False,
        preamble=("import ctypes  # first, before the framework; or, before Python starts: "
                  "MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=-1 MALLOC_ARENA_MAX=1",
                  'ctypes.CDLL("libc.so.6").mallopt(-4, 0)  # M_MMAP_MAX: every block from the heap, 2 GiB ones too',
                  'ctypes.CDLL("libc.so.6").mallopt(-1, -1)  # M_TRIM_THRESHOLD: freed memory is never given back',
                  'ctypes.CDLL("libc.so.6").mallopt(-8, 1)  # M_ARENA_MAX: every thread allocates from that heap'),
    ),
    ModeRow(
        Mode.TCMALLOC, "allocator", "CPU: gperftools' tcmalloc in place of glibc's malloc, preloaded as the process "
        "starts (LD_PRELOAD; apt install libtcmalloc-minimal4)", exclusive=True, devices=CPU, arithmetic=False,
        preamble=("# start Python with it preloaded: LD_PRELOAD=libtcmalloc_minimal.so.4 python train.py",),
    ),
    ModeRow(
        Mode.JEMALLOC, "allocator", "CPU: jemalloc in place of glibc's malloc, preloaded as the process starts "
        "(LD_PRELOAD; apt install libjemalloc2)", exclusive=True, devices=CPU, arithmetic=False,
        preamble=("# start Python with it preloaded: LD_PRELOAD=libjemalloc.so.2 python train.py",),
    ),
)
# fmt: on

ROW: dict[Mode, ModeRow] = {row.mode: row for row in ROWS}
MODE_ORDER = tuple(Mode)  # canonical order of components in a mode name
PRECISIONS = tuple(r.mode for r in ROWS if r.group == "precision" and r.exclusive)
# the groups `dlperf optimize` searches, one round each, in this order
SEARCH_ORDER = ("precision", "memory format", "optimizer implementation", "allocator", "compilation", "checkpointing")
# combinations the search tries as one option, beside the single components of their group
SEARCH_COMBINATIONS = {"compilation": ((Mode.COMPILE, Mode.CUDA_GRAPHS),)}
# lines that replace the single components' recipes when every member of the key is in the mode
COMBINED_RECIPES = {
    (Mode.COMPILE, Mode.CUDA_GRAPHS): (ALLOW_RNN, 'model = torch.compile(model, mode="reduce-overhead")'),
}


def exclusive_groups() -> dict[str, tuple[Mode, ...]]:
    """Group -> its exclusive components: a mode has at most one of each."""
    groups: dict[str, tuple[Mode, ...]] = {}
    for row in ROWS:
        if row.exclusive:
            groups[row.group] = (*groups.get(row.group, ()), row.mode)
    return groups


def mode_components(mode: str) -> list[Mode]:
    """The components of a canonical mode name; fp32 is implied when no precision is named."""
    parts = [Mode(p) for p in mode.split("+")]
    return parts if any(p in PRECISIONS for p in parts) else [Mode.FP32, *parts]


def with_option(mode: str, option: str) -> list[Mode]:
    """The components of `mode` plus those of `option` (a mode fragment such as "bf16" or "compile+cuda_graphs"), one
    of an exclusive group replacing the mode's own (bf16 replaces fp32), in canonical order."""
    added = [Mode(p) for p in option.split("+")]
    groups = [members for members in exclusive_groups().values() if any(a in members for a in added)]
    kept = [c for c in mode_components(mode) if not any(c in members for members in groups)]
    return [m for m in MODE_ORDER if m in kept or m in added]


def compiles(mode: str) -> bool:
    return Mode.COMPILE in mode_components(mode)


def captured_eagerly(mode: str) -> bool:
    """The eager step replayed from a CUDA graph, without compiling."""
    parts = mode_components(mode)
    return Mode.CUDA_GRAPHS in parts and Mode.COMPILE not in parts


def check_device(mode: str, device_kind: DeviceKind, gpus: int = 0) -> None:
    """NotImplementedError (the cell is `unsupported`) for a component that does not run on this kind of device,
    or needs more GPUs than the machine has."""
    for component in mode_components(mode):
        row = ROW[component]
        if device_kind not in row.devices:
            kinds = " and ".join(DEVICE_NAMES[d] for d in DeviceKind if d in row.devices)
            raise NotImplementedError(f"{component.value} applies to {kinds} only; this cell runs on {device_kind}")
        if gpus < row.min_gpus:
            raise NotImplementedError(f"{component.value} needs {row.min_gpus} or more GPUs; this machine has {gpus}")


def changes_arithmetic(mode: str) -> bool:
    """Whether `mode` may compute other numbers than fp32 eager does: a component other than fp32 that is not a
    setting of the process alone (the allocator's)."""
    return any(c is not Mode.FP32 and ROW[c].arithmetic for c in mode_components(mode))


def not_under_ddp(mode: str) -> list[Mode]:
    """The components of `mode` that are not measured inside a DDP process."""
    return [c for c in mode_components(mode) if not ROW[c].ddp]


PIPELINE_MODES = {Mode.FP32}  # what a pipeline's stages compute in (frameworks/torch/pipeline.py)


def strategy_refusal(parallel: str, mode: str) -> str | None:
    """Why a PyTorch strategy's processes refuse `mode`, the first thing each checks, in their words: its engine's
    own module (`frameworks/torch/ddp.py`, fsdp, tp, pipeline) raises it, and the planner marks the cell unsupported
    with it before any process starts (`plan/unsupported.py`). None: the strategy measures the mode (or another check
    decides)."""
    if parallel in ("gpipe", "1f1b"):
        other = [c.value for c in mode_components(mode) if c not in PIPELINE_MODES]
        return f"{'+'.join(other)} in a pipeline is not measured by dlperf yet (fp32 only)" if other else None
    excluded = ", ".join(sorted(m.value for m in not_under_ddp(mode)))
    if not excluded or parallel not in ("ddp", "fsdp", "tp", ""):
        return None
    if parallel in ("ddp", ""):  # a --nproc cell without --parallel is DDP's
        return f"{excluded} under DDP is not measured by dlperf yet"
    return (f"{excluded} under {parallel} is not measured by dlperf yet: it changes the module that {parallel} "
            "would wrap")  # fmt: skip


def options_of(group: str, device_kind: DeviceKind) -> list[str]:
    """The options `dlperf optimize` tries in `group`'s round on this kind of device: its searched components, then
    the combinations of them, each a mode name fragment such as "compile+cuda_graphs"."""
    singles = [r.mode for r in ROWS if r.group == group and r.searched and device_kind in r.devices]
    combos = [c for c in SEARCH_COMBINATIONS.get(group, ()) if all(m in singles for m in c)]
    return [m.value for m in singles] + ["+".join(m.value for m in c) for c in combos]


def recipe(mode: str, device_kind: DeviceKind, *, named: bool = False) -> list[str]:
    """The lines of PyTorch that train `model` with `optimizer`, `loss_fn` and a batch `x`, `y` in `mode`, for
    `steps` steps: every component's setup in canonical order, then the loop, its body the precision's (or STEP).
    Runnable as they stand once those names exist (`dlperf optimize` prints them after the lines that make them).
    `named`: `x` is a dict of inputs, which the model takes by name (`model(**x)`)."""
    parts = set(mode_components(mode))
    combined = {c[0]: c for c in COMBINED_RECIPES if parts.issuperset(c)}  # first member -> the combination
    replaced = {m for c in combined.values() for m in c}
    lines: list[str] = []
    body = STEP
    for row in sorted((ROW[p] for p in parts), key=lambda r: MODE_ORDER.index(r.mode)):
        if row.mode in combined:
            lines += COMBINED_RECIPES[combined[row.mode]]
        elif row.mode not in replaced:
            lines += row.recipe
        body = row.step or body
    lines += ["for _ in range(steps):", *(f"    {line}" for line in body)]
    call = "model(**x)" if named else "model(x)"
    return [line.replace("{device}", device_kind.value).replace("model(x)", call) for line in lines]


def preamble(mode: str) -> list[str]:
    """The lines that go before everything else in `mode`'s script, before the framework is imported: an allocator
    set up once it has allocated applies only to what it allocates afterwards (the recipe put malloc_keep's mallopt
    calls after the model was built)."""
    rows = sorted((ROW[p] for p in mode_components(mode)), key=lambda r: MODE_ORDER.index(r.mode))
    return [line for row in rows for line in row.preamble]


def help_text() -> str:
    """The --modes help: every component with what it does."""
    return "; ".join(f"{r.mode.value}: {r.help}" for r in ROWS)


# ----------------------------------------------------------------------------------------------------------------------
# Which modes apply to a workload and have a fast path on a device: one filter for `dlperf profile`'s advice,
# `dlperf optimize`'s search and `dlperf table --explain`

# the optimizers (torch.optim classes, lower case) with each implementation; a user's optimizer is not known by name
IMPLEMENTED_BY = {
    Mode.FUSED: frozenset({"sgd", "adam", "adamw", "adagrad"}),
    Mode.FOREACH: frozenset({"sgd", "adam", "adamw", "adagrad", "adadelta", "adamax", "asgd", "nadam", "radam",
                             "rmsprop", "rprop", "adafactor"}),
}  # fmt: skip
NO_FAST_PATH = 1.0  # a reduced precision whose matrix products run slower than fp32's here has no fast path


@dataclass(frozen=True)
class Fit:
    """What decides whether a mode can pay off for a workload on a device, known before measuring it."""

    device: DeviceKind
    image_input: bool | None = None  # a batch of images (channels, height, width); None: not known
    optimizer: str | None = None  # the optimizer's class name, lower case; None: not known (a user's)
    no_checkpoint: str | None = None  # why checkpoint refuses the model, as its probe read it; None: it may apply
    no_compile: str | None = None  # why compile refuses it (a TorchScript model), as its probe read it
    # dtype -> its matrix product's speed over fp32's here, and where that figure comes from
    speed: tuple[tuple[str, float, str], ...] = ()

    @classmethod
    def of(cls, device: str, workload: dict, peaks: dict | None = None, probe_speed: dict | None = None,
           prober: str = "the planning probe") -> Fit:  # fmt: skip
        """From a workload as planned (`Workload.to_json`), the peaks `dlperf peak` measured for the device and thread
        count (dtype -> FLOP/s) and, where those lack a dtype, the planning probe's timing (dtype -> its speed over
        fp32's; `prober` names that probe)."""
        shape = (workload.get("input") or {}).get("shape")
        name = (workload.get("optimizer") or {}).get("name")
        speed = []
        fp32 = (peaks or {}).get(Mode.FP32.value)
        for dtype in (Mode.BF16.value, Mode.FP16.value):
            if fp32 and (peaks or {}).get(dtype):
                speed.append((dtype, peaks[dtype] / fp32, "`dlperf peak` measured"))
            elif (probe_speed or {}).get(dtype):
                speed.append((dtype, probe_speed[dtype], f"{prober} timed"))
        extra = workload.get("extra") or {}
        return cls(DeviceKind(device.split(":")[0]), None if shape is None else len(shape) == 3,
                   None if name in (None, "user") else name.lower(), extra.get("no_checkpoint"),
                   extra.get("no_compile"), tuple(speed))  # fmt: skip


def left_out(option: str, fit: Fit) -> str | None:
    """Why `option` (a mode fragment such as "bf16" or "compile+cuda_graphs") cannot pay off for the workload on the
    device of `fit`: it does not run there, does not apply to the model, or has no fast path there; None if it may."""
    parts = [Mode(p) for p in option.split("+")]
    for part in parts:
        if why := _left_out(part, fit):
            return why if len(parts) == 1 else f"{part.value}: {why}"
    return None


def _left_out(part: Mode, fit: Fit) -> str | None:
    row = ROW[part]
    if fit.device not in row.devices:
        return f"runs on {' and '.join(DEVICE_NAMES[d] for d in DeviceKind if d in row.devices)} only"
    if row.image_input and fit.image_input is False:
        return "needs an image input (channels, height, width)"
    if part is Mode.CHECKPOINT and fit.no_checkpoint:
        return fit.no_checkpoint
    if part is Mode.COMPILE and fit.no_compile:
        return fit.no_compile
    if part in IMPLEMENTED_BY and fit.optimizer and fit.optimizer not in IMPLEMENTED_BY[part]:
        return f"the optimizer ({fit.optimizer}) has no {part.value} implementation"
    for dtype, speed, source in fit.speed:
        if dtype == part.value and speed < NO_FAST_PATH:
            slower = f"{1 / speed:.0f}" if speed < 0.1 else f"{1 / speed:.3g}"  # 1.04x, not 1x
            return f"no fast path for {dtype} here: {source} its matrix product {slower}x slower than fp32's"
    return None


def advisable(options: tuple[str, ...] | list[str], fit: Fit) -> tuple[list[str], dict[str, str]]:
    """The options that may pay off, in order, and option -> why each other is left out (`left_out`)."""
    kept, out = [], {}
    for option in options:
        if why := left_out(option, fit):
            out[option] = why
        else:
            kept.append(option)
    return kept, out
