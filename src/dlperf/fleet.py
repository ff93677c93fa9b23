"""`dlperf run --ray ADDRESS`: one sweep over the nodes of a Ray cluster, each node's cells a run of its own.

Each chosen node measures its cells exactly as `dlperf run` there would: a Ray actor pinned to the node
(`fleet_node.NodeSweep`, NodeAffinitySchedulingStrategy, no CPU reserved) starts `python -m dlperf run ...` with the
user's own flags into a store file of the node's own, so the node's worker, its child per cell, its thread counts (up
to its cores), its GPUs and its framework environments are the ones used. The driver polls each actor; an actor
answers with its run's rows whenever they changed, and the driver writes them into its store as that node's run (the
node's environment and fingerprint; origin `ray:NODE_ID`), leased to the driver while it streams.

A node that dies keeps in the driver's store what it had sent: its run is left interrupted, and the driver says in
its own words which node was lost, when, and the cells it left; Ray's own words, and what Ray prints of the cluster's
errors, go to a log beside the store (`RayLog`). `dlperf run --resume --ray ADDRESS` measures what is left on a live
node of the same kind (`same_kind`): in the run itself on its own node, else as a run of the node that measures it
(`fleet_node.continuation`). A cluster dlperf started itself (`--ray local`) is stopped when it ends; one it joined is
left as it was.

Ray is imported by this module and `fleet_connect` (where the cluster is reached) only, and they only by `dlperf run
--ray`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass

from dlperf import envinfo
from dlperf.errors import StoreFault, UsageError
from dlperf.fleet_connect import actor_reason, connect, created_not, creation_reason, import_ray, server_reason
from dlperf.fleet_node import (
    CONTINUES,
    NODE_ENV,
    STOP_GRACE_S,
    NodeSweep,
    chosen_by,
    continuation,
    node_argv,
    other_dlperf,
    unfinished,
)
from dlperf.fleet_watch import RayLog, cut_off, elsewhere, ended_raylet, note_raylet, say_own_node_ended, watched
from dlperf.measure.units import agreeing, named
from dlperf.report.fleet import RAY_ORIGIN as ORIGIN  # a fleet run's origin: ray:NODE_ID
from dlperf.report.fleet import machine_label, ray_node
from dlperf.runner import lifeline
from dlperf.store import RunRows, Store, now
from dlperf.store.lease import LeaseHeld
from dlperf.store.location import check_path, ray_resume_command, resume_command
from dlperf.store.merge import source_refusal
from dlperf.store.records import Origin, RunRecord
from dlperf.store.state import measured_here

POLL_S = 0.5  # how often the driver asks each node for what finished


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    host: str
    labels: dict
    resources: dict
    address: str = ""  # the node's IP, as Ray reaches it
    session: str = ""  # the node's Ray session folder, on that machine ("" where its raylet's socket does not say)
    raylet_log: str = ""  # its raylet's log, on that machine: SESSION/logs/raylet.out, raylet.1.out for a second
    head: bool = False

    def describe(self) -> str:
        return f"node {self.node_id[:8]} ({self.host})"

    def where(self) -> str:
        """ "node 2a16eca0 (host vm, address 10.0.0.2)": which machine, to find it by."""
        address = f", address {self.address}" if self.address and self.address != self.host else ""
        return f"node {self.node_id[:8]} (host {self.host}{address})"

    def log_file(self, name: str) -> str:
        """The path of one of the node's Ray logs, on that machine (/tmp/ray/session_.../logs/raylet.out); "" where
        its session is not known."""
        return f"{self.session}/logs/{name}" if self.session else ""


def node_info(node: dict) -> NodeInfo:
    """A node of `ray.nodes()`, its Ray session folder and its raylet's log read off its raylet's socket: Ray names
    SESSION/sockets/raylet and SESSION/logs/raylet.out alike, raylet.1 and raylet.1.out for a second raylet that
    shares the folder (two nodes of one machine)."""
    socket = node.get("RayletSocketName") or ""
    folder, name = os.path.split(socket)
    session, log = "", ""
    if os.path.basename(folder) == "sockets" and name.startswith("raylet"):
        session = os.path.dirname(folder)
        log = f"{session}/logs/{name}.out"
    resources = dict(node.get("Resources") or {})
    return NodeInfo(node["NodeID"], node.get("NodeManagerHostname") or node.get("NodeManagerAddress", "?"),
                    dict(node.get("Labels") or {}), resources, node.get("NodeManagerAddress") or "", session, log,
                    "node:__internal_head__" in resources)  # fmt: skip


RAY_RESOURCES = ("CPU", "GPU", "TPU", "memory", "object_store_memory")  # Ray's own: a count, never a label


def parse_nodes(text: str) -> tuple[str, str] | None:
    """`--nodes`: all (None), or KEY=VALUE (a node label, or a custom resource of at least VALUE). One of Ray's own
    resources takes a number above zero, refused otherwise before any cluster starts (CPU=lots)."""
    if text == "all":
        return None
    key, sep, value = text.partition("=")
    if not (sep and key.strip() and value.strip()):
        raise UsageError(f"--nodes {text!r}: give all, or KEY=VALUE (a node label or resource, e.g. gpu_type=H100)")
    key, value = key.strip(), value.strip()
    if key in RAY_RESOURCES and not _amount(value):
        raise UsageError(f"--nodes {text!r}: {key} is a Ray resource, the least a node has: a number above zero "
                         f"(e.g. {key}=4)")  # fmt: skip
    return key, value


def _amount(value: str) -> bool:
    """A resource's amount: a number above zero, finite, in ASCII digits."""
    try:
        return value.isascii() and 0 < float(value) < float("inf")
    except ValueError:
        return False


