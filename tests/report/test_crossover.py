"""The crossover view: from which batch a GPU pays, a measured CUDA cell preferred over a prediction, the figure and
the report's section; store rows built by hand (the figures are made up, no framework runs)."""

from __future__ import annotations

from dataclasses import replace
from html import escape

from dlperf.envinfo import fingerprint
from dlperf.predict import roofline
from dlperf.protocol import Cell
from dlperf.report import charts, crossover, figures
from dlperf.report.crossover import pays_from
from dlperf.report.html import render
from dlperf.report.load import load
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell, Prediction
from dlperf.vocab import Status

ENV = {"cores": {"cores": 2}, "cpu": {"model": "Test CPU"}, "frameworks": {"torch": {"version": "2.13.0"}}}
GPU_ENV = {**ENV, "frameworks": {"torch": {"version": "2.13.0", "devices": [{"name": "cuda:0", "model": "Tesla T4"}]}}}


def test_the_gpu_pays_from_the_smallest_batch_after_which_it_is_always_faster():
    assert pays_from([(1, 1.0, 2.0), (8, 2.0, 1.5), (64, 9.0, 2.0)]) == 8
    assert pays_from([(64, 9.0, 2.0), (1, 1.0, 0.5), (8, 2.0, 1.5)]) == 1  # in any order
    assert pays_from([(1, 1.0, 2.0), (8, 2.0, 3.0), (64, 3.0, 4.0)]) is None  # never
    # pays at 1, stops at 8, pays again from 64: "from 64"
    assert pays_from([(1, 1.0, 0.5), (8, 2.0, 2.5), (64, 9.0, 2.0), (128, 20.0, 3.0)]) == 64
    assert pays_from([(1, 1.0, 0.5), (8, 2.0, 2.5)]) is None  # paid, but not at the largest
    assert pays_from([(8, 2.0, 2.0)]) is None  # as fast is not faster


def cell(batch: int, threads: int = 1, device: str = "cpu", name: str | None = None) -> PlannedCell:
    workload = name or crossover.variant_name("tiny-fcn-r", batch)
    return PlannedCell(Cell(workload, "torch", device, threads, "fp32"), {"batch": batch})


def measure(store: Store, run_id: int, c: PlannedCell, median_s: float) -> None:
    m = ProcessMeasurement(status=Status.OK, samples=[median_s] * 3)
    store.record(run_id, c.cell.key, 0, m, CellFigures(status=Status.OK, median_s=median_s, n=3))


def prediction(c: PlannedCell, gpu: str, step_s: float, user_batch: int = 8, copy: float = 0.1) -> Prediction:
    return Prediction(c.cell.key, gpu, "fp32", c.workload["batch"], step_s, step_s * (1 - copy), step_s * copy,
                      "launch", {crossover.KIND: {"user_batch": user_batch}})  # fmt: skip


def crossover_run(
    path, cpu: dict[int, float], gpu: dict[int, float], gpu_name: str = "T4", copy: float = 0.1, more=None
) -> tuple[Store, int]:
    """A crossover run: CPU cells at each batch (two thread counts at batch 8, the user's), predictions beside them
    (`more`: other GPUs', by name)."""
    store = Store.open(path, create=True)
    cells = {b: cell(b) for b in cpu}
    slower = cell(8, threads=2)
    run_id = store.create_run({"workloads": ["tiny-fcn-r"]}, ENV, fingerprint(ENV), ["dlperf", "crossover"],
                              [*cells.values(), slower])  # fmt: skip
    for b, c in cells.items():
        measure(store, run_id, c, cpu[b])
    measure(store, run_id, slower, cpu[8] * 3)
    for name, steps in {gpu_name: gpu, **(more or {})}.items():
        store.record_predictions(run_id, [prediction(cells[b], name, s, copy=copy) for b, s in steps.items()])
    store.set_run_status(run_id, "complete")
    return store, run_id


