"""The input pipeline's view (`report/data.py`): per group of cells that differ only in their loader, the figures,
the verdict, and the smallest measured setting that is enough. The figures are made up; nothing is measured."""

import csv
import dataclasses
import io
import json

import pytest

from conftest import make_cell
from dlperf.loaders import input_bound, oversubscribed, setting
from dlperf.protocol import Cell
from dlperf.report import data, export, table
from dlperf.store.records import LoaderRecord

BATCH = 64
CORES = 4


def synthetic(median=0.10, threads=1, mean=None):
    return make_cell("fcn-r", threads=threads, batch=BATCH, median_s=median, mean_s=mean or median, n=20)


def loaded(name, median, wait=None, alone=None, status="ok", threads=1, cores=CORES, h2d=None, ci=(None, None), n=20,
           iqr=None, mean=None, mean_ci=None):  # fmt: skip
    """A loader cell as `Store.cells` gives it back: its key has the loader, its figures a LoaderRecord; `ci` its 95%
    interval of the median, and of its mean step (`mean`, its median unless given) where `mean_ci` is not given (none:
    judged on its mean step and `iqr`, `fastest.told_apart_long_run`)."""
    workers = setting(name).workers
    mean_ci = mean_ci or ci
    cell = make_cell("fcn-r", threads=threads, batch=BATCH, median_s=median, n=n, status=status, iqr_s=iqr,
                     ci_low_s=ci[0], ci_high_s=ci[1], mean_s=mean or median, mean_ci_low_s=mean_ci[0],
                     mean_ci_high_s=mean_ci[1],
                     key=Cell("fcn-r", "torch", "cpu", threads, "fp32", loader=name).key)  # fmt: skip
    cell.loader = name
    cell.data = LoaderRecord(name, workers, threads, cores, oversubscribed(workers, threads, cores), "mnist", 60000,
                             alone, wait, None, input_bound(wait), h2d)  # fmt: skip
    return cell


def one_group(cells):
    [group] = data.build(cells)
    return group


def test_the_recommendation_is_the_smallest_setting_not_measurably_slower_than_the_fastest():
    # given out of order: the view orders settings by cost, smallest first
    cells = [
        loaded("w4", 0.100, wait=0.01, ci=(0.097, 0.106)),  # the fastest, but larger
        loaded("w1", 0.120, wait=0.15, ci=(0.115, 0.125)),  # measurably slower
        synthetic(0.100),
        loaded("w2", 0.104, wait=0.08, ci=(0.101, 0.108)),  # its interval overlaps w4's: a tie, and w2 is smaller
        loaded("w0", 0.200, wait=0.50),
    ]
    group = one_group(cells)
    assert [c.loader for c in group.cells] == ["w0", "w1", "w2", "w4"]
    r = group.recommendation
    assert r.setting == "w2" and "96% of the synthetic" in r.enough and "the smallest of w2, w4" in r.why
    assert data.recommendation_line(group).startswith("recommended: w2 (the smallest of w2, w4, not told apart")
    # equal medians without intervals tie too; a wait under 5% is enough on its own, the synthetic step aside
    group = one_group([loaded("w1+pin", 0.5, wait=0.02), loaded("w1", 0.5, wait=0.04), loaded("w2", 0.5, wait=0.0)])
    assert group.recommendation.setting == "w1" and group.recommendation.enough == "data wait 4.0% of the step"


