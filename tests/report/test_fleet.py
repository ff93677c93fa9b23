"""The fleet view (report/fleet.py): a campaign's machines side by side in `dlperf table --campaign` / `--runs` and in
the HTML report. Stores written through the Store API (tests/report/campaign.py), and two runs measured here, one
made to look like another machine."""

import csv
import io
import json
import shutil
import sqlite3

import pytest

from conftest import FAST, dlperf, one_line_error
from dlperf.protocol import Cell
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell
from dlperf.vocab import Status
from report.campaign import BETA, CELLS, make_lab, write


@pytest.fixture
def lab(tmp_path):
    return make_lab(tmp_path / "lab.db")


def table(db, *args):
    proc = dlperf("table", *args, db=db, env={"COLUMNS": "300"})  # the text view's rows on one line each
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_campaign_groups_its_machines_and_names_the_fastest_with_the_interval(lab):
    out = json.loads(table(lab, "--campaign", "lab", "--format", "json"))
    assert (out["campaign"], out["of"]) == ("lab", "campaign lab")  # its name, not "campaign lab"
    assert [m["label"] for m in out["machines"]] == ["alpha · Xeon Test", "beta · EPYC Test · NVIDIA H100 80GB HBM3"]
    assert [m["runs"] for m in out["machines"]] == [[1], [2]]  # run 3 is in no campaign
    fcn, lstm = out["rows"]
    alpha, beta = (fcn["machines"][m["label"]] for m in out["machines"])
    assert alpha["cpu"]["threads"] == 2 and alpha["cpu"]["median_s"] == 0.45 and alpha["gpu"] is None
    assert beta["gpu"]["median_s"] == 0.010 and beta["gpu"]["predicted"]["step_s"] == 0.0125
    assert fcn["verdict"] == ("fcn-r torch: fastest on beta · EPYC Test · NVIDIA H100 80GB HBM3, cuda:0: 10.0 ms "
                              "[9.80 ms–10.2 ms], 45.00x faster than alpha · Xeon Test, 2 threads: 0.450 s "
                              "[0.440 s–0.460 s]")  # fmt: skip
    assert "not told apart" in lstm["verdict"] and "0.300 s [0.290 s–0.310 s]" in lstm["verdict"]


def test_text_and_markdown_show_each_machine_its_best_cpu_and_gpu_with_the_prediction(lab):
    md = table(lab, "--campaign", "lab", "--format", "md")
    assert md.startswith("Campaign lab\n")  # was "Campaign: campaign lab"
    assert "| workload | framework | alpha · Xeon Test: best CPU | beta · EPYC Test · NVIDIA H100 80GB HBM3: best " \
           "CPU | beta · EPYC Test · NVIDIA H100 80GB HBM3: GPU |" in md  # fmt: skip
    assert "| fcn-r | torch | 0.450 s (2 threads) | 0.500 s (1 thread) | 10.0 ms (cuda:0; predicted 12.5 ms on " \
           "H100-SXM5-80GB) |" in md  # fmt: skip
    assert "- lstm torch: fastest not told apart" in md
    text = table(lab, "--runs", "1,2")  # the same runs listed
    assert "fastest on beta" in text and "not told apart" in text and "predicted 12.5 ms" in text


def test_csv_has_a_line_per_workload_and_machine_in_raw_seconds(lab):
    rows = list(csv.DictReader(io.StringIO(table(lab, "--runs", "1,2", "--format", "csv"))))
    assert [(r["workload"], r["machine"].split(" ·")[0], r["fastest"]) for r in rows] == [
        ("fcn-r", "alpha", "false"),
        ("fcn-r", "beta", "true"),
        ("lstm", "alpha", "false"),
        ("lstm", "beta", "false"),
    ]
    assert rows[1]["gpu_s"] == "0.01" and rows[1]["gpu_predicted_s"] == "0.0125" and rows[0]["cpu_threads"] == "2"


def test_a_campaign_of_one_machine_is_fine(lab):
    out = json.loads(table(lab, "--runs", "1,3", "--format", "json"))
    assert (out["campaign"], out["of"]) == (None, "runs 1, 3")
    [alpha] = out["machines"]
    best = out["rows"][0]["machines"][alpha["label"]]["cpu"]
    assert alpha["runs"] == [1, 3] and (best["threads"], best["median_s"]) == (1, 0.8)  # run 3 measured 2 threads again
    assert out["rows"][0]["verdict"].startswith("fcn-r torch: only alpha · Xeon Test, 1 thread: 0.800 s")


