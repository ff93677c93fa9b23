"""`dlperf run --resume` of a run `dlperf merge` copied in while its source file's process still measured it: the
resume (a dry run too) was accepted, and would have measured the same cells as the source at the same time, each
timing the other's load. Refused now, naming the source file and the merge that brings the copy up to date; where
no process measures it there, it is resumed here apart from it, and said so. Stores written through the Store API."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from conftest import dlperf, one_line_error
from dlperf import api
from dlperf.errors import UsageError
from dlperf.store import Store, merge
from store.test_merge_unfinished import PLAN, begun, measured_in_a_child, process, resumed

HERE = {}  # a machine that records nothing: any machine, this one too (`envinfo.machine_diff`)


def the_copy(db) -> object:
    store = Store.open(db, create=False)
    try:
        return store.run(1)
    finally:
        store.close()


class Accepted(Exception):
    """The run was accepted: `--resume` went on to plan what is left (`Session.resume`)."""


@pytest.fixture
def accepted(monkeypatch):
    """The run's spec and this machine taken as they are (`api._resumable`); planning what is left stops there."""

    def planned(store, run_id, spec, cores):
        raise Accepted(run_id)

    monkeypatch.setattr(api, "_resumable", lambda run: (SimpleNamespace(profile=False), {"cores": {"cores": 1}}))
    monkeypatch.setattr(api.Session, "resume", planned)


def test_a_copy_whose_source_is_measured_still_is_refused_in_one_line(tmp_path, accepted):
    src, target = tmp_path / "live.db", tmp_path / "m.db"
    store = begun(src, HERE, {})
    try:
        merge.merge([str(src)], str(target))
        holder = store.measured_by(1).describe()
        for dry_run in (True, False):
            with pytest.raises(UsageError) as refused:
                api.resume(str(target), dry_run=dry_run)
            assert str(refused.value) == (
                f"resume: run 1 of {target} was copied from {src}, where {holder} is measuring it still: resumed "
                "here, the two would time each other's load; merging it again once the run is finished brings the "
                f"copy up to date (`dlperf merge {src} --db {target}`)"
            )
        said = dlperf("run", "--resume", "--dry-run", db=target)
        one_line_error(said, f"--resume: run 1 of {target} was copied from {src}, where {holder} is measuring it")
    finally:
        store.close()


def test_a_copy_whose_source_finished_is_refused_and_a_merge_named(tmp_path, accepted):
    src, target = tmp_path / "live.db", tmp_path / "m.db"
    store = begun(src, HERE, {})
    try:
        merge.merge([str(src)], str(target))
        for index in (1, 2, 3):
            process(store, 1, index)
        store.set_run_status(1, "complete")
    finally:
        store.close()
    with pytest.raises(UsageError, match=f"was copied from {src}, where it is complete: merging it again brings"):
        api.resume(str(target), dry_run=True)


def test_a_copy_whose_sources_process_is_gone_is_resumed_apart_and_said_so(tmp_path, accepted):
    src, target = tmp_path / "live.db", tmp_path / "m.db"
    with measured_in_a_child(lambda: begun(src, HERE, {})):
        merge.merge([str(src)], str(target))
        with pytest.raises(UsageError, match="is measuring it still"):
            api.resume(str(target), dry_run=True)
    said: list[str] = []
    with pytest.raises(Accepted):
        api.resume(str(target), dry_run=True, warn=said.append)
    assert said == [
        f"run 1 was copied from {src} (its run 1), where no process measures it now: it is resumed here apart from "
        "it, and a later merge of that file keeps this copy's own measurements"
    ]
    os.remove(src)  # its file gone: nothing measures it there either
    assert merge.at_source(the_copy(target)) is None


def test_a_run_measured_here_is_resumed_without_a_word(tmp_path, accepted):
    db = tmp_path / "here.db"
    begun(db, HERE, {}).close()
    said: list[str] = []
    with pytest.raises(Accepted):
        api.resume(str(db), dry_run=True, warn=said.append)
    assert said == []


