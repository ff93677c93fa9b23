"""`dlperf compare` of two runs: the differences it lists are of what both runs used (a user read "jax version 0.10.2
-> none; tensorflow version none -> 2.21.0" of two PyTorch runs whose frameworks list differed), and a run against
itself is refused in one line (it printed a whole table, then exited 2)."""

from __future__ import annotations

from conftest import dlperf, one_line_error
from dlperf.store import Store
from report.runs import BASE, MACHINE, SLOWER, write_run

WITH_JAX = {**MACHINE, "frameworks": {"torch": "2.13.0", "jax": "0.10.2"}}
WITH_TF = {**MACHINE, "frameworks": {"torch": "2.13.0", "tensorflow": "2.21.0"}}
NEWER_TORCH = {**MACHINE, "frameworks": {"torch": "2.14.1", "tensorflow": "2.21.0"}}


def runs(db, *fingerprints) -> None:
    store = Store.open(db, create=True)
    try:
        for fingerprint, cells in zip(fingerprints, (BASE, SLOWER, BASE), strict=False):
            write_run(store, cells, fingerprint)
    finally:
        store.close()


def test_frameworks_one_run_did_not_use_are_no_difference(tmp_path):
    db = tmp_path / "c.db"
    runs(db, WITH_JAX, WITH_TF, NEWER_TORCH)  # every cell of all three is a PyTorch cell
    same = dlperf("compare", "1", "2", "--format", "md", db=db)
    assert same.returncode in (0, 1), same.stderr
    assert "differences" not in same.stdout and "jax" not in same.stdout and "tensorflow" not in same.stdout
    newer = dlperf("compare", "1", "3", "--format", "md", db=db)
    assert "- differences: torch version 2.13.0 -> 2.14.1" in newer.stdout.splitlines()


def test_a_run_against_itself_is_refused_in_one_line(tmp_path):
    db = tmp_path / "c.db"
    runs(db, MACHINE, MACHINE)
    for a, b in (("1", "1"), ("2", str(db)), (f"{db}:1", "1")):
        said = dlperf("compare", a, b, db=db)
        one_line_error(said, "are both run", "a run compared with itself tells nothing")
        assert said.stdout == ""
