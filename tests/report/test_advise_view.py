"""`dlperf advise`'s screen (report/advise.py) in `predict --cost`'s words: this CPU's time as a duration a person
reads, ties and the reasons no GPU is picked, a GPU left out said once with its largest batch; and a mode search
that gave nothing is said, never hidden behind "its best settings" (advise.py)."""

from __future__ import annotations

from types import SimpleNamespace

from dlperf import advise
from dlperf.loaders import DATA_SYNTHETIC
from dlperf.predict import cost
from dlperf.predict.roofline import Prediction
from dlperf.report import advise as view
from dlperf.report import format
from dlperf.workloads import BUILTIN

CNN = BUILTIN["resnet-56"]


def prediction(gpu, step_s, mode="bf16"):
    return Prediction(gpu, CNN.name, mode, CNN.batch, step_s, 0.0, "launch")


def answer(predictions, searched=True, predicted=None, largest=None):
    x = cost.costs(CNN, predictions, 50_000, "50,000 samples (--samples)", {}, predicted=predicted)
    x.largest = largest or {}
    steps = 50_000 // CNN.batch  # the loader's (`cost.epoch`: a partial last batch dropped), as the GPUs' rows count
    x.cpu = cost.Cpu(4485.2 / steps, CNN.batch, 1, "fp32", 1, 4485.2, 100.0, 0.15)
    return advise.Advice(CNN.name, CNN.batch, x, None, None, [1], "", [], 0, x.largest, CNN.name, None, searched)


def test_this_cpus_time_is_a_duration_and_says_whether_a_mode_was_searched():
    """Issue: "4,485.2 s for 50,000 samples" where predict --cost says "75 min"."""
    line = view.lines(answer([prediction("T4", 0.01)]))[0]
    assert line.startswith("On this CPU (measured): 75 min for 50,000 samples (--samples) at its best settings (")
    assert "4,485.2" not in line
    unsearched = view.lines(answer([prediction("T4", 0.01)], searched=False))[0]
    assert "at its best thread count with no mode searched (1 thread, fp32; " in unsearched
    assert "best settings" not in unsearched


def test_thread_counts_the_budget_left_unmeasured_are_said_on_the_cpus_line():
    """`advise tiny-fcn-r --budget 10s` measured 2 threads alone (5.94 ms a step, the machine busy) and said "a GPU
    pays ... 3.7x", where 1 thread takes 0.19 ms and no GPU pays; only a note far below said 1 was not measured."""
    from dataclasses import replace

    cut = view.lines(replace(answer([prediction("T4", 0.01)]), threads_cut=(1,)))[0]
    assert cut.startswith("On this CPU (measured): ")
    assert "; 1 thread count (1) not measured: the budget ran out, and this CPU's step may be faster there (raise " \
           "--budget)" in cut  # fmt: skip
    assert "not measured" not in view.lines(answer([prediction("T4", 0.01)]))[0]


def test_tied_gpus_are_named_and_the_cheapest_of_them_is_the_fastest():
    """Issue: advise named the H100 fastest when the H200 and B200 predict the same time."""
    from dlperf.predict import gpus, prices

    names = ["H100-SXM5-80GB", "H200-SXM-141GB", "B200"]
    lines = view.lines(answer([prediction(name, 0.0165) for name in names]))
    fastest = next(line for line in lines if line.startswith("Fastest GPU (predicted): "))
    cheapest = min(names, key=lambda n: (prices.price(gpus.lookup(n)).low, prices.price(gpus.lookup(n)).high))
    assert cheapest != names[0]  # the first of the tied, which "fastest" named before
    assert fastest.startswith(f"Fastest GPU (predicted): {cheapest} (bf16)")
    assert f"tied with {', '.join(n for n in names if n != cheapest)}" in fastest
    assert "times faster than this CPU" in fastest


