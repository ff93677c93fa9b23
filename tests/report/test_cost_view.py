"""`dlperf predict --cost`'s lines (report/cost.py): the ranking says why it has no pick, names ties, and a GPU left out
says so once, with the largest batch that fits; what to run to measure this CPU is never something that cannot run."""

from __future__ import annotations

import pytest

from dlperf.predict import cost
from dlperf.predict.roofline import Prediction
from dlperf.report import cost as view
from dlperf.workloads import BUILTIN

RESNET = BUILTIN["resnet-50"]  # batch 16
GIB = 2**30


def prediction(gpu, step_s, mode="fp32", batch=16):
    return Prediction(gpu, "resnet-50", mode, batch, step_s, 0.0, "compute")


def test_every_gpu_left_out_for_memory_is_said_so_not_that_none_has_a_price():
    """Issue: resnet-50 at batch 4096 on a T4: "no GPU predicted has a price", "no priced GPU finishes in time"; the
    truth was that it fits none (175 GiB)."""
    x = cost.costs(
        RESNET, [prediction("T4", 1.0, "fp16")], 1000, "", {}, deadline_s=3600, predicted={"fp16": 175 * GIB}
    )
    x.largest = {("T4", "fp16"): 321}
    out = view.lines(x, "not measured")
    said = " ".join(out)
    assert "has a price" not in said and "finishes in time" not in said
    assert out[:3] == [f"{label}: none: the step at batch 16 fits none of the GPUs asked (see Does not fit)"
                       for label in ("Fastest", "Cheapest", "Cheapest within 1h")]  # fmt: skip
    (left,) = [line for line in out if line.startswith("Does not fit")]
    assert left == ("Does not fit: T4 (has 14.1 GiB) in fp16: needs 175.0 GiB (the predicted peak); the largest batch "
                    "that fits: 321")  # fmt: skip
    assert left.count("does not fit") + left.count("Does not fit") == 1


def test_gpus_left_out_alike_are_said_once_with_each_ones_room():
    """A 3.2-billion-parameter model that fits no GPU asked: advise's Does-not-fit line was 4,142 characters, each GPU
    and mode saying 'needs 61.6 GiB (the predicted peak) of N GiB; the largest batch that fits: none, not even 1'."""
    gib = 2**30
    x = cost.costs(RESNET, [prediction(g, 0.1, m) for g in ("T4", "RTX 4090") for m in ("fp32", "bf16")], 1000, "",
                   {}, predicted={"fp32": 70 * gib, "bf16": 40 * gib})  # fmt: skip
    x.largest = {(g, m): 0 for g in ("T4", "RTX 4090") for m in ("fp32", "bf16")} | {("RTX 4090", "bf16"): 3}
    left = [line for line in view.lines(x, "not measured") if line.startswith("Does not fit")]
    assert left == [
        "Does not fit: T4 (has 14.1 GiB), RTX 4090 (has 23.1 GiB) in fp32: needs 70.0 GiB (the predicted peak); the "
        "largest batch that fits: none, not even 1",
        "Does not fit: T4 (has 14.1 GiB) in bf16: needs 40.0 GiB (the predicted peak); the largest batch that fits: "
        "none, not even 1",
        "Does not fit: RTX 4090 (has 23.1 GiB) in bf16: needs 40.0 GiB (the predicted peak); the largest batch that "
        "fits: 3",
    ]


def test_no_price_and_no_gpu_in_time_each_say_their_own_reason():
    unpriced = cost.costs(RESNET, [prediction("GTX 1080", 0.1)], 1000, "", {}, deadline_s=60)
    assert view.no_pick(unpriced) == "none: no GPU that fits has a price (--prices gives one)"
    slow = cost.costs(RESNET, [prediction("T4", 10.0), prediction("GTX 1080", 1.0)], 16_000, "", {}, deadline_s=60)
    lines = view.lines(slow, "not measured")
    assert "Cheapest within 1m: none: no priced GPU predicted finishes in time; the fastest, T4 (fp32), takes" in (
        " ".join(lines))  # fmt: skip