def test_a_setting_that_waits_less_for_data_but_steps_slower_is_not_recommended():
    # helper 124's CNN over 200 JPEGs on 2 cores: w1 waits 4.9% (enough by its wait) but its worker shares the cores
    # with the step, which runs 65% slower than w0's; the old rule recommended w1, 1.65x slower to train with
    h124 = [synthetic(0.508), loaded("w0", 0.543, wait=0.17, cores=2), loaded("w1", 0.897, wait=0.049, cores=2)]
    group = one_group(h124)
    r = group.recommendation
    assert r.setting == "w0" and r.enough is None and r.slower == ["w1"]
    line = data.recommendation_line(group)
    # 65% apart, told apart on mean steps alone: not 'a tie' (it was said so, of a setting tied with none)
    assert line.startswith("recommended: w0 (the fastest measured, 118 samples/s, told apart on mean steps alone, with "
                           "no 95% intervals: over 5% and the steps' IQR faster than the rest); not enough: its step "
                           "waits 17% of it for data")  # fmt: skip
    assert "; w1 waits less for data (4.9%) but steps slower (0.897 s a mean step)" in line
    assert not any("fewer workers" in a for a in group.advice)  # no advice against the setting it recommends
    # the same with 95% intervals, told apart: judged on them, and said no more to rest on mean steps alone
    apart = one_group([synthetic(0.508), loaded("w0", 0.543, wait=0.17, cores=2, ci=(0.52, 0.56)),
                       loaded("w1", 0.897, wait=0.049, cores=2, ci=(0.85, 0.95))])  # fmt: skip
    assert apart.recommendation.setting == "w0" and apart.recommendation.why == "the fastest measured, 118 samples/s"
    # a true win, faster and waiting less, is still taken
    win = one_group([*h124, loaded("w2", 0.450, wait=0.02, cores=2)])
    assert win.recommendation.setting == "w2" and win.recommendation.enough == "data wait 2.0% of the step"
    assert win.recommendation.slower == []
    # a tie (intervals overlapping) goes to the smaller setting, even where the larger waits less
    tie = one_group([synthetic(0.45), loaded("w0", 0.50, wait=0.06, ci=(0.48, 0.53)),
                     loaded("w1", 0.49, wait=0.01, ci=(0.47, 0.52))])  # fmt: skip
    assert tie.recommendation.setting == "w0" and tie.recommendation.slower == []
    line = data.recommendation_line(tie)
    assert "the smallest of w0, w1, not told apart from the fastest, w1 at 131 samples/s" in line


def test_without_intervals_medians_within_five_percent_or_the_steps_iqr_tie_and_the_smaller_setting_is_taken():
    """Cells of under 6 timed steps have no 95% interval of the median: 0.430 s against 0.446 s at n=3 was 'measurably
    slower' on medians alone, and w1 recommended over w0 for a 3.7% that two processes differ by on their own."""
    few = dict(n=3, cores=2)
    group = one_group([synthetic(0.40), loaded("w0", 0.446, wait=0.04, iqr=0.002, **few),
                       loaded("w1", 0.430, wait=0.01, iqr=0.002, **few)])  # fmt: skip
    r = group.recommendation
    assert r.setting == "w0" and r.enough == "data wait 4.0% of the step" and r.slower == []
    assert r.why == ("the smallest of w0, w1, not told apart from the fastest, w1 at 149 samples/s, on mean steps "
                     "alone, with no 95% intervals: within 5% or the steps' IQR, a tie")  # fmt: skip
    # further apart than 5%: told apart on mean steps alone, the faster taken
    apart = one_group([synthetic(0.40), loaded("w0", 0.460, wait=0.04, **few), loaded("w1", 0.430, wait=0.01, **few)])
    assert apart.recommendation.setting == "w1"
    # ... unless the steps' own spread is wider than the gap
    noisy = one_group([synthetic(0.40), loaded("w0", 0.460, wait=0.04, iqr=0.05, **few),
                       loaded("w1", 0.430, wait=0.01, iqr=0.01, **few)])  # fmt: skip
    assert noisy.recommendation.setting == "w0"
    # with intervals, they alone judge: 3.7% apart, told apart where they do not overlap
    told = one_group([synthetic(0.40), loaded("w0", 0.446, wait=0.04, ci=(0.444, 0.449)),
                      loaded("w1", 0.430, wait=0.01, ci=(0.428, 0.433))])  # fmt: skip
    assert told.recommendation.setting == "w1" and told.recommendation.why == "the fastest measured, 149 samples/s"


def test_when_no_measured_setting_is_enough_it_recommends_the_fastest_and_says_it_is_not():
    group = one_group([synthetic(0.10), loaded("w0", 0.30, wait=0.6), loaded("w1", 0.15, wait=0.3),
                       loaded("w2", 0.18, wait=0.4)])  # fmt: skip
    assert group.recommendation.setting == "w1" and group.recommendation.enough is None
    line = data.recommendation_line(group)
    assert line.startswith("recommended: w1 (the fastest measured, 427 samples/s, told apart on mean steps alone")
    assert "; not enough: its step waits 30% of it for data" in line
    assert "reaches 67% of the synthetic step's samples/s" in line and line.endswith("--loaders measures more settings")


