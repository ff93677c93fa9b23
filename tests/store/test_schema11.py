"""A store file written by dlperf at schema version 11 (commit 4154544, before the typed write path) still reads,
renders and merges exactly as it did then.

data/schema11.sqlite.gz was measured with that commit's code, into one file, on a 2-core CPU:

    dlperf run --workloads tiny-fcn-r --threads 1 --max-time 0.05 --min-time 0.02 --min-steps 5 --devices cpu \
        --modes fp32,bf16 --repeats 2 --profile                      # run 1: loss check, profiles, 2 processes
    dlperf run ... --nproc 2                                         # run 2: DDP, communication figures
    dlperf data synth --only mnist data && dlperf run ... --data data --loaders w0,w1 --no-loss-check   # run 3
    dlperf run --workloads tiny-lstm --threads 1 --devices cpu --timeout 1.5                           # run 4: timeout
    dlperf run ... --modes channels_last                             # run 5: unsupported
    dlperf run ... --modes compile --no-loss-check                   # run 6: torch.compile's figures

data/schema11.expected.json.gz holds what that commit's code read from it: every cell's record fields, every
measurement's status, error, sample count and sum and its detail, the profiles, the output of `dlperf table`
(text at 100 columns, json, csv, --explain) and `dlperf export` (jsonl with the samples, csv) of each run, and the
SHA-256 of `dlperf report --run all` (`normalized`). Intended changes since, each regenerated with every other render
checked unchanged: run 2's table renders (text, json, --explain) name the step its exposed communication is a share of
(ad3af0a); every run's `table --format csv` adds each device column's n and marks after the columns it had, then the
legend of its marks and its notes, a row each; the table (text, json, --explain) names the machine that measured the
run ("measured on: vm · AMD EPYC, 2 cores"), each export record its run's hostname, CPU model, cores, GPUs and dlperf
version, and the report's heading the host (a merged store holds several machines); each export record says where
a figure its processes did not measure came from (`shared_from`: run 3's loader cells, their synthetic cell's); run
3's loader recommendation is the smallest setting not measurably slower than the fastest, w0, said not enough
(cd40d41: table text, json, --explain, export's data_recommendation and recommended_loader), and its notes name a
loader cell with its row's mode ("torch fp32 · data:w1", 66a37ea); each export record holds its profile (b0bb295: run
1's); run 3's input pipeline gives a long run's samples/s, the batch over the mean step, and compares its settings so
(table text, json, --explain, the report; export's long_run_samples_per_s and data_recommendation), and every export
record the mean step's 95% interval (mean_ci_low_s, mean_ci_high_s: empty, the old file has none); the report's
best-mode view of run 6 (compile, --no-loss-check) says why it has no speed-up and that its loss was not checked
(e4cc6c2, f92f3b0: the report's hash); a cell's hover text names what disturbed it (run 6's compile cell: "? other
processes used 20% of the CPUs ...", the charts' judgement the table's: the report's hash); run 3's loader legend says
the loader alone is its samples over their time after its first batch, its enough rule the wait under 20% with the
throughput, its recommendation's JSON the synthetic step's doubts, and its csv table the input pipeline's rows (table
text, json, csv, --explain; export's data_recommendation); the report's speed-up of a disturbed step is marked `?`
as the step is, and its sections with nothing to show say of several runs that each cell is its latest run's (the
report's hash); the table marks a disturbed cell `?` as the paper view and the report do, not only one of few
samples, and its legend says so (run 6's compile cell, other processes on 20% of the CPUs: table text, csv,
--explain, and the report's hash); the table's JSON says so too, `doubtful` with its `doubts` (run 6's compile
cell: table json); each export record names its run's start, state and origin (run_started_at, run_state,
run_origin), an unsupported cell its run's framework version, and the CSV's warnings are a JSON list (every export);
each export record writes `samples_s`, the former name of `samples_per_s`, again after it, for scripts (every export).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import gzip
import hashlib
import io
import json
import math
import re
from pathlib import Path

import pytest

from dlperf.cli import main
from dlperf.store import Store

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads(gzip.decompress((DATA / "schema11.expected.json.gz").read_bytes()))


@pytest.fixture
def db(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("COLUMNS", "100")
    path = tmp_path / "schema11.sqlite"
    path.write_bytes(gzip.decompress((DATA / "schema11.sqlite.gz").read_bytes()))
    return path


def cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0, args
    return out.getvalue()


def plain(value):
    """A record's value as the expected file holds it: JSON, sub-records as their fields; a figure that is None reads
    the same as one that is not there (a record may have gained a field since)."""
    return same(json.loads(json.dumps(value, default=dataclasses.asdict)))


def same(value):
    if isinstance(value, dict):
        return {k: same(v) for k, v in value.items() if v is not None}
    return [same(v) for v in value] if isinstance(value, list) else value


def measured(m) -> dict:
    """A measurement as the expected file holds it, its detail as stored."""
    return same({"repeat": m.repeat, "status": m.status.value, "error": m.error, "duration_s": m.duration_s,
                 "n": len(m.samples), "sum": sum(m.samples), "detail": m.detail.to_json()})  # fmt: skip


def profiled(p) -> dict:
    return plain({**dataclasses.asdict(p), "figures": p.figures and {**dataclasses.asdict(p.figures), "at": None}})


def test_every_cell_measurement_and_profile_reads_as_before(db, expected):
    store = Store.open(db, create=False)
    try:
        assert [str(r.id) for r in store.runs()] == sorted(expected["runs"])
        for run in store.runs():
            want = expected["runs"][str(run.id)]
            assert {"status": run.status, "argv": run.argv, "origin": run.origin} == want["run"]  # measured here
            cells = store.cells(run.id)
            assert len(cells) == len(want["cells"])
            for cell, fields in zip(cells, want["cells"], strict=True):
                assert plain({name: getattr(cell, name) for name in fields}) == same(fields), cell.key
                assert [measured(m) for m in store.measurements(run.id, cell.key)] == same(
                    want["measurements"][cell.key]
                )
            assert {k: profiled(p) for k, p in store.profiles(run.id).items()} == same(want["profiles"])
    finally:
        store.close()


def test_the_figures_are_the_ones_measured(db, expected):
    """A few figures by name, so a failure above reads against something concrete."""
    runs = expected["runs"]
    [fp32, bf16] = runs["1"]["cells"]
    assert (fp32["status"], fp32["n"], fp32["params"]) == ("ok", 152, 26874)
    assert bf16["loss_check"]["ok"] is True and bf16["framework_version"] == "2.13.0+cpu"
    [ddp] = runs["2"]["cells"]
    assert (ddp["nproc"], ddp["parallel"], ddp["comm"]["gradient_bytes"]) == (2, "ddp", 107496)
    loader = runs["3"]["cells"][1]
    assert (loader["loader"], loader["data"]["setting"], loader["data"]["dataset"]) == ("w0", "w0", "MNIST")
    assert [c["status"] for c in (runs["4"]["cells"][0], runs["5"]["cells"][0])] == ["timeout", "unsupported"]
    assert runs["6"]["cells"][0]["compile"]["finished"] is True
    [timed_out] = runs["4"]["measurements"]["tiny-lstm|torch|cpu|1|fp32"]
    assert "stderr_tail" in timed_out["detail"] and timed_out["n"] == 0


def test_table_export_and_report_render_as_before(db, expected, tmp_path):
    for run_id, want in expected["runs"].items():
        for fmt in ("text", "json", "csv"):
            assert cli("table", "--db", str(db), "--run", run_id, "--format", fmt) == want[f"table_{fmt}"]
        assert cli("table", "--db", str(db), "--run", run_id, "--explain") == want["table_explain"]
        assert exported_as(export(db, run_id, tmp_path), want)
    html = tmp_path / "r.html"
    cli("report", "--db", str(db), "--run", "all", "-o", str(html))
    assert hashlib.sha256(normalized(html.read_text()).encode()).hexdigest() == expected["report_html_sha256"]


def normalized(html: str) -> str:
    """The report without what depends on when and where it was written: its time and file name, and the
    relative path from it to the profiles' traces."""
    html = re.sub(r" at [0-9T:+-]+ from \S+\. ", " at TIME from DB. ", html)
    return re.sub(r'href="(\.\./)+', 'href="', html)