def select(nodes: list[dict], wanted: tuple[str, str] | None) -> list[NodeInfo]:
    """The alive nodes of `ray.nodes()` that `--nodes` chose; none is a UsageError naming what the cluster has."""
    alive = [node_info(n) for n in nodes if n.get("Alive")]
    chosen = [n for n in alive if wanted is None or _matches(n, *wanted)]
    if chosen:
        return chosen
    if not alive:
        raise UsageError("--ray: the cluster has no alive node")
    key, value = wanted
    most = max((n.resources[key] for n in alive if key in n.resources), default=None)
    if most is not None and not _amount(value):  # a custom resource the nodes have, given as a word
        raise UsageError(f"--nodes {key}={value}: {key} is a resource of the nodes, the least a node has: a number "
                         f"above zero (the most a node has: {most:g})")  # fmt: skip
    if most is not None:  # a resource the nodes have, too little of it: `ray start --num-cpus 2` and CPU=4, say
        raise UsageError(f"--nodes {key}={value}: no alive node has that much {key} (the most a node has: {most:g})")
    labels = sorted({f"{k}={v}" for n in alive for k, v in n.labels.items() if not k.startswith("ray.io/")})
    raise UsageError(f"--nodes {key}={value}: no alive node has that label or resource (labels: "
                     f"{', '.join(labels) or 'none'})")  # fmt: skip


def _matches(node: NodeInfo, key: str, value: str) -> bool:
    if node.labels.get(key) == value:
        return True
    try:
        return node.resources.get(key, 0) >= float(value) > 0
    except ValueError:
        return False


def check_flags(args) -> None:
    """What a fleet sweep does not do, said before anything connects."""
    if args.nodes and not args.ray:
        raise UsageError("--nodes: give --ray ADDRESS too (the cluster whose nodes it chooses)")
    unsupported = {
        "--nproc": args.nproc,  # a job across one node's processes; a torchrun job across nodes is --nnodes
        "--nnodes": args.nnodes > 1,
        "--dry-run": args.dry_run,
        "--profile": args.profile,  # its traces would stay on the node
    }
    for flag, given in unsupported.items():
        if given:
            raise UsageError(f"--ray: {flag} is not supported over a Ray cluster's nodes; run it on the node itself")


