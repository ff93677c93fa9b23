"""The fleet view: a campaign's machines side by side (`dlperf table --campaign NAME`, `--runs 3,4,7`, and the HTML
report's campaign section).

A campaign is the runs named with `dlperf run --campaign NAME` (the name is stored in each run's spec, so it travels
with `dlperf merge`), or the runs listed. Its runs are grouped by machine (the fingerprint each run was measured
with); a machine's cells are those of its latest run that measured each cell (the latest: the one measured last, by
its start, whatever its id). A row is a workload (framework, mode, loader): per machine the fastest CPU thread count
and the fastest GPU, the GPU's predicted step beside it, and a line saying which machine trains it fastest. Two
machines are told apart only when their cells' 95% confidence intervals of the median do not overlap, or where a cell
has none, their medians differ by more than 5% and either's IQR (`fastest.told_apart`, the table's star's rule);
otherwise the line says "not told apart".
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from dlperf.envinfo import alike, machine_diff
from dlperf.errors import UnreadableRow, UsageError
from dlperf.flagtext import whole_number
from dlperf.measure.stats import counted
from dlperf.measure.units import agreeing, named, plural
from dlperf.report.charts import doubt_json, doubtful
from dlperf.report.export import CSV_LINE_END, spreadsheet_safe
from dlperf.report.fastest import MEDIANS_APART, has_interval, tie, told_apart
from dlperf.report.format import interval, markup, table_seconds
from dlperf.report.predicted import own
from dlperf.report.predicted import read as predictions_of
from dlperf.report.table import DOUBT_LEGEND, FEW_MARK, mode_label
from dlperf.store import Store
from dlperf.store.records import CellRecord, PredictionRecord, RunRecord, in_measured_order
from dlperf.store.state import RAY_ORIGIN, run_state  # the origin of a run a Ray node measured (`dlperf run --ray`)
from dlperf.vocab import Status

CAMPAIGN = "campaign "  # a view of one campaign is named "campaign NAME"
NOT_TOLD_APART = "not told apart"


@dataclass(frozen=True)
class Machine:
    label: str  # host · CPU model (· its GPUs), as a person names the machine
    runs: tuple[int, ...]  # the campaign's runs measured on it
    host: str  # the machine itself, whatever its software (its runs of other versions are columns of their own)


@dataclass(frozen=True)
class Entry:
    """A machine's fastest cell of one kind (CPU or GPU) for a row."""

    machine: str
    cell: CellRecord
    predicted: PredictionRecord | None = None  # a GPU cell's own GPU, predicted before it ran

    @property
    def where(self) -> str:
        if self.cell.device != "cpu":
            return self.cell.device
        return f"{self.cell.threads} thread{'s' * (self.cell.threads != 1)}"

    @property
    def interval(self) -> tuple[float, float] | None:
        """The cell's 95% interval of the median, where it has one to be judged by (`fastest.has_interval`)."""
        return (self.cell.ci_low_s, self.cell.ci_high_s) if has_interval(self.cell) else None

    def text(self) -> str:
        """ "450 ms (2 threads)"; a GPU's "10.0 ms (cuda:0; predicted 12.5 ms on H100-SXM5-80GB)"."""
        guess = f"; predicted {table_seconds(self.predicted.step_s)} on {self.predicted.gpu}" if self.predicted else ""
        return f"{self.median()} ({self.where}{guess})"

    def median(self) -> str:
        """The median as the table shows it, `?` after it where it is not to rely on (`charts.doubtful`: busy CPUs,
        few steps...), as the run's own table marks it (the side by side view dropped the mark)."""
        return table_seconds(self.cell.median_s) + (FEW_MARK if doubtful(self.cell) else "")

    def named(self) -> str:
        """ "alpha · Xeon, 2 threads: 450 ms [440 ms–460 ms]"."""
        span = self.interval
        shown = f" [{interval(*span, table_seconds, '–')}]" if span else " [no interval]"
        return f"{self.machine}, {self.where}: {self.median()}{shown}"


