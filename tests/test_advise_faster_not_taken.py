"""`dlperf advise` on a 2-core machine answered 'at its best settings (1 thread, fp32; 1.44 s a step)' while its mode
search had timed bf16 at 0.768 s, whose loss check the budget cut short: no note said so. A mode timed faster than the
answer's and not taken is named, with why, in advise's notes and optimize's (whose 'Recommended: keep fp32 eager'
followed a compile it timed 2.58x faster, its loss check cut by the budget, with only the table's column to say so)."""

from dlperf.optimize import Candidate
from dlperf.optimize_loader import faster_not_taken

BUDGET = "the check did not finish: the search's --budget ran out"


def search(*results, best=None):
    """What advise and optimize give it: the answer's candidate (the best, else the baseline) and every result."""
    return best or results[0], list(results)


def test_a_faster_mode_whose_loss_check_the_budget_cut_is_named():
    fp32 = Candidate("fp32", "ok", median_s=1.4411)
    bf16 = Candidate("bf16", "ok", median_s=0.7676, speedup=1.88, ci_low=1.5, ci_high=2.3, loss_reason=BUDGET)
    slower = Candidate("bf16+foreach", "ok", median_s=1.6)
    failed = Candidate("bf16+compile", "timeout")
    assert faster_not_taken(*search(fp32, bf16, slower, failed)) == [
        "the mode search timed bf16 at 0.768 s a step, under fp32's 1.44 s, and did not take it: no loss check "
        f"passed ({BUDGET})"
    ]


def test_the_reasons_a_faster_mode_is_not_taken():
    fp32 = Candidate("fp32", "ok", median_s=1.0)
    broken = Candidate("fp16", "ok", median_s=0.5, loss_ok=False, loss_reason="the loss is nan")
    unsure = Candidate("bf16", "ok", median_s=0.9, loss_ok=True, speedup=1.1, ci_low=0.95, ci_high=1.3)
    said = faster_not_taken(*search(fp32, broken, unsure))
    assert said[0].endswith("did not take it: it no longer trains (the loss is nan)")
    assert said[1].endswith("not reliably faster than fp32 eager (95% interval of the speed-up 0.95-1.30x)")


def test_the_answers_own_mode_and_slower_ones_are_not_named():
    fp32 = Candidate("fp32", "ok", median_s=1.0)
    bf16 = Candidate("bf16", "ok", median_s=0.5, loss_ok=True, speedup=2.0, ci_low=1.8, ci_high=2.2)
    assert faster_not_taken(*search(fp32, bf16, best=bf16)) == []


def test_a_faster_mode_not_told_apart_says_so_before_its_loss_check_not_run():
    # optimize examples/my_model.py:make on 2 busy cores: bf16 0.200 s against fp32's 0.207 s, 0.78-1.32x, its loss
    # check not run (one process, not faster than fp32 as timed before it): the note read 'no loss check passed'
    fp32 = Candidate("fp32", "ok", median_s=0.207)
    reason = "not checked: 0.200 s per step is not faster than 0.158 s"
    bf16 = Candidate("bf16", "ok", median_s=0.200, speedup=1.04, ci_low=0.78, ci_high=1.32, loss_reason=reason)
    few = Candidate("fused", "ok", median_s=0.201, speedup=1.03, told_apart=False, loss_reason=reason)
    said = faster_not_taken(*search(fp32, bf16, few))
    assert said[0].endswith("did not take it: not reliably faster than fp32 eager (95% interval of the speed-up "
                            "0.78-1.32x)")  # fmt: skip
    assert said[1].endswith("did not take it: not reliably faster than fp32 eager")
