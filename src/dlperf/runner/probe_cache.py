"""The planning probe's `EnvRequest` answers kept between commands: one JSON file per (framework, interpreter) in
DATA_DIR/cache/probe (`envs.data_dir`), so that a run does not start a child that imports the framework only to learn
what the last run learnt (issue 34: about 2 s of a one-cell run).

Only the env answer is kept: the framework's version, build and devices, and its bf16/fp16 matrix products' speed
against fp32 on this CPU, which are the machine's and the installation's. A workload's, data's or count's answer
depends on the user's files and is always asked. The entry is reused only while its key is the one computed now:
- the machine: CPU model and flags, usable cores and affinity, memory (GiB), hostname, kernel, and the GPU device
  nodes and driver version (read from /dev and /proc, no nvidia-smi);
- the interpreter's path and the framework's version in it, read without importing it (its package metadata here, or
  a dedicated environment's install record); an unknown version is never cached;
- dlperf's version and the source of what answers (the backend's .py files, the probe child, the answer types);
- every variable of this environment that changes the answer: the threading and kernel variables a run records
  (`system.inherited_thread_env`, CUDA_VISIBLE_DEVICES among them), the GPU runtimes' and frameworks' own
  (CUDA_*, NVIDIA_*, TORCH_*, ...), and what changes which package is imported (PYTHONPATH, LD_LIBRARY_PATH, ...).
A change to any of them re-probes and writes an entry of its own, named by the interpreter and a hash of the key: a
user switching PYTHONPATH, or between two checkouts, back and forth finds each one's entry still there. The folder is
bounded: `KEEP` entries a framework and interpreter, the least recently used dropped (a hit touches its entry).
Written whole (a temporary file, then renamed); read defensively: an entry that does not parse, is under another key,
or is not an answer of this framework is a miss. `DLPERF_NO_PROBE_CACHE=1` neither reads nor writes it.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import platform
import socket
import time
from pathlib import Path
from typing import Any

from dlperf import envs
from dlperf.answers import EnvAnswer, EnvRequest
from dlperf.measure import system
from dlperf.version import VERSION

FORMAT = 1
BYPASS = "DLPERF_NO_PROBE_CACHE"
# Variables beyond the recorded thread ones that change what the probe finds or how fast its products run.
ENV_PREFIXES = ("CUDA_", "NVIDIA_", "TORCH_", "PYTORCH_", "HIP_", "ROCR_", "ROCM_", "HSA_", "XLA_", "JAX_", "TF_",
                "MXNET_", "TPU_")  # fmt: skip
ENV_NAMES = ("PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX")
DEVICE_NODES = ("/dev/nvidia*", "/dev/kfd", "/dev/dri/*", "/dev/accel*")
SRC = Path(__file__).resolve().parent.parent
KEEP = 8  # entries a framework and interpreter keeps: one a key (PYTHONPATH, a variable, a driver), the oldest dropped


def enabled() -> bool:
    return os.environ.get(BYPASS, "") in ("", "0")


def directory() -> Path:
    return envs.data_dir() / "cache" / "probe"


def framework_version(framework: str, python: str) -> str | None:
    """The framework's version in `python`, read without importing it; None where nothing says."""
    from importlib import metadata

    if envs.is_current(python):
        try:
            return metadata.version(envs.import_name(framework))
        except metadata.PackageNotFoundError:
            return None
    versions = (envs.record(framework) or {}).get("versions") or {}
    found = versions.get(envs.PACKAGES.get(framework, (envs.import_name(framework),))[0])
    return found if isinstance(found, str) else None


def _source(framework: str) -> str:
    digest = hashlib.sha256()
    paths = [*sorted((SRC / "frameworks" / framework).glob("*.py")), SRC / "worker" / "probe.py", SRC / "answers.py"]
    for path in paths:
        with contextlib.suppress(OSError):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return None


