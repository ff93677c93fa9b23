"""A store whose name starts with '-' (`--db=-d2.db`, as dlperf's own error asks it written): every command dlperf
printed for it, the resume (`Continue with: dlperf run --resume --db -d2.db`), the table and report of the
"stored as run" line, the compare hint, was refused when run as printed ("--db needs a value"). Each now names the
store as `--db=-d2.db` (a positional file as ./-d2.db), and reads back, through dlperf's own parser, as that store."""

from __future__ import annotations

import shlex

import pytest

from dlperf.commands import build_parser
from dlperf.commands.run import see_it, where_stored
from dlperf.report.compare_side import compare_hint
from dlperf.store import Store
from dlperf.store.location import db_flag, path_word, ray_resume_command, resume_command, unreadable
from report.runs import BASE, MACHINE, SLOWER, write_run

DASH = "-d2.db"


def db_of(command: str) -> str:
    """The store the printed command names, as `dlperf` parses it (argparse exits 2 where it refuses)."""
    words = shlex.split(command.split("`")[0] if "`" in command else command)
    return build_parser().parse_known_args(words[words.index("dlperf") + 1 :])[0].db


@pytest.fixture
def two_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = Store.open(DASH, create=True)
    for cells in (BASE, SLOWER):
        write_run(store, cells, MACHINE)
    store.close()


def test_every_command_printed_for_a_dash_store_names_it_as_dlperf_takes_it(two_runs, monkeypatch):
    monkeypatch.setattr("dlperf.store.location.program", lambda: "dlperf")
    stored, hint = where_stored(DASH, 2).splitlines()
    shown, drawn = stored.split(": ", 1)[1].split(" shows it again, ")
    compared = hint.split(": ", 1)[1].split(" compares them")[0]
    printed = [resume_command(DASH), see_it(DASH, 2).removeprefix("See it with: "), shown, drawn.removesuffix(
        " draws it"), compared, ray_resume_command("10.0.0.1:6379", DASH)]  # fmt: skip
    assert [db_of(command) for command in printed] == [DASH] * len(printed), printed
    assert all("--db=-d2.db" in command for command in printed)
    assert compare_hint(DASH, 2) == [hint]


def test_a_plain_store_is_named_as_before():
    assert resume_command("r.db").endswith(" run --resume --db r.db")
    assert db_flag("a b.db") == "--db 'a b.db'" and db_flag("-a b.db") == "'--db=-a b.db'"
    assert path_word("-x.db") == "./-x.db" and path_word("x.db") == "x.db"


def test_the_sqlite3_command_of_a_damaged_dash_store_takes_it_as_its_file():
    import sqlite3

    said = unreadable(sqlite3.DatabaseError("database disk image is malformed"), DASH)
    assert "`sqlite3 ./-d2.db 'PRAGMA integrity_check'`" in said
