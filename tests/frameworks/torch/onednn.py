"""Whether oneDNN has a bf16 or fp16 LSTM on this CPU, known from the CPU's flags before a step runs: a test of a
reduced-precision LSTM expects `unsupported` only where this says why, and fails where the kernel exists and the step
raises anyway.

Under autocast PyTorch runs a CPU LSTM as one oneDNN primitive. oneDNN builds a bf16 one from AVX-512 (its
avx512_core: F, BW, VL and DQ; without avx512_bf16 it emulates bf16 with them) and refuses it below ("could not create a
primitive descriptor"), which the backend reports as the precision unsupported. An fp16 one it refuses for training on
every CPU: its verbose log says "f16 training not supported" (src/cpu/rnn/ref_rnn.cpp), seen with torch 2.13 on an
Intel Xeon with AVX512-FP16 and AMX-BF16 (no AMX-FP16) where fp16 was expected to train, as on an AMD EPYC with
avx512_bf16 and no avx512_fp16. With oneDNN capped by ONEDNN_MAX_CPU_ISA: at AVX2 bf16 is refused, at AVX512_CORE (no
bf16 instructions) it trains. Convolutions ran in both precisions with oneDNN capped at AVX2: no entry here.
"""

from __future__ import annotations

import os

from dlperf.measure.system import cpu_flags

# ONEDNN_MAX_CPU_ISA's levels, lowest first (oneDNN 3.5 renamed AVX512_CORE_FP16 to AVX10_1_512; both are read)
LEVELS = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI", "AVX512_CORE_BF16",
          "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16", "ALL")  # fmt: skip
ALIASES = {"AVX10_1_512": "AVX512_CORE_FP16", "AVX10_1_512_AMX": "AVX512_CORE_AMX",
           "AVX10_1_512_AMX_FP16": "AVX512_CORE_AMX_FP16", "DEFAULT": "ALL"}  # fmt: skip
# precision -> (the oneDNN level its LSTM needs, the CPU flags of that level); None: no CPU has it for training
LSTM_NEEDS = {
    "bf16": ("AVX512_CORE", ("avx512f", "avx512bw", "avx512vl", "avx512dq")),
    "fp16": None,
}
NO_TRAINING = "oneDNN's {} LSTM has no training kernel on any CPU ('f16 training not supported')"


def missing_lstm_kernel(precision: str, flags: list[str] | None = None, cap: str | None = None) -> str | None:
    """Why oneDNN has no `precision` LSTM on a CPU with `flags` (this one's) with oneDNN capped at `cap` (this
    process's ONEDNN_MAX_CPU_ISA); None where it has one."""
    if LSTM_NEEDS[precision] is None:
        return NO_TRAINING.format(precision)
    level, needed = LSTM_NEEDS[precision]
    flags = cpu_flags() if flags is None else flags
    cap = (cap or os.environ.get("ONEDNN_MAX_CPU_ISA") or "ALL").upper()
    cap = ALIASES.get(cap, cap)
    if cap not in LEVELS:
        raise ValueError(f"ONEDNN_MAX_CPU_ISA={cap}: not a level this table knows ({', '.join(LEVELS)})")
    if lacking := [f for f in needed if f not in flags]:
        return f"oneDNN's {precision} LSTM needs {level}: this CPU lacks {', '.join(lacking)}"
    if LEVELS.index(cap) < LEVELS.index(level):
        return f"oneDNN's {precision} LSTM needs {level}: ONEDNN_MAX_CPU_ISA caps it at {cap}"
    return None