def test_a_pick_within_the_deadline_that_the_stated_error_would_take_past_it_says_so():
    """advise picked a GPU at 18 minutes for a 20-minute deadline, beside an uncertainty line saying a step may take
    2.05 times the predicted (37 minutes), and said nothing of the risk."""
    from dlperf.predict.roofline import slowest_factor

    factor, whose = slowest_factor()
    tight = cost.costs(RESNET, [prediction("T4", 1.0)], 16_000, "", {}, deadline_s=1100)  # 1,000 steps: 1,000 s
    (line,) = [ln for ln in view.lines(tight, "not measured") if ln.startswith("Cheapest within")]
    assert line.endswith(f"; at {factor:.2f} times the predicted step (the 10th percentile of the error {whose}) it "
                         f"takes {view.wall(1000 * factor)}, past the deadline: a faster GPU, or a longer --deadline, "
                         "leaves room")  # fmt: skip
    roomy = cost.costs(RESNET, [prediction("T4", 1.0)], 16_000, "", {}, deadline_s=1000 * factor + 1)
    assert not any("past the deadline" in ln for ln in view.lines(roomy, "not measured"))


def test_the_fastest_line_names_the_gpus_tied_with_it_and_picks_the_cheapest():
    x = cost.costs(RESNET, [prediction("H100-SXM5-80GB", 0.0165), prediction("A100-SXM4-80GB", 0.0165),
                            prediction("T4", 0.05)], 1_000_000, "", {})  # fmt: skip
    line = view.lines(x, "not measured")[0]
    assert line.startswith("Fastest: A100-SXM4-80GB (fp32): ")
    assert "tied with H100-SXM5-80GB" in line and "the cheapest of them" in line


def test_none_in_time_names_the_fastest_the_fastest_line_names():
    """Two GPUs tied (0.1% apart), none in time: 'Fastest: A100 ... the cheapest of them', then 'Cheapest within 1s:
    none ...; the fastest, H100, takes ...', naming the other."""
    x = cost.costs(RESNET, [prediction("H100-SXM5-80GB", 0.016484), prediction("A100-SXM4-80GB", 0.0165)], 1_000_000,
                   "", {}, deadline_s=1)  # fmt: skip
    lines = view.lines(x, "not measured")
    assert lines[0].startswith("Fastest: A100-SXM4-80GB (fp32): ")
    assert "Cheapest within 1s: none: no priced GPU predicted finishes in time; the fastest, A100-SXM4-80GB (fp32)" in (
        " ".join(lines))  # fmt: skip


def test_no_command_is_suggested_that_cannot_run_on_this_machine():
    from dataclasses import replace

    big = replace(RESNET, batch=1024)
    no_room = "not measured: the fp32 step at batch 1024 needs about 85.0 GiB (predicted), more than the 16.0 GiB"
    runs = view.how_to_measure(big, "dlperf.db", no_room)
    assert "`" not in runs and "none can be measured here: the fp32 step at batch 1024 needs about 85.0 GiB" in runs
    fits = view.how_to_measure(big, "dlperf.db", "")
    assert "`dlperf crossover resnet-50 --batch 1024 --batches 1024 --db dlperf.db` measures one" in fits


def test_a_store_without_an_fp32_eager_step_asks_for_one_not_for_any_step():
    """Issue: a store holding fcn-r's bf16 cell alone got "no measured step of fcn-r at batch 1024": a mode is
    quoted against fp32 eager (`optimize_results.quoted`), which it lacked. Now it says so and asks for fp32."""
    from dataclasses import replace

    from conftest import make_cell

    cells = [make_cell("fcn-r", mode="bf16", batch=1024, median_s=0.2), make_cell("fcn-r", batch=64, median_s=0.1),
             make_cell("fcn-r", mode="fp16", batch=1024, median_s=0.3, run_id=2)]  # fmt: skip
    assert cost.without_fp32(cells, 1024, [1]) == ["bf16"]  # run 2 is not this machine's, batch 64 not the one
    said = view.how_to_measure(BUILTIN["fcn-r"], "x.db", "", ["bf16"])
    assert said == ("no fp32 eager step of fcn-r at batch 1024 in x.db to compare its measured bf16 against: "
                    "`dlperf run --workloads fcn-r --devices cpu --modes fp32 --db x.db` measures one")  # fmt: skip
    said = view.how_to_measure(replace(BUILTIN["fcn-r"], batch=48), "x.db", "", ["bf16", "fp16"])
    assert said.startswith("no fp32 eager step of fcn-r at batch 48 in x.db to compare its measured bf16, fp16 against")
    assert "`dlperf crossover fcn-r --batch 48 --batches 48 --mode fp32 --db x.db` measures one" in said
    assert view.how_to_measure(BUILTIN["fcn-r"], "x.db").startswith("no measured step of fcn-r at batch 1024 in x.db:")


