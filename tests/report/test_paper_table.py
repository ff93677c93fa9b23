"""`dlperf table --paper`: a run's Table-7 cells beside the paper's figures at the same thread count and tool."""

import csv
import io
import json
from dataclasses import replace

from conftest import make_cell
from dlperf.report import paper_table


def cell(workload="fcn-r", framework="torch", device="cpu", threads=1, median=1.0, batch=1024, paper="FCN-R", **f):
    return make_cell(workload, framework=framework, device=device, threads=threads, batch=batch, median_s=median,
                     iqr_s=0.01, n=f.pop("n", 10), workload_spec={"paper": paper}, **f)  # fmt: skip


def test_each_cell_stands_beside_its_tools_figures_at_its_thread_count_and_the_fastest_tools():
    rows, notes = paper_table.build([cell(threads=2, median=0.5), cell(device="cuda:0", median=0.01)])
    cpu, gpu = rows
    # FCN-R at 2 threads in the paper's Table 7: Torch 0.926 (desktop), 0.915 (server); fastest CNTK 0.857 (server)
    assert [(f.tool, f.seconds, f.where) for f in cpu.same] == [("Torch", 0.926, "desktop"), ("Torch", 0.915, "server")]
    assert (cpu.fastest.tool, cpu.fastest.seconds, cpu.fastest.where) == ("CNTK", 0.857, "server")
    assert cpu.ratio == 0.926 / 0.5  # the paper's desktop Torch over this machine: 1.85x faster here
    assert [(f.tool, f.seconds, f.where) for f in gpu.same] == [("Torch", 0.016, "GTX 1080")]
    assert (gpu.fastest.tool, gpu.fastest.seconds) == ("Torch", 0.016)  # ahead of Caffe's and CNTK's 0.017
    assert notes == []
    text = paper_table.render_markdown(rows, notes)
    assert "| fcn-r | torch | 1024 | cpu:2 | 0.500 s n=10 | Torch 0.926 s desktop, 0.915 s server | " \
           "CNTK 0.857 s (server) | 1.85x |" in text  # fmt: skip
    assert "arXiv:1608.07249" in text and "Lua Torch7" in text


def test_jax_has_no_counterpart_and_a_thread_count_the_paper_did_not_measure_has_no_figure():
    jax, three = paper_table.build([cell(framework="jax"), cell(threads=3)])[0]
    assert jax.same == [] and jax.fastest.seconds == 1.379 and jax.ratio is None  # the fastest there still stands
    assert "none: JAX is not in the paper" in paper_table.values(jax)
    assert three.same == [] and three.fastest is None
    assert paper_table.values(three)[5:7] == ["none: the paper has no Torch figure at cpu:3", "-"]


def test_a_tool_the_paper_has_but_without_a_figure_there_says_so():
    # `table --paper` showed a bare "-" beside resnet-56 tensorflow on CPUs, a blank a reader took for missing data:
    # the paper's TF has no CPU figure for ResNet-56
    (tf,) = paper_table.build([cell("resnet-56", framework="tensorflow", batch=128, paper="ResNet-56")])[0]
    assert tf.same == [] and tf.fastest.tool == "Torch"
    assert paper_table.values(tf)[5] == "none: the paper has no TF CPU figure for ResNet-56 at any thread count"


def test_a_tool_without_a_figure_at_any_thread_count_is_said_so_not_as_missing_at_this_one():
    # the paper view said "the paper has no MXNet figure at cpu:1" for the LSTM, as if another thread count had one:
    # the paper's MXNet has no CPU figure for the LSTM at all (its GPUs' only)
    lstm = {"batch": 128, "paper": "LSTM"}
    (cpu, gpu) = paper_table.build([cell("lstm", framework="mxnet", threads=4, **lstm),
                                    cell("lstm", framework="mxnet", device="cuda:0", **lstm)])[0]  # fmt: skip
    assert paper_table.values(cpu)[5] == "none: the paper has no MXNet CPU figure for LSTM at any thread count"
    assert [(f.tool, f.seconds) for f in gpu.same] == [("MXNet", 0.079)]
    (three,) = paper_table.build([cell("lstm", framework="tensorflow", threads=3, **lstm)])[0]
    assert paper_table.values(three)[5] == "none: the paper has no TF figure at cpu:3"  # TF has LSTM at 1, 2, 4...


def test_only_fp32_single_process_synthetic_cells_at_the_papers_batch_stand_beside_it_and_the_rest_is_said():
    busy = ["other processes used 70% of the CPUs"]
    cells = [cell(batch=64), cell(mode="bf16"), replace(cell(), loader="w2"), cell(nproc=2, scaling="strong"),
             cell(workload="mine", paper=None), cell(status="failed", median=None),
             cell(threads=2, n=2, warnings=busy)]  # fmt: skip
    rows, notes = paper_table.build(cells)
    assert [(r.cell.threads, r.cell.n) for r in rows] == [(2, 2)]
    assert "fcn-r: batch 64, the paper's 1024: not beside it" in notes
    assert any("only such cells stand beside it" in n for n in notes)
    assert any(n.startswith("fcn-r torch cpu:2") and "other processes" in n for n in notes)  # the table's notes
    assert "no step to stand beside the paper: fcn-r torch cpu:1 fp32 (failed)" in notes  # was no row, no word
    assert "0.500 s? n=2" not in paper_table.values(rows[0]) and paper_table.values(rows[0])[4] == "1.000 s? n=2"
    assert paper_table.values(rows[0])[-1].endswith("x?")  # the speed-up rests on that median
    assert not paper_table.values(paper_table.build([cell(threads=2)])[0][0])[-1].endswith("?")
    assert "? = a median not to rely on: fewer than 6 samples, or disturbed" in paper_table.legend(rows)[0]
    [record] = json.loads(paper_table.render_json(1, rows, notes))["rows"]  # the mark for a script too
    assert record["doubtful"] is True and record["doubts"] == [*busy, "fewer than 6 samples"]
    [plain] = json.loads(paper_table.render_json(1, *paper_table.build([cell(threads=2)])))["rows"]
    assert "doubtful" not in plain


