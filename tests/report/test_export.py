"""`dlperf export`: the records' CSV is safe to open in a spreadsheet."""

import csv
import io
import json
import re

import pytest

from conftest import ROOT, make_cell
from dlperf.report import export


def test_csv_text_that_starts_a_formula_gets_a_quote_and_numbers_stay_numbers():
    """OWASP's CSV injection: `=`, `+`, `-`, `@`, tab and CR start a formula; a leading `'` makes it text."""
    error = "@SUM(1+1)*cmd|' /C calc'!A0"
    hostile = make_cell('=HYPERLINK("http://evil.example","click")', status="failed", error=error,
                        warnings=["-2+3 looks like a formula"], median_s=None, n=0)  # fmt: skip
    fine = make_cell("fcn-r", median_s=0.25, n=12, warnings=[], steal_fraction=-0.0)
    [bad, good] = csv.DictReader(io.StringIO(export.render([export.record(hostile), export.record(fine)], "csv")))
    assert bad["workload"] == '\'=HYPERLINK("http://evil.example","click")'
    assert bad["error"] == "'@SUM(1+1)*cmd|' /C calc'!A0"
    assert json.loads(bad["warnings"]) == ["-2+3 looks like a formula"]  # a JSON list: starts no formula
    assert (good["workload"], good["median_s"], good["n"], good["steal_fraction"]) == ("fcn-r", "0.25", "12", "-0.0")


@pytest.mark.parametrize(
    ("value", "written"),
    [("=1+1", "'=1+1"), ("+1+1", "'+1+1"), ("-x", "'-x"), ("@x", "'@x"), ("\tx", "'\tx"), ("\rx", "'\rx"),
     ("-1.5", "-1.5"), ("+3e-2", "+3e-2"), (-2, -2), (-0.5, -0.5), ("fcn-r", "fcn-r"), (None, None)],
)  # fmt: skip
def test_spreadsheet_safe(value, written):
    assert export.spreadsheet_safe(value) == written


def test_a_carriage_return_in_a_name_stays_inside_its_field():
    # with "\n" line ends Python 3.11 left a bare "\r" unquoted, and a reader split the row there
    cell = make_cell("fcn\rr", median_s=0.25, n=12, warnings=[])
    rows = list(csv.DictReader(io.StringIO(export.render([export.record(cell)] * 2, "csv"), newline="")))
    assert [r["workload"] for r in rows] == ["fcn\rr", "fcn\rr"]


def test_run_all_and_a_list_of_runs_export_every_runs_cells_each_saying_its_run(tmp_path):
    """Issue 31: `export --run all` was refused while `report --run all` worked. Each record is its own run's
    measurement: two runs of one cell are two records, never one mixed."""
    from conftest import dlperf, one_line_error
    from report.runs import BASE, SLOWER, make_db

    db = tmp_path / "two.db"
    make_db(db, BASE, SLOWER)
    by_run = {}
    for runs in ("all", "1,2", "2,1"):
        done = dlperf("export", "--run", runs, "--format", "csv", db=db)
        assert done.returncode == 0, done.stderr
        by_run[runs] = [(int(r["run_id"]), r["workload"], float(r["median_s"])) for r in csv.DictReader(
            io.StringIO(done.stdout))]  # fmt: skip
    assert by_run["all"] == by_run["1,2"] == by_run["2,1"]
    assert [(run, w) for run, w, _ in by_run["all"]] == [(1, "fcn-r"), (1, "alexnet-r"), (2, "fcn-r"),
                                                          (2, "alexnet-r")]  # fmt: skip
    assert by_run["all"][0][2] < 0.11 < 0.12 < by_run["all"][2][2]  # run 1's fcn-r at 0.10 s, run 2's at 0.13 s
    latest = dlperf("export", "--format", "csv", db=db)
    assert {r["run_id"] for r in csv.DictReader(io.StringIO(latest.stdout))} == {"2"}
    one_line_error(dlperf("export", "--run", "1,x", db=db), "--run '1,x'")
    one_line_error(dlperf("export", "--run", "3", db=db), "3")


