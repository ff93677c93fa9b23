"""The price table (predict/prices.py) and what the work costs (predict/cost.py): parsing, merging, the ranking."""

import math

import pytest

from conftest import make_cell
from dlperf.errors import UsageError
from dlperf.optimize_results import quoted
from dlperf.predict import cost, gpus, prices
from dlperf.predict.roofline import Prediction
from dlperf.workloads import BUILTIN

HEADER = "gpu,usd_per_hour_low,usd_per_hour_high,region,date,sources\n"


@pytest.fixture(autouse=True)
def no_user_files(monkeypatch):
    monkeypatch.delenv(prices.ENV, raising=False)
    yield
    monkeypatch.delenv(prices.ENV, raising=False)
    prices.use_prices(None)
    gpus.use_specs(None)


def read(samples: dict):
    """`cost.measured_cpu`'s `timed` of these per-process step times, by run and cell key."""
    return lambda run, cells: {c.key: samples.get((run, c.key), []) for c in cells}


def write(tmp_path, text, name="prices.csv"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ----------------------------------------------------------------------------------------------------------------------
# The shipped table


def test_every_shipped_row_prices_a_gpu_of_the_spec_table_with_its_sources_region_and_date():
    names = {g.name for g in gpus.builtin()}
    rows = prices.builtin()
    assert len(rows) >= 20
    for p in rows:
        assert p.gpu in names and 0 < p.low <= p.high and p.region and p.date and p.sources, p
        figures = p.sources.count("$")
        assert p.one_source or p.sources.startswith("one provider") or figures >= 2, p  # two prices, or says so
        if p.one_source:
            assert p.low == p.high, p


def test_retired_gpus_without_a_price_list_are_left_out():
    priced = {p.gpu for p in prices.builtin()}
    assert not priced & {"GTX 980", "GTX 1080", "GRID K520", "K20m"}


# ----------------------------------------------------------------------------------------------------------------------
# A user's file


def test_a_user_row_replaces_the_built_in_one_and_adds_a_gpu_of_their_own_spec_file(tmp_path):
    specs = tmp_path / "specs.csv"
    shipped = gpus.resources.files("dlperf").joinpath("data/gpu_specs.csv").read_text().splitlines()
    h100 = next(line for line in shipped if line.startswith("H100-SXM5-80GB"))
    specs.write_text(shipped[0] + "\n" + h100.replace("H100-SXM5-80GB", "Lab H100", 1) + "\n")
    gpus.use_specs(str(specs))
    prices.use_prices(write(tmp_path, HEADER + "T4,0.10,0.20,on-prem,2026-01-02,our contract\nLab H100,1,1,,,\n"))
    t4 = prices.price(gpus.lookup("T4"))
    assert (t4.low, t4.high, t4.user, t4.sources) == (0.10, 0.20, True, "our contract")
    assert prices.price(gpus.lookup("Lab H100")).low == 1
    assert prices.price(gpus.lookup("H100-SXM5-80GB")).user is False  # the other built-in rows stay


def test_the_environment_variable_names_the_file_when_the_flag_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv(prices.ENV, write(tmp_path, HEADER + "T4,9,9,,,\n"))
    prices.use_prices(None)
    assert prices.price(gpus.lookup("T4")).low == 9


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ("T4,abc,1,,,\n", ["line 2, column usd_per_hour_low", "'abc' is not a number"]),
        ("T4,-1,1,,,\n", ["line 2, column usd_per_hour_low", "above 0"]),
        ("T4,0,1,,,\n", ["line 2, column usd_per_hour_low", "above 0"]),
        ("T4,2,1,,,\n", ["line 2, column usd_per_hour_high", "below"]),
        ("T4,1,,,,\n", ["line 2, column usd_per_hour_high", "empty"]),
        ("No Such GPU,1,1,,,\n", ["line 2, column gpu", "unknown GPU", "--gpu-specs"]),
        ("T4,1,1,,26/11/2026,\n", ["line 2, column date", "YYYY-MM-DD"]),
        ("T4,1,1,,2026-02-30,\n", ["line 2, column date", "'2026-02-30', no day of the calendar"]),
        ("T4,1,1,,2026-13-01,\n", ["line 2, column date", "no day of the calendar"]),
        ("T4,1,1\n", ["line 2: 3 fields where the header has 6"]),
        ("T4,nan,1,,,\n", ["line 2, column usd_per_hour_low", "'nan' is not a number"]),
        ("T4,1,inf,,,\n", ["line 2, column usd_per_hour_high", "'inf' is not a number"]),
        ("T4,1e400,1e400,,,\n", ["line 2, column usd_per_hour_low", "'1e400' is not a number"]),
        ("T4,1e300,1e300,,,\n", ["line 2, column usd_per_hour_low", "1e300 is outside $0.001 to $1,000", "per month"]),
        ("T4,0.3,1500,,,\n", ["line 2, column usd_per_hour_high", "1500 is outside"]),
        ("T4,0.0001,1,,,\n", ["line 2, column usd_per_hour_low", "0.0001 is outside"]),
        ("T4,1,1,,,\nT4,2,2,,,\n", ["line 3, column gpu", "line 2 already"]),
        ("", ["no price rows"]),
    ],
)
def test_a_malformed_price_file_is_one_line_naming_the_file_line_and_column(tmp_path, body, fragments):
    path = write(tmp_path, HEADER + body)
    with pytest.raises(UsageError) as e:
        prices.use_prices(path)
    assert str(e.value).startswith(f"--prices {path}") and "\n" not in str(e.value)
    for fragment in fragments:
        assert fragment in str(e.value)
    assert prices.table() == prices.builtin()  # a wrong file changes nothing


