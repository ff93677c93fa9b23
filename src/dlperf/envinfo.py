"""The environment a run was measured in, recorded with its results, and the fingerprint that guards ``--resume``.

Standard library only, like dlperf.measure.system: the probe and worker children import it too. Framework details
(versions, CUDA, devices) are not discovered here, since that would import the framework; a probe child reports them
and the caller passes them in.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys

from dlperf.measure import system
from dlperf.version import VERSION

NVIDIA_SMI_QUERY = ["--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"]


def gpu_info(timeout: float = 10.0) -> list[dict] | None:
    """One dict per NVIDIA GPU (name, driver_version, memory_total_mib), or None without a working nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=timeout, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return [_parse_gpu_line(line) for line in out.stdout.splitlines() if line.strip()]


def _parse_gpu_line(line: str) -> dict:
    # rsplit: a GPU name could contain a comma, the driver version and memory cannot.
    fields = [f.strip() for f in line.rsplit(",", 2)]
    name, driver, memory = fields + [""] * (3 - len(fields))
    return {"name": name, "driver_version": driver, "memory_total_mib": int(memory) if memory.isdigit() else None}


def capture(framework_info: dict | None = None, *, root: str = "/", environ: dict[str, str] | None = None) -> dict:
    """The environment of a run; ``framework_info`` is {framework name: what its probe child reported}."""
    flags = system.cpu_flags(root)
    return {
        "cpu": {"model": system.cpu_model(root), "isa": system.isa_summary(flags), "flags": flags},
        "cores": system.usable_cores(root),
        "memory_total_bytes": system.memory_total_bytes(root),
        "os": {"platform": platform.platform(), "system": platform.system(), "kernel": platform.release()},
        "hostname": socket.gethostname(),
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation()},
        "executable": sys.executable,
        "dlperf_version": VERSION,
        "thread_env": system.inherited_thread_env(os.environ if environ is None else environ),
        "gpus": gpu_info(),
        "frameworks": dict(framework_info or {}),
    }


def fingerprint(env: dict) -> dict:
    """What must not change for ``dlperf run --resume`` to add cells to a run captured as ``env``.

    Memory is rounded to GiB because MemTotal moves by a few MiB between boots of the same machine.
    """
    memory = env.get("memory_total_bytes")
    return {
        "cpu_model": (env.get("cpu") or {}).get("model"),
        "cores": dict(env.get("cores") or {}),
        "memory_gib": round(memory / 2**30) if memory else None,
        "hostname": env.get("hostname"),
        "gpus": [gpu.get("name") for gpu in env.get("gpus") or []],
        "frameworks": {name: (info or {}).get("version") for name, info in (env.get("frameworks") or {}).items()},
    }


_LABELS = {
    "cpu_model": "CPU model",
    "memory_gib": "memory (GiB)",
    "hostname": "hostname",
    "gpus": "GPUs",
    "physical": "physical cores",
    "affinity": "CPUs in affinity mask",
    "cgroup": "cgroup CPU limit",
    "cores": "usable cores",
}


def _show(value) -> str:
    if isinstance(value, list):
        value = ", ".join(map(str, value))
    return str(value) if value not in (None, "") else "none"


def fingerprint_diff(old: dict, new: dict) -> list[str]:
    """Human-readable differences between two fingerprints, e.g. "torch version 2.13.0 -> 2.14.1"; [] if equal."""
    diffs = []
    for key in dict.fromkeys([*old, *new]):  # union, in first-seen order
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if key == "frameworks":
            diffs += _nested_diff(a or {}, b or {}, "{} version")
        elif isinstance(a, dict) or isinstance(b, dict):
            diffs += _nested_diff(a or {}, b or {}, "{}")
        else:
            diffs.append(f"{_LABELS.get(key, key)} {_show(a)} -> {_show(b)}")
    return diffs


def _nested_diff(old: dict, new: dict, template: str) -> list[str]:
    keys = dict.fromkeys([*old, *new])
    return [
        f"{template.format(_LABELS.get(k, k))} {_show(old.get(k))} -> {_show(new.get(k))}"
        for k in keys
        if old.get(k) != new.get(k)
    ]