def test_a_cp_of_a_file_being_measured_is_not_said_to_be_measured_by_its_process(tmp_path, accepted):
    """`cp live.db copy.db` while a run measured it: the copy holds the lease row of the process measuring live.db,
    and `dlperf list --runs` and the table of the copy said "running (pid N)", measured by a process that writes
    the other file. The copy is "running when copied" now; its --resume is refused while that process lives, saying
    why."""
    import shutil

    from dlperf.store import lease
    from dlperf.store.state import run_state

    src, copy = tmp_path / "live.db", tmp_path / "copy.db"
    with measured_in_a_child(lambda: begun(src, HERE, {})):
        shutil.copy(src, copy)
        store = Store.open(src, create=False)
        try:
            holder = store.measured_by(1)
        finally:
            store.close()
        store = Store.open(copy, create=False)
        try:
            assert holder is not None and store.measured_by(1) is None  # its lease names the process measuring src
            state = run_state(store, store.run(1))
            assert (state.state, state.label, state.holder) == ("copied", "running when copied", None)
            assert store.measured_by(1, copied=True) == holder
            assert state.summary().startswith("run 1 is unfinished (running in the file this one was copied from, "
                                              "whose process measures it still): 1 of 4 processes done")  # fmt: skip
            with pytest.raises(lease.LeaseHeld) as refused:
                store.acquire(1)
        finally:
            store.close()
        said = (f"run 1 is being measured by {holder.describe()} since {holder.since} in the file this one was "
                "copied from, not in this one: resumed here, the two would time each other's load; wait for it to "
                "end")  # fmt: skip
        assert str(refused.value) == said
        with pytest.raises(lease.LeaseHeld, match="in the file this one was copied from, not in this one"):
            api.resume(str(copy), dry_run=True)
        [row] = json.loads(dlperf("list", "--runs", "--format", "json", db=copy).stdout)
        assert (row["state_label"], row["measured_by"]) == ("running when copied", None)
    with pytest.raises(Accepted):  # its process gone: the copy is stopped, and resumed
        api.resume(str(copy), dry_run=True)


def test_a_cp_of_a_file_being_measured_then_merged_is_refused_too(tmp_path, accepted):
    """`cp live.db snap.db; dlperf merge snap.db`: snap.db's lease names the process measuring live.db, which holds
    snap.db not open; read as no process at the source, --resume was accepted "apart" while it measured the cells."""
    import shutil

    src, snap, target = tmp_path / "live.db", tmp_path / "snap.db", tmp_path / "m.db"
    with measured_in_a_child(lambda: begun(src, HERE, {})):
        shutil.copy(src, snap)
        merge.merge([str(snap)], str(target))
        said: list[str] = []
        for dry_run in (True, False):
            with pytest.raises(UsageError, match=r"is measuring it still: resumed here, the two would time"):
                api.resume(str(target), dry_run=dry_run, warn=said.append)
        assert not said, said


def test_a_copy_resumed_apart_is_not_refused_for_good_once_its_source_finished(tmp_path, accepted):
    """A copy resumed here (a process of its own), its source then finished in its own file: --resume named "merging
    it again brings the copy up to date", a merge that keeps a copy resumed apart as it is; refused for good."""
    from dlperf.store.process import ProcessMeasurement
    from dlperf.vocab import Status
    from report.runs import measured

    src, target = tmp_path / "a.db", tmp_path / "m.db"
    begun(src, HERE, {}).close()  # its first cell measured, then its process ended
    merge.merge([str(src)], str(target))
    store = Store.open(target, create=False)  # resumed here, apart: one process of its own, then interrupted
    store.acquire(1)
    samples = [0.5] * 5
    store.record(1, PLAN[1].cell.key, 0, ProcessMeasurement(status=Status.OK, samples=samples, duration_s=1.0),
                 measured([samples]))  # fmt: skip
    store.set_run_status(1, "interrupted")
    store.close()
    resumed(src)  # the source finished in its own file
    said: list[str] = []
    with pytest.raises(Accepted):
        api.resume(str(target), dry_run=True, warn=said.append)
    assert said and "it is resumed here apart from it" in said[0], said


def test_a_ray_nodes_own_copy_of_the_run_it_resumes_is_resumed_without_a_word(tmp_path, accepted):
    """Every `--resume --ray` printed per node 'warning: node f44772da (vm): run 1 was copied from ray driver (its run
    2), where no process measures it now: it is resumed here apart from it, ...': the node's own file, which the sweep
    seeds with the run (`NodeSweep._take_over`), is no copy the user made."""
    from dlperf.store.records import Origin
    from dlperf.store.state import RAY_DRIVER

    src, node = tmp_path / "driver.db", tmp_path / "node.db"
    begun(src, HERE, {}).close()
    store, target = Store.open(src, create=False), Store.open(node, create=True)
    try:
        rows = store.check_run(1)
        with target.transaction():
            target.insert_copy(rows.run, rows.cells, rows.measurements, Origin(RAY_DRIVER, 2, "2026-12-07T12:00:00"))
    finally:
        store.close()
        target.close()
    said: list[str] = []
    with pytest.raises(Accepted):
        api.resume(str(node), dry_run=True, warn=said.append)
    assert said == []
