"""What this machine offers a benchmark: usable cores, CPU pinning, ISA, memory, CPU time and resident memory.

Standard library only: this module runs inside worker processes whose environments hold nothing but a framework.
Every function that reads /proc or /sys takes ``root`` so tests can point it at a fake tree; a file that is missing
or unreadable yields a fallback (``None``, ``{}``, ``os.cpu_count()``) rather than an error, because containers and
non-x86 kernels omit many of these files.
"""

from __future__ import annotations

import ctypes
import glob
import math
import os
import platform
import re
import sys
from collections import defaultdict

# Instruction-set extensions that decide which CPU kernels a framework can pick (oneDNN, MKL, ATen's dispatch).
ISA_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)

# Columns of the aggregate `cpu` line of /proc/stat, in kernel order. `guest` and `guest_nice` follow but are already
# counted inside `user` and `nice`, so they are left out of totals.
CPU_TIME_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")

# Inherited variables worth recording because they change how many threads run, where, or which kernels run.
# Prefixes: GNU OpenMP (OMP_, GOMP_), Intel/LLVM OpenMP (KMP_), MKL (MKL_NUM_THREADS, MKL_ENABLE_INSTRUCTIONS, ...),
# oneDNN under its current and former names (ONEDNN_MAX_CPU_ISA, DNNL_MAX_CPU_ISA, ...), OpenBLAS and BLIS.
THREAD_ENV_PREFIXES = ("OMP_", "GOMP_", "KMP_", "MKL_", "ONEDNN_", "DNNL_", "OPENBLAS_", "BLIS_")
# Exact names, each read by PyTorch, the CUDA libraries or the dynamic loader:
THREAD_ENV_NAMES = frozenset(
    {
        "ATEN_CPU_CAPABILITY",  # caps ATen's vectorised kernels (default, avx2, avx512)
        "TORCH_MKLDNN_MATMUL_MIN_DIM",  # size thresholds for routing matmul to oneDNN
        "TORCH_MKLDNN_MATMUL_MIN_SIZE",
        "LD_PRELOAD",  # tcmalloc/jemalloc/libiomp5 preloads change allocation and threading
        "CUDA_VISIBLE_DEVICES",
        "CUDA_LAUNCH_BLOCKING",  # serialises every kernel launch
        "CUBLAS_WORKSPACE_CONFIG",  # deterministic cuBLAS picks other kernels
        "NVIDIA_TF32_OVERRIDE",  # 0 disables TF32 in cuBLAS and cuDNN
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
        "PYTORCH_CUDA_ALLOC_CONF",
    }
)

# Only the thread-count variables of the pools a framework may start: OpenMP (PyTorch's intra-op pool, oneDNN), MKL
# (which reads its own variable before OpenMP's) and OpenBLAS (numpy's copy, and PyTorch's BLAS on aarch64), which
# otherwise starts one thread per online CPU when loaded. Pinning is done with sched_setaffinity, so no *_AFFINITY or
# OMP_PROC_BIND here; and nothing else OpenBLAS reads (OPENBLAS_CORETYPE picks kernels, set by some machines) is set.
THREAD_COUNT_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")

_V1_CPU_MOUNTS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path: str) -> int | None:
    text = _read(path)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _cpuinfo_blocks(root: str) -> list[dict[str, str]]:
    """One dict per processor block of /proc/cpuinfo."""
    blocks = []
    for chunk in (_read(os.path.join(root, "proc/cpuinfo")) or "").split("\n\n"):
        pairs = (line.split(":", 1) for line in chunk.splitlines() if ":" in line)
        block = {key.strip(): value.strip() for key, value in pairs}
        if block:
            blocks.append(block)
    return blocks


# --- cores ---------------------------------------------------------------------------------------------------------


def _core_map(root: str) -> dict[int, tuple[str, str]]:
    """Logical CPU -> (package id, core id) from sysfs; CPUs without a topology directory (offline) are absent."""
    cores = {}
    for topo in glob.glob(os.path.join(root, "sys/devices/system/cpu/cpu[0-9]*/topology")):
        cpu = re.search(r"cpu(\d+)$", os.path.dirname(topo))
        package = _read(os.path.join(topo, "physical_package_id"))
        core = _read(os.path.join(topo, "core_id"))
        if cpu and package is not None and core is not None:
            cores[int(cpu.group(1))] = (package.strip(), core.strip())
    return cores


