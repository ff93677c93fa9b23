"""`dlperf optimize WORKLOAD`: the fastest training mode for one workload on one device (`optimize.py` searches),
ranked, with the recommendation and its recipe."""

from __future__ import annotations

import argparse
import json

from dlperf.commands.common import LOG_WIDTH, add_format, db_path, duration, real, warn_if_measured, whole
from dlperf.commands.common import console as wide
from dlperf.commands.run import add_data_flags, add_timer_flags, again, printed, see_it, stored_cells, timer
from dlperf.vocab import ExitCode, Status

HELP = "find the fastest training mode for a workload"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from dlperf.defaults import MAX_SECONDS, OPTIMIZE_BUDGET_MIN, OPTIMIZE_TIMING

    p.add_argument("workload", help="a built-in name or path/file.py:factory (at another batch: NAME@bN)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps (default: cpu)")
    p.add_argument("--threads", type=whole("--threads", 1), help="CPU threads (default: every usable core)")
    p.add_argument(
        "--budget",
        type=duration("--budget", 60.0, most_s=MAX_SECONDS),
        default=None,
        help=f"minutes the search may take, or a duration with its unit (90s, 2h), the baseline's profile included; "
        "a dimension that does not fit is tried "
        "in one process per mode when that fits, else skipped, and said so; at least --repeats times --min-time, "
        f"what the fp32 baseline is timed; exit 1 when it measured nothing (default: {OPTIMIZE_BUDGET_MIN:g})",
    )
    p.add_argument(
        "--repeats", type=whole("--repeats", 1), default=2, help="fresh processes per candidate mode (default: 2)"
    )
    p.add_argument("--timeout", type=real("--timeout"), default=900.0, help="seconds per cell process (default: 900)")
    p.add_argument(
        "--compile-timeout",
        type=real("--compile-timeout"),
        default=600.0,
        help="seconds a compiled mode may compile (default: 600)",
    )
    p.add_argument(
        "--order",
        choices=("verdict", "fixed"),
        default="verdict",
        help="verdict: profile fp32 once and search first the dimensions that address what bounds its step; "
        "fixed: precision, memory format, optimizer implementation, allocator, compilation, checkpointing (default: "
        "verdict)",
    )
    add_timer_flags(p, **OPTIMIZE_TIMING)
    add_data_flags(p)  # with real data, the loader is searched for the best mode (`optimize_loader.py`)
    add_format(p, "text", "json")


def run(args) -> int:
    from dlperf import optimize
    from dlperf.defaults import OPTIMIZE_BUDGET_MIN
    from dlperf.errors import UsageError
    from dlperf.loaders import parse_loaders
    from dlperf.spec import parse_devices, parse_one_workload

    workload = parse_one_workload(args.workload)
    devices = parse_devices(args.device, "--device")
    if len(devices) > 1:  # a search of one device's modes: `run --devices` measures several
        raise UsageError(f"--device {args.device!r}: optimize searches one device's modes; give one (dlperf run "
                         f"--devices {','.join(devices)} measures each)")  # fmt: skip
    [device] = devices
    opts = optimize.Options(
        workload=workload,
        device=device,
        threads=args.threads,
        budget_s=(OPTIMIZE_BUDGET_MIN if args.budget is None else args.budget) * 60,
        budget_default=args.budget is None,
        repeats=args.repeats,
        timer=timer(args),
        timeout=args.timeout,
        compile_timeout=args.compile_timeout,
        order=args.order,
        data=args.data,
        loaders=None if args.loaders is None else parse_loaders(args.loaders),
        flags=True,  # errors and notes name the flags
    )
    db = db_path(args)
    warn_if_measured(db)
    search = optimize.optimize(opts, db)
    show = (lambda: print(render_json(search))) if args.format == "json" else (lambda: print_text(search))
    kept = stored_cells(db, search.run_id) if search.exit_code == ExitCode.INTERRUPTED else ""  # counted: none, maybe
    stopped = (kept, f"To search again, run it again (it starts over): {again()} (dlperf run --resume would not go on "
               "with the search)")  # fmt: skip
    finished = (f"the search is complete and stored in run {search.run_id}", see_it(db, search.run_id))
    return printed(show, search.exit_code, finished=finished, interrupted=stopped)


def render_json(search) -> str:
    return json.dumps(search.to_json(), indent=2)


