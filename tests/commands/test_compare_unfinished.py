"""`dlperf compare` of an unfinished B says what finishes it as `dlperf table` does, naming B's store: it said "resume
it (dlperf run --resume)", which opens ./dlperf.db or $DLPERF_DB, another store (or another run of it) than the B
compared. A cell B planned and has not measured yet is said so, not "only in B". Stores built with the Store API."""

import shlex

from commands.test_table_unfinished import planned_run
from dlperf.cli import main
from dlperf.store import Store
from report.runs import BASE, make_db


def test_an_unfinished_b_names_the_command_that_resumes_its_own_store(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # ./dlperf.db: no store, as in the CI recipe's folder
    a, b = tmp_path / "base.db", tmp_path / "new part.db"
    make_db(a, BASE)
    store = Store.open(b, create=True)
    planned_run(store, 1, "interrupted")  # fcn-r measured; alexnet-r and resnet-56 not yet
    store.close()
    code = main(["compare", str(a), str(b)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 2, out
    resume = f"dlperf run --resume --db {shlex.quote(str(b))}"
    assert f"`{resume}` measures them, then compare again: that is not a pass" in out
    assert "resume it (dlperf run --resume)" not in out
    assert "only in B, not measured yet: resnet-56 torch cpu:1 fp32" in out, out


def test_b_sharing_no_cell_yet_names_it_too(tmp_path, capsys):
    a, b = tmp_path / "base.db", tmp_path / "new.db"
    make_db(a, {"alexnet-r": BASE["alexnet-r"]})
    store = Store.open(b, create=True)
    planned_run(store, 0, "interrupted")  # nothing measured yet
    store.close()
    assert main(["compare", str(a), str(b)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"`dlperf run --resume --db {b}` measures them, then compare again" in err, err
