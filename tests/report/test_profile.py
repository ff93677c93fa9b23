"""The verdict of a profiled step (`report/profile.py`), from constructed profiles: no framework, no child."""

from dataclasses import replace

import pytest

from dlperf.protocol import Profiled
from dlperf.report.cell_profile import achieved, achieved_text
from dlperf.report.profile import HIGHLY, MODERATELY, verdict
from dlperf.vocab import Bound


def step(ops_per_step=None, kernels_per_step=None, flops=None, **seconds) -> Profiled:
    return Profiled(steps=5, step_s=sum(seconds.values()), categories=seconds, flops=flops or {},
                    ops_per_step=ops_per_step, kernels_per_step=kernels_per_step)  # fmt: skip


def test_many_tiny_ops_are_dispatch_bound_on_a_cpu_with_the_figure():
    v = verdict(step(ops_per_step=4100, host=0.62, elementwise=0.2, matmul=0.18))
    assert (v.bound, v.level) == (Bound.LAUNCH, HIGHLY)
    assert v.figure == "host/dispatch 62% of the step, 4100 ops per step"
    assert v.modes == ("compile",)  # CUDA graphs do not run on a CPU


def test_on_a_gpu_idle_time_is_the_host_not_launching_fast_enough():
    v = verdict(step(kernels_per_step=900, host=0.05, idle=0.3, matmul=0.65), device="cuda:0")
    assert (v.bound, v.level) == (Bound.LAUNCH, HIGHLY) and v.modes == ("cuda_graphs", "compile")
    assert "900 kernels per step" in v.figure


def test_one_big_matrix_product_is_compute_bound():
    v = verdict(step(matmul=0.95, elementwise=0.03, host=0.02))
    # tf32 is CUDA's; channels_last's convolution kernels: no input shape here says it is not an image
    assert (v.bound, v.level) == (Bound.COMPUTE, HIGHLY) and v.modes == ("bf16", "channels_last")


def test_a_long_element_wise_chain_is_memory_bound():
    v = verdict(step(elementwise=0.7, normalization=0.1, optimizer=0.1, matmul=0.08, host=0.02))
    assert (v.bound, v.level) == (Bound.MEMORY, HIGHLY)
    assert v.modes == ("bf16", "channels_last", "fused") and "90% of the step" in v.figure


def test_the_loss_counts_on_the_memory_side():
    """A softmax cross-entropy over a large vocabulary (the LSTM's: a quarter of its step on a CPU) reads and writes
    the logits once each: it counted on neither side, so a step whose loss and element-wise work outweigh its matrix
    products read compute-bound."""
    v = verdict(step(matmul=0.40, loss=0.35, elementwise=0.10, host=0.02, other=0.13))
    assert (v.bound, v.level) == (Bound.MEMORY, MODERATELY)
    assert v.figure == "element-wise, normalization, pooling, copies, loss and update 45% of the step"


@pytest.mark.parametrize(("share", "expected"), [(0.04, None), (0.05, MODERATELY), (0.19, MODERATELY),
                                                 (0.20, HIGHLY)])  # fmt: skip
def test_input_bound_at_tensorflows_thresholds(share, expected):
    v = verdict(step(data=share, matmul=0.4, elementwise=0.3, other=0.3 - share))
    assert (v.bound is Bound.INPUT) == (expected is not None)
    if expected:
        assert v.level == expected and "more data-loader workers" in v.advice and v.modes == ()