def render_rich(search):
    from rich.table import Table

    from dlperf.measure.units import plural
    from dlperf.report.format import markup, nbytes, table_seconds

    threads = plural(search.threads, "thread")
    table = Table(title=f"optimize {markup(search.workload)} on {search.device}, {threads} (run {search.run_id})")
    for name in ("mode", "step", "speed-up [95% CI]", "peak memory", "utilization", "loss check", "payback"):
        table.add_column(name, justify="left" if name in ("mode", "loss check") else "right", no_wrap=name == "mode")
    best = search.best.mode if search.best else None
    for c in search.results:
        if c.median_s is None:
            status, why = unmeasured(c, interrupted=search.interrupted is not None)
            table.add_row(markup(c.mode), f"[dim]{markup(status)}[/]", "", "", "", markup(why), "")
            continue
        speed = _speed_text(c)
        memory = f"{nbytes(c.peak_mem_bytes)} {MEMORY_MARKS.get(c.peak_mem_kind, '')}" if c.peak_mem_bytes else ""
        util = f"{100 * c.utilization:.1f}%" if c.utilization is not None else ""
        loss = loss_text(c)
        payback = plural(c.payback_steps, "step") if c.payback_steps is not None else ("never" if c.compile_s else "")
        mode = f"[bold green]{markup(c.mode)}[/]" if c.mode == best else markup(c.mode)
        table.add_row(mode, table_seconds(c.median_s), speed, memory, util, markup(loss), payback)
    return table


NO_CHECK = "not checked: its first process recorded no check"  # the worker says why when it skips one


def loss_text(c) -> str:
    """A candidate's loss check column: ok (or why there was nothing to check), why not checked, or FAILED: why."""
    if c.loss_ok is None:
        return c.loss_reason or NO_CHECK
    return (c.loss_reason or "ok") if c.loss_ok else f"FAILED: {c.loss_reason}"


def unmeasured(c, interrupted: bool = False) -> tuple[str, str]:
    """A candidate without a time: what its step column says, and why (in its loss check's). One whose process the
    search's budget stopped is "stopped", whatever steps it timed: the time of a cut measurement is no result. In a
    search cut short by an interrupt, a pending one is "interrupted": its process may have been under way."""
    from dlperf.runner.sweep import Deadline

    if Deadline.REASON in (c.error or ""):
        return "stopped", "stopped: --budget ran out"
    if c.status == Status.PENDING:
        return ("interrupted", "not measured: interrupted") if interrupted else ("not started", "")
    return c.status, c.error or ""


def _speed_text(c) -> str:
    from dlperf.optimize import BASELINE

    if c.mode == BASELINE:
        return "1.00x (baseline)"
    if c.speedup is None:
        return ""
    from dlperf.measure.units import times

    interval = f" [{times(c.ci_low)[:-1]}-{times(c.ci_high)[:-1]}]" if c.ci_low is not None else ""
    return f"{times(c.speedup)}{interval}"


def few_steps(best, baseline) -> str:
    """ " (rests on 3 steps of bf16 and 4 of fp32)" when either side has fewer than FEW_SAMPLES timed steps."""
    from dlperf.measure.stats import few
    from dlperf.measure.units import plural

    if not few(min(best.samples, baseline.samples)):
        return ""
    return f" (rests on {plural(best.samples, 'step')} of {best.mode} and {baseline.samples} of {baseline.mode})"


def _cells_text(search) -> str:
    if not search.cells_to_best:
        return f"{search.cells} candidate cells measured"
    return f"the best mode was measured after {search.cells_to_best} of {search.cells} candidate cells"


def searched(search) -> str:
    """The rounds searched, in order; an interrupted search's, those it began and those it did not reach."""
    if search.interrupted is None:
        return f"Searched ({search.order} order): {', '.join(search.groups)}; {_cells_text(search)}"
    if not search.reached:
        return f"Not searched: interrupted during {search.interrupted}, before the first round"
    left = [g for g in search.groups if g not in search.reached]
    not_reached = f"; not reached: {', '.join(left)}" if left else ""
    return (f"Searched ({search.order} order) until interrupted during {search.interrupted}: "
            f"{', '.join(search.reached)}{not_reached}; {_cells_text(search)}")  # fmt: skip


def loader_lines(loader, recommended: str | None = None) -> list[str]:
    """The loader search (`--data`): each setting tried, in order, and the one chosen as the call to write; said when
    it was searched for another mode than the one `recommended` (the rounds' best when they ended, where the final
    ranking, against every baseline process, chose another)."""
    from dlperf.optimize_loader import dataloader_call
    from dlperf.report.format import seconds

    if loader is None or not loader.trials:  # none tried: the notes say why
        return []
    # mean steps: a long run's, each wait for data paid (a bursty loader's median leaves its waits out)
    lines = [f"Loaders tried for {loader.mode} (mean steps; synthetic {seconds(loader.synthetic_s)}):"]
    for t in loader.trials:
        if t.median_s is None:
            lines.append(f"    {t.setting}: {t.status}: {t.error}")
            continue
        wait = f"data wait {100 * t.wait_share:.1f}%" if t.wait_share is not None else "data wait not measured"
        share = f", {100 * t.of_synthetic:.0f}% of the synthetic throughput" if t.of_synthetic else ""
        mark = ": enough" if t.enough else (f" (input-bound: {t.verdict})" if t.verdict else "")
        step = f"{seconds(t.mean_s)} a mean step (median {seconds(t.median_s)})"
        lines.append(f"    {t.setting}: {step}, {wait}{share}{mark}")
    if c := loader.chosen:
        lines.append(f"Loader: {c.setting} ({chosen_said(loader)}): {dataloader_call(c.setting)}")
    elif failed := loader.unread:
        lines.append(f"Loader: none: every setting tried failed, the data was not read ({failed.setting}: "
                     f"{failed.error}); the modes were measured on synthetic data")  # fmt: skip
    if recommended and recommended != loader.mode:
        lines.append(f"    (searched for {loader.mode}, the best mode when the rounds ended; {recommended}, "
                     "recommended below against every fp32 process, was not measured with a loader)")  # fmt: skip
    return lines