def test_a_crossover_run_reads_back_with_its_answer(tmp_path):
    store, run_id = crossover_run(tmp_path / "d.db", {1: 0.001, 8: 0.004, 64: 0.03}, {1: 0.002, 8: 0.003, 64: 0.004})
    [x] = crossover.read(store, [run_id])
    assert (x.workload, x.user_batch, x.gpus) == ("tiny-fcn-r", 8, ["T4"])
    assert [r.batch for r in x.rows] == [1, 8, 64]
    assert x.rows[1].cpu.threads == 1  # the faster of the two thread counts at batch 8
    assert x.pays_from("T4") == 8
    lines = x.lines()
    assert lines == [
        f"T4: predicted faster than this CPU from batch 8, launch-bound there; uncertainty {roofline.uncertainty()}",
        "T4: at your batch 8: GPU predicted 1.3 times faster",
    ]
    assert not x.rows[0].gpus["T4"].measured


def test_a_gpu_the_step_does_not_fit_says_so_beside_its_speed_up(tmp_path):
    """A 0.6 GiB GPU read "GPU predicted 120.9 times faster" at a batch 2.7 times the largest it holds: the CPU's
    measured peak of live tensors, with the allocator's overhead, is set against its memory."""
    store, run_id = crossover_run(tmp_path / "d.db", {1: 0.001, 8: 0.004, 64: 0.03}, {1: 0.002, 8: 0.003, 64: 0.004})
    [x] = crossover.read(store, [run_id])
    fits = x.lines()[1]
    x.rows[1].cpu = replace(x.rows[1].cpu, peak_mem_bytes=20 * 2**30, peak_mem_kind="live_tensors")
    assert x.lines()[1].startswith(f"{fits}, but the step does not fit its memory (needs 20.")
    assert x.lines()[1].endswith("GiB (the measured peak) of 14.1 GiB)")
    x.rows[1].cpu = replace(x.rows[1].cpu, peak_mem_bytes=2**30)  # 1 GiB: T4 holds it
    assert x.lines()[1] == fits
    verdict = x.lines()[0]  # "faster from batch 8" read as every batch from 8: batch 64's step does not fit
    x.rows[2].cpu = replace(x.rows[2].cpu, peak_mem_bytes=20 * 2**30, peak_mem_kind="live_tensors")
    assert x.lines()[0] == verdict.replace("; uncertainty", "; its memory does not hold the step from batch 64; "
                                           "uncertainty")  # fmt: skip


def test_two_gpus_predicted_say_the_uncertainty_once(tmp_path):
    """It is the same three lines for every GPU: after each of two, they read as twice the answer's length."""
    h100 = {"H100-SXM5-80GB": {1: 0.0005, 8: 0.001}}
    store, run_id = crossover_run(tmp_path / "d.db", {1: 0.001, 8: 0.004}, {1: 0.002, 8: 0.003}, more=h100)
    [x] = crossover.read(store, [run_id])
    assert x.gpus == ["H100-SXM5-80GB", "T4"] or x.gpus == ["T4", "H100-SXM5-80GB"]
    lines = x.lines()
    assert sum("uncertainty" in line for line in lines) == 1
    assert lines[-1] == f"the GPUs' predicted steps: uncertainty {roofline.uncertainty()}"
    assert "T4: predicted faster than this CPU from batch 8, launch-bound there" in lines


def test_a_run_without_crossover_predictions_is_no_crossover(tmp_path):
    store = Store.open(tmp_path / "d.db", create=True)
    c = cell(8)
    run_id = store.create_run({}, ENV, fingerprint(ENV), ["dlperf", "run"], [c])
    measure(store, run_id, c, 0.01)
    plain = replace(prediction(c, "T4", 0.001), detail={})  # a GPU run's own prediction, not set against a CPU
    store.record_predictions(run_id, [plain])
    assert crossover.read(store, [run_id]) == []