def test_a_failed_or_unsupported_loader_cell_is_never_recommended():
    group = one_group([
        synthetic(0.10),
        loaded("w0", 0.10, wait=0.0, status="failed"),  # figures of a process before it failed: not a measurement
        loaded("w1", None, status="unsupported"),
        loaded("w2", 0.30, wait=0.5),
        loaded("w3", 0.10, wait=0.01),
    ])  # fmt: skip
    assert group.recommendation.setting == "w3"
    assert data.values(group.cells[0])[:2] == ["w0", "failed"]


def test_with_no_setting_measured_the_answer_says_why_how_many_failed_and_the_first_error():
    """Every setting failed: the answer read 'no loader setting was measured' and nothing of why (a Dataset raising
    'OSError: image 5: truncated file' in w0 and w1 alike)."""
    failed, timed_out = loaded("w0", 0.10, wait=0.0, status="failed"), loaded("w1", None, status="timeout")
    failed.error, timed_out.error = "OSError: image 5: truncated file\n(at flaky.py:15, in __getitem__)", "timed out"
    group = one_group([synthetic(0.10), failed, timed_out])
    assert group.recommendation.setting is None
    assert data.recommendation_line(group) == ("no recommendation: no loader setting was measured: 2 of 2 failed or "
                                               "timed out; w0: OSError: image 5: truncated file (at flaky.py:15, in "
                                               "__getitem__)")  # fmt: skip
    pinned = loaded("w0+pin", None, status="unsupported")  # none failed: the first that does not apply, and why
    pinned.error = "w0+pin: pinned memory speeds copies to a GPU; pinning needs a GPU, and this cell runs on cpu"
    why = one_group([synthetic(0.10), pinned]).recommendation.why
    assert why == "no loader setting was measured: w0+pin does not apply: pinned memory speeds copies to a GPU; " \
        "pinning needs a GPU, and this cell runs on cpu"  # fmt: skip
    left = one_group([synthetic(0.10), loaded("w0", None, status="pending")])  # interrupted before it: nothing to say
    assert left.recommendation == data.Recommendation(None, "no loader setting was measured")


def test_data_preparation_dominates_only_when_the_fastest_loader_cannot_feed_the_step():
    # the synthetic step takes 64 / 0.1 = 640 samples/s
    slow = [synthetic(0.10), loaded("w0", 0.40, wait=0.75, alone=150.0), loaded("w2", 0.20, wait=0.5, alone=400.0)]
    [line] = one_group(slow).advice
    assert line.startswith("data preparation dominates") and "400 samples/s (w2)" in line and "640 samples/s" in line
    assert "more workers (w2's 2 workers and the step's 1 compute thread leave 1 of the 4 cores free)" in line
    assert "__getitem__" in line  # a dataset of no known kind
    every_core = [synthetic(0.10), loaded("w4", 0.20, wait=0.5, alone=400.0)]
    assert "more cores (w4 already has a worker per core, 4 on 4)" in one_group(every_core).advice[0]
    fast = [synthetic(0.10), loaded("w0", 0.40, wait=0.75, alone=150.0), loaded("w2", 0.11, wait=0.1, alone=700.0)]
    assert one_group(fast).advice == []


def test_data_preparation_dominated_with_w0_counts_its_loading_on_the_training_process_core():
    """w0 loads in the training process, on a core: pinned to one CPU (taskset -c 0), tiny-alexnet-s over 24 images
    read 'more workers (w0 uses 0 of the 1 cores)' where w1, measured beside it, could only take turns with it (1+1 >
    1); on one core it is more cores, on more it is more workers, w0 on one of them."""
    for cores, said in ((1, "more cores (w0 loads in the training process, on the only core)"),
                        (2, "more workers (w0 loads in the training process, on 1 of the 2 cores)")):  # fmt: skip
        cells = [synthetic(0.10), loaded("w0", 0.40, wait=0.75, alone=250.0, cores=cores),
                 loaded("w1", 0.26, wait=0.8, alone=104.0, cores=cores)]  # fmt: skip
        [line] = one_group(cells).advice
        assert said in line, line


def test_workers_and_threads_beyond_the_cores_are_shown_oversubscribed(capsys):
    group = one_group([synthetic(0.10, threads=2), loaded("w1", 0.12, wait=0.1, threads=2, cores=4),
                       loaded("w3", 0.15, wait=0.02, threads=2, cores=4)])  # fmt: skip
    assert data.values(group.cells[0])[-1] == "1+2 / 4" and data.values(group.cells[1])[-1] == "3+2 > 4"
    from rich.console import Console

    Console(width=200).print(data.render_rich(group))
    assert "3+2 > 4" in capsys.readouterr().out


