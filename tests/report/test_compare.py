"""`dlperf compare A B`: the statistics on synthetic processes, then the command line on stores built directly."""

import json
import statistics

import pytest

from conftest import FAST, dlperf, one_line_error
from dlperf.cli import main
from dlperf.report import compare as cmp
from dlperf.report.compare import Verdict, compare, holm
from report.runs import (
    BASE,
    OTHER_MACHINE,
    SLOWER,
    at_levels,
    cell,
    make_db,
    processes,
    record,
)


def one_cell(a_procs, b_procs, **kwargs) -> cmp.CellResult:
    c = cell()
    result = compare([record(c, a_procs)], [record(c, b_procs)], {c.cell.key: a_procs}, {c.cell.key: b_procs}, **kwargs)
    [only] = result.cells
    return only


# ----------------------------------------------------------------------------------------------------------------------
# The statistics


def test_a_clear_slowdown_is_slower_and_a_regression_only_beyond_the_threshold():
    a, b = processes(1, 3, 0.100), processes(2, 3, 0.130)
    result = one_cell(a, b, threshold=0.05)
    assert result.verdict == Verdict.SLOWER and result.regression
    assert result.ratio == pytest.approx(1.3, rel=0.05)
    assert result.ci_low < result.ratio < result.ci_high and result.ci_low > 1
    assert result.p_holm < 0.05 and len(result.a_process_medians) == len(result.b_process_medians) == 3
    lenient = one_cell(a, b, threshold=0.5)
    assert lenient.verdict == Verdict.SLOWER and not lenient.regression


def test_a_regression_timed_on_a_busy_machine_says_so():
    """A user's tiny-fcn-r read x1.975 slower, a regression (exit 1), with other processes on 86% of the CPUs while
    B was timed, and compare said nothing of it while table, crossover, fit and plot did."""
    from dataclasses import replace

    c = cell()
    a, b = processes(1, 3, 0.100), processes(2, 3, 0.130)
    quiet, loaded = record(c, a), replace(record(c, b), others_cpu_share=0.86, steal_fraction=0.05)
    result = compare([quiet], [loaded], {c.cell.key: a}, {c.cell.key: b})
    [only] = result.cells
    assert only.regression and only.busy == "B: other processes used 86% of the CPUs, CPU steal 5%"
    lines = cmp.summary_lines(result)
    assert f"(timed on a busy machine: {only.busy})" in lines[1]
    assert "note: timed on a busy machine" not in "\n".join(lines)  # said once, on the regression's line
    same = processes(5, 3, 0.100)  # a cell not slower, timed while B's machine was busy: the note names it
    beside = replace(record(cell("other"), same), others_cpu_share=0.5)
    both = compare(
        [quiet, record(cell("other"), a)],
        [loaded, beside],
        {c.cell.key: a, "other|torch|cpu|1|fp32": a},
        {c.cell.key: b, "other|torch|cpu|1|fp32": same},
    )
    said = "note: timed on a busy machine, so their ratios measure its load as much as the runs"
    assert f"{said}: other torch cpu:1 fp32 (B: other processes used 50%" in "\n".join(cmp.summary_lines(both))
    assert "fcn-r torch cpu:1 fp32 (B:" not in cmp.summary_lines(both)[-1]
    calm = compare([quiet], [replace(loaded, others_cpu_share=0.05, steal_fraction=0.0)], {c.cell.key: a},
                   {c.cell.key: b})  # fmt: skip
    assert calm.cells[0].busy == "" and "busy" not in "\n".join(cmp.summary_lines(calm))


def test_a_clear_speedup_is_faster_and_never_a_regression():
    result = one_cell(processes(3, 3, 0.100), processes(4, 3, 0.080), threshold=0.0)
    assert result.verdict == Verdict.FASTER and not result.regression
    assert result.ci_high < 1 and result.ratio == pytest.approx(0.8, rel=0.05)