def machine() -> dict[str, Any]:
    """What of this machine the answer depends on, read cheaply (the fingerprint a run records, and the GPUs' nodes)."""
    memory = system.memory_total_bytes()
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_model": system.cpu_model(),
        "cpu_flags": hashlib.sha256(" ".join(system.cpu_flags()).encode()).hexdigest(),
        "cores": system.usable_cores(),
        "affinity": affinity,
        "memory_gib": round(memory / 2**30) if memory else None,
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "device_nodes": sorted(p for pattern in DEVICE_NODES for p in glob.glob(pattern)),
        "nvidia_driver": _read("/proc/driver/nvidia/version"),
    }


def environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = dict(os.environ if environ is None else environ)
    found = system.inherited_thread_env(environ)
    found.update({k: v for k, v in environ.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES})
    return dict(sorted(found.items()))


def key(framework: str, python: str) -> dict[str, Any] | None:
    """The key of the framework's entry, or None: not cached (turned off, or its version unknown)."""
    version = framework_version(framework, python)
    if version is None or not enabled():
        return None
    found = {"dlperf": VERSION, "framework": framework, "version": version, "python": python,
             "source": _source(framework), "machine": machine(), "env": environment()}  # fmt: skip
    return json.loads(json.dumps(found))  # as it reads back: tuples as lists


def _stem(framework: str, python: str) -> str:
    return f"{framework}-{hashlib.sha256(python.encode()).hexdigest()[:16]}"


def _path(framework: str, python: str, entry_key: dict[str, Any]) -> Path:
    text = json.dumps(entry_key, sort_keys=True, separators=(",", ":"))
    return directory() / f"{_stem(framework, python)}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"


def _touch(path: Path) -> None:
    """Mark the entry used now, to the nanosecond (a file's own time may be a clock tick's, the same for several)."""
    now = time.time_ns()
    with contextlib.suppress(OSError):
        os.utime(path, ns=(now, now))


def read(framework: str, python: str, entry_key: dict[str, Any]) -> EnvAnswer | None:
    """The kept answer, or None: absent, unreadable, damaged, under another key, or not this framework's."""
    path = _path(framework, python, entry_key)
    try:
        payload = json.loads(path.read_bytes())
        if payload.get("format") != FORMAT or payload.get("key") != entry_key:
            return None
        found = EnvAnswer.from_json(payload["answer"])
    except Exception:  # whatever a damaged or foreign file holds is a miss, never an error
        return None
    if found.framework != framework or found.to_json() != payload["answer"]:
        return None
    _touch(path)
    return found


def write(framework: str, python: str, entry_key: dict[str, Any], answer: EnvAnswer) -> None:
    """Write the entry whole (temporary file, then rename), then drop what is past `KEEP` of this framework and
    interpreter, the least recently used first, and an entry of the earlier format (one per interpreter, no key in its
    name). A folder that cannot be written is no error."""
    data = json.dumps({"format": FORMAT, "key": entry_key, "answer": answer.to_json()}).encode()
    path = _path(framework, python, entry_key)
    envs.write_whole(path, data)
    _touch(path)
    stem = _stem(framework, python)
    used = []
    for entry in directory().glob(f"{stem}*.json"):
        with contextlib.suppress(OSError):
            if entry.name == f"{stem}.json":
                entry.unlink()
            else:
                used.append((entry.stat().st_mtime_ns, entry))
    for _, entry in sorted(used, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            entry.unlink()


def env_answer(framework: str, python: str) -> EnvAnswer:
    """The framework's `EnvRequest` answer: the kept one while its key holds, else the probe's (then kept)."""
    from dlperf.runner import probe

    entry_key = key(framework, python)
    if entry_key is not None and (kept := read(framework, python, entry_key)) is not None:
        return kept
    found = probe.ask(framework, EnvRequest(), python=python)
    if entry_key is not None:
        write(framework, python, entry_key, found)
    return found