def test_pin_memory_is_suggested_when_pinned_copies_are_faster_and_the_setting_is_unpinned():
    h2d = {"bytes": 4_000_000, "pageable_s": 0.002, "pinned_s": 0.001, "pinned_async_s": 0.0008}
    group = one_group([synthetic(0.10), loaded("w2", 0.10, wait=0.01, h2d=h2d)])
    assert "pin_memory: pinned copies to the device ran at 4.00 GB/s against 2.00 GB/s pageable; try w2+pin" in (
        group.advice
    )
    assert data.h2d_lines(group) == [
        "w2: one batch (3.81 MiB) to the device: pageable 2.00 GB/s, pinned 4.00 GB/s, pinned non_blocking 5.00 GB/s"
    ]
    pinned = one_group([synthetic(0.10), loaded("w2+pin", 0.10, wait=0.01, h2d=h2d)])
    assert not any(a.startswith("pin_memory") for a in pinned.advice)


def test_a_loader_cell_is_a_row_of_its_own_in_the_table_beside_its_synthetic_row():
    cells = [synthetic(0.10), loaded("w2", 0.12, wait=0.1), synthetic(0.06, threads=2),
             loaded("w2", 0.07, wait=0.05, threads=2)]  # fmt: skip
    view = table.build(1, cells)
    assert [r.mode_label for r in view.rows] == ["fp32", "fp32 · data:w2"]
    assert table.row_values(view, view.rows[0])[:3] == ["fcn-r", "torch", "fp32"]
    assert table.row_values(view, view.rows[1])[2:] == ["fp32 · data:w2", "64", "0.120 s n=20", "70.0 ms* n=20"]
    assert "### Input pipeline: fcn-r torch cpu:1" in table.render_markdown(view)
    as_json = json.loads(table.render_json(view))
    assert as_json["rows"][1]["loader"] == "w2" and "loader" not in as_json["rows"][0]
    assert [g["recommendation"]["setting"] for g in as_json["input_pipeline"]] == ["w2", "w2"]
    assert [g["recommendation"]["enough"] for g in as_json["input_pipeline"]] == [None, None]
    # a run on synthetic data only: no mode column, no input pipeline
    plain = table.build(1, [synthetic(0.10), synthetic(0.06, threads=2)])
    assert not plain.show_mode and plain.pipeline == [] and "input_pipeline" not in table.render_json(plain)


def test_the_csv_table_has_the_input_pipeline_section_as_md_and_json_do():
    """`dlperf table --format csv` left the section out, md and json had it: its rows come after the table's, each
    row's first field saying what it is, the figures plain numbers as the device columns' medians are."""
    cells = [synthetic(0.10), loaded("w0", 0.30, wait=0.6, alone=150.0), loaded("w2", 0.104, wait=0.08, alone=900.0),
             loaded("w4", None, status="unsupported")]  # fmt: skip
    view = table.build(1, cells)
    rows = list(csv.reader(io.StringIO(table.render_csv(view))))
    section = [r for r in rows if r[0].startswith("input pipeline")]
    assert section[0] == ["input pipeline", "group", *data.HEAD]
    by_loader = {r[2]: r[3:] for r in section[1:] if r[0] == "input pipeline"}
    assert by_loader["synthetic"] == ["0.1", "640.0", "", "", "", ""]
    assert by_loader["w2"] == ["0.104", repr(BATCH / 0.104), "900.0", "0.08", "moderate", "2+1 / 4"]
    assert by_loader["w4"] == ["unsupported", "", "", "", "", ""]
    notes = [r[2] for r in section if r[0] == "input pipeline note"]
    assert notes[0] == data.recommendation_line(view.pipeline[0]) and notes[0].startswith("recommended: w2")
    assert {r[1] for r in section[1:]} == {"fcn-r torch cpu:1"}
    assert rows[-1] == ["legend", data.CSV_LEGEND] and rows.index(section[0]) > max(
        i for i, r in enumerate(rows) if r[0] == "fcn-r"
    )  # after the table's own rows
    plain = table.render_csv(table.build(1, [synthetic(0.10)]))
    assert "input pipeline" not in plain  # no loader cells, no section


