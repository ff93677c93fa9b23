import statistics

import pytest

from dlperf.measure import units
from dlperf.protocol import (
    Built,
    Checking,
    Compiled,
    Compiling,
    Done,
    Error,
    Flops,
    Memory,
    Sample,
    Sampled,
    Start,
    Unsupported,
    Warmup,
)
from dlperf.runner.collect import cell_figures, measurement
from dlperf.runner.launch import ChildResult
from dlperf.store.process import ProcessDetail, ProcessMeasurement
from dlperf.store.records import CompileRecord, LossCheckRecord, Provenance
from dlperf.vocab import Status

OK_CHILD = ChildResult(0, False, 3.0, "")


def events(samples, **extra):
    evs = [Built(10, 0.1, {"torch_threads": 1}), Warmup(6, True, [1, 1, 1, 1, 1, 1])]
    evs += [Sample(t) for t in samples]
    median = statistics.median(samples) if samples else None
    evs.append(Sampled(len(samples), median, steal_fraction=0.0, process_hwm_increase_bytes=100, **extra))
    return [*evs, Flops(1000), Memory({"live_tensor_peak_bytes": 4096}), Done()]


def test_ok_measurement_keeps_everything():
    m = measurement(events([1.0, 1.1, 0.9]), OK_CHILD, timeout=60)
    assert m.status == "ok" and m.samples == [1.0, 1.1, 0.9]
    assert m.detail.flops_per_step == 1000 and m.detail.memory == {"live_tensor_peak_bytes": 4096}
    assert m.detail.process_hwm_increase_bytes == 100


def test_timeout_keeps_partial_samples():
    evs = events([1.0, 2.0])[:-3]  # killed while counting FLOPs, after the timed steps
    m = measurement(evs, ChildResult(None, True, 60.0, ""), timeout=60)
    assert m.status == "timeout" and m.samples == [1.0, 2.0] and "kept 2 samples" in m.error


def test_crash_and_error_and_unsupported():
    crashed = measurement(events([])[:2], ChildResult(-11, False, 1.0, "Fatal Python error: x"), timeout=60)
    assert crashed.status == "failed" and "SIGSEGV" in crashed.error and "Fatal Python error" in crashed.error
    err = measurement([Error("RuntimeError: bad", "tb")], ChildResult(1, False, 1, ""), timeout=60)
    assert err.status == "failed" and err.error == "RuntimeError: bad" and err.detail.traceback == "tb"
    uns = measurement([Unsupported("no bf16")], OK_CHILD, timeout=60)
    assert uns.status == "unsupported" and uns.error == "no bf16"
    silent = measurement([], OK_CHILD, timeout=60)
    assert silent.status == "failed" and silent.error == "worker ended without a result"


def test_cell_is_the_median_of_process_medians():
    ms = [measurement(events(s), OK_CHILD, 60) for s in ([1.0] * 5, [2.0] * 5, [10.0] * 5)]
    fig = cell_figures(ms, batch=64, threads=1, cores=2, device="cpu")
    assert fig.median_s == 2.0 and fig.n == 15 and fig.samples_s == 32.0
    assert fig.per_process_medians == [1.0, 2.0, 10.0]
    assert fig.peak_mem_bytes == 4096 and fig.peak_mem_kind == "live_tensors"
    assert fig.memory.process_hwm_increase_bytes == 100
    assert any("noisy" in w for w in fig.warnings)


def test_a_step_slow_now_and_then_is_said_with_its_mean_and_a_steady_one_is_not():
    """Every fifth step four times as long: the median is the fast step's, the mean 60% above it, which a long run
    pays; steady steps, or a few slow ones (under 10% on the mean), say nothing."""
    stalling = [measurement(events([1.0, 1.0, 1.0, 1.0, 4.0] * 4), OK_CHILD, 60)]
    fig = cell_figures(stalling, batch=64, threads=1, cores=2, device="cpu")
    assert fig.median_s == 1.0 and fig.mean_s == pytest.approx(1.6)
    assert "slow steps now and then: the mean step, 1.60 s, is 60% above the median; a long run pays the mean" in (
        fig.warnings
    )
    for samples in ([1.0] * 20, [1.0] * 19 + [2.0]):
        steady = cell_figures([measurement(events(samples), OK_CHILD, 60)], batch=64, threads=1, cores=2, device="cpu")
        assert not any(w.startswith("slow steps") for w in steady.warnings)