@pytest.mark.parametrize(("loader", "threads", "cores", "said"), [
    ("w1", 1, 2, "more cores (w1's 1 worker and the step's 1 compute thread take the 2 cores"),
    ("w1", 1, 4, "more workers (w1's 1 worker and the step's 1 compute thread leave 2 of the 4 cores free)"),
])  # fmt: skip
def test_an_input_bound_loader_cell_is_told_more_workers_only_where_cores_are_free(loader, threads, cores, said):
    """`dlperf profile tiny-alexnet-s --data photos --loaders w1 --threads 1` on 2 cores said 'try: more data-loader
    workers', where w1's worker and the compute thread take both cores and run measured w1 and w2 slower than w0:
    the advice is the input pipeline view's (`report.data.more_loading`)."""
    from dataclasses import replace

    from conftest import make_cell
    from dlperf.loaders import oversubscribed, setting
    from dlperf.report.profile import against_run
    from dlperf.store.records import LoaderRecord

    workers = setting(loader).workers
    cell = replace(make_cell("tiny-alexnet-s", threads=threads, median_s=0.05), loader=loader)
    cell.data = LoaderRecord(loader, workers, threads, cores, oversubscribed(workers, threads, cores), "ImageNet-style "
                             "folder", 32, 100.0, 0.4, None, "high", None)  # fmt: skip
    v = against_run(verdict(step(data=0.4, matmul=0.3, elementwise=0.3)), cell, [cell])
    assert v.bound is Bound.INPUT and v.advice.startswith(said) and "more data-loader workers" not in v.advice
    assert "Pillow-SIMD" in v.advice  # less work a sample, for its kind of dataset
    plain = against_run(verdict(step(data=0.4, matmul=0.3, elementwise=0.3)), make_cell(median_s=0.05), [])
    assert plain.advice == "more data-loader workers"  # a cell without a loader record: nothing known of its cores


def test_a_cell_its_run_measured_faster_at_fewer_threads_is_told_to_take_fewer():
    """tiny-resnet-56 at 2 threads took 73.6 ms beside 8.02 ms at 1 on a shared machine, and its verdict said only
    "memory-bound: try channels_last, fused": the run's own faster thread count is the advice."""
    from conftest import make_cell
    from dlperf.report.profile import against_run

    two = make_cell("tiny-resnet-56", threads=2, median_s=0.0736, ci_low_s=0.07, ci_high_s=0.076, n=30)
    one = make_cell("tiny-resnet-56", threads=1, median_s=0.00802, ci_low_s=0.0079, ci_high_s=0.0081, n=30)
    v = against_run(verdict(step(matmul=0.3, elementwise=0.6, host=0.1)), two, [one, two])
    assert v.advice == "--threads 1 (measured in this run: 8.02 ms a step, 9.18x faster than at 2)"
    assert against_run(verdict(step(matmul=0.3, elementwise=0.6, host=0.1)), one, [one, two]).advice == ""
    other_mode = make_cell("tiny-resnet-56", threads=1, mode="bf16", median_s=0.001, n=30)
    assert against_run(verdict(step(matmul=0.3, elementwise=0.6, host=0.1)), two, [other_mode, two]).advice == ""


def test_a_mode_its_run_measured_faster_is_named_though_the_bound_does_not_call_for_it():
    """A memory-bound cell was told to try fused beside a compile cell of its run 3.2x faster, unsaid: compile is
    advised for launch-bound steps only."""
    from conftest import make_cell
    from dlperf.report.profile import against_run

    fp32 = make_cell("custom", median_s=0.0137, ci_low_s=0.0135, ci_high_s=0.0139, n=30)
    compiled = make_cell("custom", mode="compile", median_s=0.00426, ci_low_s=0.0042, ci_high_s=0.0043, n=30)
    v = against_run(verdict(step(matmul=0.1, elementwise=0.8, host=0.1)), fp32, [fp32, compiled])
    assert v.bound is Bound.MEMORY and "compile" not in v.modes
    assert v.advice == "measured faster in this run: --modes compile (4.26 ms a step, 3.22x faster)"
    fused = make_cell("custom", mode="fused", median_s=0.005, ci_low_s=0.0049, ci_high_s=0.0051, n=30)
    v = against_run(verdict(step(matmul=0.1, elementwise=0.8, host=0.1)), fp32, [fp32, fused])
    assert "fused" in dict(v.measured) and "measured faster in this run: --modes" not in v.advice  # said once


