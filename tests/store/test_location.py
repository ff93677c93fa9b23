def test_the_command_named_to_go_on_is_one_the_shell_finds(tmp_path, monkeypatch):
    """`make run` calls .venv/bin/dlperf without activating the environment: its "Continue with: dlperf run --resume"
    was "command not found". The script as called is named where PATH finds no dlperf or another one."""
    from dlperf.store.location import program, resume_command

    script = tmp_path / "venv" / "bin" / "dlperf"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("DLPERF_DB", raising=False)
    monkeypatch.setattr("sys.argv", [str(script), "run"])
    assert program() == str(script) and resume_command("r.db") == f"{script} run --resume --db r.db"
    monkeypatch.setenv("PATH", str(script.parent))  # an activated environment: its name alone
    assert program() == "dlperf" and resume_command("r.db") == "dlperf run --resume --db r.db"
    monkeypatch.setattr("sys.argv", ["/x/site-packages/dlperf/__main__.py"])  # python -m dlperf
    assert program() == "dlperf"
    monkeypatch.setenv("PATH", "/nonexistent")  # ... where PATH finds none: the same interpreter, -m dlperf
    monkeypatch.setattr("sys.executable", "/v/bin/python")
    assert program() == "/v/bin/python -m dlperf"
    link = tmp_path / "dl"  # a link to the script, called by its own name
    link.symlink_to(script)
    monkeypatch.setattr("sys.argv", [str(link), "run"])
    assert program() == str(link)
    monkeypatch.setattr("sys.argv", ["/home/me/train.py"])  # a program calling the API: its own name is no dlperf
    assert program() == "dlperf"


def test_a_path_longer_than_sqlite_opens_is_said_so(tmp_path):
    """A --db of 505 bytes or more (a relative x.db in a deep folder) was "not a dlperf database or corrupt (unable to
    open database file)" of a file that did not exist: SQLite opens no longer path, its journal's 8 bytes longer."""
    import sqlite3

    from dlperf.store.location import SQLITE_LONGEST_PATH, unreachable

    folder = tmp_path
    while len(str(folder)) < SQLITE_LONGEST_PATH - 40:
        folder = folder / ("d" * 50)
    folder.mkdir(parents=True)
    longest = str(folder) + "/"
    fits = longest + "x" * (SQLITE_LONGEST_PATH - len(longest) - 3) + ".db"
    over = fits[:-3] + "x.db"
    assert (len(fits), len(over)) == (SQLITE_LONGEST_PATH, SQLITE_LONGEST_PATH + 1)
    conn = sqlite3.connect(fits)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    assert unreachable(fits) is None
    said = f"its full path is {len(over)} bytes long, more than SQLite opens (504): give a shorter one"
    assert unreachable(over) == said


def test_a_store_name_too_long_for_the_files_beside_it_is_refused_in_one_line(tmp_path):
    """A --db of 250 bytes, legal, was a traceback (OSError: File name too long: '...db-journal'), and one of 245 lost
    the measurement the store refused ("it could not be kept either"): refused before anything runs, naming the
    limit; a read needs only the journal's name to fit."""
    import pytest

    from dlperf.errors import UsageError
    from dlperf.store import Store
    from dlperf.store.location import check_path, name_too_long

    def named(n: int) -> str:
        return str(tmp_path / ("n" * (n - 3) + ".db"))

    assert name_too_long(named(241), create=True) is None and name_too_long(named(247), create=False) is None
    assert name_too_long(named(242), create=True) == (
        "its file name is 242 bytes long: the file that keeps what the store refuses, NAME.unsaved.jsonl, would be "
        "256, past the 255 bytes this file system allows a name; give a name of at most 241 bytes"
    )
    assert name_too_long(named(248), create=False).startswith(
        "its file name is 248 bytes long: SQLite's journal beside it, NAME-journal, would be 256, past the 255 bytes"
    )
    for n, create in ((250, False), (250, True), (245, True)):
        with pytest.raises(UsageError, match=rf"^--db '.*': its file name is {n} bytes long: .*give a name of at most"):
            Store.open(named(n), create=create)
    assert not list(tmp_path.iterdir())
    check_path(named(241), create=True)  # the longest allowed
