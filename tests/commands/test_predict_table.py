"""`dlperf predict`'s table on one screen: at 80 columns it needed 87 and printed in two parts, the GPU and mode
repeated; the kernels a step (the same on every GPU) are now the count's note, the columns' words shorter and said in
a note under the table."""

from __future__ import annotations

from types import SimpleNamespace

from dlperf.commands.common import console
from dlperf.commands.predict import STEP_NOTE, prediction_table
from dlperf.predict import roofline


def printed(renderable, width: int) -> str:
    out = console(width)
    with out.capture() as captured:
        out.print(renderable)
    return captured.get()


def predictions() -> list[roofline.Prediction]:
    """The widest figures a step has (a step of seconds, a copy of milliseconds, samples/s in the hundreds of
    thousands) on the longest GPU names but one (RTX PRO 6000 Blackwell's 22 characters)."""
    return [
        roofline.Prediction(gpu, "w", mode, 4096, step, copy, bound, kernels=12_345)
        for gpu in ("H100-SXM5-80GB", "K80 (1 GK210 die)")
        for mode, step, copy, bound in (("fp32", 14.63, 0.00123, "compute"), ("bf16", 0.0123, 0.000153, "launch"))
    ]  # fmt: skip


def test_the_table_fits_80_columns_in_one_part():
    text = printed(prediction_table(SimpleNamespace(name="resnet-50", batch=4096), predictions()), 80)
    assert text.count("┏") == 1 and "(continued)" not in text and "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80
    for figure in ("14.6 s", "1.23 ms", "12.5 ms", "12.3 ms", "153 µs", "280", "328,917", "K80 (1 GK210 die)"):
        assert figure in text, (figure, text)  # whole, on one line


def test_the_columns_are_said_under_the_table_and_the_file_output_is_the_same_table():
    """The 160-column output (a file, a log) is the one table too, its headers the ones the note explains."""
    head = printed(prediction_table(SimpleNamespace(name="w", batch=8), predictions()), 160).splitlines()[2]
    assert [h.strip() for h in head.strip("┃").split("┃")] == ["GPU", "mode", "step", "samples/s", "bound", "on GPU",
                                                               "copy"]  # fmt: skip
    assert STEP_NOTE.startswith("step: on GPU (") and "plus copy (" in STEP_NOTE