def test_a_slow_steps_samples_a_second_keep_three_figures():
    """Issue: lm-1.3b at batch 8 on an A100 (fp32, 5.40 s a step) read "1" sample/s, and the H100's 1.71 s "5": the
    column said 1 against 5 where the steps differ 3.2 times; below 100 a rate keeps three significant figures."""
    x = cost.costs(RESNET, [prediction("A100-SXM4-80GB", 5.40, batch=8), prediction("T4", 0.01)], 1000, "", {})
    (slow, fast) = view.rows(x)
    assert slow[3] == "1.48" and fast[3] == "1,600"
    assert [view.rate(v) for v in (0.05, 4.678, 27.71, 99.94, 100.4, 12345.6)] == [
        "0.05", "4.68", "27.7", "99.9", "100", "12,346"]  # fmt: skip


def test_the_day_the_shipped_prices_were_read_is_said():
    """Issue: predict --cost named the price file but not when its prices were read (advise names it for the GPUs it
    picks): a person renting now cannot tell how old $0.590-$0.810 is without opening the file."""
    from dlperf.predict import gpus, prices

    x = cost.costs(RESNET, [prediction("T4", 0.1), prediction("H100-SXM5-80GB", 0.01)], 1000, "", {})
    first = view.notes(x)[0]
    read = {prices.price(gpus.lookup(n)).date for n in ("T4", "H100-SXM5-80GB")}
    assert len(read) == 1 and f"the lowest and highest seen, read {read.pop()} (src/dlperf/data/gpu_prices.csv" in first
    unpriced = cost.costs(RESNET, [prediction("GTX 1080", 0.1)], 1000, "", {})
    assert "the lowest and highest seen (src/dlperf/data/gpu_prices.csv" in view.notes(unpriced)[0]


def test_the_samples_the_loader_leaves_out_are_a_note_not_the_title(capsys):
    """Since 000185f the title said them: "fcn-r at batch 1024, one epoch: MNIST's 60,000 training samples (58 steps
    of batch 1024, the last 608 samples left out as the loader drops a partial batch): time and cost predicted on each
    GPU", three lines at 100 columns; the steps and the samples left out are now the first note, the title two lines."""
    from dataclasses import replace

    from dlperf.commands.common import print_rich

    fcn = BUILTIN["fcn-r"]  # MNIST at 1024
    samples, what, steps = cost.work(fcn, None, None)
    x = cost.costs(fcn, [prediction("T4", 0.02, batch=1024)], samples, what, {}, steps=steps)
    assert (
        view.table(x).title
        == "fcn-r at batch 1024, one epoch: MNIST's 60,000 training samples: time and cost predicted on each GPU"
    )
    dropped = "58 steps of batch 1024, the last 608 samples left out as the loader drops a partial batch"
    assert view.notes(x)[0] == f"an epoch: {dropped}"
    more = cost.work(fcn, None, 2.5)[1]
    assert (more.titled(), more.left_out) == ("2.5 epochs of MNIST's 60,000 training samples", f"an epoch: {dropped}")
    assert more.full == f"2.5 epochs of MNIST's 60,000 training samples ({dropped})"
    print_rich(view.table(x), notes=view.notes(x), width=100)
    out = capsys.readouterr().out
    title, rest = out.split("┏", 1)
    assert len(title.splitlines()) <= 2 and "left out" not in title  # it wraps at the table's width
    assert f"note: an epoch: {dropped}" in " ".join(rest.split())
    small = replace(fcn, batch=64)
    some = cost.work(small, 1000, None)[1]
    assert (some.titled(), some.left_out) == (
        "1,000 samples (--samples)", "the work: 15 steps of batch 64, the last 40 samples left out as the loader "
        "drops a partial batch")  # fmt: skip
    whole = cost.work(small, 1024, None)[1]
    assert (whole.titled(), whole.left_out) == (whole.full, "") == ("1,024 samples (--samples)", "")  # no note


