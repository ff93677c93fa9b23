"""The memory view of `dlperf predict --memory`: the step's predicted peak per mode and its parts, whether it fits
each GPU, the largest batch that does, and how each mode changes them against the first. Pure functions over
`predict/memory.py`'s figures."""

from __future__ import annotations

from dlperf.predict import memory
from dlperf.report.format import nbytes

PART_HEADS = ("parameters", "gradients", "optimizer", "batch", "activations", "overhead", "peak")


def size(n: float) -> str:
    """GiB to two decimals, else MiB to three figures (a sample of 544 KiB read "1 MiB", 2x off), whole from 100
    MiB; under 1 MiB in KiB or bytes (a small batch was "0 MiB")."""
    if n >= memory.GIB:
        return f"{n / memory.GIB:.2f} GiB"
    if n >= 2**20:
        return f"{n / 2**20:.0f} MiB" if n >= 100 * 2**20 else f"{n / 2**20:.3g} MiB"
    return nbytes(round(n))


def parts_table(workload, found: dict):
    from rich.table import Table

    table = Table(title=f"{workload.name} at batch {workload.batch}: a training step's peak GPU memory predicted")
    table.add_column("mode")
    for name in PART_HEADS:
        table.add_column(name, justify="right")
    table.add_column("per sample", justify="right")
    for mode, line in found.items():
        if isinstance(line, str):
            table.add_row(mode, *["-"] * (len(PART_HEADS) + 1))
            continue
        p = line.at
        parts = [size(v) for v in (p.params, p.grads, p.optimizer, p.data, p.activations, p.overhead, p.total)]
        parts[4] += IN_UPDATE if p.in_update else ""
        table.add_row(mode, *parts, size(line.per_sample))
    return table


def gpu_table(workload, verdicts: dict):
    from rich.table import Table

    table = Table(title=f"{workload.name}: does batch {workload.batch} fit, and the largest batch that does")
    for name in ("GPU", "mode", f"batch {workload.batch}", "largest batch"):
        table.add_column(name, justify="right" if name == "largest batch" else "left", no_wrap=name == "GPU")
    for mode, rows in verdicts.items():
        for v in rows:
            table.add_row(v.gpu, mode, v.why, largest(v.largest))
    return table


def largest(n: int) -> str:
    """The largest batch that fits, as a person reads it; 0: even a batch of one needs more than the GPU has."""
    if n >= memory.MAX_BATCH:
        return f"{memory.MAX_BATCH:,} or more"
    return NONE if n == 0 else f"{n:,}"


NONE = "none, not even 1"
IN_UPDATE = " (update)"  # the step peaks in the optimizer's update: the rest then is its temporaries (`Peak.in_update`)
UPDATE_PEAK = (
    "the step peaks in the optimizer's update, when no activation is alive: the rest is the update's temporaries, "
    "in the implementation the optimizer was given, else PyTorch's foreach (CUDA's default), parameter-sized; a "
    "fused one (fused=True) holds fewer, its peak up to that much lower, and checkpointing or a smaller batch do not "
    "lower it"
)


def lines(found: dict, verdicts: dict) -> list[str]:
    """How each mode changes the peak and the largest batch against the first mode, and the modes not traced."""
    out = [f"{mode}: not predicted: {line}" for mode, line in found.items() if isinstance(line, str)]
    traced = [(m, line) for m, line in found.items() if not isinstance(line, str)]
    if len(traced) < 2:
        return out
    (base, b), rest = traced[0], traced[1:]
    for mode, line in rest:
        act, peak = line.at.activations / b.at.activations - 1, line.at.total / b.at.total - 1
        was = {v.gpu: v.largest for v in verdicts[base]}  # the first GPU some batch fits in either mode
        first = next((v for v in verdicts[mode] if v.largest or was.get(v.gpu)), None)
        gain = ""
        if first is not None:
            gain = f"; the largest batch on {first.gpu} {largest(was[first.gpu])} -> {largest(first.largest)}"
        rest = "the update's temporaries" if line.at.in_update and b.at.in_update else "activations"
        out.append(f"{mode} against {base}: {rest} {act:+.0%}, peak {peak:+.0%}{gain}")
    return out


def notes(found: dict) -> list[str]:
    mib = memory.OVERHEAD_BYTES / 2**20
    said = [
        "the parts: live tensor bytes of one steady step traced on fake tensors at the step's peak (gradients: those "
        "alive then; activations: the rest); predicted, never measured here",
        f"overhead (a rule fitted on an H100's CUDA allocator peaks, benchmarks/memory_fit.py): {mib:.0f} MiB + "
        f"{memory.OVERHEAD_FRACTION:.1%} of the traced peak; a GPU's room: its memory less "
        f"{memory.CONTEXT_BYTES / memory.GIB:g} GiB for the CUDA context",
        "largest batch: the step traced at the batches a search picks, until one that fits is followed by one that "
        "does not",
    ]
    if updating := [mode for mode, line in found.items() if not isinstance(line, str) and line.at.in_update]:
        said.insert(1, f"activations{IN_UPDATE} ({', '.join(updating)}): {UPDATE_PEAK}")
    if gradless := [mode for mode, line in found.items() if not isinstance(line, str) and line.at.grads == 0]:
        said.insert(1, f"gradients 0 B ({', '.join(gradless)}): the step peaks before any parameter's gradient is "
                       "made (the last step's are freed as it starts, zero_grad(set_to_none=True)), so none is alive "
                       "then")  # fmt: skip
    return said


def to_json(workload, found: dict, verdicts: dict) -> dict:
    modes = []
    for mode, line in found.items():
        if isinstance(line, str):
            modes.append({"mode": mode, "error": line})
            continue
        gpus = [{"gpu": v.gpu, "fits": v.fits, "why": v.why, "largest_batch": v.largest,
                 "largest_batch_is_the_search_cap": v.largest >= memory.MAX_BATCH}  # the text's "or more"
                for v in verdicts[mode]]  # fmt: skip
        modes.append({"mode": mode, "peak_bytes": line.at.to_json(), "per_sample_bytes": line.per_sample,
                      "gpus": gpus})  # fmt: skip
    rule = {"overhead_bytes": memory.OVERHEAD_BYTES, "overhead_fraction": memory.OVERHEAD_FRACTION,
            "context_bytes": memory.CONTEXT_BYTES}  # fmt: skip
    return {"workload": workload.name, "batch": workload.batch, "predicted": True, "rule": rule, "modes": modes}