def same_kind(a: dict, b: dict) -> bool:
    """Two fingerprints of the same kind of machine: equal but for the hostname and the memory (its rounding), on the
    keys both have (`envinfo.alike`: a run an older dlperf began lacks the newer ones)."""
    return envinfo.alike(a, b, ignore=("hostname", "memory_gib"))


# --- the driver's side -----------------------------------------------------------------------------------------------
@dataclass
class Node:
    info: NodeInfo
    actor: object
    argv: list[str]  # the driver's command, stored as the run's
    run_id: int | None = None  # the node's run in the driver's store, once its first rows arrived
    exit: int | None = None
    error: str = ""
    died: str = ""  # why the driver lost the node, in dlperf's words (Ray's own: `raw`, for the Ray log)
    lost_at: str = ""  # when, the driver's local time
    raw: str = ""
    continues: int | None = None  # the lost node's run whose cells left this node measures, as a run of its own


def start_node(ray, info: NodeInfo, argv: list[str], rows: RunRows | None = None, run_id: int | None = None,
               continues: int | None = None) -> Node:  # fmt: skip
    """The node's actor, its sweep started: `dlperf ARGV`, or `rows` (a run of the driver's store) resumed: the
    node's own run `run_id`, or what the lost node's run `continues` left (`continuation`)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(num_cpus=0, max_restarts=0)(NodeSweep).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(info.node_id, soft=False),
        runtime_env={"env_vars": NODE_ENV},
    )
    actor = remote.remote()
    actor.start.remote(node_argv(argv), rows)
    return Node(info, actor, ["dlperf", *argv], run_id, continues=continues)


def follow(ray, store: Store, nodes: list[Node], address: str, log: RayLog | None = None,
           head: NodeInfo | None = None, raylet: str | None = None) -> int:  # fmt: skip
    """Stream each node's run into `store` until every node ended or died; the exit code. A lost node's line is
    dlperf's; Ray's own words for it go to `log`, with where Ray's logs of it are on other machines (`elsewhere`:
    the node's, and over Ray Client the cluster's `head`). Nodes lost once the raylet this machine's node had (its
    pid in the file `raylet`) ended are said as that end (`say_own_node_ended`), not each as a node gone down."""
    reachable = True
    try:
        with lifeline.sigterm_as_interrupt():
            said, leased = set(), 0  # the other processes' runs said (`say_beside`); this sweep's runs leased
            while live := [n for n in nodes if n.exit is None and not n.died]:
                for node in live:
                    poll(ray, store, node)
                if (begun := sum(n.run_id is not None for n in nodes)) > leased:  # a run of this sweep's stored
                    leased = begun
                    say_beside(store, said, nodes)
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        try:
            for node in nodes:
                if node.exit is None and not node.died:
                    _stop(ray, store, node)
        except ConnectionError as exc:  # lost as well (Ctrl-C while Ray Client retried it): said as below
            reachable = False
            cut_off(store, nodes, address, exc, log)
        return 130
    except ConnectionError as exc:  # Ray Client's connection to the cluster lost: every node out of reach at once
        reachable = False  # nothing to close: the actors ended with it
        return cut_off(store, nodes, address, exc, log)
    finally:
        lifeline.settle()  # the sweep is over: its cleanup, to Ray's shutdown, is not cut short (`_driver`)
        if reachable:
            _close(ray, nodes)
    own = ended_raylet(raylet) if any(n.died for n in nodes) else None
    for node in nodes:
        if node.raw and log is not None:
            ended = "lost" if node.died else "its actor failed"
            log.write(f"{node.info.where()}, {ended} at {node.lost_at}: Ray said", node.raw.splitlines())
            if node.died and (kept := elsewhere(node.info, address, head)):
                log.write(f"{node.info.where()}: Ray's logs of it, on other machines than this one", kept)
        if node.died:
            if own is None:
                say_lost(store, node, address)
        elif failed(node) and not refused_everywhere(nodes):
            say_failed(node)
    if own is not None:
        say_own_node_ended(store, [n for n in nodes if n.died], address, own)
    return exit_code(nodes)


def say_beside(store: Store, said: set[int], nodes: list[Node]) -> None:
    """Each run another process of this host measures in the store now (another sweep's driver, a local run), said
    once (`said`) where it measures on a machine one of this sweep's `nodes` is (a local run on this host, a Ray
    node's run on its node, its fingerprint's hostname): the two share the CPU, as two local runs do
    (`commands.common.warn_if_measured`). Over ray:// or a remote head the nodes are other machines: nothing to say."""
    hosts = {n.info.host for n in nodes}
    for run_id, holder in measured_here(store).items():
        if holder.pid == os.getpid() or run_id in said:
            continue
        said.add(run_id)
        run = store.run(run_id)
        if (run.fingerprint.get("hostname") if ray_node(run) else holder.host) in hosts:
            print(f"dlperf: warning: run {run_id} of {store.path} is being measured by pid {holder.pid}: the two runs "
                  "share the CPU, and their timings disturb each other", file=sys.stderr, flush=True)  # fmt: skip