@dataclass
class FleetRow:
    workload: str
    framework: str
    mode: str
    loader: str
    cpu: dict[str, Entry] = field(default_factory=dict)  # machine label -> its fastest CPU thread count
    gpu: dict[str, Entry] = field(default_factory=dict)  # machine label -> its fastest GPU
    # (machine label, "cpu" or "gpu") -> why a machine that ran the row there shows no time: failed, unsupported, ...
    unmeasured: dict[tuple[str, str], str] = field(default_factory=dict)
    # (machine label, "cpu" or "gpu") -> a failed or timed-out cell's column ("cpu:2") and error, where it has one
    errors: dict[tuple[str, str], tuple[str, str, str]] = field(default_factory=dict)  # (column, error, status)
    # the same of an unsupported cell: its reason (the views' notes leave it to `table --run N`; JSON and CSV keep it)
    reasons: dict[tuple[str, str], tuple[str, str, str]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        shown = mode_label(self.mode, self.loader)
        return f"{self.workload} {self.framework}" + ("" if shown == "fp32" else f" {shown}")

    def fastest(self) -> list[Entry]:
        """Each machine's fastest entry, fastest machine first."""
        per_machine: dict[str, Entry] = {}
        for entry in [*self.cpu.values(), *self.gpu.values()]:
            held = per_machine.get(entry.machine)
            if held is None or entry.cell.median_s < held.cell.median_s:
                per_machine[entry.machine] = entry
        return sorted(per_machine.values(), key=lambda e: e.cell.median_s)

    def winner(self) -> Entry | None:
        """The fastest machine's entry, told apart from every other machine's; None with one machine, or where they
        are not (`apart`)."""
        ranked = self.fastest()
        return ranked[0] if len(ranked) > 1 and all(apart(ranked[0], e) for e in ranked[1:]) else None

    def verdict(self) -> str:
        """Which machine trains the row fastest, with the intervals; "not told apart" where they tie (`apart`)."""
        ranked = self.fastest()
        if not ranked:
            return f"{self.label}: no machine measured it"
        first, rest = ranked[0], ranked[1:]
        if not rest:
            return f"{self.label}: only {first.named()}"
        tied = [e for e in rest if not apart(first, e)]
        if tied:
            cells = [e.cell for e in [first, *tied]]
            why = " overlap" if all(map(has_interval, cells)) else f": {tie(cells)}"
            return f"{self.label}: fastest {NOT_TOLD_APART}: {'; '.join(e.named() for e in [first, *tied])}{why}"
        runner_up = rest[0]
        ratio = runner_up.cell.median_s / first.cell.median_s
        return f"{self.label}: fastest on {first.named()}, {ratio:.2f}x faster than {runner_up.named()}"


def apart(a: Entry, b: Entry) -> bool:
    """Whether two machines' cells are told apart (`fastest.told_apart`): their 95% intervals of the median are
    disjoint; where a cell has none, their medians differ by more than 5% and either's IQR (a cell without one was
    told apart from nothing, so two machines 3x apart at 4 steps each read as a tie)."""
    return told_apart(a.cell, b.cell)


@dataclass
class Fleet:
    name: str  # "campaign NAME" (`CAMPAIGN`) or "runs 3, 4, 7"
    machines: list[Machine]
    rows: list[FleetRow]
    unreadable: list[UnreadableRow] = field(default_factory=list)  # cells left out: their rows no longer decode
    unfinished: list[str] = field(default_factory=list)  # its runs not finished, each as the table says it
    order: tuple[int, ...] = ()  # its runs in the order they were measured (`records.measured_order`)

    @property
    def title(self) -> str:
        """ "runs 3, 4: the machines side by side", or where every column is one machine's (its runs of other
        software or settings), "runs 1, 2: one machine, its runs side by side"."""
        if len({m.host for m in self.machines}) > 1:
            return f"{self.name}: the machines side by side"
        return f"{self.name}: {'one machine' if len(self.machines) == 1 else 'one machine, its runs side by side'}"

    @property
    def latest_run(self) -> int:
        """The run measured last (by its start: not the highest id, which `dlperf merge` gives in its own order)."""
        return self.order[-1]

    @property
    def has_gpu(self) -> dict[str, bool]:
        return {m.label: any(m.label in r.gpu for r in self.rows) for m in self.machines}

    def _failures(self) -> list[str]:
        """A line per row and error of the machines with a failed cell: "lstm torch cpu:1 failed on gamma · ...,
        beta · ...: worker killed by SIGKILL ...", also where another thread count gave the column a time (a run's
        cpu:1 failing where an earlier run measured it left "best CPU" at cpu:2's slower time, unsaid)."""
        said: dict[tuple[str, str, str], list[str]] = {}
        for r in self.rows:
            for machine, (column, error, status) in ((m, e) for (m, _), e in r.errors.items()):
                said.setdefault((r.label, f"{column} {status}", error), []).append(machine)
        return [f"{label} {what} on {', '.join(machines)}: {error}" for (label, what, error), machines in said.items()]

    def notes(self) -> list[str]:
        lines = [f"{m.label}: {named('run', m.runs)}" for m in self.machines]
        lines += [f"{said}: its machine's cells are what it measured so far" for said in self.unfinished]
        if alone := [r.label for r in self.rows if r.winner() and any(e.cell.processes == 1 for e in r.fastest())]:
            lines.append(f"{', '.join(alone)}: the fastest machine told apart by cells of one process each, whose 95% "
                         "intervals hold only that process's noise, not how two processes of one machine differ "
                         "(dlperf run --repeats 3 for more)")  # fmt: skip
        lines += self._failures()
        if any(doubtful(e.cell) for r in self.rows for e in [*r.cpu.values(), *r.gpu.values()]):
            lines.append(f"{DOUBT_LEGEND}; `dlperf table --run N` names its cells' notes")
        if any(r.gpu for r in self.rows) and not any(e.predicted for r in self.rows for e in r.gpu.values()):
            lines.append("no GPU cell has a stored prediction (dlperf run predicts each unless --no-predict)")
        return lines


def parse_runs(text: str) -> list[int]:
    """`--runs 3,4,7`: the runs of a campaign, listed."""
    try:
        ids = [whole_number(part, "--runs", least=1) for part in text.split(",")]
    except UsageError:
        raise UsageError(f"--runs {text!r}: expected a comma list of run ids, e.g. 3,4,7") from None
    return list(dict.fromkeys(ids))


def read(db: str, campaign: str | None = None, runs: list[int] | None = None) -> Fleet:
    """The campaign named, or the runs listed, read from the store and grouped by machine."""
    store = Store.open(db, create=False)
    try:
        chosen = select(store, campaign, runs)
        unreadable: list[UnreadableRow] = []
        machines = group(chosen)
        order = tuple(r.id for r in in_measured_order(chosen))
        latest = {m.label: _latest_cells(store, [r for r in order if r in m.runs], unreadable.append)
                  for m in machines}  # fmt: skip
        unfinished = [state.summary() for state in map(partial(run_state, store), chosen) if state.unfinished]
    finally:
        store.close()
    name = f"{CAMPAIGN}{campaign}" if campaign is not None else named("run", (r.id for r in chosen))
    return Fleet(name, machines, build(machines, latest), unreadable, unfinished, order)


def select(store: Store, campaign: str | None, runs: list[int] | None) -> list[RunRecord]:
    if campaign is not None:
        every = store.runs()
        chosen = [r for r in every if r.spec.get("campaign") == campaign]
        if not chosen:
            known = sorted({r.spec["campaign"] for r in every if r.spec.get("campaign")})
            held = f"campaigns there: {', '.join(known)}" if known else "no run there names one (dlperf run --campaign)"
            raise UsageError(f"--campaign {campaign!r}: no run of {store.path} is in it ({held})")
        return chosen
    found, missing = [], []
    for run_id in runs or []:
        try:
            found.append(store.run(run_id))
        except UsageError:  # no such run
            missing.append(run_id)
    if missing:
        raise UsageError(f"--runs: no run {', '.join(map(str, missing))} in {store.path}")
    return sorted(found, key=lambda r: r.id)


def group(runs: list[RunRecord]) -> list[Machine]:
    """The runs by the machine that measured them (their fingerprint, and for a run of `dlperf run --ray` its Ray
    node as `one_node` tells them apart), in the order each machine first appears."""
    by_print: dict[tuple[str, str | None], list[RunRecord]] = {}
    for run in runs:  # a machine's runs: fingerprints alike on the keys both have (an older run lacks the newer ones)
        seen = next((k for k, rs in by_print.items() if all(alike(r.fingerprint, run.fingerprint) and one_node(r, run)
                                                            for r in rs)), None)  # fmt: skip
        by_print.setdefault(seen or (json.dumps(run.fingerprint, sort_keys=True), ray_node(run)), []).append(run)
    labels = [machine_label(rs[0].fingerprint) for rs in by_print.values()]
    cored = [machine_label(rs[0].fingerprint, cores=True) for rs in by_print.values()]
    machines = []
    for label, with_cores, rs in zip(labels, cored, by_print.values(), strict=True):
        ids, node = tuple(r.id for r in rs), _nodes(rs)
        host = label + node  # two Ray nodes of one host in one sweep are two machines
        if labels.count(label) > 1:  # one host and model, yet measured on machines that differ (cores, versions)
            if cored.count(with_cores) == 1:  # the cores tell it apart (a run under taskset): said, not "(run 3)"
                label = with_cores
            label += node or ("" if label == with_cores else f" ({named('run', ids)})")
        machines.append(Machine(label, ids, host))
    return machines


def one_node(a: RunRecord, b: RunRecord) -> bool:
    """Whether two runs' Ray nodes (`ray_node`) leave them one machine, as every view counts machines (`group`: table
    --runs, report's one-machine rule): two local runs; two Ray nodes' runs of one node, or of different sweeps
    (campaigns: `--ray local` starts a node, under a new id, every sweep); not two nodes of one sweep (two raylets
    of one host, each measuring beside the other), nor a Ray node's run and a local run of its host."""
    node_a, node_b = ray_node(a), ray_node(b)
    if node_a is None or node_b is None:
        return node_a == node_b
    return node_a == node_b or a.spec.get("campaign") != b.spec.get("campaign")


def _nodes(runs: list[RunRecord]) -> str:
    """The Ray nodes of a machine's runs, by the first 8 of their ids, as its label says them: ' (Ray node 2a16eca0)';
    '' for local runs."""
    nodes = list(dict.fromkeys(n[:8] for r in runs if (n := ray_node(r))))
    return f" (Ray {agreeing(len(nodes), 'node', 'nodes')} {', '.join(nodes)})" if nodes else ""


def ray_node(run: RunRecord) -> str | None:
    """The Ray node that measured a run of `dlperf run --ray` (its origin `ray:NODE_ID`, merged or not); else None."""
    origin = run.origin
    while origin is not None:
        if str(origin.db).startswith(RAY_ORIGIN):
            return str(origin.db).removeprefix(RAY_ORIGIN)
        origin = origin.origin
    return None


def machine_label(fingerprint: dict, cores: bool = False) -> str:
    """ "alpha · Xeon Test", with its GPUs where it has some: "beta · EPYC Test · NVIDIA H100"; `cores`: with the
    cores it let dlperf use, "beta · EPYC Test, 64 cores · NVIDIA H100"."""
    gpus = ", ".join(dict.fromkeys(g for g in fingerprint.get("gpus") or [] if g))
    cpu = fingerprint.get("cpu_model") or "unknown CPU"
    if cores and (count := (fingerprint.get("cores") or {}).get("cores")):
        cpu += f", {plural(count, 'core')}"
    parts = [fingerprint.get("hostname") or "unknown host", cpu]
    return " · ".join([*parts, *([gpus] if gpus else [])])


def measured_elsewhere(run: RunRecord, here: dict) -> str:
    """ "" for a run of this machine (`here`, its environment: `envinfo.capture`); else in words, as `--resume` and
    the views say it: "run 2 was measured on another machine, big · AMD EPYC 7763 (CPU model AMD EPYC 7763 -> ...)"."""
    if not (diffs := machine_diff(run.fingerprint, run.env, here)):
        return ""
    return f"run {run.id} was measured on another machine, {machine_label(run.fingerprint)} ({'; '.join(diffs)})"


Measured = dict[str, tuple[CellRecord, PredictionRecord | None]]


def _latest_cells(store: Store, runs: list[int], unreadable: Callable[[UnreadableRow], None]) -> Measured:
    """The machine's cells, each from the latest of its runs (`runs`, in the order they were measured) that measured
    it, with its own GPU's prediction."""
    latest: Measured = {}
    for run_id in runs:
        predictions = predictions_of(store, run_id, unreadable)
        for cell in store.cells(run_id, unreadable=unreadable):
            if cell.status is not Status.PENDING:
                latest[cell.key] = (cell, own(cell, predictions))
                if _timed(cell):
                    cell.processes = _processes(store, run_id, cell.key)
    return latest


def _processes(store: Store, run_id: int, key: str) -> int:
    """The processes that timed a cell's steps, of those its median and interval count (`stats.counted`: one of under
    FEW_SAMPLES steps beside one of more is not); 0 where its stored steps no longer decode (not known)."""
    try:
        return len(counted(store.samples(run_id, key)))
    except UnreadableRow:
        return 0


def build(machines: list[Machine], cells: dict[str, Measured]) -> list[FleetRow]:
    """A row per workload (framework, mode, loader), each machine's fastest plain CPU and GPU cell in it."""
    rows: dict[tuple, FleetRow] = {}
    for machine in machines:
        for cell, guess in cells[machine.label].values():
            key = (cell.workload, cell.framework, cell.mode, cell.loader)
            row = rows.setdefault(key, FleetRow(*key))
            if cell.nproc:  # a multi-process cell measures a strategy, not the machine's one-process speed
                continue
            if not _timed(cell):
                where = (machine.label, "cpu" if cell.device == "cpu" else "gpu")
                row.unmeasured.setdefault(where, _why(cell))
                if cell.error:  # why: the column says only "failed" or "unsupported"
                    why = row.errors if cell.status.is_failure else row.reasons
                    why.setdefault(where, (cell.column, cell.error.splitlines()[0], cell.status.value))
                continue
            kind = row.cpu if cell.device == "cpu" else row.gpu
            held = kind.get(machine.label)
            if held is None or cell.median_s < held.cell.median_s:
                kind[machine.label] = Entry(machine.label, cell, None if cell.device == "cpu" else guess)
    return list(rows.values())


def _why(cell: CellRecord) -> str:
    """Why a cell that ran shows no time."""
    return cell.status.value if not cell.ok else "loss not finite" if cell.loss_finite is False else "no time"


def _timed(cell: CellRecord) -> bool:
    """A cell measured and training: what one machine's speed is read from."""
    return cell.ok and bool(cell.median_s) and cell.loss_finite is not False


# ----------------------------------------------------------------------------------------------------------------------
# Laid out


LEGEND = (
    "per machine, the fastest CPU thread count and the fastest GPU: median seconds per mini-batch (under 0.1 s in ms "
    "or µs), a GPU's step predicted for it before it ran beside it; a machine is fastest only where its 95% interval "
    f"of the median and the others' do not overlap (without intervals, where its median is over {MEDIANS_APART:.0%} "
    f"and an IQR below theirs), else {NOT_TOLD_APART}"
)


def show_mode(fleet: Fleet) -> bool:
    return len({(r.mode, r.loader) for r in fleet.rows}) > 1


def head(fleet: Fleet) -> list[str]:
    columns = [f"{m}: {'best CPU' if kind == 'cpu' else 'GPU'}" for m, kind in slots(fleet)]
    return ["workload", "framework", *(["mode"] if show_mode(fleet) else []), *columns]


def fixed(fleet: Fleet, row: FleetRow) -> list[str]:
    return [row.workload, row.framework, *([mode_label(row.mode, row.loader)] if show_mode(fleet) else [])]


def slots(fleet: Fleet) -> list[tuple[str, str]]:
    """The machine columns: (machine, "cpu"), then (machine, "gpu") where the machine measured a GPU."""
    return [(m, kind) for m, gpu in fleet.has_gpu.items() for kind in ("cpu", "gpu")[: 1 + gpu]]


def entries(fleet: Fleet, row: FleetRow) -> list[Entry | None]:
    """The row's entries in the machine columns' order."""
    return [(row.cpu if kind == "cpu" else row.gpu).get(m) for m, kind in slots(fleet)]


def row_values(fleet: Fleet, row: FleetRow) -> list[str]:
    """The row's texts: a machine column without a time says why (failed, unsupported, ...), or "-" if not run."""
    shown = zip(slots(fleet), entries(fleet, row), strict=True)
    return fixed(fleet, row) + [e.text() if e else row.unmeasured.get(slot, "-") for slot, e in shown]


def verdicts(fleet: Fleet) -> list[str]:
    return [r.verdict() for r in fleet.rows]


def render_markdown(fleet: Fleet) -> str:
    header = head(fleet)
    lines = [
        fleet.name[:1].upper() + fleet.name[1:],  # "Campaign lab", "Runs 3, 4, 7"
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(row_values(fleet, r)) + " |" for r in fleet.rows]
    return "\n".join([*lines, "", *(f"- {v}" for v in verdicts(fleet)), "", LEGEND, *fleet.notes()])


def render_csv(fleet: Fleet) -> str:
    """One line per row and machine, raw seconds: a spreadsheet wants numbers."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=CSV_LINE_END)
    writer.writerow(["workload", "framework", "mode", "loader", "machine", "cpu_s", "cpu_threads", "cpu_ci_low_s",
                     "cpu_ci_high_s", "gpu_s", "gpu_device", "gpu_ci_low_s", "gpu_ci_high_s", "gpu_predicted_s",
                     "fastest", "cpu_status", "cpu_doubtful", "gpu_status", "gpu_doubtful", "error"])  # fmt: skip
    for row in fleet.rows:
        won = row.winner()
        first = won.machine if won else None
        for m in fleet.machines:
            cpu, gpu = row.cpu.get(m.label), row.gpu.get(m.label)
            values = [*_raw(cpu, lambda e: e.cell.threads), *_raw(gpu, lambda e: e.cell.device)]
            values.append(repr(gpu.predicted.step_s) if gpu and gpu.predicted else "")
            names = [row.workload, row.framework, row.mode, row.loader, m.label]
            said = [_state(row, m.label, kind) for kind in ("cpu", "gpu")]
            states = [v for state in said for v in (state.get("status", ""), _doubtful_csv(state))]
            errors = "; ".join(f"{state['column']}: {state['error']}" for state in said if state.get("error"))
            writer.writerow([spreadsheet_safe(v) for v in names] + values + [str(m.label == first).lower(),
                            *states, spreadsheet_safe(errors)])  # fmt: skip
    return out.getvalue()


def _doubtful_csv(state: dict) -> str:
    """A side's `doubtful` in CSV: true or false where it has a time, empty where it has none (as its `cpu_s`)."""
    return "" if state.get("status") != "ok" else str(bool(state.get("doubtful"))).lower()


def _raw(entry: Entry | None, where: Callable[[Entry], object]) -> list[str]:
    if entry is None:
        return ["", "", "", ""]
    low, high = entry.interval or ("", "")
    return [repr(entry.cell.median_s), str(where(entry)), str(low), str(high)]


def render_json(fleet: Fleet) -> str:
    rows = [{"workload": r.workload, "framework": r.framework, "mode": r.mode, "loader": r.loader,
             "machines": {m.label: {kind: _state(r, m.label, kind) or None for kind in ("cpu", "gpu")}
                          for m in fleet.machines},
             "verdict": r.verdict()} for r in fleet.rows]  # fmt: skip
    machines = [{"label": m.label, "runs": list(m.runs)} for m in fleet.machines]
    named = fleet.name.removeprefix(CAMPAIGN) if fleet.name.startswith(CAMPAIGN) else None  # not "campaign lab"
    return json.dumps({"campaign": named, "of": fleet.name, "machines": machines, "rows": rows, "legend": LEGEND},
                      indent=2)  # fmt: skip


def _state(row: FleetRow, machine: str, kind: str) -> dict:
    """A machine's CPU or GPU side of a row for a script: its fastest cell ("status": "ok", its figures and, where
    not to rely on, `doubtful` and why), or why it has no time (failed, unsupported, loss not finite: with the cell's
    column and error where it has one; CSV and JSON read a failed cell as one never run); {} where it did not run."""
    entry = (row.cpu if kind == "cpu" else row.gpu).get(machine)
    if entry is not None:
        c, p = entry.cell, entry.predicted
        return {"status": "ok", "key": c.key, "device": c.device, "threads": c.threads, "median_s": c.median_s,
                "ci_low_s": c.ci_low_s, "ci_high_s": c.ci_high_s, "n": c.n,
                "predicted": p and {"gpu": p.gpu, "step_s": p.step_s, "bound": p.bound}, **doubt_json(c)}  # fmt: skip
    if (machine, kind) not in row.unmeasured:
        return {}
    column, error, status = row.errors.get((machine, kind)) or row.reasons.get((machine, kind)) or (None, None, None)
    return {"status": status or row.unmeasured[machine, kind], **({"column": column, "error": error} if error else {})}


def render_rich(fleet: Fleet):
    from rich.table import Table

    table = Table(title=fleet.title)
    for i, name in enumerate(head(fleet)):
        table.add_column(markup(name), justify="left" if i < 2 + show_mode(fleet) else "right")
    for row in fleet.rows:
        best = row.winner()
        shown = [None] * (2 + show_mode(fleet)) + entries(fleet, row)
        table.add_row(*(f"[bold green]{markup(v)}[/]" if e is not None and e is best else markup(v)
                        for e, v in zip(shown, row_values(fleet, row), strict=True)))  # fmt: skip
    return table