def test_a_measured_cuda_cell_is_preferred_over_the_prediction(tmp_path):
    store, run_id = crossover_run(tmp_path / "d.db", {1: 0.001, 8: 0.004}, {1: 0.002, 8: 0.003})
    # a GPU machine's run merged in: the workload at batch 8 measured on a T4, slower than predicted
    cuda = cell(8, device="cuda:0", name="tiny-fcn-r")
    gpu_run = store.create_run({}, GPU_ENV, fingerprint(GPU_ENV), ["dlperf", "run"], [cuda])
    measure(store, gpu_run, cuda, 0.005)
    [x] = crossover.read(store, [run_id])
    step = x.rows[1].gpus["T4"]
    assert step.measured and abs(step.step_s - (0.005 + 0.0003)) < 1e-12  # the measured step plus the predicted copy
    assert not x.rows[0].gpus["T4"].measured  # batch 1 has no CUDA cell: still predicted
    assert x.pays_from("T4") is None
    assert "T4: at your batch 8: GPU measured 1.3 times slower" in x.lines()
    assert x.lines()[0].startswith("T4: not faster than this CPU up to batch 8 (measured there)")
    head, rows = crossover.table_rows(x)
    assert head[2:] == ["T4", "speed-up"] and rows[1][2].endswith("measured") and rows[0][2].endswith("predicted")