def test_identical_distributions_show_no_significant_change():
    result = one_cell(processes(5, 4, 0.100), processes(6, 4, 0.100))
    assert result.verdict == Verdict.SAME and not result.regression
    assert result.ci_low < 1 < result.ci_high and result.p_holm >= 0.05


def test_an_interval_too_wide_to_tell_anything_is_too_little_data_not_no_change():
    """Two processes a side, one of each disturbed: 'x6.630 [0.000, 1069194920802.435] no significant change', which
    reads as evidence that nothing changed. An interval whose bounds are over WIDE times apart decides nothing."""
    wide = one_cell(at_levels(7, [0.0004, 0.0004]), at_levels(8, [0.0004, 0.02]))
    assert wide.verdict == Verdict.TOO_LITTLE_DATA and wide.ci_high / wide.ci_low > cmp.WIDE and not wide.regression
    assert wide.reason.startswith("a 95% interval of B/A whose bounds are over 10 times apart (its column) tells ")
    assert cmp.ratio_text(wide).endswith(", >1000]") and cmp.bound(0.0004) == "<0.001" and cmp.bound(1.5) == "1.500"
    narrow = one_cell(processes(5, 4, 0.100), processes(6, 4, 0.100))
    assert narrow.verdict == Verdict.SAME and narrow.ci_high / narrow.ci_low < cmp.WIDE
    assert wide.reason.endswith(cmp.ADVICE)  # two processes a side: three would help


def test_a_wide_interval_from_three_processes_a_side_does_not_ask_for_three():
    """Both runs measured with --repeats 3, their processes spread wide: the note asked to measure with --repeats 3
    or more, as both had."""
    wide = one_cell(at_levels(7, [0.0004, 0.0004, 0.0004]), at_levels(8, [0.0004, 0.02, 0.0004]))
    assert wide.verdict == Verdict.TOO_LITTLE_DATA and cmp.ADVICE not in wide.reason
    assert wide.reason.endswith("each side has 3 or more processes whose medians spread too far: measure both again "
                                "with more --repeats than 3, or with fewer other processes on the machine")  # fmt: skip


def test_one_process_per_side_is_too_little_data_though_a_raw_step_test_would_call_it_significant():
    """Why the test is on per-process medians: with one process per side, thousands of steps make any difference
    "significant" to a raw-step test, though the 2% here is well inside the process-to-process spread (5%)."""
    from scipy.stats import mannwhitneyu

    a, b = processes(7, 1, 0.100, steps=3000, between=0.05), processes(8, 1, 0.102, steps=3000, between=0.05)
    result = one_cell(a, b)
    assert result.verdict == Verdict.TOO_LITTLE_DATA and result.p is None and result.ci_low is None
    assert "A has 1 process" in result.reason and "B has 1 process" in result.reason
    assert "--repeats 3 or more" in result.reason
    assert mannwhitneyu(a[0], b[0]).pvalue < 1e-6


def test_the_raw_step_test_calls_process_noise_significant_and_the_per_process_test_does_not():
    """Processes differ by a few percent (a shared machine); the two sides differ by less than that spread."""
    from scipy.stats import mannwhitneyu

    a = at_levels(9, [0.096, 0.100, 0.103], steps=1000, within=0.01)
    b = at_levels(10, [0.098, 0.102, 0.104], steps=1000, within=0.01)

    pooled_a, pooled_b = [t for p in a for t in p], [t for p in b for t in p]
    assert mannwhitneyu(pooled_a, pooled_b).pvalue < 1e-3  # no true difference, yet "significant" on raw steps
    assert one_cell(a, b).verdict == Verdict.SAME


def test_processes_without_samples_do_not_count():
    a = [*processes(11, 1, 0.1), []]  # the second process failed before its first timed step
    result = one_cell(a, processes(12, 3, 0.1))
    assert result.verdict == Verdict.TOO_LITTLE_DATA and len(result.a_process_medians) == 1


