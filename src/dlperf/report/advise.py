"""`dlperf advise`'s answer on one screen, and as JSON: each figure labelled measured (this CPU, from the store) or
predicted (the GPUs, `predict/`), with its uncertainty. The ranking's words are `report/cost.py`'s."""

from __future__ import annotations

import shlex

from dlperf.measure.units import plural
from dlperf.report.charts import DOUBT_MARK, doubtful
from dlperf.report.cost import cheapest_lines, fastest_line, left_out_groups, span, usd, wall
from dlperf.report.data import ENOUGH_RULE
from dlperf.report.format import interval, seconds

SHOWN = 3  # the GPUs named in the crossover's line, the fastest first
CROSSOVER_HOW = "your batch"  # the crossover measured at the user's batch only (`dlperf crossover` goes batch by batch)
NO_ROOM = (  # where this CPU's memory cannot hold the step (`advise.no_room_here`)
    "not measured: the step does not fit this machine's memory (On this CPU, above): at this batch only a GPU it "
    "fits can train it"
)


def lines(a) -> list[str]:
    x = a.costs
    out = [_cpu_line(a)]
    fastest, fed = x.fastest(), computing(a)
    versus = _versus(fastest, fed, a.pipeline, x.cpu, _mark(a)) if fastest else ""
    out.append(fastest_line("Fastest GPU (predicted)", x) + versus)
    out += cheapest_lines(x, "Cheapest", " GPU", " (predicted)")
    if x.left_out:
        out.append("Does not fit (predicted): " + "; ".join(left_out_groups(x)))
    else:
        out.append(f"Does not fit (predicted): none: the step at batch {x.batch} fits every GPU asked, every mode")
    said = NO_ROOM if a.cpu_why else _crossover(a.crossover, a.asked or a.workload, fed, a.pipeline, unfit(a),
                                                  _mark(a))  # fmt: skip
    out.append(f"Crossover (CPU measured, GPUs predicted): {said}")
    if a.feed:
        out.append(f"Input pipeline (measured here, GPUs predicted): {_fed(a.feed, x)}")
    if a.uncertainty:
        from dlperf.predict.roofline import measured_gpu

        out.append(f"GPU figures' uncertainty: {a.uncertainty}; {measured_gpu()}")
    if a.doubt and a.costs.cpu is not None:  # as crossover's legend says its `?`, the notes saying how
        out.append(f"{DOUBT_MARK} = this CPU's step, and each figure set against it, from {a.doubt} (see the notes)")
    return out


def _mark(a) -> str:
    """`?` beside this CPU's step and each figure set against it, where the step is not one to rely on (`a.doubt`)."""
    return DOUBT_MARK if a.doubt else ""


def _cpu_line(a) -> str:
    """This CPU's time for the work, in `predict --cost`'s words (a duration a person reads), at the settings it was
    measured at: the mode search's best, or the thread search's step where the search gave nothing (said in the
    notes)."""
    c, x, p = a.costs.cpu, a.costs, a.pipeline
    if c is None:
        return f"On this CPU: {a.cpu_why or a.unread or 'not measured (see the notes)'}"
    work = "one epoch" if x.what.full.startswith("one epoch: ") else x.what.full
    ci = f", 95% interval of the step {interval(*a.cpu_ci)}" if a.cpu_ci else ""
    how = "at its best settings" if a.searched else "at its best thread count with no mode searched"
    loader, on = (f", loader {p.setting}", " on your data, waiting for it included") if p else ("", "")
    on = " on synthetic data: no loader setting was measured (see the notes)" if a.data and not p else on
    m = _mark(a)
    said = (f"On this CPU (measured): {wall(c.time_s)}{m} for {work} {how} ({plural(c.threads, 'thread')}, {c.mode}"
            f"{loader}; {seconds(c.step_s)}{m} a step at batch {c.batch}{on}{ci}; {c.kwh:.3g} kWh{m} = "
            f"{usd(c.energy_cost)}{m} at {c.watts:g} W, an assumption)")  # fmt: skip
    if a.threads_cut:  # `--budget 10s`: 2 threads alone measured, 5.94 ms, where 1 thread takes 0.19 ms
        cut = ", ".join(map(str, a.threads_cut))
        said += (f"; {plural(len(a.threads_cut), 'thread count')} ({cut}) not measured: the budget ran out, and this "
                 "CPU's step may be faster there (raise --budget)")  # fmt: skip
    return f"{said}; {held(p)}" if p else said


