"""`dlperf merge a.db b.db -o all.db`: -o names the database to copy into, as --db does (a user's first guess was
refused: 'unrecognized arguments: -o all.db')."""

import json

from conftest import dlperf, one_line_error
from report.runs import BASE, OTHER_MACHINE, SLOWER, make_db


def test_o_names_the_database_merged_into(tmp_path):
    a, b, into = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "all.db"
    make_db(a, BASE)
    make_db(b, SLOWER, fingerprint=OTHER_MACHINE)  # a second machine, simulated: its fingerprint made up
    proc = dlperf("merge", str(a), str(b), "-o", str(into))
    assert proc.returncode == 0, proc.stderr
    listed = dlperf("list", "--runs", "--format", "json", db=into)
    assert listed.returncode == 0, listed.stderr
    assert [r["machine"] for r in json.loads(listed.stdout)] == ["alpha · Xeon Test", "beta · EPYC Test"]


def test_o_and_db_together_are_one_line(tmp_path):
    make_db(tmp_path / "a.db", BASE)
    proc = dlperf("merge", str(tmp_path / "a.db"), "-o", str(tmp_path / "x.db"), "--db", str(tmp_path / "y.db"))
    one_line_error(proc, "-o", "--db", "give one")
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "y.db").exists()