def test_a_mode_held_against_a_peak_it_has_none_of_is_not_held_against_fp32s():
    """A bf16 cell with fp32's peak alone read "200% of the measured fp32 peak (above it, so the profile's times are
    off)" on a GPU's tensor cores; a CUDA tf32 cell was held against fp32's peak, not tf32's."""
    from dlperf.report.profile import peak_of

    assert peak_of({"fp32": 5e13}, "bf16") == ("bf16", None)  # no figure: no share, as the table's utilization
    assert peak_of({"fp32": 5e13, "bf16": 1e13}, "bf16") == ("fp32", 5e13)  # fp32 measured faster: its kernels
    assert peak_of({"fp32": 5e13, "bf16": 4e14}, "bf16+channels_last") == ("bf16", 4e14)
    assert peak_of({"fp32": 5e13, "tf32": 4e14}, "tf32") == ("tf32", 4e14)
    v = verdict(step(flops={"matmul": 1e12}, matmul=0.01, elementwise=0.002), {"fp32": 5e13}, device="cuda:0",
                mode="bf16")  # fmt: skip
    assert "peak" not in v.figure


def test_a_mode_that_did_not_train_is_never_advised_from_its_time():
    """An fp16 cell 3.2x faster, its loss not finite, was advised ("measured faster in this run: --modes fp16"); a
    bf16 left out by the probe's guess ("no fast path") but measured faster is named, and the guess dropped."""
    from conftest import make_cell
    from dlperf.modes import Fit
    from dlperf.report.profile import against_run

    fp32 = make_cell("custom", median_s=0.0137, ci_low_s=0.0135, ci_high_s=0.0139, n=30)
    nan = make_cell("custom", mode="fp16", median_s=0.00426, ci_low_s=0.0042, ci_high_s=0.0043, n=30,
                    loss_finite=False)  # fmt: skip
    v = against_run(verdict(step(matmul=0.1, elementwise=0.8, host=0.1)), fp32, [fp32, nan])
    assert "fp16" not in v.advice
    bf16 = make_cell("custom", mode="bf16", median_s=0.00426, ci_low_s=0.0042, ci_high_s=0.0043, n=30)
    slow_probe = Fit.of("cpu", {}, {"fp32": 1e11, "bf16": 1e10})
    guessed = verdict(step(matmul=0.1, elementwise=0.8, host=0.1), fit=slow_probe)
    assert "bf16" in dict(guessed.left_out) and dict(guessed.left_out)["bf16"].startswith("no fast path")
    v = against_run(guessed, fp32, [fp32, bf16])
    assert "measured faster in this run: --modes bf16 (4.26 ms a step, 3.22x faster)" in v.advice
    assert "bf16" not in dict(v.left_out)
    two = make_cell("custom", threads=2, median_s=0.0137, ci_low_s=0.0135, ci_high_s=0.0139, n=30)
    nan_one = make_cell("custom", median_s=0.001, ci_low_s=0.0009, ci_high_s=0.0011, n=30, loss_finite=False)
    assert against_run(verdict(step(matmul=0.1, elementwise=0.8)), two, [two, nan_one]).advice == ""
    trained_one = make_cell("custom", median_s=0.001, ci_low_s=0.0009, ci_high_s=0.0011, n=30)
    assert against_run(verdict(step(matmul=0.1, elementwise=0.8)), two, [two, trained_one]).advice.startswith(
        "--threads 1")  # fmt: skip


def test_host_device_copies_are_transfer_bound():
    v = verdict(step(copy_h2d=0.25, copy_d2h=0.05, matmul=0.7), device="cuda:0")
    assert (v.bound, v.level) == (Bound.TRANSFER, HIGHLY) and "host<->device copies 30%" in v.figure
    assert "pinned" in v.advice


