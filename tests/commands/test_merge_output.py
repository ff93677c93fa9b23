"""`dlperf merge a.db b.db -o all.db`: -o names the database to copy into, as --db does (a user's first guess was
refused: 'unrecognized arguments: -o all.db')."""

import json

from conftest import dlperf, one_line_error
from dlperf.store import Store
from report.runs import BASE, MACHINE, OTHER_MACHINE, SLOWER, make_db, write_run


def test_o_names_the_database_merged_into(tmp_path):
    a, b, into = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "all.db"
    make_db(a, BASE)
    make_db(b, SLOWER, fingerprint=OTHER_MACHINE)  # a second machine, simulated: its fingerprint made up
    proc = dlperf("merge", str(a), str(b), "-o", str(into))
    assert proc.returncode == 0, proc.stderr
    listed = dlperf("list", "--runs", "--format", "json", db=into)
    assert listed.returncode == 0, listed.stderr
    machines = [r["machine"] for r in json.loads(listed.stdout)]
    assert machines == [
        "alpha · Xeon Test, 8 cores",
        "beta · EPYC Test, 64 cores",
    ]  # its cores: since 'list --runs' names them


def test_o_and_db_together_are_one_line(tmp_path):
    make_db(tmp_path / "a.db", BASE)
    proc = dlperf("merge", str(tmp_path / "a.db"), "-o", str(tmp_path / "x.db"), "--db", str(tmp_path / "y.db"))
    one_line_error(proc, "-o", "--db", "give one")
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "y.db").exists()


def test_list_runs_names_each_machines_cores(tmp_path):
    """Before, 'alpha · Xeon Test' alone: two containers of one host and CPU given 2 and 8 cores read alike."""
    db = tmp_path / "two.db"
    make_db(db, BASE)
    store = Store.open(db, create=False)
    write_run(store, SLOWER, {**MACHINE, "cores": {"cores": 2}})  # the same host and CPU, limited to 2 cores
    store.close()
    text = dlperf("list", "--runs", db=db, env={"COLUMNS": "300"}).stdout
    assert "alpha · Xeon Test, 8 cores" in text and "alpha · Xeon Test, 2 cores" in text


def test_a_target_named_with_o_is_named_so_in_errors(tmp_path):
    """`merge a.db -o nodir/all.db` said "--db 'nodir/all.db': directory 'nodir' does not exist", a flag not given."""
    make_db(tmp_path / "a.db", BASE)
    missing = tmp_path / "nodir" / "all.db"
    proc = dlperf("merge", str(tmp_path / "a.db"), "-o", str(missing))
    one_line_error(proc, f"-o {str(missing)!r}", "does not exist")
    assert "--db" not in proc.stderr
    itself = dlperf("merge", str(tmp_path / "a.db"), "-o", str(tmp_path / "a.db"))
    one_line_error(itself, f"it is the target database itself (-o {str(tmp_path / 'a.db')!r})")