def held(p) -> str:
    """Whether the loader holds this CPU's step back, by how much (its wait for data, the input-bound verdict of
    `dlperf table`'s pipeline view; its samples/s against the same step on synthetic data), and the setting to use."""
    from dlperf.loaders import input_bound
    from dlperf.report.data import percent

    said = []
    if p.wait_share is not None:
        verdict = input_bound(p.wait_share)
        said.append(f"it waits {percent(p.wait_share)} of its time for data"
                    + (f" (input bound: {verdict})" if verdict else ""))  # fmt: skip
    if p.of_synthetic:
        said.append(f"runs at {percent(p.of_synthetic)} of the samples/s it takes on synthetic data "
                    f"({seconds(p.synthetic_s)} a step)")  # fmt: skip
    figures = f": {' and '.join(said)}" if said else ""
    if p.enough:
        return f"the loader keeps up{figures}; the setting to use: {p.setting} ({p.why}; enough: {p.enough})"
    return (f"the loader holds the step back{figures}; the setting to use: {p.setting} ({p.why}), not enough "
            f"(enough: {ENOUGH_RULE}); --loaders measures more settings")  # fmt: skip


def computing(a):
    """This CPU as the GPUs are predicted, fed as fast as it computes: with --data, the same mode's step on synthetic
    data (`Pipeline.synthetic_s`) for the same work, where the CPU line's is the loader's (a GPU's predicted step
    waits for no data: set against a loader-bound step, a GPU 'paid' where more cores to load on would have); else
    the CPU line's own."""
    import dataclasses

    c, p = a.costs.cpu, a.pipeline
    if c is None or p is None or not p.synthetic_s:
        return c
    return dataclasses.replace(c, step_s=p.synthetic_s, time_s=c.time_s * p.synthetic_s / c.step_s)


def price_note(x) -> str | None:
    """Where the dollars of the GPUs picked (fastest, cheapest, cheapest within the deadline) come from: each one's
    price a GPU-hour, the day it was read, the region, and a row with one source or the user's own said so; and the
    GPUs that fit but have no price, which the cost cannot rank (`predict --cost` names them too)."""
    picks = [x.fastest(), x.cheapest(), x.cheapest(x.deadline_s) if x.deadline_s else None]
    said = []
    for p in dict.fromkeys(r.price for r in picks if r is not None and r.price is not None):
        how = "your --prices" if p.user else ("one source" if p.one_source else "")
        when = ", ".join(w for w in (f"read {p.date}" if p.date else "no date given", p.region, how) if w)
        said.append(f"{p.gpu} {span((p.low, p.high))} ({when})")
    unpriced = list(dict.fromkeys(r.gpu for r in x.rows if r.price is None))
    none = (f"no price for {', '.join(unpriced)}: predicted, but not ranked by cost (--prices FILE.csv gives "
            "one)") if unpriced else ""  # fmt: skip
    if not said:
        return f"prices: {none}" if none else None
    return (f"prices: on-demand US dollars per GPU-hour, the lowest and highest seen: {'; '.join(said)}; each "
            "price's sources are in src/dlperf/data/gpu_prices.csv (--prices FILE.csv gives yours)"
            + (f"; {none}" if none else ""))  # fmt: skip


def _fed(feed, x) -> str:
    """How fast one loading process prepares batches here, and about how many the fastest and the cheapest GPU need
    to be fed at their predicted rates."""
    fastest, cheapest = x.fastest(), x.cheapest()
    same = fastest and cheapest and (fastest.gpu, fastest.mode) == (cheapest.gpu, cheapest.mode)
    picks = [("the fastest and cheapest GPU" if same else "the fastest GPU", fastest)] if fastest else []
    picks += [("the cheapest", cheapest)] if cheapest and not same else []
    needs = [f"{label}, {r.gpu} ({r.mode}, {r.samples_per_s:,.0f} samples/s), needs {_processes(feed, r)}"
             for label, r in picks]  # fmt: skip
    said = f"; fed at its predicted rate, {'; '.join(needs)}" if needs else ""
    alone = f"{feed.setting}: {feed.samples_per_s:,.0f} samples/s, the loader alone"
    return (f"one loading process prepares {feed.per_process:,.0f} samples/s on this CPU ({alone}){said}: with "
            "fewer, a GPU waits for data. How many a rented machine can run is its cores' and disks' doing: measure "
            "there with dlperf run --data DIR --loaders w4,w8,...")  # fmt: skip


def _processes(feed, r) -> str:
    n = feed.processes_for(r.samples_per_s)
    return "one loading process (w0 loads in the training process)" if n == 1 else f"about {n} loading processes"


