"""`dlperf report`: one self-contained HTML file, readable offline: no CDN, no external file, charts as inline SVG.

Every string that came from the store (workload names, modes, error messages, environment values) is escaped on
its way into the page, and the tooltip script sets text, never markup.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from urllib.parse import quote

from dlperf.envinfo import capture
from dlperf.measure.units import named as runs_named
from dlperf.measure.units import plural
from dlperf.report import best, charts, cost, crossover, ddp, figures, fit, fleet, paper, predicted, profile, table
from dlperf.report import data as pipeline
from dlperf.report.charts import Chart
from dlperf.report.fleet import Fleet
from dlperf.report.format import count, nbytes, seconds
from dlperf.report.html_page import CSS, SCRIPT
from dlperf.report.load import Loaded
from dlperf.report.run_list import ray_resume
from dlperf.store.location import resume_command
from dlperf.store.records import CellRecord
from dlperf.store.state import made_by
from dlperf.version import VERSION
from dlperf.vocab import Status
from dlperf.workloads.user import changed_sources


@dataclass
class Section:
    id: str
    title: str
    body: str


def render(data: Loaded, at: Path | None = None, campaign: Fleet | None = None) -> str:
    """The page; `at`: where it will be written, so that links to the profiles' traces are relative to it;
    `campaign`: the machines of a campaign side by side, a section before the runs' own."""
    cells = data.cells
    paper_rows, paper_notes = paper.compare(cells)
    breakdown = profile.breakdown(cells, data.profiles, data.verdicts)
    all_charts = [*charts.all_charts(cells), *([paper.chart(paper_rows)] if paper_rows else [])]
    all_charts += [breakdown] if breakdown else []
    groups = pipeline.build(cells)
    all_charts += [pipeline.chart(g) for g in groups]
    # a crossover of one batch (advise's, at the user's) draws a point per GPU above one tick: its table says it
    all_charts += [crossover.chart(x) for x in data.crossovers if len(x.rows) > 1]
    all_charts = [c for c in all_charts if c.points]  # an unsupported cell's group draws no empty chart
    forecast = predicted.rows(cells, data.predictions)
    fits = fit.searches(data.runs, cells)
    colors = figures.palette(all_charts)
    drawn = {c.id: _figure(c, colors, f"c{i}") for i, c in enumerate(all_charts)}
    by_kind = lambda prefix: "".join(v for k, v in drawn.items() if k.startswith(prefix))  # noqa: E731
    sections = [
        *([Section("campaign", f"The machines of {campaign.name} side by side", _fleet(campaign))] if campaign else []),
        *([Section("fit", "The largest batch that fits", _fit(fits))] if fits else []),
        Section("table", "Seconds per mini-batch" + (f" (run {_ids(data)})" if campaign else ""), _table7(data)),
        *([Section("input", "Input pipeline", _pipeline(groups, drawn))] if groups else []),
        Section("scaling", "Thread scaling", by_kind("scaling-") or _none(_untimed(cells) or "No workload was "
                f"measured at two or more CPU thread counts {_in_runs(data)}.")),
        Section("variants", "Frameworks and modes", by_kind("variants-") + _best_table(data)
                or _none(_untimed(cells) or "Every workload was measured with one framework in one mode.")),
        Section("ddp", "Multi-process scaling: the strategies side by side", by_kind("ddp-") + _ddp(data)),
        Section("gpu", "CPU against GPU", drawn.get("gpu-speedup") or _none(f"No GPU was measured {_in_runs(data)}.")),
        *([Section("predicted", "Predicted against measured", _predicted(forecast))] if forecast else []),
        *([Section("crossover", "When a GPU pays", _crossovers(data.crossovers, drawn))] if data.crossovers else []),
        Section("utilization", "Utilization of the measured peak", _noted(drawn.get("utilization"), data) or _none(
            "No utilization: " + ("no cell has a FLOP count." if data.peaks_found else "no peak was measured on this "
                                  "machine. Run dlperf peak, then the report again."))),
        *([Section("profile", "Where the time goes", drawn.get("profile", "") + _profiles(data, at))]
          if data.profiles else []),
        Section("paper", "Against the paper", _paper(paper_rows, paper_notes, drawn.get("paper", ""))),
        Section("warnings", "Warnings", _warnings(data, paper_notes, fit.tries_of(fits))),
        Section("environment", "Environment", _environment(data)),
    ]  # fmt: skip
    return _page(data, sections, len(all_charts), len(fit.tries_of(fits)), campaign)


