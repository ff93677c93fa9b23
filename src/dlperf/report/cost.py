"""The cost view of `dlperf predict --cost` and of the HTML report's "When a GPU pays": what the work costs on each
GPU predicted (`predict/cost.py`), this CPU's measured time and energy beside, and the ranking. Pure functions."""

from __future__ import annotations

import math

from dlperf.measure.units import plural
from dlperf.predict.cost import TIE
from dlperf.report.format import duration, seconds
from dlperf.store.location import db_flag

HEAD = ("GPU", "mode", "step", "samples/s", "time", "cost", "$ per M samples", "$/GPU-hour", "memory")


def usd(value: float) -> str:
    """Dollars to a person: cents from a dollar up, three significant figures below (never an exponent)."""
    if value >= 1 or value <= 0:
        return f"${value:,.2f}"
    return f"${value:.{2 - math.floor(math.log10(value))}f}"


def span(pair: tuple[float, float] | None) -> str:
    """A low-high range of dollars, one figure where both are the same; "no price" without one."""
    if pair is None:
        return "no price"
    low, high = pair
    return usd(low) if usd(low) == usd(high) else f"{usd(low)}-{usd(high)}"


def rate(value: float) -> str:
    """Samples a second: whole from 100 up, three significant figures below (a 1.3B LM's 1.48 and 4.68 a second, not
    "1" and "5")."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def wall(value: float) -> str:
    return seconds(value) if value < 90 else duration(value)


def rows(x) -> list[list[str]]:
    out = []
    for r in x.rows:
        price = None if r.price is None else (r.price.low, r.price.high)
        out.append([r.gpu, r.mode, seconds(r.step_s), rate(r.samples_per_s), wall(r.time_s), span(r.cost()),
                    span(r.per_million()), span(price), r.why.split(":")[0]])  # fmt: skip
    return out


def table(x):
    from rich.table import Table

    t = Table(title=f"{x.workload} at batch {x.batch}, {x.what.titled()}: time and cost predicted on each GPU")
    for name in HEAD:
        t.add_column(name, justify="left" if name in ("GPU", "mode", "memory") else "right", no_wrap=name == "GPU")
    for line in rows(x):
        t.add_row(*line)
    return t


def _pick(label: str, r) -> str:
    """A GPU picked: its time for the work and, beside it, its step: the work's time alone read as a step (advise's
    97.2 ms for an epoch, under this CPU's 98.7 ms a step)."""
    return f"{label}: {r.gpu} ({r.mode}): {wall(r.time_s)} ({seconds(r.step_s)} a step), {span(r.cost())}"


def fastest_line(label: str, x) -> str:
    """The fastest GPU, or why there is none; GPUs tied with it (`Costs.tied`) named, the cheapest of them picked."""
    r = x.fastest()
    if r is None:
        return f"{label}: {no_pick(x, priced=False)}"
    tied = x.tied_with()
    if not tied:
        return _pick(label, r)
    return (_pick(label, r) + f"; tied with {', '.join(tied)} (predicted within {TIE:.0%}, well inside the "
            "uncertainty), so the cheapest of them")  # fmt: skip


def no_pick(x, within_s: float | None = None, priced: bool = True) -> str:
    """Why no GPU is picked: every GPU asked left out for memory, none that fits with a price, or none in time."""
    if not x.rows:
        if x.left_out:
            return f"none: the step at batch {x.batch} fits none of the GPUs asked (see Does not fit)"
        return "none: no GPU was predicted"
    candidates = [r for r in x.rows if r.price] if priced else x.rows
    if not candidates:
        return "none: no GPU that fits has a price (--prices gives one)"
    pick = x.fastest()  # the `Fastest:` line's, tied GPUs decided as it decides them, where it is one of these
    best = pick if pick in candidates else min(candidates, key=lambda r: r.time_s)
    what = "priced GPU" if priced else "GPU"
    return (f"none: no {what} predicted finishes in time; the fastest, {best.gpu} ({best.mode}), takes "
            f"{wall(best.time_s)}")  # fmt: skip


def cheapest_lines(x, label: str = "Cheapest", what: str = "", suffix: str = "") -> list[str]:
    """The cheapest GPU, and the cheapest within the deadline, or why there is none."""
    cheapest = x.cheapest()
    first = f"{label}{what}{suffix}"
    out = [_pick(first, cheapest) if cheapest else f"{first}: {no_pick(x)}"]
    if x.deadline_s is not None:
        within = x.cheapest(x.deadline_s)
        at = f"{label} within {deadline_text(x.deadline_s)}{suffix}"
        out.append(
            _pick(at, within) + _at_risk(within, x.deadline_s) if within else f"{at}: {no_pick(x, x.deadline_s)}"
        )
    return out


def _at_risk(r, deadline_s: float) -> str:
    """Where the GPU picked within the deadline would miss it at the predictor's error (`cost.at_risk`): said, as a
    pick 18 minutes into a 20-minute deadline was not."""
    from dlperf.predict.cost import at_risk

    if (risk := at_risk(r, deadline_s)) is None:
        return ""
    return (
        f"; at {risk['factor']:.2f} times the predicted step (the 10th percentile of the error {risk['whose']}) it "
        f"takes {wall(risk['time_s'])}, past the deadline: a faster GPU, or a longer --deadline, leaves room"
    )