def test_a_cold_first_step_timed_without_a_warm_up_is_said():
    """--max-warmup 0 timed tiny-resnet-56's first step (25.8 ms, the rest about 5) with the others, and said only
    "slow steps now and then"."""
    samples = [5.2, 1.0, 1.1, 1.0, 0.9, 1.0]
    built, _, *rest = events(samples)
    cold = [measurement([built, Warmup(0, True, []), *rest], OK_CHILD, 60)]
    said = cell_figures(cold, batch=64, threads=1, cores=2, device="cpu").warnings
    assert "no warm-up step ran (--max-warmup 0), and the first timed step took 5.2x the median: a cold step is " \
           "among the timed ones" in said  # fmt: skip
    warmed = cell_figures([measurement(events(samples), OK_CHILD, 60)], batch=64, threads=1, cores=2, device="cpu")
    assert not any("warm-up" in w for w in warmed.warnings)  # six warm-up steps before it: a slow step, not a cold one
    built, _, *rest = events([1.2, 1.0, 1.1, 1.0])
    even = [measurement([built, Warmup(0, True, []), *rest], OK_CHILD, 60)]
    assert not any("warm-up" in w for w in cell_figures(even, batch=64, threads=1, cores=2, device="cpu").warnings)


def test_a_process_left_out_of_the_median_is_said():
    """A process of one disturbed step beside one of 44 made the cell 0.856 s for a 6 ms step, unsaid; it is left out
    of the median (`stats.counted`), and the cell says so."""
    steady = [0.006 + 1e-5 * (i % 5) for i in range(44)]
    runs = [measurement(events(g), OK_CHILD, 60) for g in ([1.71], steady)]
    fig = cell_figures(runs, batch=64, threads=2, cores=2, device="cpu")
    assert fig.median_s == statistics.median(steady) and fig.n == 45 and fig.per_process_medians == [1.71, 0.00602]
    assert "1 process of fewer than 6 timed steps left out of the median, theirs 1.71 s (n=1): it is the median of " \
           "the 1 with more" in fig.warnings  # fmt: skip
    both = cell_figures([measurement(events(g), OK_CHILD, 60) for g in ([1.0], [2.0])], batch=64, threads=2, cores=2,
                        device="cpu")  # fmt: skip
    assert both.median_s == 1.5 and not any("left out" in w for w in both.warnings)