@pytest.mark.parametrize(("share", "expected"), [(0.02, Bound.COMPUTE), (0.03, Bound.LAUNCH), (0.15, Bound.LAUNCH)])
def test_launch_bound_from_3_percent_while_the_device_side_is_not_highly_bound(share, expected):
    v = verdict(step(host=share, matmul=0.4, elementwise=0.3, other=0.3 - share))  # the device side: moderately
    assert (v.bound, v.level) == (expected, HIGHLY if share >= 0.15 else MODERATELY)


def test_a_highly_compute_bound_step_is_not_called_launch_bound_for_a_moderate_host_share():
    assert verdict(step(host=0.05, matmul=0.9, elementwise=0.05)).bound is Bound.COMPUTE


def test_matrix_products_far_below_the_measured_peak_are_memory_bound():
    profile = step(matmul=0.8, elementwise=0.2, flops={"matmul": 0.8 * 1e9})  # 1 GFLOP/s achieved
    assert verdict(profile).bound is Bound.COMPUTE  # no peak: the shares decide
    low = verdict(profile, {"fp32": 1e11})
    assert low.bound is Bound.MEMORY and "1% of the measured fp32 peak" in low.figure
    near = verdict(profile, {"fp32": 2e9})
    assert near.bound is Bound.COMPUTE and "50% of the measured fp32 peak" in near.figure


def test_a_reduced_precision_is_advised_only_where_the_measured_peak_is_faster():
    profile = step(matmul=0.9, elementwise=0.1)
    assert verdict(profile, {"fp32": 1e11, "bf16": 4e10}).modes == ("channels_last",)
    assert verdict(profile, {"fp32": 1e11, "bf16": 4e11}).modes == ("bf16", "channels_last")


def test_a_mode_the_cell_runs_already_is_not_advised():
    memory = step(matmul=0.1, elementwise=0.9)
    assert verdict(memory, mode="fp32").modes == ("bf16", "channels_last", "fused")
    assert verdict(memory, mode="bf16+fused").modes == ("channels_last",)
    assert verdict(step(matmul=0.9, elementwise=0.1), mode="bf16+channels_last").modes == ()


def test_a_profile_without_time_has_no_verdict():
    assert verdict(Profiled(steps=0, step_s=0.0, categories={})) is None


def test_the_profilers_own_time_is_taken_out_of_host_so_the_shares_are_of_the_timed_step():
    """Profiling a CPU step made it 1.5x slower (tiny-resnet-56: 5.4 ms profiled, 3.6 ms timed), all of it host time
    between operators: left in `host`, a compute-bound step read launch-bound."""
    from dlperf.report.profile import shares, timed_categories

    profiled = step(ops_per_step=700, matmul=0.9, host=0.55, elementwise=0.05)  # 1.5 s profiled
    categories, timed = timed_categories(profiled, overhead=1.5)
    assert timed == pytest.approx(1.0) and sum(categories.values()) == pytest.approx(1.0)
    assert categories == pytest.approx({"matmul": 0.9, "host": 0.05, "elementwise": 0.05})
    assert shares(profiled, overhead=1.5)["matmul"] == pytest.approx(0.9)
    assert verdict(profiled, overhead=1.5).bound is Bound.COMPUTE  # launch-bound (host 37%) on the profiled figures
    assert verdict(profiled).bound is Bound.LAUNCH
    # more extra time than the host remainder holds: the rest is in the operators, scaled down to the timed step
    categories, timed = timed_categories(step(matmul=1.4, host=0.1), overhead=1.5)
    assert categories["host"] == 0 and categories["matmul"] == pytest.approx(1.0)


