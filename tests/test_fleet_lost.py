"""A Ray node lost mid-sweep (fleet.py, fleet_node.py), without a cluster: what its resume credits to whom, what the
driver says of it, where Ray's own messages go, and how `dlperf list --runs` shows the runs. The same on a real
cluster: tests/test_ray.py (slow)."""

from __future__ import annotations

import faulthandler
import json
import os
import re
import signal
import subprocess
from types import SimpleNamespace

import pytest

from conftest import dlperf, one_line_error, require
from dlperf import fleet, fleet_watch
from dlperf.errors import UsageError
from dlperf.fleet_node import continuation
from dlperf.store import Store, now
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import Origin
from dlperf.vocab import Status
from report.runs import cell, measured
from test_ray import NODES, PollingRay, Remote

A, B = "a" * 56, "b" * 56  # the lost node, the live one
ALPHA = {"cpu_model": "Xeon Test", "cores": {"cores": 8}, "hostname": "alpha"}
BETA = {**ALPHA, "hostname": "beta"}
PLAN = [cell(name) for name in ("fcn-r", "alexnet-r", "resnet-56")]


def measure(store: Store, run_id: int, planned, repeat: int) -> None:
    m = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=1.0)
    store.record(run_id, planned.cell.key, repeat, m, measured([[0.01] * 5]))


def node_run(store: Store, fingerprint: dict, measured_by: dict[int, int], status: str) -> int:
    """A node's run of the sweep (2 processes a cell), measured as `measured_by` says (cell index -> processes)."""
    env = {"cpu": {"model": "Xeon Test"}, "cores": {"cores": 8}, "hostname": fingerprint["hostname"]}
    run_id = store.create_run({"repeats": 2, "campaign": "c"}, env, fingerprint, ["dlperf", "run", "--ray", "x"], PLAN)
    for index, count in measured_by.items():
        for repeat in range(count):
            measure(store, run_id, PLAN[index], repeat)
    store.set_run_status(run_id, status)
    return run_id


def lost_sweep(db) -> Store:
    """The driver's store after node A was lost: its run 1 holds fcn-r whole, alexnet-r's first process, and no
    resnet-56."""
    store = Store.open(db, create=True)
    local = Store.open(db.with_name("a.db"), create=True)
    rows = local.check_run(node_run(local, ALPHA, {0: 2, 1: 1}, "interrupted"))
    local.close()
    with store.transaction():
        store.insert_copy(rows.run, rows.cells, rows.measurements, Origin(f"ray:{A}", 1, now()))
    return store


def measured_on_b(tmp_path, given) -> object:
    """What node B's sweep sends back once it measured the run it was given (`given`), as B's own: its store
    file, the run copied in with B's fingerprint, every pending cell measured."""
    store = Store.open(tmp_path / "b.db", create=True)
    try:
        run = {**given.run, "fingerprint_json": json.dumps(BETA)}
        with store.transaction():
            run_id = store.insert_copy(run, given.cells, given.measurements, Origin("ray driver", 1, now()))
        done = store.done_repeats(run_id)
        for planned in PLAN:
            for repeat in range(2):
                if any(c["key"] == planned.cell.key for c in given.cells) and (planned.cell.key, repeat) not in done:
                    measure(store, run_id, planned, repeat)
        store.set_run_status(run_id, "complete")
        return store.check_run(run_id)
    finally:
        store.close()


