"""A run's Table-7 cells beside the paper's own figures (`dlperf table --paper`).

Each fp32 cell of a paper network at the paper's mini-batch, on synthetic data, is a row: where it ran (cpu:N or a
GPU), its median, and the paper's figures there: its framework's counterpart among the paper's tools (PyTorch:
Torch, the Lua Torch7 of 2016; TensorFlow: TF; MXNet: MXNet; JAX has none) on the desktop CPU (i7-3820) and the
server CPU (2x Xeon E5-2630 v3) at the same thread count, or on the paper's fastest GPU (GTX 1080), and the fastest
of the paper's five tools there. The figures are `report/paper.py`'s table (package data).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

from dlperf.measure.stats import FEW_SAMPLES
from dlperf.measure.units import times
from dlperf.report.charts import doubt_json, doubtful
from dlperf.report.export import CSV_LINE_END, spreadsheet_safe
from dlperf.report.format import markup, table_seconds
from dlperf.report.notes import grouped
from dlperf.report.paper import CITATION, Figure, batch_of, columns, figures_in
from dlperf.report.table import FEW_MARK, cell_notes
from dlperf.store.records import CellRecord
from dlperf.vocab import Status

COUNTERPART = {"torch": "Torch", "tensorflow": "TF", "mxnet": "MXNet"}  # the paper's tool each framework follows
MACHINES = {"desktop": "i7-3820, 4 cores", "server": "2x Xeon E5-2630 v3, 16 cores"}
GPU_COLUMN, GPU_NAME = "gtx1080", "GTX 1080"  # the paper's fastest GPU
HEAD = ["workload", "framework", "batch", "where", "here", "paper, same tool", "paper, fastest tool", "speed-up"]


@dataclass
class PaperRow:
    cell: CellRecord
    network: str
    same: list[Figure]  # its counterpart tool: desktop and server at its threads, or the GPU
    fastest: Figure | None  # the paper's fastest tool there

    @property
    def ratio(self) -> float | None:
        """How many times faster here than the paper's same tool on its first machine (>1: faster here)."""
        return self.same[0].seconds / self.cell.median_s if self.same and self.cell.median_s else None


def _columns(cell: CellRecord) -> list[tuple[str, str]]:
    """The paper's columns that stand where `cell` ran: (CSV column, where)."""
    if cell.device == "cpu":
        return [(f"{machine}_cpu_{cell.threads}", machine) for machine in MACHINES]
    return [(GPU_COLUMN, GPU_NAME)]


def figures(network: str, cell: CellRecord) -> tuple[list[Figure], Figure | None]:
    """The paper's figures for `network` where `cell` ran: its counterpart tool's, and the fastest tool's."""
    there = figures_in(network, dict(_columns(cell)))
    tool = COUNTERPART.get(cell.framework)
    return [f for f in there if f.tool == tool], min(there, key=lambda f: f.seconds, default=None)


def build(cells: list[CellRecord]) -> tuple[list[PaperRow], list[str]]:
    """Rows for the cells the paper has a figure beside, and notes: those of the table on the rows' cells (noise,
    other processes' load, few samples), and on the paper networks' cells left out."""
    rows, notes, untimed = [], set(), []
    for c in cells:
        network = c.workload_spec.get("paper")
        if not network or (not c.ok and c.status is Status.PENDING):
            continue
        if c.mode != "fp32" or c.loader or c.nproc:
            notes.add("the paper trained in fp32, one process, on synthetic batches: only such cells stand beside it")
            continue
        if c.batch != (batch := batch_of(network)):
            notes.add(f"{c.workload}: batch {c.batch}, the paper's {batch}: not beside it")
            continue
        if not c.ok or c.median_s is None:  # a failed resnet-50 cpu:1 left no row and no word of it
            untimed.append(f"{c.cell.label} ({c.status.value})")
            continue
        same, fastest = figures(network, c)
        rows.append(PaperRow(c, network, same, fastest))
    told = grouped([(label, text) for label, _, text in cell_notes([r.cell for r in rows])])
    if untimed:
        notes.add(f"no step to stand beside the paper: {', '.join(untimed)}")
    return rows, told + sorted(notes)


DOUBT_LEGEND = (
    f"{FEW_MARK} = a median not to rely on: fewer than {FEW_SAMPLES} samples, or disturbed (other "
    "processes' load, steal, a warm-up that did not settle: the notes say which), as the report marks it"
)


def _here(cell: CellRecord) -> str:
    mark = FEW_MARK if doubtful(cell) else ""
    return f"{table_seconds(cell.median_s)}{mark} n={cell.n}" if cell.n is not None else table_seconds(cell.median_s)


def _figure(f: Figure) -> str:
    return f"{f.tool} {table_seconds(f.seconds)} ({f.where})"


