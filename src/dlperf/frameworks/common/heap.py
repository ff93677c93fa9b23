"""The allocator modes: glibc's heap told to keep what a step frees (`malloc_keep`), or another malloc in its place,
preloaded as the process starts (`tcmalloc`, `jemalloc`). Standard library only: the parent sets a cell's
LD_PRELOAD (`preload_env`, `runner/launch.py`) and the worker checks what it got.

By default glibc serves a block over its mmap threshold (128 KiB at first, raised as such blocks are freed, to 32
MiB at most) with a fresh mmap, and gives it back to the kernel when freed; the top of the heap is given back too
(trimmed) once 128 KiB of it are free. A CNN step allocates its activations, tens of MiB each at batch 16, and frees
them by the end of the step: the next step maps them afresh, and every page of them is faulted in and zeroed by the
kernel again. ResNet-50 at batch 16 on 2 threads took 660,000-790,000 page faults and 1.5-1.9 s of system CPU time
in each 2.9-3.5 s step (glibc 2.36); with every block from the heap and none given back, the pages fault once, and
the step took 1.9-2.1 s. tcmalloc and jemalloc keep freed memory in caches of their own. None of them changes the
arithmetic: such a cell is not loss-checked.

malloc_keep turns mmap off for blocks (M_MMAP_MAX 0) rather than raising the threshold: mallopt's value is an int,
so a threshold at its most still maps a block of 2 GiB or more on its own, and XLA allocates a step's temporaries as
one block: 2,126 MiB for JAX's ResNet-50 at batch 16, mapped and faulted afresh each step (544,000 faults) under the
threshold at 2**31 - 1, and trimming at that threshold would give such a block back when it is the heap's top.

The modes are the process's, whatever its framework. `malloc_keep` is set in the cell's own process by the worker,
before the framework is imported (its threads' arenas: ARENAS): a cell forked from a warm parent sets it after the
fork, and no other cell sees it. A preloaded malloc must be in place before the interpreter's first allocation, so
such a cell starts cold (`runner/warm.py`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

from dlperf.modes import Mode, mode_components

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_MAX = -4
M_ARENA_MAX = -8
NO_MMAP = 0  # blocks mapped at once at most: none, every block comes from the heap
NO_TRIM = -1  # mallopt's "never trim" (size_t's largest once glibc reads it)
# glibc gives a thread that allocates while another holds the heap an arena of its own: heaps of 64 MiB at most,
# mapped apart, where a larger block is mapped on its own whatever the threshold and freed memory is given back. XLA
# allocates a step's buffers on its pool's threads: JAX's MLP at batch 4,096 faulted 35,000 pages a step with both
# thresholds at 2**31 - 1 alone, 3,000 with one arena as well (set before jax's import; 11,500 after it, once its
# first thread had an arena), 0 under tcmalloc. PyTorch allocates on the thread that runs the step.
ARENAS = 1
# malloc_keep's mallopt calls, in order (the mode's recipe in modes.py says the same, tested)
KEEP_OPTIONS = (("M_MMAP_MAX", M_MMAP_MAX, NO_MMAP), ("M_TRIM_THRESHOLD", M_TRIM_THRESHOLD, NO_TRIM),
                ("M_ARENA_MAX", M_ARENA_MAX, ARENAS))  # fmt: skip

# a preloaded malloc: the names find_library knows it by, first found first, and where to get it
PRELOADS: dict[Mode, tuple[tuple[str, ...], str]] = {
    Mode.TCMALLOC: (("tcmalloc_minimal", "tcmalloc"), "gperftools (Debian/Ubuntu: apt install libtcmalloc-minimal4)"),
    Mode.JEMALLOC: (("jemalloc",), "jemalloc (Debian/Ubuntu: apt install libjemalloc2)"),
}
# its settings, unless the user set them: PyTorch's own CPU launcher's (torch.backends.xeon.run_cpu), freed pages
# never purged (decay -1), as malloc_keep keeps them, and no background thread, which purges and with decay off has
# nothing to do. ResNet-50 at batch 16 on 2 threads took 3.37 s a step at jemalloc's defaults and 3.49 s at the
# launcher's (1.9 million page faults a step, 40% of its CPU time in the kernel), against glibc's 2.51-2.87 s; 1.84 s
# with decay off (no faults). The background thread, decay off: tiny-fcn-r on 1 thread 397 us a step with it (10% of
# the CPU time in the kernel) against 276 us without; lstm on 2 threads 0.394 s against 0.341; resnet-50 alike.
PRELOAD_ENV: dict[Mode, dict[str, str]] = {
    Mode.JEMALLOC: {"MALLOC_CONF": "oversize_threshold:1,metadata_thp:auto,dirty_decay_ms:-1,muzzy_decay_ms:-1"},
}


def glibc() -> str | None:
    """glibc's version ("2.36"), or None where the C library is another (musl, macOS's)."""
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()
    except (ValueError, OSError, AttributeError):  # no such name, no value, or no confstr (Windows)
        return None
    return version if name == "glibc" else None


def applied(mode: str) -> dict[str, str]:
    """The mode's allocator component in this process, before the step is built; the settings to note beside the
    cell's ({} without one). NotImplementedError (the cell is `unsupported`) where it cannot be had here."""
    components = mode_components(mode)
    if Mode.MALLOC_KEEP in components:
        return keep_freed()
    component = preloaded(mode)
    return {} if component is None else check_preloaded(component)