def test_processes_the_cells_median_leaves_out_are_left_out_of_the_ratio_and_the_test_and_said():
    """B/A read 1.196 [0.008, 180.143] for A 0.190 s and B 27.4 ms: B's processes of 1 and 2 steps (2.31 s, 1.43 s),
    which its median leaves out (`stats.counted`), outweighed its one of 32. The ratio, the test and the process
    counts use the processes the medians count, and a note says which were left out."""
    steady = lambda level, n: [level * (1 + 0.001 * (i % 3)) for i in range(n)]  # noqa: E731
    a = [steady(0.133, 12), steady(0.247, 6), [1.62, 1.62]]
    b = [[2.31], steady(0.0274, 32), [1.43, 1.43]]
    result = one_cell(a, b)
    assert result.ratio == pytest.approx(0.0274 / ((0.133 + 0.247) / 2), rel=0.01)  # untested: B's median over A's
    assert (len(result.a_process_medians), len(result.b_process_medians)) == (2, 1)
    assert result.verdict == Verdict.TOO_LITTLE_DATA and result.left_out == "A 1 of 3, B 2 of 3"
    said = ("B has 1 process of 6 timed steps or more; measure both runs with --repeats 3 or more, each process timed "
            "for 6 steps or more (a longer --max-time), for a verdict")  # fmt: skip
    assert result.reason == said
    c = cell()
    whole = compare([record(c, a)], [record(c, b)], {c.cell.key: a}, {c.cell.key: b})
    [said] = [n for n in whole.notes() if "left out" in n]
    assert said.endswith("as the cells' medians leave them out: fcn-r torch cpu:1 fp32 (A 1 of 3, B 2 of 3)")
    assert not one_cell(processes(1, 3, 0.1), processes(2, 3, 0.1)).left_out


def test_zero_spread_of_the_per_process_medians_is_too_little_data():
    result = one_cell([[0.1, 0.1], [0.1]], [[0.2], [0.2, 0.2]])
    assert result.verdict == Verdict.TOO_LITTLE_DATA and "zero spread" in result.reason


def test_holm_against_a_hand_computed_example():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> raised to 0.06 (never below the one before)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []


def test_p_values_are_adjusted_together_across_the_cells_of_one_comparison(monkeypatch):
    raw = iter([0.01, 0.04, 0.03, 0.005])  # each below alpha on its own
    monkeypatch.setattr(cmp, "welch_log", lambda a, b, confidence: (next(raw), 1.1, 1.3, 1))
    cells = [cell(f"w{i}") for i in range(4)]
    procs = {c.cell.key: processes(i, 3, 0.1) for i, c in enumerate(cells)}
    result = compare([record(c, procs[c.cell.key]) for c in cells], [record(c, procs[c.cell.key]) for c in cells],
                     procs, procs)  # fmt: skip
    assert [c.p_holm for c in result.cells] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert [c.verdict for c in result.cells] == [Verdict.SLOWER, Verdict.SAME, Verdict.SAME, Verdict.SLOWER]
    # their intervals, each its own, leave out 1: said, or "no significant change" beside [1.1, 1.3] reads wrong
    assert cmp.summary_lines(result)[-1] == (
        "note: no significant change though the 95% interval leaves out 1: w1 torch cpu:1 fp32; w2 torch cpu:1 fp32: "
        "each interval is its cell's own, the verdict is adjusted for the 4 cells tested together (Holm)"
    )


def test_different_workload_definitions_are_not_comparable():
    a, b = cell(batch=64), cell(batch=128)
    pa, pb = processes(13, 3, 0.1), processes(14, 3, 0.2)
    result = compare([record(a, pa)], [record(b, pb)], {a.cell.key: pa}, {b.cell.key: pb})
    [only] = result.cells
    assert only.verdict == Verdict.NOT_COMPARABLE and only.reason == "the workloads differ: batch 64 -> 128"
    assert not result.regressions()


