"""The `malloc_keep` mode: glibc's heap told to keep what a step frees, for the next step. Standard library only.

By default glibc serves a block over its mmap threshold (128 KiB at first, raised as such blocks are freed, to 32
MiB at most) with a fresh mmap, and gives it back to the kernel when freed; the top of the heap is given back too
(trimmed) once 128 KiB of it are free. A CNN step allocates its activations, tens of MiB each at batch 16, and frees
them by the end of the step: the next step maps them afresh, and every page of them is faulted in and zeroed by the
kernel again. ResNet-50 at batch 16 on 2 threads spent about half of each step so (1.8 s of system time in a 3.3 s
step, glibc 2.36); with both thresholds at their most (mallopt's value is an int) the heap keeps the memory, the
pages fault once, and the step took 1.9 s. The arithmetic is untouched: such a cell is not loss-checked.

Process-wide, set in the cell's own process before the step is built: a cell forked from a warm parent sets it
after the fork, and no other cell sees it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
KEEP = 2**31 - 1  # mallopt takes an int: the largest; blocks of 2 GiB or more are still mapped on their own


def glibc() -> str | None:
    """glibc's version ("2.36"), or None where the C library is another (musl, macOS's)."""
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()
    except (ValueError, OSError, AttributeError):  # no such name, no value, or no confstr (Windows)
        return None
    return version if name == "glibc" else None


def keep_freed() -> dict[str, str]:
    """Both thresholds at KEEP in this process; the settings to note beside the cell's. NotImplementedError (the cell
    is `unsupported`) where the C library is not glibc or glibc refuses a value."""
    version = glibc()
    if version is None:
        raise NotImplementedError("malloc_keep sets glibc's malloc (mallopt); this C library is not glibc")
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    for name, option in (("M_MMAP_THRESHOLD", M_MMAP_THRESHOLD), ("M_TRIM_THRESHOLD", M_TRIM_THRESHOLD)):
        if libc.mallopt(ctypes.c_int(option), ctypes.c_int(KEEP)) != 1:
            raise NotImplementedError(f"malloc_keep: glibc {version} refused mallopt({name}, {KEEP})")
    return {"malloc": f"glibc {version}: mallopt M_MMAP_THRESHOLD and M_TRIM_THRESHOLD {KEEP}"}
