"""A worker that could not write its files in its temporary folder ($TMPDIR full, or `ulimit -f`): every cell was
"failed: worker exited with code 1", nothing said of why (its log was empty too), and the sweep went on failing each
the same way. The cause is named (`runner/room.py`), and the sweep stops at the first such cell, the cell left for
`dlperf run --resume`, as a store that refuses a write stops it."""

from __future__ import annotations

import builtins
import errno
import resource
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import require
from dlperf.answers import EnvRequest
from dlperf.protocol import ProbeTask
from dlperf.runner import room
from dlperf.runner.launch import ChildResult, Launched, launch
from dlperf.runner.room import NoRoom, no_room


def limited(monkeypatch, nbytes: int) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda which: (nbytes, resource.RLIM_INFINITY))


def test_a_file_that_reached_the_file_size_limit_is_named(tmp_path, monkeypatch):
    (tmp_path / "task.json").write_text("{}")
    (tmp_path / "events.jsonl").write_bytes(b"x" * 4096)
    limited(monkeypatch, 4096)
    said = no_room(tmp_path)
    assert said.why == "the file-size limit, ulimit -f 4 (4,096 bytes), cut its events.jsonl short: File too large"
    assert said.fix == "raise the limit (ulimit -f unlimited)"
    (tmp_path / "events.jsonl").write_bytes(b"x" * 10)  # the child's own EFBIG, where no file is at the limit
    assert "stopped one of its writes" in no_room(tmp_path, "OSError: [Errno 27] File too large").why
    assert no_room(tmp_path, "ValueError: bad model") is None  # a limit nothing met: its own failure