def test_a_profiled_step_faster_than_the_timed_one_is_scaled_up_to_it():
    """A TensorFlow LSTM profiled at 0.208 s beside a timed median of 0.301 s (busy timed steps) printed its dispatch
    floor of 43.6 ms as "21% of the step" (14% of 0.301 s), and the plot drew categories summing to 0.384 s as "% of
    the timed step (0.549 s)": the shares are of the timed step, every category scaled alike."""
    from dlperf.report.profile import shares, timed_categories, timed_floor

    profiled = step(ops_per_step=100, matmul=0.3, host=0.1, elementwise=0.1)  # 0.5 s profiled
    categories, timed = timed_categories(profiled, overhead=0.5)
    assert timed == pytest.approx(1.0) and sum(categories.values()) == pytest.approx(1.0)
    assert categories == pytest.approx({"matmul": 0.6, "host": 0.2, "elementwise": 0.2})
    assert shares(profiled, overhead=0.5) == pytest.approx(shares(profiled))  # the shares themselves stand
    assert timed_floor(profiled, 1e-3, 0.5) == pytest.approx((0.1, 0.1))  # of the timed second, not the profiled 0.5


def test_a_step_mostly_of_operators_of_no_class_says_so_and_the_lines_name_them():
    """A step of sort, nonzero and masked_select, 87% `other`, read "memory-bound (moderately): ... 11% of the step"
    and named none of its operators, though the profile kept them."""
    from dlperf.report.cell_profile import modules_text, top_ops_text

    ops = [{"name": "aten::sort", "self_s": 0.6, "calls": 3, "shapes": "[[64]]"},
           {"name": "aten::nonzero", "self_s": 0.2, "calls": 0.5, "shapes": "[[64]]"}]  # fmt: skip
    modules = [{"name": "head", "forward_s": 0.01, "backward_s": 0.0},
               {"name": "body", "forward_s": 0.5, "backward_s": 0.25}]  # fmt: skip
    profiled = replace(step(matmul=0.02, elementwise=0.11, other=0.87), top_ops=ops, modules=modules)
    v = verdict(profiled)
    assert v.figure.endswith("; operators of no class (other) 87% of the step: the top operators name them")
    assert top_ops_text(profiled) == ("top operators, self time a step (share of the profiled step): aten::sort "
                                      "0.600 s (60%, 3 calls), aten::nonzero 0.200 s (20%)")  # fmt: skip
    assert modules_text(profiled) == ("modules, forward + backward a step (share of the profiled step): body 0.500 s + "
                                      "0.250 s (75%), head 10.0 ms + 0 (1%)")  # fmt: skip
    assert "no class" not in verdict(step(matmul=0.6, other=0.4)).figure  # the products outweigh them


def test_the_dispatch_floor_is_ops_times_the_cost_and_its_share_of_the_step():
    from dlperf.report.profile import dispatch_floor, floor_count

    assert dispatch_floor(1000, 2e-6, 0.004) == pytest.approx((0.002, 0.5))
    assert dispatch_floor(1000, 2e-6) == pytest.approx((0.002, None))
    gpu = Profiled(steps=1, step_s=1.0, categories={}, ops_per_step=3000, kernels_per_step=900, leaf_ops_per_step=800)
    assert floor_count(gpu) == (900, "kernels")  # on a GPU, the launches
    cpu = Profiled(steps=1, step_s=1.0, categories={}, ops_per_step=3000, leaf_ops_per_step=800)
    assert floor_count(cpu) == (800, "leaf ops")  # the operators doing work, not their wrappers
    assert floor_count(step(ops_per_step=3000, host=1.0)) == (3000, "ops")  # a profiler that cannot tell them apart


def test_a_launch_verdict_cites_the_dispatch_floor_when_a_cost_was_measured():
    profile = step(ops_per_step=4100, host=0.62, elementwise=0.2, matmul=0.18)  # a 1 s step
    v = verdict(profile, launch_cost_s=1e-4)
    assert v.figure == ("host/dispatch 62% of the step, 4100 ops per step; "
                        "dispatch floor 0.410 s (41% of the step): 4100 ops x 100 µs")  # fmt: skip
    assert verdict(profile).figure == "host/dispatch 62% of the step, 4100 ops per step"
    assert "floor" not in verdict(step(ops_per_step=10, matmul=0.95, host=0.05), launch_cost_s=1e-4).figure
    from dlperf.report.profile import floor_words

    tiny = floor_words((0.000266, 0.004), step(ops_per_step=100, host=0.62), 2.66e-6)  # not "(0% of the step)"
    assert tiny.startswith("dispatch floor 266 µs (under 1% of the step)"), tiny


