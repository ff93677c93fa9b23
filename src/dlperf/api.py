"""The Python API; the CLI calls the same functions.

    import dlperf
    outcome = dlperf.run(["fcn-r", "resnet-56"], threads=[1, 2], db="dlperf.db")
    outcome = dlperf.run([my_factory])   # a module-level function returning dlperf.user_workload(...)

The flow is one-way: spec (validated here) -> plan (cells) -> launch (a child per cell) -> store -> views.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dlperf import envinfo, parallel
from dlperf.errors import UsageError
from dlperf.loaders import DATA_SYNTHETIC, oversubscribed, parse_loaders, setting
from dlperf.measure import system
from dlperf.measure.timer import TimerConfig
from dlperf.modes import mode_components
from dlperf.plan import estimate as runner_estimate
from dlperf.plan.cells import expand, expand_ddp
from dlperf.plan.estimate import Estimate
from dlperf.predict import cells as gpu_predictions
from dlperf.protocol import Cell
from dlperf.report.format import terminal
from dlperf.runner import lifeline, probe
from dlperf.runner.sweep import Interrupted, SweepContext, execute, interpreter_for, remaining, take_up_kept, unprofiled
from dlperf.runner.tasks import Task, schedule
from dlperf.spec import (
    INT64_MAX,
    MAX_SECONDS,
    UNPROFILABLE,
    RunSpec,
    device_kind,
    parse_data,
    parse_devices,
    parse_frameworks,
    parse_modes,
    parse_nprocs,
    parse_scaling,
    parse_threads,
    parse_workloads,
)
from dlperf.store import Store, default_db, spill
from dlperf.store.records import PlannedCell
from dlperf.vocab import DeviceKind, ExitCode, Parallel, Status
from dlperf.workloads import BUILTIN, InputSpec, OptimizerSpec, Workload
from dlperf.workloads.user import source_of


@dataclass
class Plan:
    spec: RunSpec
    cells: list[Cell]
    workloads: dict[str, dict]  # cell key -> workload JSON
    env: dict
    cores: int
    warnings: list[str] = field(default_factory=list)

    @property
    def tasks(self) -> list[Task]:
        return schedule(self.cells, self.spec.repeats)


@dataclass
class Outcome:
    exit_code: int
    run_id: int | None = None
    plan: Plan | None = None
    statuses: list[Status] = field(default_factory=list)
    estimate: Estimate | None = None


def make_spec(
    workloads: Sequence[str | Callable] | str | None = None,
    *,
    frameworks: Sequence[str] | str = ("torch",),
    devices: Sequence[str] | str | None = None,
    threads: Sequence[int] | str | None = None,
    modes: Sequence[str] | str = ("fp32",),
    repeats: int = 1,
    timeout: float = 600.0,
    compile_timeout: float | None = None,
    pin: bool = False,
    loss_check: bool = True,
    timer: TimerConfig | None = None,
    nprocs: Sequence[int] | str | None = None,
    scaling: str = "strong",
    parallel: Sequence[str] | str | None = None,
    microbatches: Sequence[int] | str | None = None,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
    profile: bool = False,
    profile_steps: int = 5,
    trace_dir: str | None = None,
    nvtx: bool = False,
    data: str = DATA_SYNTHETIC,
    loaders: Sequence[str] | str | None = None,
    predict: bool = True,
) -> RunSpec:
    """Validate what the user asked for; raises UsageError naming the flag."""

    def joined(v):
        return v if v is None or isinstance(v, str) else ",".join(str(x) for x in v)

    if workloads is not None and not isinstance(workloads, str):
        workloads = ",".join(w if isinstance(w, str) else source_of(w) for w in workloads)
    if not isinstance(repeats, int) or not 1 <= repeats <= INT64_MAX:
        raise UsageError("--repeats must be a whole number of at least 1")
    # written so that nan fails too: every comparison with nan is False
    if not 0 < timeout <= MAX_SECONDS:
        raise UsageError(f"--timeout must be a positive number of seconds, at most {MAX_SECONDS:.0f}")
    if compile_timeout is not None and not 0 < compile_timeout <= MAX_SECONDS:
        raise UsageError(f"--compile-timeout must be a positive number of seconds, at most {MAX_SECONDS:.0f}")
    nprocs = None if nprocs is None else parse_nprocs(joined(nprocs))
    _check_ddp(nprocs, parse_frameworks(joined(frameworks)), nnodes, node_rank, rdzv_endpoint, timeout)
    strategies, micro = _strategies(nprocs, parse_frameworks(joined(frameworks)), parse_scaling(scaling), nnodes,
                                    joined(parallel), joined(microbatches))  # fmt: skip
    if profile:
        _check_profile(parse_frameworks(joined(frameworks)), nprocs, profile_steps)
    data = parse_data(data)
    loaders = None if loaders is None else parse_loaders(joined(loaders))
    if data == DATA_SYNTHETIC and loaders is not None:
        raise UsageError("--loaders: loader settings read real data; name it with --data DIR")
    if data != DATA_SYNTHETIC and nprocs is not None:
        raise UsageError("--data: data-parallel cells (--nproc) train on synthetic data; measure the loader on "
                         "plain cells")  # fmt: skip
    return RunSpec(
        nprocs=nprocs,
        scaling=parse_scaling(scaling),
        parallel=strategies,
        microbatches=micro,
        nnodes=nnodes,
        node_rank=node_rank,
        rdzv_endpoint=rdzv_endpoint,
        workloads=parse_workloads(workloads),
        frameworks=parse_frameworks(joined(frameworks)),
        devices=None if devices is None else parse_devices(joined(devices)),
        threads=None if threads is None else parse_threads(joined(threads)),
        modes=parse_modes(joined(modes)),
        repeats=repeats,
        timeout=timeout,
        compile_timeout=compile_timeout,
        pin=pin,
        loss_check=loss_check,
        timer=timer or TimerConfig(),
        profile=profile,
        profile_steps=profile_steps,
        trace_dir=None if trace_dir is None else os.path.abspath(trace_dir),
        nvtx=nvtx,
        data=data,
        loaders=loaders,
        predict=predict,
    )


def _check_profile(frameworks: tuple[str, ...], nprocs, steps: int) -> None:
    """--profile needs a framework dlperf can profile, plain cells and at least one profiled step."""
    for name in frameworks:
        if name in UNPROFILABLE:
            raise UsageError(f"--profile: {name} cannot be profiled ({UNPROFILABLE[name]}); profile another framework")
    if nprocs is not None:
        raise UsageError("--profile: data-parallel cells (--nproc) are not profiled; profile a plain cell")
    if not isinstance(steps, int) or not 1 <= steps <= INT64_MAX:
        raise UsageError("--steps must be a whole number of at least 1")


def _check_ddp(nprocs, frameworks, nnodes: int, node_rank: int, endpoint: str | None, timeout: float) -> None:
    from dlperf.runner.distributed import Rendezvous

    Rendezvous(nnodes, node_rank, endpoint, timeout)  # validates --nnodes, --node-rank, --rdzv-endpoint
    if nprocs is None:
        if nnodes > 1 or endpoint:
            raise UsageError("--nnodes and --rdzv-endpoint are for data-parallel cells: add --nproc N")
        return
    if missing := [f for f in frameworks if f not in DATA_PARALLEL]:
        raise UsageError(f"--nproc: {', '.join(missing)} has no multi-process strategy dlperf measures (see dlperf "
                         "list --parallel); use --frameworks torch or tensorflow")  # fmt: skip


# each framework's data-parallel strategy: what --nproc measures without --parallel
DATA_PARALLEL = {"torch": Parallel.DDP, "tensorflow": Parallel.MIRRORED}


def _strategies(nprocs, frameworks, scaling: str, nnodes: int, text: str | None, micro_text: str | None):
    """The strategies and micro-batch counts of --parallel and --microbatches, checked against the rest."""
    if nprocs is None:
        if text is not None or micro_text is not None:
            flag = "--parallel" if text is not None else "--microbatches"
            raise UsageError(f"{flag}: strategies spread a step over processes; add --nproc N")
        return (), ()
    chosen = parallel.parse_parallel(text) if text is not None else tuple(DATA_PARALLEL[f] for f in frameworks)
    micro = parallel.parse_microbatches(micro_text) if micro_text is not None else ()
    parallel.check(chosen, frameworks, scaling, bool(micro))
    for f in frameworks:
        if not parallel.for_framework(chosen, f):
            raise UsageError(f"--parallel {','.join(chosen)}: none is {f}'s; leave {f} out of --frameworks")
    if nnodes > 1 and Parallel.MIRRORED in chosen:
        raise UsageError("--parallel mirrored: MirroredStrategy runs its replicas in one process on one node")
    return tuple(p.value for p in chosen), micro


def ddp_workload(w: Workload, cell: Cell) -> Workload:
    """The workload a DDP cell trains, its `batch` the job's total: the protocol's batch split over the processes
    (strong scaling), or the workload's batch for each process (weak)."""
    total = (w.ddp_batch or w.batch) if cell.scaling == "strong" else w.batch * cell.nproc
    return replace(w, batch=total)


