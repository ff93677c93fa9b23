"""What differs between the frameworks of one view beyond their figures: how each was timed, and how its FLOPs (the
utilization's `(N%)`) were counted. Said where it could mislead a reader setting one framework's cell against
another's: a view of one framework gets none."""

from __future__ import annotations

from dlperf.store.records import CellRecord

BRACKETED_BELOW_S = 0.01  # an asynchronous framework's step this short is read long when synchronized every step
COUNTED_BY = {"jax": "XLA's cost analysis"}  # whose FLOPs are not the products their own counter counts


def notes(cells: list[CellRecord]) -> list[str]:
    timed = [c for c in cells if c.ok and c.median_s]
    frameworks = {c.framework for c in timed}
    if len(frameworks) < 2:
        return []
    return [*_timed(timed, frameworks), *_counted(timed, frameworks)]


def _timed(cells: list[CellRecord], frameworks: set[str]) -> list[str]:
    """MXNet's engine is asynchronous as JAX's dispatch is, but its steps are synchronized on both sides: a pipelined
    clock of its own cost as much (BENCHMARKS.md, JAX against a plain loop). Measured on a 2-core Xeon, synchronizing
    every step read tiny-fcn-r's 1 ms step 1.17-1.44x a plain MXNet loop's, tiny-resnet-56's 1.00-1.09x."""
    short = sorted({c.workload for c in cells if c.framework == "mxnet" and c.median_s < BRACKETED_BELOW_S})
    if not short:
        return []
    pipelined = " (jax's steps are pipelined, as a training loop runs them)" if "jax" in frameworks else ""
    return [f"mxnet's steps are synchronized around each one (its engine runs them asynchronously): a step under "
            f"{BRACKETED_BELOW_S * 1000:.0f} ms reads up to about 1.4x a plain MXNet loop's, so its cells of "
            f"{', '.join(short)} are slower here than in training{pipelined}"]  # fmt: skip


def _counted(cells: list[CellRecord], frameworks: set[str]) -> list[str]:
    """Utilization is FLOPs against a peak: JAX's FLOPs are XLA's own count, which on the seven networks ran -18% to
    +17% from the products PyTorch's and TensorFlow's counters count alike; MXNet counts none."""
    if not any(c.utilization is not None for c in cells):
        return []
    said = []
    others = sorted(f for f in frameworks if f in COUNTED_BY and any(c.utilization is not None for c in cells
                                                                      if c.framework == f))  # fmt: skip
    if others and len(frameworks - set(others) - {"mxnet"}) > 0:
        how = "; ".join(f"{f}'s by {COUNTED_BY[f]}" for f in others)
        said.append(f"utilization (N%): FLOPs are counted per framework ({how}, the others' as the products of their "
                    "layers): the same network's count differs by up to about 17%, and so does its (N%)")  # fmt: skip
    if "mxnet" in frameworks:
        said.append("utilization (N%): mxnet counts no FLOPs, so its cells have none")
    return said
