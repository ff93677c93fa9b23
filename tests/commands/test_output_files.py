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
    from dlperf.commands.output import write_file

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


# ----------------------------------------------------------------------------------------------------------------------
# No output over a store (a user's `report -o x.db` replaced their measurements with HTML and said "wrote x.db")

WRITERS = {
    "report": ["report"],
    "export": ["export"],
    "export csv": ["export", "--format", "csv"],
    "plot": ["plot", "scaling"],
}


def refused(capsys, *args: str) -> str:
    """The one line `dlperf ARGS` refused with (exit code 2)."""
    from dlperf.cli import main

    assert main(list(args)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("dlperf: error:"), err
    return err


def another_name(db: Path, how: str) -> Path:
    """The store `db` under another name: a symlink, a hard link, a path through its directory's `.`, or itself."""
    other = db.parent / f"{how}.db"
    if how == "symlink":
        other.symlink_to(db.name)
    elif how == "hardlink":
        os.link(db, other)
    elif how == "dotted":
        return db.parent / "." / db.name
    return db if how == "itself" else other


NAMES = [*((w, "itself") for w in WRITERS), *(("export csv", h) for h in ("symlink", "hardlink", "dotted"))]


@pytest.mark.parametrize(("writer", "how"), NAMES)
def test_no_command_writes_its_output_over_its_own_store(tmp_path, report_db, capsys, writer, how):
    before = report_db.read_bytes()
    out = another_name(report_db, how)
    err = refused(capsys, *WRITERS[writer], "--db", str(report_db), "-o", str(out))
    assert f"-o {str(out)!r} is the store this command reads" in err and "would destroy it" in err
    assert "--format" not in err  # nothing invites writing it anyway
    assert report_db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({report_db.name, out.name})  # no temporary left


@pytest.mark.parametrize("writer", ["report", "plot"])
def test_no_command_writes_over_any_sqlite_file_nor_its_stores_journal(tmp_path, report_db, capsys, writer):
    other = tmp_path / "other.sqlite"
    other.write_bytes(report_db.read_bytes()[:4096])  # a database by its header, whatever its name
    err = refused(capsys, *WRITERS[writer], "--db", str(report_db), "-o", str(other))
    assert f"-o {str(other)!r} is a SQLite database" in err
    assert other.read_bytes() == report_db.read_bytes()[:4096]
    wal = f"{report_db}-wal"  # where SQLite would look for the store's unwritten pages
    assert "a file SQLite keeps for the store" in refused(capsys, *WRITERS[writer], "--db", str(report_db), "-o", wal)
    assert not Path(wal).exists()


def test_the_store_refused_is_told_apart_from_a_text_file_of_that_name(tmp_path, report_db, capsys):
    """A file that merely starts like text is written over as before; only a database's header refuses it."""
    from dlperf.cli import main

    out = tmp_path / "old.csv"
    out.write_text("SQLite format 2 is not a database\n")
    assert main(["export", "--db", str(report_db), "-o", str(out)]) == 0
    assert out.read_text().startswith("run_id,")


def test_export_to_a_new_database_name_does_not_invite_format(tmp_path, report_db, capsys):
    """`export -o x.db` was refused with "give --format to write it anyway": a text file where a store belongs."""
    err = refused(capsys, "export", "--db", str(report_db), "-o", str(tmp_path / "new.db"))
    assert "not .db" in err and "--format" not in err
    assert "--format" in refused(capsys, "export", "--db", str(report_db), "-o", str(tmp_path / "x.txt"))


@pytest.mark.parametrize("name", ["r.pdf", "r.png", "r.txt", "report"])
def test_report_writes_html_files_only(tmp_path, report_db, capsys, name):
    """`report -o r.pdf` wrote HTML into a .pdf, which no PDF reader opens."""
    err = refused(capsys, "report", "--db", str(report_db), "-o", str(tmp_path / name))
    assert "dlperf report writes HTML; name a .html or .htm file" in err
    assert ("dlperf plot" in err) == name.endswith((".pdf", ".png"))
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize("writer", list(WRITERS))
def test_an_empty_output_name_is_said_to_be_empty(report_db, capsys, writer):
    """`report -o ''` said "-o '' is a directory" (Path('') is the current directory); export wrote to stdout."""
    err = refused(capsys, *WRITERS[writer], "--db", str(report_db), "-o", "")
    assert err == "dlperf: error: -o '' is empty: name the file to write"


def test_export_writes_no_text_under_a_databases_name_even_with_format(tmp_path, report_db, capsys):
    """`export --format csv -o new.db` wrote CSV into new.db, where `--db new.db` then found no store: the name is
    refused with --format as without it."""
    for name in ("new.db", "new.sqlite3"):
        err = refused(capsys, "export", "--db", str(report_db), "--format", "csv", "-o", str(tmp_path / name))
        assert f"not {name[3:]}" in err and "--format" not in err.split("not ")[-1]
        assert not (tmp_path / name).exists()


def test_a_name_that_is_not_utf8_is_written_as_its_escape_not_a_traceback(tmp_path, monkeypatch):
    """A store typed as `lat\\xe9n.db` (Latin-1 bytes) keeps its command line as Python reads it, a lone surrogate:
    every `dlperf report` of the store then failed with UnicodeEncodeError, whatever the locale."""
    import io
    import sys

    from dlperf.commands.output import write_file, write_stdout

    write_file(tmp_path / "r.html", "--db 'lat\udce9n.db'")
    assert (tmp_path / "r.html").read_bytes() == b"--db 'lat\\udce9n.db'"
    with open(tmp_path / "out", "wb") as raw:  # a UTF-8 terminal's or file's stdout: strict
        monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8", errors="strict"))
        write_stdout("lat\udce9n.db\n", "export")
    assert (tmp_path / "out").read_bytes() == b"lat\\udce9n.db\n"


def test_a_name_that_is_not_utf8_is_printed_as_typed_on_a_strict_utf8_stream(tmp_path):
    """Under a UTF-8 locale (stdout strict), `dlperf run --db $'lat\\xe9n.db'` stored its run and then failed at its
    "stored as run" line, `list --runs` and `compare` of the store too: every print, not only an -o file's."""
    import io

    from dlperf.cli import encodable

    with open(tmp_path / "out", "wb") as raw:
        stream = io.TextIOWrapper(raw, encoding="utf-8", errors="strict")
        encodable(stream)
        print("--db 'lat\udce9n.db' µs", file=stream)
        stream.flush()
        assert (tmp_path / "out").read_bytes() == b"--db 'lat\xe9n.db' \xc2\xb5s\n"  # the byte typed; UTF-8 else
        stream.detach()