def test_processes_whose_medians_are_far_apart_are_said_and_make_the_cell_disturbed():
    """advise quoted 26.1 ms a step for a 2.4 ms one: one of its two processes ran under another's load at 49.8 ms, and
    the median of two medians is their mean. The pooled steps' IQR sat in the 663 fast ones, so nothing was said."""
    from dlperf.report.charts import doubtful
    from dlperf.store.records import CellRecord

    fast, slow = [0.0024 + 1e-6 * (i % 5) for i in range(663)], [0.0498 + 1e-6 * (i % 5) for i in range(183)]
    fig = cell_figures([measurement(events(g), OK_CHILD, 60) for g in (fast, slow)], batch=37, threads=2, cores=2,
                       device="cpu")  # fmt: skip
    said = [w for w in fig.warnings if w.startswith("processes disagree")]
    assert said == [
        f"processes disagree: their medians 2.40 ms to 49.8 ms, 20.7x apart, and the cell's "
        f"{units.seconds(fig.median_s)} their median: rerun on a quiet machine, with --repeats 3 or more"
    ]
    assert not any(w.startswith("noisy") for w in fig.warnings)  # the pooled IQR alone did not tell
    three = cell_figures([measurement(events(g), OK_CHILD, 60) for g in (fast, slow, slow)], batch=37, threads=2,
                         cores=2, device="cpu")  # fmt: skip
    [said] = [w for w in three.warnings if w.startswith("processes disagree")]
    assert said.endswith("rerun on a quiet machine")  # 3 processes already: not told to take 3
    cell = CellRecord(
        run_id=1,
        key="k",
        position=0,
        workload="w",
        framework="torch",
        device="cpu",
        threads=2,
        mode="fp32",
        batch=37,
        status=Status.OK,
        median_s=fig.median_s,
        n=fig.n,
        warnings=fig.warnings,
    )
    assert doubtful(cell)
    close = cell_figures([measurement(events(g), OK_CHILD, 60) for g in ([1.0] * 8, [1.3] * 8)], batch=1, threads=1,
                         cores=2, device="cpu")  # fmt: skip
    assert not any(w.startswith("processes disagree") for w in close.warnings)  # 1.3x: processes of a shared machine


def test_processes_that_disagree_are_advised_for_what_ran_where_one_was_left_out_for_its_few_steps():
    """A cell of --repeats 3 whose third process had only 2 steps (left out of the median) was told to rerun "with
    --repeats 3 or more": the advice counted the processes kept, not those run. It asks for what was missing: steps
    enough in each process; and --repeats 3 still where fewer than 3 ran."""
    groups = ([0.133 + 1e-4 * (i % 3) for i in range(12)], [0.247 + 1e-4 * (i % 3) for i in range(6)], [1.62, 1.62])
    fig = cell_figures([measurement(events(g), OK_CHILD, 60) for g in groups], batch=64, threads=2, cores=2,
                       device="cpu")  # fmt: skip
    [said] = [w for w in fig.warnings if w.startswith("processes disagree")]
    assert said.endswith("rerun on a quiet machine, with a --max-time long enough for 6 timed steps in each process "
                         "(1 of the 3 left out for fewer)")  # fmt: skip
    assert "--repeats" not in said
    shuffled = cell_figures([measurement(events(g), OK_CHILD, 60) for g in groups[::-1]], batch=64, threads=2,
                            cores=2, device="cpu")  # fmt: skip
    assert [w for w in shuffled.warnings if w.startswith("processes disagree")] == [said]  # in any order
    [alone] = [w for w in cell_figures([measurement(events(g), OK_CHILD, 60) for g in (groups[0], groups[1])],
               batch=64, threads=2, cores=2, device="cpu").warnings if w.startswith("processes disagree")]  # fmt: skip
    assert alone.endswith("rerun on a quiet machine, with --repeats 3 or more")


def test_with_several_processes_the_interval_is_that_of_the_median_of_their_medians():
    """Two processes whose steps differ (280 and 323 us): the pooled steps' order-statistics interval sat around one
    process and left out the cell's own median (302 us), so a cell said "302 us, 95% interval 280.1-280.7 us". The
    interval is now the median of medians' own (of two processes, t on their log medians): it holds the median and
    spans the two."""
    rng = statistics.NormalDist(0, 2e-6)
    a = [280e-6 + e for e in rng.samples(2001, seed=1)]
    b = [323e-6 + e for e in rng.samples(1001, seed=2)]
    fig = cell_figures([measurement(events(g), OK_CHILD, 60) for g in (a, b)], batch=1, threads=1, cores=2,
                       device="cpu")  # fmt: skip
    assert fig.ci_low_s <= fig.median_s <= fig.ci_high_s
    assert fig.ci_low_s < 281e-6 and fig.ci_high_s > 322e-6  # as far apart as the processes
    one = cell_figures([measurement(events(a), OK_CHILD, 60)], batch=1, threads=1, cores=2, device="cpu")
    assert 279e-6 < one.ci_low_s <= one.median_s <= one.ci_high_s < 281e-6  # one process: its steps' interval


