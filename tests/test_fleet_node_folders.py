"""A node's sweep's folder an older dlperf left (dlperf-ray-XXXXXXXX, no lock file, fleet_node.remove_stale): removed
once idle for a day and used by no process, never another user's, a driver's, or one in use."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from dlperf import fleet_node

DAY = 24 * 3600


def older_folder(root, name="dlperf-ray-ab12cd_3", files=("node.db", "out", "err"), age_s=2 * DAY):
    """A node sweep's folder as dlperf before 67e3028 left it (no lock file), last changed `age_s` ago."""
    path = root / name
    path.mkdir()
    for file in files:
        (path / file).write_bytes(b"x")
    then = time.time() - age_s
    for entry in [*path.iterdir(), path]:
        os.utime(entry, (then, then))
    return path


def test_an_older_dlperfs_node_folder_is_removed_once_idle_for_a_day(tmp_path):
    """Folders an older dlperf left on a node (dlperf-ray-XXXXXXXX, no lock) stayed for good; one of this user's,
    with a node sweep's files only, idle for a day and used by no process, is removed. Not a driver's folder (its
    own files, or none), not one changed within the day."""
    stale = older_folder(tmp_path)
    recent = older_folder(tmp_path, "dlperf-ray-recent01", age_s=3600)
    driver = older_folder(tmp_path, "dlperf-ray-driver01", files=("raylet.pid",))
    empty = older_folder(tmp_path, "dlperf-ray-empty001", files=())
    other = older_folder(tmp_path, "something-ab12cd_3")
    assert fleet_node.remove_stale(str(tmp_path)) == [str(stale)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (recent, driver, empty, other))


def test_an_older_folder_in_use_or_another_users_is_never_removed(tmp_path, monkeypatch):
    """A running older sweep holds its out and err files and names its store in its command line; a live process
    working in the folder, or one of another user, keeps it too, however old its files."""
    held = older_folder(tmp_path, "dlperf-ray-heldfile")
    named = older_folder(tmp_path, "dlperf-ray-namedcmd")
    with open(held / "err", "ab"):
        sweep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--db", str(named / "node.db")])
        try:
            # Popen can return before /proc shows the new command line (seen under load): as a sweep long under way
            cmdline, deadline = Path(f"/proc/{sweep.pid}/cmdline"), time.monotonic() + 30
            while str(named).encode() not in cmdline.read_bytes() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert fleet_node.remove_stale(str(tmp_path)) == []
        finally:
            sweep.kill()
            sweep.wait()
    link = tmp_path / "dlperf-ray-symlink1"
    link.symlink_to(held)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(held).st_uid + 1)
    assert fleet_node.remove_stale(str(tmp_path)) == []  # another user's (the test's uid changed)
    monkeypatch.undo()
    assert sorted(fleet_node.remove_stale(str(tmp_path))) == [str(held), str(named)]  # the link is no folder
    assert [p.name for p in tmp_path.iterdir()] == [link.name]