def test_a_wrong_header_or_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="unknown column 'cost'"):
        prices.use_prices(write(tmp_path, "gpu,cost\nT4,1\n"))
    with pytest.raises(UsageError, match="no column usd_per_hour_high"):
        prices.use_prices(write(tmp_path, "gpu,usd_per_hour_low\nT4,1\n"))
    with pytest.raises(UsageError, match="no such file"):
        prices.use_prices(str(tmp_path / "absent.csv"))


# ----------------------------------------------------------------------------------------------------------------------
# The work, the deadline, the ranking


@pytest.mark.parametrize(("text", "seconds"), [("2h", 7200), ("90m", 5400), ("3600s", 3600), ("1h30m", 5400),
                                               ("1.5h", 5400), ("1d", 86400), ("1d2h3m4s", 93784)])  # fmt: skip
def test_a_deadline_is_a_duration_with_its_unit(text, seconds):
    assert cost.parse_deadline(text) == seconds


@pytest.mark.parametrize(("text", "fragment"), [("-2h", "above zero"), ("0h", "above zero"), ("0", "unit"),
                                                ("2", "unit"), ("soon", "unit"), ("2h-1m", "unit"),
                                                ("1m1h", "each unit once, the largest first"),
                                                ("30m30m", "each unit once"), ("2h1d", "each unit once")])  # fmt: skip
def test_a_negative_zero_or_unitless_deadline_is_refused(text, fragment):
    with pytest.raises(UsageError, match=fragment):
        cost.parse_deadline(text)


def test_the_work_is_an_epoch_of_the_data_set_or_the_samples_given_never_both():
    fcn = BUILTIN["fcn-r"]  # MNIST
    assert cost.work(fcn, None, None)[0] == 60_000
    assert cost.work(fcn, None, 2.5)[0] == 150_000
    assert cost.work(fcn, 2048, None) == (2048, cost.Work("2,048 samples (--samples)"), 2)  # fcn-r's batch: 1024
    lstm = next(w for w in BUILTIN.values() if w.data == "Penn Treebank")
    assert cost.work(lstm, None, None)[0] == 929_589 // lstm.config["seq_len"]
    with pytest.raises(UsageError, match="--samples and --epochs"):
        cost.work(fcn, 10, 1.0)
    synthetic = next(w for w in BUILTIN.values() if w.data == "synthetic")
    with pytest.raises(UsageError, match="--samples N"):
        cost.work(synthetic, None, None)


