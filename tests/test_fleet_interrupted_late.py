"""`dlperf run --ray` interrupted once its nodes' sweeps ended (fleet.py, commands/run_fleet.py), without a cluster:
the cleanup (the actors closed, the leases given back, Ray shut down) finishes and the sweep's result stands; what is
said of an interrupt names what the store holds."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import pytest

from dlperf import fleet
from dlperf.commands.run_fleet import run_fleet
from dlperf.runner import lifeline
from dlperf.store import Store
from test_fleet_lost import ALPHA, node_run
from test_ray import NODES, PollingRay, Remote


def ctrl_c(*args, **kwargs) -> None:
    """Ctrl-C, as the terminal sends it: to this process, handled by dlperf's handler."""
    os.kill(os.getpid(), signal.SIGINT)


def complete_rows(tmp_path):
    local = Store.open(tmp_path / "node.db", create=True)
    try:
        return local.check_run(node_run(local, ALPHA, {0: 2, 1: 2, 2: 2}, "complete"))
    finally:
        local.close()


@pytest.mark.parametrize("where", ["actor closed", "Ray shut down"])
def test_ctrl_c_during_the_cleanup_of_an_ended_sweep_lets_it_finish(where, tmp_path, monkeypatch):
    """Ctrl-C as Ray shut down (seconds with --ray local) raised out of the driver: the sweep, its run complete in the
    store, was said 'interrupted before any node's plan arrived: nothing is stored; run the same command to start
    again', and Ray's shutdown was cut short."""
    rows, db, shut = complete_rows(tmp_path), tmp_path / "f.db", []
    answer = {"rows": rows, "exit": 0, "error": None, "said": []}
    closed = SimpleNamespace(remote=ctrl_c if where == "actor closed" else lambda: None)
    actor = SimpleNamespace(poll=Remote(answer), close=closed)

    class ray(PollingRay):
        nodes = staticmethod(lambda: NODES[1:2])

        @staticmethod
        def shutdown():
            if where == "Ray shut down":
                ctrl_c()
            shut.append(1)

    monkeypatch.setattr(fleet, "import_ray", lambda: ray)
    monkeypatch.setattr(fleet, "connect", lambda address, temp_dir: ray)
    monkeypatch.setattr(fleet, "note_raylet", lambda ray, path: None)
    monkeypatch.setattr(fleet, "start_node", lambda ray, info, argv: fleet.Node(info, actor, ["dlperf", *argv]))
    try:
        with lifeline.sigterm_as_interrupt():  # the CLI's, in the driver's process
            result = fleet._driver(SimpleNamespace(ray="local", resume=False), ["run"], str(db), None, str(tmp_path))
    except KeyboardInterrupt:
        pytest.fail(f"the interrupt as the {where} cut the cleanup short and went on to say nothing was stored")
    assert result == (0, [1]) and shut == [1]
    store = Store.open(db, create=False)
    try:
        assert store.run(1).status == "complete" and store.leases == {}
    finally:
        store.close()


def test_an_interrupted_sweep_whose_runs_are_complete_says_so_not_to_resume(tmp_path, monkeypatch, capsys):
    """Ctrl-C as the node's sweep ended, its run complete: 'Continue with: dlperf run --resume --ray ...', which
    then said the store had no unfinished run (exit 2)."""
    db = tmp_path / "f.db"
    store = Store.open(db, create=True)
    node_run(store, ALPHA, {0: 2, 1: 2, 2: 2}, "complete")
    store.close()
    monkeypatch.setattr(fleet, "check_flags", lambda args: None)
    monkeypatch.setattr(fleet, "run", lambda args, argv, db: (130, [1]))
    assert run_fleet(SimpleNamespace(ray="local", resume=False), str(db)) == 130
    assert capsys.readouterr().err == (
        "dlperf: interrupted as the sweep ended: run 1 is complete, nothing is left to measure (dlperf table --run N)\n"
    )


def test_an_interrupt_that_reaches_the_command_says_nothing_is_stored_only_where_nothing_is(tmp_path, monkeypatch,
                                                                                              capsys):  # fmt: skip
    """An interrupt out of the sweep always said 'nothing is stored', its nodes' runs in the store or not."""
    db = tmp_path / "f.db"
    store = Store.open(db, create=True)
    node_run(store, ALPHA, {0: 1}, "interrupted")  # of campaign c, a Ray node's (`node_of`, below)
    store.close()
    monkeypatch.setattr(fleet, "check_flags", lambda args: None)
    monkeypatch.setattr(fleet, "run", lambda args, argv, db: (_ for _ in ()).throw(KeyboardInterrupt))
    monkeypatch.setattr(fleet, "node_of", lambda run: "b" * 56)
    assert run_fleet(SimpleNamespace(ray="local", resume=False, campaign="c"), str(db)) == 130
    err = capsys.readouterr().err
    assert "nothing is stored" not in err and err.startswith("dlperf: interrupted; run 1 keeps the processes")