def test_a_workload_at_its_own_batch_is_the_workload_at_that_batch():
    """Issue: advise's thread search stores `fcn-r@b1024` (`NAME@bN`), a run `fcn-r` at its batch of 1024: `dlperf
    compare` of the two said "share no cell measured on both sides" of the same work. At another batch they differ."""
    plain, variant, other = cell("fcn-r", batch=1024), cell("fcn-r@b1024", batch=1024), cell("fcn-r@b64", batch=64)
    variant.workload.update(name="fcn-r@b1024", paper=None, ddp_batch=None)
    plain.workload.update(name="fcn-r", paper={"table": 7}, ddp_batch=4096)
    pa, pb = processes(13, 3, 0.1), processes(14, 3, 0.2)
    result = compare([record(variant, pa), record(other, pa)], [record(plain, pb)],
                     {variant.cell.key: pa, other.cell.key: pa}, {plain.cell.key: pb})  # fmt: skip
    [only] = result.cells
    assert only.key == variant.cell.key and only.verdict == Verdict.SLOWER and only.reason != "the workloads differ"
    assert [(u.key, u.why) for u in result.unmatched] == [(other.cell.key, "only in A")]
    assert len(only.a_process_medians) == len(only.b_process_medians) == 3  # each side's samples, under its own key


def test_cells_on_one_side_only_or_not_ok_are_listed_not_dropped():
    """A cell measured in A that B could not measure is a regression: failed, timed out, or unsupported (a candidate
    whose model now calls what the framework lacks passed a gate, exit 0, its cell a note)."""
    both, only_a, only_b, broken = cell("both"), cell("only-a"), cell("only-b"), cell("broken")
    lacking = cell("lacking")
    p = processes(15, 3, 0.1)
    a = [record(both, p), record(only_a, p), record(broken, p), record(lacking, p)]
    b = [record(both, p), record(only_b, p), record(broken, [], status="failed"),
         record(lacking, [], status="unsupported")]  # fmt: skip
    result = compare(a, b, {}, {})
    assert [c.key for c in result.cells] == [both.cell.key]
    assert {u.key: u.why for u in result.unmatched} == {
        only_a.cell.key: "only in A",
        only_b.cell.key: "only in B",
        broken.cell.key: "B: failed",
        lacking.cell.key: "B: unsupported",
    }
    said = cmp.summary_lines(result)
    assert "2 cells not compared" in said[-1]  # the others, measured in A and not in B, are regressions
    assert said[1] == ("2 regressions (measured in A, failed, timed out or unsupported in B): broken torch cpu:1 fp32 "
                       "(B: failed); lacking torch cpu:1 fp32 (B: unsupported)")  # fmt: skip
    assert [u.key for u in result.failed()] == [broken.cell.key, lacking.cell.key] and result.outcome() == "regression"
    result.other_hardware = True  # B's machine may lack what the cell needs (a GPU count, glibc's malloc): a note
    assert [u.key for u in result.failed()] == [broken.cell.key]
    assert "lacking torch cpu:1 fp32" in cmp.summary_lines(result)[-1]


def test_a_cell_failed_in_both_or_only_in_a_is_not_a_regression_and_an_unfinished_b_is_no_verdict():
    """Only a cell A measured and B could not fails a gate; one unsupported in A, failed in A too, or not in B is a
    note. B unfinished, with cells of A it planned and has not measured yet (pending), is no verdict (exit 2), not a
    pass: an interrupted candidate had passed. A cell B never planned is no more to come."""
    both, gone, unsupported, never = cell("both"), cell("gone"), cell("unsupported"), cell("never")
    waiting = cell("waiting")
    p = processes(15, 3, 0.1)
    a = [record(both, p), record(gone, p), record(unsupported, [], status="unsupported"),
         record(never, [], status="failed"), record(waiting, p)]  # fmt: skip
    b = [record(both, p), record(unsupported, p), record(never, [], status="timeout"),
         record(waiting, [], status="pending")]  # fmt: skip
    samples = {both.cell.key: p}
    result = compare(a, b, samples, samples)
    assert not result.failed() and result.outcome() == "no regression"  # a finished B's pending: none
    result.b_unfinished = "run 2 is unfinished (interrupted): 3 of 4 processes done"
    assert [u.key for u in result.awaited()] == [waiting.cell.key] and result.outcome() == "no verdict"
    assert cmp.summary_lines(result)[1] == (
        "no verdict: B's run 2 is unfinished (interrupted): 3 of 4 processes done, and it has not measured 1 cell of A "
        "yet; resume it (dlperf run --resume), then compare again: that is not a pass"
    )
    from dlperf.report.compare_side import Side

    sides = [Side(name, "x.db", i, "today", {}, [], {}) for i, name in enumerate("AB", 1)]
    awaited = cmp.to_json(result, *sides)["awaited_in_b"]
    assert awaited == [{"key": waiting.cell.key, "label": "waiting torch cpu:1 fp32"}]


