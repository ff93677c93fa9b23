"""The environment a run was measured in, recorded with its results, and the fingerprint that guards ``--resume``.

Standard library only, like dlperf.measure.system: the probe and worker children import it too. Framework details
(versions, CUDA, devices) are not discovered here, since that would import the framework; a probe child reports them
and the caller passes them in.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from functools import cache
from pathlib import Path

from dlperf.measure import system
from dlperf.version import VERSION

NVIDIA_SMI_QUERY = ["--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"]

# The instruction-set extensions a framework's CPU kernels are chosen by: x86's SIMD and matrix units, ARM's NEON
# (asimd), SVE and SME. Only these of the CPU's flags guard --resume: a kernel update adds or renames the others
# (mitigations, virtualization) on the same CPU. Not smep: x86's supervisor-mode execution prevention, no ARM SME.
KERNEL_ISA = re.compile(r"(?!smep$)(sse|ssse|avx|amx|fma|f16c|sve|sme|asimd|bf16|i8mm)")
CPU_ID = ("vendor", "family", "model_number", "stepping")  # what names a CPU when its model string does not (a VM's)


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


def _number(text: str | None) -> int | None:
    """A /proc/cpuinfo number: decimal on x86 ("cpu family : 26"), hexadecimal on ARM ("CPU part : 0xd0c")."""
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except (AttributeError, ValueError):
        return None


def _clock_mhz(text: str | None) -> float | None:
    try:
        return round(float(text), 1)
    except (TypeError, ValueError):
        return None


def cpu_identity(root: str = "/") -> dict:
    """Which CPU this is where its model string does not say (a VM's "AMD EPYC"): vendor, family, model number and
    stepping (ARM's implementer, part and revision; None where the kernel gives none), microcode, the clock when read
    and the highest (MHz, None without cpufreq, as in most VMs)."""
    block = next(iter(system._cpuinfo_blocks(root)), {})
    max_khz = system._read_int(os.path.join(root, "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"))
    return {
        "vendor": block.get("vendor_id") or block.get("CPU implementer"),
        "family": _number(block.get("cpu family")),
        "model_number": _number(block.get("model") or block.get("CPU part")),
        "stepping": _number(block.get("stepping") or block.get("CPU revision")),
        "microcode": block.get("microcode"),
        "clock_mhz": _clock_mhz(block.get("cpu MHz")),
        "max_clock_mhz": max_khz / 1000 if max_khz else None,
    }


def kernel_isa(flags: list[str]) -> list[str]:
    """The flags of `KERNEL_ISA`, sorted. On x86 (sse2 among them) `sme` and `sme_coherent` are AMD's Secure Memory
    Encryption, which firmware and kernel settings switch, not the Arm matrix extension of that name: left out."""
    x86 = "sse2" in flags
    return sorted(f for f in flags if KERNEL_ISA.match(f) and not (x86 and f.startswith("sme")))


def capture(framework_info: dict | None = None, *, root: str = "/", environ: dict[str, str] | None = None) -> dict:
    """The environment of a run; ``framework_info`` is {framework name: what its probe child reported}."""
    flags = system.cpu_flags(root)
    return {
        "cpu": {
            "model": system.cpu_model(root),
            **cpu_identity(root),
            "isa": system.isa_summary(flags),
            "flags": flags,
        },
        "cores": system.usable_cores(root),
        "memory_total_bytes": system.memory_total_bytes(root),
        "os": {"platform": platform.platform(), "system": platform.system(), "kernel": platform.release()},
        "hostname": socket.gethostname(),
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation()},
        "executable": sys.executable,
        "dlperf_version": VERSION,
        "dlperf_code": timing_code(),
        "thread_env": system.inherited_thread_env(os.environ if environ is None else environ),
        "gpus": gpu_info(),
        "frameworks": dict(framework_info or {}),
    }


# dlperf's own code that builds a cell's step and times it (its worker, timer, backends, launcher, the paper's models,
# the input pipeline): `--resume` times the cells a run left with the code that timed the others (`resume_diff`)
TIMING_CODE = ("worker", "measure", "frameworks", "runner", "workloads", "loaders.py", "bootstrap.py")
PACKAGE = Path(__file__).resolve().parent


@cache
def timing_code() -> dict[str, str]:
    """A digest of `TIMING_CODE` as this process runs it (each source file's path in the package and its bytes; 1 MB,
    a few ms, once per process) and, where dlperf runs from a git checkout (an editable install), its commit, read
    from the checkout's files (no subprocess): {"digest": ..., "commit": ...}. The version alone cannot tell two
    commits apart (0.1.0 at every one): a run interrupted 1,480 commits back was resumed with other timing code."""
    digest = hashlib.sha256()
    for name in TIMING_CODE:
        for path in sorted((PACKAGE / name).rglob("*.py")) if (PACKAGE / name).is_dir() else [PACKAGE / name]:
            if path.name.startswith(".") or not path.is_file():  # an editor's lock (`.#timer.py`, a dangling link)
                continue
            try:
                text = path.read_bytes()
            except OSError:  # unreadable: no module Python imports either; named, so two such trees still differ
                text = b"unreadable"
            digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + text + b"\0")
    commit = git_commit(PACKAGE.parent.parent)
    return {"digest": digest.hexdigest(), **({"commit": commit} if commit else {})}


def git_commit(root: Path) -> str | None:
    """The commit checked out in the git checkout at `root` (its `.git` a folder, or a worktree's file naming one),
    from HEAD, the ref it names, or the packed refs; None where `root` is no checkout or they do not read."""
    try:
        git = root / ".git"
        if git.is_file():  # a worktree's: "gitdir: PATH"
            git = root / git.read_text().partition("gitdir:")[2].strip()
        head = (git / "HEAD").read_text().strip()
        common = git / (git / "commondir").read_text().strip() if (git / "commondir").is_file() else git
        ref = head.removeprefix("ref: ")
        found = next((p.read_text().strip() for p in (git / ref, common / ref) if ref != head and p.is_file()), None)
        if ref != head and found is None and (common / "packed-refs").is_file():
            packed = (line.split() for line in (common / "packed-refs").read_text().splitlines())
            found = next((f[0] for f in packed if f[1:] == [ref]), None)
    except (OSError, ValueError):
        return None
    commit = head if ref == head else found
    return commit if commit and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit) else None


NEWER = ("cpu_id", "cpu_isa", "python")  # fingerprint keys a run recorded before them lacks


def fingerprint(env: dict) -> dict:
    """Who measured a run captured as ``env``, and what must not change for ``dlperf run --resume`` to add cells to it
    (`resume_diff`): the machine (its CPU by name, numbers and kernel-choosing extensions; cores, memory, GPUs; its
    hostname, which names it but is no part of it) and the software (Python, the frameworks). A `NEWER` key of which
    ``env`` holds nothing (recorded before it existed) is left out, as from the fingerprint stored then:
    `fingerprint_diff` compares only the keys both sides have.

    Memory is rounded to GiB because MemTotal moves by a few MiB between boots of the same machine.
    """
    memory, cpu = env.get("memory_total_bytes"), env.get("cpu") or {}
    found = {
        "cpu_model": cpu.get("model"),
        "cpu_id": {key: cpu.get(key) for key in CPU_ID} if "family" in cpu else None,
        "cpu_isa": kernel_isa(cpu["flags"]) if "flags" in cpu else None,
        "cores": dict(env.get("cores") or {}),
        "memory_gib": round(memory / 2**30) if memory else None,
        "hostname": env.get("hostname"),
        "gpus": [gpu.get("name") for gpu in env.get("gpus") or []],
        "python": _python_version(env.get("python")),
        "frameworks": {name: (info or {}).get("version") for name, info in (env.get("frameworks") or {}).items()},
    }
    return {key: value for key, value in found.items() if value is not None or key not in NEWER}


def _python_version(python: dict | str | None) -> str | None:
    """The major and minor version ("3.11"): frameworks' wheels are built for one and the interpreter's speed changes
    between them, while a patch release (3.11.7 -> 3.11.9, an OS update) changes neither."""
    version = python.get("version") if isinstance(python, dict) else python  # {"version": ...}, as `capture` records
    return ".".join(str(version).split(".")[:2]) if version else None


def recorded(stored: dict, env: dict) -> dict:
    """The fingerprint a stored run is resumed against: the one stored with it, and of the keys it lacks (stored by an
    older dlperf) what its stored environment holds (the CPU's flags and Python were recorded from the start). The
    stored one wins where both have a key: `dlperf run --resume --ray` stores the fingerprint of the node of the same
    kind that takes a run up beside the environment of the node that began it."""
    return fingerprint(env) | stored


_LABELS = {
    "cpu_model": "CPU model",
    "vendor": "CPU vendor",
    "family": "CPU family",
    "model_number": "CPU model number",
    "stepping": "CPU stepping",
    "python": "Python",
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


def alike(a: dict, b: dict, ignore: tuple[str, ...] = ()) -> bool:
    """Whether two fingerprints are of one machine and software, on the keys both have (`fingerprint_diff`): a run
    an older dlperf recorded, without the newer keys, is still of the machine that measured it; and on the frameworks
    both runs used (a torch run and a jax run of one machine record different ones). `ignore`: keys left out of the
    comparison."""
    return not differences(a, b, ignore)


def differences(a: dict, b: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """How two fingerprints differ, in words, on what `alike` compares ("torch version 2.12.0 -> 2.13.0")."""
    both = set(a.get("frameworks") or {}) & set(b.get("frameworks") or {})
    kept = [{k: {n: v[n] for n in both} if k == "frameworks" and isinstance(v, dict) else v for k, v in f.items()
             if k not in ignore} for f in (a, b)]  # fmt: skip
    return fingerprint_diff(*kept)


# the fingerprint's keys of the machine itself, its hardware: a run of this machine is one alike on these, whatever
# changed of its software since (which --resume then names) and whatever its hostname (new at a container's start)
MACHINE = ("cpu_model", "cpu_id", "cpu_isa", "cores", "memory_gib", "gpus")


def machine_diff(fingerprint_stored: dict, env_stored: dict, env: dict) -> list[str]:
    """How the machine a stored run was measured on differs from `env`'s, its hardware only (`MACHINE`), in words;
    [] where it is this machine: which of a store's runs (`dlperf merge` brings other machines') is this one's. What
    the run did not record (None, {}) is no difference: `--resume` compares the rest."""
    old, new = recorded(fingerprint_stored, env_stored), fingerprint(env)
    known = {k: _recorded(old[k]) for k in MACHINE if _recorded(old.get(k)) not in (None, {})}
    here = {k: {n: new[k].get(n) for n in v} if isinstance(v, dict) and isinstance(new.get(k), dict) else new.get(k)
            for k, v in known.items() if k in new}  # fmt: skip
    return fingerprint_diff(known, here)


def _recorded(value):
    """A fingerprint's value without what it did not record: {"cores": 2} of {"cores": 2, "physical": None}."""
    return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value


def resume_diff(fingerprint_stored: dict, env_stored: dict, env: dict) -> list[str]:
    """What changed since a stored run was measured that `--resume` must not mix into it, in words: its machine and
    software (`fingerprint_diff` of the fingerprint it was resumed against, `recorded`), and dlperf itself, whose
    timing and figures may differ between versions ("dlperf 0.1.0 -> 0.2.0"; a run that recorded no version is
    taken as this one's) and between commits (`code_diff`). The hostname alone is no change of either: a container
    restarted on the same machine has a new one, and its interrupted run goes on there. [] where it can go on."""
    old, new = recorded(fingerprint_stored, env_stored), fingerprint(env)
    diffs = fingerprint_diff(*({k: v for k, v in f.items() if k != "hostname"} for f in (old, new)))
    return diffs + dlperf_diff(env_stored, env)


def dlperf_diff(env_stored: dict, env: dict) -> list[str]:
    """dlperf itself since a stored run was measured, in words: its version ("dlperf 0.1.0 -> 0.2.0"; a run that
    recorded none is taken as this one's) and its timing code (`code_diff`); [] where it is the same. `--resume`
    compares this machine's (`resume_diff`), `--resume --ray` the node's that would take the run up."""
    was, now = env_stored.get("dlperf_version"), env.get("dlperf_version")
    return ([f"dlperf {was} -> {now}"] if was and now and was != now else []) + code_diff(env_stored, env)


def code_diff(env_stored: dict, env: dict) -> list[str]:
    """dlperf's timing code (`timing_code`) since the run began, in words: "dlperf's timing code 4f1c9a2e0b7d (commit
    11eef592) -> 9d03b5e1c2aa (commit 29e29346)", or, for a run begun by a dlperf that recorded none (before it did),
    that it cannot be told the same; [] where it is the same, or `env` holds none to compare."""
    was, now = env_stored.get("dlperf_code"), env.get("dlperf_code")
    if not isinstance(now, dict) or (isinstance(was, dict) and was.get("digest") == now.get("digest")):
        return []
    if not isinstance(was, dict):
        return ["dlperf's timing code, which the dlperf that began the run did not record, so it may time the cells "
                "left otherwise"]  # fmt: skip
    return [f"dlperf's timing code {_code_said(was)} -> {_code_said(now)}"]


def _code_said(code: dict) -> str:
    commit = code.get("commit")
    return f"{str(code.get('digest'))[:12]}{f' (commit {commit[:8]})' if commit else ''}"


def fingerprint_diff(old: dict, new: dict) -> list[str]:
    """Human-readable differences between two fingerprints, e.g. "torch version 2.13.0 -> 2.14.1"; [] if equal. Only
    the keys both have are compared: one recorded by an older dlperf lacks the newer keys, and its run stays
    resumable on the machine that measured it."""
    diffs = []
    for key in (k for k in old if k in new):
        a, b = old[key], new[key]
        if a == b:
            continue
        if key == "cpu_isa":  # filtered again: a run stored before x86's `sme` was left out still compares alike
            if kernel_isa(a or []) != kernel_isa(b or []):
                diffs.append(_isa_diff(kernel_isa(a or []), kernel_isa(b or [])))
        elif key == "frameworks":
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


def _isa_diff(old: list[str], new: list[str]) -> str:
    """What changed of the CPU's `KERNEL_ISA` extensions: "CPU extensions lost avx512bw, avx512f; gained amx_tile"."""
    lost, gained = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    parts = [f"{what} {', '.join(names)}" for what, names in (("lost", lost), ("gained", gained)) if names]
    return f"CPU extensions {'; '.join(parts)}"