def test_the_figure_is_written_and_the_report_has_the_section(tmp_path):
    store, run_id = crossover_run(tmp_path / "d.db", {1: 0.001, 8: 0.004, 64: 0.03}, {1: 0.002, 8: 0.003, 64: 0.004})
    store.close()
    data = load(str(tmp_path / "d.db"))
    [x] = data.crossovers
    chart = crossover.chart(x)
    assert chart.log_x and chart.log_y and chart.marks == {"T4 predicted faster from 8": 8.0}
    assert [(s.label, s.dashed) for s in chart.series] == [("CPU, measured", False), ("T4, predicted", True)]
    # a prediction is drawn with the predictor's held-out error as its bar, not as an exact line
    low, high = roofline.error_band()
    assert [(p.y, p.low, p.high) for p in chart.series[1].points] == [
        (s, s * low, s * high) for s in (0.002, 0.003, 0.004)]  # fmt: skip
    assert f"each bar from {low:.2f} to {high:.2f} times the prediction" in chart.caption
    assert f"predicted ({crossover.seconds(0.002 * low)} to" in chart.series[1].points[0].tip
    png = tmp_path / "x.png"
    figures.save([chart], png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = render(data)
    assert '<section id="crossover">' in page and "T4: predicted faster than this CPU from batch 8" in page
    assert f'id="chart-crossover-{run_id}"' in page


def test_a_crossover_of_many_gpus_draws_a_few_and_the_table_keeps_them_all(tmp_path):
    """advise's crossover predicts all 26 priced GPUs: its chart drew 27 lines and 26 marks, the legend taller than
    the figure (matplotlib warned "axes sizes collapsed to zero" on the report's stderr). It draws CHARTED GPUs: those
    predicted faster from the smallest batch, then the fastest at the largest; a measured GPU before them all."""
    import warnings

    steps = {f"GPU-{i}": {1: 0.0005 if i < 3 else 0.002, 8: 0.003, 64: 0.004 + i * 1e-4} for i in range(10)}
    steps["GPU-9"] = {1: 0.0004, 8: 0.0005, 64: 0.0006}  # pays from batch 1, the fastest too
    store, run_id = crossover_run(tmp_path / "d.db", {1: 0.001, 8: 0.004, 64: 0.03}, {1: 0.002, 8: 0.003, 64: 0.05},
                                  more=steps)  # fmt: skip
    [x] = crossover.read(store, [run_id])
    chart = crossover.chart(x)
    drawn = {s.label.removesuffix(", predicted") for s in chart.series[1:]}
    assert len(x.gpus) == 11 and drawn == {"GPU-9", "GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-4"}
    assert "6 of the 11 GPUs drawn" in chart.caption and len(chart.marks) == 6
    head, rows = crossover.table_rows(x)  # every GPU, a row each, as there are more GPUs than batches
    assert head == ["GPU", "batch 1", "speed-up", "batch 8", "speed-up", "batch 64", "speed-up"]
    assert [r[0] for r in rows] == ["CPU (threads)", *x.gpus] and rows[0][1:3] == ["1.00 ms? (1)", "-"]  # ?: 3 steps
    assert rows[1 + x.gpus.index("GPU-9")][1:] == ["400 µs predicted", "2.50x?", "500 µs predicted", "8.00x?",
                                                   "600 µs predicted", "50.00x?"]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figures.save([chart], tmp_path / "x.png")
    few = crossover_run(tmp_path / "e.db", {1: 0.001, 8: 0.004}, {1: 0.002, 8: 0.003}, more={"L4": {1: 1.0, 8: 1.0}})
    [x] = crossover.read(few[0], [few[1]])
    assert len(crossover.chart(x).series) == 3 and "drawn" not in crossover.chart(x).caption


def test_the_answer_of_many_gpus_is_a_line_a_verdict_and_one_of_speed_ups_and_the_cheapest_three(tmp_path):
    """advise's crossover of 26 GPUs answered in 52 lines ("T4: predicted faster ...", "T4: at your batch 128: GPU
    predicted 10.7 times faster", each GPU in turn) and 26 lines of cost: the GPUs of one verdict now share a line,
    the speed-ups at the user's batch another, fastest first, and the cost names the three cheapest."""
    from dlperf.report import cost

    names = ["T4", "L4", "A10", "A100-SXM4-80GB", "H100-SXM5-80GB", "RTX 3090", "RTX 4090"]
    steps = {name: {8: 0.001 + 0.0001 * i} for i, name in enumerate(names)}
    steps["L4"] = {8: 0.008}  # slower than the CPU's 4 ms
    store, run_id = crossover_run(tmp_path / "d.db", {8: 0.004}, {8: 0.001}, gpu_name="K80 (1 GK210 die)", more=steps)
    [x] = crossover.read(store, [run_id])
    lines = x.lines()
    assert len(lines) == 4, lines  # faster, not faster, the speed-ups, the uncertainty
    faster = [line for line in lines if line.startswith("predicted faster than this CPU from batch 8, launch-bound")]
    assert len(faster) == 1 and faster[0].endswith(": K80 (1 GK210 die), T4, A10, A100-SXM4-80GB, H100-SXM5-80GB, "
                                                   "RTX 3090, RTX 4090")  # fmt: skip
    assert "not predicted faster than this CPU up to batch 8 (launch-bound there): L4" in lines
    (ratios,) = [line for line in lines if line.startswith("at your batch 8, each GPU's speed-up over this CPU")]
    assert ratios.endswith(": K80 (1 GK210 die) 4.0x, T4 4.0x, A10 3.3x, A100-SXM4-80GB 3.1x, H100-SXM5-80GB 2.9x, "
                           "RTX 3090 2.7x, RTX 4090 2.5x, L4 0.50x")  # fmt: skip
    (costs,) = cost.crossover_lines(x)
    assert costs.startswith("at your batch 8, a million samples cost the least on ") and costs.count("$") >= 3
    assert "the table gives each priced GPU's" in costs


def test_a_crossover_of_one_batch_has_its_table_in_the_report_and_no_chart(tmp_path):
    """advise's crossover is at the user's batch alone: its chart drew each GPU's one point over a single tick."""
    store, run_id = crossover_run(tmp_path / "d.db", {8: 0.004}, {8: 0.003})
    store.close()
    page = render(load(str(tmp_path / "d.db")))
    assert '<section id="crossover">' in page and "T4: at your batch 8: GPU predicted 1.3 times faster" in page
    assert f'id="chart-crossover-{run_id}"' not in page


def test_the_paper_rows_show_the_best_tool_and_the_range():
    [row] = crossover.paper_rows([("fcn-s", "FCN-S", 64, 0.02, "compute")])
    assert row.best == ("Caffe", 0.030) and min(row.tools.values()) == 0.030 and len(row.tools) >= 4
    head, [text] = crossover.paper_table([row])
    assert head[2] == "predicted" and text[0] == "FCN-S" and text[4] == "30.0 ms Caffe"
    assert text[5].startswith("30.0 ms to ") and text[6] == "1.50"


def test_a_damaged_prediction_row_leaves_the_report_without_the_crossover_and_says_so(tmp_path):
    db = tmp_path / "d.db"
    store, _ = crossover_run(db, {1: 0.001, 8: 0.004}, {1: 0.002, 8: 0.003})
    store.close()
    text = b'{"crossover": {"user_batch": 8}}'
    data = db.read_bytes()
    assert data.count(text) == 2  # each prediction's detail, as a bad sector would garble it
    db.write_bytes(data.replace(text, b"\x00garbled" + text[8:], 1))
    loaded = load(str(db))
    assert loaded.crossovers == [] and any("prediction" in str(f) for f in loaded.unreadable)
    assert '<section id="crossover">' not in render(loaded)


def test_the_answer_says_predicted_with_the_uncertainty_and_the_bound_the_copy_among_them(tmp_path):
    """Issue 32: not "the GPU pays" but what the predictor says, its uncertainty, and what bounds the GPU's step
    there: compute, memory, launch, or the batch's copy when the copy is most of the step."""
    store, run_id = crossover_run(tmp_path / "d.db", {1: 0.001, 8: 0.004}, {1: 0.002, 8: 0.003}, copy=0.6)
    [x] = crossover.read(store, [run_id])
    assert x.lines()[0] == (
        f"T4: predicted faster than this CPU from batch 8, bound by the batch's copy there; uncertainty "
        f"{roofline.uncertainty()}"
    )
    store, run_id = crossover_run(tmp_path / "e.db", {1: 0.001, 8: 0.002}, {1: 0.002, 8: 0.003})
    [x] = crossover.read(store, [run_id])
    assert x.lines()[0] == (
        f"T4: not predicted faster than this CPU up to batch 8 (launch-bound there); uncertainty "
        f"{roofline.uncertainty()}"
    )
    store, run_id = crossover_run(tmp_path / "f.db", {1: 0.001, 8: 0.002}, {1: 0.0005, 8: 0.003})
    [x] = crossover.read(store, [run_id])
    assert x.lines()[0].startswith(
        "T4: not predicted faster than this CPU at batch 8, the largest measured (it is at 1; launch-bound at 8)"
    )


def test_the_report_shows_the_cost_of_a_million_samples_beside_each_priced_gpu(tmp_path):
    """The T4 has a price row (data/gpu_prices.csv), the GTX 1080 none: its columns stay as they were."""
    from dlperf.predict import prices

    store, run_id = crossover_run(tmp_path / "d.db", {1: 0.001, 8: 0.004, 64: 0.03}, {1: 0.002, 8: 0.003, 64: 0.004})
    store.record_predictions(run_id, [prediction(cell(8), "GTX 1080", 0.002)])
    store.close()
    page = render(load(str(tmp_path / "d.db")))
    t4 = prices.price(crossover_gpu("T4"))
    per_million = 1e6 * 0.004 / 64 / 3600  # hours for a million samples at batch 64
    assert "T4 $ per M samples" in page and "GTX 1080 $ per M samples" not in page
    assert f"${per_million * t4.low:.4f}-${per_million * t4.high:.4f}" in page  # about a cent at batch 64
    assert "T4: at your batch 8, $" in page and "per million samples at $0.590-$0.810 a GPU-hour" in page


def crossover_gpu(name: str):
    from dlperf.predict import gpus

    return gpus.lookup(name)


BUSY = "other processes used 64% of the CPUs while this cell was timed"


def busy_run(path, n: int = 30) -> None:
    """A crossover run of batches 1, 8 and 64, each CPU step of `n` samples, batch 8's timed on busy CPUs."""
    store = Store.open(path, create=True)
    cells = {b: cell(b) for b in (1, 8, 64)}
    run_id = store.create_run({"workloads": ["tiny-fcn-r"]}, ENV, fingerprint(ENV), ["dlperf", "crossover"],
                              list(cells.values()))  # fmt: skip
    for b, c in cells.items():
        figures_ = CellFigures(status=Status.OK, median_s=0.001 * b, n=n, warnings=[BUSY] if b == 8 else [])
        store.record(run_id, c.cell.key, 0, ProcessMeasurement(status=Status.OK, samples=[0.001 * b] * n), figures_)
    store.record_predictions(run_id, [prediction(cells[b], "T4", 0.004) for b in cells])
    store.set_run_status(run_id, "complete")
    store.close()


def test_a_cpu_step_timed_on_busy_cpus_is_drawn_hollow(tmp_path):
    """A crossover run while other processes used 59-68% of the 2 cores drew its CPU steps as precise points, the
    line the GPUs are held against, with nothing said; as plot scaling's, such a point is hollow with a '?', its hover
    text the warning, and a quiet batch's stays filled."""
    busy_run(tmp_path / "d.db")
    busy = BUSY
    [x] = load(str(tmp_path / "d.db")).crossovers
    chart = crossover.chart(x)
    cpu = chart.series[0].points
    assert [p.doubtful for p in cpu] == [False, True, False]
    assert f"? {busy}" in cpu[1].tip.splitlines()
    assert chart.doubt == charts.DISTURBED_CELL and chart.doubt in chart.caption


def test_a_cpu_step_timed_on_busy_cpus_is_marked_in_the_table_with_its_legend(tmp_path, capsys):
    """The chart drew a busy batch's CPU step hollow, but the table beside it (dlperf crossover's text, the report's
    section) showed it as a quiet one, its speed-up too: a reader of the table could not tell the row. As the run's
    table marks a cell of few samples, the CPU step and the speed-ups set against it carry '?', the legend under the
    table says what it means, and the quiet rows carry none."""
    from dlperf.commands.run import print_answer

    busy_run(tmp_path / "d.db")
    data = load(str(tmp_path / "d.db"))
    [x] = data.crossovers
    head, rows = crossover.table_rows(x)
    assert head == ["batch", "CPU (threads)", "T4", "speed-up"]
    assert [r[1].split(" (")[0].endswith("?") for r in rows] == [False, True, False]
    assert [r[3].endswith("x?") for r in rows] == [False, True, False]
    said = "? = the CPU step (and each speed-up set against it) from " + charts.DISTURBED_CELL
    assert crossover.legend(x) == [said]
    page = render(data)
    assert f'<p class="legend">{escape(said)}</p>' in page and f"<td>{escape(rows[1][1])}</td>" in page
    print_answer(x, [], x.run_id)
    out = " ".join(capsys.readouterr().out.split())
    assert said in out and rows[1][1] in out


def test_the_legend_says_few_samples_where_that_is_all_the_marked_steps_have(tmp_path):
    busy_run(tmp_path / "d.db", n=3)  # every step of 3 samples: few, batch 8 busy as well
    [x] = load(str(tmp_path / "d.db")).crossovers
    assert all(r[1].split(" (")[0].endswith("?") for r in crossover.table_rows(x)[1])
    assert crossover.legend(x)[0].endswith(charts.DISTURBED_CELL)  # one busy among few: the wider word
    store, run_id = crossover_run(tmp_path / "e.db", {1: 0.001, 8: 0.004}, {1: 0.002, 8: 0.003})  # n=3, none busy
    [x] = crossover.read(store, [run_id])
    assert crossover.legend(x) == [f"? = the CPU step (and each speed-up set against it) from {charts.FEW}"]