def test_cells_a_lost_node_left_are_credited_to_the_node_that_measured_them(tmp_path, monkeypatch, capsys):
    """Resumed on node B, the cells lost node A left used to be measured into A's run (A's column in the fleet
    view, A's fingerprint), mixing two machines' processes in one cell; they are now B's run, A's kept as it was."""
    store = lost_sweep(tmp_path / "driver.db")
    started = []

    def start_node(ray, info, argv, rows=None, run_id=None, continues=None):
        started.append(rows)
        actor = SimpleNamespace(poll=Remote({"rows": measured_on_b(tmp_path, rows), "exit": 0, "error": None,
                                             "said": []}), close=Remote(None))  # fmt: skip
        return fleet.Node(info, actor, ["dlperf", *argv], run_id, continues=continues)

    monkeypatch.setattr(fleet, "start_node", start_node)
    monkeypatch.setattr(fleet, "_kinds", lambda ray, chosen, frameworks: {n.node_id: ALPHA for n in chosen})
    [info] = fleet.select([NODES[1]], None)  # box2, node b...
    nodes, _ = fleet.resume_nodes(PollingRay, store, [info], ["run", "--resume"])
    [given] = started
    assert [c["status"] for c in given.cells] == ["pending", "pending"] and given.measurements == []  # begun: whole
    assert fleet.follow(PollingRay, store, nodes, "auto") == 0
    lost, new = store.runs()
    assert (lost.status, lost.origin.db, lost.fingerprint["hostname"]) == ("interrupted", f"ray:{A}", "alpha")
    assert sorted(store.done_repeats(lost.id)) == sorted([(PLAN[0].cell.key, 0), (PLAN[0].cell.key, 1),
                                                          (PLAN[1].cell.key, 0)])  # fmt: skip
    assert (new.status, new.origin.db, new.fingerprint["hostname"], new.env["continues"]) == (
        "complete", f"ray:{B}", "beta", lost.id)  # fmt: skip
    assert sorted(c.workload for c in store.cells(new.id)) == ["alexnet-r", "resnet-56"]
    assert len(store.done_repeats(new.id)) == 4 and new.argv == lost.argv
    assert fleet.fleet_runs(store) == []  # nothing left to resume: the lost run went on in run 2
    assert "run 1's node is gone: what it left is measured on node bbbbbbbb (box2)" in capsys.readouterr().err
    store.close()


def test_a_ray_local_sweep_resumed_goes_on_in_its_own_run_on_this_machines_new_node(tmp_path, monkeypatch, capsys):
    """`dlperf run --resume --ray local` (the command an interrupted local sweep names) starts a new local cluster,
    whose one node, this machine, has a new id: run 1 was "lost" and what it left measured as another run, and the
    campaign view set this one machine against itself ("1.65x faster than vm (Ray node 6d26373a)")."""
    store = lost_sweep(tmp_path / "driver.db")
    started = []
    monkeypatch.setattr(fleet, "start_node", lambda ray, info, argv, rows=None, run_id=None, continues=None: (
        started.append((run_id, continues)) or fleet.Node(info, None, ["dlperf"], run_id)))  # fmt: skip
    monkeypatch.setattr(fleet, "_kinds", lambda ray, chosen, frameworks: {n.node_id: ALPHA for n in chosen})
    here = fleet.select([{**NODES[1], "NodeManagerHostname": "alpha"}], None)  # a new id, on run 1's host
    fleet.resume_nodes(PollingRay, store, here, ["run", "--resume"], "local")
    assert started == [(1, None)] and "run 1 resumed on node bbbbbbbb (alpha)" in capsys.readouterr().err
    started.clear()
    fleet.resume_nodes(PollingRay, store, here, ["run", "--resume"])  # a cluster's node of another id: another machine
    store.close()
    assert started == [(None, 1)]


def test_a_run_left_without_a_node_is_said_in_the_singular(tmp_path, monkeypatch, capsys):
    """Runs 1 (node A's) and 2 (node B's) of one kind, node A alone alive: run 1 resumes on it and run 2 waits. It
    said 'runs 2 wait: every live node of their kind ... takes them up'."""
    store = lost_sweep(tmp_path / "driver.db")
    local = Store.open(tmp_path / "b.db", create=True)
    rows = local.check_run(node_run(local, BETA, {0: 1}, "interrupted"))
    local.close()
    with store.transaction():
        store.insert_copy(rows.run, rows.cells, rows.measurements, Origin(f"ray:{B}", 1, now()))
    started = []
    monkeypatch.setattr(fleet, "start_node", lambda ray, info, argv, rows=None, run_id=None, continues=None: (
        started.append(run_id) or fleet.Node(info, None, ["dlperf"], run_id)))  # fmt: skip
    monkeypatch.setattr(fleet, "_kinds", lambda ray, chosen, frameworks: {n.node_id: ALPHA for n in chosen})
    _, waiting = fleet.resume_nodes(PollingRay, store, fleet.select([NODES[0]], None), ["run", "--resume"])
    store.close()
    assert (started, waiting) == ([1], 1)
    assert capsys.readouterr().err.splitlines()[-1] == (
        "dlperf: run 2 waits: every live node of its kind resumes another run (one sweep to a node); `dlperf run "
        f"--resume --ray auto --db {tmp_path / 'driver.db'}` takes it up once a node is free")  # fmt: skip