def _figure(chart: Chart, colors: dict, prefix: str) -> str:
    """A chart and its caption. Its `<svg>` is a group named by its title (its aria-label only: a `<title>` too was
    heard as its description, the name again), not an image: an image's parts are hidden from a screen reader, and
    each point's text is its name (`figures.svg`)."""
    svg, tagged = figures.svg(chart, colors, prefix)
    named = escape(f"Chart: {chart.title}" + (f" ({plural(tagged, 'point')}, each focusable)" if tagged else ""), True)
    svg = svg.replace("<svg ", f'<svg role="group" aria-label="{named}" ', 1)
    caption = f"<figcaption>{escape(chart.caption)}</figcaption>" if chart.caption else ""
    return (
        f'<figure class="chart" id="chart-{escape(chart.id)}" data-chart="{escape(chart.id)}" '
        f'data-points="{tagged}">{svg}{caption}</figure>'
    )


def _in_runs(data) -> str:
    """ "in this run", or of several, that each cell is its latest run's (`load`): runs 1 and 2 measured two thread
    counts, a later run one, and a report of all said of them 'in this run'."""
    if len(data.runs) == 1:
        return "in this run"
    return f"in {LATEST_OF_RUNS}"


# several runs read: a cell measured in more than one is its latest run's
LATEST_OF_RUNS = "these runs, each cell its latest run's (--run N shows one run's own)"


def _untimed(cells: list[CellRecord]) -> str | None:
    """`charts.none_timed` as a sentence, where no cell has a time."""
    said = charts.none_timed(cells)
    return f"{said[:1].upper()}{said[1:]}." if said else None


def _none(text: str) -> str:
    return f'<p class="none">{escape(text)}</p>'


def _quoted(tip: str) -> str:
    return escape(tip, quote=True).replace("\n", "&#10;")


# ----------------------------------------------------------------------------------------------------------------------
# Tables


def _table7(data: Loaded) -> str:
    view = table.build(data.runs[-1].id, data.cells, samples=data.samples)
    fixed = len(table.head(view)) - len(view.columns)
    head = _heads(table.head(view))
    body = []
    for row in view.rows:
        values = table.row_values(view, row)
        tds = _row_heads(values[:fixed])
        best_column = row.best_cpu_column()
        for column, text in zip(view.columns, values[fixed:], strict=True):
            tds.append(_table_cell(row.cells.get(column), text, column == best_column, f"tip-{len(body)}-{len(tds)}"))
        body.append(f"<tr>{''.join(tds)}</tr>")
    # why a row stars no thread count (a tie, a disturbed cell), as `dlperf table`'s notes say it
    stars = [line.replace("(above)", "(Warnings, below)") for line in table.star_notes(list(view.rows))]
    lines = [*table.legend(view), *stars, *view.fastest, *table.version_lines(view)]
    legend = "".join(f'<p class="legend">{escape(line)}</p>' for line in lines)
    table_html = _table("table7", TABLE7, f"<tr>{head}</tr>", body)
    return _sources(data) + table_html + legend


def _fleet(campaign: Fleet) -> str:
    """A column group per machine (its fastest CPU thread count, its fastest GPU), the fastest machine's cells marked,
    then per workload which machine trains it fastest."""
    gpu = campaign.has_gpu
    fixed = len(fleet.head(campaign)) - sum(1 + g for g in gpu.values())
    top = "".join(f'<th rowspan="2" scope="col">{escape(h)}</th>' for h in fleet.head(campaign)[:fixed])
    top += "".join(f'<th colspan="{1 + g}" scope="colgroup" class="machine">{escape(m)}</th>' for m, g in gpu.items())
    sub = "".join('<th scope="col">best CPU</th>' + ('<th scope="col">GPU</th>' if g else "") for g in gpu.values())
    body = []
    for row in campaign.rows:
        values, best = fleet.row_values(campaign, row), row.winner()
        shown = fleet.entries(campaign, row)
        tds = _row_heads(values[:fixed])
        tds += [f'<td class="num{" best" * (e is not None and e is best)}">{escape(v)}</td>'
                for e, v in zip(shown, values[fixed:], strict=True)]  # fmt: skip
        body.append(f"<tr>{''.join(tds)}</tr>")
    head = f"<tr>{top}</tr><tr>{sub}</tr>"
    lines = [*fleet.verdicts(campaign), fleet.LEGEND, *campaign.notes()]
    caption = f"The machines of {campaign.name} side by side: a row per workload"
    return _table("fleet", caption, head, body) + "".join(f'<p class="note">{escape(line)}</p>' for line in lines)


