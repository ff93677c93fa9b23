"""The workloads of a plan: a built-in one, or a user's factory built in a probe child; a DDP cell's batch; the real
data (`--data`) opened before anything is written."""

from __future__ import annotations

import shlex
from dataclasses import replace

from dlperf.answers import DataCheck, DataRequest, WorkloadRequest
from dlperf.errors import UsageError
from dlperf.frameworks.common import capabilities
from dlperf.loaders import DATA_DATASET, DATA_SYNTHETIC
from dlperf.protocol import Cell
from dlperf.runner import probe
from dlperf.runner.sweep import interpreter_for
from dlperf.spec import RunSpec
from dlperf.workloads import BUILTIN, InputSpec, OptimizerSpec, Workload
from dlperf.workloads.base import split_variant


def resolve_workload(name: str, framework: str, timeout: float, data: str = DATA_SYNTHETIC, ask=None) -> Workload:
    """A built-in workload, or a user's: its factory is imported and built in a probe, for at most `timeout` (the
    cell's --timeout: a factory that hangs is refused as soon as a cell would be stopped). Under `--data DIR`, DIR is
    given to a factory that takes `data_dir`, in the probe and in every child that builds it (`extra.data_dir`);
    without it, the folder that `data_dir` defaults to, as the probe evaluated it, is kept (`extra.default_data_dir`:
    what `dlperf compare` reads of the data). `ask`: how the probe is asked (default `probe.ask`; `dlperf predict`
    keeps its answer, `predict/workload.py`)."""
    base, batch = split_variant(name)
    if batch is not None:  # `resnet-50@b64`: the workload at that batch, under a name of its own (as fit names its)
        w = resolve_workload(base, framework, timeout, data, ask)
        return replace(w, name=f"{w.name}@b{batch}", batch=batch, ddp_batch=None, paper=None)
    if name in BUILTIN:
        return BUILTIN[name]
    data_dir = data if data not in (DATA_SYNTHETIC, DATA_DATASET) else None
    request = WorkloadRequest(name, data_dir)
    answer = (ask or probe.ask)(framework, request, interpreter_for(framework), timeout, timeout_flag="--timeout")
    if answer.name in BUILTIN:  # stored under its name, its cells would read as the built-in's (predict, compare)
        raise UsageError(f"workload {name!r} is named {answer.name!r}, as a built-in workload: give it a name of its "
                         "own (dlperf.user_workload's first argument)")  # fmt: skip
    # the folder the factory reads: --data DIR, or its default (absolute; none where it cannot be known)
    folder = {"data_dir": data_dir} if data_dir else {"default_data_dir": answer.default_data_dir}
    folder["input_names"] = answer.input_names  # a dict of inputs, passed by name: the recipe's model(**x)
    folder["input_shapes"] = answer.input_shapes  # ... and their shapes: `dlperf compare` tells a changed input
    folder["optimizer"] = answer.optimizer  # the user's optimizer and its settings: `compare` names a change of it
    folder["no_checkpoint"] = answer.no_checkpoint  # a search leaves the mode out with this reason (`modes.Fit`)
    folder["no_compile"] = answer.no_compile
    folder["dataset_samples"] = answer.dataset_samples  # an epoch of the factory's dataset= (`cost.epoch_samples`)
    folder["param_bytes"] = answer.param_bytes  # in their own dtypes: a bf16 model's half fp32's (`check_room`)
    data = "synthetic (its data's first sample, repeated)" if answer.repeated else "synthetic (user batch maker)"
    return Workload(
        name=answer.name, arch="user", config={}, input=InputSpec("user", tuple(answer.input_shape or ())),
        outputs=0, batch=answer.batch, optimizer=OptimizerSpec("user"), params=answer.params,
        data=data, source=name, extra={k: v for k, v in folder.items() if v},
    )  # fmt: skip


TRAINING_BYTES_PER_PARAM = 8  # an fp32 weight and its gradient: what any training step holds, before activations


def check_room(workloads: dict[str, Workload], devices: list[str]) -> None:
    """A user model whose weights and gradients alone are more than this machine's memory is refused on the CPU in one
    line before anything runs: its cells' processes built it for real, allocating until out of memory (a 100-billion
    parameter model; under a memory limit "out of memory at batch 2", blaming the batch). The probe counted its
    parameters on the meta device without allocating them."""
    from dlperf.measure.system import memory_total_bytes

    total = memory_total_bytes()
    if not total or not any(d.split(":")[0] == "cpu" for d in devices):
        return
    for w in workloads.values():
        held = (w.extra or {}).get("param_bytes")  # in their own dtypes, where the probe said (PyTorch's); else fp32
        need = 2 * held if held else w.params * TRAINING_BYTES_PER_PARAM if w.params else 0
        if w.is_user and need > total:
            kind = "" if held else "fp32 "
            asked = f"dlperf predict {shlex.quote(w.source or w.name)} --memory --gpu H200-SXM-141GB"
            raise UsageError(f"{w.name}: its {w.params:,} parameters need {need / 2**30:,.1f} GiB for their {kind}"
                             f"weights and gradients alone, more than this machine's {total / 2**30:.1f} GiB: it "
                             f"cannot train on this CPU ({asked} says whether a GPU holds it)")  # fmt: skip


def check_names(workloads: dict[str, Workload]) -> None:
    """Each workload asked for (`--workloads` item -> its workload) names a workload of its own: a cell is stored
    under its workload's name, so two sources that name one workload alike would be one cell twice."""
    seen: dict[str, str] = {}
    for asked, w in workloads.items():
        if w.name in seen:
            raise UsageError(f"--workloads: {seen[w.name]!r} and {asked!r} are both named {w.name!r}; give each "
                             "user workload a name of its own (dlperf.user_workload's first argument)")  # fmt: skip
        seen[w.name] = asked


def ddp_workload(w: Workload, cell: Cell) -> Workload:
    """The workload a DDP cell trains, its `batch` the job's total: the protocol's batch split over the processes
    (strong scaling), or the workload's batch for each process (weak)."""
    total = (w.ddp_batch or w.batch) if cell.scaling == "strong" else w.batch * cell.nproc
    return replace(w, batch=total)


def check_data(spec: RunSpec, workloads: list[Workload]) -> dict[str, DataCheck]:
    """Real data (`--data`) is opened and a sample read in a probe before anything is written: bad data is a
    UsageError naming the file, and no run is stored. A backend that reads no real data has nothing to check: its
    loader cells are `unsupported` (`capabilities.reads_data`). Returns what was found of each workload's data, by
    workload name. Its errors name the flag (`--data DIR: no ...`)."""
    try:
        return check_data_of(spec, [w.to_json() for w in workloads])
    except UsageError as exc:
        if type(exc) is not UsageError or str(exc).startswith("--data"):
            raise  # a probe that failed (ProbeFailed: exit 1, its own line), or a line that names the flag already
        raise UsageError(f"--data {exc}") from None


def check_data_of(spec: RunSpec, workloads: list[dict]) -> dict[str, DataCheck]:
    """`check_data` of workloads as stored (JSON): a resumed run's data is checked again before it measures."""
    if spec.data == DATA_SYNTHETIC or not workloads:
        return {}
    request, found = DataRequest(spec.data, workloads), {}
    for reader in capabilities.data_readers(spec.frameworks):
        answer = probe.ask(reader, request, interpreter_for(reader), spec.timeout, timeout_flag="--timeout")
        found = {**answer.checks, **found}
    return found
