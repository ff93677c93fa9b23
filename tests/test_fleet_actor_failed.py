"""A node whose sweep's Ray actor never began (fleet.py, fleet_connect.py), without a cluster: dlperf that cannot be
imported there is said in one line of dlperf's own, not as a node lost, and never in Ray's text with its colours."""

from __future__ import annotations

from dlperf import fleet
from dlperf.fleet_connect import actor_reason
from dlperf.store import Store
from test_fleet_lost import ALPHA, node_run
from test_ray import NODES, PollingRay

# What Ray 2.60 said of a node whose PYTHONPATH held a `dlperf` that raised ImportError (QA, f10.db.ray.log)
RAY_SAID = (
    "The actor died because of an error raised in its creation task, \x1b[36mray::NodeSweep.__init__()\x1b[39m "
    "(pid=12876, ip=192.0.2.2, actor_id=c0b5, repr=<TemporaryActor object at 0x7f60d23c13d0>)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "RuntimeError: The actor with name NodeSweep failed to import on the worker. This may be because needed library "
    "dependencies are not installed in the worker environment:\n\n"
    "\x1b[36mray::NodeSweep.__init__()\x1b[39m (pid=12876, ip=192.0.2.2, actor_id=c0b5)\n"
    '  File "/tmp/fake/dlperf/__init__.py", line 1, in <module>\n'
    '    raise ImportError("No module named dlperf (simulated)")\n'
    "ImportError: No module named dlperf (simulated)\n"
)
REASON = "dlperf cannot be imported on that node: ImportError: No module named dlperf (simulated)"


class CreationFailed(RuntimeError):
    """Ray's ActorDiedError of an actor whose creation task raised."""

    actor_init_failed = True


class FailingActor:
    class poll:
        @staticmethod
        def remote():
            raise CreationFailed(RAY_SAID)

    class close:
        @staticmethod
        def remote():
            return None


class Log:
    def __init__(self):
        self.lines = []

    def write(self, what, lines):
        self.lines.append((what, lines))


def test_a_node_where_dlperf_cannot_be_imported_is_named_with_its_error(capsys):
    """It was 'node X was lost at T: its Ray actor stopped answering (its node, network or process went down),
    before its plan arrived', the ImportError in the .ray.log only."""
    [info] = fleet.select([NODES[1]], None)
    node = fleet.Node(info, FailingActor(), ["dlperf", "run"])
    log = Log()
    assert fleet.follow(PollingRay, None, [node], "auto", log) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line == f"dlperf: node bbbbbbbb (box2): its sweep failed (nothing of it is stored): {REASON}"
    [(what, lines)] = log.lines  # Ray's own words kept for whoever reads the log
    assert what.startswith("node bbbbbbbb (host box2), its actor failed at ") and lines[-1] == REASON[40:]


def test_a_node_passed_over_on_resume_says_its_error_without_rays_colours():
    """`--resume --ray` said 'is passed over: The actor died because of an error raised in its creation task,
    \\x1b[36mray::NodeSweep.__init__()\\x1b[39m (pid=..., repr=<...TemporaryActor object at 0x...>)'."""
    assert actor_reason(CreationFailed(RAY_SAID)) == REASON
    assert actor_reason(RuntimeError(RAY_SAID)) == REASON  # Ray's text alone says it too
    raised = RAY_SAID.replace("failed to import", "raised").replace(
        "ImportError: No module named dlperf (simulated)", "OSError: [Errno 28] No space left on device"
    )
    assert (
        actor_reason(RuntimeError(raised)) == "its Ray actor could not begin there: OSError: [Errno 28] No space "
        "left on device"
    )


def test_a_resumed_node_whose_actor_never_began_is_named_with_its_error(tmp_path, capsys):
    """`--resume --ray` of a run on its own node, where dlperf could not be imported: exit 1, not a word on the
    terminal (the run resumed in place has its id, and exit 1 read as cells that failed, which its table shows)."""
    store = Store.open(tmp_path / "x.db", create=True)
    run_id = node_run(store, ALPHA, {0: 1}, "running")
    [info] = fleet.select([NODES[1]], None)
    node = fleet.Node(info, FailingActor(), ["dlperf", "run"], run_id=run_id)  # a run resumed in place
    try:
        assert fleet.follow(PollingRay, store, [node], "auto", Log()) == 1
    finally:
        store.close()
    [line] = capsys.readouterr().err.splitlines()
    assert line == f"dlperf: node bbbbbbbb (box2): its sweep failed (run {run_id} keeps what it finished): {REASON}"