def test_a_machine_that_ran_a_workload_without_a_time_says_why(tmp_path):
    db = make_lab(tmp_path / "lab.db")
    store = Store.open(db, create=True)
    lstm = Cell("lstm", "torch", "cpu", 1, "fp32")
    run_id = store.create_run({"campaign": "lab"}, {}, {**BETA, "hostname": "gamma"}, ["dlperf", "run"],
                              [PlannedCell(lstm, {"batch": 64})])  # fmt: skip
    killed = "worker killed by SIGKILL (by hand, or the out-of-memory killer)"
    store.record(run_id, lstm.key, 0, ProcessMeasurement(status=Status.FAILED, error=killed),
                 CellFigures(status=Status.FAILED, error=killed))  # fmt: skip
    store.close()
    md = table(db, "--campaign", "lab", "--format", "md").splitlines()
    lstm_row = next(line for line in md if line.startswith("| lstm")).split(" | ")
    assert lstm_row[-2:] == ["-", "failed |"]  # beta's GPU: not run; gamma's best CPU (gamma measured no GPU)
    text = table(db, "--campaign", "lab")
    assert "fcn-r torch: fastest on beta" in text
    # why it failed, which only `table --run N` said: the campaign's notes (and the report's) say it too
    assert f"lstm torch cpu:1 failed on gamma · EPYC Test · NVIDIA H100 80GB HBM3: {killed}" in " ".join(text.split())


def test_a_disturbed_cell_keeps_its_mark_and_a_cell_without_a_time_its_status_in_every_format(tmp_path):
    """The side by side view showed "561 µs (1 thread)" for a cell its run's table marks "561 µs? n=1343" (other
    processes used 79% of the CPUs), and its CSV and JSON read a failed or unsupported cell as one never run."""
    db = make_lab(tmp_path / "lab.db")
    store = Store.open(db, create=True)
    busy, killed, refused = (Cell("fcn-r", "torch", "cpu", 1, "fp32"), Cell("lstm", "torch", "cpu", 1, "fp32"),
                             Cell("lstm", "torch", "cuda:0", 1, "fp32"))  # fmt: skip
    run_id = store.create_run({"campaign": "lab"}, {}, {**BETA, "hostname": "gamma"}, ["dlperf", "run"],
                              [PlannedCell(c, {"batch": 64}) for c in (busy, killed, refused)])  # fmt: skip
    warning = "other processes used 79% of the CPUs while this cell was timed"
    store.record(run_id, busy.key, 0, ProcessMeasurement(status=Status.OK, samples=[0.2] * 20),
                 CellFigures(status=Status.OK, median_s=0.2, ci_low_s=0.19, ci_high_s=0.21, n=20,
                             warnings=[warning]))  # fmt: skip
    for cell, status, error in ((killed, Status.FAILED, "worker killed by SIGKILL"),
                                (refused, Status.UNSUPPORTED, "no such kernel here")):  # fmt: skip
        store.record(run_id, cell.key, 0, ProcessMeasurement(status=status, error=error),
                     CellFigures(status=status, error=error))  # fmt: skip
    store.close()
    text = " ".join(table(db, "--campaign", "lab").split())
    assert "0.200 s? (1 thread)" in text and "gamma · EPYC Test · NVIDIA H100 80GB HBM3, 1 thread: 0.200 s? [" in text
    assert "? = a median not to rely on" in text and "`dlperf table --run N` names its cells' notes" in text
    every = list(csv.DictReader(io.StringIO(table(db, "--campaign", "lab", "--format", "csv"))))
    rows = [r for r in every if r["machine"].startswith("gamma")]
    assert {r["cpu_doubtful"] for r in every if r["machine"].startswith("alpha")} == {"false"}  # a time to rely on
    fcn, lstm = rows
    assert (fcn["cpu_status"], fcn["cpu_doubtful"], fcn["gpu_status"], fcn["gpu_doubtful"]) == ("ok", "true", "", "")
    assert [lstm[k] for k in ("cpu_status", "cpu_s", "gpu_status", "gpu_doubtful")] == ["failed", "", "unsupported", ""]
    assert lstm["error"] == "cpu:1: worker killed by SIGKILL; cuda:0: no such kernel here"
    out = json.loads(table(db, "--campaign", "lab", "--format", "json"))
    gamma = next(m["label"] for m in out["machines"] if m["label"].startswith("gamma"))
    fcn_json, lstm_json = (r["machines"][gamma] for r in out["rows"])
    assert fcn_json["cpu"]["status"] == "ok" and fcn_json["cpu"]["doubts"] == [warning] and fcn_json["gpu"] is None
    assert lstm_json == {
        "cpu": {"status": "failed", "column": "cpu:1", "error": "worker killed by SIGKILL"},
        "gpu": {"status": "unsupported", "column": "cuda:0", "error": "no such kernel here"},
    }