def framework_info(frameworks: Sequence[str]) -> dict[str, dict]:
    """Versions and devices of each framework, from a probe child (the parent never imports a framework)."""
    info = {}
    for name in frameworks:
        info[name] = probe.ask(name, {"what": "env"}, python=interpreter_for(name))  # MissingDependency if absent
    return info


def resolve_devices(requested: tuple[str, ...] | None, info: dict[str, dict]) -> list[str]:
    present = list(dict.fromkeys(d["name"] for fw in info.values() for d in fw.get("devices", [])))
    if requested is None:
        return present or ["cpu"]
    chosen = []
    for dev in requested:
        matches = [p for p in present if p == dev or (dev == "cuda" and device_kind(p) is DeviceKind.CUDA)]
        if not matches:
            raise UsageError(f"--devices: {dev!r} is not present on this machine (present: {', '.join(present)})")
        chosen += matches
    return list(dict.fromkeys(chosen))


def resolve_workload(name: str, framework: str, timeout: float) -> Workload:
    """A built-in workload, or a user's: its factory is imported and built in a probe, for at most `timeout` (the
    cell's --timeout: a factory that hangs is refused as soon as a cell would be stopped)."""
    if name in BUILTIN:
        return BUILTIN[name]
    request = {"what": "workload", "source": name}
    answer = probe.ask(framework, request, interpreter_for(framework), timeout, timeout_flag="--timeout")
    return Workload(
        name=answer["name"], arch="user", config={},
        input=InputSpec("user", tuple(answer.get("input_shape") or ())), outputs=answer.get("outputs") or 0,
        batch=answer["batch"], optimizer=OptimizerSpec(answer.get("optimizer", "user")), params=answer["params"],
        data="synthetic (user batch maker)", source=name,
    )  # fmt: skip