def test_a_median_of_few_samples_is_flagged_and_enough_samples_are_not():
    few = cell_figures([measurement(events([1.0, 1.1]), OK_CHILD, 60)], batch=1, threads=1, cores=2, device="cpu")
    warned = few.warnings
    assert few.n == 2 and any(w.startswith("few samples: the median of 2 timed steps") for w in warned)
    enough = cell_figures([measurement(events([1.0] * 6), OK_CHILD, 60)], batch=1, threads=1, cores=2, device="cpu")
    assert not any(w.startswith("few samples") for w in enough.warnings) and enough.ci_low_s is not None


def test_a_median_without_a_95_percent_interval_is_warned_of_as_few_samples():
    # 5 steps have no 95% interval of the median (the 5's range covers 94%), and were not warned of: the table then
    # starred a thread count on a 1% gap between two such medians
    five = cell_figures([measurement(events([1.0] * 5), OK_CHILD, 60)], batch=1, threads=1, cores=2, device="cpu")
    assert five.ci_low_s is None and any(
        w.startswith("few samples: the median of 5 timed steps") for w in five.warnings
    )


def test_cell_warnings_and_failure_win():
    ok = measurement(events([1.0] * 5), OK_CHILD, 60)
    bad = measurement([], ChildResult(-9, False, 1.0, ""), 60)
    fig = cell_figures([ok, bad], batch=1, threads=4, cores=2, device="cpu")
    assert fig.status == "failed" and "SIGKILL" in fig.error
    assert fig.median_s == 1.0  # what was measured is kept beside the failure
    assert any("oversubscribed: 4 threads on 2 cores" in w for w in fig.warnings)


def test_a_loss_check_cut_short_keeps_the_timing_and_says_why():
    evs = [*events([1.0, 1.1])[:-1], Checking()]  # killed by the cell's timeout during the check
    m = measurement(evs, ChildResult(None, True, 600.0, ""), timeout=600)
    assert m.status == "ok" and m.samples == [1.0, 1.1]
    assert m.detail.loss_check == LossCheckRecord(None, "the check did not finish: the cell's --timeout")
    stopped = ChildResult(None, True, 60.0, "", stop_reason="compilation exceeded --compile-timeout 5 s")
    assert measurement([*events([])[:2], Compiling()], stopped, timeout=600).status == "timeout"


def test_a_candidate_stopped_after_timing_is_ok_with_a_warning():
    evs = [*events([3.0, 3.1])[:-3], Done(stopped_early="2.5x slower than the mode it would replace")]
    m = measurement(evs, OK_CHILD, timeout=60)
    assert m.status == "ok" and m.detail.stopped_early.startswith("2.5x slower")
    figures = cell_figures([m], batch=8, threads=1, cores=2, device="cpu")
    assert "stopped after timing: 2.5x slower than the mode it would replace" in figures.warnings


def test_each_cell_records_the_framework_version_and_a_version_not_pinned_is_a_note():
    from dlperf import envs

    pinned = envs.pinned_version("jax")
    assert pinned, "the jax constraints file pins jax"
    for version, noted in ((pinned, False), ("0.11.2", True)):
        m = measurement(events([1.0] * 5), OK_CHILD, 60)
        m.detail.framework_version, m.detail.environment = version, "dlperf"
        fig = cell_figures([m], batch=1, threads=1, cores=2, device="cpu", framework="jax")
        assert fig.provenance == Provenance("jax", version, pinned, "dlperf")
        assert fig.to_json()["framework"] == {"name": "jax", "version": version, "pinned": pinned,
                                              "environment": "dlperf"}  # fmt: skip
        note = f"jax 0.11.2 (from dlperf's environment) measured this cell, not the pinned {pinned}"
        assert (note in fig.warnings) is noted
    assert envs.same_release("2.13.0+cpu", "2.13.0")  # a local build label is the same release