def poll(ray, store: Store, node: Node) -> None:
    """What the node's actor answers, stored. A Ctrl-C while it is stored comes once it is (`lifeline.held`), as a
    `dlperf run` measurement's does: raised inside the write (a transaction begun and never ended, a run copied but
    not leased), the interrupted sweep's own writes then failed ("cannot start a transaction within a transaction",
    a traceback) and the node's run was lost. The wait for the answer stays open to it."""
    try:
        answer = ray.get(node.actor.poll.remote(), timeout=120)
    except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as exc:
        node.lost_at, node.raw = time.strftime("%H:%M:%S"), str(exc) or type(exc).__name__
        if created_not(exc):  # its sweep never began there (dlperf not importable, say): its own error, no node lost
            node.exit, node.error = 1, creation_reason(exc)
            return
        timeout = isinstance(exc, ray.exceptions.GetTimeoutError)
        node.died = "it gave no answer for 120 s" if timeout else "its Ray actor stopped answering"
        if node.run_id is not None:
            with lifeline.held():
                store.set_run_status(node.run_id, "interrupted")
        return
    for line in answer["said"]:
        print(f"dlperf: warning: {node.info.describe()}: {line}", file=sys.stderr, flush=True)
    with lifeline.held():
        if answer["rows"] is not None:
            sync(store, node, answer["rows"])
        if answer["exit"] is not None:
            node.exit, node.error = answer["exit"], answer["error"]
            if node.run_id is not None:
                status = store.run(node.run_id).status
                store.set_run_status(node.run_id, status if status != "running" else "interrupted")


def sync(store: Store, node: Node, rows: RunRows) -> None:
    """The node's run written into the driver's store: created (and leased here) on its first rows, then updated."""
    if node.run_id is None:
        origin = Origin(f"{ORIGIN}{node.info.node_id}", rows.run["id"], now())
        with store.transaction():
            run = {**rows.run, "status": "running", "argv": json.dumps(node.argv)}
            node.run_id = store.insert_copy(run, rows.cells, rows.measurements, origin,
                                            rows.profiles, rows.predictions)  # fmt: skip
        store.acquire(node.run_id)
        left = f" (what run {node.continues} left)" if node.continues is not None else ""
        print(f"dlperf: {node.info.describe()}: run {node.run_id}{left}", file=sys.stderr, flush=True)
    store.update_copy(node.run_id, rows)
    status = rows.run.get("status")
    if status not in ("running", "interrupted"):  # a resumed run is interrupted in the node's file until its sweep
        store.set_run_status(node.run_id, status)  # takes it up: it stays leased here, its end said by `poll`