def exported_as(got: tuple[str, str], want: dict) -> bool:
    """`export`'s jsonl and csv against the expected file's: the same records and columns, each figure the same to
    1e-12 of itself. The export sums its figures again (a profile's category shares), and Python 3.12's sum() adds
    floats with compensation where 3.11's did not: they differ in the last digit."""
    records = [[json.loads(line) for line in text.splitlines()] for text in (got[0], want["export_jsonl"])]
    rows = [[_numbers(row) for row in csv.reader(io.StringIO(text))] for text in (got[1], want["export_csv"])]
    return close(*records) and close(*rows)


def close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _numbers(row: list[str]) -> list:
    """A csv row, each cell that reads as a float read so (a JSON cell as JSON), the rest as written."""
    out = []
    for cell in row:
        try:
            out.append(json.loads(cell) if cell[:1] in "{[" else float(cell) if "." in cell or "e" in cell else cell)
        except ValueError:  # a word with an e in it
            out.append(cell)
    return out


def export(db: Path, run_id: str, tmp_path: Path) -> tuple[str, str]:
    jsonl, csv = tmp_path / "e.jsonl", tmp_path / "e.csv"
    cli("export", "--db", str(db), "--run", run_id, "--format", "jsonl", "--samples", "-o", str(jsonl))
    cli("export", "--db", str(db), "--run", run_id, "--format", "csv", "-o", str(csv))
    return jsonl.read_text(), csv.read_text()