def thread_counts(requested: tuple[int, ...] | None, cores: int, warnings: list[str]) -> list[int]:
    counts = list(requested) if requested else system.default_thread_counts(cores)
    over = [n for n in counts if n > cores]
    if over:
        warnings.append(
            f"--threads {','.join(map(str, over))} exceeds the {cores} usable cores: expect "
            "oversubscription (steps can be many times slower); measured anyway"
        )
    return counts


def inherited_warning(name: str, value: str) -> str:
    if name in system.THREAD_COUNT_VARS:
        return f"inherited {name}={value} is replaced by each cell's thread count"
    return f"inherited {name}={value} changes threading or kernels; recorded with every cell"


SLOW_PRECISION = 0.8  # a reduced precision whose matrix products run below this share of fp32's speed may not pay
TRAP_PRECISION = 0.25  # ... and below this one it is emulated (on an AVX2-only CPU bf16 ran 12-16x slower than fp32)
NATIVE_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")}
BF16_CAPABILITY = (8, 0)  # bf16 tensor cores arrived with Ampere; before it CUDA emulates bf16


def precision_warnings(cells: list[Cell], env: dict) -> list[str]:
    """Before anything is measured: each reduced precision the plan uses on a device that lacks a fast path for it.
    On the CPU, from the probe's measured matrix-product speeds against fp32 (PyTorch's kernels) and the CPU's flags;
    on a CUDA GPU, from its compute capability."""
    used = sorted({(c.device, p.value) for c in cells for p in mode_components(c.mode) if p.value in NATIVE_FLAGS})
    frameworks = env.get("frameworks") or {}
    speed = ((frameworks.get("torch") or {}).get("precision_speed") or {}).get("cpu") or {}
    gpus = {d["name"]: d for fw in frameworks.values() for d in fw.get("devices", []) if "capability" in d}
    flags = set((env.get("cpu") or {}).get("flags") or [])
    warnings = []
    for device, dtype in used:
        ratio = speed.get(dtype) if device == "cpu" else None
        if ratio is not None and ratio < SLOW_PRECISION:
            native = [f for f in NATIVE_FLAGS[dtype] if f in flags]
            has = f"the CPU has {', '.join(native)}" if native else f"no {' or '.join(NATIVE_FLAGS[dtype])} on this CPU"
            expect = "many times slower than" if ratio < TRAP_PRECISION else "no faster than, or slower than,"
            warnings.append(f"{dtype} on cpu: a {dtype} matrix product ran {1 / ratio:.1f}x slower than fp32 here "
                            f"({has}): expect the {dtype} cells to be {expect} fp32; measured anyway")  # fmt: skip
        gpu = gpus.get(device)
        if gpu and dtype == "bf16" and tuple(int(x) for x in gpu["capability"].split(".")) < BF16_CAPABILITY:
            warnings.append(f"bf16 on {device} ({gpu.get('model')}, compute capability {gpu['capability']}): no bf16 "
                            "tensor cores before 8.0, bf16 is emulated: expect the bf16 cells to be slower than fp32; "
                            "measured anyway")  # fmt: skip
    return warnings