def test_continuation_keeps_a_gpu_cells_prediction_and_the_spec():
    rows = SimpleNamespace(
        run={"id": 3, "spec_json": json.dumps({"repeats": 3, "campaign": "c"}), "env_json": "{}", "started_at": "x",
             "token": "t"},
        cells=[{"key": "k1", "status": "ok", "median_s": 1.0, "workload": "w"},
               {"key": "k2", "status": "ok", "median_s": 2.0, "workload": "w"}],
        measurements=[{"cell_key": "k1", "repeat": r} for r in range(3)] + [{"cell_key": "k2", "repeat": 0}],
        predictions=[{"cell_key": "k1", "gpu": "H100"}, {"cell_key": "k2", "gpu": "H100"}],
    )  # fmt: skip
    left = continuation(rows)
    assert left.cells == [{"key": "k2", "status": "pending", "workload": "w"}] and left.measurements == []
    assert left.predictions == [{"cell_key": "k2", "gpu": "H100"}]
    assert json.loads(left.run["env_json"]) == {"continues": 3} and left.run["started_at"] != "x"
    assert left.run["token"] not in ("t", None)  # a run of its own


def test_a_lost_node_is_said_in_dlperfs_words_ray_s_text_in_the_log(tmp_path, capsys):
    """The line used to quote Ray's RPC error ("The actor 7bd4... is unavailable: ... RpcError: RPC error: Socket
    closed rpc_code: 14 ..."); it now names the node's host and address, when, each cell's processes and how to go
    on, and Ray's text is in the log."""
    store = lost_sweep(tmp_path / "driver.db")
    raw = "The actor 7bd4 is unavailable: RpcError: RPC error: Socket closed rpc_code: 14."

    class Lost:
        close = Remote(None)
        poll = SimpleNamespace(remote=lambda: (_ for _ in ()).throw(RuntimeError(raw)))

    info = fleet.NodeInfo(A, "alpha", {}, {}, "10.0.0.7")
    log = fleet.RayLog(str(tmp_path / "driver.db"))
    assert fleet.follow(PollingRay, store, [fleet.Node(info, Lost(), ["dlperf"], 1)], "auto", log) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("dlperf: node aaaaaaaa (host alpha, address 10.0.0.7) was lost at ")
    assert "Run 1 keeps 3 of its 6 processes; left to measure: alexnet-r torch cpu:1 fp32 (1 of 2 processes), " \
        "resnet-56 torch cpu:1 fp32 (not begun)." in line and "rpc_code" not in line  # fmt: skip
    assert f"dlperf run --resume --ray auto --db {tmp_path / 'driver.db'}`" in line
    assert raw in (tmp_path / "driver.db.ray.log").read_text()
    store.close()