def _ids(data: Loaded) -> str:
    return ", ".join(str(r.id) for r in data.runs)


def _sources(data: Loaded) -> str:
    """Which run each workload's cells come from, when the report holds several, and what was left out."""
    if not data.sources:
        return ""
    named = ", ".join(f"{w} from run {r}" for w, r in data.sources.items())
    lines = [f"Each workload's cells come from the latest run that measured it, all from that one run: {named}.",
             *data.notes]  # fmt: skip
    return "".join(f'<p class="note">{escape(line)}</p>' for line in lines)


def _table_cell(cell: CellRecord | None, text: str, is_best: bool, tip_id: str) -> str:
    """A cell of the table; where it has hover text (its median's spread, processes, why a '?'), the same text is its
    description for a screen reader: a hidden element inside it, `tip_id`, that it is described by."""
    if cell is None:
        return '<td class="empty"></td>'
    oom = fit.out_of_memory(cell)  # a batch that did not fit: what it says, not "failed"
    text = fit.OUT_OF_MEMORY if oom else text
    classes = ["num", "oom" if oom else cell.status.value, *(["best"] if is_best else [])]
    attrs = f' class="{" ".join(classes)}" data-key="{escape(cell.key, quote=True)}"'
    tip = charts.tip(cell) if cell.ok and cell.median_s is not None else cell.error
    if not tip:
        return f"<td{attrs}>{escape(text)}</td>"
    attrs += f' data-tip="{_quoted(tip)}" tabindex="0" aria-describedby="{tip_id}"'
    return f'<td{attrs}>{escape(text)}<span id="{tip_id}" hidden>{escape(tip)}</span></td>'


TABLE7 = "Seconds per mini-batch: a row per workload, a column per device and thread count"
# each table's caption: its name in a screen reader's list of tables, its section's heading saying it on screen
CAPTIONS = {
    "pipeline": "Loader settings of {}: a row each", "crossover": "When a GPU pays: a row per batch",
    "predicted": "Each GPU cell's measured step against its predicted step", "fit": "The batches tried",
    "best": "The fastest mode per workload, against fp32", "ddp": "The parallel strategies: a row per cell",
    "paper": "This machine against Shi et al. (2016)", "warnings": "Warnings: a row each",
    "env": "The environment of {}", "env-diff": "Where the environment of {} differs from the latest run's",
}  # fmt: skip


def _html_table(head: list[str], rows: list[list[str]], cls: str, of: str = "") -> str:
    """A plain table, its first column the rows' headers, captioned by its class (`of`: what the caption names);
    every value is escaped here."""
    caption = CAPTIONS[cls].format(of)
    trs = ["<tr>" + "".join(_row_heads(row[:1]) + [f"<td>{escape(v)}</td>" for v in row[1:]]) + "</tr>" for row in rows]
    return _table(cls, caption, f"<tr>{_heads(head)}</tr>", trs)


def _heads(head: list[str]) -> str:
    return "".join(f'<th scope="col">{escape(h)}</th>' for h in head)


def _row_heads(values: list[str]) -> list[str]:
    """A row's naming cells: its headers for a screen reader reading a cell of it."""
    return [f'<th scope="row">{escape(v)}</th>' for v in values]


