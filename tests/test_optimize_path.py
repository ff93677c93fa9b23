"""`dlperf optimize` recommends what its rounds built on: a mode whose round did not take it (not told apart from the
mode it would replace, on the fp32 processes measured by then) was recommended at the end against every fp32 process
(channels_last, 1.69x), where the optimizer round and the loader search had run on fp32 and foreach, and the recipe
carried no loader. The final figures' faster mode is said, with the command that sets the two apart."""

from dlperf.optimize import Searcher
from dlperf.optimize_results import Candidate


def cand(mode: str, speedup: float | None) -> Candidate:
    interval = (speedup * 0.9, speedup * 1.1) if speedup else (None, None)
    return Candidate(mode, "ok", median_s=0.02 / (speedup or 1), processes=2, speedup=speedup, ci_low=interval[0],
                     ci_high=interval[1], loss_ok=True, told_apart=speedup is not None)  # fmt: skip


def searcher(path: list[str]) -> Searcher:
    s = Searcher.__new__(Searcher)
    s.path, s.notes, s.off_path = path, [], None
    s.interrupted, s.reached, s.dimension_of = None, [], {}
    return s


def test_the_recommendation_is_the_fastest_the_rounds_took_and_a_faster_one_off_their_path_is_said():
    cands = [cand("fp32", None), cand("channels_last", 1.69), cand("foreach", 1.2), cand("foreach+jemalloc", 1.1)]
    s = searcher(["fp32", "foreach", "foreach+jemalloc"])
    assert s._on_path(cands).mode == "foreach" and s.off_path == "channels_last"
    [note] = s.notes
    assert note.startswith("channels_last: 1.69x against every fp32 process at the end, yet its round did not take it")
    assert note.endswith("so the search went on from foreach+jemalloc: `dlperf run --modes channels_last,foreach "
                         "--repeats 3` sets the two apart")  # fmt: skip


def test_a_search_that_kept_fp32_recommends_nothing_and_says_which_mode_the_end_set_faster():
    s = searcher(["fp32"])
    assert s._on_path([cand("fp32", None), cand("channels_last", 1.69)]) is None
    assert "so the search kept fp32: `dlperf run --modes channels_last,fp32 --repeats 3`" in s.notes[0]
    agreed = searcher(["fp32", "channels_last"])
    assert agreed._on_path([cand("fp32", None), cand("channels_last", 1.69)]).mode == "channels_last"
    assert agreed.notes == [] and agreed.off_path is None


def test_a_search_that_measured_no_candidate_is_no_keep_fp32_in_its_json():
    """`optimize --format json` of a search whose budget measured fp32 alone gave `"best": {"mode": "fp32",
    "speedup": 1.0}` and an fp32 recipe, which a script reads as "keep fp32"; the text said "not searched"."""
    from dlperf.optimize_results import Search

    base = cand("fp32", None)
    alone = Search("tiny-fcn-r", "cpu", 1, 1, base, [base], None, cells=0)
    kept = Search("tiny-fcn-r", "cpu", 1, 1, base, [base, cand("bf16", 1.01)], None, cells=1)
    assert alone.to_json()["best"] is None and alone.to_json()["recipe"] is None
    assert kept.to_json()["best"] == {"mode": "fp32", "median_s": 0.02, "speedup": 1.0}


def test_a_round_an_interrupt_cut_short_is_no_round_that_did_not_take_its_mode():
    """Ctrl-C inside the precision round: its bf16, measured and told apart at 1.5x, was said 'its round did not take
    it', and no mode was recommended, where before it was."""
    s = searcher(["fp32"])
    s.interrupted, s.reached, s.dimension_of = "the precision round", ["precision"], {"bf16": "precision"}
    assert s._on_path([cand("fp32", None), cand("bf16", 1.5)]).mode == "bf16" and s.notes == []
