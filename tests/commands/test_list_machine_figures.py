"""`dlperf list --peaks` and `dlperf list --comm`: the figures `dlperf peak` and `dlperf comm` stored, read back
without measuring again (before, nothing showed them: `table` and `report` of such a store said "no runs yet"), and
the "no runs yet" error pointing at them."""

from __future__ import annotations

import json

from dlperf.cli import main
from dlperf.store import Store
from dlperf.store.machine import MeasuredComm, MeasuredPeak

HERE = {"hostname": "lab1", "cpu_model": "EPYC Test", "cores": {"cores": 2}}
OTHER = {**HERE, "hostname": "lab2"}
QUIET = {"others_cpu_share": 0.01, "steal_fraction": 0.0}


def peak(kind, value, dtype=None, threads=1, **detail):
    return MeasuredPeak(framework="torch", framework_version="2.13.0", device="cpu", threads=threads, kind=kind,
                        dtype=dtype, value=value, detail={**QUIET, **detail})  # fmt: skip


def size(nbytes, busbw, world=2):
    return MeasuredComm(backend="gloo", device="cpu", world=world, nnodes=1, threads=1, bytes=nbytes, time_s=1e-3,
                        algbw=busbw, busbw=busbw, wrong=0)  # fmt: skip


def stored(db, peaks=(), comm=()):
    store = Store.open(db, create=True)
    try:
        for machine, rows in peaks:
            store.record_peaks(machine, {}, rows)
        for machine, rows in comm:
            store.record_comm(machine, {}, rows)
    finally:
        store.close()


