"""Is the GPU predictor monotone in a GPU's figures? Counts the steps a GPU better on every figure is predicted slower.

    python benchmarks/predict_monotone.py [--tolerance 0.03]

The seven built-in networks at their batch, 256 and 2048 (resnet-50 and alexnet-s at their batch and 256), in fp32,
tf32, bf16 and fp16, each counted once and predicted on every GPU of the table. A pair (better, worse) is one where the
first GPU is at least as good on every figure and better on one: the table's figures (each unit's peak, the SMs, the
memory bandwidth, the host link), and also with each unit's peak per SM (what one SM computes: on a wave of few blocks
a GPU of more, slower SMs is slower, as on the chip). Prints, for each, how many pairs and steps are predicted slower
on the better GPU (and by more than the tolerance), the worst ten, and the cells where tf32 is predicted slower than
fp32 on the same GPU. `tests/predict/test_monotone.py` holds the count with the peaks per SM at 0 on a few networks.
"""

from __future__ import annotations

import argparse

from dlperf.predict import count, gpus, roofline
from dlperf.workloads import BUILTIN

NETWORKS = ("fcn-s", "alexnet-s", "resnet-50", "fcn-r", "alexnet-r", "resnet-56", "lstm")
MODES = ("fp32", "tf32", "bf16", "fp16")


def figures(g: gpus.GPU, per_sm: bool) -> tuple[float, ...]:
    sms = roofline.sm_count(g)
    peaks = (g.peak("fp32", False)[0], g.peak("fp32", True)[0], g.peak("fp16", True)[0], g.peak("bf16", True)[0])
    return (*peaks, *(p / sms for p in peaks if per_sm), sms, g.memory_bw, g.host_link_bw)


def pairs(per_sm: bool) -> list[tuple[gpus.GPU, gpus.GPU]]:
    table = [(g, figures(g, per_sm)) for g in gpus.builtin()]
    return [
        (a, b) for a, fa in table for b, fb in table if fa != fb and all(x >= y for x, y in zip(fa, fb, strict=True))
    ]


def steps() -> list:
    asked = {(w, b, m) for w in NETWORKS for b in (BUILTIN[w].batch, 256, 2048) for m in MODES
             if not (b == 2048 and w in ("resnet-50", "alexnet-s"))}  # fmt: skip
    return count.counted([(count.at(BUILTIN[w], b), m) for w, b, m in sorted(asked)])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tolerance", type=float, default=0.03, help="the share a step may be slower by (default 3%%)")
    args = ap.parse_args(argv)
    found = steps()
    predicted = {(c.workload, c.batch, c.mode, g.name): roofline.predict(c, g).step_s for c in found
                 for g in gpus.builtin()}  # fmt: skip
    for per_sm, said in ((False, "the table's figures"), (True, "the table's figures and each unit's peak per SM")):
        found_pairs = pairs(per_sm)
        ratios = [(predicted[(c.workload, c.batch, c.mode, a.name)] / predicted[(c.workload, c.batch, c.mode, b.name)],
                   c.workload, c.batch, c.mode, a.name, b.name) for c in found for a, b in found_pairs]  # fmt: skip
        slower = sorted(ratios, reverse=True)
        slower = [s for s in slower if s[0] > 1 + 1e-9]
        beyond = sum(s[0] > 1 + args.tolerance for s in slower)
        print(
            f"{said}: {len(found_pairs)} pairs x {len(found)} steps; the better GPU predicted slower in "
            f"{len(slower)} ({beyond} by more than {args.tolerance:.0%})"
        )
        for ratio, *rest in slower[:10]:
            print(f"  {ratio:.3f}x  {' '.join(map(str, rest))}")
    tf32 = [
        k for k, v in predicted.items() if k[2] == "tf32" and v > predicted[(k[0], k[1], "fp32", k[3])] * (1 + 1e-9)
    ]
    print(
        f"tf32 predicted slower than fp32 on the same GPU: {len(tf32)} of "
        f"{sum(k[2] == 'tf32' for k in predicted)} cells"
    )


if __name__ == "__main__":
    main()