def test_each_record_says_how_its_steps_were_timed():
    """The worker stores how it timed the step (`timing` in the cell's settings); a cell from before has none."""
    from dlperf.measure.timer import HostClock

    jax = make_cell("fcn-r", framework="jax", median_s=0.1, n=12, settings={"timing": HostClock.HOW})
    older = make_cell("fcn-r", median_s=0.2, n=12, settings={"threads": 1})
    assert [export.record(c)["timing"] for c in (jax, older)] == [HostClock.HOW, None]
    [row, _] = csv.DictReader(io.StringIO(export.render([export.record(jax), export.record(older)], "csv")))
    assert row["timing"] == HostClock.HOW


def test_a_cell_whose_loss_went_nan_says_so_in_a_column():
    """A user's model whose loss was NaN exported `status: ok` and `loss_ok: null`, the problem only inside the
    warnings' text: a pipeline keeping the rows with status ok kept a model that did not train."""
    nan = make_cell("mine", median_s=0.1, n=12, loss_finite=False, warnings=["the loss was not finite"])
    fine, older = make_cell("fcn-r", median_s=0.1, n=12, loss_finite=True), make_cell("fcn-r", median_s=0.1, n=12)
    assert [export.record(c)["loss_finite"] for c in (nan, fine, older)] == [False, True, None]
    [row, _, _] = csv.DictReader(io.StringIO(export.render([export.record(c) for c in (nan, fine, older)], "csv")))
    assert row["loss_finite"] == "False" and row["status"] == "ok"


def test_structured_columns_are_json_in_the_csv():
    """A dict column (flops_by_dtype) was written as Python's repr, `{'fp32': 10}`, which no JSON reader takes."""
    c = make_cell("fcn-r", median_s=0.25, n=12, flops_by_dtype={"fp32": 10, "bf16": 5})
    [row] = csv.DictReader(io.StringIO(export.render([export.record(c)], "csv")))
    assert json.loads(row["flops_by_dtype"]) == {"fp32": 10, "bf16": 5}


def test_throughput_is_named_per_second_where_every_other_s_is_seconds():
    """The export named samples per second `samples_s`, beside `median_s`, `iqr_s`, ... in seconds: a reader took it
    for a time. It is `samples_per_s`, as `long_run_samples_per_s` and `loader_alone_samples_per_s` are."""
    c = make_cell("fcn-r", median_s=0.25, n=12, samples_s=64 / 0.25)
    rec = export.record(c)
    assert rec["samples_per_s"] == 256.0 and rec["samples_s"] == 256.0  # the former name kept for scripts
    [row] = csv.DictReader(io.StringIO(export.render([rec], "csv")))
    assert float(row["samples_per_s"]) == 256.0


def test_every_former_name_the_reference_gives_is_exported_with_its_columns_value():
    """ae158e29 renamed `samples_s` to `samples_per_s` with no alias, though store.md calls the export the stable way
    to read a store: a script reading `samples_s` broke on upgrading. Each former name export.md documents ("a former
    name of `X`") is written right after X, in JSON and CSV, with X's value; the reference documents every one."""
    reference = (ROOT / "docs" / "reference" / "export.md").read_text()
    documented = dict(re.findall(r"^\| `(\w+)` \| a former name of `(\w+)`", reference, flags=re.M))
    assert documented == export.FORMER_NAMES == {"samples_s": "samples_per_s"}
    cell = make_cell("fcn-r", median_s=0.25, n=12, samples_s=64 / 0.25)
    rec = export.record(cell, samples=[[0.25] * 12])
    [row] = csv.DictReader(io.StringIO(export.render([rec], "csv")))
    names = list(rec)
    for former, now in documented.items():
        assert names.index(former) == names.index(now) + 1
        assert rec[former] == rec[now] == 256.0 and row[former] == row[now] == "256.0"
        assert export.columns().index(former) == export.columns().index(now) + 1  # an export of no record too