@pytest.mark.parametrize("address", ["ray://head:10001", "10.0.0.1:6379"])
def test_a_lost_nodes_ray_logs_are_named_on_the_machines_that_keep_them(tmp_path, capsys, address):
    """Ray's account of a lost node is in logs on other machines than the driver's: the node's raylet log, on the
    node; and over Ray Client, the driver is a server on the head, so what Ray told it of the node (the raylet's end
    and its log's last lines, which a HOST:PORT driver gets in DB.ray.log) stays in that server's log on the head.
    The log beside the store named neither; it names each as a path on its machine, never as one of this one."""
    session = "/tmp/ray/session_2026-12-02_10-41-18_176742_5829"  # Ray's own folder name
    listed = [{**NODES[0], "NodeManagerAddress": "10.0.0.1", "RayletSocketName": f"{session}/sockets/raylet",
               "Resources": {"CPU": 8.0, "node:__internal_head__": 1.0}},
              {"NodeID": B, "Alive": True, "NodeManagerHostname": "beta", "NodeManagerAddress": "10.0.0.7",
               "RayletSocketName": "/var/ray/session_b/sockets/raylet.1", "Resources": {"CPU": 4.0}}]  # fmt: skip
    head, info = fleet.select(listed, None)
    assert (head.head, head.session, info.head, info.session) == (True, session, False, "/var/ray/session_b")
    assert head.raylet_log == f"{session}/logs/raylet.out"  # a second raylet of the folder: raylet.1.out
    store = lost_sweep(tmp_path / "driver.db")

    class Lost:
        close = Remote(None)
        poll = SimpleNamespace(remote=lambda: (_ for _ in ()).throw(RuntimeError("The actor 7bd4 is unavailable")))

    log = fleet.RayLog(str(tmp_path / "driver.db"))
    assert fleet.follow(PollingRay, store, [fleet.Node(info, Lost(), ["dlperf"], 1)], address, log, head) == 1
    store.close()
    text = (tmp_path / "driver.db.ray.log").read_text()
    assert ("node bbbbbbbb (host beta, address 10.0.0.7): Ray's logs of it, on other machines than this one:\n"
            "    its raylet's log, on that node: /var/ray/session_b/logs/raylet.1.out\n") in text  # fmt: skip
    on_head = (f"stays on the head node, node {head.node_id[:8]} (host box1, address 10.0.0.1): {session}/logs/"
               "ray_client_server_*.out (the file of this client's server)")  # fmt: skip
    assert (on_head in text) == address.startswith("ray://")
    assert "/var/ray" not in capsys.readouterr().err  # the terminal's line names the log beside the store


def test_a_node_whose_raylet_socket_is_elsewhere_names_no_session():
    """A raylet started with a socket path of its own (--raylet-socket-name) says nothing of its session folder."""
    [info] = fleet.select([{**NODES[1], "RayletSocketName": "/run/raylet.sock"}], None)
    assert info.session == info.raylet_log == info.log_file("ray_client_server_*.out") == "" and not info.head


def test_rays_messages_to_the_driver_go_to_the_log(tmp_path, capsys):
    """Ray's driver prints the cluster's errors (a killed raylet's last 20 log lines, published to every driver)
    whatever log_to_driver says; during a sweep they go to DB.ray.log, named in one line."""
    ray = require("ray")
    import ray._private.worker as worker

    printer = worker.print_to_stdstream
    log = fleet.RayLog(str(tmp_path / "x.db"))
    undo = log.divert(ray)
    dump = ["Raylet is terminated. Termination is unexpected.", "    [state-dump] NodeManager..."]
    worker.print_to_stdstream({"lines": dump, "pid": "raylet", "is_err": False}, ignore_prefix=False)
    undo()
    log.say()
    out, err = capsys.readouterr()
    assert out == "" and err == f"dlperf: Ray's own messages of this sweep are in {tmp_path / 'x.db'}.ray.log\n"
    assert worker.print_to_stdstream is printer
    assert all(line in (tmp_path / "x.db.ray.log").read_text() for line in dump)


@pytest.fixture
def two_nodes_one_host(tmp_path):
    """Two Ray nodes of host alpha: node A lost (run 1: 3 of 6 processes), node B resumed what it left (run 2)."""
    db = tmp_path / "driver.db"
    store = lost_sweep(db)
    local = Store.open(tmp_path / "b.db", create=True)
    rows = local.check_run(node_run(local, {**ALPHA}, {0: 2, 1: 2}, "complete"))
    local.close()
    with store.transaction():
        run = {**rows.run, "env_json": json.dumps({**json.loads(rows.run["env_json"]), "continues": 1})}
        store.insert_copy(run, rows.cells[:2], rows.measurements, Origin(f"ray:{B}", 1, now()))
    store.close()
    return db


