"""The best-mode view (`dlperf table --best`) names a mode whose speed-up's interval holds 1x as not told apart from
fp32, as the fastest-framework lines do: tensorflow's compile on tiny-alexnet-s read "1.06x [0.95-1.26]" as the best."""

import random

from conftest import make_cell
from dlperf.report import best


def rows(spread: float):
    cells = [make_cell("tiny-alexnet-s", framework="tensorflow", mode=m, median_s=s, n=50, key=m)
             for m, s in (("fp32", 0.00724), ("compile", 0.00685))]  # fmt: skip
    rng = random.Random(0)
    samples = {c.key: [[c.median_s * rng.uniform(1 - spread, 1 + spread) for _ in range(50)]] for c in cells}
    return best.build(cells, samples)


def test_a_best_mode_whose_interval_holds_one_is_not_told_apart_from_fp32():
    [row] = rows(0.5)
    assert row.mode == "compile" and row.ci_low < 1 < row.ci_high
    assert best.values(row)[-1].endswith("], not told apart")


def test_a_best_mode_told_apart_reads_as_before():
    [row] = rows(0.01)
    assert row.ci_low > 1 and best.values(row)[-1] == f"{row.speedup:.2f}x [{row.ci_low:.2f}-{row.ci_high:.2f}]"


def test_an_interval_of_one_process_a_side_says_it_holds_only_that_processs_noise():
    """A run of one process per cell read "fused 2.13x [2.02-2.31]" for tiny-alexnet-r, and nothing more, where
    three processes each timed fused 0.95x of fp32 (a plain loop: 1.02x); the fastest-framework lines said so."""
    from dlperf.store.records import LossCheckRecord

    one = rows(0.01)
    assert one[0].processes == 1 and "interval rests on the steps of one process a side" in best.notes(one)[-1]
    assert best.notes(one)[-1] in best.render_markdown(one)  # the Markdown view says its notes too
    cells = [make_cell("tiny-alexnet-s", mode=m, median_s=s, n=50, key=m, loss_check=LossCheckRecord(True))
             for m, s in (("fp32", 2.0), ("fused", 1.0))]  # fmt: skip
    rng = random.Random(0)
    samples = {c.key: [[c.median_s * rng.uniform(0.9, 1.1) for _ in range(20)] for _ in range(3)] for c in cells}
    three = best.build(cells, samples)
    assert three[0].processes == 3 and not best.notes(three)
    samples["fused"] = samples["fused"][:1]  # one process beside fp32's three: a prediction from their spread
    beside = best.build(cells, samples)
    assert beside[0].processes == 3 and not best.notes(beside)


def test_fp32_beside_a_mode_left_out_by_its_loss_check_does_not_read_as_measured_alone():
    """bf16 timed 48.4 ms against fp32's 81.6 ms and failed its loss check: the row read '-: fp32 alone was
    measured'."""
    from dlperf.store.records import LossCheckRecord

    failed = LossCheckRecord(False, "loss 2.3 at step 2 is 0.7 from fp32's 1.6")
    cells = [make_cell("cancel", median_s=0.0816, n=25), make_cell("cancel", mode="bf16", median_s=0.0484, n=41,
                                                                  loss_check=failed)]  # fmt: skip
    [row] = best.build(cells, {})
    assert best.values(row)[-1] == "-: bf16 left out (notes)"
    assert best.notes([row]) == ["cancel torch cpu:1: left out: bf16 (its loss check failed)"]


def test_the_note_says_per_mode_left_out_why():
    """bf16 failed its loss check and fp16's loss was nan after its timed steps (it failed its check too): the note
    read 'bf16, fp16 left out: the loss check failed or the loss was not finite', which, for neither."""
    from dlperf.store.records import LossCheckRecord

    failed = LossCheckRecord(False, "loss did not decrease: 2.3 -> 2.3 while fp32 went 2.25 -> 1.97")
    cells = [make_cell("blown", median_s=0.000368, n=2381),
             make_cell("blown", mode="bf16", median_s=0.0006, n=1500, loss_check=failed),
             make_cell("blown", mode="fp16", median_s=0.0009, n=900, loss_check=failed, loss_finite=False),
             make_cell("blown", mode="fused", median_s=0.0003, n=900, loss_check=LossCheckRecord(True),
                       loss_finite=False)]  # fmt: skip
    [row] = best.build(cells, {})
    assert best.notes([row]) == [
        "blown torch cpu:1: left out: bf16 (its loss check failed), fp16 (its loss was not finite, and its loss check "
        "failed), fused (its loss was not finite)"
    ]
    assert row.to_json()["why_rejected"]["bf16"] == "its loss check failed"


