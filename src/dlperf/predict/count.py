"""The parent's side of an op count: the probe of the backend that counts operators (PyTorch's; its row of
`frameworks.common.capabilities`) counts each (workload, mode, batch) step on fake tensors.

One child answers every request of a command (the validation asks for dozens), so PyTorch is imported once.
"""

from __future__ import annotations

from dataclasses import replace

from dlperf.answers import OpRequest, OpsRequest
from dlperf.envs import interpreter_for
from dlperf.errors import MissingDependency, UsageError
from dlperf.frameworks.common import capabilities
from dlperf.frameworks.common.ops import Count
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
    cannot run, e.g. one that reads a tensor's value); equal requests are counted once. A count that takes longer
    than `timeout` (the command's `timeout_flag`, named in the error) is a UsageError."""
    counter = capabilities.op_counter()
    python = interpreter_for(counter)
    if python is None:
        raise MissingDependency("dlperf predict counts operators with PyTorch: pip install torch==2.13.0")
    keys = {}
    for w, mode in requests:
        keys.setdefault((repr(w.to_json()), mode), (w, mode))
    asked = [OpRequest(w.to_json(), mode, w.batch) for w, mode in keys.values()]
    answer = probe.ask(counter, OpsRequest(asked), python, timeout, timeout_flag=timeout_flag)
    # a row without an error is a Count's JSON
    found = dict(zip(keys, (c.error or Count.from_json(c.to_json()) for c in answer.counts), strict=True))
    return [found[(repr(w.to_json()), mode)] for w, mode in requests]


def counted(requests: list[tuple[Workload, str]], timeout: float = COUNT_TIMEOUT_S,
            timeout_flag: str | None = None) -> list[Count]:  # fmt: skip
    """As `counts`, every one required: a step that cannot be counted is a UsageError saying why."""
    found = counts(requests, timeout, timeout_flag)
    for (w, mode), c in zip(requests, found, strict=True):
        if isinstance(c, str):
            raise UsageError(f"{w.name} ({mode}, batch {w.batch}): its operators cannot be counted: {c}")
    return found  # type: ignore[return-value]