def physical_cores(root: str = "/") -> int:
    """Distinct physical cores of the machine (SMT siblings counted once), whatever this process may use."""
    pairs = set(_core_map(root).values())
    if not pairs:
        # Some ARM and POWER cpuinfo files have no core id at all; then only the logical count is known.
        blocks = _cpuinfo_blocks(root)
        pairs = {(b.get("physical id", "0"), b["core id"]) for b in blocks if "core id" in b}
    return len(pairs) or os.cpu_count() or 1


def affinity_cpus() -> list[int]:
    """Logical CPUs this process may run on, sorted."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


def _own_cgroups(root: str, controller: str = "cpu") -> tuple[str, str]:
    """This process's (cgroup v1 `controller` path, cgroup v2 path); "/" when unknown."""
    v1 = v2 = "/"
    for line in (_read(os.path.join(root, "proc/self/cgroup")) or "").splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        hierarchy, controllers, path = fields
        # A path with ".." lies outside our cgroup namespace, of which only the root is mounted.
        path = "/" if ".." in path else path
        if hierarchy == "0" and not controllers:
            v2 = path
        elif controller in controllers.split(","):
            v1 = path
    return v1, v2


def _ancestors(path: str) -> list[str]:
    """Path "/a/b" -> ["a/b", "a", ""]: relative, so os.path.join keeps the mount point in front."""
    parts = [p for p in path.split("/") if p]
    return ["/".join(parts[:n]) for n in range(len(parts), -1, -1)]


def _cgroup_dirs(root: str) -> list[str]:
    """Every cgroup directory whose CPU limit applies to us: our own and its ancestors, in v2, hybrid and v1 mounts.

    Ancestors matter because a parent's quota caps its children; and a container without a cgroup namespace sees
    its own cgroup mounted at the root while /proc/self/cgroup names a deeper path that doesn't exist there.
    """
    v1, v2 = _own_cgroups(root)
    mounts = [("sys/fs/cgroup", v2), ("sys/fs/cgroup/unified", v2)]
    mounts += [(f"sys/fs/cgroup/{name}", v1) for name in _V1_CPU_MOUNTS]
    return [os.path.join(root, mount, rel) for mount, path in mounts for rel in _ancestors(path)]


def _parse_cpu_max(text: str) -> float | None:
    """cgroup v2 cpu.max: "max 100000" -> None, "200000 100000" -> 2.0."""
    fields = text.split()
    if not fields or fields[0] == "max":
        return None
    try:
        quota, period = int(fields[0]), int(fields[1]) if len(fields) > 1 else 100_000
    except ValueError:
        return None
    return quota / period if period > 0 else None


def _dir_cpu_limit(directory: str) -> float | None:
    text = _read(os.path.join(directory, "cpu.max"))
    if text is not None:
        return _parse_cpu_max(text)
    quota = _read_int(os.path.join(directory, "cpu.cfs_quota_us"))
    period = _read_int(os.path.join(directory, "cpu.cfs_period_us"))
    if quota is None or period is None or quota < 0 or period <= 0:  # quota -1 means unlimited
        return None
    return quota / period


def cgroup_cpu_limit(root: str = "/") -> float | None:
    """CPUs' worth of time the cgroup quota allows per period (2.0 = two CPUs), or None when unlimited."""
    limits = [limit for d in _cgroup_dirs(root) if (limit := _dir_cpu_limit(d)) is not None]
    return min(limits, default=None)


def usable_cores(root: str = "/") -> dict:
    """Physical cores, affinity mask size and cgroup limit; "cores", the smallest of them, is what dlperf calls cores.

    A fractional quota is floored (1.5 CPUs cannot run two threads without throttling), but never below 1.
    """
    physical, affinity, cgroup = physical_cores(root), len(affinity_cpus()), cgroup_cpu_limit(root)
    bounds = [physical, affinity] + ([math.floor(cgroup)] if cgroup is not None else [])
    return {"physical": physical, "affinity": affinity, "cgroup": cgroup, "cores": max(1, min(bounds))}