def test_an_unfinished_b_whose_cell_has_fewer_processes_than_a_is_no_verdict_not_a_pass():
    """An interrupted candidate: its slowed cell had measured one process of three, "too little data", and the other
    cell's "no significant change" made it "no regression", exit 0. Its other processes are to come: no verdict. A
    cell B measured with as many processes as A, untested all the same, is not awaited."""
    slowed, fine, few = cell("slowed"), cell("fine"), cell("few")
    a3, b1, one = processes(15, 3, 0.1), processes(16, 1, 0.17), processes(17, 1, 0.1)
    result = compare([record(slowed, a3), record(fine, a3), record(few, one)],
                     [record(slowed, b1), record(fine, a3), record(few, one)],
                     {slowed.cell.key: a3, fine.cell.key: a3, few.cell.key: one},
                     {slowed.cell.key: b1, fine.cell.key: a3, few.cell.key: one})  # fmt: skip
    assert [c.verdict for c in result.cells] == [Verdict.TOO_LITTLE_DATA, Verdict.SAME, Verdict.TOO_LITTLE_DATA]
    assert result.outcome() == "no regression"  # B finished: what it measured is all there is
    result.b_unfinished = "run 2 is unfinished (interrupted): 3 of 6 processes done"
    assert [c.key for c in result.awaited()] == [slowed.cell.key] and result.outcome() == "no verdict"
    assert cmp.summary_lines(result)[1] == (
        "no verdict: B's run 2 is unfinished (interrupted): 3 of 6 processes done, and it has not measured 1 cell of A "
        "yet (or not all their processes); resume it (dlperf run --resume), then compare again: that is not a pass"
    )


def test_the_frameworks_and_workloads_one_side_has_none_of_are_said_as_wholes():
    """A run of four frameworks against make run's of PyTorch listed its 42 cells of JAX, TensorFlow and MXNet one by
    one ("fcn-s jax cpu:1 fp32 (only in B); fcn-s jax cpu:2 fp32 (only in B); ..."), 2,000 characters of note."""
    from conftest import make_cell

    p = processes(15, 3, 0.1)

    def made(workload, framework, threads=1):
        return make_cell(workload, framework=framework, threads=threads, median_s=0.1, n=10)

    a = [made("fcn-r", "torch"), made("fcn-r", "torch", 2), made("lstm", "torch")]
    b = [made("fcn-r", "torch"), *(made(w, f, t) for w in ("fcn-r", "lstm") for f in ("jax", "mxnet") for t in (1, 2)),
         made("lstm", "torch"), made("resnet-56", "torch")]  # fmt: skip
    result = compare(a, b, {c.key: p for c in a}, {c.key: p for c in b})
    assert [u.whole for u in result.unmatched][:2] == [None, ("framework", "jax")]
    assert cmp.not_compared(result.unmatched) == (
        "only in A: fcn-r torch cpu:2 fp32; only in B: every jax and mxnet cell (8), resnet-56 torch cpu:1 fp32"
    )


# ----------------------------------------------------------------------------------------------------------------------
# The command line, on stores built with the Store API


def in_process(capsys, *args: str) -> tuple[int, str]:
    """The same command line as `dlperf(...)`, without a child's interpreter start and scipy import (~1 s)."""
    code = main(["compare", *args])
    return code, capsys.readouterr().out