def test_on_a_cpu_a_dispatch_floor_above_the_host_share_makes_a_step_of_tiny_operators_launch_bound():
    """benchmarks/workloads/many_small_ops.py: 542 operators on 16x32 tensors, each one's dispatch inside its self
    time, so the shares say element-wise 83%; 542 x 2.66 us is 40% of its 3.6 ms step."""
    profile = Profiled(steps=3, step_s=0.0036, categories={"elementwise": 0.003, "matmul": 0.0004, "host": 0.0002},
                       ops_per_step=2023, leaf_ops_per_step=542)  # fmt: skip
    assert verdict(profile).bound is Bound.MEMORY  # without a measured dispatch cost: the shares alone
    v = verdict(profile, launch_cost_s=2.66e-6)
    assert (v.bound, v.level) == (Bound.LAUNCH, HIGHLY) and v.modes == ("compile",)
    assert v.figure.startswith("dispatching operators (the dispatch floor) 40% of the step, 2023 ops per step")
    # on a GPU launches overlap the device's work: its own timeline (host, idle) decides, not the floor
    assert verdict(profile, device="cuda", launch_cost_s=2.66e-6).bound is Bound.MEMORY


def test_without_dlperf_peaks_dispatch_cost_the_one_the_profiled_process_measured_counts():
    """A 56 µs step of Linear(16, 4), profiled 4-17x slower: without `dlperf peak`'s cost its verdict changed from
    run to run; the profiled process's own measurement gives the floor, and `dlperf peak`'s still wins."""
    shares = {"loss": 0.5, "matmul": 0.3, "elementwise": 0.15, "host": 0.05}
    profile = Profiled(steps=5, step_s=56e-6, categories={k: v * 56e-6 for k, v in shares.items()},
                       ops_per_step=44, leaf_ops_per_step=11, dispatch_s=1.9e-6)  # fmt: skip
    v = verdict(profile)
    assert (v.bound, v.level) == (Bound.LAUNCH, HIGHLY)
    assert v.figure.endswith("dispatch floor 20.9 µs (37% of the step): 11 leaf ops x 1.90 µs")
    assert verdict(profile, launch_cost_s=1e-7).bound is Bound.MEMORY  # dlperf peak's, measured: 2% of the step


def test_each_category_is_placed_on_the_roofline_of_the_measured_peaks_in_the_timed_step():
    """matmul: 2e9 FLOPs in 0.01 s of the timed step = 200 GFLOP/s, half of a 400 GFLOP/s peak; element-wise:
    2e8 bytes in 0.01 s = 20 GB/s, a quarter of 80 GB/s. The profiled step is 1.5x the timed one: its extra 0.015 s
    is host time, so the operators' seconds, and their rates, are as profiled."""
    profile = Profiled(steps=1, step_s=0.045, categories={"matmul": 0.01, "elementwise": 0.01, "host": 0.025},
                       flops={"matmul": 2e9}, bytes={"matmul": 4e8, "elementwise": 2e8})  # fmt: skip
    rows = {a.category: a for a in achieved(profile, 1.5, {"fp32": 4e11}, 8e10)}
    assert rows["matmul"].flops_per_s == pytest.approx(2e11) and rows["matmul"].of_peak == pytest.approx(0.5)
    assert rows["matmul"].intensity == pytest.approx(5.0)  # 2e9 FLOPs over 4e8 bytes
    assert rows["elementwise"].flops_per_s is None and rows["elementwise"].of_bandwidth == pytest.approx(0.25)
    text = achieved_text(list(rows.values()))
    assert "matmul 200 GFLOP/s (50% of the fp32 peak), 40 GB/s (50% of the bandwidth), 5 FLOP/byte" in text
    assert "elementwise 20 GB/s (25% of the bandwidth)" in text
    assert achieved(profile, 1.5, {"bf16": 4e11}, None, "bf16")[0].of_peak == pytest.approx(0.5)
    said = "elementwise 20 GB/s (200% of the bandwidth: from caches, or the profile's times are off)"
    assert said in achieved_text(achieved(profile, 1.5, {}, 1e10))
    # over the measured peak: not placed on the roofline as if it were (a 14M-parameter update "from caches")
    assert "(400% of the fp32 peak: above it, so the profile's times are off)" in achieved_text(
        achieved(profile, 1.5, {"fp32": 5e10})
    )
    # a bf16 cell's products against fp32's peak where that is faster, as the table's utilization holds them
    [matmul, _] = achieved(profile, 1.5, {"bf16": 4e11, "fp32": 8e11}, None, "bf16")
    assert (matmul.of_peak, matmul.peak_dtype) == (pytest.approx(0.25), "fp32")
    assert achieved_text(achieved(Profiled(steps=1, step_s=0.01, categories={"host": 0.01}))) is None