def left_out_groups(x) -> list[str]:
    """The (GPU, mode)s left out, those of one mode, need and largest batch said once with each GPU's room: a model
    no GPU holds was one 4,142-character line of 'needs 61.6 GiB (the predicted peak) of N GiB; the largest batch
    that fits: none, not even 1', once per GPU and mode."""
    from dlperf.predict.cost import NO_FIT
    from dlperf.report.memory import largest

    groups: dict[str, list[str]] = {}
    for r in x.left_out:
        why = r.why.removeprefix(f"{NO_FIT}: ")
        need, of, room = why.rpartition(" of ")
        if not of or not need.startswith("needs "):  # not a room figure: as it is
            groups.setdefault(f"{r.mode}: {why}", []).append(r.gpu)
            continue
        n = x.largest.get((r.gpu, r.mode))
        fits = "" if n is None else f"; the largest batch that fits: {largest(n)}"
        groups.setdefault(f"{r.mode}: {need}{fits}", []).append(f"{r.gpu} (has {room})")
    return [f"{', '.join(gpus)} in {key}" for key, gpus in groups.items()]


def lines(x, how: str | None) -> list[str]:
    """The ranking, the GPUs left out, and this CPU."""
    out = [fastest_line("Fastest", x), *cheapest_lines(x)]
    out += [f"Does not fit: {group}" for group in left_out_groups(x)]
    out.append(cpu_line(x.cpu) if x.cpu else f"On this CPU: {how}")
    return out


def cpu_doubts(cell) -> list[str]:
    """Why the stored CPU step a cost quotes is not one to rely on (`charts.disturbances`: few steps, other processes'
    load, steal, an unsettled warm-up, processes far apart), as the table marks it: `predict --cost` quoted one
    disturbed step of 1.05 s as 27 minutes of work, with nothing said."""
    from dlperf.report.charts import disturbances

    said = disturbances(cell) if cell is not None else []
    if not said:
        return []
    return [f"this CPU's step (run {cell.run_id}, {cell.column}) is not one to rely on: {'; '.join(said)} (dlperf run "
            "--repeats 3 on a quiet machine measures it again)"]  # fmt: skip


def cpu_line(cpu) -> str:
    return (
        f"On this CPU (measured, run {cpu.run_id}, {plural(cpu.threads, 'thread')}, {cpu.mode}): {wall(cpu.time_s)} at "
        f"{seconds(cpu.step_s)} a step; {cpu.kwh:.3g} kWh at {cpu.watts:g} W = {usd(cpu.energy_cost)} at "
        f"${cpu.kwh_price:g}/kWh (--cpu-watts, --kwh-price)"
    )