def make_plan(spec: RunSpec) -> Plan:
    """Everything that needs checking before anything is written: frameworks, devices, user workloads."""
    info = framework_info(spec.frameworks)
    env = envinfo.capture(info)
    cores = env["cores"]["cores"]
    warnings = [inherited_warning(k, v) for k, v in system.inherited_thread_env(os.environ).items()]
    workloads = {name: resolve_workload(name, spec.frameworks[0], spec.timeout) for name in spec.workloads}
    check_data(spec, list(workloads.values()))
    devices = resolve_devices(spec.devices, info)
    allowed = len(system.affinity_cpus())
    if spec.nprocs:
        cells = _ddp_cells(spec, list(workloads.values()), devices, cores, warnings)
        named = {w.name: w for w in workloads.values()}  # a user workload is asked for by its source
        chosen = {c.key: ddp_workload(named[c.workload], c).to_json() for c in cells}
        return Plan(spec, cells, chosen, env, cores, warnings + precision_warnings(cells, env))
    counts = thread_counts(spec.threads, cores, warnings)
    if spec.pin and max(counts) > allowed:
        warnings.append(
            f"--pin: only {allowed} CPUs are in this process's affinity mask; cells with more threads "
            f"are pinned to those {allowed}"
        )
    cells = expand(spec, list(workloads.values()), devices, counts, host_threads=cores)
    by_name = {w.name: w.to_json() for w in workloads.values()}
    warnings += precision_warnings(cells, env) + loader_warnings(cells, cores)
    return Plan(spec, cells, {c.key: by_name[c.workload] for c in cells}, env, cores, warnings)


def check_data(spec: RunSpec, workloads: list[Workload]) -> None:
    """Real data (`--data`) is opened and a sample read in a probe before anything is written: bad data is a
    UsageError naming the file, and no run is stored. PyTorch's backend alone reads real data: without it, the
    loader cells are `unsupported` and there is nothing to check."""
    if spec.data == DATA_SYNTHETIC or "torch" not in spec.frameworks:
        return
    request = {"what": "data", "data": spec.data, "workloads": [w.to_json() for w in workloads]}
    probe.ask("torch", request, interpreter_for("torch"), spec.timeout, timeout_flag="--timeout")