def test_the_export_has_the_loader_figures_and_the_groups_recommendation():
    h2d = {"bytes": 4_000_000, "pageable_s": 0.002, "pinned_s": 0.001}
    cells = [synthetic(0.10), loaded("w2", 0.104, wait=0.08, alone=900.0, h2d=h2d)]
    groups = data.by_cell(data.build(cells))
    records = [export.record(c, None, groups.get(c.key)) for c in cells]
    plain, loader = csv.DictReader(io.StringIO(export.render(records, "csv")))
    assert plain["loader"] == "" and plain["recommended_loader"] == "w2" and plain["data_wait_share"] == ""
    assert loader["loader"] == "w2" and loader["loader_alone_samples_per_s"] == "900.0"
    assert loader["data_wait_share"] == "0.08" and loader["input_bound"] == "moderate"
    assert loader["workers"] == "2" and loader["oversubscribed"] == "False"
    assert float(loader["h2d_pinned_bytes_s"]) == pytest.approx(4e9)
    assert json.loads(loader["data_recommendation"])["setting"] == "w2"
    line = json.loads(export.render(records, "jsonl").splitlines()[1])
    assert line["data_recommendation"]["setting"] == "w2" and line["h2d_pageable_bytes_s"] == pytest.approx(2e9)
    assert line["h2d_pinned_non_blocking_bytes_s"] is None
    # a cell outside any group has the same columns, empty
    alone = export.record(synthetic(0.1))
    assert alone["loader"] is None and alone["data_recommendation"] is None and set(alone) == set(line)


def stored_run(db):
    """A run of fcn-r: the synthetic cell, then w0 (slow, input-bound) and w1 (enough), stored as a run stores them."""
    from dlperf.figures import LoaderFigures
    from dlperf.runner.collect import cell_figures
    from dlperf.store import Store
    from dlperf.store.process import ProcessDetail, ProcessMeasurement
    from dlperf.store.records import PlannedCell
    from dlperf.vocab import Status

    plan = [Cell("fcn-r", "torch", "cpu", 1, "fp32", loader=name) for name in ("", "w0", "w1")]
    figures = {"": (0.10, None), "w0": (0.20, [0.1] * 4), "w1": (0.102, [0.001] * 4)}  # step, each step's wait
    store = Store.open(db, create=True)
    try:
        rows = [PlannedCell(c, {"batch": BATCH}) for c in plan]
        run_id = store.create_run({"spec": 1}, {"cpu": {}}, {"cpu_model": "x"}, ["dlperf"], rows)
        for c in plan:
            step, waits = figures[c.loader]
            loader = LoaderFigures(setting=c.loader, workers=setting(c.loader).workers, threads=1, cores=2,
                                   alone_samples_per_s=1000.0, wait_s=waits) if c.loader else None  # fmt: skip
            m = ProcessMeasurement(status=Status.OK, samples=[step] * 4, detail=ProcessDetail(loader=loader))
            store.record(run_id, c.key, 0, m, cell_figures([m], batch=BATCH, threads=1, cores=2, device="cpu"))
        store.set_run_status(run_id, "complete")
    finally:
        store.close()


def test_dlperf_table_prints_the_input_pipeline_under_the_table(tmp_path, capsys):
    from dlperf.commands.table import print_table

    stored_run(tmp_path / "d.db")
    print_table(str(tmp_path / "d.db"), None, "text")
    out = " ".join(capsys.readouterr().out.split())  # a long line wrapped at the console's width
    assert "fp32 · data:w0" in out and "Input pipeline: fcn-r torch cpu:1" in out
    assert "recommended: w1 (the fastest measured" in out and "enough: data wait 1.0% of the step" in out
    assert "high" in out


def test_the_html_report_has_an_input_pipeline_section_with_its_chart(tmp_path):
    from dlperf.report import html
    from dlperf.report.load import load

    stored_run(tmp_path / "d.db")
    page = html.render(load(str(tmp_path / "d.db")))
    assert '<section id="input"><h2>Input pipeline</h2>' in page
    assert 'data-chart="input-fcn-r-torch-cpu-1"' in page and "synthetic step" in page
    assert "recommended: w1 (the fastest measured" in page and "enough: data wait 1.0% of the step" in page