def _versus(r, cpu, pipeline=None, loaded=None, mark: str = "") -> str:
    """How much faster the GPU `r` is predicted than this CPU (`cpu`, fed: `computing`); with --data, against the
    CPU's step on synthetic data, and against its step with its loader (`loaded`, the CPU line's) beside it. `mark`:
    `?` after each ratio, where the CPU's step is not one to rely on."""
    if cpu is None or not r.time_s:
        return ""
    said = _times(cpu.time_s / r.time_s, mark)
    if pipeline is None or loaded is None or cpu is loaded:
        return f", {said} this CPU"
    with_loader = _times(loaded.time_s / r.time_s, mark)
    return (f", {said} this CPU on synthetic data, each fed as fast as it computes ({with_loader} this CPU with its "
            f"loader {pipeline.setting}, above)")  # fmt: skip


def _times(ratio: float, mark: str = "") -> str:
    return f"{1 / ratio:.1f}{mark} times slower than" if ratio < 1 else f"{ratio:.1f}{mark} times faster than"


def unfit(a) -> set[str]:
    """The GPUs the step at the user's batch does not fit in the crossover's mode (Does not fit, above): no speed-up
    of theirs pays (GTX 980 read 34.8x faster, below its own "none, not even 1")."""
    mode = a.crossover.mode if a.crossover else "fp32"
    return {r.gpu for r in a.costs.left_out if r.mode == mode}


def _crossover(x, asked: str, cpu=None, pipeline=None, unfit: set[str] = frozenset(), mark: str = "") -> str:
    """At the user's batch: which GPUs are predicted faster than the CPU measured, or how much slower the best is,
    the GPUs' mode named (the crossover's, fp32, where the Fastest line's GPU may be in bf16: two speed-ups);
    `asked`: the workload as the user named it (a user's file.py:factory), for the command it suggests; `cpu`: the
    CPU line's step (`speedups`), or with --data its step on synthetic data (`computing`), the loader's beside it;
    `unfit`: the GPUs the step does not fit, left out and named; `mark`: `?` where the CPU line's step is not one to
    rely on (the crossover's own cell, where it is set against instead, marked by its own doubt)."""
    if x is None or not x.rows:
        return "not measured"
    row = _row(x)
    ratios = {g: r for g, r in speedups(x, row, cpu).items() if g not in unfit}
    gone = sorted(unfit & set(x.gpus), key=x.gpus.index)
    left = f" ({', '.join(gone)} left out: the step does not fit {'it' if len(gone) == 1 else 'them'})" if gone else ""
    if not ratios:
        return f"no GPU asked holds the step at your batch {row.batch} (Does not fit, above)" if gone else (
            "no GPU step beside the CPU's")  # fmt: skip
    faster = sorted((g for g, s in ratios.items() if s > 1), key=lambda g: -ratios[g])
    command = f"dlperf crossover {shlex.quote(asked)} --batch {x.user_batch}"  # its speed-up at the batch advised
    tail = f"{left} (at your batch only; {command} measures batch by batch)"
    one = _one_step(cpu, row)  # the CPU line's step, named as such
    m = mark if one else DOUBT_MARK if row.cpu is not None and doubtful(row.cpu) else ""
    mine = f"this CPU's step above ({cpu.mode}, {seconds(cpu.step_s)}{m})" if one else f"this CPU's {x.mode} step"
    if one and pipeline and pipeline.synthetic_s:  # the GPUs' steps wait for no data: the CPU's fed, as they are
        mine = (f"this CPU's step on synthetic data ({cpu.mode}, {seconds(cpu.step_s)}{m}; "
                f"{seconds(pipeline.step_s)}{m} with its loader {pipeline.setting}, above)")  # fmt: skip
    if faster:
        said = ", ".join(f"{g} {ratios[g]:.1f}x{m}" for g in faster[:SHOWN])
        more = f" and {len(faster) - SHOWN} more" if len(faster) > SHOWN else ""
        return (f"a GPU pays at your batch {row.batch}: {len(faster)} of {len(ratios)} GPUs predicted faster in "
                f"{x.mode} than {mine} there: {said}{more}" + tail)  # fmt: skip
    best = max(ratios, key=ratios.get)
    return (f"no GPU is predicted faster in {x.mode} than {mine} at your batch {row.batch}: the closest, "
            f"{best}, is {1 / ratios[best]:.1f}{m} times slower; a larger batch may pay" + tail)  # fmt: skip


def _row(x):
    return next((r for r in x.rows if r.batch == x.user_batch), x.rows[0])


def _one_step(cpu, row) -> bool:
    return cpu is not None and cpu.batch == row.batch and bool(cpu.step_s)


