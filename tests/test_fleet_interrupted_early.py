"""`dlperf run --ray` interrupted before any node began (commands/run_fleet.py, fleet.py), without a cluster: what is
kept and how to go on said as a later interrupt says it, never a bare "dlperf: interrupted"."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dlperf import fleet
from dlperf.commands.run_fleet import run_fleet
from dlperf.errors import StoreFault
from dlperf.store import Store, now
from dlperf.store.records import Origin
from test_fleet_lost import lost_sweep
from test_ray import NODES


def interrupted(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.fixture
def early(monkeypatch):
    """Ctrl-C as Ray connects (at 2 s), or as `--resume --ray` asks the nodes their kind (at 2-5 s)."""
    monkeypatch.setattr(fleet, "check_flags", lambda args: None)
    monkeypatch.setattr(fleet, "run", interrupted)


def stopped(resume: bool, db) -> int:
    try:
        return run_fleet(SimpleNamespace(ray="auto", resume=resume), str(db))
    except KeyboardInterrupt:
        pytest.fail("the interrupt went on to the CLI, which said a bare 'dlperf: interrupted'")


def test_a_sweep_interrupted_as_ray_connects_says_nothing_is_stored(early, tmp_path, capsys):
    """It printed only 'dlperf: interrupted'."""
    assert stopped(False, tmp_path / "f.db") == 130
    assert capsys.readouterr().err == (
        "dlperf: interrupted before any node's plan arrived: nothing is stored; run the same command to start again\n"
    )


def test_a_resume_interrupted_before_its_nodes_began_names_its_runs_and_the_resume(early, tmp_path, capsys):
    """It printed only 'dlperf: interrupted', no resume command, though the runs were unfinished."""
    db = tmp_path / "f.db"
    lost_sweep(db).close()
    assert stopped(True, db) == 130
    assert capsys.readouterr().err == (
        "dlperf: interrupted; run 1 keeps the processes that finished (dlperf list --runs says what each has left). "
        f"Continue with: dlperf run --resume --ray auto --db {db}\n"
    )


def test_a_run_resumed_but_not_yet_followed_is_left_interrupted(tmp_path, monkeypatch):
    """Ctrl-C after `--resume --ray` took run 1 (running, leased) and before its node's sweep was followed left it
    running under a driver now gone."""
    db = tmp_path / "f.db"
    lost_sweep(db).close()

    def resume_nodes(ray, store, chosen, argv, address):
        store.acquire(1)
        store.set_run_status(1, "running")
        raise KeyboardInterrupt

    monkeypatch.setattr(fleet, "resume_nodes", resume_nodes)
    ray = SimpleNamespace(nodes=lambda: NODES, shutdown=lambda: None)
    with pytest.raises(KeyboardInterrupt):
        fleet._run(ray, SimpleNamespace(resume=True, ray="auto"), ["run", "--resume"], str(db), None, None)
    store = Store.open(db, create=False)
    try:
        assert store.run(1).status == "interrupted" and store.measured_by(1) is None
    finally:
        store.close()


def test_a_run_that_cannot_be_left_interrupted_leaves_the_others_given_back(tmp_path, monkeypatch, capsys):
    """One run's status that could not be written (a full disk: StoreFault) ended the driver's last loop: the next
    run stayed running under its lease, the store was never closed, and the StoreFault took the place of the error
    that ended the sweep."""
    db = tmp_path / "f.db"
    lost_sweep(db).close()
    store = Store.open(db, create=False)
    rows = store.check_run(1)
    with store.transaction():  # run 2: a second node's
        store.insert_copy(rows.run, rows.cells, rows.measurements, Origin(f"ray:{'b' * 56}", 1, now()))
    store.close()

    def resume_nodes(ray, store, chosen, argv, address):
        for run_id in (1, 2):
            store.acquire(run_id)
            store.set_run_status(run_id, "running")
        raise RuntimeError("the sweep's own error")

    written = Store.set_run_status

    def set_run_status(store, run_id, status):
        if run_id == 1 and status == "interrupted":
            raise StoreFault("database or disk is full")
        written(store, run_id, status)

    monkeypatch.setattr(fleet, "resume_nodes", resume_nodes)
    monkeypatch.setattr(Store, "set_run_status", set_run_status)
    ray = SimpleNamespace(nodes=lambda: NODES, shutdown=lambda: None)
    with pytest.raises(RuntimeError, match="the sweep's own error"):
        fleet._run(ray, SimpleNamespace(resume=True, ray="auto"), ["run", "--resume"], str(db), None, None)
    assert capsys.readouterr().err == "dlperf: warning: run 1 could not be left interrupted: database or disk is full\n"
    store = Store.open(db, create=False)
    try:
        assert store.run(2).status == "interrupted" and store.measured_by(1) is None and store.measured_by(2) is None
    finally:
        store.close()
