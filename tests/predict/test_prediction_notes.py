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
    assert "bf16 (no row in it)" in note and "Kepler, Pascal, Volta, Turing, Ampere" in note
    # what is inside is read from the shipped rows, not written down: every generation named has a row
    _, _, generations, _ = validate.coverage()
    cases, _ = validate.read(validate.shipped(), known=lambda n: n in BUILTIN)
    assert set(generations) == {c.gpu.generation for c in cases}


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
    assert tf32 == [roofline.fp32_note(["A100-SXM4-80GB"])]  # the T4 has no TF32 unit: nothing to say of it
    assert not any(n.startswith("fp32 is TF32 off") for n in prediction_notes(BUILTIN["resnet-50"], chosen, ["bf16"],
                                                                              []))  # fmt: skip