def keep_freed() -> dict[str, str]:
    """Every block from glibc's heap and none given back, one arena for every thread, in this process; the settings
    to note beside the cell's. NotImplementedError (the cell is `unsupported`) where the C library is not glibc,
    another malloc was preloaded, or glibc refuses a value."""
    version = glibc()
    if version is None:
        raise NotImplementedError("malloc_keep sets glibc's malloc (mallopt); this C library is not glibc")
    if other := next((c for c in PRELOADS if mapped(c)), None):
        raise NotImplementedError(f"malloc_keep sets glibc's malloc; this process's is {other.value}'s (LD_PRELOAD)")
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    for name, option, value in KEEP_OPTIONS:
        if libc.mallopt(ctypes.c_int(option), ctypes.c_int(value)) != 1:
            raise NotImplementedError(f"malloc_keep: glibc {version} refused mallopt({name}, {value})")
    return {"malloc": f"glibc {version}: mallopt " + ", ".join(f"{name} {value}" for name, _, value in KEEP_OPTIONS)}


def preloaded(mode: str) -> Mode | None:
    """The component of `mode` whose malloc is preloaded as the process starts; None: none is."""
    return next((c for c in mode_components(mode) if c in PRELOADS), None)


@functools.cache
def library(component: Mode) -> str | None:
    """The preloaded malloc's library as the dynamic loader finds it by name ("libtcmalloc_minimal.so.4"); None
    where it is not installed."""
    names, _ = PRELOADS[component]
    return next((found for name in names if (found := ctypes.util.find_library(name))), None)


def preload_env(mode: str, environ: dict[str, str] | os._Environ) -> dict[str, str]:
    """What a cell's environment adds for `mode`: its malloc first in LD_PRELOAD, before whatever the user preloads,
    and its settings (PRELOAD_ENV) where the user set none; {} for a mode without one, or where its library is not
    installed (the worker then says so)."""
    component = preloaded(mode)
    found = library(component) if component else None
    if not found:
        return {}
    settings = {k: v for k, v in PRELOAD_ENV.get(component, {}).items() if k not in environ}
    return {**settings, "LD_PRELOAD": " ".join(filter(None, [found, environ.get("LD_PRELOAD", "")]))}


def not_installed(mode: str) -> str | None:
    """Why `mode` cannot run on this machine: the malloc it preloads is not installed here; None: it is, or it
    preloads none."""
    component = preloaded(mode)
    if component is None or library(component) is not None:
        return None
    names, source = PRELOADS[component]
    return f"lib{names[0]} is not installed here; it comes with {source}"


def mapped(component: Mode) -> str | None:
    """The path of `component`'s malloc library where this process has it mapped (Linux); None: it has not."""
    names, _ = PRELOADS[component]
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return None
    return next((p for p in sorted(paths) if any(os.path.basename(p).startswith(f"lib{n}.so") for n in names)), None)


def check_preloaded(component: Mode) -> dict[str, str]:
    """The settings to note where `component`'s malloc was preloaded in this process; NotImplementedError (the cell is
    `unsupported`) where it was not: not installed, or not preloaded (the cell started without its LD_PRELOAD)."""
    if found := mapped(component):
        settings = "".join(f", {k}={os.environ[k]}" for k in PRELOAD_ENV.get(component, {}) if k in os.environ)
        return {"malloc": f"{os.path.basename(found)} (LD_PRELOAD){settings}"}
    if missing := not_installed(component.value):
        raise NotImplementedError(f"{component.value}: {missing}")
    raise NotImplementedError(f"{component.value}: {library(component)} was not preloaded in this process (LD_PRELOAD)")