def test_cli_exit_code_gates_on_a_regression_beyond_the_threshold(tmp_path, capsys):
    db = tmp_path / "d.db"
    make_db(db, BASE, SLOWER)
    strict = dlperf("compare", "1", "2", "--format", "json", db=db)
    assert strict.returncode == 1, strict.stderr
    report = json.loads(strict.stdout)
    assert [r["key"] for r in report["regressions"]] == ["fcn-r|torch|cpu|1|fp32"]
    assert report["summary"]["slower"] == 1 and report["same_machine"]
    fcn = report["cells"][0]
    assert fcn["verdict"] == "slower" and len(fcn["a_process_medians"]) == 3 and fcn["p_holm"] < 0.05
    assert fcn["a_process_medians"] == pytest.approx([statistics.median(p) for p in BASE["fcn-r"]])
    assert (report["a"]["run_id"], report["b"]["run_id"]) == (1, 2)
    code, out = in_process(capsys, "1", "2", "--threshold", "0.5", "--db", str(db))
    assert code == 0 and "slower" in out and "no regression" in out


def test_cli_reference_forms(tmp_path, capsys):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_db(a, BASE, SLOWER)  # a.db alone: its latest run is the slower one
    make_db(b, BASE)
    for args in (["1", "2", "--db", str(a)], [f"{a}:1", str(a)], [str(b), f"{a}:2"], [f"{b}:1", "2", "--db", str(a)]):
        code, out = in_process(capsys, *args, "--format", "json")
        assert code == 1, args
        assert json.loads(out)["b"]["run_id"] == 2
    proc = dlperf("compare", str(a), str(b), "--format", "md")
    assert proc.returncode == 0 and "| fcn-r | torch | cpu:1 | fp32 |" in proc.stdout and "faster" in proc.stdout