def deadline_text(s: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{s / size:g}{unit}"
    return f"{s:g}s"


def how_to_measure(workload, where: str, no_room: str = "", measured: list[str] = ()) -> str:
    """What to run when the store `where` holds no measured CPU step of the workload at its batch to quote; nothing to
    run where the step does not fit the memory this machine has available (`no_room`: `predict.memory.no_room_here`'s
    reason, the one check `advise` and `crossover` make before they measure). `measured`: the modes stored at the
    batch without an fp32 eager step among them, which a mode is quoted against (`optimize_results.quoted`): a store
    of a bf16 cell alone was said to hold "no measured step"."""
    of = f"{workload.name} at batch {workload.batch} in {where}"
    missing = f"no measured step of {of}"
    if measured:
        missing = f"no fp32 eager step of {of} to compare its measured {', '.join(measured)} against"
    if no_room:
        return f"{missing}, and none can be measured here: {no_room.removeprefix('not measured: ')}"
    if workload.batch == _default_batch(workload.name) and not workload.is_user:
        run = f"dlperf run --workloads {workload.name} --devices cpu" + " --modes fp32" * bool(measured)
    else:  # at this batch, its threads searched at it too: crossover's own batches are powers of two, searched at
        # the workload's own batch (`--batches 64` alone searched the threads at 20 and measured 20 as well)
        b = workload.batch
        run = f"dlperf crossover {workload.source if workload.is_user else workload.name} --batch {b} --batches {b}"
        run += " --mode fp32" * bool(measured)
    return f"{missing}: `{run} {db_flag(where)}` measures one"  # into the store read: it was ./dlperf.db


def _default_batch(name: str) -> int | None:
    from dlperf.workloads import BUILTIN

    w = BUILTIN.get(name)
    return w.batch if w else None


def notes(x) -> list[str]:
    """The samples the loader leaves out of the work (`cost.Work.left_out`: the table's title leaves them out), where
    each price comes from and when the shipped ones were read, and that the GPU figures are predicted."""
    out = [x.what.left_out] * bool(x.what.left_out) + [
        "GPU times are predicted (dlperf predict), this CPU's measured; prices are "
        + prices_said([r.price for r in x.rows + x.left_out])
    ]
    seen = set()
    for r in x.rows + x.left_out:
        if r.gpu in seen:
            continue
        seen.add(r.gpu)
        if r.price is None:
            out.append(f"{r.gpu}: no price (give one with --prices)")
        elif r.price.user:
            out.append(f"{r.gpu}: your price (--prices): {r.price.sources or 'no source given'}")
        elif r.price.one_source:
            out.append(f"{r.gpu}: one price list only, read {r.price.date}")
    if any(r.why.startswith("memory not checked") for r in x.rows):
        out.append("memory: not checked where no peak of this workload and batch is stored (dlperf run measures one)")
    return out


def prices_said(prices) -> str:
    """What the dollars are and where they come from, with the days the shipped ones among `prices` were read."""
    read = sorted({p.date for p in prices if p and not p.user and p.date})
    when = f", read {', '.join(read)}" if read else ""
    return (f"on-demand US dollars per GPU-hour, the lowest and highest seen{when} (src/dlperf/data/gpu_prices.csv: "
            "sources, regions, dates; --prices FILE.csv or $DLPERF_PRICES gives yours)")  # fmt: skip


def listed_price(price) -> str:
    """`predict --list-gpus`'s $/GPU-hour cell: the range, "-" for a GPU with no price (`listed_notes`)."""
    return "-" if price is None else span((price.low, price.high))


def listed_notes(prices) -> list[str]:
    """Under `predict --list-gpus`: what its $/GPU-hour column is, what "-" there means, and the user's own rows."""
    out = [f"$/GPU-hour: {prices_said(prices)}; - where no price was found: predict --cost times such a GPU but "
           "ranks it by no cost, and advise asks it only where --gpu names it"]  # fmt: skip
    if mine := [p.gpu for p in prices if p and p.user]:
        out.append(f"your prices (--prices or $DLPERF_PRICES): {', '.join(mine)}")
    return out


# ----------------------------------------------------------------------------------------------------------------------
# The crossover section: beside each GPU's step, what a million samples cost at its price


def _price(gpu: str):
    """The price of a GPU the store names (a crossover's prediction, a measured GPU): the table's GPU of that name,
    not the one a person's typing of it would find; None for one the table does not know (or has no price for)."""
    from dlperf.predict import gpus, prices

    found = gpus.known(gpu)
    return prices.price(found) if found else None


def _million(step_s: float, batch: int, gpu: str) -> tuple[float, float] | None:
    price = _price(gpu)
    hours = 1e6 / batch * step_s / 3600
    return None if price is None else (hours * price.low, hours * price.high)


def crossover_table(x) -> tuple[list[str], list[list[str]]]:
    """The crossover's table (`report/crossover.by_batch`) with, after each priced GPU's speed-up, the cost of a
    million samples at that batch; turned a row per GPU where they outnumber the batches (`crossover.oriented`)."""
    from dlperf.report.crossover import by_batch, oriented

    head, rows = by_batch(x)
    priced = [g for g in x.gpus if any(_million(s.step_s, r.batch, g) for r in x.rows if (s := r.gpus.get(g)))]
    for gpu in reversed(priced):
        at = head.index(gpu) + 2
        head.insert(at, f"{gpu} $ per M samples")
        for r, line in zip(x.rows, rows, strict=True):
            step = r.gpus.get(gpu)
            line.insert(at, span(_million(step.step_s, r.batch, gpu)) if step else "-")
    return oriented(x, head, rows)


def crossover_lines(x) -> list[str]:
    """At the user's batch, what a million samples cost on each priced GPU; of more GPUs than a chart draws
    (advise's 26), one line naming the CHEAPEST GPUs by that cost, the table giving each one's."""
    from dlperf.report.crossover import CHARTED

    at = next((r for r in x.rows if r.batch == x.user_batch), None)
    steps = [(gpu, step) for gpu in x.gpus if at and (step := at.gpus.get(gpu))]
    costs = [(cost, gpu, step) for gpu, step in steps if (cost := _million(step.step_s, at.batch, gpu))]
    if len(x.gpus) > CHARTED and costs:
        cheapest = ", ".join(f"{gpu} {span(cost)}" for cost, gpu, _ in sorted(costs, key=lambda c: c[0])[:CHEAPEST])
        return [f"at your batch {x.user_batch}, a million samples cost the least on {cheapest} (on-demand prices, "
                "src/dlperf/data/gpu_prices.csv; the table gives each priced GPU's)"]  # fmt: skip
    out = []
    for cost, gpu, step in costs:
        price, how = _price(gpu), "measured" if step.measured else "predicted"
        out.append(f"{gpu}: at your batch {x.user_batch}, {span(cost)} per million samples at "
                   f"{span((price.low, price.high))} a GPU-hour ({how} step; on-demand prices, "
                   "src/dlperf/data/gpu_prices.csv)")  # fmt: skip
    return out


CHEAPEST = 3  # the GPUs a crossover of many names by the cost of a million samples