def listed(capsys, db, *flags):
    code = main(["list", *flags, "--db", str(db)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_the_latest_peak_of_each_figure_is_listed_per_machine_in_its_unit(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    db = tmp_path / "p.db"
    first = [peak("matmul", 8.0e10, "fp32"), peak("matmul", 2.1e11, "bf16"), peak("bandwidth", 2.32e10),
             peak("dispatch", 2.54e-6), peak("memcpy", 9.6e9, bytes=2**28, pinned=False),
             peak("matmul", None, "fp16", sizes=[{"n": 1024, "skipped": "one product would take 16 s"}])]  # fmt: skip
    again = [peak("matmul", 9.0e10, "fp32", others_cpu_share=0.4)]  # measured again, busy: supersedes the first
    stored(db, peaks=[(HERE, first), (HERE, again), (OTHER, [peak("matmul", 5.0e10, "fp32")])])
    text = listed(capsys, db, "--peaks")
    lines = [" ".join(line.replace("│", " ").split()) for line in text.splitlines()]
    assert "Peaks of lab1 · EPYC Test, 2 cores (torch 2.13.0)" in text and "lab2 · EPYC Test" in text
    assert [line.split()[3:6] for line in lines if line.startswith("cpu 1 matmul")] == [
        ["fp32", "0.0900", "TFLOP/s"], ["bf16", "0.210", "TFLOP/s"], ["fp16", "-", "TFLOP/s"],
        ["fp32", "0.0500", "TFLOP/s"]]  # fmt: skip
    assert any("memory bandwidth 23.2 GB/s" in line for line in lines)
    assert any("dispatch, one tiny operator 2.54 µs per op" in line for line in lines)
    assert any("memcpy 256 MiB 9.60 GB/s" in line for line in lines)
    assert "every size skipped: one product would take 16 s" in text and "busy: others 40%" in text
    assert "8 peaks in" in text and "1 earlier figure superseded" in text and "reads low" in text

    rows = json.loads(listed(capsys, db, "--peaks", "--format", "json"))
    assert len(rows) == 8 and rows[0]["value"] == 5.0e10 and rows[0]["machine"].startswith("lab2")
    assert {(r["kind"], r["bytes"], r["pinned"]) for r in rows if r["kind"] == "memcpy"} == {("memcpy", 2**28, False)}


def test_a_figure_skipped_later_does_not_hide_the_one_measured_before(tmp_path, capsys, monkeypatch):
    """A second `dlperf peak` that skipped the fp16 matmul (or found it unsupported) listed '-' over the figure the
    first measured, and called that one superseded, while the views still used it."""
    monkeypatch.setenv("COLUMNS", "200")
    db = tmp_path / "p.db"
    skipped = peak("matmul", None, "fp16", sizes=[{"n": 1024, "skipped": "one product would take 16 s"}])
    stored(db, peaks=[(HERE, [peak("matmul", 1.0e9, "fp16")]), (HERE, [skipped])])
    lines = [" ".join(line.replace("│", " ").split()) for line in listed(capsys, db, "--peaks").splitlines()]
    assert [line.split()[3:6] for line in lines if line.startswith("cpu 1 matmul")] == [["fp16", "0.00100", "TFLOP/s"]]
    assert not any("every size skipped" in line for line in lines)
    assert any("2 peaks in" in line and "1 earlier figure superseded" in line for line in lines)
    only = tmp_path / "q.db"  # none measured: the latest of those not measured says why
    stored(only, peaks=[(HERE, [skipped]), (HERE, [peak("matmul", None, "fp16", unsupported="no fp16 kernel")])])
    assert "no fp16 kernel" in listed(capsys, only, "--peaks")


def test_each_comm_job_is_one_line_and_json_keeps_every_size(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    db = tmp_path / "c.db"
    stored(db, comm=[(HERE, [size(4096, 4e6), size(2**26, 8e8)]), (HERE, [size(4096, 2e6, world=4)])])
    text = " ".join(listed(capsys, db, "--comm").replace("│", " ").split())
    assert "2 all-reduce jobs in" in text
    assert "gloo on cpu, 4 processes, 1 thread each 1: 4 KiB to 4 KiB" in text  # the newest first
    assert "gloo on cpu, 2 processes, 1 thread each 2: 4 KiB to 64 MiB 1.00 ms 0.800 / 0.402 0" in text
    newest, oldest = json.loads(listed(capsys, db, "--comm", "--format", "json"))
    assert (newest["world"], oldest["world"]) == (4, 2)
    assert [s["bytes"] for s in oldest["per_size"]] == [4096, 2**26] and oldest["busbw_mean"] == (4e6 + 8e8) / 2


def test_a_store_without_them_says_what_measures_them(tmp_path, capsys):
    db = tmp_path / "e.db"
    Store.open(db, create=True).close()
    assert "no peaks in" in listed(capsys, db, "--peaks") and "`dlperf peak` measures them" in listed(
        capsys, db, "--peaks"
    )
    assert "no all-reduce figures in" in listed(capsys, db, "--comm")
    assert json.loads(listed(capsys, db, "--comm", "--format", "json")) == []


def test_a_store_of_peaks_only_points_at_them_where_it_has_no_runs(tmp_path, capsys):
    db = tmp_path / "p.db"
    stored(db, peaks=[(HERE, [peak("matmul", 8e10, "fp32"), peak("bandwidth", 2e10)])], comm=[(HERE, [size(4096, 1)])])
    assert main(["table", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "no runs yet (run `dlperf run` first); it holds 2 peaks (`dlperf list --peaks`) and 1 all-reduce size" in err
    assert len(err.strip().splitlines()) == 1
    assert listed(capsys, db, "--runs").startswith(f"no runs in {db}; it holds 2 peaks (`dlperf list --peaks`)")
    Store.open(tmp_path / "e.db", create=True).close()
    # an empty table titled "0 runs" said nothing of what to do
    assert listed(capsys, tmp_path / "e.db", "--runs") == f"no runs in {tmp_path / 'e.db'}: `dlperf run` measures one\n"
    assert main(["report", "--db", str(tmp_path / "e.db")]) == 2
    assert capsys.readouterr().err.strip().endswith("no runs yet (run `dlperf run` first)")


def test_the_lines_that_store_them_name_the_list_that_shows_them_again(tmp_path, capsys, monkeypatch):
    """`dlperf peak` and `dlperf comm` ended on where their figures were stored, not on how to see them again without
    measuring: their last line names the list that shows them (f633aeb)."""
    from dlperf.answers import CommAnswer
    from dlperf.commands import comm
    from dlperf.commands import peak as peak_command
    from test_answers import COMM_WIRE

    monkeypatch.setenv("COLUMNS", "300")
    db = str(tmp_path / "d.db")
    comm.render(CommAnswer.from_json(COMM_WIRE), [1], db, "text")
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"1 size stored in {db} (`dlperf list --comm` shows the job again)"
    opts = peak_command.PeakOptions(("cpu",), (1,), ("bf16",), (64,), 2**20, (), 0.1, 60.0, "text")
    peak_command._print_text([], [], 8, opts, db, False)
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"8 peaks stored in {db} (`dlperf list --peaks` shows them again)"


def test_a_value_reads_in_three_figures_or_whole_from_1000():
    from dlperf.report.machine_figures import value_text

    assert [value_text(v) for v in (0.0206, 9.6, 999.4, 999.96, 1000, 4204.4)] == [
        "0.0206", "9.60", "999", "1,000", "1,000", "4,204"]  # fmt: skip


def test_a_missing_store_names_the_command_that_stores_the_figures(tmp_path, capsys):
    """`list --peaks` of a store not made yet said "run `dlperf run` first", which stores no peak."""
    for flag, command in (("--peaks", "dlperf peak"), ("--comm", "dlperf comm"), ("--runs", "dlperf run")):
        assert main(["list", flag, "--db", str(tmp_path / "none.db")]) == 2
        assert f"no such database (run `{command}` first)" in capsys.readouterr().err