def test_a_gpu_picked_gives_its_step_beside_its_time_in_text_and_json():
    """The answer's "Fastest GPU ... 97.2 ms" was an epoch read as a step beside this CPU's; the JSON had no step."""
    a = answer([prediction("T4", 0.01)])
    fastest = next(line for line in view.lines(a) if line.startswith("Fastest GPU (predicted): "))
    assert fastest.startswith("Fastest GPU (predicted): T4 (bf16): 3.90 s (10.0 ms a step), $")
    picked = view.to_json(a)["fastest"]
    assert picked["step_s"] == 0.01 and picked["time_s"] == 0.01 * (50_000 // CNN.batch)


def test_every_gpu_left_out_is_the_reason_and_each_says_does_not_fit_once():
    gib = 2**30
    a = answer([prediction("T4", 0.5, "fp16")], predicted={"fp16": 85 * gib}, largest={("T4", "fp16"): 166})
    lines = view.lines(a)
    assert (
        "Fastest GPU (predicted): none: the step at batch 128 fits none of the GPUs asked (see Does not fit)" in lines
    )
    assert (
        "Cheapest GPU (predicted): none: the step at batch 128 fits none of the GPUs asked (see Does not fit)" in lines
    )
    (left,) = [line for line in lines if line.startswith("Does not fit")]
    assert left == ("Does not fit (predicted): T4 (has 14.1 GiB) in fp16: needs 85.0 GiB (the predicted peak); the "
                    "largest batch that fits: 166")  # fmt: skip
    assert view.to_json(a)["does_not_fit"][0]["largest_batch"] == 166


def test_a_mode_search_that_measured_nothing_is_said():
    """Issue: "[1/?] ... timeout: the search's --budget ran out", then "at its best settings" and no note."""
    baseline = SimpleNamespace(mode="fp32", status="timeout", error="the search's --budget ran out", median_s=None)
    search = SimpleNamespace(baseline=baseline, best=None, run_id=2, notes=[], exit_code=0, results=[])
    opts = advise.Options("tfm.py:make", data=DATA_SYNTHETIC)
    feed, notes = advise._searched_notes(opts, "unused.db", search, None)
    assert feed is None
    assert notes == ["the mode search measured nothing (fp32: timeout: the search's --budget ran out): this CPU's "
                     "figure is the thread search's fp32 step; what it stored is run 2 (raise --budget)"]  # fmt: skip
    found = SimpleNamespace(mode="fp32")  # a stored cell: the search gave the answer its step
    assert advise._searched_notes(opts, "unused.db", search, found)[1] == []


def test_the_dollars_of_the_gpus_picked_say_where_and_when_their_prices_were_read(monkeypatch):
    """Issue: advise printed "$0.0199-$0.0350" for the cheapest GPU with no word of whose price that was or when it
    was read (predict --cost names the price file; advise said nothing). The note names each picked GPU's price a
    GPU-hour, the day it was read, its region, and a price with one source or given by the user as such."""
    from dlperf.predict import gpus, prices

    a = answer([prediction("H100-SXM5-80GB", 0.01), prediction("T4", 0.02, "fp16")])  # the fastest, the cheapest
    h100, t4 = (prices.price(gpus.lookup(n)) for n in ("H100-SXM5-80GB", "T4"))
    note = view.price_note(a.costs)
    assert note.startswith("prices: on-demand US dollars per GPU-hour, the lowest and highest seen: H100-SXM5-80GB ")
    assert f"(read {h100.date}, {h100.region})" in note and f"T4 $0.590-$0.810 (read {t4.date}, {t4.region})" in note
    assert note.endswith("each price's sources are in src/dlperf/data/gpu_prices.csv (--prices FILE.csv gives yours)")
    mine = prices.Price("T4", 0.3, 0.3, sources="our reserved rate", user=True)
    monkeypatch.setattr(prices, "_user", (mine,))
    a = answer([prediction("T4", 0.5, "fp16")])
    assert "T4 $0.300 (no date given, your --prices)" in view.price_note(a.costs)
    a = answer([prediction("A10", 0.5)])  # one source
    assert "one source" in view.price_note(a.costs)
    assert view.price_note(cost.costs(CNN, [], 1, "1 sample", {})) is None  # nothing picked, nothing to say


def test_the_crossover_rests_on_the_cpu_step_the_screen_gives():
    """Issue: one screen said a GPU 148x faster than this CPU (the mode search's step, 2.42 s) and 261x (the thread
    search's, 4.27 s, the same setting measured again on a loaded machine). The crossover line now divides the CPU
    line's step, and names it; the JSON says which step it used."""
    from dlperf.report.crossover import Crossover, Row

    a = answer([prediction("T4", 0.01, "fp32")])
    mine = a.costs.cpu.step_s  # the CPU line's step
    thread_search = SimpleNamespace(median_s=mine * 1.8, threads=1)  # the crossover's own cell, measured apart
    row = Row(CNN.batch, thread_search, {"T4": SimpleNamespace(step_s=0.01)})
    a.crossover = Crossover(1, CNN.name, "fp32", CNN.batch, ["T4"], [row])
    lines = view.lines(a)
    fastest = next(line for line in lines if line.startswith("Fastest GPU"))
    crossover = next(line for line in lines if line.startswith("Crossover"))
    assert f"{mine / 0.01:.1f} times faster than this CPU" in fastest
    assert f"T4 {mine / 0.01:.1f}x" in crossover and f"{mine * 1.8 / 0.01:.1f}x" not in crossover
    assert f"faster in fp32 than this CPU's step above (fp32, {format.seconds(mine)}) there" in crossover
    said = view.to_json(a)["crossover"]
    assert said["gpu_speedup"] == {"T4": mine / 0.01} and said["cpu_step_s"] == mine


def test_a_gpu_asked_that_fits_but_has_no_price_is_named_not_dropped_from_the_ranking_silently():
    """Issue: `advise resnet-50 --gpu V100-SXM2-16GB,T4,RTX 3080,RTX 4090` ranked the cheapest among the priced GPUs
    and never said that the V100 and the RTX 3080 (no row in gpu_prices.csv) were left out of it; `predict --cost`
    says "V100-SXM2-16GB: no price (give one with --prices)"."""
    a = answer([prediction("T4", 0.02, "fp16"), prediction("V100-SXM2-16GB", 0.03, "fp16"),
                prediction("RTX 3080", 0.04)])  # fmt: skip
    note = view.price_note(a.costs)
    assert note.startswith("prices: on-demand US dollars per GPU-hour, the lowest and highest seen: T4 ")
    assert note.endswith("; no price for V100-SXM2-16GB, RTX 3080: predicted, but not ranked by cost (--prices "
                         "FILE.csv gives one)")  # fmt: skip
    alone = view.price_note(answer([prediction("V100-SXM2-16GB", 0.03, "fp16")]).costs)
    assert alone == ("prices: no price for V100-SXM2-16GB: predicted, but not ranked by cost (--prices FILE.csv gives "
                     "one)")  # fmt: skip


def test_the_crossover_names_the_mode_its_gpus_are_predicted_in():
    """Issue: advise resnet-50 --batch 64 said "Fastest GPU (predicted): RTX 4090 (bf16): ..., 911.3 times faster than
    this CPU", then "Crossover ...: RTX 4090 500.4x": the crossover's GPUs are predicted in fp32, which it did not say,
    so one screen gave one GPU two speed-ups with no word of why."""
    from dlperf.report.crossover import Crossover, Row

    a = answer([prediction("RTX 4090", 0.01, "bf16")])
    cpu = SimpleNamespace(median_s=a.costs.cpu.step_s, threads=1)
    a.crossover = Crossover(1, CNN.name, "fp32", CNN.batch, ["RTX 4090"], [Row(CNN.batch, cpu, {
        "RTX 4090": SimpleNamespace(step_s=0.02)})])  # fmt: skip
    crossover = next(line for line in view.lines(a) if line.startswith("Crossover"))
    assert "1 of 1 GPUs predicted faster in fp32 than this CPU's step above (fp32, " in crossover
    a.crossover.rows[0].gpus["RTX 4090"] = SimpleNamespace(step_s=1e3)  # slower than the CPU
    crossover = next(line for line in view.lines(a) if line.startswith("Crossover"))
    assert "no GPU is predicted faster in fp32 than this CPU's step above (fp32, " in crossover


def test_a_disturbed_cpu_step_and_each_figure_set_against_it_are_marked_as_crossover_marks_them():
    """With a loop on the CPUs, advise printed "15 min for one epoch ... 0.143 s a step" and "36.1 times faster than
    this CPU" as plain figures, where crossover marks such a step and its speed-ups `?`; only a note far below said
    other processes used 82%. Each is marked, with a legend line saying what `?` is; a quiet step has none."""
    from dataclasses import replace

    from dlperf.report.charts import DISTURBED_CELL, DOUBT_MARK
    from dlperf.report.crossover import Crossover, Row

    a = answer([prediction("T4", 0.01, "fp32")])
    step = a.costs.cpu.step_s
    a.crossover = Crossover(1, CNN.name, "fp32", CNN.batch, ["T4"], [Row(CNN.batch, None, {"T4": SimpleNamespace(
        step_s=0.01)})])  # fmt: skip
    quiet = view.lines(a)
    assert not any(DOUBT_MARK in line for line in quiet)
    busy = view.lines(replace(a, doubt=DISTURBED_CELL))
    cpu, fastest, crossover = busy[0], busy[1], next(line for line in busy if line.startswith("Crossover"))
    assert f"{format.seconds(step)}{DOUBT_MARK} a step" in cpu and f"75 min{DOUBT_MARK} for" in cpu
    assert f"{step / 0.01:.1f}{DOUBT_MARK} times faster than this CPU" in fastest
    assert f"T4 {step / 0.01:.1f}x{DOUBT_MARK}" in crossover
    assert busy[-1] == f"{DOUBT_MARK} = this CPU's step, and each figure set against it, from {DISTURBED_CELL} (see " \
                       "the notes)"  # fmt: skip
    assert view.to_json(replace(a, doubt=DISTURBED_CELL))["cpu"]["doubtful"] is True
    from conftest import make_cell

    busy = ["other processes used 82% of the CPUs while this cell was timed"]
    busy_cell = make_cell("resnet-56", n=40, warnings=busy)
    assert advise.cpu_doubt(busy_cell) == DISTURBED_CELL and advise.cpu_doubt(make_cell("resnet-56", n=40)) == ""