def _table(cls: str, caption: str, head: str, rows: list[str]) -> str:
    """A table named by its caption (in a screen reader's list of tables; its section's heading says it on screen),
    in a box that scrolls across on its own where the page is narrower than it (a phone, 400% zoom): the page no
    wider than the screen. The script makes a box that overflows a region a keyboard scrolls once it has the focus,
    named by the caption's id (`_caption_ids`); every box a tab stop named twice over was one too many."""
    return (
        f'<div class="wide"><table class="{cls}"><caption class="sr">{escape(caption)}</caption><thead>{head}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _caption_ids(body: str) -> str:
    """Each table's caption given an id of its own, in the page's order: what its box's name refers to."""
    numbered = itertools.count(1)
    return re.sub(r'<caption class="sr">', lambda _: f'<caption class="sr" id="caption-{next(numbered)}">', body)


def _pipeline(groups: list[pipeline.Group], drawn: dict[str, str]) -> str:
    """Per group of loader cells: its chart, its table, the recommendation and the advice."""
    parts = []
    for g in groups:
        notes = "".join(f'<p class="note">{escape(line)}</p>' for line in pipeline.lines(g))
        chart_html = drawn.get(pipeline.chart(g).id, "")
        parts.append(f"<h3>{escape(g.title)}</h3>{chart_html}"
                     + _html_table(list(pipeline.HEAD), pipeline.rows(g), "pipeline", g.title) + notes)  # fmt: skip
    return "".join(parts) + f'<p class="legend">{escape(pipeline.LEGEND)}</p>'


def _crossovers(found: list[crossover.Crossover], drawn: dict[str, str]) -> str:
    """Per `dlperf crossover` run: its figure, its table and its answer."""
    parts = []
    for x in found:
        head, rows = cost.crossover_table(x)  # the crossover's table, a million samples' cost beside each priced GPU
        answer = "".join(f"<p>{escape(line)}</p>" for line in [*x.lines(), *cost.crossover_lines(x)])
        said = "".join(f'<p class="legend">{escape(line)}</p>' for line in crossover.legend(x))  # a busy row's '?'
        parts.append(drawn.get(crossover.chart(x).id, "") + _html_table(head, rows, "crossover") + said + answer)
    return "".join(parts)


def _predicted(found: list[predicted.Row]) -> str:
    """Each GPU cell's measured step beside the step predicted for its GPU before it ran, and the predictor's error."""
    note = f'<p class="legend">{escape(predicted.note(found))}</p>'
    return _html_table(list(predicted.HEAD), [r.values() for r in found], "predicted") + note


def _best_table(data: Loaded) -> str:
    if len({c.mode for c in data.cells}) < 2:
        return ""
    rows = best.build(data.cells, data.samples, {run.id: made_by(run) for run in data.runs})
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in best.notes(rows))
    heading = "<h3>The fastest mode per workload, against fp32</h3>"
    return heading + _html_table(list(best.HEAD), [best.values(r) for r in rows], "best") + notes


def _ddp(data: Loaded) -> str:
    rows = ddp.build(data.cells)
    if not rows and (planned := sum(1 for c in data.cells if c.nproc)):
        return _none(f"No multi-process cell timed: {planned} planned, none measured ok (the run's table says "
                     "why).")  # fmt: skip
    if not rows:
        return _none("No multi-process cell in this run (dlperf run --nproc 1,2 --parallel ddp,fsdp,pipeline "
                     "measures some).")  # fmt: skip
    legend = (
        '<p class="legend">strong scaling: speed-up T1 / TN and efficiency T1 / (N x TN) against the one-process cell '
        "of the same strategy (else ddp:1) and total batch; weak: throughput N x T1 / TN and efficiency T1 / TN. vs "
        "DDP: the DDP step on the same processes over this one (above 1: faster than DDP). params/rank, peak/rank: "
        "the largest rank's parameters (a shard under FSDP, a stage in a pipeline) and its peak during a step. "
        "bubble: the share of a pipeline step its busiest stage idles, measured, and (N-1)/(M+N-1) for N stages and "
        "M micro-batches. All-reduce: DDP's gradient buckets all-reduced alone; exposed communication: the step "
        "minus the same rank's compute alone (DDP: under no_sync), both timed in alternated pairs after the timed "
        "steps, and its share of that step, shown after 'of' (not the median step of the step column).</p>"
    )
    return _html_table(list(ddp.HEAD), [ddp.values(r) for r in rows], "ddp") + legend


def _paper(rows: list[paper.Row], notes: list[str], chart_html: str) -> str:
    cite = f'<p class="citation">Reference: {escape(paper.CITATION)}. Its figures ship with dlperf.</p>'
    if not rows:
        why = " ".join(notes) or "This run holds no fp32 cell of the paper's seven networks."
        return _none(why) + cite

    explain = "".join(f'<p class="legend">{escape(line)}</p>' for line in paper.legend(rows))
    extra = "".join(f'<p class="note">{escape(n)}</p>' for n in notes)
    return chart_html + _html_table(list(paper.HEAD), [paper.values(r) for r in rows], "paper") + explain + extra + cite


