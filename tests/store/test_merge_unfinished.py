"""`dlperf merge` of an unfinished run: a user merged an interrupted run (3 cells pending), resumed it to the end in its
own file, merged again, and read "already present as run 1: skipped": the copy kept the stale run for good, and the
first merge had copied it without a word."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from conftest import dlperf
from dlperf.store import Store, merge
from dlperf.store.process import ProcessMeasurement
from dlperf.vocab import Status
from report.runs import MACHINE, cell, measured

PLAN = [cell(name) for name in ("fcn-r", "alexnet-r", "resnet-56", "lstm")]


def process(store: Store, run_id: int, index: int) -> None:
    samples = [0.01 * (index + 1)] * 5
    m = ProcessMeasurement(status=Status.OK, samples=samples, duration_s=1.0)
    store.record(run_id, PLAN[index].cell.key, 0, m, measured([samples]))


def interrupted(db) -> None:
    """Run 1: one cell of four measured, then Ctrl-C."""
    store = Store.open(db, create=True)
    run_id = store.create_run({"repeats": 1}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], PLAN)
    process(store, run_id, 0)
    store.set_run_status(run_id, "interrupted")
    store.close()


def resumed(db) -> None:
    """`dlperf run --resume` measuring the three cells left."""
    store = Store.open(db, create=False)
    store.acquire(1)
    store.set_run_status(1, "running")
    for index in (1, 2, 3):
        process(store, 1, index)
    store.set_run_status(1, "complete")
    store.close()


def begun(db, fingerprint: dict = MACHINE, env: dict | None = None) -> Store:
    """Run 1, its first cell of four measured, leased to this process: the store is left open."""
    store = Store.open(db, create=True)
    store.create_run({"repeats": 1}, {"cores": {"cores": 8}} if env is None else env, fingerprint, ["dlperf", "run"],
                     PLAN)  # fmt: skip
    process(store, 1, 0)
    return store


@contextmanager
def measured_in_a_child(begin: Callable[[], object]) -> Iterator[None]:
    """`begin()` in a child process that holds what it began (a run's lease) until it is killed (kill -9) as the
    block ends."""
    ready, go = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            begin()
            os.write(go, b"1")
            signal.pause()
        finally:
            os._exit(0)
    os.read(ready, 1)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def rows(db, table: str) -> list[dict]:
    store = Store.open(db, create=False)
    try:
        return [{k: v for k, v in r.items() if k not in ("run_id", "id", "origin_json")} for r in store.rows(table)]
    finally:
        store.close()


def runs_whole(db) -> list[dict]:
    store = Store.open(db, create=False)
    try:
        return store.rows("runs")
    finally:
        store.close()


def test_an_unfinished_run_is_copied_with_a_warning_and_its_copy_brought_up_to_date_once_resumed(tmp_path):
    src, target = tmp_path / "src.db", tmp_path / "m.db"
    interrupted(src)
    first = dlperf("merge", str(src), db=target)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [f"{src} run 1 -> run 1 (4 cells)"]
    assert first.stderr.strip() == (
        f"dlperf: warning: {src}: run 1 is unfinished (interrupted): 1 of 4 processes done; 3 left, in 3 cells; "
        "copied as it is: "
        "merging this file again once the run is finished brings its copy up to date"
    )

    resumed(src)
    second = dlperf("merge", str(src), db=target)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == [
        f"{src} run 1 already present as run 1: brought up to date (3 more processes, interrupted -> complete)"
    ]
    assert second.stderr == ""
    for table in ("runs", "cells", "measurements"):
        assert rows(target, table) == rows(src, table), table

    third = dlperf("merge", str(src), db=target)
    assert third.stdout.splitlines() == [f"{src} run 1 already present as run 1: skipped"]


def test_a_copy_of_the_file_elsewhere_is_recognized_by_its_processes_and_updated_not_copied_twice(tmp_path):
    """The first merge was of a copy of the file (another path: no origin in common); the resumed original still
    holds every process that copy had, so it is the same run."""
    src, early, target = tmp_path / "src.db", tmp_path / "early.db", tmp_path / "m.db"
    interrupted(src)
    shutil.copy(src, early)
    assert dlperf("merge", str(early), db=target).returncode == 0
    resumed(src)
    said = dlperf("merge", str(src), db=target)
    assert said.stdout.splitlines() == [
        f"{src} run 1 already present as run 1: brought up to date (3 more processes, interrupted -> complete)"
    ]
    assert [r["status"] for r in rows(target, "runs")] == ["complete"]


def test_a_run_being_measured_is_copied_with_a_warning_naming_its_process(tmp_path):
    src, target = tmp_path / "src.db", tmp_path / "m.db"
    store = Store.open(src, create=True)  # this process measures it
    try:
        store.create_run({"repeats": 1}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], PLAN)
        process(store, 1, 0)
        said = dlperf("merge", str(src), db=target)
        holder = store.measured_by(1).describe()
    finally:
        store.close()
    assert said.returncode == 0, said.stderr
    left = "1 of 4 processes done; 3 left, in 3 cells"
    assert f"{src}: run 1 is being measured by {holder}: {left}; copied as it is" in said.stderr
    table = " ".join(dlperf("table", db=target).stdout.split())
    assert f"run 1 is unfinished (running in {src.resolve()} (run 1) when it was copied here)" in table
    assert "merging its file again brings this copy up to date" in table


def test_a_copy_resumed_here_apart_from_its_source_keeps_its_own_measurements_and_says_so(tmp_path):
    """A user merged an interrupted run, resumed the copy in the target and the original in its own file, and merged
    again: "brought up to date (1 more process)", and the target's own measurement of the cell both had measured was
    replaced by the source's, with no word. The copy is kept as it is now, and the merge says why."""
    src, target = tmp_path / "src.db", tmp_path / "m.db"
    interrupted(src)
    assert dlperf("merge", str(src), db=target).returncode == 0
    store = Store.open(target, create=False)  # the copy resumed here: the second cell measured, at its own speed
    samples = [0.5] * 5
    store.record(1, PLAN[1].cell.key, 0, ProcessMeasurement(status=Status.OK, samples=samples), measured([samples]))
    store.close()
    own = rows(target, "measurements")
    resumed(src)
    for _ in range(2):  # and again: the same, nothing copied twice
        said = dlperf("merge", str(src), db=target)
        assert said.returncode == 0, said.stderr
        assert said.stdout.splitlines() == [
            f"{src} run 1 already present as run 1: kept as it is here (1 process measured here only, 3 there only)"
        ]
        assert said.stderr.strip() == (
            f"dlperf: warning: {src} run 1 and its copy here, run 1, were each resumed apart (1 process measured here "
            f"only, 3 there only): the copy keeps its own measurements; the source's run was not copied over them (it "
            f"stays in {src})"
        )
        assert rows(target, "measurements") == own


def test_a_lost_ray_nodes_run_is_said_to_have_gone_on_elsewhere_not_to_finish_later(tmp_path):
    """`dlperf merge lost.db` said of a lost Ray node's run 'merging this file again once the run is finished brings
    its copy up to date': it never finishes, another node's run measured what it left."""
    from dlperf.store.state import CONTINUES

    src, target = tmp_path / "lost.db", tmp_path / "m.db"
    interrupted(src)
    store = Store.open(src, create=False)
    went_on = store.create_run({"repeats": 1}, {"cores": {"cores": 8}, CONTINUES: 1}, MACHINE, ["dlperf", "run"],
                               PLAN[1:])  # fmt: skip
    store.set_run_status(went_on, "complete")
    store.close()
    proc = dlperf("merge", str(src), db=target)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().endswith("copied as it is: its Ray node was lost, and run 2 of the file measured what "
                                        "it left")  # fmt: skip


def test_a_run_whose_process_died_is_stopped_in_its_copy_too(tmp_path):
    """A run killed (kill -9) mid-cell, then merged: the merge said "stopped: its process is gone", and the copy was
    "running when copied" in `list --runs` and the table, through every later merge of it too."""
    from commands.test_run_state import killed_while_measuring

    src, target, again = tmp_path / "src.db", tmp_path / "m.db", tmp_path / "z.db"
    killed_while_measuring(src)
    said = dlperf("merge", str(src), db=target)
    assert "run 1 is unfinished (stopped: its process is gone)" in said.stderr
    assert dlperf("merge", str(target), db=again).returncode == 0  # z.db: the copy's copy
    for db in (target, again):
        [row] = json.loads(dlperf("list", "--runs", "--format", "json", db=db).stdout)
        assert (row["status"], row["state_label"]) == ("stopped", "stopped (its process is gone)"), db
        assert "(stopped: its process is gone)" in " ".join(dlperf("table", db=db).stdout.split())


def test_a_run_copied_while_measured_then_killed_is_stopped_on_the_next_merge(tmp_path):
    """Merged while its process measured it, then that process killed (kill -9) with nothing new stored: the next
    merge said "already present as run 1: skipped", and the copy stayed "running when copied"."""
    src, target = tmp_path / "src.db", tmp_path / "m.db"
    with measured_in_a_child(lambda: begun(src)):
        assert "is being measured by" in dlperf("merge", str(src), db=target).stderr
    again = dlperf("merge", str(src), db=target)
    assert again.stdout.splitlines() == [
        f"{src} run 1 already present as run 1: brought up to date (running -> stopped (its process is gone))"
    ]
    [row] = json.loads(dlperf("list", "--runs", "--format", "json", db=target).stdout)
    assert row["state_label"] == "stopped (its process is gone)"
    assert dlperf("merge", str(src), db=target).stdout.splitlines() == [
        f"{src} run 1 already present as run 1: skipped"
    ]


def test_a_copys_stopped_mark_follows_its_source_both_ways(tmp_path):
    """`mark_stopped` says whether it changed the copy: set once its source's process is gone, cleared once a live
    process measures the source again (merge then says "stopped -> running", not "running -> stopped")."""
    from commands.test_run_state import killed_while_measuring

    src, target = tmp_path / "src.db", tmp_path / "m.db"
    killed_while_measuring(src)
    assert dlperf("merge", str(src), db=target).returncode == 0
    store = Store.open(target, create=False)
    try:
        assert store.run(1).origin.stopped
        assert not store.mark_stopped(1, True)  # as it was: nothing changed
        assert store.mark_stopped(1, False) and not store.run(1).origin.stopped
        assert store.mark_stopped(1, True) and store.run(1).origin.stopped
    finally:
        store.close()


def test_a_stale_copy_of_a_run_its_copy_here_holds_complete_is_skipped_as_further_along(tmp_path):
    """A file copied (cp) while its run measured, merged after the finished file: the merge said "brought up to date
    (running -> stopped (its process is gone))", the finished file's next merge "stopped -> running (measured
    again)", and so on at every merge, with a warning that the run was copied unfinished, though nothing was copied
    and the copy here stayed complete."""
    src, stale, target = tmp_path / "live.db", tmp_path / "stale.db", tmp_path / "m.db"
    pid = os.fork()
    if pid == 0:  # the child measures the run, copied by cp after its first process, to the end; then it is gone
        try:
            store = begun(src)
            shutil.copy(src, stale)
            for index in (1, 2, 3):
                process(store, 1, index)
            store.set_run_status(1, "complete")
            store.close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert dlperf("merge", str(src), db=target).returncode == 0
    before = runs_whole(target)
    for _ in range(2):
        said = dlperf("merge", str(stale), db=target)
        assert said.returncode == 0, said.stderr
        assert said.stdout.splitlines() == [f"{stale} run 1 already present as run 1: skipped: the copy here is "
                                            "further along (complete, 3 more processes)"]  # fmt: skip
        assert said.stderr == ""
        again = dlperf("merge", str(src), db=target)
        assert again.stdout.splitlines() == [f"{src} run 1 already present as run 1: skipped"]
        assert runs_whole(target) == before  # its origin's stopped mark too


def _merged(tmp_path, files, target) -> tuple[list[str], str, int]:
    lines: list[str] = []
    merge.merge(list(map(str, files)), str(target), report=lines.append, warn=lines.append)
    store = Store.open(target, create=False)
    try:
        return (
            [line.replace(f"{tmp_path}/", "") for line in lines],
            store.run(1).status,
            len(store.rows("measurements", 1)),
        )
    finally:
        store.close()


def test_a_stale_cp_beside_a_copy_interrupted_since_is_no_news_and_no_apart(tmp_path):
    """A `cp` made while the run measured ("running", 1 process) merged beside a copy of the same run interrupted
    since (3 processes): its status alone read as news, so every merge warned the two "were each resumed apart"; of
    equal processes, the copy's status flipped (interrupted -> running -> interrupted) on every merge (review)."""

    src, snap, target = tmp_path / "a.db", tmp_path / "snap.db", tmp_path / "m.db"
    with measured_in_a_child(lambda: begun(src)):
        shutil.copy(src, snap)  # 1 process, running
    store = Store.open(src, create=False)  # resumed in its own file: 2 more processes, then Ctrl-C
    store.acquire(1)
    store.set_run_status(1, "running")
    process(store, 1, 1)
    process(store, 1, 2)
    store.set_run_status(1, "interrupted")
    store.close()
    _merged(tmp_path, [src], target)
    for _ in range(2):
        lines, status, processes = _merged(tmp_path, [snap], target)
        assert lines == ["snap.db run 1 already present as run 1: skipped: the copy here is further along (2 more "
                         "processes)"] and (status, processes) == ("interrupted", 3)  # fmt: skip


def test_a_stale_cp_of_as_many_processes_does_not_flip_the_copys_status(tmp_path):

    src, snap, target = tmp_path / "a.db", tmp_path / "snap.db", tmp_path / "m.db"
    with measured_in_a_child(lambda: begun(src)):
        shutil.copy(src, snap)
    store = Store.open(src, create=False)  # its process gone: resumed, then Ctrl-C before another process
    store.acquire(1)
    store.set_run_status(1, "running")
    store.set_run_status(1, "interrupted")
    store.close()
    _merged(tmp_path, [src], target)
    for files in ([snap], [src], [snap, src]):
        lines, status, _ = _merged(tmp_path, files, target)
        assert status == "interrupted" and not [line for line in lines if "->" in line], lines
