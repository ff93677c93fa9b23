"""A `dlperf fit` run's out-of-memory tries read as tries in every view, not as failures (helper 134: after fb7282f
`dlperf report` said so, but `list --runs` counted "4 failed, 6 ok" and `dlperf table` showed "failed"), and the words
"out of memory" that mark such a try are defined once, where the worker that writes them and the views can import."""

import json
import re

from test_fit_report import fit_run

from conftest import ROOT, make_cell
from dlperf import vocab
from dlperf.report import fit, table


def test_out_of_memory_is_defined_once_and_the_worker_writes_it():
    from dlperf import fit as fit_command
    from dlperf.worker.cell import oom_reason

    sources = (ROOT / "src" / "dlperf").rglob("*.py")
    defined = [p for p in sources if re.search(r"^OUT_OF_MEMORY = ", p.read_text(), re.M)]
    assert defined == [ROOT / "src" / "dlperf" / "vocab.py"]
    assert fit.OUT_OF_MEMORY is vocab.OUT_OF_MEMORY and fit_command.OUT_OF_MEMORY is vocab.OUT_OF_MEMORY
    assert oom_reason(MemoryError(), 8, None).startswith(vocab.OUT_OF_MEMORY)


def test_the_table_ran_out_of_memory_where_the_store_says_so_and_its_csv_and_json_keep_the_status():
    cells = [*fit_run().cells, make_cell("other@b8", run_id=4, position=10, batch=8, status="failed", error="boom")]
    view = table.build(4, cells)
    said = {row.workload: table.cell_text(row, "cpu:1") for row in view.rows}
    assert said["tiny-gpt@b128"] == said["tiny-gpt@b103"] == "out of memory"
    assert said["other@b8"] == "failed"  # any other failure stays one
    assert said["tiny-gpt@b102"].startswith("12.593")
    assert "tiny-gpt@b128,torch,128,failed," in table.render_csv(view)  # the export's status values stay as stored
    assert '"status": "failed"' in table.render_json(view) and 'out of memory"' not in table.render_json(view)