def test_list_runs_tells_two_nodes_of_one_host_apart_and_says_what_is_done(two_nodes_one_host):
    """Both used to be "Xeon Test, alpha (merged from ray:...:1)", and the lost run's status "interrupted; 1 process
    of a measured cell left"."""
    first, second = json.loads(dlperf("list", "--runs", "--format", "json", db=two_nodes_one_host).stdout)
    assert first["machine"] == f"alpha · Xeon Test, 8 cores (Ray node {A[:8]})" and first["merged_from"] is None
    assert second["machine"] == f"alpha · Xeon Test, 8 cores (Ray node {B[:8]})" and second["ray_node"] == B
    assert (first["processes"], first["continued_by"]) == ({"done": 3, "planned": 6}, 2)
    text = " ".join(dlperf("list", "--runs", db=two_nodes_one_host, env={"COLUMNS": "250"}).stdout.split())
    assert f"interrupted: 3 of 6 processes done; the rest measured by run 2 (Ray node {B[:8]})" in text
    assert "merged from" not in text


def test_list_runs_says_what_is_left_plainly(tmp_path):
    store = Store.open(tmp_path / "t.db", create=True)
    node_run(store, ALPHA, {0: 2, 1: 1}, "interrupted")
    store.close()
    text = " ".join(dlperf("list", "--runs", db=tmp_path / "t.db", env={"COLUMNS": "250"}).stdout.split())
    assert "interrupted: 3 of 6 processes done; 3 left, in 2 cells" in text and "alpha · Xeon Test" in text


def test_the_table_and_report_resume_a_ray_nodes_run_over_the_cluster(tmp_path, two_nodes_one_host):
    """A lost node's run said `dlperf run --resume --db DB measures them`, which measures its cells on this machine
    into the node's run; it now gives the sweep's own --ray, or names the run that measured the rest."""
    store = lost_sweep(tmp_path / "one.db")
    store.close()
    said = " ".join(dlperf("table", "--run", "1", db=tmp_path / "one.db", env={"COLUMNS": "250"}).stdout.split())
    assert f"`dlperf run --resume --ray x --db {tmp_path / 'one.db'}` measures them on a live Ray node" in said
    said = " ".join(dlperf("table", "--run", "1", db=two_nodes_one_host, env={"COLUMNS": "250"}).stdout.split())
    lost = f"run 1 is unfinished (interrupted): Ray node {A[:8]} was lost; run 2 (Ray node {B[:8]}) measured what it"
    assert lost in said and "dlperf run --resume" not in said
    assert dlperf("report", "--run", "1", "-o", str(tmp_path / "r.html"), db=two_nodes_one_host).returncode == 0
    assert lost in " ".join((tmp_path / "r.html").read_text().split())


def test_a_plain_resume_of_a_ray_nodes_run_is_refused_naming_the_cluster(tmp_path, two_nodes_one_host):
    """`dlperf run --resume` took a lost node's run up on this machine, its processes going into the node's run."""
    store = lost_sweep(tmp_path / "one.db")
    store.close()
    for dry in ([], ["--dry-run"]):
        said = dlperf("run", "--resume", *dry, db=tmp_path / "one.db", timeout=120)
        mine = f"--resume: run 1, the latest unfinished, is Ray node {A[:8]}'s (a --ray sweep): "
        one_line_error(said, mine + f"`dlperf run --resume --ray x --db {tmp_path / 'one.db'}` measures what it left")
    nothing = f"--resume: nothing to resume in {two_nodes_one_host}: run 1, the latest unfinished, was a lost Ray"
    one_line_error(dlperf("run", "--resume", db=two_nodes_one_host, timeout=120), nothing)


def lost_and_continued(store: Store, nodes_db) -> None:
    """Node A's run lost (interrupted) and node B's run that went on with it ('continues': the lost run's id here),
    added to `store`."""
    local = Store.open(nodes_db, create=True)
    lost = local.check_run(node_run(local, ALPHA, {0: 2, 1: 1}, "interrupted"))
    went_on = local.check_run(node_run(local, ALPHA, {0: 2, 1: 2}, "complete"))
    local.close()
    with store.transaction():
        lost_id = store.insert_copy(lost.run, lost.cells, lost.measurements, Origin(f"ray:{A}", 1, now()))
        env = {**json.loads(went_on.run["env_json"]), "continues": lost_id}
        run = {**went_on.run, "env_json": json.dumps(env), "started_at": "2030-01-01T00:00:00"}  # began later
        store.insert_copy(run, went_on.cells[:2], went_on.measurements, Origin(f"ray:{B}", 2, now()))


