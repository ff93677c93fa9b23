"""What is kept between commands in DATA_DIR/cache (`envs.data_dir`): entries named by a hash of their key, written
whole, read defensively, each folder bounded; and a cell's figures that do not depend on the machine's state, kept
there so that a new run of the same cell does not measure them again (`extras`, `take`).

An entry is one JSON file, `<hash of its key>.<part>.json`, holding its key and value: an entry that does not parse,
or whose key is not the one asked, is a miss, measured again and written over. Written whole or not at all (a
temporary file, then renamed). Past `MAX_BYTES` a folder's oldest-written entries go first. `predict/cache.py`
keeps the operator counts this way (DATA_DIR/cache/opcounts); this module keeps the figures (DATA_DIR/cache/figures),
under the same switch: `DLPERF_NO_COUNT_CACHE=1` (`dlperf predict --no-cache`) neither reads nor writes either.

A cell's FLOPs per step and the memory of its step (the live tensors' peak, XLA's buffer plan) are counted by the
framework on one step of the model: the same for the same dlperf, framework version, backend and model source (a user's
file by its bytes, kept only where unchanged since the process started), workload (its batch included), mode, device,
machine (CPU model and flags, GPU nodes and driver) and the variables that change what the framework runs. Every one of
them is in the key; and the user's own files the process imported (`worker/sources.py`: the model's neighbours, a
package of theirs, each by size, time and digest) are in the entry, which is no longer taken once one of them changed or
is gone (`unchanged`), as a build system's dependency file. An installed package is known by its version alone, and what
the model reads that is no module (a config file) not at all: `DLPERF_NO_COUNT_CACHE=1` after changing those. What
depends on the machine's state (a resident-set peak, a CUDA allocator's peak, any time) is never kept: a process whose
cell finds its figures here skips the FLOP count and the memory step, and so has no resident-set peak of one step (its
timed steps' high-water mark is its own). Kept only for a plain cell (one process, no --data): a multi-process cell's
figures are each rank's, a dataset can change under the same path. A model named by its module
(`package.module:factory`) is never kept: its source is not read without importing it.
Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from functools import cache
from pathlib import Path
from typing import Any

from dlperf import envs
from dlperf.protocol import MEMORY_KINDS, Cell
from dlperf.runner import probe_cache
from dlperf.store.records import CellFigures
from dlperf.version import VERSION

FORMAT = 2  # of an entry's JSON (2: a cell's figures hold the user's files they were counted from)
MAX_BYTES = 64 * 2**20
STALE_TEMP_S = 3600.0  # a temporary file older than this was left by a process that died mid-write
BYPASS = "DLPERF_NO_COUNT_CACHE"
SRC = Path(__file__).resolve().parent.parent
# The memory figures counted from the step's tensors or its compiled plan, not read from the process or an allocator.
COUNTED_MEMORY = ("live_tensor_peak_bytes", "xla_buffer_peak_bytes", "xla_argument_bytes", "xla_output_bytes",
                  "xla_alias_bytes", "xla_temp_bytes")  # fmt: skip
COUNTED_KINDS = ("live_tensors", "xla_buffers")


def enabled() -> bool:
    return os.environ.get(BYPASS, "") in ("", "0")


def entry_name(entry_key: dict[str, Any], part: str) -> str:
    text = json.dumps(entry_key, sort_keys=True, separators=(",", ":"))
    return f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.{part}.json"


def read(folder: Path, entry_key: dict[str, Any], part: str) -> Any:
    """The entry's value, or None: absent, unreadable, damaged, or under another key."""
    try:
        payload = json.loads((folder / entry_name(entry_key, part)).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or payload.get("key") != entry_key:
        return None
    return payload.get("value")


def write(folder: Path, entry_key: dict[str, Any], part: str, value: Any) -> None:
    """Write an entry whole; a folder that cannot be written is no error, the figure stands, it is only not kept."""
    data = json.dumps({"format": FORMAT, "key": entry_key, "value": value}, separators=(",", ":")).encode()
    envs.write_whole(folder / entry_name(entry_key, part), data)


def prune(folder: Path, max_bytes: int = MAX_BYTES) -> None:
    """Keep `folder` under `max_bytes`, the oldest-written entries removed first (down to three quarters of it, so
    that every command does not prune again); temporary files of dead writers go too."""
    try:
        found = [(p, p.stat()) for p in folder.iterdir()]
    except OSError:
        return
    now = time.time()
    for p, st in found:
        if p.name.startswith(".tmp-") and now - st.st_mtime > STALE_TEMP_S:
            with contextlib.suppress(OSError):
                p.unlink()
    entries = sorted(((st.st_mtime, st.st_size, p) for p, st in found if p.suffix == ".json"), key=lambda e: e[0])
    total = sum(size for _, size, _ in entries)
    if total <= max_bytes:
        return
    for _, size, p in entries:
        if total <= max_bytes * 3 // 4:
            break
        with contextlib.suppress(OSError):
            p.unlink()
            total -= size


# --- a cell's counted figures --------------------------------------------------------------------------------------
def directory() -> Path:
    return envs.data_dir() / "cache" / "figures"


@cache
def _backend_source(framework: str) -> str:
    """A hash of what counts a cell's figures: the framework's backend (its models too), what every backend shares,
    and the worker that asks for them."""
    digest = hashlib.sha256()
    paths = [*sorted((SRC / "frameworks" / framework).glob("*.py")), *sorted((SRC / "frameworks" / "common").glob(
        "*.py")), SRC / "worker" / "cell.py"]  # fmt: skip
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def user_source(workload: dict[str, Any]) -> str | None:
    """A user's model file by its bytes ("" for a built-in workload); None where it is not read (a module path)."""
    source = workload.get("source")
    if source is None:
        return ""
    path = source.rpartition(":")[0]
    if not path.endswith(".py"):
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def key(cell: Cell, workload: dict[str, Any]) -> dict[str, Any] | None:
    """The key of a cell's counted figures, its thread count aside; None: not kept (turned off, a multi-process or
    --data cell, a framework not installed or of unknown version, a model whose source is not read)."""
    python = envs.interpreter_for(cell.framework)
    if not enabled() or cell.nproc or cell.loader or python is None:
        return None
    version, user = probe_cache.framework_version(cell.framework, python), user_source(workload)
    if version is None or user is None:
        return None
    found = {"dlperf": VERSION, "framework": cell.framework, "version": version, "python": python,
             "packages": _packages(cell.framework, python), "source": _backend_source(cell.framework), "user": user,
             "workload": workload, "mode": cell.mode, "device": cell.device, "machine": _machine(),
             "env": probe_cache.environment()}  # fmt: skip
    return json.loads(json.dumps(found))  # as it reads back: tuples as lists


def _packages(framework: str, python: str) -> dict[str, str | None]:
    """The versions of the packages beside the framework that build and compile its models (jax's jaxlib, which is
    XLA, flax and optax; tensorflow's keras), read as `probe_cache.framework_version` reads the framework's."""
    names = envs.PACKAGES.get(framework, ())
    if not envs.is_current(python):
        versions = (envs.record(framework) or {}).get("versions") or {}
        return {name: versions.get(name) for name in names}
    from importlib import metadata

    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _machine() -> dict[str, Any]:
    """The machine as the figures depend on it: which CPU (its kernels) and GPUs, not its cores or memory."""
    found = probe_cache.machine()
    return {k: found[k] for k in ("cpu_model", "cpu_flags", "device_nodes", "nvidia_driver")}


def extras(entry_key: dict[str, Any] | None) -> tuple[dict | None, dict | None]:
    """The kept (FLOPs, memory) of a cell's key, each None where none is kept, or where a user's file it was counted
    from has changed or is gone since (`unchanged`)."""
    if entry_key is None:
        return None, None
    flops, memory = read(directory(), entry_key, "flops"), read(directory(), entry_key, "memory")
    return tuple(v if isinstance(v, dict) and unchanged(v.get("sources")) else None for v in (flops, memory))


def unchanged(sources: Any) -> bool:
    """Whether the files of `sources` (`worker/sources.py`: path -> [size, mtime_ns, sha256]) are as they were: each
    by its size and time, one whose time alone moved by its bytes' digest (read once per process: `_digest_of`), as
    a build system decides what to make again. A file gone, or no list, is a change."""
    return isinstance(sources, dict) and all(_same(path, recorded) for path, recorded in sources.items())


def _same(path: str, recorded: Any) -> bool:
    try:
        size, mtime_ns, digest = recorded
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return False
    return st.st_size == size and (st.st_mtime_ns == mtime_ns or _digest_of(path, size, st.st_mtime_ns) == digest)


@cache
def _digest_of(path: str, size: int, mtime_ns: int) -> str | None:
    """The SHA-256 of a file as it is at this size and time (the two in the cache's key: the file read once while
    they stay)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def has(cell: Cell, workload: dict[str, Any]) -> tuple[str, ...]:
    """Which of a cell's counted figures are kept ("flops", "memory"): the ones its first process in a new run does
    not count again (`runner/sweep.child_task`), for the estimates of that process's time."""
    flops, memory = extras(key(cell, workload))
    return tuple(name for name, found in (("flops", flops), ("memory", memory)) if found is not None)


def keep(entry_key: dict[str, Any] | None, detail, origin: str) -> None:
    """Keep what one process counted itself (`detail`: its `ProcessDetail`), `origin` saying where: its FLOPs, and
    its memory figures where the step's peak is a counted one (never a resident-set or allocator peak)."""
    memory = detail.memory or {}
    headline = next((kind for name, kind in MEMORY_KINDS.items() if memory.get(name) is not None), None)
    if entry_key is None or (detail.flops_per_step is None and headline not in COUNTED_KINDS):
        return
    sources = detail.sources
    if not _read_as_keyed(entry_key["workload"], detail.started_at) or not sources_as_read(sources, detail.started_at):
        return
    if detail.flops_per_step is not None:
        value = {"flops_per_step": detail.flops_per_step, "flops_by_dtype": detail.flops_by_dtype, "from": origin}
        write(directory(), entry_key, "flops", {**value, "sources": sources})
    if headline in COUNTED_KINDS:
        counted = {k: memory[k] for k in COUNTED_MEMORY if memory.get(k) is not None}
        write(directory(), entry_key, "memory", {"figures": counted, "from": origin, "sources": sources})
    prune(directory())


def _read_as_keyed(workload: dict[str, Any], started_at: float | None) -> bool:
    """Whether the process read the user's model file as the key has it (its bytes now): not where the file was
    written after the process started (edited during a run, or before a --resume stored an interrupted run's
    process), whose figures are of the bytes it had then."""
    path = (workload.get("source") or "").rpartition(":")[0]
    if not path:
        return True
    try:
        return started_at is not None and Path(path).stat().st_mtime <= started_at
    except OSError:
        return False


def sources_as_read(sources: Any, started_at: float | None) -> bool:
    """Whether the user's files a process imported (`ProcessDetail.sources`, a count child's answer) were last written
    before it started and are as it read them now: not where it did not say which (too many, or it died first), nor
    where one was edited during the run (before a --resume stored an interrupted run's process too)."""
    if not isinstance(sources, dict) or started_at is None:
        return False
    written_before = all(isinstance(s, list) and len(s) == 3 and s[1] <= started_at * 1e9 for s in sources.values())
    return written_before and unchanged(sources)


def take(figures: CellFigures, flops: dict | None, memory: dict | None) -> None:
    """Fill what a cell has not measured, nor a sibling shared, from what is kept, and say where it came from."""
    if figures.flops_per_step is None and flops is not None:
        figures.flops_per_step, figures.flops_by_dtype = flops.get("flops_per_step"), flops.get("flops_by_dtype")
        figures.shared_from.update(flops=f"cached from {flops.get('from')}")
    if figures.peak_mem_bytes is None and memory is not None:
        kept = memory.get("figures") or {}
        kind, peak = next(((kind, kept[k]) for k, kind in MEMORY_KINDS.items() if kept.get(k) is not None),
                          (None, None))  # fmt: skip
        if peak is None:
            return
        own = {k: v for k, v in figures.memory_figures.items() if v is not None}
        figures.peak_mem_bytes, figures.peak_mem_kind = peak, kind
        figures.memory_figures = {**kept, **own}
        figures.shared_from.update(memory=f"cached from {memory.get('from')}")