def test_a_cell_takes_what_it_did_not_compute_from_a_sibling_and_says_which():
    from conftest import make_cell
    from dlperf.runner.collect import share

    donor = make_cell("w", threads=1, mode="bf16", flops_per_step=100, flops_by_dtype={"bf16": 100},
                      loss_check=LossCheckRecord(True, None, 1.5, {"steps": 8}), peak_mem_bytes=4096,
                      peak_mem_kind="live_tensors", memory_figures={"live_tensor_peak_bytes": 4096})  # fmt: skip
    m = measurement([*events([1.0] * 5)[:-3], Done()], OK_CHILD, 60)  # no FLOP count, no memory: not asked
    figures = cell_figures([m], batch=1, threads=2, cores=2, device="cpu")
    assert figures.flops_per_step is None and figures.loss_check is None and figures.peak_mem_bytes is None
    share(figures, [donor])
    assert figures.flops_per_step == 100 and figures.flops_by_dtype == {"bf16": 100}
    assert figures.to_json()["loss_check"] == {"ok": True, "reason": None, "seconds": 1.5, "steps": 8}
    assert (figures.peak_mem_bytes, figures.peak_mem_kind) == (4096, "live_tensors")
    # the donor's figures, and this process's own high-water mark over its timed steps
    assert figures.memory_figures == {"live_tensor_peak_bytes": 4096, "process_hwm_increase_bytes": 100}
    assert figures.shared_from == {"memory": donor.key, "flops": donor.key, "loss_check": donor.key}


def test_phases_say_where_a_process_spent_its_time():
    from dlperf.protocol import Affinity, Start
    from dlperf.runner.collect import phases

    t0 = 1000.0
    evs = [Start(1, "py", at=t0 + 0.1), Affinity([0], {}, at=t0 + 0.1), Built(1, 0.5, {}, at=t0 + 1.6),
           Warmup(3, True, [], at=t0 + 1.8), Sampled(5, 1.0, at=t0 + 2.8), Flops(10, at=t0 + 2.9),
           Memory({}, at=t0 + 3.1), Done(at=t0 + 3.1)]  # fmt: skip
    got = phases(evs, ChildResult(0, False, 3.2, "", started_at=t0))
    assert got == pytest.approx({"startup_s": 0.1, "framework_s": 1.0, "build_s": 0.5, "compile_s": None,
                                 "gate_s": None, "warmup_s": 0.2, "timed_s": 1.0, "flops_s": 0.1, "memory_s": 0.2,
                                 "loss_check_s": None, "exit_s": 0.1})  # fmt: skip


def test_a_slow_compile_is_said_with_the_compilers_reasons_and_a_quick_clean_one_is_not():
    from dlperf.runner.collect import compile_warnings

    slow = CompileRecord(compile_s=140.0, graph_breaks=3, graph_break_reasons=["Unsupported: call_method item"],
                         recompiles=2)  # fmt: skip
    assert compile_warnings(slow, 0.025) == [
        "slow compile: 140 s, 5,600 steps' worth (3 graph breaks, the first: Unsupported: call_method item; "
        "2 recompiles after the first step)"
    ]
    assert compile_warnings(CompileRecord(compile_s=45.0, graph_breaks=0, recompiles=0), 0.5) == [
        "slow compile: 45 s, 90 steps' worth"
    ]
    assert compile_warnings(CompileRecord(compile_s=4.0, graph_breaks=1, recompiles=0), 0.5) == [
        "compiled with 1 graph break"
    ]
    assert compile_warnings(CompileRecord(compile_s=4.0, graph_breaks=0, recompiles=0), 0.5) == []


def test_a_process_without_a_sample_is_not_ok():
    """A worker that reports its result but took no timed step (--max-time 0) measured nothing: failed, not ok."""
    m = measurement(events([]), OK_CHILD, timeout=60)
    assert m.status == "failed" and "no timed step" in m.error
    fig = cell_figures([m], batch=64, threads=1, cores=2, device="cpu")
    assert fig.status == "failed" and fig.median_s is None


