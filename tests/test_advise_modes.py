"""`dlperf advise`'s GPU half (advise.py): which modes each GPU is predicted in, and the costs that come of it.
The command end to end, with this CPU measured, is tests/commands/test_advise.py."""

from dlperf import advise
from dlperf.predict import count, gpus, roofline
from dlperf.workloads import BUILTIN

H100, T4, K80 = (gpus.lookup(n) for n in ("H100-SXM5-80GB", "T4", "K80 (1 GK210 die)"))


def test_each_gpu_is_predicted_in_fp32_and_the_mixed_precision_it_has_a_tensor_unit_for():
    assert advise.gpu_modes(H100) == ("fp32", "bf16")
    assert advise.gpu_modes(gpus.lookup("V100-SXM2-16GB")) == ("fp32", "fp16")  # Volta: fp16 tensor cores only
    assert advise.gpu_modes(T4) == ("fp32", "fp16")  # Turing too
    assert advise.gpu_modes(K80) == ("fp32",)  # no tensor unit at all
    notes = advise.mode_notes((H100, T4, K80))
    assert notes == [
        "no bf16 unit: T4 predicted in fp32 and fp16 (float16 autocast with gradient scaling, as they are trained), "
        "not bf16; each GPU above is named with the mode of its figures",
        "no half-precision tensor unit: K80 (1 GK210 die) predicted in fp32 only",
    ]
    assert advise.mode_notes((H100,)) == []


def test_a_gpu_without_bf16_units_is_costed_in_fp16_not_at_its_fp32_rate(monkeypatch, tmp_path):
    """fcn-r is compute-bound on a T4: in bf16 (no unit: the fp32 rate) it would be no faster than fp32, while the
    fp16 tensor cores it is trained on there make it several times faster. The cost ranks what people would run."""
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path))
    w = BUILTIN["fcn-r"]
    costs, largest, notes, _ = advise.predicted(w, (H100, T4, K80), 60_000, "an epoch", None, 120)
    assert {(r.gpu, r.mode) for r in costs.rows} == {
        (H100.name, "fp32"), (H100.name, "bf16"), (T4.name, "fp32"), (T4.name, "fp16"), (K80.name, "fp32"),
    }  # fmt: skip
    assert not costs.left_out and largest == {} and notes[:2] == advise.mode_notes((H100, T4, K80))
    assert all(n.startswith(("the uncertainty was measured", "fp32 is TF32 off", "bound: launch")) for n in notes[2:])
    bf16 = roofline.predict(count.counted([(w, "bf16")])[0], T4)
    t4 = {r.mode: r for r in costs.rows if r.gpu == T4.name}
    assert t4["fp16"].step_s < bf16.step_s / 2 and t4["fp16"].step_s < t4["fp32"].step_s / 2
    assert min((r for r in costs.rows if r.gpu == T4.name), key=lambda r: r.time_s).mode == "fp16"


def test_the_crossover_it_suggests_names_the_workload_as_the_user_did():
    """A user's model is named by its factory (`file.py:make`): `dlperf crossover small-convnet`, the model's own
    name, said "unknown workload"."""
    from types import SimpleNamespace

    from dlperf.report.advise import _crossover

    row = SimpleNamespace(batch=64, speedup=lambda g: 2.0, cpu=None)
    x = SimpleNamespace(rows=[row], user_batch=64, gpus=["T4"], workload="small-convnet", mode="fp32")
    said = _crossover(x, "examples/my model.py:make")  # at the batch advised (advise --batch 64): crossover's too
    assert "dlperf crossover 'examples/my model.py:make' --batch 64 measures batch by batch" in said


def test_a_gpu_the_step_does_not_fit_is_left_out_of_the_gpus_that_pay():
    """advise of a 2M-row embedding: "Does not fit ... GTX 980 ... none, not even 1", then "a GPU pays at your batch
    256: 3 of 3 GPUs predicted faster ... GTX 980 34.8x", and its JSON speed-up too."""
    from types import SimpleNamespace

    from dlperf.report.advise import _crossover

    ratios = {"GTX 980": 34.8, "T4": 20.0, "GTX 1080": 30.0}
    row = SimpleNamespace(batch=256, speedup=ratios.get, cpu=None)
    x = SimpleNamespace(rows=[row], user_batch=256, gpus=list(ratios), workload="emb", mode="fp32")
    said = _crossover(x, "emb.py:make", unfit={"GTX 980"})
    assert said.startswith(
        "a GPU pays at your batch 256: 2 of 2 GPUs predicted faster in fp32 than this CPU's fp32 step there: GTX 1080 "
        "30.0x, T4 20.0x (GTX 980 left out: the step does not fit it)"
    )
    assert _crossover(x, "emb.py:make", unfit=set(ratios)).startswith(
        "no GPU asked holds the step at your batch 256 (Does not fit, above)"
    )