def _profiles(data: Loaded, at: Path | None) -> str:
    """Per profiled cell: its verdict and the figure behind it, the modes to try, what profiling cost, its trace."""
    head = ["cell", "timed step", "verdict", "the figure", "try", "profiler overhead", "trace"]
    rows = []
    for cell in (c for c in data.cells if c.key in data.profiles):
        record, v = data.profiles[cell.key], data.verdicts.get(cell.key)
        if not record.ok:
            what, figure, tries = f"profile {record.status.value}", record.error or "", ""
        elif v is None:
            what, figure, tries = "none", "the profile has no time to share out", ""
        else:
            what, figure, tries = v.label, v.figure, "; ".join([*v.tries(), *([v.advice] if v.advice else [])])
        overhead = f"{record.overhead:.2f}x" if record.overhead else "-"
        elsewhere = f", profiled in run {record.run_id}" if record.run_id != cell.run_id else ""
        texts = [f"{cell.workload} {cell.column} {cell.framework} {cell.mode}{elsewhere}", seconds(cell.median_s),
                 what, figure, tries or "-", overhead]  # fmt: skip
        trace = _trace_link(record.figures.trace if record.ok else None, at)
        rows.append("<tr>" + "".join(_row_heads(texts[:1]) + [f"<td>{escape(t)}</td>" for t in texts[1:]])
                    + f"<td>{trace}</td></tr>")  # fmt: skip
    th = f"<tr>{_heads(head)}</tr>"
    legend = (
        "<p class=\"legend\">Each bar is one profiled cell's timed step, 100% long, by category: the profiled step's "
        "categories with the profiler's own time taken out of host time (a profiled step faster than the timed one "
        "scaled up to it). The verdict reads those shares with the "
        "TensorFlow profiler's thresholds (input and transfer from 5%, highly from 20%; launch/dispatch from 3%, "
        "highly from 15%), then compute against memory. Profiler overhead: the profiled step over the timed median. "
        "A trace is a gzip Chrome/Perfetto JSON file: open it in https://ui.perfetto.dev or chrome://tracing.</p>"
    )
    return _table("profiles", "Where the time goes: a row per profiled cell", th, rows) + legend


def _trace_link(trace: str | None, at: Path | None) -> str:
    """A link to a trace file: relative to the report's place when there is one (the two move together), else an
    absolute file URL; a trace that is no longer there is named, not linked."""
    if not trace:
        return "-"
    path = Path(trace).absolute()
    if not path.exists():
        return f"{escape(str(path))} (not found)"
    href = path.as_uri()
    if at is not None:
        try:
            href = quote(Path(os.path.relpath(path, Path(at).absolute().parent)).as_posix())
        except ValueError:  # another drive (Windows): no relative path
            pass
    return f'<a class="trace" href="{escape(href, quote=True)}" title="{escape(str(path))}">{escape(path.name)}</a>'


def _fit(found: list[fit.Search]) -> str:
    """Per fit search: its answer, the limit, then every try in the order made."""
    parts = []
    for search in found:
        lines = f'<p class="note">{escape(search.answer())}</p><p class="legend">{escape(search.limit_line())}</p>'
        parts.append(lines + _html_table(fit.HEAD, search.rows(), "fit"))
    note = ("peak memory: live tensors at the step's peak; the limit counts the whole process's data. A batch that ran "
            "out of memory is a try of the search, its answer's evidence, not a failure.")  # fmt: skip
    return "".join(parts) + f'<p class="legend">{escape(note)}</p>'


def _noted(chart: str | None, data: Loaded) -> str | None:
    """The utilization chart with, under it, the peaks of a busy machine it was held against (none without it)."""
    return chart and chart + "".join(f'<p class="note">{escape(n)}</p>' for n in data.busy_peaks)