def test_a_loss_not_finite_in_one_process_of_several_marks_the_cell_and_says_how_many():
    def process(loss):
        return ProcessMeasurement(status=Status.OK, samples=[0.1, 0.1, 0.1], detail=ProcessDetail(loss=loss))

    figures = cell_figures([process(2.3), process("inf"), process(2.2)], batch=8, threads=1, cores=2, device="cpu")
    assert figures.status == "ok" and figures.loss_finite is False
    assert "loss not finite: inf after the timed steps (in 1 of 3 processes); the time is kept" in figures.warnings[0]
    assert cell_figures([process(None)], batch=8, threads=1, cores=2, device="cpu").loss_finite is None


def test_a_compiled_cells_wait_for_the_device_alone_is_a_phase_of_its_own():
    """`run --compile-at-once`: between its compilation and its warm-up a cell waited for the group's other cells
    (`gated`); the warm-up counts from the moment it held the device alone."""
    from dlperf.protocol import Affinity, Compiled, Compiling, Gated, Start
    from dlperf.runner.collect import phases

    t0 = 1000.0
    evs = [Start(1, "py", at=t0 + 0.1), Affinity([0], {}, at=t0 + 0.1), Built(1, 0.5, {}, at=t0 + 1.6),
           Compiling(at=t0 + 1.6), Compiled(20.0, at=t0 + 21.6), Gated(at=t0 + 31.1),
           Warmup(3, True, [], at=t0 + 31.3), Sampled(5, 1.0, at=t0 + 32.3), Done(at=t0 + 32.3)]  # fmt: skip
    got = phases(evs, ChildResult(0, False, 32.4, "", started_at=t0))
    assert got["compile_s"] == pytest.approx(20.0) and got["gate_s"] == pytest.approx(9.5)
    assert got["warmup_s"] == pytest.approx(0.2) and got["timed_s"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("reported", "said"),
    [
        ([], "while starting (before the worker's first event)"),
        ([Start(1, "py")], "while importing the framework and building the step"),
        ([Start(1, "py"), Built(10, 0.1, {})], "in the warm-up"),
        ([Start(1, "py"), Built(10, 0.1, {}), Compiling()], "while compiling (the first step)"),
        ([Start(1, "py"), Built(10, 0.1, {}), Compiling(), Compiled(9.0)], "in the warm-up"),
        ([Start(1, "py"), *events([1.0, 2.0])[:3]], "in the timed steps"),
        ([Start(1, "py"), *events([1.0, 2.0])[:-3]], "after the timed steps (counting FLOPs, measuring memory)"),
    ],
)
def test_a_timeout_says_what_the_cell_was_doing(reported, said):
    m = measurement(reported, ChildResult(None, True, 12.0, ""), timeout=12)
    n = sum(isinstance(e, Sample) for e in reported)
    kept = "1 sample" if n == 1 else f"{n} samples"  # "kept 1 samples" before
    assert m.status == "timeout" and m.error == f"exceeded --timeout 12 s {said} (kept {kept})"


def test_a_cell_stores_the_95_percent_interval_of_its_mean_step():
    """What a long run pays a step (a loader cell's waits for data included) and how sure: the loader view compares
    settings on it (`fastest.told_apart_long_run`)."""
    stalling = [measurement(events([1.0, 1.0, 1.0, 1.0, 4.0] * 4), OK_CHILD, 60)]
    fig = cell_figures(stalling, batch=64, threads=1, cores=2, device="cpu")
    assert fig.mean_s == pytest.approx(1.6) and fig.mean_ci_low_s < fig.mean_s < fig.mean_ci_high_s
    assert fig.median_s < fig.mean_ci_low_s  # the median is outside it: the slow steps are most of the cost
    assert fig.to_json()["mean_ci_low_s"] == fig.mean_ci_low_s
