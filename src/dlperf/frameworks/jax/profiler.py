"""Where a JAX train step's time goes: jax.profiler over a few steady steps, each XLA operation's time put in a
`dlperf.vocab.Category`; the top operations, the operations run per step, and the profiler's own gzip Chrome trace.
The backend's `profile` (see `dlperf.frameworks`).

What XLA:CPU records (jax 0.10.2): one event per thunk, the compiled step's unit of work, named after its HLO
instruction (stat `hlo_op`), on the thread that ran it. Independent thunks run at once on XLA's pool threads, so
their times may overlap: the categories are the thunks' times scaled to the time at least one thunk ran (the union of
their intervals), and `host` is the rest of the step's wall time: argument handling, dispatch, the thunk executor
between thunks, and the profiler's own cost per event. A thunk of control flow (a `while` loop, a call) only holds
the thunks of its body, which are counted themselves.

The category of an HLO instruction (read from the compiled step's HLO text, by name):
- the phase first, from the instruction's `op_name` metadata, which JAX writes as a path of transformations: under
  the `dlperf.loss` scope (`backend.cross_entropy`) it is `loss`, forward (`jvp(...)`) and backward (`transpose(...)`)
  alike; at the top of the step, neither forward nor backward, it is the optax update (`optimizer`), with what XLA
  fused into it of the backward (its last reductions; in bf16 the gradients' casts to fp32), which a note counts;
- then its kind, by the operations it holds (a fusion: everything in its fused computation): a matrix product or a
  convolution makes it `matmul`, whatever else is fused with it; a reduce-window or select-and-scatter `pooling`; only
  data movement (copies, transposes, slices, concatenation, casts) `copy`; only element-wise arithmetic, reductions
  and broadcasts `elementwise`; anything else (random bits, sorting, custom calls) `other`, never a guess.
XLA decomposes BatchNorm into reductions and element-wise operations fused with their neighbours, so `normalization`
stays empty: a note says so.

On a GPU the events are the device's kernels (the `/device:GPU` planes), each under its HLO instruction's category;
the device's gaps are `host`, not split into host and idle (no launch correlation is read).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import jax

from dlperf.frameworks.common.profiling import ranked, window, within_cap, written
from dlperf.vocab import Category

LOSS_SCOPE = re.compile(r"(^|[/(])dlperf\.loss($|[/)])")  # backend.cross_entropy's scope: "jvp(dlperf.loss)/exp"
FORWARD_BACKWARD = ("jvp(", "transpose(")

MATMUL_OPS = {"dot", "convolution"}
POOLING_OPS = {"reduce-window", "select-and-scatter"}
CONTROL_OPS = {"while", "conditional", "call", "async-start", "async-done"}
STRUCTURE_OPS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "reshape"}
MOVEMENT_OPS = {
    "copy", "copy-start", "copy-done", "transpose", "slice", "dynamic-slice", "dynamic-update-slice", "concatenate",
    "pad", "reverse", "convert", "bitcast-convert",
}  # fmt: skip
ELEMENTWISE_OPS = {
    "add", "subtract", "multiply", "divide", "negate", "abs", "sign", "exponential", "exponential-minus-one", "log",
    "log-plus-one", "sqrt", "rsqrt", "cbrt", "power", "tanh", "logistic", "erf", "sine", "cosine", "tan", "atan2",
    "maximum", "minimum", "clamp", "compare", "select", "and", "or", "xor", "not", "floor", "ceil",
    "round-nearest-afz", "round-nearest-even", "remainder", "is-finite", "reduce", "broadcast", "iota", "map",
    "gather", "scatter", "reduce-precision", "shift-left", "shift-right-logical", "shift-right-arithmetic",
}  # fmt: skip

# `  ROOT %name = f32[4,64]{1,0} fusion(%a, %b), kind=kLoop, calls=%fused_computation.3, metadata={op_name="..."}`
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%(?P<name>[^\s=]+)\s*=\s*(?P<rest>.*)$")
COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%(?P<name>\S+)\s.*\{\s*$")
CALLED = re.compile(r"\b(?:calls|to_apply|body|condition|branch_computations)=(\{[^}]*\}|%[^\s,]+)")
OP_NAME = re.compile(r'op_name="([^"]*)"')
LAYOUT = re.compile(r"\{[^{}]*\}")


@dataclass
class Instruction:
    name: str
    shape: str  # its result's shape, without the layout
    opcode: str
    operands: list[str]
    called: list[str]  # the computations it calls (a fusion's fused computation, a loop's body and condition)
    op_name: str


# ----------------------------------------------------------------------------------------------------------------------
# The compiled step's HLO


def parse_hlo(text: str) -> tuple[dict[str, Instruction], dict[str, list[str]]]:
    """The instructions of an HLO module's text by name, and each computation's instruction names."""
    instructions: dict[str, Instruction] = {}
    computations: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if match := COMPUTATION.match(line):
            current = computations.setdefault(match["name"], [])
        elif match := INSTRUCTION.match(line):
            instruction = _instruction(match["name"], match["rest"])
            if instruction is not None:
                instructions[instruction.name] = instruction
                current.append(instruction.name)
    return instructions, computations


def _instruction(name: str, rest: str) -> Instruction | None:
    """`rest` is `shape opcode(operands), attributes`; a tuple's shape is in parentheses, with spaces inside."""
    shape_end = _closing(rest, 0) + 1 if rest.startswith("(") else rest.find(" ")
    shape, after = rest[:shape_end], rest[shape_end:].lstrip()
    match = re.match(r"([\w-]+)\(", after)
    if match is None:
        return None
    close = _closing(after, match.end() - 1)
    operands = re.findall(r"%([^\s,)]+)", after[match.end() : close])
    attributes = after[close + 1 :]
    called = [c for group in CALLED.findall(attributes) for c in re.findall(r"%([^\s,}]+)", group)]
    op_name = OP_NAME.search(attributes)
    return Instruction(name, LAYOUT.sub("", shape), match[1], operands, called, op_name[1] if op_name else "")


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis closing the one at `start` (the end of the text if none)."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return len(text)