def test_a_gpu_picked_says_its_step_beside_its_time_for_the_work():
    """Issue: advise fcn-r said "On this CPU (measured): 5.72 s for one epoch ...; 98.7 ms a step" and then "Fastest GPU
    (predicted): H200-SXM-141GB (bf16): 97.2 ms": an epoch's time, read beside the CPU's step as the same step."""
    x = cost.costs(RESNET, [prediction("T4", 0.05), prediction("A100-SXM4-80GB", 0.01)], 16_000, "", {})
    fastest, cheapest = view.lines(x, "not measured")[:2]
    assert fastest == f"Fastest: A100-SXM4-80GB (fp32): 10.0 s (10.0 ms a step), {view.span(x.fastest().cost())}"
    assert cheapest.startswith("Cheapest: ") and " a step), $" in cheapest


def test_a_disturbed_cpu_step_quoted_by_the_cost_is_said_so():
    """predict --cost quoted a 1.05 s step of one timed step under 50% load as 27 minutes of work, with no caveat,
    where dlperf table marked the same cell '?'."""
    from dlperf.store.records import CellRecord
    from dlperf.vocab import Status

    def cell(*warnings):
        return CellRecord(run_id=1, key="k", position=0, workload="my-lstm@b64", framework="torch", device="cpu",
                          threads=1, mode="fp32", batch=64, status=Status.OK, median_s=1.05, n=1,
                          warnings=list(warnings))  # fmt: skip

    few = "few samples: the median of 1 timed step (fewer than 6: raise --max-time or --min-steps)"
    busy = "other processes used 50% of the CPUs while this cell was timed"
    assert view.cpu_doubts(cell(few, busy, "noisy: IQR is 12% of the median")) == [
        f"this CPU's step (run 1, cpu:1) is not one to rely on: {few}; {busy} (dlperf run --repeats 3 on a quiet "
        "machine measures it again)"
    ]
    assert view.cpu_doubts(cell("noisy: IQR is 12% of the median")) == [] and view.cpu_doubts(None) == []


def test_the_deadline_risk_takes_the_wider_of_the_published_and_the_measured_gpu_error(monkeypatch):
    """The risk was the published rows' 10th percentile alone (1.30 times the predicted), though the GPU steps dlperf
    measured took up to 1.8 times theirs: a pick of 1,000 s for a 1,400 s deadline was not flagged."""
    from dlperf.predict import roofline

    factor, whose = roofline.slowest_factor()
    assert (round(factor, 3), whose) == (1.493, "on the 74 GPU steps dlperf measured")
    tight = cost.costs(RESNET, [prediction("T4", 1.0)], 16_000, "", {}, deadline_s=1400)  # 1.40x the 1,000 s
    assert "1.49 times the predicted step (the 10th percentile of the error on the 74 GPU steps dlperf measured)" in (
        " ".join(view.lines(tight, "not measured")))  # fmt: skip
    monkeypatch.setitem(roofline.MEASURED_GPU, "p10_pct", -10.0)  # the published band the wider one again
    factor, whose = roofline.slowest_factor()
    assert (round(factor, 2), whose) == (1.30, "of published measurements, held out")


def test_the_risk_is_in_the_json_and_both_bands_are_said_beside_the_published_one():
    """The JSON of predict --cost and advise gave the pick within the deadline bare, and the uncertainty note quoted
    the published band (1.30) four lines under a risk line at 1.49: the JSON carries the risk, the note both bands."""
    from dlperf.commands.predict import prediction_notes
    from dlperf.predict import roofline

    tight = cost.costs(RESNET, [prediction("T4", 1.0)], 16_000, "", {}, deadline_s=1400)
    risk = cost.to_json(tight)["within_deadline_at_risk"]
    assert risk == {"factor": pytest.approx(1.4925, abs=1e-4), "whose": "on the 74 GPU steps dlperf measured",
                    "time_s": pytest.approx(1492.5, abs=0.1)}  # fmt: skip
    roomy = cost.costs(RESNET, [prediction("T4", 1.0)], 16_000, "", {}, deadline_s=1500)
    assert cost.to_json(roomy)["within_deadline_at_risk"] is None
    assert cost.to_json(cost.costs(RESNET, [prediction("T4", 1.0)], 16_000, "", {}))["within_deadline_at_risk"] is None
    (note,) = [n for n in prediction_notes(RESNET, [], [], []) if n.startswith("uncertainty: ")]
    assert note.endswith(f"; {roofline.measured_gpu()}")
    assert "-33% to +4% on the 74 GPU steps dlperf measured itself" in roofline.measured_gpu()
    assert roofline.measured_gpu().endswith("the measured step 0.96 to 1.49 times the predicted)")
