"""A store another program switched to WAL mode, read where SQLite may not write beside it (a read-only directory,
a shared results folder): it read as 'not a dlperf database or corrupt (attempt to write a readonly database)', as
SQLite could not make its -shm file; it is read as it is, unchanging, and where a -wal file holds changes not yet in
it, one line says so."""

from __future__ import annotations

import shutil
import sqlite3

from conftest import one_line_error
from dlperf.store import Store
from store.test_faults import dlperf, modes_apply  # noqa: F401 - modes_apply is a fixture
from store.test_store import new_run


def wal_store(folder):
    folder.mkdir()
    store = Store.open(folder / "w.db", create=True)
    new_run(store)
    store.close()
    conn = sqlite3.connect(folder / "w.db")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    return folder / "w.db"


def test_a_wal_store_in_a_read_only_directory_is_read(tmp_path, modes_apply):  # noqa: F811
    db = wal_store(tmp_path / "shared")
    db.parent.chmod(0o555)
    try:
        listed = dlperf("table", "--db", db, preexec=modes_apply)
    finally:
        db.parent.chmod(0o755)
    assert listed.returncode == 0 and "fcn-r" in listed.stdout, listed.stderr
    assert sorted(p.name for p in db.parent.iterdir()) == ["w.db"]


def test_a_wal_store_with_changes_it_cannot_read_says_so(tmp_path, modes_apply):  # noqa: F811
    db = wal_store(tmp_path / "live")
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE runs SET status = 'complete'")
    writer.commit()
    (tmp_path / "shared").mkdir()
    for name in ("w.db", "w.db-wal"):  # the files as a copy of the folder takes them, changes not yet in w.db
        shutil.copy(tmp_path / "live" / name, tmp_path / "shared" / name)
    writer.close()
    (tmp_path / "shared").chmod(0o555)
    try:
        said = dlperf("table", "--db", tmp_path / "shared" / "w.db", preexec=modes_apply)
    finally:
        (tmp_path / "shared").chmod(0o755)
    one_line_error(said, "in WAL mode, with changes in", "w.db-wal", "open it once where it is writable")