# --threads beyond this many per usable core measure the oversubscription, not the machine: 100000 crashed torch's
# thread pool (SIGSEGV) in `dlperf run` and `dlperf peak`
MAX_THREADS_PER_CORE = 8


def too_many_threads(requested, cores: int) -> str | None:
    """Why a --threads list cannot run here (None: it can): a count above MAX_THREADS_PER_CORE per usable core."""
    over = [n for n in requested or () if n > MAX_THREADS_PER_CORE * cores]
    if not over:
        return None
    most = MAX_THREADS_PER_CORE * cores
    return f"--threads {over[0]}: at most {MAX_THREADS_PER_CORE} per usable core ({most} on this machine's {cores})"


# --nproc beyond this many per usable core: processes that each import a framework and hold its memory, past any
# oversubscription worth measuring (--nproc 10000 would start them all)
MAX_PROCESSES_PER_CORE = 4


def too_many_processes(requested, cores: int | None = None) -> str | None:
    """Why a --nproc list cannot run on this machine (None: it can): a count above MAX_PROCESSES_PER_CORE per usable
    core (`cores`: this machine's, read when None)."""
    cores = usable_cores()["cores"] if cores is None else cores
    most = MAX_PROCESSES_PER_CORE * cores
    if not (over := [n for n in requested or () if n > most]):
        return None
    return (f"--nproc {over[0]}: at most {most} processes on this machine ({MAX_PROCESSES_PER_CORE} per usable core, "
            f"of its {cores})")  # fmt: skip


def default_thread_counts(cores: int) -> list[int]:
    """Powers of two up to ``cores``, then ``cores`` itself: 6 -> [1, 2, 4, 6]."""
    cores = max(1, cores)
    counts = [2**k for k in range(cores.bit_length())]
    return counts if counts[-1] == cores else [*counts, cores]


def pin_cpus(
    threads: int, allowed: list[int] | None = None, root: str = "/", busy: dict[int, int] | None = None
) -> list[int]:
    """The ``threads`` CPUs to pin a run to, sorted: one logical CPU per physical core first, SMT siblings only when
    the mask has fewer cores than threads. Fewer than ``threads`` only if the mask itself is smaller. `busy` (CPU ->
    busy ticks lately): the least busy first, else the lowest numbers.

    Two threads on SMT siblings share one core's execution units, so they would measure half a core each.
    """
    core_of, busy = _core_map(root), busy or {}
    firsts, siblings, seen = [], [], set()
    for cpu in sorted(affinity_cpus() if allowed is None else allowed, key=lambda c: (busy.get(c, 0), c)):
        core = core_of.get(cpu, ("cpu", str(cpu)))  # unknown topology: treat each CPU as its own core
        (siblings if core in seen else firsts).append(cpu)
        seen.add(core)
    return sorted((firsts + siblings)[: max(0, threads)])


HOLD_LOOK_S = 0.05  # how long `busy_lately` watches the CPUs' busy counters before the least busy are picked


def busy_lately(cpus: list[int], root: str = "/") -> dict[int, int]:
    """Each of `cpus`' busy ticks over the next HOLD_LOOK_S: what `pin_cpus` picks the least busy by, for a held
    cell's threads (`hold_threads`) and a `--pin`ned cell's process (`runner/sweep.py`) alike."""
    import time

    before = cpu_busy_ticks(root)
    time.sleep(HOLD_LOOK_S)
    after = cpu_busy_ticks(root)
    return {cpu: after.get(cpu, 0) - before.get(cpu, 0) for cpu in cpus}