def test_a_best_mode_whose_loss_was_not_checked_says_so():
    """`dlperf run --no-loss-check` of bf16 on a model whose logits bf16 rounds away: `table --best` named bf16, 1.58x
    [1.53-1.65], and nothing more, where its check, run, fails ("loss 2.3 at step 2 is 0.7 from fp32's 1.6")."""
    from dlperf.store.records import LossCheckRecord

    def row(check):
        cells = [make_cell("cancel", median_s=0.043, n=94), make_cell("cancel", mode="bf16", median_s=0.0271, n=146,
                                                                     loss_check=check)]  # fmt: skip
        return best.build(cells, {})

    [unchecked] = row(None)
    assert (
        unchecked.mode == "bf16"
        and "bf16's loss was not checked against fp32 (no check ran: --no-loss-check)" in (best.notes([unchecked])[0])
    )
    profiled = make_cell("cancel", mode="bf16", median_s=0.0271, n=146)  # `dlperf profile` turns the check off itself
    [by_profile] = best.build([make_cell("cancel", median_s=0.043, n=94), profiled], {}, {profiled.run_id: "profile"})
    assert "(no check ran: dlperf profile checks no loss (dlperf run --modes does))" in best.notes([by_profile])[0]
    [cut] = row(LossCheckRecord(None, "the check did not finish: the cell's --timeout"))
    assert "(the check did not finish: the cell's --timeout)" in best.notes([cut])[0]
    [passed] = row(LossCheckRecord(True))
    assert not best.notes([passed])


def test_a_best_mode_without_an_fp32_step_says_why_it_has_no_speed_up():
    # `dlperf table --best --modes fp16` read "fp16 1.83 ms -" under "speed-up [95% CI]", with nothing to say why
    [row] = best.build([make_cell("tiny-fcn-r", mode="fp16", median_s=0.00183, n=292)], {})
    assert row.mode == "fp16" and best.values(row)[-1] == "-: no fp32 step to compare with"


def test_a_run_of_fp32_alone_says_once_how_to_measure_modes_to_compare():
    """`dlperf table --best` on `make run`'s run read "-: fp32 alone was measured" on each of its 14 rows and nothing
    more: a note says what would give it modes to compare. A run with one other mode somewhere has no such note."""
    alone = best.build([make_cell(w, median_s=0.5, n=10, key=w) for w in ("fcn-s", "lstm")], {})
    assert [best.values(r)[-1] for r in alone] == ["-: fp32 alone was measured"] * 2
    assert best.notes(alone) == [best.FP32_ALONE] and best.FP32_ALONE in best.render_markdown(alone)
    assert "dlperf run --modes fp32,bf16" in best.FP32_ALONE and "dlperf optimize" in best.FP32_ALONE
    cells = [make_cell("fcn-s", median_s=0.5, n=10, key="a"), make_cell("lstm", median_s=0.5, n=10, key="b"),
             make_cell("lstm", mode="fused", median_s=0.6, n=10, key="c", loss_check=None)]  # fmt: skip
    assert best.FP32_ALONE not in best.notes(best.build(cells, {}))


def test_a_speed_up_of_a_disturbed_step_is_marked_as_the_step_is():
    """The report's fastest-mode table read 'tiny-resnet-56 cpu:2 0.305? channels_last 23.9 ms 12.72x' for an fp32
    step disturbed by 50% load and an unsettled warm-up: the step marked, its ratio not."""
    cells = [make_cell("tiny-alexnet-s", framework="tensorflow", mode=m, median_s=s, n=50, key=m)
             for m, s in (("fp32", 0.00724), ("compile", 0.00685))]  # fmt: skip
    cells[0].warnings = ["other processes used 50% of the CPUs while this cell was timed"]
    rng = random.Random(0)
    samples = {c.key: [[c.median_s * rng.uniform(0.99, 1.01) for _ in range(50)]] for c in cells}
    [row] = best.build(cells, samples)
    assert row.doubtful and best.values(row)[-1].startswith(f"{row.speedup:.2f}x? [")
    assert best.DOUBTFUL_SPEEDUP in best.legend([row])
    [steady] = rows(0.01)
    assert not steady.doubtful and best.DOUBTFUL_SPEEDUP not in best.legend([steady])
