"""A reduced precision's matrix product timed against fp32's, the same way in every backend's planning probe
(`probe_env`'s `precision_speed`): whether a bf16 or fp16 mode can pay on this CPU in that framework's own kernels,
measured before a sweep spends time on it. Each backend gives its products; this times them.

Frameworks differ on one CPU: on an Intel Xeon with AVX-512 but neither avx512_bf16 nor AMX, a 512 x 512 bf16
product ran at 0.2x fp32's speed in PyTorch and TensorFlow (oneDNN emulates it) and 0.8x in JAX (XLA converts to
fp32), and their networks' bf16 steps followed (0.20-0.47x, 0.20-0.38x and 0.40-1.12x fp32's speed). The products
take turns, round after round, and each keeps its best: a host that slows for a moment slows one round of all of
them, not one dtype's every product.
"""

from __future__ import annotations

import time
from collections.abc import Callable

REFERENCE = "fp32"


def relative_speed(products: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """dtype -> the speed of its product over fp32's (above 1: faster), from `products` (dtype -> one product, run
    to completion; fp32 among them), each run once untimed (the first picks and prepares its kernel) and then timed
    once a round, in turns, for `rounds` rounds; the best time of each counts."""
    if REFERENCE not in products or rounds < 1:
        raise ValueError(f"relative_speed needs an {REFERENCE} product and at least one round")
    for product in products.values():
        product()
    best = dict.fromkeys(products, float("inf"))
    for _ in range(rounds):
        for dtype, product in products.items():
            start = time.perf_counter()
            product()
            best[dtype] = min(best[dtype], time.perf_counter() - start)
    return {dtype: round(best[REFERENCE] / t, 3) for dtype, t in best.items() if dtype != REFERENCE and t > 0}