def feed_advice(per_process: float, setting: str = "w2") -> advise.Advice:
    """An answer with a fast, dear GPU and a slow, cheap one, and a loader measured alone on this CPU."""
    from dlperf.predict import cost, prices

    def row(gpu, samples_per_s, usd):
        price = prices.Price(gpu, usd, usd)
        return cost.Row(gpu, "bf16", 16 / samples_per_s, samples_per_s, 60_000 / samples_per_s, price, True, "fits")

    rows = [row("H100-SXM5-80GB", 5_000.0, 3.0), row("T4", 900.0, 0.3)]
    costs = cost.Costs("fcn-r", 16, 60_000, cost.Work("one epoch"), rows)
    workers = max(1, int(setting.removeprefix("w")))
    feed = advise.Feed(setting, per_process * workers, per_process, run_id=2)
    return advise.Advice("fcn-r", 16, costs, None, None, [1, 2], "±20%", feed=feed)


def test_the_input_pipeline_says_how_many_loading_processes_each_gpu_needs():
    """300 samples/s a loading process: the H100's predicted 5,000 samples/s need about 17 of them (16.7 rounded
    up), the T4's 900 three; a loader faster than the GPU needs the training process alone."""
    from dlperf.report import advise as view

    a = feed_advice(300.0)
    (line,) = [x for x in view.lines(a) if x.startswith("Input pipeline")]
    assert "one loading process prepares 300 samples/s on this CPU (w2: 600 samples/s, the loader alone)" in line
    assert "the fastest GPU, H100-SXM5-80GB (bf16, 5,000 samples/s), needs about 17 loading processes" in line
    assert "the cheapest, T4 (bf16, 900 samples/s), needs about 3 loading processes" in line
    needed = {r["gpu"]: r["processes"] for r in view.to_json(a)["input_pipeline"]["processes_needed"]}
    assert needed == {"H100-SXM5-80GB": 17, "T4": 3}
    fast = view.lines(feed_advice(10_000.0, "w0"))
    assert any("needs one loading process (w0 loads in the training process)" in x for x in fast)
    a.feed = None
    assert not any(x.startswith("Input pipeline") for x in view.lines(a)) and view.to_json(a)["input_pipeline"] is None


def _run(store, cells, **figured):
    """A stored run of (threads, median seconds, warnings, processes) CPU cells of tiny-fcn-r at batch 32; `figured`:
    more of each cell's figures."""
    from dlperf.envinfo import fingerprint
    from dlperf.store.process import ProcessMeasurement
    from dlperf.store.records import CellFigures
    from dlperf.vocab import Status
    from report.synthetic import ENV, spec

    planned = [spec("tiny-fcn-r", "torch", "cpu", t, "fp32", {"batch": 32}) for t, *_ in cells]
    run_id = store.create_run({"workloads": "tiny-fcn-r"}, ENV, fingerprint(ENV), ["dlperf", "advise"], planned)
    for p, (_, median, warnings, processes) in zip(planned, cells, strict=True):
        figures = CellFigures(status=Status.OK, median_s=median, n=20 * processes, warnings=warnings,
                              ci_low_s=median * 0.9, ci_high_s=median * 1.1, **figured)  # fmt: skip
        for repeat in range(processes):
            store.record(run_id, p.cell.key, repeat, ProcessMeasurement(status=Status.OK, samples=[median] * 20),
                         figures)  # fmt: skip
    return run_id


def test_the_cells_it_quotes_carry_the_notes_dlperf_table_gives_them(tmp_path):
    """The thread search's disturbed cell and the star it withholds, the quoted cell's noise, and an interval over
    one process's steps: the answer's CPU figures come with what `dlperf table` says of them."""
    from dlperf.store import Store

    db = tmp_path / "a.db"
    store = Store.open(db, create=True)
    try:
        busy = "other processes used 21% of the CPUs while this cell was timed"
        threads = _run(store, [(1, 0.02, [], 1), (2, 0.01, [busy], 1)])
        search = _run(store, [(2, 0.008, ["noisy: IQR is 30% of the median"], 1)])
        quoted = store.cells(search)[0]
    finally:
        store.close()
    notes = advise.quoted_notes(str(db), threads, quoted, with_ci=True)
    assert f"tiny-fcn-r torch cpu:2: {busy}" in notes
    assert any(n.startswith("no fastest thread count starred in tiny-fcn-r torch") for n in notes)
    assert "tiny-fcn-r torch cpu:2: noisy: IQR is 30% of the median" in notes
    assert any(n.startswith("the CPU step's 95% interval is over the steps of one process") for n in notes)
    # the quoted cell of the thread search itself: its notes once; no interval quoted, none said of it
    again = advise.quoted_notes(str(db), threads, store_cell(db, threads, 1), with_ci=False)
    assert sum(busy in n for n in again) == 1 and not any("95% interval" in n for n in again)