def loader_warnings(cells: list[Cell], cores: int) -> list[str]:
    """Loader workers and compute threads share the cores: the pairs of a plan that ask for more than there are."""
    over = sorted({(c.loader, c.threads) for c in cells if c.loader and c.device == "cpu"
                   and oversubscribed(setting(c.loader).workers, c.threads, cores)})  # fmt: skip
    if not over:
        return []
    pairs = ", ".join(f"{loader} with {threads} threads" for loader, threads in over)
    return [f"--data: loader workers + compute threads exceed the {cores} cores in {pairs}: they take turns; "
            "measured anyway"]  # fmt: skip


def _ddp_cells(spec: RunSpec, workloads: list[Workload], devices: list[str], cores: int, warnings: list[str]):
    """DDP cells: each process count on each kind of device (the CPU, or one GPU per process), with `--threads`
    per process or the cores shared evenly. Warned about: more processes x threads than cores, fewer GPUs than
    processes."""
    gpus = [d for d in devices if device_kind(d) is DeviceKind.CUDA]
    kinds = (["cpu"] if "cpu" in devices else []) + (["cuda"] if gpus else [])
    if not kinds:
        raise UsageError("--nproc: data-parallel cells run on the CPU (gloo) or on CUDA GPUs (NCCL)")
    for n in spec.nprocs:
        if gpus and n > len(gpus):
            raise UsageError(f"--nproc {n}: one GPU per process, and this node has {len(gpus)}")
        threads = list(spec.threads) if spec.threads else [max(1, cores // n)]
        over = [t for t in threads if n * t > cores and "cpu" in kinds]
        if over:
            warnings.append(f"--nproc {n} x --threads {','.join(map(str, over))} exceeds the {cores} usable cores: "
                            "expect oversubscription; measured anyway")  # fmt: skip
    return expand_ddp(spec, workloads, kinds, cores)


def estimate(plan: Plan, db: str, on_pilot: Callable[[Cell], None] = lambda cell: None) -> Estimate:
    """How long the plan will take: each cell's earlier processes on this machine where the store has them, a pilot
    step's model otherwise (`plan/estimate.py`)."""
    spec = plan.spec
    return runner_estimate.estimate(
        plan.tasks, plan.workloads, _known_durations(db, envinfo.fingerprint(plan.env)), timer=spec.timer,
        timeout=spec.timeout, loss_check=spec.loss_check, cores=plan.cores, python_for=interpreter_for,
        on_pilot=on_pilot,
    )  # fmt: skip


def say_pilot(cell: Cell) -> None:
    print(f"estimating: one untimed step of {terminal(cell.label)}", file=sys.stderr, flush=True)


def _known_durations(db: str, fingerprint: dict) -> dict[str, list[float]]:
    """Cell key -> the durations of its processes in earlier runs on this machine."""
    if not os.path.exists(db):
        return {}
    store = Store.open(db, create=False)
    try:
        runs = [r.id for r in store.runs() if r.fingerprint == fingerprint]
        return store.durations(runs)
    finally:
        store.close()


def run(
    workloads: Sequence[str | Callable] | str | None = None,
    *,
    db: str | None = None,
    dry_run: bool = False,
    progress: Any = None,
    argv: list[str] | None = None,
    warn: Callable[[str], None] | None = None,
    **spec_kwargs,
) -> Outcome:
    """Plan, measure and store a sweep. Returns the outcome; `outcome.exit_code` follows the CLI's convention.

    Warnings about the plan (oversubscription, inherited thread variables) go to `warn` before anything runs;
    by default to stderr."""
    db = db or default_db()
    lifeline.remove_stale_dirs()  # what the children of a killed dlperf left
    spec = make_spec(workloads, **spec_kwargs)
    if spec.profile and spec.trace_dir is None:  # beside the database
        spec = replace(spec, trace_dir=os.path.abspath(f"{db}.traces"))
    plan = make_plan(spec)
    # a database that cannot be opened is the one-line error, before the plan's warnings
    store = None if dry_run else Store.open(db, create=True)
    for warning in [*plan.warnings, *kept_measurements(db)]:
        (warn or warn_stderr)(warning)
    if store is None:
        return Outcome(ExitCode.OK, plan=plan, estimate=estimate(plan, db, say_pilot))
    try:
        run_id = store.create_run(
            spec.to_json(),
            plan.env,
            envinfo.fingerprint(plan.env),
            argv or sys.argv,
            [PlannedCell(c, plan.workloads[c.key]) for c in plan.cells],
        )
        if spec.predict:
            predict(store, run_id, plan, warn or warn_stderr)
        ctx = SweepContext(store, run_id, spec, plan.workloads, plan.cores)
        return _execute(ctx, plan.tasks, plan, progress)
    finally:
        store.close()


def predict(store: Store, run_id: int, plan: Plan, warn: Callable[[str], None]) -> None:
    """The plan's GPU cells predicted for their GPU (a probe child counts their operators), stored before any cell
    runs: what a crash mid-run leaves still has them. `--no-predict` skips this."""
    rows, notes = gpu_predictions.predictions(plan.cells, plan.workloads, plan.env)
    for note in notes:
        warn(note)
    if rows:
        store.record_predictions(run_id, rows)


def kept_measurements(db: str) -> list[str]:
    """A reminder of the measurements a failing store left beside it (`store/spill.py`), until --resume takes them."""
    kept = spill.runs_kept(db)
    if not kept:
        return []
    runs = ", ".join(f"run {run_id}: {n}" for run_id, n in sorted(kept.items()))
    return [f"{spill.path_for(db)} keeps measurements the store refused ({runs}); `dlperf run --resume --db {db}` "
            "stores those of the latest unfinished run"]  # fmt: skip


def warn_stderr(message: str) -> None:
    print(f"dlperf: warning: {terminal(message)}", file=sys.stderr, flush=True)


def resume(db: str | None = None, progress: Any = None, warn: Callable[[str], None] | None = None) -> Outcome:
    """Continue the latest unfinished run without re-measuring what it finished. A run another live process still
    measures is refused (LeaseHeld); one whose process died is taken over, with a warning saying whose it was."""
    db = db or default_db()
    lifeline.remove_stale_dirs()  # what the children of a killed dlperf left
    store = Store.open(db, create=False)
    try:
        run = store.latest_unfinished_run()
        if run is None:
            raise UsageError(f"--resume: every run in {db} is complete; nothing to resume")
        if dead := store.acquire(run.id):
            (warn or warn_stderr)(f"run {run.id} was left running by {dead.describe()}, last seen {dead.seen}, which "
                                  "is gone: taken over")  # fmt: skip
        spec = RunSpec.from_json(run.spec)
        env = envinfo.capture(framework_info(spec.frameworks))
        changes = envinfo.fingerprint_diff(run.fingerprint, envinfo.fingerprint(env))
        if changes:
            raise UsageError(
                f"--resume: run {run.id} was measured on a different machine or software "
                f"({'; '.join(changes)}); start a new run instead"
            )
        stored = store.cells(run.id)
        cells = [c.cell for c in stored]
        workloads = {c.key: c.workload_spec for c in stored}
        plan = Plan(spec, cells, workloads, env, env["cores"]["cores"])
        ctx = SweepContext(store, run.id, spec, workloads, plan.cores)
        kept = take_up_kept(ctx)
        if kept:
            warn_stderr(f"stored {kept} measurement{'s' * (kept != 1)} kept in {spill.path_for(db)} when the store "
                        "refused them")  # fmt: skip
        tasks = remaining(cells, spec.repeats, store.done_repeats(run.id))
        store.set_run_status(run.id, "running")
        return _execute(ctx, tasks, plan, progress, unprofiled(ctx, tasks))
    finally:
        store.close()


def _execute(ctx: SweepContext, tasks: list[Task], plan: Plan, progress, to_profile: list[Cell] = ()) -> Outcome:
    """`to_profile`: measured cells a resumed run profiles first (`sweep.unprofiled`)."""
    from dlperf.progress import Progress

    progress = progress or Progress(total=len(to_profile) + len(tasks))
    try:
        with progress:
            statuses = execute(ctx, tasks, progress, to_profile=to_profile)
    except Interrupted:
        return Outcome(ExitCode.INTERRUPTED, ctx.run_id, plan)
    failed = any(s.is_failure for s in statuses)
    return Outcome(ExitCode.CELLS_FAILED if failed else ExitCode.OK, ctx.run_id, plan, statuses)