@pytest.mark.parametrize(
    ("a", "b", "flags", "fragments"),
    [
        ("9", "1", [], ["A '9'", "no run 9"]),
        ("1", "{tmp}/missing.db", [], ["B '", "missing.db", "no such database file"]),
        ("{tmp}", "1", [], ["A '", "is a directory, not a database file"]),
        ("1", "{tmp}/d.db:7", [], ["B '", "no run 7"]),
        ("{tmp}/garbage.db", "1", [], ["A '", "garbage.db", "corrupt"]),
        ("1", "1", ["--threshold", "-0.1"], ["--threshold"]),
        ("1", "1", ["--alpha", "0"], ["--alpha"]),
        ("1", "1", ["--alpha", "1.5"], ["--alpha"]),
        ("1", "1", ["--format", "xml"], ["--format 'xml'"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, a, b, flags, fragments):
    make_db(tmp_path / "d.db", BASE)
    (tmp_path / "garbage.db").write_text("not a database" * 50)
    args = [x.replace("{tmp}", str(tmp_path)) for x in (a, b)]
    assert main(["compare", *args, *flags, "--db", str(tmp_path / "d.db")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and all(f in lines[0] for f in fragments), lines


def test_cli_bad_input_in_a_child_process(tmp_path):
    one_line_error(dlperf("compare", "1", "2", db=tmp_path / "none.db"), "A '1'", "no such database file")


def test_cli_shows_both_machines_when_they_differ(tmp_path, capsys):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_db(a, BASE)
    make_db(b, SLOWER, fingerprint=OTHER_MACHINE)
    proc = dlperf("compare", str(a), str(b))
    assert proc.returncode == 1, proc.stderr
    assert "A: Xeon Test, 8 cores (alpha)" in proc.stdout and "B: EPYC Test, 64 cores (beta)" in proc.stdout
    assert "CPU model Xeon Test -> EPYC Test" in proc.stdout
    assert not json.loads(in_process(capsys, str(a), str(b), "--format", "json")[1])["same_machine"]
    again = tmp_path / "again.db"  # another run of a's machine, as a measured it (a run against itself is refused)
    make_db(again, BASE)
    code, out = in_process(capsys, str(a), str(again))
    assert code == 0 and "Xeon Test, 8 cores" not in out and "no significant change" in out


def test_cli_text_lists_unmatched_cells_and_too_little_data(tmp_path):
    db = tmp_path / "d.db"
    make_db(db, {"fcn-r": processes(30, 1, 0.1), "alexnet-r": processes(31, 3, 0.1)}, {"fcn-r": processes(32, 1, 0.1)})
    proc = dlperf("compare", "1", "2", db=db)
    assert proc.returncode == 2, proc.stderr  # the only shared cell could not be tested: no verdict, never a pass
    assert "too little data" in proc.stdout and "A has 1 process" in proc.stdout
    assert "only in A: alexnet-r torch cpu:1 fp32" in proc.stdout
    assert "no verdict: none of the 1 cell compared could be tested" in proc.stdout
    assert "no regression" not in proc.stdout


def test_a_comparison_where_no_cell_could_be_tested_is_no_verdict_and_names_the_untested_slowdown(tmp_path, capsys):
    """A user's CI once passed on a 3.8x slowdown: each side had one process, so no cell was tested."""
    db = tmp_path / "d.db"
    make_db(db, {"fcn-r": processes(50, 1, 0.1)}, {"fcn-r": processes(51, 1, 0.38)})
    code, out = in_process(capsys, "1", "2", "--db", str(db))
    assert code == 2 and "no verdict" in out and "no regression" not in out
    assert "note: untested, yet B/A above 1.05: fcn-r torch cpu:1 fp32 x3.8" in out
    code, out = in_process(capsys, "1", "2", "--db", str(db), "--format", "json")
    report = json.loads(out)
    assert code == 2 and report["outcome"] == "no verdict" and report["summary"]["tested"] == 0
    make_db(db, {"fcn-r": processes(52, 3, 0.1), "alexnet-r": processes(54, 1, 0.1)},
            {"fcn-r": processes(53, 3, 0.1), "alexnet-r": processes(55, 1, 0.1)})  # fmt: skip
    code, out = in_process(capsys, "3", "4", "--db", str(db))  # a tested cell, the other untested and the same
    assert code == 0 and "no regression: no tested cell significantly slower, and B/A above 1.05" in out
    assert "untested, yet" not in out


@pytest.mark.slow
def test_end_to_end_two_real_runs(tmp_path, torch):
    db = tmp_path / "d.db"
    for _ in range(2):
        run = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", "--repeats", "2", *FAST, db=db)
        assert run.returncode == 0, run.stderr
    proc = dlperf("compare", "1", "2", "--format", "json", db=db)
    [only] = json.loads(proc.stdout)["cells"]
    assert only["verdict"] in {v.value for v in Verdict} and len(only["a_process_medians"]) == 2
    # two processes a side on a busy machine may give an interval too wide to decide: no verdict, exit 2, never a pass
    undecided = only["verdict"] == Verdict.TOO_LITTLE_DATA.value
    assert proc.returncode in ((2,) if undecided else (0, 1)), proc.stderr


def test_runs_without_a_common_cell_are_an_error_not_no_regression(tmp_path, capsys):
    """A script gating on the exit code must not read "nothing compared" as a pass."""
    db = tmp_path / "d.db"
    make_db(db, {"fcn-r": processes(40, 3, 0.1)}, {"alexnet-r": processes(41, 3, 0.1)})
    said = (
        "A (run 1) and B (run 2) share no cell measured on both sides: nothing compared "
        "(only in A: fcn-r torch cpu:1 fp32; only in B: alexnet-r torch cpu:1 fp32)"
    )  # which, not how many
    # the document a script or a PR comment reads says it too (`--format md >> $GITHUB_STEP_SUMMARY` wrote nothing)
    shown = {"text": "", "json": json.dumps({"error": said, "exit_code": 2}, indent=2) + "\n",
             "md": f"**dlperf: error** (exit code 2): {said}\n"}  # fmt: skip
    for fmt, out in shown.items():
        assert main(["compare", "1", "2", "--format", fmt, "--db", str(db)]) == 2
        captured = capsys.readouterr()
        assert captured.err.strip() == f"dlperf: error: {said}"
        assert captured.out == out


def test_runs_of_two_files_are_named_with_their_file(tmp_path, capsys):
    """Two database files' latest runs were both "run 2": which file is which was not said."""
    x, y = tmp_path / "x.db", tmp_path / "y.db"
    make_db(x, {"fcn-r": processes(40, 3, 0.1)}, {"fcn-r": processes(40, 3, 0.1)})
    make_db(y, {"alexnet-r": processes(41, 3, 0.1)}, {"alexnet-r": processes(41, 3, 0.1)})
    assert main(["compare", str(x), str(y)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"dlperf: error: A (run 2 of {x}) and B (run 2 of {y}) share no cell measured on both sides: nothing "
        "compared (only in A: fcn-r torch cpu:1 fp32; only in B: alexnet-r torch cpu:1 fp32)"
    )


def test_the_tables_title_names_the_files_of_two_files_runs(tmp_path, capsys):
    """ "B / A: run 1 against run 1" of two files read as a run against itself."""
    x, y = tmp_path / "x.db", tmp_path / "y.db"
    make_db(x, {"fcn-r": processes(40, 3, 0.1)})
    make_db(y, {"fcn-r": processes(41, 3, 0.1)})
    main(["compare", str(x), str(y)])
    assert "B / A: run 1 of y.db against run 1 of x.db" in capsys.readouterr().out
    make_db(db := tmp_path / "d.db", {"fcn-r": processes(40, 3, 0.1)}, {"fcn-r": processes(41, 3, 0.1)})
    main(["compare", "1", "2", "--db", str(db)])
    assert "B / A: run 2 against run 1," in capsys.readouterr().out


def test_hostile_workload_names_reach_the_terminal_escaped(tmp_path, capsys):
    hostile = "\x1b[2J\x1b]0;pwned\x07net\x9b31m[bold]x[/]"
    db = tmp_path / "d.db"
    make_db(db, {hostile: processes(50, 3, 0.1)}, {hostile: processes(51, 3, 0.1)})
    for fmt in ("text", "md"):
        main(["compare", "1", "2", "--format", fmt, "--db", str(db)])
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out, fmt
        assert "\\x1b[2J\\x1b]0;pwned\\x07net\\x9b31m[bold]x[/]" in out, fmt


def test_runs_measured_with_other_settings_or_kernel_variables_say_so(tmp_path, capsys):
    """B measured with ATEN_CPU_CAPABILITY=default (PyTorch's slowest kernels), --pin and a longer --max-time: compare
    said nothing of either, though each changes the step, and noise.md says such runs can be told apart."""
    from dlperf.report.compare_side import settings_of

    a = settings_of({"pin": False, "timer": {"max_time": 1.0, "min_steps": 10}}, {"thread_env": {}})
    b = settings_of({"pin": True, "timer": {"max_time": 2.0, "min_steps": 10}},
                    {"thread_env": {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"}})  # fmt: skip
    sides = [cmp.Side(name, "x.db", i, "today", {}, [], {}, "", s) for i, (name, s) in enumerate((("A", a), ("B", b)))]
    assert cmp.setting_lines(*sides) == ["settings differ: --pin off -> on, --max-time 1.0 -> 2.0, ATEN_CPU_CAPABILITY "
                                         "unset -> default; each ratio measures them too"]  # fmt: skip
    assert cmp.setting_lines(sides[0], sides[0]) == []  # OMP_NUM_THREADS: replaced by each cell's own count, not said
    assert cmp.setting_changes(*sides)[-1] == {"setting": "ATEN_CPU_CAPABILITY", "a": None, "b": "default"}
    old = cmp.Side("A", "x.db", 1, "today", {}, [], {}, "", settings_of({"spec": 1}, {}))  # an older dlperf's run
    assert cmp.setting_lines(old, sides[0]) == []