def opcodes(instruction: Instruction, instructions: dict, computations: dict) -> set[str]:
    """The operations an instruction runs: its own and, through the computations it calls, theirs (a while loop's
    are its body's: it is classified apart, as control flow)."""
    found = {instruction.opcode}
    pending, seen = list(instruction.called), set()
    while pending:
        computation = pending.pop()
        if computation in seen:
            continue
        seen.add(computation)
        for name in computations.get(computation, []):
            inner = instructions[name]
            found.add(inner.opcode)
            pending += inner.called
    return found


def kind(ops: set[str]) -> Category | None:
    """The category of what an instruction runs, by the rule in the module's docstring."""
    if ops & MATMUL_OPS:
        return Category.MATMUL
    if ops & POOLING_OPS:
        return Category.POOLING
    work = ops - STRUCTURE_OPS - {"fusion"}
    if work <= MOVEMENT_OPS:
        return Category.COPY
    if work <= MOVEMENT_OPS | ELEMENTWISE_OPS:
        return Category.ELEMENTWISE
    return Category.OTHER


def phase(op_name: str) -> Category | None:
    """`loss` or `optimizer` by where JAX traced the instruction (its op_name), else None."""
    if LOSS_SCOPE.search(op_name):
        return Category.LOSS
    parts = op_name.split("/")
    if len(parts) > 1 and parts[0].startswith("jit(") and not parts[1].startswith(FORWARD_BACKWARD):
        return Category.OPTIMIZER
    return None


def classify(hlo_text: str) -> dict[str, tuple[Category | None, str]]:
    """Every instruction of the compiled step: (its category, None for control flow; its shapes, for top_ops)."""
    instructions, computations = parse_hlo(hlo_text)
    out = {}
    for name, inst in instructions.items():
        category = None if inst.opcode in CONTROL_OPS else kind(opcodes(inst, instructions, computations))
        if category is not None:
            category = phase(inst.op_name) or category
        inputs = ", ".join(instructions[o].shape for o in inst.operands if o in instructions)
        out[name] = (category, f"({inputs}) -> {inst.shape}")
    return out


def update_holds(hlo_text: str) -> tuple[int, int, int]:
    """Of the update's instructions (`optimizer`: traced at the top of the step), how many there are, how many hold
    a reduction and how many a cast: XLA fuses the backward's last reductions (a bias's gradient, BatchNorm's scale
    and shift) and, in bf16, the gradients' casts to fp32 into the update that consumes them, so their time counts
    under `optimizer`."""
    instructions, computations = parse_hlo(hlo_text)
    update = [
        opcodes(inst, instructions, computations)
        for inst in instructions.values()
        if inst.opcode not in CONTROL_OPS and phase(inst.op_name) is Category.OPTIMIZER
    ]
    return len(update), sum("reduce" in ops for ops in update), sum("convert" in ops for ops in update)


def update_note(total: int, reducing: int, casting: int) -> str | None:
    """The profile's note of what the update holds beyond the update (`update_holds`); None where it holds nothing
    else."""
    held = [f"{reducing} reduce a gradient"] * bool(reducing)
    held += [f"{casting} cast a bf16 gradient to fp32"] * bool(casting)
    if not held:
        return None
    return f"optimizer: holds backward work XLA fused into the update: of its {total} operations, {', '.join(held)}"


# ----------------------------------------------------------------------------------------------------------------------
# Profiling


@dataclass
class OpEvent:
    name: str  # the HLO instruction
    start_ns: float
    duration_ns: float


