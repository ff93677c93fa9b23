"""Ray Client's connection lost while `follow` stops or closes the nodes' actors (Ctrl-C pressed while Ray Client
retried a lost connection for its 30 s, or the connection gone as the sweep ended): the ConnectionError escaped
`follow`, and `fleet._run` said it as "lost before the sweep began", its runs left 'running'."""

from __future__ import annotations

from types import SimpleNamespace

from dlperf import fleet
from test_fleet_client import CUT, ClientRay
from test_fleet_lost import A, lost_sweep


def cut(*args, **kwargs):
    raise CUT


class Interrupted:
    """An actor whose poll is interrupted (Ctrl-C) and whose stop and close find the connection gone."""

    poll = SimpleNamespace(remote=lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    stop = close = SimpleNamespace(remote=cut)


class EndedThenCut:
    """An actor whose sweep ended (exit 0), the connection gone when it is closed."""

    poll = SimpleNamespace(remote=lambda: {"rows": None, "exit": 0, "error": "", "said": []})
    close = SimpleNamespace(remote=cut)


def node(actor, run_id=1):
    return fleet.Node(fleet.NodeInfo(A, "alpha", {}, {}, "10.0.0.7"), actor, ["dlperf"], run_id)


def test_ctrl_c_with_the_connection_gone_interrupts_the_runs_in_one_line(tmp_path, capsys):
    store = lost_sweep(tmp_path / "driver.db")
    store.set_run_status(1, "running")
    log = fleet.RayLog(str(tmp_path / "driver.db"))
    assert fleet.follow(ClientRay, store, [node(Interrupted())], "ray://head:10001", log) == 130
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("dlperf: the connection to the cluster at ray://head:10001 was lost at ")
    assert store.run(1).status == "interrupted"
    store.close()


def test_the_connection_lost_as_the_sweep_ended_keeps_its_exit_code(tmp_path, capsys):
    store = lost_sweep(tmp_path / "driver.db")
    store.set_run_status(1, "complete")
    assert fleet.follow(ClientRay, store, [node(EndedThenCut())], "ray://head:10001") == 0
    assert capsys.readouterr().err == "" and store.run(1).status == "complete"
    store.close()