def test_a_quoted_cells_note_names_no_flag_advise_does_not_take(tmp_path):
    """advise quoted 'warm-up did not settle within --max-warmup steps or --max-time' and 'raise --max-time or
    --min-steps': flags of dlperf run, not advise's (advise times within --budget)."""
    from dlperf.store import Store

    db = tmp_path / "a.db"
    unsettled = "warm-up did not settle within --max-warmup steps or --max-time"
    few = "few samples: the median of 3 timed steps (fewer than 6: raise --max-time or --min-steps for a figure to "
    few += "rely on)"
    store = Store.open(db, create=True)
    try:
        threads = _run(store, [(1, 0.02, [unsettled, few], 1)])
    finally:
        store.close()
    said = " ".join(advise.quoted_notes(str(db), threads, store_cell(db, threads, 0), with_ci=False))
    assert "within the warm-up advise gave it (dlperf run --max-warmup and --max-time give more)" in said, said
    assert "fewer than 6: dlperf run --max-time or --min-steps times more, for a figure to rely on" in said, said
    assert "within --max-warmup" not in said and "raise --max-time" not in said, said


def test_a_note_that_says_to_try_a_mode_says_what_the_mode_search_measured_of_it(tmp_path):
    """advise of small-convnet noted of its thread search's cell "memory mapped afresh each step ...; try --modes
    malloc_keep" under an answer whose mode search had timed bf16+channels_last+foreach+malloc_keep (16.0 ms, against
    15.9 ms without it): the note now says what the search measured of the mode it names."""
    from dlperf.optimize import Candidate
    from dlperf.store import Store

    db = tmp_path / "a.db"
    store = Store.open(db, create=True)
    try:
        threads = _run(store, [(1, 0.07, [], 1), (2, 0.06, [], 1)], kernel_cpu_share=0.25, minor_faults_per_step=15e3)
    finally:
        store.close()
    quoted = store_cell(db, threads, 1)
    searched = [Candidate("bf16", "ok", median_s=0.032), Candidate("bf16+malloc_keep", "failed"),
                Candidate("bf16+channels_last+foreach+malloc_keep", "ok", median_s=0.016),
                Candidate("bf16+channels_last+checkpoint+malloc_keep", "ok", median_s=0.021)]  # fmt: skip
    (before,) = [n for n in advise.quoted_notes(str(db), threads, quoted, False) if "memory mapped afresh" in n]
    (after,) = [n for n in advise.quoted_notes(str(db), threads, quoted, False, searched) if "memory mapped" in n]
    assert "try --modes malloc_keep" in before and "mode search" not in before
    assert after == before + "; measured by the mode search: bf16+channels_last+foreach+malloc_keep at 16.0 ms a step"
    # a search that measured no mode with it leaves the note as it was
    assert advise.quoted_notes(str(db), threads, quoted, False, searched[:2]) == advise.quoted_notes(
        str(db), threads, quoted, False)  # fmt: skip


def store_cell(db, run_id, position):
    from dlperf.store import Store

    store = Store.open(db, create=False)
    try:
        return store.cells(run_id)[position]
    finally:
        store.close()


def test_a_workload_whose_own_batch_is_above_what_is_measured_here_is_named_not_a_flag(monkeypatch):
    """A user's batch_size=100000 read '--batches '100000': expected a batch, a whole number from 1 to 65,536':
    advise has no --batches (crossover's, which its thread search calls)."""
    from dataclasses import replace

    import pytest

    from dlperf.errors import UsageError
    from dlperf.plan import workloads

    big = replace(BUILTIN["tiny-fcn-r"], name="big-batch", batch=100_000)
    monkeypatch.setattr(workloads, "resolve_workload", lambda *a, **k: big)
    monkeypatch.setattr(count, "at", lambda workload, batch: workload)
    with pytest.raises(UsageError) as caught:
        advise._resolved(advise.Options("tiny-fcn-r"))
    assert str(caught.value) == ("big-batch's own batch, 100,000, is above the 65,536 dlperf measures on this CPU: "
                                 "give a smaller one with --batch")  # fmt: skip


def test_the_json_and_the_line_leave_out_a_gpu_the_step_does_not_fit_in_the_crossovers_mode():
    """`unfit` reads Does not fit's rows in the crossover's mode (fp32): a GPU left out in bf16 alone still pays."""
    from dataclasses import replace
    from types import SimpleNamespace

    from dlperf.report import advise as view

    a = feed_advice(300.0)
    t4 = next(r for r in a.costs.rows if r.gpu == "T4")
    a.costs.left_out = [replace(t4, mode="fp32"), replace(t4, gpu="H100-SXM5-80GB", mode="fp16")]
    ratios = {"H100-SXM5-80GB": 40.0, "T4": 12.0}
    row = SimpleNamespace(batch=16, speedup=ratios.get, cpu=SimpleNamespace(median_s=0.1, n=30, warnings=[]), gpus={})
    a.crossover = SimpleNamespace(rows=[row], user_batch=16, gpus=list(ratios), workload="fcn-r", mode="fp32")
    assert view.unfit(a) == {"T4"}
    crossover = view.to_json(a)["crossover"]
    assert crossover["gpu_speedup"] == {"H100-SXM5-80GB": 40.0, "T4": None}
    assert crossover["gpus_that_do_not_fit"] == ["T4"]
    (line,) = [x for x in view.lines(a) if x.startswith("Crossover")]
    assert "1 of 1 GPUs predicted faster" in line and "(T4 left out: the step does not fit it)" in line