def _warnings(data: Loaded, paper_notes: list[str], tries: set[str] = frozenset()) -> str:
    """`tries`: the keys of fit tries that ran out of memory, shown as tries in their own section."""
    cells = [c for c in data.cells if c.key not in tries]
    rows = [[label, kind, text] for label, kind, text in table.cell_notes(cells)]
    rows += [["", "parameters", n] for n in table.parameter_notes(data.cells)]
    rows += [["", "peak", n] for n in data.busy_peaks]
    pending = [c for c in data.cells if c.status is Status.PENDING]
    for run in data.runs:
        if (state := data.states.get(run.id)) is not None and state.unfinished:
            rows.append([f"run {run.id}", "incomplete", unfinished_text(data, state)])
            rows += [[table.cell_label(c), "partial", f"measured so far in {state.left.partly[c.key]} of its "
                      f"{state.left.repeats} processes (--repeats {state.left.repeats}): its figures are not final"]
                     for c in cells if c.run_id == run.id and c.key in state.left.partly]  # fmt: skip
    if pending:
        rows.append(
            ["", "pending", f"{plural(len(pending), 'cell')} {'was' if len(pending) == 1 else 'were'} never measured"]
        )
    if not rows:
        return _none("None: no noisy, oversubscribed, failed or skipped cell.")
    kinds = {r[1] for r in rows}
    summary = ", ".join(f"{sum(r[1] == k for r in rows)} {k}" for k in sorted(kinds))
    return f"<p>{escape(summary)}</p>" + _html_table(["cell", "kind", "message"], rows, "warnings")


def unfinished_text(data: Loaded, state) -> str:
    """An unfinished run as the table says it (`store/state.py`), and how it goes on: nothing to do while a process
    measures it; merged while it ran, merging again; a search's, running it again; another machine's, --resume there;
    else --resume."""
    if state.holder is not None:
        return state.summary()
    if state.state == "copied":
        return f"{state.summary()}; merging its file again brings this copy up to date"
    if said := ray_resume(state, data.continued.get(state.run.id), data.db):  # a Ray node's: over the cluster
        return said
    if search := data.searches.get(state.run.id):
        return f"{state.summary()}; it is a `dlperf {search}` search's run: run the search again (it starts over)"
    if elsewhere := fleet.measured_elsewhere(state.run, capture()):  # merged in: it goes on on its own machine
        return (f"{state.summary()}; it {elsewhere.removeprefix(f'run {state.run.id} ')}: continue it there with "
                "`dlperf run --resume` and this store")  # fmt: skip
    if edited := changed_sources(state.run.env.get("sources") or {}):  # --resume refuses it: start a new run
        return f"{state.summary()}; its model: {'; '.join(edited)} since it began: start a new run"
    return f"{state.summary()}; continue it with {resume_command(data.db)}"


def _environment(data: Loaded) -> str:
    """The latest run's environment in full; each earlier run's command, and only the settings where it differs."""
    last = data.runs[-1]
    latest = dict(flatten(last.env))
    settings = _html_table(["setting", "value"], [[k, v] for k, v in latest.items()], "env", f"run {last.id}")
    parts = [_run_heading(last) + settings]
    for run in reversed(data.runs[:-1]):
        own = dict(flatten(run.env))
        differ = [[k, own.get(k, "-"), latest.get(k, "-")] for k in dict.fromkeys([*own, *latest])
                  if own.get(k, "-") != latest.get(k, "-")]  # fmt: skip
        parts.append(_run_heading(run) + (
            _html_table(["setting", f"run {run.id}", f"run {last.id}"], differ, "env-diff", f"run {run.id}") if differ
            else _none(f"The same environment as run {last.id}.")))  # fmt: skip
    return "".join(parts)


def _run_heading(run) -> str:
    title = f"Run {run.id}: started {run.started_at}, {run.status}"
    if run.origin and not str(run.origin.db).startswith(fleet.RAY_ORIGIN):  # copied in by `dlperf merge`
        title += f"; merged from run {run.origin.run_id} of {run.origin.db}"
    if node := fleet.ray_node(run):  # a node's run of `dlperf run --ray`: streamed to the driver, not merged
        title += f"; measured by Ray node {node[:8]} (dlperf run --ray)"
    return f"<h3>{escape(title)}</h3><p><code>{escape(' '.join(run.argv))}</code></p>"