def test_a_full_temporary_folder_is_named_with_the_variable_that_chose_it(tmp_path, monkeypatch):
    child = tmp_path / "dlperf-1-cell-x"
    child.mkdir()

    def refused(path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(room, "write_probe", refused)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert no_room(child) == NoRoom(
        f"the temporary folder {str(tmp_path)!r} ($TMPDIR), where the worker writes its events and log, is full: No "
        "space left on device", "free space there, or set TMPDIR to a folder with room")  # fmt: skip
    monkeypatch.delenv("TMPDIR")
    assert "($TMPDIR)" not in no_room(child).why
    monkeypatch.setattr(room, "write_probe", lambda path: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    assert no_room(child) is None  # not a want of room: the child's failure is its own


def test_a_folder_with_room_is_none_and_keeps_nothing_of_the_check(tmp_path):
    assert no_room(tmp_path) is None and list(tmp_path.iterdir()) == []


def test_a_failed_child_is_said_to_have_met_a_full_folder(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(room, "write_probe", lambda path: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
    launched = launch(ProbeTask("nosuch", EnvRequest()), sys.executable, 1, 60)  # a child that exits 1
    assert launched.child.crashed_reason == (
        f"worker exited with code 1 (the temporary folder {str(tmp_path)!r}, where the worker writes its events and "
        "log, is full: No space)"
    )
    assert list(tmp_path.iterdir()) == []
    assert ChildResult(1, False, 1.0, "").crashed_reason == "worker exited with code 1"  # no such cause: as before


def test_the_sweep_stops_at_the_first_cell_whose_worker_had_no_room(tmp_path, monkeypatch, capsys):
    require("torch")
    from dlperf.cli import main
    from dlperf.runner import sweep
    from dlperf.store import Store

    launched = []
    full = NoRoom("the temporary folder '/t', where the worker writes its events and log, is full: No space left on "
                  "device", "free space there, or set TMPDIR to a folder with room")  # fmt: skip

    def failing(*args, **kwargs):
        launched.append(args[0])
        return Launched(ChildResult(1, False, 0.1, "", no_room=full), {0: []}, "")

    monkeypatch.setattr(sweep, "launch", failing)
    db = tmp_path / "t.db"
    argv = ["run", "--workloads", "tiny-fcn-r", "--threads", "1,2", "--no-predict", "--no-loss-check", "--db", str(db)]
    assert main(argv) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("dlperf: error:")]
    assert line == (
        f"dlperf: error: tiny-fcn-r torch cpu:1 fp32 not measured: worker exited with code 1 ({full.why}); every "
        "cell's worker would fail alike, so the sweep stopped: free space there, or set TMPDIR to a folder with "
        f"room, then `dlperf run --resume --db {db}` measures the cells left"
    )
    assert len(launched) == 1  # not the second cell: it would have failed alike
    store = Store.open(db, create=False)
    try:
        assert store.run(1).status == "interrupted" and {c.status.value for c in store.cells(1)} == {"pending"}
    finally:
        store.close()


def failing(number: int, text: str):
    def fail(*args, **kwargs):
        raise OSError(number, text)

    return fail


refused = failing(errno.ENOSPC, "No space left on device")


def filled(folder: str) -> str:
    """What a write refused in the full temporary folder `folder` says of it ($TMPDIR named where it chose it)."""
    return (f"the temporary folder {folder!r}{room.named_by(Path(folder))}, where each process's task, events and log "
            "are written, is full: No space left on device")  # fmt: skip


def test_a_task_file_refused_after_the_sweep_began_stops_it_in_one_line(tmp_path, monkeypatch, capsys):
    """$TMPDIR filled up between the run's start and a cell's task file: the write of task.json was a traceback
    (OSError: [Errno 28]), exit 1. It is now the line a worker that could not write gets, the run left to --resume."""
    require("torch")
    from dlperf.cli import main
    from dlperf.runner import launch as launching
    from dlperf.store import Store

    written, tried = launching.write_task, []

    def full_for_cells(task, path):  # the planning probe's task still fits
        if task.KIND == "cell":
            tried.append(task.cell.key)
            refused()
        written(task, path)

    monkeypatch.setattr(launching, "write_task", full_for_cells)
    db = tmp_path / "t.db"
    argv = ["run", "--workloads", "tiny-fcn-r", "--threads", "1,2", "--no-predict", "--no-loss-check", "--db", str(db)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [x for x in err.splitlines() if x.startswith("dlperf: error:")]
    where = filled(tempfile.gettempdir())
    assert line == (
        f"dlperf: error: tiny-fcn-r torch cpu:1 fp32 not measured: dlperf could not write the task of a cell process "
        f"({where}); every cell's worker would fail alike, so the sweep stopped: free space there, or set TMPDIR to a "
        f"folder with room, then `dlperf run --resume --db {db}` measures the cells left"
    )
    assert len(tried) == 1  # not the second cell
    store = Store.open(db, create=False)
    try:
        assert store.run(1).status == "interrupted" and {c.status.value for c in store.cells(1)} == {"pending"}
    finally:
        store.close()


def test_each_write_of_dlperfs_own_for_a_child_is_refused_in_one_line(tmp_path, monkeypatch):
    """The child's folder, its task and its log files: each refused for want of room is `Unwritten` (one line, exit
    2 where no sweep says more: a planning probe's), naming $TMPDIR where it chose the folder; the file-size limit
    too; any other error stays what it was."""
    from dlperf.runner import launch as launching

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # chosen again, from $TMPDIR
    probe = ProbeTask("torch", EnvRequest())
    where = filled(str(tmp_path))
    assert "($TMPDIR)" in where
    for name, target, what in ((tempfile, "TemporaryDirectory", "make the folder"), (launching, "write_task",
                                "write the task"), (builtins, "open", "create the log files")):  # fmt: skip
        with monkeypatch.context() as full:
            full.setattr(name, target, refused if target != "open" else refusing_logs(open))
            with pytest.raises(room.Unwritten) as caught:
                launch(probe, sys.executable, 1, 60)
        assert str(caught.value) == (f"dlperf could not {what} of a probe process ({where}): free space there, or "
                                     "set TMPDIR to a folder with room")  # fmt: skip
    assert list(tmp_path.iterdir()) == []  # the folder made before the refusal is gone with it
    limited(monkeypatch, 4096)
    said = r"task of a probe process \(the file-size limit, ulimit -f 4 \(4,096 bytes\), stopped it: File too large\)"
    with monkeypatch.context() as full:
        full.setattr(launching, "write_task", failing(errno.EFBIG, "File too large"))
        with pytest.raises(room.Unwritten, match=said):
            launch(probe, sys.executable, 1, 60)
    monkeypatch.setattr(launching, "write_task", failing(errno.EIO, "I/O error"))
    with pytest.raises(OSError, match="I/O error"):
        launch(probe, sys.executable, 1, 60)


def refusing_logs(opened):
    """`open`, save for a child's log files: refused for want of room."""
    return lambda path, *args, **kwargs: refused() if str(path).endswith(".log") else opened(path, *args, **kwargs)


def test_a_full_disk_while_the_child_runs_is_no_full_tmpdir(tmp_path, monkeypatch):
    """A write refused while the child ran (a progress line to a full disk, say) was said 'dlperf could not write the
    log of a probe process (the temporary folder ... is full)': the whole run was taken for the log files' opening."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(OSError, match="No space left on device") as caught:
        launch(ProbeTask("torch", EnvRequest()), sys.executable, 1, 60, poll=refused)
    assert not isinstance(caught.value, room.Unwritten)


def test_a_warm_parent_without_room_for_its_folder_leaves_its_cells_cold(monkeypatch):
    """Its folder made as it starts (a cell's launch may start it): refused, it was a traceback; now it never starts,
    saying why, as one that cannot start does, and the cell's own launch says the rest (`Unwritten`)."""
    import os

    from dlperf.runner import warm

    monkeypatch.setattr(tempfile, "mkdtemp", refused)
    parent = warm.WarmParent(sys.executable, "torch", warm.env_key(os.environ))
    assert parent.serving(timeout=1) == "the warm parent could not start: [Errno 28] No space left on device"
    parent.close()
