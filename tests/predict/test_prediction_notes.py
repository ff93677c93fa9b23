"""What a prediction says beside its figures: where its uncertainty was not measured (`validate.scope_note`), that a
launch-bound step is the host CPU's (`roofline.launch_note`, in `dlperf crossover`'s words), and that dlperf's fp32
is TF32 off on a GPU with TF32 units (`roofline.fp32_note`)."""

from __future__ import annotations

from dataclasses import replace

from dlperf.predict import gpus, roofline, validate
from dlperf.predict.roofline import Prediction
from dlperf.workloads import BUILTIN


def test_inside_the_validation_set_no_scope_note():
    """A network of the published rows (resnet-50 is the ResNet they measure), a generation and modes they hold."""
    assert validate.scope_note(BUILTIN["resnet-50"], gpus.parse_gpus("V100-SXM2-16GB,A100-SXM4-80GB"),
                               ["fp32", "fp16"]) is None  # fmt: skip


def test_a_users_model_a_newer_generation_and_bf16_are_said_outside_in_one_note():
    user = replace(BUILTIN["fcn-r"], name="txt-tfm", arch="user", source="/tmp/tfm.py:make")
    note = validate.scope_note(user, gpus.parse_gpus("T4,H100-SXM5-80GB,B200"), ["fp32", "bf16"])
    assert note is not None and "\n" not in note
    assert "txt-tfm (your model)" in note
    assert "Hopper (H100-SXM5-80GB: no GPU of it measured)" in note and "Blackwell (B200: " in note
    assert "T4" not in note.split("outside that here:")[1]  # Turing is measured
    assert "bf16 (no row in it)" in note and "on Pascal, Volta, Turing, Ampere GPUs" in note
    # what is inside is read from the shipped rows in scope, not written down: every generation named has such a row
    _, _, generations, _ = validate.coverage()
    cases, _ = validate.read(validate.shipped(), known=lambda n: n in BUILTIN)
    assert set(generations) == {c.gpu.generation for c in cases if c.in_scope}


def test_the_coverage_is_the_rows_in_scope_the_uncertainty_is_measured_on():
    """The band is held out on the rows in scope only: a network or a generation only rows out of scope measure (the
    CIFAR ResNets' epoch times, Kepler's 2017 software) is outside it."""
    archs, families, generations, _ = validate.coverage()
    assert "resnet-cifar" not in archs and "CIFAR ResNet" not in families and "Kepler" not in generations
    note = validate.scope_note(BUILTIN["resnet-56"], gpus.parse_gpus("K80"), ["fp32"])
    assert "resnet-56 (a network none of them is)" in note and "Kepler (K80 (1 GK210 die): no GPU" in note


def test_a_built_in_network_no_row_measures_is_outside():
    note = validate.scope_note(BUILTIN["lstm"], gpus.parse_gpus("V100-SXM2-16GB"), ["fp32"])
    assert note is not None and "lstm (a network none of them is)" in note


def test_a_launch_bound_step_says_the_host_cpu_decides_in_crossovers_words():
    from dlperf import crossover

    note = roofline.launch_note(["A100-SXM4-80GB", "H100-SXM5-80GB"])
    assert "A100-SXM4-80GB, H100-SXM5-80GB" in note and "CPU decides" in note
    assert roofline.HOST_ISSUING in note and roofline.HOST_ISSUING in crossover.SMALL_BATCHES  # written once


def test_predict_notes_name_the_launch_bound_gpus_and_fp32_without_tf32():
    from dlperf.commands.predict import prediction_notes

    chosen = gpus.parse_gpus("T4,A100-SXM4-80GB")
    found = [Prediction("T4", "resnet-50", "fp32", 16, 0.1, 0.0, "memory"),
             Prediction("A100-SXM4-80GB", "resnet-50", "fp32", 16, 0.02, 0.0, "launch")]  # fmt: skip
    notes = prediction_notes(BUILTIN["resnet-50"], chosen, ["fp32"], found)
    launch = [n for n in notes if n.startswith("bound: launch")]
    assert launch == [roofline.launch_note(["A100-SXM4-80GB"])]
    tf32 = [n for n in notes if n.startswith("fp32 is TF32 off")]
    assert tf32 == [roofline.fp32_note([chosen[1]])]  # the T4 has no TF32 unit: nothing to say of it
    assert not any(n.startswith("fp32 is TF32 off") for n in prediction_notes(BUILTIN["resnet-50"], chosen, ["bf16"],
                                                                              []))  # fmt: skip


def test_the_count_every_gpu_is_predicted_from_is_said_so_a_hand_count_can_check_it():
    """Issue: a user's transformer encoder (4 layers, d 256, 128 tokens, batch 32) counts 27.92 GFLOP forward, as a
    hand count gives (4 layers x 4096 tokens x 851,968 multiply-adds x 2), but predict printed only times: the FLOPs,
    the bytes and the parameters behind them were in no output, only in the count cache's JSON."""
    from dlperf.commands.predict import count_note
    from dlperf.frameworks.common.ops import Count, Op

    mm = Op("matmul", "fp32", 27_920_000_000, 1_000, phase="forward")
    back = replace(mm, flops=2 * mm.flops, phase="backward")
    update = Op("memory", "fp32", 0, 912_000_000, phase="optimizer")
    fp32 = Count("enc", "fp32", 32, (mm, back, update), 33_024, 10_873_093)
    bf16 = replace(fp32, mode="bf16", ops=(replace(mm, dtype="bf16", bytes=500), back, update))
    assert count_note([fp32, bf16]) == (
        "counted at batch 32 (the work each GPU above is predicted from): 83.76 GFLOP (forward 27.92, backward 55.84) "
        "a step, a multiply-add 2 FLOPs; fp32 0.912, bf16 0.912 GB read and written by its kernels (3 kernels a step); "
        "10.87 M parameters"
    )  # the kernels, the same on every GPU, were a column of the table, which then needed 87 columns
    assert count_note([replace(fp32, params=3_018)]).endswith("; 3,018 parameters")  # not "0.003018 M parameters"
    fp16 = replace(fp32, mode="fp16", ops=(*fp32.ops, Op("memory", "fp16", 1_000_000_000, 8, phase="optimizer")))
    assert "fp32 83.76, fp16 84.76 GFLOP (fp32: forward 27.92, backward 55.84) a step" in count_note([fp32, fp16])
    assert "by its kernels (fp32 3, fp16 4 kernels a step)" in count_note([fp32, fp16])


def test_the_fp32_note_says_tf32_is_faster_only_where_its_peak_is_above_fp32s():
    """Where TF32's dense peak is FP32's (RTX 3090), TF32 is predicted no faster: the note said "can be faster than
    predicted here" beside a table where tf32 was predicted slower."""
    a100, rtx = gpus.lookup("A100-SXM4-80GB"), gpus.lookup("RTX 3090")
    assert roofline.fp32_note([a100]).endswith(  # as it read before
        "RNNs there can be faster than predicted here (dlperf predict --modes tf32 predicts it with TF32)"
    )
    alone = roofline.fp32_note([rtx])
    assert "can be faster" not in alone and ": on RTX 3090 the TF32 units are no faster than the FP32 cores" in alone
    both = roofline.fp32_note([a100, rtx])
    assert "RNNs on A100-SXM4-80GB can be faster than predicted" in both and "; on RTX 3090 the TF32 units" in both