def hold_threads(threads: int, root: str = "/") -> list[int] | None:
    """Every thread of this process held to `threads` CPUs of its affinity set, where it has more, one per physical
    core first as `pin_cpus` picks them (the first `threads` CPUs could be one core's SMT siblings, a 2-thread cell
    then on one core where another framework's floats over two), the least busy over HOLD_LOOK_S first (each held
    cell took CPU 0: two at once, two test workers' or a second command's, shared it while CPU 1 idled); threads
    started later inherit it. For a framework that runs work on threads beside its kernels' pool of `threads` (JAX's
    dispatch beside XLA's pool, MXNet's engine worker beside the Python thread that feeds it): they then share the
    cell's `threads` cores instead of taking more. Some threads may already run (numpy's OpenBLAS pool, unless
    OPENBLAS_NUM_THREADS=1 as in dlperf's workers), hence each one. Returns the CPUs held to, or None."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) <= threads:
        return None
    held = pin_cpus(threads, cpus, root, busy_lately(cpus, root))
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), held)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    return held


# --- CPU identity ----------------------------------------------------------------------------------------------------


def cpu_model(root: str = "/") -> str:
    """Marketing name of the CPU, or the best identification the kernel gives on architectures without one."""
    block = next(iter(_cpuinfo_blocks(root)), {})
    for key in ("model name", "cpu model", "cpu", "Hardware"):  # x86, MIPS, POWER, older ARM
        if block.get(key):
            return block[key]
    if "CPU implementer" in block:  # arm64 names only the implementer and part numbers
        return f"{platform.machine()} implementer {block['CPU implementer']} part {block.get('CPU part', '?')}"
    return platform.processor() or platform.machine() or "unknown"


def cpu_flags(root: str = "/") -> list[str]:
    """Sorted CPU feature flags ("flags" on x86, "Features" on ARM)."""
    block = next(iter(_cpuinfo_blocks(root)), {})
    return sorted(set((block.get("flags") or block.get("Features") or "").split()))


def isa_summary(flags: list[str]) -> dict[str, bool]:
    """Whether each extension in ISA_FLAGS is present."""
    present = set(flags)
    return {name: name in present for name in ISA_FLAGS}


# --- memory and CPU time ---------------------------------------------------------------------------------------------


def _kib_field(path: str, field: str) -> int | None:
    """Bytes of a "Field:   1234 kB" line, as in /proc/meminfo and /proc/*/status."""
    for line in (_read(path) or "").splitlines():
        name, _, value = line.partition(":")
        if name == field and value.split():
            return int(value.split()[0]) * 1024
    return None


def memory_available_bytes(root: str = "/") -> int | None:
    """Memory the kernel could give a new process now without swapping (MemAvailable)."""
    return _kib_field(os.path.join(root, "proc/meminfo"), "MemAvailable")


def memory_total_bytes(root: str = "/") -> int | None:
    """Physical memory the kernel manages (MemTotal)."""
    return _kib_field(os.path.join(root, "proc/meminfo"), "MemTotal")


def cpu_times(root: str = "/") -> dict[str, float]:
    """Seconds spent in each state by all CPUs together since boot; old kernels lack the later fields."""
    for line in (_read(os.path.join(root, "proc/stat")) or "").splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            tick = os.sysconf("SC_CLK_TCK")
            return {name: int(value) / tick for name, value in zip(CPU_TIME_FIELDS, fields[1:], strict=False)}
    return {}


def cpu_busy_ticks(root: str = "/") -> dict[int, int]:
    """Each CPU's busy ticks since boot (its /proc/stat line's BUSY_FIELDS); {} where it cannot be read."""
    ticks = {}
    for line in (_read(os.path.join(root, "proc/stat")) or "").splitlines():
        name, *fields = line.split() or [""]
        if name.startswith("cpu") and name[3:].isdigit():
            values = dict(zip(CPU_TIME_FIELDS, fields, strict=False))
            ticks[int(name[3:])] = sum(int(values.get(k, 0)) for k in BUSY_FIELDS)
    return ticks


def steal_fraction(before: dict[str, float], after: dict[str, float]) -> float | None:
    """Share of CPU time the hypervisor gave to other guests between two cpu_times() readings."""
    if "steal" not in before or "steal" not in after:
        return None
    total = sum(after[k] - before[k] for k in CPU_TIME_FIELDS if k in before and k in after)
    return (after["steal"] - before["steal"]) / total if total > 0 else None


BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq")
# The counters behind a share tick 100 times a second: each CPU's busy time and the family's CPU time are a tick out
# either way, about (CPUs + 1) ticks in all. A window too short to hold that under this share of the machine's
# capacity has no share: a cell timed for 20 ms on 2 CPUs read "other processes used 198% of the CPUs".
SHARE_RESOLUTION = 0.05


def share_window_s() -> float:
    """The shortest window `others_cpu_share` reads a share over on this machine: (CPUs + 1) ticks within
    SHARE_RESOLUTION of its capacity, 0.3 s on 2 CPUs, 0.4 s on one, about 0.2 s on many."""
    cpus = os.cpu_count() or 1
    return (cpus + 1) / os.sysconf("SC_CLK_TCK") / (cpus * SHARE_RESOLUTION)


def others_cpu_share(
    before: dict[str, float], after: dict[str, float], own_cpu_s: float, wall_s: float
) -> float | None:
    """Share of the machine's CPU capacity that other processes used between two cpu_times() readings; `own_cpu_s`:
    what this process and those it started used meanwhile (`family_cpu_s`: a DataLoader's workers are ours).

    Steal time only shows other virtual machines; another process on this one (a second benchmark, a build) slows a
    multi-threaded step just as much, and only shows as busy time that is not ours. None where a window is too short
    for the counters' ticks (`SHARE_RESOLUTION`: 0.3 s on 2 CPUs); at most the whole machine."""
    cpus = os.cpu_count() or 1
    if not before or not after or wall_s < share_window_s():
        return None
    busy = sum(after.get(k, 0.0) - before.get(k, 0.0) for k in BUSY_FIELDS)
    return min(1.0, max(0.0, busy - own_cpu_s) / (wall_s * cpus))


def family_cpu_s(root: str = "/") -> float:
    """CPU seconds of this process and of every process it started: its own, its children's that ended and were
    waited for, and those of its descendants still running (a DataLoader's workers), read from /proc. Between two
    readings, the CPU a process's own family used: none of it is another process's (`others_cpu_share`)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + _living_descendants_cpu_s(os.getpid(), root)


def _living_descendants_cpu_s(pid: int, root: str = "/") -> float:
    """utime + stime of `pid`'s descendants still running (their own, not their ended children's), from each
    process's stat; 0 where /proc cannot be read."""
    proc = os.path.join(root, "proc")
    children: dict[int, list[int]] = defaultdict(list)
    cpu_of: dict[int, float] = {}
    for name in os.listdir(proc) if os.path.isdir(proc) else []:
        fields = _stat_fields(os.path.join(proc, name, "stat")) if name.isdigit() else None
        if fields is not None:
            children[int(fields[1])].append(int(name))  # the parent's id: the field after the state
            cpu_of[int(name)] = _stat_cpu_s(fields)
    family, frontier = set(), [pid]
    while frontier:
        young = [child for child in children[frontier.pop()] if child not in family]
        family.update(young)
        frontier += young
    return sum(cpu_of[child] for child in family)


def _stat_fields(path: str) -> list[str] | None:
    """A /proc stat file's fields after the command's closing parenthesis (state, parent, ...), or None."""
    stat = _read(path)
    fields = stat.rsplit(")", 1)[1].split() if stat and ")" in stat else []
    return fields if len(fields) > 12 else None


def _stat_cpu_s(fields: list[str]) -> float:
    """utime + stime (the 12th and 13th of `_stat_fields`), in seconds."""
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_times(root: str = "/") -> dict[int, tuple[float, float | None]]:
    """This process's threads: id -> (seconds on a CPU, seconds ready to run but waiting for one), from schedstat.

    The wait is the time others took a thread's CPU: other processes, or its own process's threads beyond the CPUs it
    may use. CPU time plus wait is the time it wanted a CPU, whoever else ran. A kernel without schedstat (no
    CONFIG_SCHED_INFO) gives the CPU time from stat's ticks, and the wait None."""
    found: dict[int, tuple[float, float | None]] = {}
    task_dir = os.path.join(root, "proc/self/task")
    for task in os.listdir(task_dir) if os.path.isdir(task_dir) else []:
        schedstat = (_read(os.path.join(task_dir, task, "schedstat")) or "").split()
        if len(schedstat) >= 2:
            found[int(task)] = (int(schedstat[0]) / 1e9, int(schedstat[1]) / 1e9)
            continue
        fields = _stat_fields(os.path.join(task_dir, task, "stat"))
        if fields is not None:
            found[int(task)] = (_stat_cpu_s(fields), None)
    return found


def rss_bytes(root: str = "/") -> int | None:
    """Resident memory of this process now."""
    return _kib_field(os.path.join(root, "proc/self/status"), "VmRSS")


def data_bytes(root: str = "/") -> int | None:
    """This process's data segment now (VmData: heap and private writable mappings): what RLIMIT_DATA limits."""
    return _kib_field(os.path.join(root, "proc/self/status"), "VmData")


def data_peak_bytes(root: str = "/") -> int | None:
    """The most this process's data segment has held (what RLIMIT_DATA counts), since it started or was forked:
    VmData now plus the address space's high-water mark above its size now (VmPeak - VmSize), the kernel keeping no
    mark of the data segment's own. Exact where only data mappings came and went since the peak, as over a step's
    tensors; a library mapped since then counts as data (an overestimate). None where not known."""
    text = _read(os.path.join(root, "proc/self/status")) or ""
    status = {name: value.split() for name, _, value in (line.partition(":") for line in text.splitlines())}
    data, peak, size = (status.get(name) for name in ("VmData", "VmPeak", "VmSize"))
    if not (data and peak and size):
        return None
    return (int(data[0]) + max(0, int(peak[0]) - int(size[0]))) * 1024


def rss_hwm_bytes(root: str = "/") -> int | None:
    """Peak resident memory of this process since start or since the last reset_rss_hwm()."""
    return _kib_field(os.path.join(root, "proc/self/status"), "VmHWM")


def reset_rss_hwm(root: str = "/") -> bool:
    """Reset the peak RSS to the current RSS (Linux >= 4.0), so a later peak belongs to what ran in between.

    False when the kernel or a sandbox refuses the write; then the peak still includes everything since start.
    """
    try:
        with open(os.path.join(root, "proc/self/clear_refs"), "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


# --- the out-of-memory killer ----------------------------------------------------------------------------------------


def oom_kills(root: str = "/") -> int | None:
    """How many processes the kernel's out-of-memory killer has killed, a counter to read before and after a child:
    of this process's memory cgroup where it is readable (v2 memory.events, v1 memory.oom_control: a child is in
    this cgroup, whose count takes in its descendants'), else of the machine (/proc/vmstat, Linux >= 4.13, where
    every OOM kill counts); None where none is readable."""
    v1, v2 = _own_cgroups(root, "memory")
    places = [os.path.join(root, mount, rel, "memory.events") for mount in ("sys/fs/cgroup", "sys/fs/cgroup/unified")
              for rel in _own_or_mounted(v2)]  # fmt: skip
    places += [os.path.join(root, "sys/fs/cgroup/memory", rel, "memory.oom_control") for rel in _own_or_mounted(v1)]
    for path in [*places, os.path.join(root, "proc/vmstat")]:
        if (count := _counter(_read(path), "oom_kill")) is not None:
            return count
    return None


def _own_or_mounted(path: str) -> list[str]:
    """The cgroup's directory relative to its mount, then the mount's root: a container without a cgroup namespace
    sees its own cgroup mounted there while /proc/self/cgroup names a deeper path."""
    own = path.strip("/")
    return [own, ""] if own else [""]


def _counter(text: str | None, name: str) -> int | None:
    """The value of `name` in a "name value" per line file (memory.events, /proc/vmstat), or None."""
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == name and fields[1].isdigit():
            return int(fields[1])
    return None


# --- environment variables -------------------------------------------------------------------------------------------


def inherited_thread_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of ``environ`` (default os.environ) that change threading or kernel choice, sorted by name."""
    environ = os.environ if environ is None else environ
    return {
        name: environ[name]
        for name in sorted(environ)
        if name in THREAD_ENV_NAMES or name.startswith(THREAD_ENV_PREFIXES)
    }


def thread_env(threads: int) -> dict[str, str]:
    """Variables to set in a child before it imports a framework, overriding inherited ones: each thread pool's size
    must be fixed before the library that owns it is loaded.
    """
    return dict.fromkeys(THREAD_COUNT_VARS, str(threads))


def prctl(option: int, arg: int | ctypes._CArgObject) -> bool:
    """Linux's prctl(2) on this process; False where it failed or is not Linux's (a child dying with its parent, the
    parent a subreaper of its children's orphans: `worker/lifeline.py`, `runner/lifeline.py`)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(pid: int, proc_root: str = "/proc") -> list[int]:
    """Every live descendant of `pid`, from the parent links in /proc (Linux; [] elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc_root}/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the name in parentheses may hold spaces
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