def test_a_gpu_whose_memory_the_measured_peak_exceeds_does_not_fit():
    t4 = gpus.lookup("T4")  # sold as 16 GB, 14.56 GiB to CUDA, 14.06 GiB less the CUDA context
    assert cost.fits(t4, None, "fp32", 20 * 2**30) == (
        False,
        "does not fit: needs 20.0 GiB (the measured peak) of 14.1 GiB",
    )
    assert cost.fits(t4, None, "fp32", 2**30)[0]
    ok, why = cost.fits(t4, None, "fp32", None)
    assert ok and "not checked" in why
    # a peak just above the room read as equal to it at one decimal: "needs 14.1 GiB ... of 14.1 GiB"
    from dlperf.predict import memory

    assert cost.fits(t4, None, "fp32", memory.usable(t4) + 2**24) == (
        False,
        "does not fit: needs 14.08 GiB (the measured peak) of 14.06 GiB",
    )
    # one sample past the boundary: "14.060 GiB of 14.060" at three decimals, the most there were
    need, have = memory.apart(memory.usable(t4) + 2**12, memory.usable(t4))
    assert need != have and float(need) > float(have)


def test_a_measured_peak_is_set_against_the_room_predict_memory_uses_with_the_same_overhead():
    """Issue: --cost set a measured peak against the GPU's whole memory, --memory a predicted one against what CUDA
    leaves the allocator: a 15 GiB peak fitted a T4 for one and not the other."""
    from dlperf.predict import memory

    t4 = gpus.lookup("T4")
    traced = memory.usable(t4) + 2**25
    line = memory.Line(
        memory.Peak("w", "fp32", 1, 0, 0, 0, 0, traced), memory.Peak("w", "fp32", 2, 0, 0, 0, 0, 2 * traced)
    )
    need = line.at.total
    assert need < t4.memory_gib * 2**30  # within the 16 GB the T4 is sold with, past the room its allocator has
    assert memory.verdict(t4, line, 1).fits is False
    gib = memory.apart(need, memory.usable(t4))
    assert gib[0] != gib[1] and memory.verdict(t4, line, 1).why == f"does not fit (needs {gib[0]} GiB of {gib[1]} GiB)"
    assert cost.fits(t4, None, "fp32", None, need)[0] is False  # predicted
    assert cost.fits(t4, None, "fp32", need)[0] is False  # measured: the same figure, the same answer
    # a CPU cell's live-tensor peak gets the rule's overhead, as a predicted trace does; a CUDA peak is kept as it is;
    # a process's RSS (the interpreter's too) is no step's peak
    traced = 10 * 2**30
    cells = [make_cell("w", batch=8, peak_mem_bytes=traced, peak_mem_kind="live_tensors"),
             make_cell("w", batch=8, mode="bf16", peak_mem_bytes=traced, peak_mem_kind="cuda_allocator"),
             make_cell("w", batch=8, mode="fp16", peak_mem_bytes=2**40, peak_mem_kind="process_rss")]  # fmt: skip
    peaks = cost.measured_peaks(cells, 8)
    assert peaks == {"fp32": traced + memory.overhead(traced), "bf16": traced}


def test_a_peak_measured_in_fp32_says_nothing_of_fp16s():
    """A CPU cell's fp32 peak in the store stood for every mode: `predict --cost` left the T4 out in fp16 too ("does
    not fit: needs 20.0 GiB (the measured peak) ...; the largest batch that fits: 321" at batch 256), where its fp16
    step, predicted at half the activations, fits. A measured peak counts for its own mode (tf32 takes fp32's)."""
    from dlperf.predict import memory

    fcn = BUILTIN["fcn-r"]
    fp32 = 20 * 2**30
    cell = make_cell("fcn-r", batch=100, peak_mem_bytes=fp32 - memory.overhead(fp32), peak_mem_kind="live_tensors")
    peaks = cost.measured_peaks([cell], 100)
    found = [prediction("T4", 0.01, mode=m) for m in ("fp32", "tf32", "fp16")]
    x = cost.costs(fcn, found, 1000, "", peaks, predicted={"fp32": fp32, "tf32": fp32, "fp16": 10 * 2**30})
    assert [(r.mode, r.why) for r in x.rows] == [("fp16", "fits: the predicted peak 10.00 GiB of 14.1 GiB")]
    assert [(r.mode, r.why.split(" of ")[0]) for r in x.left_out] == [
        ("fp32", "does not fit: needs 20.0 GiB (the measured peak)"),
        ("tf32", "does not fit: needs 20.0 GiB (the measured peak)"),
    ]


