"""`dlperf predict --memory`'s view (report/memory.py): a model that fits no batch on a GPU says so in words, and the
line comparing two modes names a GPU where a batch fits in one of them."""

from dlperf.predict import gpus, memory
from dlperf.report import memory as view

GIB = 2**30


def line(mode: str, fixed_gib: float, per_sample_gib: float) -> memory.Line:
    def peak(batch):
        return memory.Peak("lm", mode, batch, int(fixed_gib * GIB), 0, 0, 0, int(per_sample_gib * GIB * batch))

    return memory.Line(peak(8), peak(16))


def test_a_model_that_fits_no_batch_says_not_even_one_and_the_modes_are_compared_where_one_fits():
    """Issue (a 1.3B-parameter LM with AdamW): the largest batch was "none" on every 24 GB GPU, and the modes' line
    read "the largest batch on RTX 4090 none -> none", though the A100 took 16 and then 25."""
    rtx, a100 = gpus.lookup("RTX 4090"), gpus.lookup("A100-SXM4-80GB")
    lines = {"fp32": line("fp32", 16, 3.6), "bf16": line("bf16", 16, 2.3)}
    most = {"fp32": {rtx.name: 0, a100.name: 16}, "bf16": {rtx.name: 0, a100.name: 25}}
    verdicts = {m: [memory.verdict(g, lines[m], most[m][g.name]) for g in (rtx, a100)] for m in lines}
    assert view.largest(0) == "none, not even 1" and view.largest(16) == "16"
    said = view.lines(lines, verdicts)
    assert len(said) == 1 and said[0].endswith("; the largest batch on A100-SXM4-80GB 16 -> 25"), said
    nowhere = {m: [memory.verdict(rtx, lines[m], 0)] for m in lines}  # no GPU asked takes a batch in either mode
    assert "largest batch" not in view.lines(lines, nowhere)[0]