def test_compare_matches_loader_cells_cell_by_cell_and_names_their_loader():
    from dlperf.report import compare

    a = [synthetic(0.10), loaded("w2", 0.12, wait=0.1)]
    b = [synthetic(0.10), loaded("w2", 0.24, wait=0.5), loaded("w4", 0.11, wait=0.01)]
    result = compare.compare(a, b, {}, {})
    assert [(c.key, c.ratio) for c in result.cells] == [(a[0].key, 1.0), (a[1].key, pytest.approx(2.0))]
    assert [c.label for c in result.cells] == ["fcn-r torch cpu:1 fp32", "fcn-r torch cpu:1 fp32 · data:w2"]
    assert compare.row_values(result.cells[1])[3] == "fp32 · data:w2"
    assert [u.label for u in result.unmatched] == ["fcn-r torch cpu:1 fp32 · data:w4"]


def test_charts_draw_loader_cells_as_series_of_their_own():
    from dlperf.report import charts

    cells = [synthetic(0.10), synthetic(0.06, threads=2), loaded("w2", 0.12), loaded("w2", 0.07, threads=2)]
    [chart] = charts.scaling(cells)
    assert {s.label: [p.y for p in s.points] for s in chart.series if not s.ideal} == {
        "data:synthetic": [0.10, 0.06], "data:w2": [0.12, 0.07]
    }  # fmt: skip


def test_the_paper_comparison_and_the_fastest_mode_read_synthetic_cells_only():
    """A loader cell's step is the input pipeline's too: faster or slower, it is not the model's Table-7 figure."""
    from dlperf.report import best, paper

    fcn = {"batch": 1024, "paper": "FCN-R"}
    cells = [make_cell("fcn-r", batch=1024, median_s=0.5, workload_spec=fcn), loaded("w2", 0.4, wait=0.0)]
    cells[1].batch, cells[1].workload_spec = 1024, fcn
    [row], _ = paper.compare(cells)
    assert row.ours_cpu is cells[0]
    [fastest] = best.build(cells, {})
    assert (fastest.mode, fastest.median_s, fastest.baseline_s) == ("fp32", 0.5, 0.5)


def test_a_cpu_step_that_waits_little_yet_runs_slower_is_said_to_share_its_cores():
    # w0 waits 2% (enough by the wait) but its step reaches only 80% of the synthetic step's samples/s
    group = one_group([synthetic(0.100), loaded("w0", 0.125, wait=0.02)])
    assert group.recommendation.setting == "w0"
    [said] = [a for a in group.advice if "yet runs at" in a]
    assert said.startswith("w0's step waits only 2.0% of it for data yet runs at 80% of the synthetic")
    assert "loading is all in the wait, so the rest is the step itself" in said  # w0 has no workers to blame
    group = one_group([synthetic(0.100), loaded("w0", 0.2, wait=0.5), loaded("w2", 0.125, wait=0.01)])
    [said] = [a for a in group.advice if "yet runs at" in a]
    assert said.startswith("w2's step") and "the workers load and augment on the cores the step computes on" in said
    # at 96% of the synthetic step, nothing to say
    assert not any("yet runs at" in a for a in one_group([synthetic(0.100), loaded("w0", 0.104, 0.02)]).advice)


def test_a_bursty_loaders_rate_is_the_long_runs_and_it_is_never_recommended_or_enough_on_its_median():
    """Pinned to one core, tiny-alexnet-s over 32 JPEGs, w1: most steps found a batch ready, one in a few waited for
    the worker; 20.0 ms at the median step (200 samples/s), 31.3 ms at the mean (128), and a plain loop over the same
    data trained 145 samples/s. Read at the median, w1 was faster than w0, and enough (98% of the synthetic step's
    samples/s): a rate it never delivers over a run. Its rate, the tie and enough are now the mean step's."""
    bursty = loaded("w1", 0.102, wait=0.30, ci=(0.100, 0.104), mean=0.150, mean_ci=(0.140, 0.160))
    steady = loaded("w0", 0.120, wait=0.15, ci=(0.118, 0.122), mean=0.122, mean_ci=(0.118, 0.126))
    group = one_group([synthetic(0.100), bursty, steady])
    r = group.recommendation
    assert r.setting == "w0" and r.why == "the fastest measured, 525 samples/s" and r.enough is None
    assert data.throughput(bursty) == pytest.approx(BATCH / 0.150) and data.enough(bursty, group.synthetic) is None
    assert data.values(bursty)[1:3] == ["0.102 s", "427"]  # the median step kept, the long run's samples/s
    assert "samples /s: a long run's, the batch over the mean step" in data.LEGEND
    chart = data.chart(group)
    # the chart's data wait: a share of the mean step
    assert [p.y for p in chart.series[1].points] == pytest.approx([0.122 * 0.15, 0.150 * 0.30])
    # the synthetic cell by the same estimator: a loader cell at 96% of its mean step's rate is enough
    noisy = one_group([synthetic(0.090, mean=0.104), loaded("w0", 0.100, wait=0.10, mean=0.108)])
    assert noisy.recommendation.enough == "96% of the synthetic step's samples/s"
    # the export carries the long run's rate for the group's cells, the synthetic one's too
    record = export.record(bursty, None, data.by_cell([group])[bursty.key])
    assert record["long_run_samples_per_s"] == pytest.approx(BATCH / 0.150)
    assert export.record(synthetic(0.1))["long_run_samples_per_s"] is None


