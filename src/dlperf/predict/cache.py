"""Operator counts kept between commands: one JSON file per entry in DATA_DIR/cache/opcounts (`envs.data_dir`:
$DLPERF_DATA_DIR, else $XDG_DATA_HOME/dlperf, else ~/.local/share/dlperf).

An entry is a (model, mode) step's count at one batch (`<key>.b<batch>.json`), or a limit of the count there (the
child's `refused` answer: asked again, it would say the same), or its count as a function of the
batch, or why it is not one (`<key>.fit.json`), or a user's model as the probe describes it (`<key>.workload.json`,
`predict/workload.py`). The key is a hash of what makes a count: dlperf's version, the
counting framework's version, the source of its backend (the model definitions and the counting code, every .py
of `frameworks/<name>/`), a user's model file (its bytes), the workload's description (batch aside) and the mode.
A change to any of them is another key, so an entry is never read again once one changes. A model named by its
module (`package.module:factory`) is never cached: its source is not read without importing it.

Written whole or not at all (a temporary file in the folder, then renamed over the entry); read defensively: an entry
that does not parse, or whose key is not the one asked, is a miss, counted again and written over. The folder is
bounded: past `MAX_BYTES` the oldest-written entries go first. `DLPERF_NO_COUNT_CACHE=1` (or `dlperf predict
--no-cache`) neither reads nor writes it. Standard library only.
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
from dlperf.version import VERSION

FORMAT = 1  # of an entry's JSON
MAX_BYTES = 64 * 2**20  # the folder's bound: the 225 shipped rows' counts take 332 kB (35 entries, each under 25 kB)
STALE_TEMP_S = 3600.0  # a temporary file older than this was left by a process that died mid-write
BYPASS = "DLPERF_NO_COUNT_CACHE"
FRAMEWORKS = Path(__file__).resolve().parent.parent / "frameworks"


def directory() -> Path:
    return envs.data_dir() / "cache" / "opcounts"


def enabled() -> bool:
    return os.environ.get(BYPASS, "") in ("", "0")


@cache
def backend_source(counter: str) -> str:
    """A hash of the counting backend's source: the model definitions and the count itself."""
    digest = hashlib.sha256()
    for path in [*sorted((FRAMEWORKS / counter).glob("*.py")), FRAMEWORKS / "common" / "ops.py"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def model_source(workload: dict[str, Any], counter: str) -> str | None:
    """What versions a workload's model: the backend's source, and a user's file; None where it cannot be read
    without importing it (a module path) or at all."""
    source = workload.get("source")
    if source is None:
        return backend_source(counter)
    path = source.rpartition(":")[0]
    if not path.endswith(".py"):
        return None
    try:
        content = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None
    return f"{backend_source(counter)} {content}"


def key(workload: dict[str, Any], mode: str, counter: str, framework_version: str | None) -> dict[str, Any] | None:
    """The key of a (workload, mode)'s entries, the batch aside; None: not cached."""
    source = model_source(workload, counter)
    if source is None or framework_version is None or not enabled():
        return None
    described = {k: v for k, v in workload.items() if k not in ("batch", "ddp_batch")}
    found = {"dlperf": VERSION, counter: framework_version, "source": source, "workload": described, "mode": mode}
    return json.loads(json.dumps(found))  # as it reads back: tuples as lists


def _name(entry_key: dict[str, Any], part: str) -> str:
    text = json.dumps(entry_key, sort_keys=True, separators=(",", ":"))
    return f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.{part}.json"


def read(entry_key: dict[str, Any], part: str) -> Any:
    """The entry's value, or None: absent, unreadable, damaged, or under another key."""
    try:
        payload = json.loads((directory() / _name(entry_key, part)).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or payload.get("key") != entry_key:
        return None
    return payload.get("value")


def write(entry_key: dict[str, Any], part: str, value: Any) -> None:
    """Write an entry whole (temporary file, then rename); a folder that cannot be written is no error, the count
    stands, it is only not kept."""
    data = json.dumps({"format": FORMAT, "key": entry_key, "value": value}, separators=(",", ":")).encode()
    envs.write_whole(directory() / _name(entry_key, part), data)


def prune() -> None:
    """Keep the folder under MAX_BYTES, the oldest-written entries removed first (down to three quarters of it, so
    that every command does not prune again); temporary files of dead writers go too."""
    try:
        found = [(p, p.stat()) for p in directory().iterdir()]
    except OSError:
        return
    now = time.time()
    for p, st in found:
        if p.name.startswith(".tmp-") and now - st.st_mtime > STALE_TEMP_S:
            with contextlib.suppress(OSError):
                p.unlink()
    entries = sorted(((st.st_mtime, st.st_size, p) for p, st in found if p.suffix == ".json"), key=lambda e: e[0])
    total = sum(size for _, size, _ in entries)
    if total <= MAX_BYTES:
        return
    for _, size, p in entries:
        if total <= MAX_BYTES * 3 // 4:
            break
        with contextlib.suppress(OSError):
            p.unlink()
            total -= size