def flatten(env: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Nested environment as (dotted key, text) pairs; CPU flag lists are counted, not listed."""
    out = []
    for key, value in env.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out += flatten(value, f"{name}.")
        elif key == "flags" and isinstance(value, list):
            out.append((name, f"{len(value)} flags"))
        elif isinstance(value, list):
            out.append((name, ", ".join(str(v) if not isinstance(v, dict) else _inline(v) for v in value) or "-"))
        elif key.endswith("_bytes") and isinstance(value, int):
            out.append((name, nbytes(value)))
        else:
            out.append((name, "-" if value is None else str(value)))
    return out


def _inline(d: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in d.items())


# ----------------------------------------------------------------------------------------------------------------------
# The page


def _node(run) -> str:
    """ " (Ray node 3959d55b)" for a node's run of `dlperf run --ray`: two nodes of one host are two machines."""
    node = fleet.ray_node(run)
    return f" (Ray node {node[:8]})" if node else ""


def _machine(env: dict) -> str:
    cpu = (env.get("cpu") or {}).get("model") or "unknown CPU"
    cores = (env.get("cores") or {}).get("cores")
    gpus = env.get("gpus") or []
    gpu = f", {', '.join(g.get('name', '?') for g in gpus)}" if gpus else ", no GPU"
    host = f"{env['hostname']} · " if env.get("hostname") else ""  # runs merged from two hosts of one CPU model
    cores_said = plural(cores, "core") if isinstance(cores, int) else f"{count(cores)} cores"
    return f"{host}{cpu}, {cores_said}, {nbytes(env.get('memory_total_bytes'))}{gpu}"


def _page(data: Loaded, sections: list[Section], n_charts: int, out: int = 0, campaign: Fleet | None = None) -> str:
    last = data.runs[-1]
    ids = _ids(data)
    ok = sum(c.ok for c in data.cells)
    timed = sorted({c.median_s for c in data.cells if c.ok and c.median_s})
    span = f"; medians from {seconds(timed[0])} to {seconds(timed[-1])}" if len(timed) > 1 else ""
    span += f"; the median {seconds(timed[0])}" if len(timed) == 1 else ""
    span += f"; {plural(out, 'batch', 'es')} tried by dlperf fit ran out of memory, as its search's do" if out else ""
    summary = (
        f"Run{'s' if len(data.runs) > 1 else ''} {ids} · {_statuses(data)} · {_started(data)} · "
        f"{_machine(last.env)}{_node(last)} · {ok} of {plural(len(data.cells), 'cell')} measured{span} · "
        f"{plural(n_charts, 'chart')}"
    )
    if campaign is not None:  # a page of two machines named one, its latest run's, in its title and header
        machines = plural(len(campaign.machines), "machine")
        summary = f"{campaign.name[:1].upper()}{campaign.name[1:]}: {machines} side by side, then {summary}"
    title = f"{campaign.name} ({plural(len(campaign.machines), 'machine')})" if campaign else f"run {ids}"
    nav = "".join(f'<a href="#{s.id}">{escape(s.title)}</a>' for s in sections)
    body = _caption_ids("".join(f'<section id="{s.id}"><h2>{escape(s.title)}</h2>{s.body}</section>' for s in sections))
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="dlperf {escape(VERSION)}">
<title>dlperf report: {escape(title)}</title>
<style>{CSS}</style>
</head>
<body>
<header><h1>dlperf report</h1><p class="summary">{escape(summary)}</p><nav>{nav}</nav></header>
<main>{body}</main>
<footer>Generated by dlperf {escape(VERSION)} at {generated} from {escape(data.db)}. Hover over a chart's point or a
table cell, or move the keyboard's focus to it (Tab), for its median, interquartile range, number of steps and
processes, run and doubts; a screen reader reads the same text as its name or description.</footer>
<div id="tip" role="tooltip" hidden></div>
<script>{SCRIPT}</script>
</body>
</html>
"""


def _statuses(data: Loaded) -> str:
    """The runs' status: one run's, or each status with its runs ("complete (runs 1, 2), interrupted (run 3)"): a
    report of five runs said its latest's "complete" where one was interrupted."""
    by: dict[str, list[int]] = {}
    for run in data.runs:
        by.setdefault(str(run.status), []).append(run.id)
    if len(by) == 1:
        return next(iter(by))
    return ", ".join(f"{status} ({runs_named('run', ids)})" for status, ids in by.items())


def _started(data: Loaded) -> str:
    """When the runs started: one run's start, or the first's and the latest's (the latest's alone read as all's)."""
    starts = sorted(r.started_at for r in data.runs)
    return f"started {starts[0]}" if len(starts) == 1 else f"started {starts[0]} to {starts[-1]}"