def profile(train, steps: int, trace_path: str | None, max_trace_bytes: int) -> dict[str, Any]:
    """`steps` steady steps of `train` (a backend.JaxStep, warmed up) under jax.profiler: the fields of
    `dlperf.protocol.Profiled`."""
    notes: list[str] = []
    hlo = train.jitted.lower(*train._args()).compile().as_text()  # the executable already compiled
    ops = classify(hlo)
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # no event per Python call: JAX's Python runs in the step's host time
    with tempfile.TemporaryDirectory(prefix="dlperf-jax-profile-") as log_dir:
        train.sync()
        jax.profiler.start_trace(log_dir, profiler_options=options)
        step_s = window(train.step, train.sync, steps)
        jax.profiler.stop_trace()
        [xplane] = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.xplane.pb"))
        events, on_gpu = op_events(jax.profiler.ProfileData.from_file(xplane))
        trace = save_trace(log_dir, trace_path, max_trace_bytes, notes)
    if note := update_note(*update_holds(hlo)):
        notes.append(note)
    leaves = [e for e in events if ops.get(e.name, (Category.OTHER,))[0] is not None]
    result = {"steps": steps, "step_s": step_s, "notes": notes, "trace": trace, **no_counts(notes)}
    result["categories"] = categories(leaves, ops, steps, step_s, notes)
    result["top_ops"] = top_ops(leaves, ops, steps)
    result["modules"] = []
    notes.append("modules: not split (Flax NNX puts no module names into XLA's operation metadata)")
    result["ops_per_step"] = round(len(leaves) / steps)
    result["kernels_per_step"] = round(len(leaves) / steps) if on_gpu else None
    if on_gpu:
        notes.append("the device's gaps are all under host (not split into host and idle)")
    return result


def op_events(data) -> tuple[list[OpEvent], bool]:
    """The events of HLO instructions: the GPU's kernels when the profile has a GPU plane with them, else the
    thunks on the host's threads. Whether they are a GPU's."""
    by_plane: dict[bool, list[OpEvent]] = defaultdict(list)
    for plane in data.planes:
        gpu = plane.name.startswith("/device:GPU")
        for line in plane.lines:
            for event in line.events:
                hlo_op = dict(event.stats).get("hlo_op")
                if hlo_op is not None:
                    by_plane[gpu].append(OpEvent(str(hlo_op), event.start_ns, event.duration_ns))
    on_gpu = bool(by_plane[True])
    return by_plane[on_gpu], on_gpu


def categories(leaves: list[OpEvent], ops: dict, steps: int, step_s: float, notes: list[str]) -> dict[str, float]:
    """Seconds per step by category: the operations' times scaled to the time any ran; `host` the rest of the step
    (scaled down with the rest if the operations ran longer than the step measured, which they cannot by much)."""
    seconds: dict[str, float] = defaultdict(float)
    unknown = set()
    for event in leaves:
        if event.name not in ops:
            unknown.add(event.name)
        category = ops.get(event.name, (Category.OTHER,))[0]
        seconds[category.value] += event.duration_ns / 1e9 / steps
    if unknown:
        notes.append(f"{len(unknown)} operations not found in the compiled step's HLO are under other")
    total = sum(seconds.values())
    busy = min(union_ns(leaves) / 1e9 / steps, step_s)
    out = {k: v * busy / total for k, v in seconds.items() if v > 0} if total else {}
    out[Category.HOST.value] = step_s - busy
    return out


def union_ns(events: list[OpEvent]) -> float:
    """The time at least one of the events ran: overlapping intervals (other threads, streams) counted once."""
    busy, end = 0.0, None
    for event in sorted(events, key=lambda e: e.start_ns):
        stop = event.start_ns + event.duration_ns
        if end is None or event.start_ns >= end:
            busy += event.duration_ns
            end = stop
        elif stop > end:
            busy += stop - end
            end = stop
    return busy


def top_ops(leaves: list[OpEvent], ops: dict, steps: int) -> list[dict[str, Any]]:
    """The HLO instructions with the most time (their own: no thunk holds another), with calls per step (more than
    one inside a loop) and their operand and result shapes."""
    spent: dict[str, float] = defaultdict(float)
    calls: Counter = Counter()
    for event in leaves:
        spent[event.name] += event.duration_ns / 1e9 / steps
        calls[event.name] += 1
    return [
        {"name": name, "self_s": spent[name], "calls": calls[name] / steps, "shapes": ops.get(name, (None, ""))[1]}
        for name in ranked(spent)
    ]


def no_counts(notes: list[str]) -> dict[str, Any]:
    """XLA's cost analysis counts FLOPs and bytes for the whole step only (the cell's FLOP count is that figure):
    there is no per-operation count to put in categories."""
    notes.append("FLOPs and bytes by category: none (XLA's cost analysis gives the whole step's only)")
    notes.append("normalization: none apart (XLA splits BatchNorm into reductions and element-wise work: elementwise)")
    return {"flops": {}, "bytes": {}}


def save_trace(log_dir: str, path: str | None, max_bytes: int, notes: list[str]) -> str | None:
    """The profiler's own gzip Chrome trace (`*.trace.json.gz`, written beside the XSpace) copied to `path`; not kept
    (with a note) when above the cap."""
    if path is None:
        return None
    found = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.trace.json.gz"))
    if not found:
        notes.append("no trace kept: jax.profiler wrote no Chrome trace")
        return None
    if not within_cap(os.path.getsize(found[0]), max_bytes, notes):
        return None
    return path if written(lambda: shutil.copyfile(found[0], path), path, notes) else None
