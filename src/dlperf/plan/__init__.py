"""The plan: what the user asked for (`spec.py`), checked against this machine and expanded into the cells a run
measures, with what to warn about before anything runs and what it will cost (`estimate.py`).

    devices.py    the frameworks' devices (a probe child), the devices chosen, the thread counts
    workloads.py  built-in or a user's factory (built in a probe child), a DDP cell's batch, the real data opened
    warnings.py   what is measured anyway, and said first: oversubscription, slow precisions, inherited variables
    cells.py      the sweep expanded into cells
    unsupported.py  the cells known to be unsupported before any child starts, and why
    estimate.py   the plan's time before it runs (--dry-run)

`plan/` may import `runner/` (the probe asks a child, the pilot launches one); `runner/` never imports `plan/`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from dlperf import envinfo
from dlperf.errors import UsageError
from dlperf.loaders import DATA_SYNTHETIC
from dlperf.measure import system
from dlperf.parallel import check_microbatches
from dlperf.plan.cells import expand, expand_ddp
from dlperf.plan.devices import framework_info, resolve_devices, thread_counts
from dlperf.plan.unsupported import marked
from dlperf.plan.warnings import (
    data_notes,
    ddp_warnings,
    epoch_warnings,
    inherited_warning,
    keyword_warnings,
    loader_warnings,
    pin_warnings,
    precision_warnings,
)
from dlperf.plan.workloads import check_data, check_names, ddp_workload, resolve_workload
from dlperf.protocol import Cell
from dlperf.runner.tasks import Task, schedule
from dlperf.spec import RunSpec, device_kind
from dlperf.vocab import DeviceKind
from dlperf.workloads import Workload
from dlperf.workloads.user import source_digests


@dataclass
class Plan:
    spec: RunSpec
    cells: list[Cell]
    workloads: dict[str, dict]  # cell key -> workload JSON
    env: dict
    cores: int
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the run says before it measures, not warnings: the data read

    @property
    def tasks(self) -> list[Task]:
        """One per process, those of a cell known to be unsupported saying why (no child is started for them)."""
        return marked(schedule(self.cells, self.spec.repeats), self.workloads)


def make_plan(spec: RunSpec, *, before_data: Callable[[Plan], None] = lambda plan: None,
              devices_flag: str = "--devices") -> Plan:  # fmt: skip
    """Everything that needs checking before anything is written: frameworks, devices, user workloads, real data.
    `before_data`: given the plan before its real data (`--data`) is opened in a probe child, the one check left
    that starts a framework: a run starts its warm parents there, so their imports overlap the probe's.
    `devices_flag`: what the devices came from, named where one is not present (fit's and optimize's --device)."""
    info = framework_info(spec.frameworks)
    env = envinfo.capture(info)
    cores = env["cores"]["cores"]
    warnings = [inherited_warning(k, v) for k, v in system.inherited_thread_env(os.environ).items()]
    warnings += keyword_warnings(spec.data)
    workloads = {name: resolve_workload(name, spec.frameworks[0], spec.timeout, spec.data) for name in spec.workloads}
    check_names(workloads)
    if sources := source_digests(workloads.values()):
        env = {**env, "sources": sources}  # what --resume checks: the model files as they were (workloads/user.py)
    devices = resolve_devices(spec.devices, info, devices_flag)
    if spec.nprocs:
        cells, warnings = _ddp_cells(spec, list(workloads.values()), devices, cores, warnings)
        named = {w.name: w for w in workloads.values()}  # a user workload is asked for by its source
        chosen = {c.key: ddp_workload(named[c.workload], c) for c in cells}
        for c in cells:
            if c.microbatches:
                check_microbatches(c.microbatches, c.workload, chosen[c.key].batch, c.nproc)
        workloads_of = {key: w.to_json() for key, w in chosen.items()}
        plan = Plan(spec, cells, workloads_of, env, cores, warnings + precision_warnings(cells, env))
        plan.notes += data_notes(check_data_after(plan, list(workloads.values()), before_data))
        return plan
    counts = thread_counts(spec.threads, cores, warnings)
    warnings += pin_warnings(spec, counts, len(system.affinity_cpus()))
    cells = expand(spec, list(workloads.values()), devices, counts, host_threads=cores)
    by_name = {w.name: w.to_json() for w in workloads.values()}
    warnings += precision_warnings(cells, env) + loader_warnings(cells, cores)
    plan = Plan(spec, cells, {c.key: by_name[c.workload] for c in cells}, env, cores, warnings)
    data = check_data_after(plan, list(workloads.values()), before_data)
    plan.warnings += epoch_warnings(cells, {w.name: w.batch for w in workloads.values()}, data)
    plan.notes += data_notes(data)
    return plan


def check_data_after(plan: Plan, workloads: list[Workload], before_data: Callable[[Plan], None]) -> dict:
    """What the real data's probe found of each workload's data (`check_data`), `before_data(plan)` first; a plan
    on synthetic data opens none."""
    if plan.spec.data != DATA_SYNTHETIC:
        before_data(plan)
    return check_data(plan.spec, workloads)


def _ddp_cells(
    spec: RunSpec, workloads: list[Workload], devices: list[str], cores: int, warnings: list[str]
) -> tuple[list[Cell], list[str]]:
    """DDP cells: each process count on each kind of device (the CPU, or one GPU per process), with `--threads`
    per process or the cores shared evenly; the warnings with those of more processes x threads than cores."""
    gpus = [d for d in devices if device_kind(d) is DeviceKind.CUDA]
    kinds = (["cpu"] if "cpu" in devices else []) + (["cuda"] if gpus else [])
    if not kinds:
        raise UsageError("--nproc: data-parallel cells run on the CPU (gloo) or on CUDA GPUs (NCCL)")
    for n in spec.nprocs:
        if gpus and n > len(gpus):
            raise UsageError(f"--nproc {n}: one GPU per process, and this node has {len(gpus)}")
    return expand_ddp(spec, workloads, kinds, cores), warnings + ddp_warnings(spec, cores, on_cpu="cpu" in kinds)