def _stop(ray, store: Store, node: Node) -> None:
    """Ctrl-C: the node's sweep interrupted, what it finished kept."""
    try:
        ray.get(node.actor.stop.remote(), timeout=STOP_GRACE_S + 10)
        poll(ray, store, node)
    except ray.exceptions.RayError:
        pass
    if node.run_id is not None and store.run(node.run_id).status == "running":
        store.set_run_status(node.run_id, "interrupted")


def _close(ray, nodes: list[Node]) -> None:
    try:
        for node in nodes:
            close_actor(ray, node.actor)
    except ConnectionError:  # Ray Client's connection lost as the sweep ended: the actors ended with it
        pass


def close_actor(ray, actor) -> None:
    try:
        ray.get(actor.close.remote(), timeout=STOP_GRACE_S + 10)
    except ray.exceptions.RayError:
        pass
    ray.kill(actor)


def say_lost(store: Store, node: Node, address: str) -> None:
    """A lost node in dlperf's words: which machine, when, what its run keeps and lacks, and how to go on."""
    where = f"{node.info.where()} was lost at {node.lost_at}: {node.died} (its node, network or process went down)"
    if node.run_id is None:
        print(f"dlperf: {where}, before its plan arrived: nothing of it is stored", file=sys.stderr)
        return
    left = unfinished(store, node.run_id)
    planned = len(store.cells(node.run_id)) * int(store.run(node.run_id).spec.get("repeats") or 1)
    kept = len(store.done_repeats(node.run_id))
    print(f"dlperf: {where}. Run {node.run_id} keeps {kept} of its {planned} processes; left to measure: "
          f"{', '.join(left)}. `{ray_resume_command(address, store.path)}` measures them: in this run where its node "
          "lives on, else as a run of a live node of its kind", file=sys.stderr)  # fmt: skip


def failed(node: Node) -> bool:
    """A node's sweep that ended in an error of its own, not in cells that failed (exit 1: its table shows them); an
    actor that never began (Ray's words in `raw`, no node lost) is one, its run resumed in place or not."""
    return node.exit not in (0, None) and (node.run_id is None or node.exit != 1 or bool(node.raw and not node.died))


def say_failed(node: Node) -> None:
    """A node whose sweep ended in an error: its own last line, so a node that could not run (no framework, a
    different dlperf) is not lost silently among the others."""
    stored = "nothing of it is stored" if node.run_id is None else f"run {node.run_id} keeps what it finished"
    reason = node.error.removeprefix("dlperf: error: ") or "no message"
    code = "" if node.raw else f"exit {node.exit}; "  # an actor that never began: no sweep's process, no exit code
    print(f"dlperf: {node.info.describe()}: its sweep failed ({code}{stored}): {reason}", file=sys.stderr)


def refused_everywhere(nodes: list[Node]) -> bool:
    """Every node refused the sweep before it began (the flags, say): `exit_code` says it once."""
    return all(n.exit == 2 and n.run_id is None for n in nodes)


def exit_code(nodes: list[Node]) -> int:
    if refused_everywhere(nodes):  # the flags refused on every node: nothing ran; of a node, not the driver's machine
        said = nodes[0].error.removeprefix("dlperf: error: ").replace("this machine", "that node")
        raise UsageError(f"{nodes[0].info.describe()}{' and every other' * (len(nodes) > 1)} refused it: {said}")
    if any(n.died or n.exit not in (0, None) for n in nodes):
        return 130 if any(n.exit == 130 for n in nodes) and not any(n.died for n in nodes) else 1
    return 0