def test_merge_of_the_old_file_copies_every_run_whole(db, expected, tmp_path):
    target = tmp_path / "merged.sqlite"
    assert cli("merge", str(db), "--db", str(target)).count(" -> run ") == len(expected["runs"])
    store = Store.open(target, create=False)
    try:
        for run in store.runs():
            want = expected["runs"][str(run.id)]
            assert run.origin.run_id == run.id
            for cell, fields in zip(store.cells(run.id), want["cells"], strict=True):
                assert plain({name: getattr(cell, name) for name in fields}) == same(fields), cell.key
                assert [measured(m) for m in store.measurements(run.id, cell.key)] == same(
                    want["measurements"][cell.key]
                )
    finally:
        store.close()
    for run_id, want in expected["runs"].items():
        assert exported_as(as_measured_here(export(target, run_id, tmp_path), f"{db.resolve()} run {run_id}"), want)


def as_measured_here(got: tuple[str, str], origin: str) -> tuple[str, str]:
    """A merged run's export as the old file's own: its records name the file and run it was measured in."""
    records = [json.loads(line) for line in got[0].splitlines()]
    assert {r["run_origin"] for r in records} == {origin}
    rows = list(csv.reader(io.StringIO(got[1])))
    column = rows[0].index("run_origin")
    assert {row[column] for row in rows[1:]} == {origin}
    text = io.StringIO()
    csv.writer(text).writerows([rows[0], *([*row[:column], "", *row[column + 1 :]] for row in rows[1:])])
    return "".join(json.dumps({**r, "run_origin": None}) + "\n" for r in records), text.getvalue()


def test_reading_the_old_file_leaves_it_as_it_was_and_the_first_write_upgrades_it(db, tmp_path):
    """`table`, `report`, `export` and `list --runs` upgraded an old file in place: a read wrote to the user's file
    (and an older dlperf could read it no more). They read it as it is; the first command that writes upgrades it."""
    import sqlite3

    from dlperf.store.schema import SCHEMA_VERSION

    before = db.read_bytes()
    cli("table", "--db", str(db), "--run", "2")
    cli("list", "--runs", "--db", str(db))
    cli("report", "--db", str(db), "--run", "all", "-o", str(tmp_path / "r.html"))
    export(db, "1", tmp_path)
    assert db.read_bytes() == before
    store = Store.open(db, create=False)
    try:
        assert store.version == 11 and store.runs()  # read as it is
        store.set_run_status(1, "complete")  # a write: the file is upgraded first
        assert store.version == SCHEMA_VERSION
        assert {r["token"] for r in store.rows("runs")} == {None} and "token" not in store.mark(1)  # none made up
    finally:
        store.close()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    finally:
        conn.close()
