"""The GPU table and its names: forgiving matches, one-line errors that suggest the nearest."""

import pytest

from conftest import dlperf, one_line_error
from dlperf.errors import UsageError
from dlperf.predict import gpus


def test_the_table_holds_the_reference_gpus_and_the_two_the_measurements_need():
    names = gpus.names()
    assert len(names) == 58 and len(set(names)) == 58  # 41, and issue 32's GPUs of today
    for name in ("K80 (1 GK210 die)", "T4", "H100-SXM5-80GB", "K20m", "RTX A5000"):
        assert name in names
    h100 = gpus.lookup("H100-SXM5-80GB")
    assert h100.fp32 == pytest.approx(66.9e12) and h100.bf16 == pytest.approx(989.4e12)
    assert h100.memory_bw == pytest.approx(3350e9) and h100.host_link_bw == pytest.approx(63e9)
    assert h100.generation == "Hopper" and gpus.lookup("GTX 1080").tf32 is None


@pytest.mark.parametrize(
    ("text", "name"),
    [("t4", "T4"), ("h100 sxm5 80gb", "H100-SXM5-80GB"), ("H100-PCIe", "H100-PCIe-80GB"), ("rtx3090", "RTX 3090"),
     ("GeForce GTX 1080 Ti", "GTX 1080 Ti"), ("k80", "K80 (1 GK210 die)")],
)  # fmt: skip
def test_names_match_forgivingly(text, name):
    assert gpus.lookup(text).name == name


@pytest.mark.parametrize(
    ("text", "name"),
    [("4090", "RTX 4090"), ("H100 SXM", "H100-SXM5-80GB"), ("h100 80 GB sxm", "H100-SXM5-80GB"),
     ("NVIDIA GeForce RTX 4090 24GB", "RTX 4090"), ("A40 48G", "A40"), ("a4000", "RTX A4000"),
     ("sxm4 80gb a100", "A100-SXM4-80GB")],
)  # fmt: skip
def test_names_people_type_match_the_one_gpu_they_fit(text, name):
    """Issue 31: `4090` and `H100 SXM` were refused; words in any order, each the start of a word of the name or the
    memory size, with the vendor words left out."""
    assert gpus.lookup(text).name == name


@pytest.mark.parametrize(
    ("text", "listed"),
    [("A100 80GB", "A100-SXM4-80GB, A100-PCIe-80GB"), ("RTX 6000", "Quadro RTX 6000, RTX 6000 Ada"),
     ("tesla v100 32gb", "V100-SXM2-32GB, V100-SXM3-32GB")],
)  # fmt: skip
def test_a_name_several_gpus_fit_lists_every_candidate_in_one_line(text, listed):
    one_line_error(dlperf("predict", "tiny-fcn-r", "--gpu", text), f"{text!r} is ambiguous: {listed}")


def test_list_gpus_through_a_pipe_never_cuts_a_name():
    """Issue 31: through a pipe rich drew 80 columns and cut `A100-SXM4-40GB` to `A100-S…`."""
    done = dlperf("predict", "--list-gpus", env={"COLUMNS": ""})
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows] == gpus.names()
    assert "…" not in done.stdout


def test_an_unknown_name_suggests_the_nearest_and_an_ambiguous_one_lists_the_candidates():
    with pytest.raises(UsageError, match=r"unknown GPU; did you mean .*T4"):
        gpus.lookup("T4x")
    with pytest.raises(UsageError, match=r"ambiguous: H100-SXM5-80GB, H100-PCIe-80GB"):
        gpus.lookup("H100")
    with pytest.raises(UsageError, match="unknown GPU \\(`dlperf predict --list-gpus`"):
        gpus.lookup("zzzzzzzz")


def test_the_command_line_refuses_an_unknown_gpu_in_one_line():
    one_line_error(dlperf("predict", "tiny-fcn-r", "--gpu", "H100-SXM,A1OO-SXM4-80GB"), "A1OO", "A100-SXM4-80GB")


@pytest.mark.parametrize(
    ("cuda", "name"),
    [("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"), ("NVIDIA H100 PCIe", "H100-PCIe-80GB"),
     ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"), ("NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB"),
     ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"), ("Tesla T4", "T4"), ("NVIDIA GeForce RTX 3090", "RTX 3090"),
     ("NVIDIA L4", "L4"), ("Tesla K80", "K80 (1 GK210 die)")],
)  # fmt: skip
def test_what_cuda_calls_a_device_is_found_in_the_table(cuda, name):
    assert gpus.for_device(cuda).name == name


def test_a_device_not_in_the_table_is_none():
    assert gpus.for_device("Some Future Accelerator 9000") is None


def test_peaks_fall_back_to_the_fp32_rate_without_a_unit():
    v100 = gpus.lookup("V100-SXM2-16GB")
    assert v100.peak("fp16", tensor=False) == (125e12, "fp16 tensor")
    assert v100.peak("bf16", tensor=False) == (15.7e12, "fp32")  # Volta has no bf16 unit
    assert v100.peak("fp32", tensor=True) == (15.7e12, "fp32")  # nor TF32
    a100 = gpus.lookup("A100-SXM4-80GB")
    assert a100.peak("fp32", tensor=True) == (156e12, "tf32 tensor")
    assert a100.peak("fp32", tensor=False) == (19.5e12, "fp32")


COMMANDS = ("advise", "crossover", "predict")


def test_each_commands_default_gpus_come_from_one_place_and_its_help_says_why():
    """advise ranks every GPU with a price (`prices.priced`), crossover draws a column per GPU for two that bracket
    what one rents (`defaults.BRACKET`), predict names its GPUs: the defaults differ on purpose, each held in
    defaults.py (which --help reads without the predictor) and said with its reason in the command's --gpu help."""
    import argparse

    from dlperf import advise, crossover, defaults
    from dlperf.cli import build_parser
    from dlperf.predict import prices

    priced = {p.gpu for p in prices.table()}
    assert prices.priced() and {g.name for g in prices.priced()} == priced & set(gpus.names())
    assert crossover.Options("tiny-fcn-r").gpus == defaults.BRACKET
    assert advise.Options("tiny-fcn-r").gpus is None  # None: prices.priced(), at check()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c: next(a for a in sub.choices[c]._actions if "--gpu" in a.option_strings) for c in COMMANDS}
    assert helps["advise"].default is None and defaults.PRICED_HELP in helps["advise"].help
    assert helps["crossover"].default == ",".join(defaults.BRACKET) and defaults.BRACKET_HELP in helps["crossover"].help
    assert helps["predict"].default is None and defaults.NAMED_HELP in helps["predict"].help


@pytest.mark.parametrize(
    ("flag", "said"),
    [("--gpu", "--gpu 'Z9000': unknown GPU"), ("gpus", "'Z9000' in gpus: unknown GPU"), ("", "'Z9000': unknown GPU")],
)
def test_an_unknown_gpu_is_named_as_its_caller_gave_it(flag, said):
    """`gpus 'Z9000': unknown GPU` read as a flag a Python caller never typed: the argument is named as an argument."""
    with pytest.raises(UsageError) as caught:
        gpus.lookup("Z9000", flag)
    assert str(caught.value).startswith(said)
