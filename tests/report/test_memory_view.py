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


def test_the_largest_batch_here_is_found_from_one_traced_batch_that_does_not_fit(monkeypatch):
    """`dlperf advise resnet-50 --batch 2048` on a machine that cannot hold that step: its search for the largest
    batch that fits here began from that one traced batch and ended in an IndexError (a line needs two points)."""
    from dlperf.measure import system
    from dlperf.predict import count
    from dlperf.workloads import BUILTIN

    fixed, per_sample = 200 * 2**20, 10 * 2**20
    monkeypatch.setattr(system, "memory_available_bytes", lambda: 2 * GIB)

    def traced(asked, timeout, flag=None):
        return [memory.Peak(w.name, m, b, fixed, 0, 0, 0, per_sample * b) for w, m, b in asked]

    monkeypatch.setattr(memory, "traces", traced)
    workload = count.at(BUILTIN["resnet-50"], 2048)
    known = {2048: traced([(workload, "fp32", 2048)], 60)[0].total}
    most = memory.largest_here(workload, "fp32", known, 60)
    fits = [b for b in (most, most + 1) if traced([(workload, "fp32", b)], 60)[0].total <= 2 * GIB]
    assert most > 1 and fits == [most]  # the largest batch that fits, and the next does not
    assert memory._guess({8: fixed}, 2 * GIB) == 9  # one batch that fits: the next one gives the line


def test_json_says_where_the_largest_batch_is_the_searchs_cap():
    """The text's "1,048,576 or more" was a bare 1048576 in JSON: a script read it as exact."""
    from types import SimpleNamespace

    a100, rtx = gpus.lookup("A100-SXM4-80GB"), gpus.lookup("RTX 4090")
    small = line("fp32", 0.001, 0.0)
    verdicts = {"fp32": [memory.verdict(a100, small, memory.MAX_BATCH), memory.verdict(rtx, small, 1000)]}
    found = view.to_json(SimpleNamespace(name="lm", batch=8), {"fp32": small}, verdicts)
    capped = {g["gpu"]: g["largest_batch_is_the_search_cap"] for g in found["modes"][0]["gpus"]}
    assert capped == {a100.name: True, rtx.name: False}
    assert view.largest(memory.MAX_BATCH) == f"{memory.MAX_BATCH:,} or more"
