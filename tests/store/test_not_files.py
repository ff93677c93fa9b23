"""A --db that names something other than a file: a named pipe (SQLite's open waited on it for a writer, past
SIGTERM, for ever), a device (/dev/null: 'no dlperf runs in it', then 'cannot upgrade it ... (disk I/O error)' for a
run), a link to nothing whose directory is not there ('not a dlperf database or corrupt (unable to open database
file)'). Each is one line naming what it is, before SQLite opens it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dlperf.errors import UsageError
from dlperf.store import Store
from store.test_faults import env


@pytest.mark.parametrize("create", [False, True])
def test_a_device_is_not_a_database_file(create):
    with pytest.raises(UsageError, match=r"^--db '/dev/null': is a character device, not a database file$"):
        Store.open("/dev/null", create=create)


@pytest.mark.parametrize("create", [False, True])
def test_a_link_to_nothing_in_no_directory_says_where_it_leads(tmp_path, create):
    link = tmp_path / "d.db"
    link.symlink_to(tmp_path / "gone" / "d.db")
    with pytest.raises(UsageError, match=r"is a link to .*/gone/d\.db', whose directory does not exist$"):
        Store.open(link, create=create)
    assert not (tmp_path / "gone").exists()


def test_a_link_to_a_new_file_in_a_directory_that_is_there_is_made(tmp_path):
    link = tmp_path / "d.db"
    link.symlink_to(tmp_path / "real.db")
    Store.open(link, create=True).close()
    assert (tmp_path / "real.db").is_file()


@pytest.mark.parametrize("command", [["table"], ["merge", "OTHER"], ["run", "--workloads", "tiny-fcn-r"]])
def test_a_named_pipe_is_refused_and_never_waited_on(tmp_path, command):
    fifo = tmp_path / "p.db"
    os.mkfifo(fifo)
    args = [str(fifo) if a == "OTHER" else a for a in command]
    db = str(tmp_path / "t.db") if "merge" in command else str(fifo)
    proc = subprocess.run([sys.executable, "-m", "dlperf", *args, "--db", db], capture_output=True, text=True,
                          env=env(), timeout=60)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.strip().endswith("is a named pipe (FIFO), not a database file")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_store_named_by_dlperf_db_is_said_as_such(tmp_path, monkeypatch):
    """A store that $DLPERF_DB named was said as '--db ...', a flag the user never typed."""
    folder = tmp_path / "adir"
    folder.mkdir()
    monkeypatch.setenv("DLPERF_DB", str(folder))
    with pytest.raises(UsageError, match=r"^\$DLPERF_DB '.*adir': is a directory, not a database file$"):
        Store.open(str(folder), create=False)
    monkeypatch.setenv("DLPERF_DB", str(tmp_path / "other.db"))
    with pytest.raises(UsageError, match=r"^--db '.*adir': is a directory"):
        Store.open(str(folder), create=False)
