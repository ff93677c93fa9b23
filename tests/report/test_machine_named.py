"""Each figure beside the machine that measured it, in a store that holds several (`dlperf merge`'s): export's
records, the table of one run, and compare's note. Two "machines" written through the Store API
(tests/report/campaign.py): a simulation, their figures made up for the views to lay out."""

import csv
import io
import json

import pytest

from conftest import dlperf
from report.campaign import make_lab
from report.runs import BASE, make_db


@pytest.fixture
def lab(tmp_path):
    return make_lab(tmp_path / "lab.db")


def test_every_exported_record_names_its_runs_machine(lab):
    """Before, a record named its run_id alone: a merged store's CSV could not say which machine measured a row."""
    proc = dlperf("export", "--run", "all", "--format", "csv", db=lab)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    machines = {(r["run_id"], r["hostname"], r["cpu_model"], r["cores"], r["gpus"]) for r in rows}
    assert machines == {("1", "alpha", "Xeon Test", "8", ""), ("3", "alpha", "Xeon Test", "8", ""),
                        ("2", "beta", "EPYC Test", "64", '["NVIDIA H100 80GB HBM3"]')}  # fmt: skip
    jsonl = [json.loads(line) for line in dlperf("export", "--run", "2", db=lab).stdout.splitlines()]
    assert {(r["hostname"], r["cores"], tuple(r["gpus"])) for r in jsonl} == {("beta", 64, ("NVIDIA H100 80GB HBM3",))}


def test_the_table_of_one_run_names_its_machine(lab):
    """Before, `dlperf table` of one run of a merged store named its framework versions and no machine."""
    machines = {"1": "alpha · Xeon Test, 8 cores", "2": "beta · EPYC Test, 64 cores · NVIDIA H100 80GB HBM3"}
    for run, machine in machines.items():
        text = dlperf("table", "--run", run, db=lab, env={"COLUMNS": "200"})
        assert text.returncode == 0, text.stderr
        assert f"measured on: {machine}\n" in text.stdout
        assert f"measured on: {machine}\n" in dlperf("table", "--run", run, "--format", "md", db=lab).stdout
        assert json.loads(dlperf("table", "--run", run, "--format", "json", db=lab).stdout)["machine"] == machine


def test_the_reports_heading_names_the_host(lab, tmp_path):
    """Two hosts of one CPU model (two cloud machines of one type) had the same heading."""
    proc = dlperf("report", "--run", "2", "-o", str(tmp_path / "r.html"), db=lab)
    assert proc.returncode == 0, proc.stderr
    assert "beta · EPYC Test, " in (tmp_path / "r.html").read_text()  # the heading: host · CPU, cores, memory


def test_the_table_of_a_store_of_several_machines_says_so_and_names_the_view_of_them_all(lab, tmp_path):
    """Before, the latest run's table alone, with no word that the store held another machine's runs."""
    text = dlperf("table", db=lab, env={"COLUMNS": "300"}).stdout
    assert "note: run 3 is one machine's: this store holds runs of 2 machines" in text
    assert "`dlperf table --runs 1,2,3` sets them side by side" in text
    one = tmp_path / "one.db"
    make_db(one, BASE, BASE)  # two runs of one machine
    assert "machines" not in dlperf("table", db=one, env={"COLUMNS": "300"}).stdout


def test_the_best_view_names_its_machine_too(lab):
    for fmt in ("text", "md"):
        proc = dlperf("table", "--run", "2", "--best", "--format", fmt, db=lab, env={"COLUMNS": "200"})
        assert proc.returncode == 0, proc.stderr
        assert "measured on: beta · EPYC Test, 64 cores · NVIDIA H100 80GB HBM3" in proc.stdout, fmt


def test_a_machine_of_one_core_reads_one_core():
    """`taskset -c 0` read "1 cores" in the table's machine line, list --runs and the report's heading."""
    from dlperf.report.fleet import machine_label
    from dlperf.report.html import _machine

    one = {"hostname": "small", "cpu_model": "EPYC Test", "cores": {"cores": 1}}
    assert machine_label(one, cores=True) == "small · EPYC Test, 1 core"
    assert machine_label({**one, "cores": {"cores": 2}}, cores=True) == "small · EPYC Test, 2 cores"
    heading = _machine({"hostname": "small", "cpu": {"model": "EPYC Test"}, "cores": {"cores": 1}})
    assert heading.startswith("small · EPYC Test, 1 core, ") and "cores" not in heading