def test_list_runs_counts_the_tries_that_ran_out_of_memory_as_such(tmp_path, capsys, monkeypatch):
    from dataclasses import replace

    from dlperf.cli import main
    from dlperf.store import Store
    from dlperf.store.process import ProcessMeasurement
    from dlperf.vocab import Status
    from report.runs import MACHINE, cell, measured

    db = tmp_path / "f.db"
    store = Store.open(db, create=True)
    batches = (16, 32, 64, 48, 96, 128)
    plan = [cell(f"fcn-r@b{b}", batch=b) for b in batches]
    run_id = store.create_run({"max_memory": 2**28}, {"made_by": "fit"}, MACHINE, ["dlperf", "fit", "fcn-r"], plan)
    said = {
        16: "ok",
        32: "ok",
        64: "out of memory at batch 64 under --max-memory 256 MiB: MemoryError",
        48: "boom",
        96: _killed(9, 1),
        128: _killed(9, 0),
    }  # killed: by the out-of-memory killer, by another process
    for c, batch in zip(plan, batches, strict=True):
        error = said[batch]
        status = Status.OK if error == "ok" else Status.FAILED
        m = ProcessMeasurement(status=status, samples=[0.01] * 5 if status is Status.OK else [], error=error)
        figures = replace(measured([m.samples], status.value), error=None if status is Status.OK else error)
        store.record(run_id, c.cell.key, 0, m, figures)
    store.set_run_status(run_id, "complete")
    store.close()
    assert main(["list", "--runs", "--format", "json", "--db", str(db)]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["cells"] == {"failed": 4, "ok": 2} and row["out_of_memory"] == 2  # the statuses as stored
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["list", "--runs", "--db", str(db)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "2 failed, 2 ok, 2 out of memory" in text


def test_the_tables_notes_say_a_try_ran_out_of_memory_as_its_row_does():
    """The rows read 'out of memory' (2c53e7e) and the notes under them still 'failed: out of memory at batch 128 ...'
    for each such try; any other failure keeps its status."""
    cells = [*fit_run().cells, make_cell("other@b8", run_id=4, position=10, batch=8, status="failed", error="boom")]
    notes = table.build(4, cells).notes
    assert "tiny-gpt@b128 torch cpu:1: out of memory at batch 128 under --max-memory 1,024 MiB: RuntimeError" in notes
    assert not [n for n in notes if "failed: out of memory" in n]
    assert "other@b8 torch cpu:1: failed: boom" in notes
    kinds = {label: kind for label, kind, _ in table.cell_notes(cells)}
    assert kinds["tiny-gpt@b128 torch cpu:1"] == vocab.OUT_OF_MEMORY and kinds["other@b8 torch cpu:1"] == "failed"


def test_a_tries_progress_line_ran_out_of_memory_as_the_table_does():
    """fit's progress said '[2/?] wide@b8 torch cpu:1 fp32: failed: out of memory at batch 8 under ...'."""
    from dlperf.progress import outcome
    from dlperf.store.process import ProcessMeasurement
    from dlperf.store.records import CellFigures
    from dlperf.vocab import Status

    said = "out of memory at batch 8 under --max-memory 316 MiB: MemoryError"
    oom = ProcessMeasurement(status=Status.FAILED, error=said, duration_s=1.0)
    assert outcome(oom, CellFigures(status=Status.FAILED)) == said
    other = ProcessMeasurement(status=Status.FAILED, error="RuntimeError: boom", duration_s=1.0)
    assert outcome(other, CellFigures(status=Status.FAILED)) == "failed: RuntimeError: boom"


def _killed(signum, oom_kills, stderr=""):
    from dlperf.runner.launch import signal_reason

    return signal_reason(signum, oom_kills, stderr)


def test_a_cell_the_out_of_memory_killer_ended_reads_out_of_memory_in_the_table_its_notes_and_progress():
    """A cell whose process the kernel's out-of-memory killer ended (a counted kill), or that aborted where an
    allocation failed, on its own or on one rank of several, was shown "failed" in the table and counted among the
    failed by `list --runs`, though its note said out of memory (session 28's note); a kill no counter explains, a
    kill another process sent and a plain crash stay failures."""
    import signal

    from dlperf.progress import outcome
    from dlperf.store.process import ProcessMeasurement
    from dlperf.store.records import CellFigures
    from dlperf.vocab import Status

    bad_alloc = "terminate called after throwing an instance of 'std::bad_alloc'"
    kill, abort = signal.SIGKILL, signal.SIGABRT
    oom = [_killed(kill, 1), "rank 1: " + _killed(kill, 2), _killed(abort, None, bad_alloc)]
    quoted = "ValueError: worker killed by SIGKILL (out of memory"  # the words inside another error
    other = [_killed(kill, 0), _killed(kill, None), _killed(signal.SIGSEGV, 3), _killed(abort, 1, "Assertion"), quoted]
    assert [vocab.ran_out_of_memory(e) for e in oom] == [True] * 3
    assert [vocab.ran_out_of_memory(e) for e in other] == [False] * 5
    assert not vocab.ran_out_of_memory(None) and not vocab.ran_out_of_memory("")
    cells = [make_cell(f"w{i}@b8", run_id=4, position=i, batch=8, status="failed", error=e)
             for i, e in enumerate(oom + other)]  # fmt: skip
    said = {row.workload: table.cell_text(row, "cpu:1") for row in table.build(4, cells).rows}
    assert [said[f"w{i}@b8"] for i in range(len(cells))] == ["out of memory"] * 3 + ["failed"] * 5
    kinds = [kind for _, kind, _ in table.cell_notes(cells)]
    assert kinds == [vocab.OUT_OF_MEMORY] * 3 + ["failed"] * 5
    assert outcome(ProcessMeasurement(status=Status.FAILED, error=oom[0]), CellFigures(status=Status.FAILED)) == oom[0]