def speedups(x, row, cpu) -> dict[str, float]:
    """Each GPU's predicted step at `row`'s batch against this CPU's: the CPU line's step (`cpu`: the mode search's
    best, or the thread search's), so that one screen rests on one CPU measurement, the fastest GPU's speed-up and
    the crossover's alike (two measurements of one setting differ on a loaded machine: 148x and 261x once); the
    crossover's own cell where the CPU line has no step at that batch."""
    if not _one_step(cpu, row):
        return {g: s for g in x.gpus if (s := row.speedup(g)) is not None}
    return {g: cpu.step_s / row.gpus[g].step_s for g in x.gpus if g in row.gpus and row.gpus[g].step_s}


def _pick_json(r) -> dict | None:
    return None if r is None else {"gpu": r.gpu, "mode": r.mode, "time_s": r.time_s, "step_s": r.step_s,
                                   "cost_usd": r.cost(), "predicted": True}  # fmt: skip


def to_json(a) -> dict:
    """The same answer for scripts: seconds and US dollars, each part marked measured or predicted."""
    from dlperf.predict import cost

    x = a.costs
    c = x.cpu
    cpu = None if c is None else {
        "measured": True, "time_s": c.time_s, "step_s": c.step_s, "batch": c.batch, "threads": c.threads,
        "mode": c.mode, "run_id": c.run_id, "step_ci_s": a.cpu_ci, "kwh": c.kwh, "energy_usd": c.energy_cost,
        "threads_not_measured": list(a.threads_cut),  # the budget left them: the step may be faster there
        "doubtful": bool(a.doubt), "doubt": a.doubt or None,  # the text's `?`: a step, and figures, not to rely on
    }  # fmt: skip
    xo = a.crossover
    row = next((r for r in xo.rows if r.batch == xo.user_batch), None) if xo and xo.rows else None
    fed = computing(a)  # the GPUs' steps against this CPU's fed: with --data, on synthetic data
    speedup = {g: r for g, r in speedups(xo, row, fed).items() if g not in unfit(a)} if row else {}
    cpu_step = fed.step_s if row and _one_step(fed, row) else row.cpu.median_s if row and row.cpu else None
    return {
        "workload": a.workload, "batch": a.batch, "samples": x.samples, "work": x.what.full, "cpu": cpu,
        "fastest": _pick_json(x.fastest()), "fastest_tied_with": x.tied_with(), "cheapest": _pick_json(x.cheapest()),
        "cpu_not_measured": a.cpu_why or a.unread or None, "deadline_s": x.deadline_s, "mode_searched": a.searched,
        "cheapest_within_deadline": _pick_json(x.cheapest(x.deadline_s)) if x.deadline_s else None,
        "within_deadline_at_risk": cost.at_risk(x.cheapest(x.deadline_s), x.deadline_s),
        "does_not_fit": [{"gpu": r.gpu, "mode": r.mode, "why": r.why, "largest_batch": a.largest.get((r.gpu, r.mode)),
                          "predicted": True} for r in x.left_out],
        "crossover": {"how": CROSSOVER_HOW, "batch": row.batch if row else None,
                      "gpu_speedup": {g: speedup.get(g) for g in xo.gpus} if row else {},  # null: no fit
                      "gpus_that_do_not_fit": sorted(unfit(a) & set(xo.gpus)) if xo else [],
                      "cpu_step_s": cpu_step},
        "gpus": cost.to_json(x)["rows"], "uncertainty": a.uncertainty, "runs": a.runs, "notes": a.notes,
        "input_pipeline": _feed_json(a.feed, x), "loader_here": _pipeline_json(a.pipeline),
    }  # fmt: skip


def _pipeline_json(p) -> dict | None:
    """This CPU's step on the user's data (`advise.Pipeline`): the `cpu` figures are at this loader setting."""
    from dlperf.loaders import input_bound

    if p is None:
        return None
    return {"measured": True, "setting": p.setting, "step_s": p.step_s, "synthetic_step_s": p.synthetic_s,
            "wait_share": p.wait_share, "input_bound": input_bound(p.wait_share), "of_synthetic": p.of_synthetic,
            "why": p.why, "enough": p.enough is not None, "enough_why": p.enough}  # fmt: skip


def _feed_json(feed, x) -> dict | None:
    if feed is None:
        return None
    return {"measured": True, "setting": feed.setting, "samples_per_s": feed.samples_per_s,
            "per_process_samples_per_s": feed.per_process, "run_id": feed.run_id,
            "processes_needed": [{"gpu": r.gpu, "mode": r.mode, "samples_per_s": r.samples_per_s,
                                  "processes": feed.processes_for(r.samples_per_s), "predicted": True}
                                 for r in x.rows]}  # fmt: skip
