"""A store SQLite could not open for a reason that is not the file's: a --db that is a loop of symbolic links was
"not a dlperf database or corrupt (unable to open database file)" to `run` and "no such database" to `table`; a store
with a rollback journal a crashed writer left (a hot journal) in a place that may not be written was "not a dlperf
database or corrupt (attempt to write a readonly database)". Each now says what is wrong."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from conftest import one_line_error
from dlperf.errors import UsageError
from dlperf.store import Store
from store.test_faults import dlperf, modes_apply  # noqa: F401 - modes_apply is a fixture

LOOP = r"its symbolic links go round in a loop \(Too many levels of symbolic links\), never reaching a file"


@pytest.mark.parametrize("create", [False, True])
def test_a_loop_of_links_is_said_as_one(tmp_path, create):
    (tmp_path / "a.db").symlink_to(tmp_path / "b.db")
    (tmp_path / "b.db").symlink_to(tmp_path / "a.db")
    with pytest.raises(UsageError, match=rf"^--db '.*a\.db': {LOOP}: point the link at the database file$"):
        Store.open(tmp_path / "a.db", create=create)
    with pytest.raises(UsageError, match=LOOP):  # a loop on the way to it, as well
        Store.open(tmp_path / "a.db" / "x.db", create=create)


def hot_journal(db) -> None:
    """A writer killed mid-transaction, its changes spilled into the file: the journal it leaves is hot."""
    code = (f"import os, sqlite3; c = sqlite3.connect({str(db)!r}, isolation_level=None); "
            "c.execute('PRAGMA cache_size = 1'); c.execute('BEGIN IMMEDIATE'); "
            "c.execute('UPDATE measurements SET rowid = rowid'); os._exit(0)")  # fmt: skip
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert (db.parent / f"{db.name}-journal").stat().st_size > 0


@pytest.mark.parametrize("read_only", ["file", "folder"])
def test_a_hot_journal_that_cannot_be_rolled_back_is_said_as_such(report_db, tmp_path, modes_apply, read_only):  # noqa: F811
    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "h.db"
    db.write_bytes(report_db.read_bytes())
    hot_journal(db)
    locked = db if read_only == "file" else folder
    locked.chmod(0o444 if read_only == "file" else 0o555)
    try:
        said = dlperf("table", "--db", db, preexec=modes_apply)
    finally:
        locked.chmod(0o644 if read_only == "file" else 0o755)
    why = "the file cannot be written (Permission denied)" if read_only == "file" else "is not writable (permission"
    one_line_error(said, "holds an unfinished transaction, in", "h.db-journal", "must roll back", why)
    assert "corrupt" not in said.stderr
    listed = dlperf("table", "--db", db)  # writable again: rolled back, and read
    assert listed.returncode == 0 and "fcn-r" in listed.stdout, listed.stderr
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)
