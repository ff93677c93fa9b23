"""Operator counts kept between commands: one JSON file per entry in DATA_DIR/cache/opcounts (`envs.data_dir`:
$DLPERF_DATA_DIR, else $XDG_DATA_HOME/dlperf, else ~/.local/share/dlperf).

An entry is a (model, mode) step's count at one batch (`<key>.b<batch>.json`), or a limit of the count there (the
child's `refused` answer: asked again, it would say the same), or its count as a function of the
batch, or why it is not one (`<key>.fit.json`), or a user's model as the probe describes it (`<key>.workload.json`,
`predict/workload.py`). The key is a hash of what makes a count: dlperf's version, the
counting framework's version, the source of its backend (the model definitions and the counting code, every .py
of `frameworks/<name>/`), a user's model file (its bytes), the workload's description (batch aside) and the mode.
A change to any of them is another key, so an entry is never read again once one changes. A user's model's entry
also holds the user's files its child imported (`worker/sources.py`: the model's file, a layers.py beside it, a
package of theirs, each by size, time and digest), as `runner/kept.py` keeps a cell's counted figures: one changed
or gone, the entry is a miss and the model is described, counted and traced again. A model named by its
module (`package.module:factory`) is never cached: its source is not read without importing it.

Written whole or not at all (a temporary file in the folder, then renamed over the entry: `runner/kept.py`, which
keeps a run's counted figures the same way); read defensively: an entry
that does not parse, or whose key is not the one asked, is a miss, counted again and written over. The folder is
bounded: past `MAX_BYTES` the oldest-written entries go first. `DLPERF_NO_COUNT_CACHE=1` (or `dlperf predict
--no-cache`) neither reads nor writes it. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from dlperf import envs
from dlperf.runner import kept
from dlperf.version import VERSION

FORMAT = kept.FORMAT  # of an entry's JSON
MAX_BYTES = 64 * 2**20  # the folder's bound: the 225 shipped rows' counts take 332 kB (35 entries, each under 25 kB)
BYPASS = kept.BYPASS
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


class Origin(NamedTuple):
    """What a child's answer was made from: the user's files it imported (`worker/sources.py`, an answer's
    `sources`), and when it was asked (`time.time()` before it started)."""

    sources: dict[str, list] | None
    asked_at: float


def key(workload: dict[str, Any], mode: str, counter: str, framework_version: str | None) -> dict[str, Any] | None:
    """The key of a (workload, mode)'s entries, the batch aside; None: not cached (a model named by its module)."""
    user = kept.user_source(workload)
    if user is None or framework_version is None or not enabled():
        return None
    described = {k: v for k, v in workload.items() if k not in ("batch", "ddp_batch")}
    found = {"dlperf": VERSION, counter: framework_version, "source": backend_source(counter), "workload": described,
             "mode": mode, **({"user": user} if user else {})}  # fmt: skip
    return json.loads(json.dumps(found))  # as it reads back: tuples as lists


def read(entry_key: dict[str, Any], part: str) -> Any:
    """The entry's value, or None: absent, unreadable, damaged, under another key, or of a user's model one of whose
    files changed or is gone since (`kept.unchanged`)."""
    value = kept.read(directory(), entry_key, part)
    if "user" not in entry_key:
        return value
    return value.get("value") if isinstance(value, dict) and kept.unchanged(value.get("sources")) else None


def write(entry_key: dict[str, Any], part: str, value: Any, origin: Origin | None = None) -> None:
    """Write an entry whole (temporary file, then rename); a folder that cannot be written is no error, the count
    stands, it is only not kept. A user's model's is kept with the files its child imported, only where each was
    written before the child was asked (`kept.sources_as_read`): not at all without `origin`."""
    if "user" in entry_key:
        if origin is None or not kept.sources_as_read(origin.sources, origin.asked_at):
            return
        value = {"value": value, "sources": origin.sources}
    kept.write(directory(), entry_key, part, value)


def prune() -> None:
    """Keep the folder under MAX_BYTES, the oldest-written entries removed first."""
    kept.prune(directory(), MAX_BYTES)