def test_a_cell_that_failed_where_another_thread_count_has_a_time_is_said(tmp_path):
    """A run's cpu:1 failed where cpu:2 was measured: "best CPU" showed cpu:2's slower time and nothing said cpu:1
    failed (only a machine whose column had no time at all had its failure said)."""
    db = make_lab(tmp_path / "lab.db")
    store = Store.open(db, create=True)
    one, two = Cell("fcn-r", "torch", "cpu", 1, "fp32"), Cell("fcn-r", "torch", "cpu", 2, "fp32")
    run_id = store.create_run({"campaign": "lab"}, {}, {**BETA, "hostname": "gamma"}, ["dlperf", "run"],
                              [PlannedCell(c, {"batch": 64}) for c in (one, two)])  # fmt: skip
    killed = "worker killed by SIGKILL"
    store.record(run_id, one.key, 0, ProcessMeasurement(status=Status.FAILED, error=killed),
                 CellFigures(status=Status.FAILED, error=killed))  # fmt: skip
    store.record(run_id, two.key, 0, ProcessMeasurement(status=Status.OK, samples=[0.6] * 20),
                 CellFigures(status=Status.OK, median_s=0.6, ci_low_s=0.59, ci_high_s=0.61, n=20))  # fmt: skip
    store.close()
    text = " ".join(table(db, "--campaign", "lab").split())
    assert "0.600 s (2 threads)" in text and "fcn-r torch cpu:1 failed on gamma · EPYC Test" in text
    assert text.count(killed) == 1


def test_merged_stores_form_the_campaign(lab, tmp_path):
    """A campaign's name is stored with each run, so it comes along with `dlperf merge`."""
    other = tmp_path / "beta.db"
    store = Store.open(other, create=True)
    write(store, {**BETA, "hostname": "gamma"}, CELLS["beta"], "lab")
    store.close()
    merged = tmp_path / "all.db"
    assert dlperf("merge", str(lab), str(other), db=merged).returncode == 0
    out = json.loads(table(merged, "--campaign", "lab", "--format", "json"))
    assert [m["label"].split(" ·")[0] for m in out["machines"]] == ["alpha", "beta", "gamma"]


@pytest.mark.parametrize(("args", "said"), [
    (["--campaign", "nope"], "--campaign 'nope': no run of"),
    (["--runs", "1,9"], "--runs: no run 9 in"),
    (["--runs", "1,x"], "--runs '1,x': expected a comma list of run ids"),
    (["--runs", "1", "--campaign", "lab"], "--campaign and --runs cannot be given together"),
    (["--campaign", "lab", "--run", "1"], "--campaign shows the machines of its runs side by side: give no --run"),
    (["--campaign", "lab", "--best"], "give no --best"),
])  # fmt: skip
def test_bad_input_is_one_line(lab, args, said):
    one_line_error(dlperf("table", *args, db=lab), said)


@pytest.mark.parametrize(("args", "said"), [
    (["--run", "1,2"], "--run '1,2': the table shows one run; `dlperf report --run 1,2` shows several"),
    (["--run", "all"], "`dlperf compare A B` tests two"),
    (["--best", "--explain"], "--explain: the verdict column is the run's table's; --best shows no verdicts"),
])  # fmt: skip
def test_a_table_of_one_run_names_the_views_of_several(lab, args, said):
    """`table --run 1,6` said only "expected a whole number" while report, export and plot take lists, and
    `--best --explain` dropped --explain without a word."""
    one_line_error(dlperf("table", *args, db=lab), said)


def test_a_table_of_one_campaign_run_names_the_others_and_the_view_of_them(lab):
    """After a --ray sweep, `dlperf table` showed the latest node's run with no word of the other node's run."""
    said = table(lab, "--run", "2")
    assert "run 2 is one of campaign lab's 2 runs (also 1): `dlperf table --campaign lab` shows" in said
    assert "is one of campaign" not in table(lab, "--run", "3")  # a run of no campaign


def test_the_campaigns_there_are_named_when_one_is_unknown(lab):
    one_line_error(dlperf("table", "--campaign", "lob", db=lab), "(campaigns there: lab)")


def test_run_refuses_a_bad_campaign_name_before_anything_runs(tmp_path):
    db = tmp_path / "d.db"
    one_line_error(dlperf("run", "--workloads", "tiny-fcn-r", "--campaign", "a b", db=db), "--campaign 'a b'")
    assert not db.exists()


