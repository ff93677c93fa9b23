"""The workload `dlperf predict` predicts: a built-in one, or a user's `file.py:factory` as the probe child describes it
(its name, batch, input shape and parameters), that description kept between commands beside the operator counts
(`predict/cache.py`: dlperf's version, the counting framework's and its backend's source, the file's bytes and the
factory's name make its key; the user's files the child imported, a module beside it too, are kept with it: one
changed, it is asked again), so a warm predict of an unchanged model starts no child at all. A factory that fails is
asked again (its error is not kept); a model named by its module (`package.module:factory`), or --no-cache, is asked
every time. What the model reads that is no module of the user's (a config file, an environment variable, an
installed package changed in place) is not seen: after changing only that, --no-cache describes the model afresh, as
it counts its steps afresh.
"""

from __future__ import annotations

import time
from dataclasses import replace

from dlperf.answers import WorkloadAnswer, WorkloadRequest
from dlperf.predict import cache, count
from dlperf.runner import probe
from dlperf.workloads.base import Workload

PART = "workload"  # the entry's name beside the counts' `b<batch>` and `fit`


def resolve(name: str, timeout: float) -> Workload:
    """The workload `name` names (a misspelt built-in one is one line, before any child starts), a user's described
    by the counting framework's probe, or from the cache where it holds that description."""
    from dlperf.frameworks.common import capabilities
    from dlperf.plan.workloads import resolve_workload

    return resolve_workload(name, capabilities.op_counter(), timeout, ask=kept)


def kept(framework: str, request: WorkloadRequest, python: str, timeout: float, **how) -> WorkloadAnswer:
    """`probe.ask` for a user's workload, its answer read from the cache where it is kept, else asked and kept."""
    key = _key(framework, request, python)
    if key is not None:
        try:
            return WorkloadAnswer.from_json(cache.read(key, PART))
        except (TypeError, ValueError):  # absent or damaged: asked again, and written over
            pass
    at = time.time()
    answer = probe.ask(framework, request, python, timeout, **how)
    if key is not None:  # kept with the user's files the child imported
        cache.write(key, PART, replace(answer, sources=None).to_json(), cache.Origin(answer.sources, at))
    return answer


def _key(framework: str, request: WorkloadRequest, python: str) -> dict | None:
    """The description's key (None: not kept): the source `path.py:factory` as named, its file's bytes in the key."""
    if request.data_dir is not None or not cache.enabled():
        return None
    return cache.key({"source": request.source}, PART, framework, count.torch_version(framework, python))
