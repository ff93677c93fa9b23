"""The files dlperf writes for a user take the user's umask, as other tools' do (issue 31: the report was written
0600, the mode of the temporary file it is renamed from): report, export, plot, traces and `data synth`."""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import dlperf


@contextmanager
def umask(mask: int):
    """The umask the child dlperf inherits."""
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_report_export_and_plot_files_take_the_umask(tmp_path, report_db):
    mask = 0o027  # not the usual 022: a mode that is right by chance would not show
    out = {name: tmp_path / name for name in ("r.html", "e.csv", "p.svg")}
    with umask(mask):
        for args in (["report", "-o", str(out["r.html"])], ["export", "--format", "csv", "-o", str(out["e.csv"])],
                     ["plot", "scaling", "-o", str(out["p.svg"])]):  # fmt: skip
            done = dlperf(*args, db=report_db)
            assert done.returncode == 0, done.stderr
    assert {name: oct(mode(path)) for name, path in out.items()} == dict.fromkeys(out, oct(0o666 & ~mask))


def test_a_file_written_over_keeps_taking_the_umask(tmp_path):
    from dlperf.commands.common import write_file

    out = tmp_path / "f.txt"
    with umask(0o002):
        write_file(out, "one")
        write_file(out, "two")
    assert (out.read_text(), mode(out)) == ("two", 0o664)


def test_synthetic_datasets_take_the_umask(tmp_path):
    from dlperf.cli import main

    with umask(0o022):
        assert main(["data", "synth", str(tmp_path / "d"), "--only", "ptb,mnist"]) == 0
    found = {p: mode(p) for p in (tmp_path / "d").rglob("*")}
    assert len(found) > 5
    assert {oct(m) for p, m in found.items()} == {oct(0o755), oct(0o644)}
    assert all(m == (0o755 if p.is_dir() else 0o644) for p, m in found.items())


def test_export_writes_the_format_its_file_names(tmp_path, report_db):
    """`export -o out.csv` wrote JSON lines into a .csv file: the suffix now names the format where --format does not,
    and a --format that contradicts it is one line."""
    csv_out, jsonl_out = tmp_path / "e.csv", tmp_path / "e.jsonl"
    assert dlperf("export", "-o", str(csv_out), db=report_db).returncode == 0
    assert csv_out.read_text().startswith("run_id,")
    assert dlperf("export", "-o", str(jsonl_out), db=report_db).returncode == 0
    assert jsonl_out.read_text().startswith('{"run_id"')
    from conftest import one_line_error

    one_line_error(dlperf("export", "--format", "jsonl", "-o", str(tmp_path / "x.csv"), db=report_db),
                   "-o", "x.csv", "--format jsonl")  # fmt: skip
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("name", ["x.json", "x.parquet", "x.txt"])
def test_export_refuses_a_file_whose_suffix_names_neither_format_unless_told(tmp_path, report_db, name):
    """`export -o x.json` wrote JSON Lines, which `json.load` then refused, and `x.parquet` was not Parquet."""
    from conftest import one_line_error

    one_line_error(dlperf("export", "-o", str(tmp_path / name), db=report_db), "-o", name, ".csv", ".jsonl")
    assert not (tmp_path / name).exists()
    told = dlperf("export", "--format", "jsonl", "-o", str(tmp_path / name), db=report_db)
    assert told.returncode == 0 and (tmp_path / name).read_text().startswith('{"run_id"')
    assert told.stdout.startswith(f"wrote {tmp_path / name} (") and ", jsonl)" in told.stdout