def run(args, argv: list[str], db: str) -> tuple[int, list[int]]:
    """`dlperf run --ray`: the exit code and the runs it stored, one per node. A sweep given no `--campaign` names
    one (`campaign_name`), so `dlperf table --campaign` shows its nodes side by side."""
    check_flags(args)
    wanted = parse_nodes(args.nodes or "all")
    check_path(db, create=not args.resume)
    if not args.resume and args.campaign is None:
        args.campaign = campaign_name()
        argv = [*argv, "--campaign", args.campaign]
    lifeline.remove_stale_dirs()  # a killed driver's (kill -9: its `finally` never ran), named for its process
    temp_dir = tempfile.mkdtemp(prefix=lifeline.tmp_prefix("ray"))  # a cluster started here keeps its session here
    try:  # the driver in a process of its own, which Ray may end
        sweep = None if args.resume else args.campaign
        raylet = os.path.join(temp_dir, "raylet.pid")  # the driver's raylet, asked after if the driver ends unheard
        return watched(lambda: _driver(args, argv, db, wanted, temp_dir), db, args.ray, sweep, raylet)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


def _driver(args, argv: list[str], db: str, wanted: tuple[str, str] | None, temp_dir: str) -> tuple[int, list[int]]:
    log = RayLog(db)
    with lifeline.settling():  # once `follow` is over, a Ctrl-C waits out the cleanup (Ray's shutdown) and is dropped
        undo = log.divert(import_ray())
        try:
            ray = connect(args.ray, temp_dir)
            raylet = os.path.join(temp_dir, "raylet.pid")  # the raylet of this machine's node, its pid
            note_raylet(ray, raylet)
            return _run(ray, args, argv, db, wanted, log, raylet)
        finally:
            undo()
            log.say()


def _run(ray, args, argv: list[str], db: str, wanted: tuple[str, str] | None, log: RayLog,
         raylet: str | None = None) -> tuple[int, list[int]]:  # fmt: skip
    try:
        listed = ray.nodes()
        chosen = select(listed, wanted)
        head = next((n for n in map(node_info, listed) if n.head), None)  # Ray Client's server runs there
        store = Store.open(db, create=not args.resume)
        nodes: list[Node] = []
        try:
            waiting = 0
            if args.resume:
                nodes, waiting = resume_nodes(ray, store, chosen, argv, args.ray)
            else:
                nodes = [start_node(ray, info, argv) for info in chosen]
            code = follow(ray, store, nodes, args.ray, log, head, raylet)
            code = 1 if waiting and code == 0 else code
            return code, sorted(n.run_id for n in nodes if n.run_id is not None)
        finally:
            try:
                give_back(store)
            finally:
                store.close()
    except ConnectionError as exc:  # Ray Client's connection lost before the nodes began (`follow` says it after)
        raise UsageError(f"--ray {args.ray}: the connection to the cluster was lost before the sweep began "
                         f"({server_reason(exc)})") from None  # fmt: skip
    finally:
        ray.shutdown()


def give_back(store: Store) -> None:
    """The runs still leased to the driver left interrupted (a lost node's run another node went on with, or one
    resumed that Ctrl-C stopped before its node began), each on its own: one that cannot be written (a StoreFault,
    its lease taken over: LeaseHeld) is warned of, and the others are still given back; raised, it left them
    running, skipped the store's close and took the place of the error that ended the sweep."""
    with lifeline.held():
        for run_id in list(store.leases):
            try:
                store.set_run_status(run_id, "interrupted")
            except (StoreFault, LeaseHeld) as exc:
                print(f"dlperf: warning: run {run_id} could not be left interrupted: {exc}", file=sys.stderr)


def campaign_name() -> str:
    """The campaign of a `--ray` sweep given none: ray-YYYYMMDD-HHMMSS, the driver's local time."""
    return time.strftime("ray-%Y%m%d-%H%M%S")


def fleet_runs(store: Store) -> list[RunRecord]:
    """The unfinished runs of Ray sweeps that no later run goes on with (`continuation`)."""
    runs = store.runs()
    continued = {r.env.get(CONTINUES) for r in runs}
    return [r for r in runs if r.status != "complete" and r.id not in continued and node_of(r) is not None]