def chosen_said(loader) -> str:
    """Why the loader chosen: enough, or the fastest measured; or, where a larger setting stepped faster but not
    measurably so (`report.data.recommend`), that one named: 'the best measured' read beside w2+pf4+persist's 22.4 ms
    step for the w2+persist taken at 25.5 ms. On their mean steps, as the recommendation compares them."""
    from dlperf.optimize_loader import best_of
    from dlperf.report.format import seconds

    c, fastest = loader.chosen, best_of(loader.trials)
    if c.enough or fastest is None or fastest is c or not fastest.mean_s < c.mean_s:
        return "enough" if c.enough else "the best measured, not enough"
    return (f"not enough; {fastest.setting} stepped faster, {seconds(fastest.mean_s)} against "
            f"{seconds(c.mean_s)} a mean step, but not measurably so, and {c.setting} is the smaller")  # fmt: skip


# Peak memory kinds, marked in the table and explained under it: they are different quantities.
MEMORY_MARKS = {"live_tensors": "", "cuda_allocator": "", "xla_buffers": "(xla)", "process_rss": "(rss)"}
STEP_LEGEND = (
    "step: the median training step in seconds (under 0.1 s in ms or µs); speed-up: fp32 eager's median step over the "
    "mode's, with its 95% interval"
)
MEMORY_LEGEND = (
    "peak memory: live tensor bytes of one step (CUDA: the allocator's peak); (rss) = the process's resident-set peak "
    "during one step, for compiled steps, which cannot be traced tensor by tensor (it includes the runtime itself)"
)


def disturbed_note(search) -> list[str]:
    """The candidates whose timing something disturbed (other processes' load, steal, a warm-up that did not settle):
    each speed-up sets two cells timed apart, so a load that changed between them moves it (fp32 at 8.9 ms under
    load, then 4.0 ms once the load ended; a mode timed in the quiet read 2.86x where it is 1.9x)."""
    each = {c.mode: c for c in [search.baseline, *search.results]}  # the baseline may be among the results
    said = [f"{c.mode} ({', '.join(c.disturbed)})" for c in each.values() if c.disturbed]
    if not said:
        return []
    return [f"disturbed while timed: {'; '.join(said)}: a speed-up between cells timed under different loads reads "
            "high or low; optimize again with the machine quieter"]  # fmt: skip


def print_text(search) -> None:

    from dlperf.optimize_loader import recipe
    from dlperf.report.format import terminal

    console = wide(at_least=LOG_WIDTH)
    console.print(render_rich(search))
    console.print(STEP_LEGEND, highlight=False, markup=False)
    console.print(MEMORY_LEGEND, highlight=False, markup=False)
    for note in [*search.notes, *disturbed_note(search)]:
        console.print(f"  note: {terminal(note)}", highlight=False, markup=False)
    console.print(searched(search), highlight=False, markup=False)
    for line in loader_lines(search.loader, (search.best or search.baseline).mode):
        console.print(terminal(line), highlight=False, markup=False)
    recommended = "Recommended so far (interrupted)" if search.interrupted else "Recommended"
    if search.best is None:
        verdict = "keep fp32 eager" if search.cells else "not searched (no candidate was measured: see the notes)"
        if search.baseline.status != Status.OK:
            verdict = "none: the fp32 baseline was not measured (see the notes)"
        elif search.baseline.loss_ok is False:
            verdict = "none: fp32's loss was not finite, the model does not train as it stands (see the notes)"
        if search.interrupted and not search.cells:
            verdict = "none: interrupted before a candidate was measured"
        console.print(f"{recommended}: {verdict}.", highlight=False, markup=False)
        return
    b = search.best
    interval = f" [{b.ci_low:.2f}-{b.ci_high:.2f}]" if b.ci_low is not None else ""  # none on medians of few steps
    console.print(
        f"{recommended}: {b.mode}, {b.speedup:.2f}x faster than fp32 eager{interval}{few_steps(b, search.baseline)}:",
        highlight=False,
        markup=False,
    )
    for line in recipe(
        b.mode, search.device, search.workload, data_dir=search.data_dir, named=search.named, threads=search.threads
    ):
        console.print(f"    {terminal(line)}", highlight=False, markup=False)