def test_json_and_csv_carry_the_numbers():
    rows, notes = paper_table.build([cell(threads=1, median=2.0)])
    record = json.loads(paper_table.render_json(3, rows, notes))["rows"][0]
    assert record["median_s"] == 2.0 and record["paper_same_tool"][0] == {"seconds": 1.67, "tool": "Torch",
                                                                          "where": "desktop"}  # fmt: skip
    assert record["speed_up"] == 1.67 / 2.0
    line = next(csv.DictReader(io.StringIO(paper_table.render_csv(rows))))
    assert (line["paper_tool"], line["paper_desktop_s"], line["paper_server_s"]) == ("Torch", "1.67", "1.379")
    assert float(line["median_s"]) == 2.0


def test_the_command_prints_the_view_in_every_format_and_refuses_what_it_cannot_show(tmp_path):
    from conftest import dlperf
    from dlperf.protocol import Cell
    from dlperf.store import Store
    from dlperf.store.process import ProcessMeasurement
    from dlperf.store.records import CellFigures, PlannedCell
    from dlperf.vocab import Status

    db, other = tmp_path / "p.db", tmp_path / "o.db"
    for path, batch in ((db, 1024), (other, 64)):
        store = Store.open(path, create=True)
        planned = PlannedCell(Cell("fcn-r", "torch", "cpu", 2, "fp32"), {"batch": batch, "paper": "FCN-R"})
        run_id = store.create_run({"spec": 1}, {"cores": {"cores": 2}}, {}, ["dlperf", "run"], [planned])
        steps = ProcessMeasurement(status=Status.OK, samples=[0.5] * 9, duration_s=5.0)
        store.record(run_id, planned.cell.key, 0, steps, CellFigures(status=Status.OK, median_s=0.5, n=9))
        store.close()
    text = dlperf("table", "--paper", db=db, env={"COLUMNS": "200"})
    assert text.returncode == 0, text.stderr
    assert "beside Shi et al. (2016)" in text.stdout and "Torch 0.926 s desktop, 0.915 s server" in text.stdout
    assert "1.85x" in text.stdout
    rows = json.loads(dlperf("table", "--paper", "--format", "json", db=db).stdout)["rows"]
    assert [(r["threads"], r["speed_up"]) for r in rows] == [(2, 0.926 / 0.5)]
    md = dlperf("table", "--paper", "--format", "md", db=db).stdout
    assert "| fcn-r | torch | 1024 | cpu:2 |" in md
    # the machine said in every format, as the plain table says it; the run in md; the speed-up in csv too
    assert "measured on: " in text.stdout and "measured on: " in md and md.startswith("**Run 1 beside Shi et al.")
    assert json.loads(dlperf("table", "--paper", "--format", "json", db=db).stdout)["measured_on"]
    [line, where] = list(csv.reader(io.StringIO(dlperf("table", "--paper", "--format", "csv", db=db).stdout)))[1:]
    assert float(line[14]) == 0.926 / 0.5 and where[0] == "measured on"
    refused = dlperf("table", "--paper", "--best", db=db)
    assert refused.returncode == 2 and "give no --best" in refused.stderr
    none = dlperf("table", "--paper", db=other)  # its only cell is at another batch
    assert none.returncode == 2 and "batch 64, the paper's 1024" in none.stderr and len(none.stderr.splitlines()) == 1


def test_a_speed_up_over_the_papers_server_says_so():
    """Where the paper's desktop has no figure (16 threads; FCN-S's Torch at 8), the speed-up stands over its server:
    it was shown as over the desktop, as the legend said of every CPU speed-up."""
    rows, _ = paper_table.build([cell(threads=16, median=0.5), cell(threads=2, median=0.5)])
    server, desktop = (paper_table.values(r)[-1] for r in rows)
    assert rows[0].ratio == 0.402 / 0.5 and server == "0.80x (server)"
    assert desktop == "1.85x"
    assert "on its server where marked so" in paper_table.legend(rows)[-1]


def test_a_disturbed_cell_is_marked_as_the_report_marks_it():
    """`table --paper` marked `?` only for few samples; the report's paper view for any disturbance: one fcn-r cell
    timed while other processes used 69% of the CPUs read 0.88x unmarked in one, 0.88x? in the other."""
    busy = cell(threads=2, n=30, warnings=["other processes used 69% of the CPUs while this cell was timed"])
    [row], _ = paper_table.build([busy])
    values = paper_table.values(row)
    assert values[4].startswith(f"{busy.median_s:.3f} s?") and values[-1].endswith("?")
    [quiet], _ = paper_table.build([cell(threads=2, n=30)])
    assert "?" not in "".join(paper_table.values(quiet)) and "?" not in paper_table.legend([quiet])[0]