def prediction(gpu, step_s, batch=100, mode="fp32"):
    return Prediction(gpu, "fcn-r", mode, batch, step_s, 0.0, "compute")


def test_fastest_cheapest_and_cheapest_within_the_deadline():
    fcn = BUILTIN["fcn-r"]
    found = [prediction("H100-SXM5-80GB", 0.001), prediction("T4", 0.010), prediction("GTX 1080", 0.004),
             prediction("L4", 0.004)]  # fmt: skip
    x = cost.costs(fcn, found, 1_000_000, "1,000,000 samples", {}, deadline_s=70)
    by = {r.gpu: r for r in x.rows}
    assert math.isclose(by["T4"].time_s, 10_000 * 0.010)
    low, high = by["T4"].cost()
    assert math.isclose(low, 100 / 3600 * 0.5904) and math.isclose(high, 100 / 3600 * 0.81)
    assert math.isclose(by["T4"].per_million()[0], low)  # a million samples: the same work here
    assert by["GTX 1080"].price is None and by["GTX 1080"].cost() is None  # no price: timed, never ranked by cost
    assert x.fastest().gpu == "H100-SXM5-80GB"
    assert x.cheapest().gpu == "L4"  # 40 s at $0.684/h beats the H100's 10 s at $3.78/h
    assert x.cheapest(70).gpu == "L4" and x.cheapest(30).gpu == "H100-SXM5-80GB" and x.cheapest(5) is None


def test_gpus_that_do_not_fit_are_left_out_with_the_reason():
    fcn = BUILTIN["fcn-r"]
    x = cost.costs(fcn, [prediction("T4", 0.01), prediction("H100-SXM5-80GB", 0.001)], 1000, "", {"": 40 * 2**30})
    assert [r.gpu for r in x.rows] == ["H100-SXM5-80GB"]
    assert [(r.gpu, r.why) for r in x.left_out] == [
        ("T4", "does not fit: needs 40.0 GiB (the measured peak) of 14.1 GiB")
    ]


def test_this_cpu_from_its_fastest_measured_cell_at_the_batch_and_its_energy():
    cells = [make_cell("fcn-r", batch=100, median_s=0.5, threads=1), make_cell("fcn-r@b100", batch=100, median_s=0.2,
             threads=2), make_cell("fcn-r", batch=200, median_s=0.1), make_cell("fcn-r", device="cuda:0", batch=100,
             median_s=0.01)]  # fmt: skip
    cell = cost.measured_cpu(cells, 100, read({}), quoted, [1])
    assert cell.median_s == 0.2 and cell.threads == 2  # the fastest thread count, as crossover's search takes it
    cpu = cost.cpu_cost(cell, 1000, watts=200, kwh_price=0.30)
    assert math.isclose(cpu.time_s, 10 * 0.2) and math.isclose(cpu.kwh, 200 * 2 / 3600 / 1000)
    assert math.isclose(cpu.energy_cost, cpu.kwh * 0.30)
    assert cost.measured_cpu(cells, 64, read({}), quoted, [1]) is None


def test_this_cpu_is_the_cell_advise_would_quote_not_the_fastest_of_any_run():
    """advise kept fp32 (473 µs: fused+tcmalloc's 328 µs was not told apart from it), yet `predict --cost` quoted the
    328 µs cell, the minimum over every cell of every run, disturbed ones among them. Now the latest run's cell by the
    rule advise quotes its mode search by (`optimize_results.quoted`): a mode only where it is reliably faster."""
    import random

    rng = random.Random(0)
    steps = lambda median, spread, n=200: [[median * (1 + spread * rng.uniform(-1, 1)) for _ in range(n)]]  # noqa: E731
    fp32 = make_cell("tiny-fcn-r", batch=16, median_s=473e-6, n=200, run_id=5)
    tcmalloc = make_cell("tiny-fcn-r", batch=16, mode="tcmalloc", median_s=328e-6, n=200, run_id=5)
    earlier = make_cell("tiny-fcn-r", batch=16, median_s=250e-6, n=200, run_id=4)  # a faster, older run: not quoted
    cells = [earlier, fp32, tcmalloc]
    apart = {(5, fp32.key): steps(473e-6, 0.02), (5, tcmalloc.key): steps(328e-6, 0.02)}
    order = [5, 4]  # the latest first
    assert cost.measured_cpu(cells, 16, read(apart), quoted, order) is tcmalloc  # told apart, 44% faster
    mixed = {(5, fp32.key): steps(473e-6, 0.9, 8), (5, tcmalloc.key): steps(328e-6, 0.9, 8)}  # not told apart
    assert cost.measured_cpu(cells, 16, read(mixed), quoted, order) is fp32
    assert cost.measured_cpu(cells, 16, read({}), quoted, order) is fp32  # no steps to tell them apart by: fp32 eager
    assert cost.measured_cpu([earlier, tcmalloc], 16, read(apart), quoted, order) is earlier  # no fp32 in run 5: run 4


