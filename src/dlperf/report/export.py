"""`dlperf export`: one record per cell, for notebooks and spreadsheets. Every figure traces back to its run."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dlperf.errors import UnreadableRow
from dlperf.flagtext import DECIMAL
from dlperf.predict.validate import relative_error
from dlperf.report import predicted
from dlperf.report.data import Group, h2d_bandwidths, throughput
from dlperf.store.records import CellRecord, CommRecord, CompileRecord, LoaderRecord, PredictionRecord, RunRecord

if TYPE_CHECKING:
    from dlperf.store import Store

FIELDS = (
    "run_id", "key", "workload", "framework", "device", "threads", "mode", "batch", "status", "error",
    "median_s", "iqr_s", "mean_s", "stdev_s", "ci_low_s", "ci_high_s", "mean_ci_low_s", "mean_ci_high_s", "n",
    "samples_per_s", "warmup_steps",
    "params", "flops_per_step", "peak_mem_bytes", "peak_mem_kind",
)  # fmt: skip
# an export name that is not the record's field: per second, where every other `_s` of a record is in seconds
RECORD_FIELD = {"samples_per_s": "samples_s"}
# every column renamed since `dlperf export` began, its former name -> its name now: written too, right after it and
# with its value, since a user's script reads the columns by name (the export is the stable way to read a store) and
# broke on the rename; docs/reference/export.md names each a former name kept for scripts
FORMER_NAMES = {"samples_s": "samples_per_s"}  # renamed by ae158e29


# OWASP's CSV injection list: a spreadsheet evaluates a field starting with one of these as a formula
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """A CSV field a spreadsheet shows as written: text that would start a formula (a workload named `=HYPERLINK(...)`,
    an error from the user's model) gets a leading `'`, as OWASP advises; numbers, negative ones too, stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not DECIMAL.fullmatch(value):
        return "'" + value
    return value


# a loader cell's input pipeline (`LoaderRecord`): export name -> the record's field
LOADER_FIELDS = {
    "dataset": "dataset", "dataset_samples": "samples", "loader_alone_samples_per_s": "alone_samples_per_s",
    "data_wait_share": "wait_share", "data_wait_median_s": "wait_median_s", "input_bound": "verdict",
    "workers": "workers", "oversubscribed": "oversubscribed",
}  # fmt: skip
H2D_FIELDS = ("pageable", "pinned", "pinned non_blocking")  # h2d_<kind>_bytes_s: one batch's copy to the device


def record(cell: CellRecord, samples: list[list[float]] | None = None, group: Group | None = None,
           prediction: PredictionRecord | None = None, predictions: list[PredictionRecord] = (),
           run: RunRecord | None = None, profile: dict[str, Any] | None = None,
           state: str | None = None, processes: int | None = None) -> dict[str, Any]:  # fmt: skip
    """`group`: the cell's input pipeline group (`data.by_cell`), whose recommendation the record carries;
    `prediction`: the step predicted for the cell's own GPU (`predicted.own`), set against its measurement;
    `predictions`: every step predicted for the cell, a crossover's for other GPUs included; `run`: the cell's run,
    whose machine and dlperf every record names (a merged store's runs come from several); `profile`: the cell's as
    `dlperf profile --format json` gives it (`report.cell_profile.CellProfile.to_json`), None where its run stored
    none; `state`: the run's (`store.state.RunState.state`), where it is known; `processes`: the cell's timed
    processes stored (`with_processes`)."""
    rec = {f: getattr(cell, RECORD_FIELD.get(f, f)) for f in FIELDS}
    rec = with_processes({"run_id": rec.pop("run_id"), **run_fields(run, state), **machine_fields(run), **rec},
                         processes, run)  # fmt: skip
    rec["status"] = cell.status.value
    rec["process_hwm_increase_bytes"] = cell.memory.process_hwm_increase_bytes if cell.memory else None
    for key in ("steal_fraction", "others_cpu_share", "cpu_utilization", "minor_faults_per_step", "kernel_cpu_share",
                "flops_by_dtype"):  # fmt: skip
        rec[key] = getattr(cell, key)
    rec["utilization"] = cell.utilization  # of the peaks measured by `dlperf peak`; None without them
    compiled = cell.compile or CompileRecord()
    for key in ("compile_s", "graphs", "graph_breaks", "recompiles"):
        rec[key] = getattr(compiled, key)
    rec["nproc"], rec["scaling"] = cell.nproc, cell.scaling or None  # multi-process cells
    rec["parallel"], rec["microbatches"] = cell.parallel or None, cell.microbatches or None
    rec["framework_version"] = cell.framework_version or planned_version(cell, run)
    rec["environment"] = cell.environment
    rec["timing"] = (cell.settings or {}).get("timing")  # how the worker timed the step (pipelined or synchronized)
    comm = cell.comm or CommRecord()
    for key in (
        "gradient_bytes",
        "allreduce_s",
        "busbw_bytes_s",
        "local_step_s",
        "exposed_comm_s",
        "comm_share",
        "param_bytes_rank",
        "state_bytes_rank",
        "peak_bytes_rank",
        "bubble",
        "bubble_theory",
        "split",
    ):
        rec[key] = getattr(comm, key)
    check = cell.loss_check
    rec["loss_ok"], rec["loss_reason"] = (check.ok, check.reason) if check else (None, None)
    rec["loss_finite"] = cell.loss_finite  # False: a timed step's loss was NaN or infinite (the cell did not train)
    rec["shared_from"] = cell.shared_from or None  # a figure its processes did not measure: a sibling's, or kept
    rec.update(loader_fields(cell, group))
    rec.update(prediction_fields(cell, prediction))
    rec["gpu_predictions"] = [predicted_step(p) for p in predictions]
    rec["profile"] = profile
    rec["warnings"] = cell.warnings
    if samples is not None:
        rec["samples"] = samples  # one list of raw step times per process
    return with_former_names(rec)


def with_former_names(rec: dict[str, Any]) -> dict[str, Any]:
    """The record with each renamed column's former name (`FORMER_NAMES`) right after its name now, its value."""
    items = []
    for name, value in rec.items():
        items += [(name, value), *((former, value) for former, now in FORMER_NAMES.items() if now == name)]
    return dict(items)


def with_processes(rec: dict[str, Any], processes: int | None, run: RunRecord | None) -> dict[str, Any]:
    """The record with, after its step count, the cell's timed processes stored and its run's --repeats: a cell of an
    interrupted run at 1 of 3 read "ok" with a median like any other, its figures not final."""
    at = list(rec).index("n") + 1
    planned = int(run.spec.get("repeats") or 1) if run else None
    items = list(rec.items())
    return dict([*items[:at], ("processes", processes), ("processes_planned", planned), *items[at:]])


def chosen_runs(store: Store, chosen: list[int] | str | None) -> list[RunRecord]:
    """`--run`: the latest run, every run (`all`), or the runs listed, in order of their ids."""
    if chosen is None:
        return [store.run()]
    if chosen == "all":
        return store.runs() or [store.run()]  # no runs: store.run() says so
    return [store.run(i) for i in sorted(set(chosen))]


def run_records(store: Store, run: RunRecord, samples: bool, unreadable: Callable[[UnreadableRow], None]
                ) -> list[dict[str, Any]]:  # fmt: skip
    """The run's records, each from the run's own cells, peaks, predictions, input pipeline groups and profiles, all
    read at once (`state.snapshot`: a run being measured gave a cell "pending" with its samples); `samples`: with every
    raw step time; a cell whose stored rows no longer decode goes to `unreadable`, left out."""
    from dlperf.store.state import snapshot

    with snapshot(store):
        return _run_records(store, store.run(run.id), samples, unreadable)  # the run too: its status as its cells'


def _run_records(store: Store, run: RunRecord, samples: bool, unreadable: Callable[[UnreadableRow], None]
                 ) -> list[dict[str, Any]]:  # fmt: skip
    from dlperf.report import data
    from dlperf.report.cell_profile import run_profiles
    from dlperf.report.utilization import attach_utilization
    from dlperf.store.state import run_state

    cells = store.cells(run.id, unreadable=unreadable)
    state = run_state(store, run).state
    done = [key for key, _ in store.done_repeats(run.id)]
    attach_utilization(store, run.fingerprint, cells)
    predictions = predicted.read(store, run.id, unreadable)
    records, groups = [], data.by_cell(data.build(cells))
    said = run_profiles(store, run, cells)[0] if store.profiles(run.id) else []  # a run not profiled: no look-ups
    profiles = {s.cell.key: s.to_json() for s in said if s.profile is not None}
    for c in cells:
        try:
            steps = store.samples(run.id, c.key) if samples else None
            own, every = predicted.own(c, predictions), predictions.get(c.key, [])
            records.append(record(c, steps, groups.get(c.key), own, every, run, profiles.get(c.key), state,
                                  done.count(c.key)))  # fmt: skip
        except UnreadableRow as fault:
            unreadable(fault)
    return records


def columns() -> list[str]:
    """The columns of every record, in order (without `--samples`'): an export of no record has them too."""
    from dlperf.protocol import Cell

    cell = Cell("fcn-r", "torch", "cpu", 1, "fp32")
    return list(record(CellRecord(run_id=1, key=cell.key, position=0, **cell.to_json())))


def run_fields(run: RunRecord | None, state: str | None) -> dict[str, Any]:
    """Which run a record is of, wherever it is read: its start (a merge gives it another id, not another start), the
    file and run it was measured in where it was copied here (`dlperf merge`), and its state: a record of a run not
    complete is what it measured so far."""
    origin = run.origin if run else None
    while origin is not None and origin.origin is not None:  # the first file: where it was measured
        origin = origin.origin
    measured_in = f"{origin.db} run {origin.run_id}" if origin is not None else None
    return {"run_started_at": run.started_at if run else None, "run_state": state, "run_origin": measured_in}


def planned_version(cell: CellRecord, run: RunRecord | None) -> str | None:
    """The version of the cell's framework the run found as it planned (its environment), for a cell no worker
    measured (unsupported, pending): each record names its framework's version."""
    found = ((run.env.get("frameworks") or {}).get(cell.framework) if run else None) or {}
    return found.get("version") if isinstance(found, dict) else None


def machine_fields(run: RunRecord | None) -> dict[str, Any]:
    """The machine that measured the run, as its fingerprint names it, and the dlperf that measured it, its version
    and its timing code (`envinfo.timing_code`: its digest, and the git commit it ran from): the same keys for every
    record, None where a run does not say (one an older dlperf measured keeps no code)."""
    found = run.fingerprint if run else {}
    cores = (found.get("cores") or {}).get("cores")
    gpus = [g for g in found.get("gpus") or [] if g]
    code = run.env.get("dlperf_code") if run else None
    code = code if isinstance(code, dict) else {}
    return {"hostname": found.get("hostname"), "cpu_model": found.get("cpu_model"), "cores": cores,
            "gpus": gpus or None, "dlperf_version": run.env.get("dlperf_version") if run else None,
            "dlperf_code": code.get("digest"), "dlperf_commit": code.get("commit")}  # fmt: skip


def loader_fields(cell: CellRecord, group: Group | None) -> dict[str, Any]:
    """The same keys for every cell, so that a CSV has one header: None where a cell has no loader."""
    data = cell.data or LoaderRecord(cell.loader)
    rec: dict[str, Any] = {"loader": cell.loader or None}
    rec["long_run_samples_per_s"] = throughput(cell) if group else None  # as the input pipeline view gives it
    rec.update({name: getattr(data, f) for name, f in LOADER_FIELDS.items()})
    rec["oversubscribed"] = data.oversubscribed if cell.data else None
    h2d = data.h2d or {}
    rec["h2d_bytes"] = h2d.get("bytes")
    bandwidths = h2d_bandwidths(h2d)
    rec.update({f"h2d_{kind.replace(' ', '_')}_bytes_s": bandwidths.get(kind) for kind in H2D_FIELDS})
    rec["recommended_loader"] = group.recommendation.setting if group else None
    rec["data_recommendation"] = group.recommendation.to_json() | {"advice": group.advice} if group else None
    return rec


def prediction_fields(cell: CellRecord, p: PredictionRecord | None) -> dict[str, Any]:
    """The same keys for every cell: None without a prediction; the error (predicted / measured - 1) needs both."""
    if p is None:
        return dict.fromkeys(("predicted_gpu", "predicted_step_s", "prediction_error", "predicted_bound"))
    step_s, bound = predicted.step_and_bound(cell, p)  # a loader cell's: with its loader as measured alone
    # a failed cell has no step to set the prediction against
    wrong = relative_error(step_s, cell.median_s) if cell.median_s else None
    return {"predicted_gpu": p.gpu, "predicted_step_s": step_s, "prediction_error": wrong, "predicted_bound": bound}


def predicted_step(p: PredictionRecord) -> dict[str, Any]:
    """One GPU's predicted step for the cell; `crossover`: set against the CPU cell by `dlperf crossover` (the GPU is
    not the cell's)."""
    rec = {f: getattr(p, f) for f in ("gpu", "mode", "batch", "step_s", "device_s", "transfer_s")}
    rec["samples_per_s"] = p.batch / p.step_s if p.step_s else None
    return rec | {"bound": p.bound, "crossover": bool(p.detail.get("crossover"))}


# RFC 4180's line end. Python 3.11's csv quotes a field holding a character of the line end, and not otherwise a
# bare carriage return: with "\n" a name holding "\r" went out unquoted and split its row in a reader.
CSV_LINE_END = "\r\n"


def render(records: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in records)
    out = io.StringIO()
    names = list(records[0]) if records else columns()
    writer = csv.DictWriter(out, fieldnames=names, lineterminator=CSV_LINE_END)
    writer.writeheader()
    for r in records:
        writer.writerow({k: spreadsheet_safe(csv_field(v)) for k, v in r.items()})
    return out.getvalue()


def csv_field(value: Any) -> Any:
    """A list or dict as JSON, the warnings too (a warning may hold "; "), never Python's repr."""
    return json.dumps(value) if isinstance(value, list | dict) else value  # JSON, never Python's repr