def test_data_preparation_advice_for_a_dataset_in_memory_is_not_about_decoding_images():
    """MNIST (bytes held in memory, no image to decode) was told to use smaller or pre-resized images, Pillow-SIMD
    and NVIDIA DALI: advice for an image folder's decoding, which does not apply."""
    import dataclasses

    slow = [synthetic(0.10), loaded("w0", 0.40, wait=0.75, alone=150.0)]
    slow[1].data = dataclasses.replace(slow[1].data, dataset="MNIST")
    [line] = one_group(slow).advice
    assert line.endswith("more workers (w0 loads in the training process, on 1 of the 4 cores); its samples are in "
                         "memory already, so fewer Python operations a sample: the transforms over a whole batch at "
                         "once (on the GPU where there is one) rather than in each sample's __getitem__")  # fmt: skip
    slow[1].data = dataclasses.replace(slow[1].data, dataset="ImageNet-style folder")
    assert "Pillow-SIMD" in one_group(slow).advice[0]


@pytest.mark.parametrize("dataset", ["CsvRows", "SleepyDataset", "DataLoader", None])
def test_data_preparation_advice_for_a_users_own_dataset_is_not_about_images(dataset):
    """A user's Dataset that parsed CSV lines (or slept in __getitem__) was told to use smaller or pre-resized images,
    Pillow-SIMD and NVIDIA DALI: dlperf does not know what a user's data is, and said image advice all the same. Image
    advice is for the image folder dlperf reads; a user's Dataset is told of its __getitem__."""
    import dataclasses

    slow = [synthetic(0.10), loaded("w0", 0.40, wait=0.75, alone=150.0)]
    slow[1].data = dataclasses.replace(slow[1].data, dataset=dataset)
    [line] = one_group(slow).advice
    assert "Pillow-SIMD" not in line and "DALI" not in line and "images" not in line
    own = (
        "less work a sample in the Dataset's __getitem__: read, parse or decode the data once ahead (cached in "
        "memory, or pre-processed into arrays or tensors on disk) rather than each time a sample is read"
    )
    assert line.endswith(f"more workers (w0 loads in the training process, on 1 of the 4 cores); {own}")


def test_a_high_data_wait_is_never_enough_on_the_synthetic_steps_throughput_alone():
    """A step that waits 20% of its time for data or more is input-bound, highly: reaching 95% of the synthetic
    step's samples/s beside it says the baseline is off, not that the loader keeps up."""
    group = one_group([synthetic(0.100), loaded("w1", 0.102, wait=0.25)])
    r = group.recommendation
    assert r.enough is None and data.enough(group.cells[0], group.synthetic) is None
    line = data.recommendation_line(group)
    assert "not enough: its step waits 25% of it for data and reaches 98% of the synthetic step's samples/s" in line
    assert "(enough: a wait under 5%, or 95% of the synthetic step's samples/s with a wait under 20%)" in line
    # under 20%, the throughput still judges: a moderate wait beside the synthetic step's rate is enough
    assert one_group([synthetic(0.100), loaded("w1", 0.102, wait=0.19)]).recommendation.enough == (
        "98% of the synthetic step's samples/s"
    )