def node_of(run: RunRecord) -> str | None:
    """The Ray node that measured a run of a `--ray` sweep, in the sweep's store or merged into another (there the
    plain `--resume` sent to `--resume --ray`, which said it held no Ray sweep's run); None for any other run."""
    return ray_node(run)  # a merged store's too: merged from the sweep's store, its origin holds the node's


def resume_nodes(ray, store: Store, chosen: list[NodeInfo], argv: list[str], address: str = "auto"
                 ) -> tuple[list[Node], int]:  # fmt: skip
    """Each unfinished run of a Ray sweep taken up on a live node of its kind, one run to a node; none of its kind is
    a UsageError. A run goes on in itself on its own node (`--ray local`'s is this machine, under a new id: one
    machine was two columns); on another, what it left is measured as that node's run (`continuation`), a measurement
    staying with the machine that made it. The runs left without a free node wait (their count returned)."""
    runs = fleet_runs(store)
    if not runs:
        plain = [r.id for r in store.runs() if r.status != "complete" and node_of(r) is None]
        other = f" ({named('run', plain)}, not a Ray sweep's: `{resume_command(str(store.path))}`)" if plain else ""
        raise UsageError(f"--resume --ray: {store.path} has no unfinished run of a Ray sweep{other}")
    kinds = _kinds(ray, chosen, sorted({f for r in runs for f in r.spec.get("frameworks") or ["torch"]}))
    for run in runs:  # a copy (`dlperf merge`): asked after `_kinds` (seconds), when a driver of its source leases it
        if refused := source_refusal(store, run, str(store.path)):
            raise UsageError(f"--resume --ray: {refused}")
    placed = place(runs, chosen, kinds, measured_by(store))
    for run, info in placed:  # before any run is taken up: one refused stays as it was
        if info is not None and (changes := other_dlperf(run.env, kinds[info.node_id])):
            raise UsageError(f"--resume --ray: run {run.id} was measured by another dlperf than {info.describe()} "
                             f"runs ({'; '.join(changes)}); start a new run instead")  # fmt: skip
    nodes, waiting, kindless = [], [], []
    for run, info in placed:
        if info is None:
            (waiting if of_kind(run, chosen, kinds) else kindless).append(run)
            continue
        if dead := store.acquire(run.id):
            print(f"dlperf: run {run.id} was left running by {dead.describe()}: taken over", file=sys.stderr)
        if info.node_id == node_of(run) or (address == "local" and info.host == run.fingerprint.get("hostname")):
            store.set_run_status(run.id, "running")
            nodes.append(start_node(ray, info, argv, store.check_run(run.id), run.id))
            print(f"dlperf: run {run.id} resumed on {info.describe()}", file=sys.stderr, flush=True)
            continue
        node = start_node(ray, info, argv, continuation(store.check_run(run.id)), continues=run.id)
        node.argv = run.argv  # the sweep's command, as the lost run's
        nodes.append(node)
        print(f"dlperf: run {run.id}'s node is gone: what it left is measured on {info.describe()}, as a run of that "
              "node's own", file=sys.stderr, flush=True)  # fmt: skip
    said_waiting(waiting, kindless, chosen_by(argv), ray_resume_command(address, store.path))
    return nodes, len(waiting) + len(kindless)