def test_a_real_run_and_its_copy_made_to_look_like_another_machine_merged(tmp_path, torch):
    """A run of a tiny workload measured here with --campaign; a copy of its file rewritten to another host, as
    `dlperf merge`'s tests fake a second machine; the two merged form the campaign."""
    here, twin, merged = tmp_path / "here.db", tmp_path / "twin.db", tmp_path / "all.db"
    run = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", "--campaign", "here", *FAST, db=here)
    assert run.returncode == 0, run.stderr
    shutil.copy(here, twin)
    conn = sqlite3.connect(twin)
    fp = json.loads(conn.execute("SELECT fingerprint_json FROM runs").fetchone()[0])
    conn.execute("UPDATE runs SET fingerprint_json = ?", (json.dumps({**fp, "hostname": "twin"}),))
    conn.commit()
    conn.close()
    assert dlperf("merge", str(here), str(twin), db=merged).returncode == 0
    out = json.loads(table(merged, "--campaign", "here", "--format", "json"))
    assert [m["runs"] for m in out["machines"]] == [[1], [2]] and out["machines"][1]["label"].startswith("twin · ")
    [row] = out["rows"]
    assert row["workload"] == "tiny-fcn-r" and "not told apart" in row["verdict"]  # the same samples on both
    assert "no interval" not in row["verdict"] and row["verdict"].count(" µs–") + row["verdict"].count(" ms–") == 2


# The HTML report


def report(lab, out, *args):
    done = dlperf("report", "-o", str(out), *args, db=lab)
    assert done.returncode == 0, done.stderr
    return done.stdout, out.read_text()


def test_the_report_of_a_campaign_shows_its_machines_side_by_side_then_its_latest_run(lab, tmp_path):
    said, page = report(lab, tmp_path / "c.html", "--campaign", "lab")
    assert "cells of run 2, 2 machines of campaign lab" in said
    assert 'id="campaign"' in page and 'class="fleet"' in page and "Seconds per mini-batch (run 2)" in page
    assert page.count('class="machine"') == 2 and 'class="num best"' in page
    assert "predicted 12.5 ms on H100-SXM5-80GB" in page and "lstm torch: fastest not told apart" in page
    # a page of two machines was titled and headed by one, its latest run's
    assert "<title>dlperf report: campaign lab (2 machines)</title>" in page
    assert '<p class="summary">Campaign lab: 2 machines side by side, then Run 2 · ' in page


def test_a_runs_report_shows_its_campaign_and_one_runs_report_is_as_before(lab, tmp_path):
    _, page = report(lab, tmp_path / "a.html", "--run", "1")  # run 1 is in campaign lab: the section comes along
    assert 'id="campaign"' in page and "Seconds per mini-batch (run 1)" in page
    _, page = report(lab, tmp_path / "b.html")  # the latest run, 3, is in no campaign
    assert 'id="campaign"' not in page and "<h2>Seconds per mini-batch</h2>" in page


def test_the_report_refuses_two_machines_in_one_picture_and_says_how_to_set_them_side_by_side(lab, tmp_path):
    out = tmp_path / "x.html"
    one_line_error(dlperf("report", "--run", "1,2", "-o", str(out), db=lab), "different machines",
                   "dlperf report --runs 1,2")  # fmt: skip
    one_line_error(dlperf("report", "--campaign", "nope", "-o", str(out), db=lab), "--campaign 'nope'")
    assert not out.exists()


def test_two_ray_nodes_of_one_host_are_two_machines_named_by_their_node():
    """`dlperf run --ray` on two nodes of one host: the same fingerprint, two machines to Ray in one sweep (their origin
    `ray:NODE_ID`, kept through a merge), each named by its node; runs merged from one store stay one machine."""
    from types import SimpleNamespace

    from dlperf.report import fleet
    from dlperf.store.records import Origin

    fp = {"hostname": "box", "cpu_model": "EPYC Test", "gpus": []}
    sweep = {"campaign": "ray-20261207-130000"}  # one sweep's nodes

    def node(run_id, node_id):
        return SimpleNamespace(id=run_id, fingerprint=fp, origin=Origin(f"ray:{node_id}", 1), spec=sweep)

    merged = SimpleNamespace(id=3, fingerprint=fp, origin=Origin("/x/a.db", 7, None, Origin("ray:" + "b" * 56, 2)),
                             spec=sweep)  # fmt: skip
    machines = fleet.group([node(1, "a" * 56), node(2, "b" * 56), merged])
    assert [(m.label, m.runs) for m in machines] == [
        ("box · EPYC Test (Ray node aaaaaaaa)", (1,)),
        ("box · EPYC Test (Ray node bbbbbbbb)", (2, 3)),
    ]
    plain = [SimpleNamespace(id=i, fingerprint=fp, origin=None, spec={}) for i in (4, 5)]
    assert [(m.label, m.runs) for m in fleet.group(plain)] == [("box · EPYC Test", (4, 5))]