def test_only_the_run_quoted_is_read_and_step_times_that_cannot_be_read_quote_fp32_with_a_note():
    """One damaged samples row of any run stopped `predict --cost` ("its stored samples cannot be read"): every CPU
    cell's step times of every run were read first. Now a run's only as it is reached, and a row that no longer
    decodes is none of that run's (no mode told apart from fp32 eager: fp32 quoted), said."""
    from dlperf.errors import UnreadableRow

    fp32 = make_cell("tiny-fcn-r", batch=16, median_s=473e-6, n=200, run_id=5)
    bf16 = make_cell("tiny-fcn-r", batch=16, mode="bf16", median_s=200e-6, n=200, run_id=5)
    older = make_cell("tiny-fcn-r", batch=16, median_s=250e-6, n=200, run_id=4)
    cells, reads = [older, fp32, bf16], []
    assert cost.measured_cpu(cells, 16, lambda run, them: reads.append(run) or {}, quoted, [5, 4]) is fp32
    assert reads == [5]  # run 4 is never read

    def damaged(run, cells):
        raise UnreadableRow(run, fp32.key, "samples", "JSONDecodeError: Expecting value")

    notes = []
    assert cost.measured_cpu(cells, 16, cost.readable(damaged, notes), quoted, [5, 4]) is fp32
    (note,) = notes
    assert note.startswith(f"run 5, cell {fp32.key}: its stored samples cannot be read (JSONDecodeError: Expecting")
    assert note.endswith("this CPU's step is that run's fp32 eager one, no other mode told apart from it without them")


def test_this_cpu_is_this_machines_run_measured_last_not_the_highest_id():
    """`dlperf merge` gives the runs it copies ids in its own order: the quoted run was the highest id, measured a
    day before the other, and another machine's run merged in was quoted as "this CPU"'s. Now the runs this machine
    measured, the latest by its start first (`RunRecord.order`), the others' machines said."""
    from dlperf.store.records import RunRecord

    here = {"cpu": {"model": "Here CPU"}, "cores": {"cores": 2}, "memory_total_bytes": 8 * 2**30}
    there = {**here, "cpu": {"model": "There CPU"}}
    run = lambda i, day, env: RunRecord(i, f"2026-11-{day}T10:00:00+00:00", None, "complete", [], {}, env, {})  # noqa: E731
    runs = [run(1, 12, here), run(2, 11, here), run(3, 13, there), run(4, 10, {})]  # run 4 recorded no machine
    order, elsewhere = cost.this_cpu(runs, here)
    assert order == [1, 2, 4] and elsewhere == {3: ["CPU model There CPU -> Here CPU"]}
    old, new = make_cell("fcn-r", batch=100, median_s=0.5, run_id=2), make_cell("fcn-r", batch=100, median_s=0.7)
    assert cost.measured_cpu([old, new], 100, read({}), quoted, order) is new  # run 1, measured last, not run 2
    other = make_cell("fcn-r", batch=100, median_s=0.1, run_id=3)
    (note,) = cost.elsewhere_notes([old, new, other], 100, elsewhere)
    assert note.startswith("run 3 measured another machine (CPU model There CPU -> Here CPU), so its CPU step")
    assert cost.elsewhere_notes([old, new, other], 64, elsewhere) == []  # none of it at the batch: nothing to say