def _same(row: PaperRow) -> str:
    """Its counterpart's figures: "Torch 1.670 desktop, 1.379 server"."""
    if not row.same:
        if (tool := COUNTERPART.get(row.cell.framework)) is None:
            return f"none: {'JAX' if row.cell.framework == 'jax' else row.cell.framework} is not in the paper"
        gpu = row.cell.device != "cpu"
        if not any(f.tool == tool for f in figures_in(row.network, columns(gpu))):  # its MXNet: no LSTM on CPUs
            where, at_all = ("GPU", "") if gpu else ("CPU", " at any thread count")
            return f"none: the paper has no {tool} {where} figure for {row.network}{at_all}"
        return f"none: the paper has no {tool} figure at {row.cell.column}"
    return f"{row.same[0].tool} " + ", ".join(f"{table_seconds(f.seconds)} {f.where}" for f in row.same)


def values(row: PaperRow) -> list[str]:
    c = row.cell
    where = c.column
    ratio = times(row.ratio) + (FEW_MARK if doubtful(c) else "") if row.ratio else ""  # rests on the same median
    if ratio and row.same[0].where == "server":  # the desktop has no figure there (8 threads of FCN-S, 16 or 32)
        ratio += " (server)"
    fastest = _figure(row.fastest) if row.fastest else "-"
    return [c.workload, c.framework, str(c.batch), where, _here(c), _same(row), fastest, ratio]


def legend(rows: list[PaperRow]) -> list[str]:
    return [
        "seconds per mini-batch; here: the median of n steady-state steps"
        + (f", {DOUBT_LEGEND}" if any(doubtful(r.cell) for r in rows) else ""),
        f"paper: {CITATION}; desktop = {MACHINES['desktop']}, server = {MACHINES['server']}, GPU = {GPU_NAME}; "
        "its Torch is Lua Torch7, its TF and MXNet the 2016 releases",
        "speed-up: the paper's same tool (on its desktop, on its server where marked so, or on its GPU) over here: "
        "above 1x, this machine is faster",
    ]


def render_rich(run_id: int, rows: list[PaperRow]):
    from rich.table import Table

    table = Table(title=title(run_id))
    for name in HEAD:
        table.add_column(name, justify="right" if name in ("here", "speed-up") else "left")
    for row in rows:
        table.add_row(*(markup(v) for v in values(row)))
    return table


def title(run_id: int) -> str:
    return f"Run {run_id} beside Shi et al. (2016), Table 7: seconds per mini-batch"


def render_markdown(rows: list[PaperRow], notes: list[str], run_id: int | None = None, where: list[str] = ()) -> str:
    """As the text view: its title (with `run_id`), the rows, the legend, the notes, and `where` (`measured on`,
    `measured with`: `table.version_lines`)."""
    lines = [f"**{title(run_id)}**", ""] if run_id is not None else []
    lines += ["| " + " | ".join(HEAD) + " |", "|" + "|".join("---" for _ in HEAD) + "|"]
    lines += ["| " + " | ".join(values(r)) + " |" for r in rows]
    said = ["", *(f"- note: {n}" for n in notes)] if notes else []
    return "\n".join([*lines, "", *legend(rows), *said, *(["", *where] if where else [])])


def _records(rows: list[PaperRow]) -> list[dict]:
    def paper(f: Figure | None) -> dict | None:
        return {"seconds": f.seconds, "tool": f.tool, "where": f.where} if f else None

    return [
        {"workload": r.cell.workload, "network": r.network, "framework": r.cell.framework, "batch": r.cell.batch,
         "device": r.cell.device, "threads": r.cell.threads, "median_s": r.cell.median_s, "n": r.cell.n,
         "paper_same_tool": [paper(f) for f in r.same], "paper_fastest": paper(r.fastest), "speed_up": r.ratio,
         **doubt_json(r.cell)}
        for r in rows
    ]  # fmt: skip


def render_json(run_id: int, rows: list[PaperRow], notes: list[str], where: list[str] = ()) -> str:
    said = {line.split(": ", 1)[0].replace(" ", "_"): line.split(": ", 1)[1] for line in where}  # measured_on, _with
    return json.dumps({"run": run_id, "paper": CITATION, "rows": _records(rows), "notes": notes, **said}, indent=2)


def render_csv(rows: list[PaperRow], where: list[str] = ()) -> str:
    """A row per cell with the paper's figures and the speed-up (the text view's), then `where` a row each."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=CSV_LINE_END)
    writer.writerow(["workload", "framework", "batch", "device", "threads", "median_s", "n", "paper_tool",
                     "paper_desktop_s", "paper_server_s", "paper_gpu_s", "paper_fastest_tool", "paper_fastest_where",
                     "paper_fastest_s", "speed_up", "marks"])  # fmt: skip
    for r in rows:
        same = {f.where: f.seconds for f in r.same}
        c = r.cell
        writer.writerow([spreadsheet_safe(c.workload), c.framework, c.batch, c.device, c.threads, repr(c.median_s),
                         c.n if c.n is not None else "", r.same[0].tool if r.same else "", same.get("desktop", ""),
                         same.get("server", ""), same.get(GPU_NAME, ""), r.fastest.tool if r.fastest else "",
                         r.fastest.where if r.fastest else "", r.fastest.seconds if r.fastest else "",
                         repr(r.ratio) if r.ratio else "", FEW_MARK if doubtful(c) else ""])  # fmt: skip
    writer.writerows([spreadsheet_safe(part) for part in line.split(": ", 1)] for line in where)
    return out.getvalue()