def test_resume_passes_over_a_lost_nodes_run_another_node_went_on_with(tmp_path):
    """A plain sweep's interrupted run 1, then a --ray sweep whose node A was lost (run 2) and node B measured what it
    left (run 3): `--resume` refused ("run 2 ... nothing to resume here") and run 1's note said "--resume takes the
    latest unfinished run, 2", though nothing is left of run 2 and run 1 is the one to finish."""
    from commands.test_table_unfinished import planned_run
    from dlperf.api import latest_resumable

    db = tmp_path / "driver.db"
    store = Store.open(db, create=True)
    planned_run(store, 1, "interrupted")
    lost_and_continued(store, tmp_path / "nodes.db")
    assert latest_resumable(store).id == 1
    store.close()
    said = " ".join(dlperf("table", "--run", "1", db=db, env={"COLUMNS": "250"}).stdout.split())
    assert f"`dlperf run --resume --db {db}` measures them" in said and "takes the latest" not in said


def test_the_run_a_node_is_given_to_go_on_with_is_resumable_in_the_nodes_own_store(tmp_path):
    """The lost run's cells, copied into the new node's own store as its run 1, carry the link to the driver's run 1
    ('continues': 1): read in the node's store it named the run itself as the lost one another run went on with, so
    the node's `--resume` found 'nothing to resume' and the resumed sweep failed (tests/test_ray.py, slow)."""
    from dlperf.api import latest_resumable

    store = Store.open(tmp_path / "node.db", create=True)
    try:
        run_id = node_run(store, BETA, {0: 2}, "interrupted")
        store.conn.execute("UPDATE runs SET env_json = json_set(env_json, '$.continues', ?) WHERE id = ?",
                           (run_id, run_id))  # fmt: skip
        store.conn.commit()
        assert latest_resumable(store).id == run_id
    finally:
        store.close()


def test_a_driver_ray_ends_is_said_and_its_runs_left_interrupted(tmp_path, capsys):
    """Ray ends the driver's process itself (from C++: no exception, not a word) when this machine's node loses its
    raylet or object store; dlperf used to vanish with exit 1, its runs left 'running'."""
    db = tmp_path / "driver.db"
    lost_sweep(db).close()

    def driver():  # what Ray does to the driver: a run streaming, then the process gone
        store = Store.open(db, create=False)
        store.acquire(1)
        store.set_run_status(1, "running")
        os._exit(1)

    raylet = tmp_path / "raylet.pid"  # the raylet the driver was attached to, ended
    gone = subprocess.Popen(["true"])
    gone.wait()
    raylet.write_text(str(gone.pid))
    code, runs = fleet_watch.watched(driver, str(db), "HEAD:6379", raylet=str(raylet))
    assert (code, runs) == (1, [1])
    [line] = capsys.readouterr().err.splitlines()
    assert re.match(
        rf"dlperf: Ray ended this sweep's driver \(exit 1\) at \d\d:\d\d:\d\d: the raylet of the Ray node "
        rf"this machine is attached to \(pid {gone.pid}\) has ended; ",
        line,
    ), line
    assert "run 1 keeps what it stored" in line
    assert f"`dlperf run --resume --ray HEAD:6379 --db {db}` goes on once this machine is a node again" in line
    store = Store.open(db, create=False)
    assert store.run(1).status == "interrupted" and store.measured_by(1) is None
    store.close()


def test_the_drivers_answer_or_error_comes_back_from_its_process(tmp_path):
    assert fleet_watch.watched(lambda: (0, [os.getpid()]), str(tmp_path / "x.db"), "auto")[1] != [os.getpid()]
    with pytest.raises(UsageError, match=r"^--ray x: cannot connect$"):
        fleet_watch.watched(lambda: (_ for _ in ()).throw(UsageError("--ray x: cannot connect")), "x.db", "x")