@pytest.mark.parametrize(
    ("command", "typed", "value"),
    [("advise", "150", 150.0), ("advise", "5m", 300.0), ("advise", "1h30m", 5400.0), ("advise", "90s", 90.0),
     ("optimize", "15", 15.0), ("optimize", "90s", 1.5), ("optimize", "2h", 120.0), ("optimize", "0.25", 0.25)],
)  # fmt: skip
def test_a_budget_is_a_bare_number_in_its_commands_unit_or_a_duration_with_its_own(command, typed, value):
    """`advise --budget` counts seconds and `optimize --budget` minutes: a user who meant 15 minutes got 15 s of
    advice; a unit (15m) now says which."""
    from dlperf.cli import build_parser

    args = build_parser().parse_args([command, "tiny-fcn-r", "--budget", typed])
    assert args.budget == pytest.approx(value)


@pytest.mark.parametrize("typed", ["0", "-5m", "15 minutes", "nan", "2x", "25h"])
def test_a_bad_budget_is_one_line_naming_the_units(typed):
    from dlperf.cli import build_parser

    with pytest.raises(UsageError, match=r"^--budget .*(duration|seconds)") as caught:
        build_parser().parse_args(["advise", "tiny-fcn-r", f"--budget={typed}"])
    assert "\n" not in str(caught.value)


def test_a_stored_cell_of_another_model_of_the_same_name_is_not_used_and_said():
    """Two user factories named alike, or one named like a built-in: a cell is the workload's only when its stored
    workload is the same model (`dlperf compare`'s notion: params, source, ...), whatever its batch."""
    from dataclasses import replace

    mine = replace(BUILTIN["fcn-r"], batch=100)
    other = {**mine.to_json(), "params": 7, "source": "/home/u/mymodel.py:make"}
    cells = [make_cell("fcn-r", batch=100, median_s=0.5, workload_spec=mine.to_json()),
             make_cell("fcn-r", batch=100, median_s=0.00944, workload_spec=other, run_id=3, peak_mem_bytes=2**40),
             make_cell("fcn-r@b100", batch=100, median_s=0.4, workload_spec={**mine.to_json(), "name": "fcn-r@b100"}),
             make_cell("fcn-r", batch=100, median_s=0.3, run_id=2)]  # fmt: skip  # stored without its workload: kept
    kept, notes = cost.same_model(cells, BUILTIN["fcn-r"])
    assert [c.median_s for c in kept] == [0.5, 0.4, 0.3]
    assert cost.measured_cpu(kept, 100, read({}), quoted, [3, 2, 1]).median_s == 0.3
    assert cost.measured_peaks(kept, 100) == {}
    (note,) = notes
    assert note.startswith("the store's fcn-r of run 3 was a different model (the workloads differ: params ")
    assert "source None -> " not in note and "source /home/u/mymodel.py:make -> None" in note
    assert note.endswith("so it was not used")


def test_gpus_predicted_alike_are_a_tie_and_the_cheapest_of_them_is_the_fastest():
    """Issue: A100 and H100 both 16.5 ms (launch-bound: the host decides), "Fastest" named the H100 at 1.5-5 times the
    A100's price. Times within `TIE` are a tie (an exact one included), the cheapest of the tied is the pick."""
    fcn = BUILTIN["fcn-r"]
    found = [prediction("H100-SXM5-80GB", 0.01650), prediction("A100-SXM4-80GB", 0.01652),
             prediction("GTX 1080", 0.0165), prediction("T4", 0.03)]  # fmt: skip
    x = cost.costs(fcn, found, 1_000_000, "", {})
    assert x.fastest().gpu == "A100-SXM4-80GB"  # priced and cheaper than the H100; the GTX 1080 has no price
    assert x.tied_with() == ["H100-SXM5-80GB", "GTX 1080"]
    assert cost.to_json(x)["fastest_tied_with"] == ["H100-SXM5-80GB", "GTX 1080"]
    # past the tolerance, the faster wins whatever it costs
    apart = cost.costs(fcn, [prediction("H100-SXM5-80GB", 0.0100), prediction("A100-SXM4-80GB", 0.0102)], 1000, "", {})
    assert apart.fastest().gpu == "H100-SXM5-80GB" and apart.tied_with() == []