def test_a_disturbed_synthetic_step_holds_no_setting_against_its_samples_per_second():
    """2 busy cores: the synthetic step of 7 steps, its warm-up unsettled and its mean 1451% above its median, made
    w1, which waited 53% of its step ('high'), 'enough: 2264% of the synthetic step's samples/s'. A disturbed
    baseline judges no setting by throughput; the line says why, and a wait under 5% is still enough."""
    base = make_cell("fcn-r", batch=BATCH, median_s=0.0106, mean_s=0.0106 * 15.51, n=7,
                     warnings=["warm-up did not settle within --max-warmup steps or --max-time"])  # fmt: skip
    w1 = loaded("w1", 0.00614, wait=0.53, cores=2, mean=BATCH / 553)
    w1.data = dataclasses.replace(w1.data, threads=2, oversubscribed=True)
    group = one_group([base, loaded("w0", 0.012, wait=0.6, cores=2, mean=0.2), w1])
    r = group.recommendation
    assert r.setting == "w1" and r.enough is None and r.doubts == ["warm-up did not settle within --max-warmup "
                                                                   "steps or --max-time"]  # fmt: skip
    line = data.recommendation_line(group)
    assert "2264%" not in line and "of the synthetic step's samples/s and" not in line
    assert (
        "not enough: its step waits 53% of it for data and the synthetic step was disturbed (warm-up did not "
        "settle within --max-warmup steps or --max-time), so no setting is held against its samples/s"
    ) in line
    # a wait under 5% is enough whatever the synthetic step did, and no 'yet runs at' against a disturbed baseline
    quiet = one_group([base, loaded("w1", 0.2, wait=0.01)])
    assert quiet.recommendation.enough == "data wait 1.0% of the step"
    assert not any("yet runs at" in a for a in quiet.advice)
    # few samples alone (by n, whatever the warnings say) disturb it too; 20 steps and no warning do not
    few = make_cell("fcn-r", batch=BATCH, median_s=0.100, mean_s=0.100, n=3)
    assert data.baseline_doubts(few) == ["few samples n=3"]
    assert one_group([few, loaded("w1", 0.101, wait=0.10)]).recommendation.enough is None
    assert data.baseline_doubts(synthetic(0.100)) == []
    assert json.loads(json.dumps(group.to_json()))["recommendation"]["doubts"] == r.doubts


def test_a_setting_that_waits_less_but_steps_measurably_slower_is_named_enough_or_not():
    """w1 waited 43% of a 10.8 ms step against w0's 51% of 7.51 ms: neither enough, and the line named neither,
    where the guide says such a setting is named."""
    cells = [synthetic(0.005), loaded("w0", 0.00751, wait=0.51, ci=(0.0074, 0.0076), cores=2),
             loaded("w1", 0.0108, wait=0.43, ci=(0.0106, 0.0110), cores=2)]  # fmt: skip
    group = one_group(cells)
    assert group.recommendation.setting == "w0" and group.recommendation.slower == ["w1"]
    line = data.recommendation_line(group)
    assert "; w1 waits less for data (43%) but steps slower (10.8 ms a mean step); --loaders measures more" in line
    # one that waits more is not named; nor one tied with the fastest
    more = one_group([synthetic(0.005), loaded("w0", 0.00751, wait=0.51, ci=(0.0074, 0.0076)),
                      loaded("w1", 0.0108, wait=0.6, ci=(0.0106, 0.0110))])  # fmt: skip
    assert more.recommendation.slower == []


@pytest.mark.parametrize(
    ("workers", "threads", "cores", "said"),
    [
        (1, 1, 2, "more cores (w1's 1 worker and the step's 1 compute thread take the 2 cores: another worker would "
                  "take turns with them)"),
        (2, 1, 4, "more workers (w2's 2 workers and the step's 1 compute thread leave 1 of the 4 cores free)"),
        (0, 1, 2, "more workers (w0 loads in the training process, on 1 of the 2 cores)"),
        (0, 2, 2, "more cores (w0's training process and its 2 compute threads take the 2 cores: another worker "
                  "would take turns with them)"),
        (0, 1, 1, "more cores (w0 loads in the training process, on the only core)"),
        (2, 1, 2, "more cores (w2 already has a worker per core, 2 on 2)"),
    ],
)  # fmt: skip
def test_more_workers_only_where_the_workers_and_the_compute_threads_leave_cores_free(workers, threads, cores, said):
    """On 2 cores, w1 beside one compute thread was told 'more workers (w1 uses 1 of the 2 cores)', where w1 and w2
    measured slower than w0: a worker more takes turns with the step."""
    assert data.more_loading(f"w{workers}", workers, threads, cores) == said