def test_on_a_gpu_a_profile_whose_kernels_outgrew_the_timed_step_keeps_its_host_gaps():
    """The H200 check, resnet-56 b128 fp32: profiled at 62.1 ms (host gaps 30.2 ms, kernels 31.9 ms), timed at 19.4
    ms. The profiler stretched the kernels too, so its extra time is not all host time: taken out of `host`, the gaps
    vanished and the step read compute-bound (matrix products 28%), where CUDA graphs ran it 1.8x faster."""
    from dlperf.report.profile import timed_categories

    profiled = Profiled(steps=5, step_s=0.0621, kernels_per_step=842, ops_per_step=2091, categories={
        "host": 0.0302, "other": 0.0175, "matmul": 0.0089, "normalization": 0.0037, "elementwise": 0.0011,
        "idle": 0.0006, "optimizer": 0.0001})  # fmt: skip
    overhead = 0.0621 / 0.0194
    assert timed_categories(profiled, overhead) == (profiled.categories, 0.0621)
    v = verdict(profiled, device="cuda:0", overhead=overhead)
    assert (v.bound, v.level) == (Bound.LAUNCH, HIGHLY) and v.figure.startswith("host and device idle 50% of the step")
    # kernels inside the timed step: the profiler's extra time is the host's, taken out as on a CPU
    fast = Profiled(steps=5, step_s=0.030, kernels_per_step=632, categories={"host": 0.008, "matmul": 0.02,
                                                                            "idle": 0.002})  # fmt: skip
    categories, timed = timed_categories(fast, overhead=1.25)
    assert timed == pytest.approx(0.024) and categories["host"] == pytest.approx(0.002)


def test_an_update_that_takes_much_of_the_step_is_told_to_try_the_optimizers_implementations_first():
    """A 40-layer MLP under Adam: optimizer 65% of the step, launch-bound; told to try only compile (1.77x), which
    leaves the update eager, where its run measured fused 2.65x."""
    shares = {"optimizer": 0.65, "matmul": 0.1, "elementwise": 0.05, "host": 0.2}
    profile = Profiled(steps=5, step_s=0.004, categories={k: v * 0.004 for k, v in shares.items()}, ops_per_step=900)
    v = verdict(profile)
    assert v.bound is Bound.LAUNCH and v.modes[:2] == ("fused", "foreach") and "compile" in v.modes
    assert v.figure.endswith("; the update (optimizer) 65% of the step")
    assert verdict(profile, mode="fused").modes[:1] != ("foreach",)  # the cell has one of them already
    light = {**shares, "optimizer": 0.1, "matmul": 0.65}
    assert "fused" not in verdict(Profiled(steps=5, step_s=0.004, categories={k: v * 0.004 for k, v in light.items()},
                                           ops_per_step=900)).modes[:1]  # fmt: skip