def test_an_interrupted_sweep_says_what_its_runs_keep_not_finished_cells(monkeypatch, capsys):
    """'finished cells are stored in runs 1, 2, 3' was said of a sweep stopped before any process ended."""
    from dlperf.commands.run_fleet import run_fleet

    monkeypatch.setattr(fleet, "check_flags", lambda args: None)
    monkeypatch.setattr(fleet, "run", lambda args, argv, db: (130, [1, 2]))
    assert run_fleet(SimpleNamespace(ray="auto"), "f.db") == 130
    assert capsys.readouterr().err == (
        "dlperf: interrupted; runs 1, 2 keep the processes that finished (dlperf list --runs says what each has "
        "left). Continue with: dlperf run --resume --ray auto --db f.db\n")  # fmt: skip
    monkeypatch.setattr(fleet, "run", lambda args, argv, db: (130, [3]))
    assert run_fleet(SimpleNamespace(ray="auto"), "f.db") == 130
    assert capsys.readouterr().err.startswith("dlperf: interrupted; run 3 keeps the processes that finished (")


def test_every_line_that_names_the_ray_resume_quotes_the_store_as_a_shell_reads_it(tmp_path, capsys):
    """The table's note quoted a store's path and the driver's lines did not: `--db my runs/one.db`, followed
    literally, resumed no store (four copies of the command, one function now: location.ray_resume_command)."""
    folder = tmp_path / "my runs"
    folder.mkdir()
    db = folder / "one.db"
    lost_sweep(db).close()
    quoted = f"`dlperf run --resume --ray x --db '{db}'`"
    assert quoted in " ".join(dlperf("table", "--run", "1", db=db, env={"COLUMNS": "250"}).stdout.split())

    def driver():  # Ray ends the driver while its run streams
        store = Store.open(db, create=False)
        store.acquire(1)
        store.set_run_status(1, "running")
        os._exit(1)

    fleet_watch.watched(driver, str(db), "x")
    assert quoted in capsys.readouterr().err


def test_merge_carries_a_continuing_runs_link_to_the_lost_run(tmp_path):
    """A run that went on with a lost node's run names it by its id in the same store ('continues'); `dlperf merge`
    renumbered the runs and kept the id, so in the merged store the link pointed at another run (or none) and the
    lost run was --resume's again. The merge now points it at the lost run's copy."""
    from commands.test_table_unfinished import planned_run
    from dlperf.api import latest_resumable
    from dlperf.report.run_list import continued_by
    from dlperf.store.merge import merge

    source = tmp_path / "driver.db"
    store = Store.open(source, create=True)
    lost_and_continued(store, tmp_path / "nodes.db")
    store.close()
    target = tmp_path / "all.db"
    held = Store.open(target, create=True)
    planned_run(held, 1, "complete")  # the target's run 1: the source's runs become 2 and 3
    held.close()
    for _ in range(2):  # and merging again changes nothing
        merge([str(source)], str(target))
        merged = Store.open(target, create=False)
        assert {lost: run.id for lost, run in continued_by(merged.runs()).items()} == {2: 3}
        assert latest_resumable(merged) is None
        merged.close()


STILL_RUNS = "; the raylet it was attached to \\(pid PID\\) still runs"  # PID: the test process, set in the test
OOM = "the kernel's out-of-memory killer ended this sweep's driver (SIGKILL)"


@pytest.mark.parametrize(
    ("ended", "ooms", "said", "then"),
    [
        (signal.SIGKILL, [3, 4], OOM, ""),
        (
            signal.SIGKILL,
            [3, 3],
            "this sweep's driver was killed by SIGKILL",
            "; the kernel's out-of-memory count did not",
        ),
        (signal.SIGSEGV, [None, None], "this sweep's driver was killed by SIGSEGV", ""),
        ("raylet running", [0, 0], "this sweep's driver ended (exit 1)", f" without an answer{STILL_RUNS}"),
        ("no raylet known", [0, 0], "this sweep's driver ended (exit 1)", " without an answer; run 1"),
    ],
)
def test_a_driver_gone_without_an_answer_is_said_for_what_ended_it(tmp_path, monkeypatch, capsys, ended, ooms, said,
                                                                   then):  # fmt: skip
    """Every death of the driver without an answer, an out-of-memory kill included, was said as 'the Ray node this
    machine is attached to lost its raylet or object store'; what ended it is now said as far as it is known: the
    exit signal, the kernel's OOM counter (before and after), the raylet it was attached to."""
    db = tmp_path / "driver.db"
    lost_sweep(db).close()
    counts = iter(ooms)
    monkeypatch.setattr(fleet_watch, "oom_kills", lambda: next(counts))
    raylet = tmp_path / "raylet.pid"
    if ended == "raylet running":
        raylet.write_text(str(os.getpid()))
    then = then.replace("PID", str(os.getpid()))

    def driver():
        store = Store.open(db, create=False)
        store.acquire(1)
        store.set_run_status(1, "running")
        faulthandler.disable()  # pytest's: a traceback of its own for SIGSEGV
        os.kill(os.getpid(), ended) if isinstance(ended, signal.Signals) else os._exit(1)

    assert fleet_watch.watched(driver, str(db), "x", raylet=str(raylet)) == (1, [1])
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"dlperf: {said} at ") and re.search(rf"at \d\d:\d\d:\d\d{then}", line), line
    assert line.endswith("run 1 keeps what it stored. `dlperf run --resume --ray x --db " + f"{db}` goes on")