def said_waiting(waiting: list[RunRecord], kindless: list[RunRecord], nodes: str, again: str) -> None:
    """The runs left to wait, in a line each way: every node of their kind resumes another run, or no live node is
    of their kind; `nodes`: the --nodes given, which may have left out nodes that would have taken them; `again`:
    the command that takes them up (`ray_resume_command`)."""
    among = f" (of the nodes --nodes {nodes} picks)" if nodes else ""
    for runs, why in ((waiting, f"every live node of {{}} kind{among} resumes another run (one sweep to a node)"),
                      (kindless, f"no live node{among} is of {{}} kind")):  # fmt: skip
        if runs:
            n, ids = len(runs), [r.id for r in runs]
            kind = "; ".join(f"run {r.id}: {machine_label(r.fingerprint, cores=True)}" for r in runs)
            which = f" ({kind})" if runs is kindless else ""  # the machine to add a node of
            print(f"dlperf: {named('run', ids)} {agreeing(n, 'waits', 'wait')}: "
                  f"{why.format(agreeing(n, 'its', 'their'))}{which}; `{again}` takes {agreeing(n, 'it', 'them')} up "
                  "once a node is free", file=sys.stderr)  # fmt: skip


def measured_by(store: Store) -> dict[str, set[str]]:
    """Per campaign, the nodes whose runs are in it (their Ray node ids)."""
    found: dict[str, set[str]] = {}
    for run in store.runs():
        if (node := node_of(run)) is not None:
            found.setdefault(run.spec.get("campaign") or "", set()).add(node)
    return found


def place(runs: list[RunRecord], chosen: list[NodeInfo], kinds: dict[str, dict],
          campaigns: dict[str, set[str]]) -> list[tuple[RunRecord, NodeInfo | None]]:  # fmt: skip
    """Each run's node: of its kind and not given another run; the node that measured it first, then one that
    measured none of its campaign (its column would mix two machines), then any; None when every one is taken, or
    when no live node is of its kind (`of_kind`: it waits, the others resume; a machine retired blocked the whole
    campaign's resume). A UsageError where no run has a node of its kind: nothing would resume."""
    taken, placed, alive = set(), [], {n.node_id for n in chosen}
    if not any(of_kind(run, chosen, kinds) for run in runs):
        run = runs[0]
        raise UsageError(f"--resume --ray: no live node is of the kind that measured run {run.id} "
                         f"({machine_label(run.fingerprint, cores=True)}){' or the others' if len(runs) > 1 else ''}: "
                         "`ray start --address` on such a machine adds one")  # fmt: skip
    for run in sorted(runs, key=lambda r: node_of(r) not in alive):  # own nodes first
        if not (fits := of_kind(run, chosen, kinds)):
            placed.append((run, None))
            continue
        own, others = node_of(run), campaigns.get(run.spec.get("campaign") or "", set())
        free = sorted([n for n in fits if n.node_id not in taken], key=lambda n: (n.node_id != own,
                                                                                  n.node_id in others))  # fmt: skip
        placed.append((run, free[0] if free else None))
        taken.update(n.node_id for n in free[:1])
    return sorted(placed, key=lambda p: p[0].id)


def of_kind(run: RunRecord, chosen: list[NodeInfo], kinds: dict[str, dict]) -> list[NodeInfo]:
    """The live nodes chosen that are the kind of machine that measured `run`."""
    return [n for n in chosen if kinds[n.node_id] is not None and same_kind(kinds[n.node_id], run.fingerprint)]


def _kinds(ray, chosen: list[NodeInfo], frameworks: list[str]) -> dict[str, dict | None]:
    """Each chosen node's fingerprint, asked of a short-lived actor there; None for a node that cannot say it (the
    framework missing there, say): warned, and no run resumes on it."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    found = {}
    for info in chosen:
        actor = ray.remote(num_cpus=0)(NodeSweep).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(info.node_id, soft=False)
        ).remote()  # fmt: skip
        try:
            found[info.node_id] = ray.get(actor.kind.remote(frameworks), timeout=300)
        except ray.exceptions.RayError as exc:  # a timeout included
            found[info.node_id] = None
            why = actor_reason(getattr(exc, "cause", None) or exc)  # a task's error: the node's own exception
            print(f"dlperf: warning: {info.describe()} is passed over: {why}", file=sys.stderr)
        finally:
            close_actor(ray, actor)
    return found
