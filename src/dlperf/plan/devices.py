"""Where the cells run: the frameworks' devices (asked of a probe child: the parent never imports a framework), the
devices chosen of those, and the CPU thread counts."""

from __future__ import annotations

from collections.abc import Sequence

from dlperf.errors import UsageError
from dlperf.measure import system
from dlperf.runner import probe_cache
from dlperf.runner.sweep import interpreter_for
from dlperf.spec import device_kind
from dlperf.vocab import DeviceKind


def framework_info(frameworks: Sequence[str]) -> dict[str, dict]:
    """Versions and devices of each framework, from a probe child (the parent never imports a framework), or as the
    last probe on this machine, interpreter and version answered (`runner/probe_cache.py`)."""
    info = {}
    for name in frameworks:
        info[name] = probe_cache.env_answer(name, interpreter_for(name)).to_json()  # MissingDependency if absent
    return info


def resolve_devices(requested: tuple[str, ...] | None, info: dict[str, dict], flag: str = "--devices") -> list[str]:
    """The devices of the frameworks' that the request names (every one present where it names none); a device not
    present is refused naming `flag`, what the request came from (`--device` of fit and optimize)."""
    present = list(dict.fromkeys(d["name"] for fw in info.values() for d in fw.get("devices", [])))
    if requested is None:
        return present or ["cpu"]
    chosen = []
    for dev in requested:
        matches = [p for p in present if p == dev or (dev == "cuda" and device_kind(p) is DeviceKind.CUDA)]
        if not matches:
            raise UsageError(f"{flag}: {dev!r} is not present on this machine (present: {', '.join(present)})")
        chosen += matches
    return list(dict.fromkeys(chosen))


def thread_counts(requested: tuple[int, ...] | None, cores: int, warnings: list[str]) -> list[int]:
    if why := system.too_many_threads(requested, cores):
        raise UsageError(why)  # bad input: one line before anything runs (100000 crashed each cell's thread pool)
    counts = list(requested) if requested else system.default_thread_counts(cores)
    over = [n for n in counts if n > cores]
    if over:
        warnings.append(
            f"--threads {','.join(map(str, over))} exceeds the {cores} usable cores: expect "
            "oversubscription (steps can be many times slower); measured anyway"
        )
    return counts