def test_a_node_sweeps_folder_left_by_a_killed_actor_is_removed_by_the_next_never_one_in_use(tmp_path, monkeypatch):
    """A node's /tmp/dlperf-ray-* folder (its store file, the sweep's output) stayed on the node when Ray killed the
    actor or the driver: nothing removed it. The next actor on the node removes those whose lock no one holds."""
    import tempfile

    from dlperf.fleet_node import NODE_DIR, NodeSweep

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    live = NodeSweep()  # an actor of another sweep, still running
    left = tmp_path / f"{NODE_DIR}killed"  # an actor killed: its lock released with its process
    left.mkdir()
    (left / "lock").touch()
    (left / "node.db").write_bytes(b"x")
    starting, other = tmp_path / f"{NODE_DIR}starting", tmp_path / "dlperf-ray-driver"  # no lock yet; not a node's
    starting.mkdir()
    other.mkdir()
    mine = NodeSweep()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [os.path.basename(live.dir), os.path.basename(mine.dir), starting.name, other.name]
    )
    for sweep in (live, mine):
        sweep.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, starting.name]


def test_a_starting_actors_folder_is_never_taken_for_stale(tmp_path, monkeypatch):
    """Another actor's remove_stale between this actor's creating its lock file and locking it found the file
    unlocked and removed the folder in use: the file is named "lock" only once it is locked."""
    import fcntl
    import tempfile

    from dlperf import fleet_node

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real, raced = fcntl.flock, []

    def flock(fd, op):  # another actor on the node starts just as this one locks its folder
        if isinstance(fd, int) and not raced:
            raced.extend(fleet_node.remove_stale(str(tmp_path)))
        return real(fd, op)

    monkeypatch.setattr(fleet_node.fcntl, "flock", flock)
    sweep = fleet_node.NodeSweep()
    assert raced == [] and os.path.isfile(os.path.join(sweep.dir, "lock"))
    assert fleet_node.remove_stale(str(tmp_path)) == []  # held: in use
    sweep.close()


def test_a_killed_drivers_folder_is_named_for_its_process_and_removed_by_the_next_sweep(tmp_path, monkeypatch):
    """`kill -9` of a `dlperf run --ray local` driver left /tmp/dlperf-ray-XXXXXXXX (its local cluster's session,
    212 KB) for good: the folder is named for the driver's process, and the next sweep removes it once that process
    is gone."""
    import tempfile
    from types import SimpleNamespace

    from dlperf.runner import lifeline

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / "dlperf-999999999-ray-abcd1234"
    (dead / "session_x").mkdir(parents=True)
    made = []
    monkeypatch.setattr(fleet, "watched", lambda driver, db, address, sweep, raylet: made.append(raylet) or (0, []))
    args = SimpleNamespace(nodes=None, ray="local", nproc=0, nnodes=1, dry_run=False, profile=False, resume=False,
                           campaign="c")  # fmt: skip
    assert fleet.run(args, ["run"], str(tmp_path / "d.db")) == (0, [])
    assert not dead.exists()
    [raylet] = made
    assert os.path.basename(os.path.dirname(raylet)).startswith(lifeline.tmp_prefix("ray"))