def test_a_resumed_ray_sweeps_closing_line_names_its_runs_campaign(lab):
    """`dlperf run --resume --ray` is given no --campaign: its closing line dropped the campaign's view; the runs'
    own campaign is read from the store."""
    from dlperf.commands.run_fleet import _campaign

    assert _campaign(str(lab), [1, 2]) == "lab"
    assert _campaign(str(lab), [1, 3]) is None  # run 3 is of no campaign: the runs name none alike


def test_the_runs_listed_are_named_with_the_singular_for_one(lab):
    """`--runs 3` titled its view "runs 3: one machine": the name was plural whatever the count."""
    from dlperf.report.fleet import read

    assert read(str(lab), runs=[3]).title.startswith("run 3: one machine")
    assert read(str(lab), runs=[1, 3]).title.startswith("runs 1, 3: one machine")


def test_a_fastest_machine_told_apart_by_one_process_a_side_is_noted(lab, tmp_path):
    """`dlperf run --ray` over two nodes of one host (one process a cell) printed 'tiny-fcn-r torch: fastest on vm ·
    AMD EPYC (Ray node bf9c9534), 1 thread: 409 µs [401 µs–419 µs], 1.05x faster than ... 428 µs [420 µs–438 µs]':
    one process's interval holds none of the difference between processes, so one machine was told faster than
    itself, without the caveat the fastest-framework view gives. Measured with --repeats 3, no note."""
    from dlperf.report.fleet import read

    alone = [n for n in read(str(lab), campaign="lab").notes() if "one process each" in n]
    assert [n.split(": ")[0] for n in alone] == ["fcn-r torch"]  # lstm's machines are not told apart: not noted
    assert "--repeats 3" in alone[0]
    store = Store.open(tmp_path / "three.db", create=True)
    try:
        for fingerprint, median in ((BETA, 0.5), ({**BETA, "hostname": "gamma"}, 0.3)):
            cell = Cell("fcn-r", "torch", "cpu", 1, "fp32")
            run_id = store.create_run({"campaign": "c"}, {}, fingerprint, ["dlperf", "run"], [PlannedCell(cell, {})])
            for repeat in range(3):
                m = ProcessMeasurement(status=Status.OK, samples=[median] * 20)
                figures = CellFigures(status=Status.OK, median_s=median, ci_low_s=median * 0.9, ci_high_s=median * 1.1,
                                      n=20 * (repeat + 1))  # fmt: skip
                store.record(run_id, cell.key, repeat, m, figures)
    finally:
        store.close()
    fleet = read(str(tmp_path / "three.db"), campaign="c")
    assert fleet.rows[0].winner() is not None and not [n for n in fleet.notes() if "one process" in n]


def test_a_failure_is_a_note_an_unsupported_mode_none_and_one_error_of_two_machines_is_one_line():
    """Every unsupported mode gave a note per machine. A failed cpu:2 beside its column's 399 µs (cpu:1) is a note
    too: a later run's failure of a column's fastest thread count left a slower one's time there, unsaid."""
    from conftest import make_cell
    from dlperf.report import fleet
    from dlperf.vocab import Status

    machines = [fleet.Machine("alpha", (1,), "alpha"), fleet.Machine("beta", (2,), "beta")]
    boom = "RuntimeError: boom"
    cells = {
        "alpha": {"a": (make_cell("lstm", status=Status.FAILED.value, error=boom), None),
                  "b": (make_cell("fcn-r", mode="channels_last", status=Status.UNSUPPORTED.value, error="no"), None),
                  "c": (make_cell("fcn-r", threads=2, status=Status.FAILED.value, error="other"), None),
                  "d": (make_cell("fcn-r", median_s=0.0004, n=100), None)},
        "beta": {"a": (make_cell("lstm", status=Status.FAILED.value, error=boom), None)},
    }  # fmt: skip
    view = fleet.Fleet("runs 1, 2", machines, fleet.build(machines, cells))
    assert view._failures() == ["lstm torch cpu:1 failed on alpha, beta: RuntimeError: boom",
                                "fcn-r torch cpu:2 failed on alpha: other"]  # fmt: skip