def test_a_price_file_saved_by_a_spreadsheet_with_a_byte_order_mark_is_read(tmp_path):
    """Issue: a price file saved as "CSV UTF-8" by a spreadsheet starts with a BOM, and was refused with "unknown column
    '\\ufeffgpu'"; its rows are read as any other file's (and a --gpu-specs file's alike, through gpus.read_text)."""
    path = tmp_path / "prices.csv"
    path.write_bytes(b"\xef\xbb\xbfgpu,usd_per_hour_low,usd_per_hour_high\r\nT4,0.3,0.4\r\n")
    prices.use_prices(str(path))
    t4 = prices.price(gpus.lookup("T4"))
    assert (t4.low, t4.high, t4.user) == (0.3, 0.4, True)


def test_the_work_is_counted_in_the_steps_the_loader_trains_as_advise_counts_it():
    """predict --cost counted an epoch as ceil(samples / batch) steps (1,000 samples at batch 64: 16), where dlperf's
    DataLoaders drop a partial last batch (drop_last: 15) and `advise --data` counts 15 since 8e3e9d4; both now count
    through `cost.epoch`, the samples left out said, on each GPU and on this CPU."""
    from dataclasses import replace

    from dlperf import advise

    fcn = replace(BUILTIN["fcn-r"], batch=64)  # MNIST
    samples, what, steps = cost.work(fcn, 1000, None)
    assert (samples, steps) == (1000, 15)
    assert what.full == ("1,000 samples (--samples: 15 steps of batch 64, the last 40 samples left out as the loader "
                         "drops a partial batch)")  # fmt: skip
    assert advise._work(fcn, advise.Options(fcn.name), 1000)[2] == 15  # advise --data's count of the same samples
    assert advise._work(fcn, advise.Options(fcn.name, samples=1000))[2] == 15  # and advise --samples
    x = cost.costs(fcn, [prediction("T4", 0.01, batch=64)], samples, what, {}, steps=steps)
    assert math.isclose(x.rows[0].time_s, 15 * 0.01)
    assert math.isclose(cost.costs(fcn, [prediction("T4", 0.01, batch=64)], 1000, what, {}).rows[0].time_s, 0.15)
    cpu = cost.cpu_cost(make_cell("fcn-r", batch=64, median_s=0.02), samples, 100, 0.15, steps=steps)
    assert math.isclose(cpu.time_s, 15 * 0.02)
    # an epoch of MNIST: 937 whole batches of 64 (32 samples left out), and each of 2.5 epochs drops its own
    assert cost.work(fcn, None, None)[2] == 937 and cost.work(fcn, None, 2.5)[2] == round(937 * 2.5)
    assert (
        "(937 steps of batch 64, the last 32 samples left out as the loader drops a partial batch)"
        in cost.work(fcn, None, None)[1].full
    )
    with pytest.raises(UsageError, match=r"^--samples 50: fewer than one batch of 64"):
        cost.work(fcn, 50, None)  # a loader that drops a partial batch trains none of them
    with pytest.raises(UsageError, match=r"^--epochs 0.0001: 6 samples of .*fewer than one batch of 64: give at "
                       r"least --epochs 0.0011$"):  # fmt: skip
        cost.work(fcn, None, 0.0001)  # charged a whole step, where --samples 6 was refused


def test_a_cpu_peak_does_not_stand_for_a_gpus_where_one_is_predicted():
    """A 402M-parameter model with Adam: its CPU cell's peak (6.13 GiB: the optimizer updates one tensor at a time
    there) called a 7.5 GiB GPU "Cheapest ... fits", where `predict --memory` (7.75 GiB: a GPU's foreach update holds
    temporaries the size of the parameters) said it does not fit. A GPU cell's peak is the GPU's own."""
    cpu = make_cell("w", batch=8, peak_mem_bytes=6 * 2**30, peak_mem_kind="live_tensors")
    gpu = make_cell("w", device="cuda:0", batch=8, mode="bf16", peak_mem_bytes=5 * 2**30,
                    peak_mem_kind="cuda_allocator")  # fmt: skip
    predicted = {"fp32": 8 * 2**30, "bf16": 6 * 2**30}
    assert cost.measured_peaks([cpu, gpu], 8, predicted) == {"bf16": 5 * 2**30}
    assert set(cost.measured_peaks([cpu, gpu], 8, {"bf16": 1})) == {"fp32", "bf16"}  # fp32 not predicted: the CPU's
    assert cost.measured_peaks([cpu], 8, {"tf32": 1}) == {}  # tf32 takes fp32's peak: not the CPU's where predicted