def test_warnings_holding_a_semicolon_come_back_whole_from_the_csv():
    """The CSV joined a cell's warnings with "; ", which one of them holds ("... is 164% above the median; a long run
    pays the mean"): three warnings split back into four."""
    said = ["noisy: IQR is 21% of the median", "slow steps now and then: the mean step, 1.20 ms, is 164% above the "
            "median; a long run pays the mean", "other processes used 86% of the CPUs"]  # fmt: skip
    c = make_cell("fcn-r", median_s=0.25, n=12, warnings=said)
    [row] = csv.DictReader(io.StringIO(export.render([export.record(c)], "csv")))
    assert json.loads(row["warnings"]) == said


def test_an_export_of_no_record_has_every_column():
    """Every cell's row unreadable: the CSV's header was 25 columns, without the machine's or the run's."""
    header = next(csv.reader(io.StringIO(export.render([], "csv"))))
    assert header == export.columns() and {"hostname", "run_state", "framework_version", "warnings"} <= set(header)


def test_each_record_names_its_run_wherever_it_is_read_and_a_framework_version_measured_or_not():
    """A merge renumbers runs: two stores' exports of one run could not be matched (no start, no origin); a record
    of an unsupported or pending cell named no framework version, though its run found one."""
    from dlperf.store.records import Origin, RunRecord
    from dlperf.vocab import Status

    env = {"frameworks": {"torch": {"version": "2.13.0+cpu"}}}
    first = Origin("/data/a.db", 4, "2026-12-02T00:00:00")
    run = RunRecord(2, "2026-12-01T10:00:00", None, "interrupted", ["dlperf", "run"], {}, env, {"hostname": "vm"},
                    origin=Origin("/data/all.db", 7, "2026-12-03T00:00:00", first))  # fmt: skip
    unsupported = make_cell("fcn-r", status=Status.UNSUPPORTED.value, error="no bf16 here")
    rec = export.record(unsupported, run=run, state="interrupted")
    assert (rec["run_started_at"], rec["run_state"], rec["run_origin"]) == (
        "2026-12-01T10:00:00",
        "interrupted",
        "/data/a.db run 4",
    )
    assert rec["framework_version"] == "2.13.0+cpu"
    here = RunRecord(1, "2026-12-01T10:00:00", None, "complete", ["dlperf", "run"], {}, {}, {})
    assert export.record(unsupported, run=here, state="complete")["run_origin"] is None


def test_each_record_names_the_dlperf_code_that_measured_its_run():
    """A run keeps the digest of dlperf's timing code and its commit (`envinfo.timing_code`), which `--resume`
    compares, but the export carried the version alone: two runs of 0.1.0 at two commits read alike. The columns
    follow dlperf_version, the ones before it unmoved; empty for a run an older dlperf measured."""
    from dlperf.store.records import RunRecord

    code = {"digest": "4f1c9a2e0b7d" + "0" * 52, "commit": "11eef592" + "0" * 32}
    env = {"dlperf_version": "0.1.0", "dlperf_code": code}
    run = RunRecord(1, "2026-12-01T10:00:00", None, "complete", ["dlperf", "run"], {}, env, {"hostname": "vm"})
    rec = export.record(make_cell("fcn-r", median_s=0.25, n=12), run=run, state="complete")
    said = (rec["dlperf_version"], rec["dlperf_code"], rec["dlperf_commit"])
    assert said == ("0.1.0", code["digest"], code["commit"])
    [row] = csv.DictReader(io.StringIO(export.render([rec], "csv")))
    assert (row["dlperf_code"], row["dlperf_commit"]) == (code["digest"], code["commit"])
    names = export.columns()
    assert names[: names.index("dlperf_version") + 3][-3:] == ["dlperf_version", "dlperf_code", "dlperf_commit"]
    assert names[:9] == ["run_id", "run_started_at", "run_state", "run_origin", "hostname", "cpu_model", "cores",
                         "gpus", "dlperf_version"]  # fmt: skip
    older = RunRecord(1, "2026-12-01T10:00:00", None, "complete", ["dlperf", "run"], {}, {"dlperf_version": "0.1"}, {})
    rec = export.record(make_cell("fcn-r", median_s=0.25, n=12), run=older, state="complete")
    assert rec["dlperf_code"] is None and rec["dlperf_commit"] is None
