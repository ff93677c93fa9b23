"""The parent's side of an op count: the probe of the backend that counts operators (PyTorch's; its row of
`frameworks.common.capabilities`) counts each (workload, mode, batch) step on fake tensors.

A command's requests are shared among a few children counting at once (`children`: one per idle core, as memory allows),
each counting its share on one thread, forked from the command's one warm parent where it has one (`runner/warm.py`'s
`probes_share`: PyTorch imported once for every probe of the command), else importing PyTorch: `dlperf run`'s seven
networks or the validation's dozens are counted in a fraction of the time one child takes on a machine with cores to
spare. Counts are kept between commands (`predict/cache.py`), and so is a limit of the count (the child's `refused`: a
step that reads a tensor's value; asked of the same model again, the child would say the same), never the model's own
error or a failure of this machine (a crash, a timeout, out of its memory), which is asked again. A (workload, mode)
asked at `FIT_FROM` or more batches is counted at three of them: the two smallest give the count as a function of the
batch, the largest checks it exactly (`frameworks.common.ops.Affine`), and every other batch is scaled, now and later.
Where the check fails (another kernel, or a figure off the line) the step is not affine in the batch and each batch is
counted, now and later. A batch of 1 is always counted: on the CPU an LSTM's products at a batch of 1 are other kernels.
fp32 and tf32 build the same step (tf32 is the GPU's peak only): one count serves both."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from importlib import metadata

from dlperf.answers import OpCount, OpRequest, OpsRequest
from dlperf.envs import import_name, interpreter_for, is_current, record
from dlperf.errors import MissingDependency, UsageError
from dlperf.frameworks.common import capabilities
from dlperf.frameworks.common.ops import Affine, Count
from dlperf.measure import system
from dlperf.predict import cache
from dlperf.runner import probe
from dlperf.workloads.base import Workload

COUNT_TIMEOUT_S = 1800.0


def at(workload: Workload, batch: int | None = None, seq_len: int | None = None) -> Workload:
    """The workload at another batch (and, for a token model, another sequence length)."""
    w = workload if batch is None else replace(workload, batch=batch)
    if seq_len is not None and "seq_len" in w.config and w.config["seq_len"] != seq_len:
        shape = (seq_len, *w.input.shape[1:])
        w = replace(w, config={**w.config, "seq_len": seq_len}, input=replace(w.input, shape=shape))
    return w


def counts(requests: list[tuple[Workload, str]], timeout: float = COUNT_TIMEOUT_S,
           timeout_flag: str | None = None) -> list[Count | str]:  # fmt: skip
    """Each (workload at its batch, mode) counted, in order, or why it could not be (a model the fake tensors
    cannot run, e.g. one that reads a tensor's value); equal requests are counted once, from the cache where it holds
    them. A count that takes longer than `timeout` (the command's `timeout_flag`, named in the error) is a
    UsageError."""
    counter = capabilities.op_counter()
    python = interpreter_for(counter)
    if python is None:
        raise MissingDependency("dlperf predict counts operators with PyTorch: pip install torch==2.13.0")
    groups: dict[str, Group] = {}
    for w, mode in requests:
        g = groups.setdefault(_group_id(w, mode), Group(w, COUNTED_AS.get(mode, mode)))
        g.batches.add(w.batch)
    version = torch_version(counter, python) if cache.enabled() else None
    for g in groups.values():
        g.key = cache.key(g.workload.to_json(), g.mode, counter, version)
        g.look_up()

    def ask(asked: list[OpRequest], stopped=None) -> tuple[list[OpCount], cache.Origin]:
        at = time.time()
        found = probe.ask(counter, OpsRequest(asked), python, timeout, timeout_flag=timeout_flag, stopped=stopped)
        return found.counts, cache.Origin(found.sources, at)

    _answer(groups, ask, first=True)  # the fits, and the batches of groups too few to fit
    _answer(groups, ask, first=False)  # what a failed fit leaves
    if cache.enabled():
        cache.prune()
    found = [groups[_group_id(w, mode)].found[w.batch] for w, mode in requests]
    return [c if isinstance(c, str) else replace(c, mode=mode) for c, (_, mode) in zip(found, requests, strict=True)]


OWN_ERROR = "the model's own step raises"  # a user's step that fails run for real too (`frameworks/torch/memcount.py`)
COUNTED_AS = {"tf32": "fp32"}  # the same step, another peak
FIT_FROM = 3  # batches of one (workload, mode) counted at once that are fitted rather than each counted
SCALED_FROM = 2  # the smallest batch scaled: a batch of 1 runs other kernels on the CPU


def _group_id(w: Workload, mode: str) -> str:
    return repr((replace(w, batch=0, ddp_batch=None).to_json(), COUNTED_AS.get(mode, mode)))


class Group:
    """One (workload, mode)'s batches asked, what is found for each, and its cache entries."""

    def __init__(self, workload: Workload, mode: str) -> None:
        self.workload, self.mode = workload, mode
        self.batches: set[int] = set()
        self.found: dict[int, Count | str] = {}
        self.key: dict | None = None
        self.affine: Affine | None = None
        self.not_affine = False

    def look_up(self) -> None:
        if self.key is None:
            return
        fit = cache.read(self.key, "fit")
        self.not_affine = isinstance(fit, dict) and isinstance(fit.get("not_affine"), str)
        with contextlib.suppress(Exception):  # a damaged entry: counted again
            self.affine = Affine.from_json(fit["affine"]) if isinstance(fit, dict) and "affine" in fit else None
        for b in self.batches:
            self._take(b, cache.read(self.key, f"b{b}"))

    def _take(self, batch: int, value) -> None:
        with contextlib.suppress(Exception):  # a damaged entry: counted again
            self.found[batch] = self._refusal(value, batch) or self._checked(Count.from_json(value), batch)
        if batch not in self.found and self.affine is not None and batch >= SCALED_FROM:
            with contextlib.suppress(ValueError):
                self.found[batch] = self.affine.at(batch)

    def _refusal(self, value, batch: int) -> str | None:
        """The limit of the count kept for `batch` (a child's `refused`: asked again, it would answer the same)."""
        if not (isinstance(value, dict) and value.get("refused") is True and isinstance(value.get("error"), str)):
            return None
        c = OpCount.from_json(value)
        return c.error if c.batch == batch and c.mode == self.mode else None

    def _checked(self, c: Count, batch: int) -> Count:
        if c.batch != batch or c.mode != self.mode:
            raise ValueError("another count")
        return c

    def missing(self) -> list[int]:
        return sorted(b for b in self.batches if b not in self.found)

    def requests(self, first: bool) -> list[OpRequest]:
        """What to ask a child: first, a fit where the batches are enough (and the batches it does not scale),
        else every batch; then, after a fit that failed, every batch it left."""
        missing = self.missing()
        scalable = [b for b in missing if b >= SCALED_FROM]
        w = self.workload.to_json()
        fit = first and not self.not_affine and self.affine is None and len(scalable) >= FIT_FROM
        if not fit:
            return [OpRequest({**w, "batch": b}, self.mode, b) for b in missing]
        rest = [OpRequest({**w, "batch": b}, self.mode, b) for b in missing if b < SCALED_FROM]
        return [*rest, OpRequest({**w, "batch": scalable[-1]}, self.mode, scalable[-1], fit=scalable[:2])]

    def answered(self, c: OpCount, batch: int, origin: cache.Origin) -> None:
        """The child's answer to the request for `batch` (its answers come in the order asked), and what the child
        counted from (`origin`)."""
        found = c.error or Count.from_json(c.to_json())
        self.found[batch] = found
        if self.key is not None and (not isinstance(found, str) or c.refused):
            cache.write(self.key, f"b{batch}", c.to_json() if isinstance(found, str) else found.to_json(), origin)
        if c.affine is not None:
            self.affine = Affine.from_json(c.affine)
            for b in self.missing():
                self._take(b, None)
        self.not_affine = self.not_affine or c.not_affine is not None
        if self.key is not None and (c.affine is not None or c.not_affine is not None):
            cache.write(self.key, "fit", {"affine": c.affine} if c.affine else {"not_affine": c.not_affine}, origin)


def _answer(groups: dict[str, Group], ask, first: bool) -> None:
    """Ask children, counting at once, for what the groups miss: each a share of the requests (round robin, in the
    order asked), its answers in the order of its share."""
    asked = [(g, r) for g in groups.values() for r in g.requests(first)]
    if not asked:
        return
    n = children(len(asked), [g.workload.params for g, _ in asked])
    shares = [asked[i::n] for i in range(n)]
    answers = _asked_at_once(ask, [[r for _, r in share] for share in shares])
    for share, (found, origin) in zip(shares, answers, strict=True):
        for (g, r), c in zip(share, found, strict=True):
            g.answered(c, r.batch, origin)


def _asked_at_once(ask, shares: list[list[OpRequest]]) -> list[tuple[list[OpCount], cache.Origin]]:
    """Each share's counts and what they were counted from (`cache.Origin`), a child each, asked from threads of this
    process. Ctrl-C, SIGTERM (as an interrupt) and a child that fails reach this thread only: then every other child
    is stopped (`probe.ask`'s `stopped`) before the error goes on, so no child counts on after its command ended."""
    if len(shares) == 1:
        return [ask(shares[0])]
    ended = threading.Event()
    pool = ThreadPoolExecutor(len(shares))
    try:
        futures = [pool.submit(ask, share, ended.is_set) for share in shares]
        return [f.result() for f in futures]
    except BaseException:
        ended.set()
        raise
    finally:
        pool.shutdown(wait=True)


MAX_CHILDREN = 8
CHILD_BYTES = 512 << 20  # a count child with PyTorch imported, before its model (about 300 MiB measured)
PARAM_BYTES = 6  # a model's weights, built at a batch of 1 before they are made fake (fcn-s: 118M, 745 MiB at most)
UNKNOWN_PARAMS = 100_000_000  # a user's model, whose size only its probe knows


def children(requests: int, params: list[int | None], cores: int | None = None, free: int | None = None,
             busy: float | None = None) -> int:  # fmt: skip
    """How many children count at once: one per idle core (each counts on one thread; `busy`, the cores' load, one
    minute's average: on cores other work keeps busy, every child's PyTorch import would only slow that work and
    the others), no more than the requests, MAX_CHILDREN, or what the memory available holds, each child taken as
    holding the largest model asked."""
    cores = system.usable_cores()["cores"] if cores is None else cores
    free = system.memory_available_bytes() if free is None else free
    busy = load() if busy is None else busy
    largest = max((p or UNKNOWN_PARAMS for p in params), default=0)
    held = free // (CHILD_BYTES + PARAM_BYTES * largest) if free is not None else 1
    return max(1, min(requests, cores - math.floor(busy), MAX_CHILDREN, held))  # a fraction of a core's load is idle


def load() -> float:
    """The machine's load average over the last minute (0 where the system does not say)."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return 0.0


def torch_version(counter: str, python: str) -> str | None:
    """The counting framework's version in the interpreter that counts, read without importing it: this one's
    installed package, or a dedicated environment's install record; None where neither says (nothing is cached)."""
    package = import_name(counter)
    if is_current(python):
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None
    found = ((record(counter) or {}).get("versions") or {}).get(package)
    return found if isinstance(found, str) else None


def counted(requests: list[tuple[Workload, str]], timeout: float = COUNT_TIMEOUT_S,
            timeout_flag: str | None = None) -> list[Count]:  # fmt: skip
    """As `counts`, every one required: a step that cannot be counted is a UsageError saying why."""
    found = counts(requests, timeout, timeout_flag)
    for (w, mode), c in zip(requests, found, strict=True):
        if isinstance(c, str):
            raise refused(w, mode, c, "its operators cannot be counted", "the counter's")
    return found  # type: ignore[return-value]


def refused(w: Workload, mode: str, why: str, cannot: str, tool: str) -> UsageError:
    """A step the predictor cannot take, in one line: the model's own error as such (at the user's line, `OWN_ERROR`),
    else what `tool` could not do (`cannot`) and why; the same words for the operator count and the memory trace."""
    if why.startswith(OWN_ERROR):
        return UsageError(f"{w.name} ({mode}, batch {w.batch}): {why}: the model's error, not {tool}")
    return UsageError(f"{w.name} ({mode}, batch {w.batch}): {cannot}: {why}")
